-- Deletes up to `batch` dead letters for good (oldest deaths first).
-- ARGV: batch. Returns how many.
local batch = tonumber(ARGV[1])
local ids = redis.call('ZRANGE', K_DEAD, 0, batch - 1)
for _, id in ipairs(ids) do
  redis.call('ZREM', K_DEAD, id)
  forget(id)
end
return #ids
