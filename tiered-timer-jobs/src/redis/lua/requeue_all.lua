-- Revives up to `batch` dead letters, oldest deaths first (after
-- revive.lua). ARGV: batch. Returns how many; wakes the chain if any.
local batch = tonumber(ARGV[1])
local ids = redis.call('ZRANGE', K_DEAD, 0, batch - 1)
for _, id in ipairs(ids) do revive(id) end
if #ids > 0 then arm_now() end
return #ids
