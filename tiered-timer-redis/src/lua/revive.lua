-- Defines `revive(id)`: moves a dead letter back to the waiting jobs, due
-- now, attempts reset and last error cleared; `false` if it was not dead.
local function revive(id)
  if redis.call('ZREM', K_DEAD, id) == 0 then return false end
  redis.call('HDEL', K_ATTEMPT, id)
  redis.call('HDEL', K_ERROR, id)
  redis.call('HDEL', K_DEADLINE, id)
  redis.call('ZADD', K_DUE, string.format('%d', now), id)
  return true
end
