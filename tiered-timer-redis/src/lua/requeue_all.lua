-- Revives up to `batch` dead letters (oldest deaths first). ARGV:
-- channel, batch. Returns how many; wakes waiters if any.
local channel, batch = ARGV[1], tonumber(ARGV[2])
local ids = redis.call('ZRANGE', K_DEAD, 0, batch - 1)
for _, id in ipairs(ids) do revive(id) end
if #ids > 0 then redis.call('PUBLISH', channel, '0') end
return #ids
