-- Defines `revive(id)`: moves a dead letter back to the waiting jobs, due
-- now, attempts reset and last error cleared (its history and creation
-- time kept); `false` if it was not dead.
local function revive(id)
  if redis.call('ZREM', K_DEAD, id) == 0 then return false end
  redis.call('HDEL', K_JOB, L(id), E(id))
  redis.call('ZADD', K_TIMELINE, fmt(now), id)
  return true
end

-- Wakes the chain for revived jobs (due now).
local function arm_now()
  local m = arm_event(redis.call('HGET', K_JOB, 'm'), now)
  if m then redis.call('HSET', K_JOB, 'm', m) end
end
