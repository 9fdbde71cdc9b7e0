-- Burying a job (after prelude.lua, with the time).

-- Moves a job (waiting or leased) to the dead letters with `attempts`,
-- keeping its payload, and records `reason` as its last error.
local function bury(id, attempts, reason)
  redis.call('ZREM', K_TIMELINE, id)
  redis.call('ZADD', K_DEAD, fmt(now), id)
  local fields = {L(id), fmt(attempts)}
  if reason then
    fields[3] = E(id)
    fields[4] = reason
  end
  redis.call('HSET', K_JOB, unpack(fields))
end

-- Why a job out of attempts died: `what`, and the last error a worker
-- gave for it, if any.
local function out_of_attempts(id, what)
  local last = redis.call('HGET', K_JOB, E(id))
  if last then return what .. ' (last error: ' .. last .. ')' end
  return what
end
