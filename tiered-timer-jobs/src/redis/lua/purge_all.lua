-- Deletes up to `batch` dead letters for good, oldest deaths first.
-- ARGV: batch. Returns how many.
local batch = tonumber(ARGV[1])
local ids = redis.call('ZRANGE', K_DEAD, 0, batch - 1)
if #ids == 0 then return 0 end
local fields = {}
for _, id in ipairs(ids) do
  fields[#fields + 1] = P(id)
  fields[#fields + 1] = L(id)
  fields[#fields + 1] = E(id)
  fields[#fields + 1] = H(id)
  fields[#fields + 1] = C(id)
end
redis.call('ZREM', K_DEAD, unpack(ids))
redis.call('HDEL', K_JOB, unpack(fields))
return #ids
