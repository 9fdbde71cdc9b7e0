-- Burying a job (after prelude.lua, history.lua and throughput.lua,
-- with the time).

-- Moves a leased job to the dead letters with `attempts`, keeping its
-- payload, records `reason` as its last error and `history` (its `h`
-- field with the buried attempt, or nil), and counts the attempt failed.
local function bury(id, attempts, reason, history)
  redis.call('ZREM', K_TIMELINE, id)
  redis.call('ZADD', K_DEAD, fmt(now), id)
  local fields = {L(id), fmt(attempts)}
  if reason then
    fields[#fields + 1] = E(id)
    fields[#fields + 1] = reason
  end
  if history then
    fields[#fields + 1] = H(id)
    fields[#fields + 1] = history
  end
  redis.call('HSET', K_JOB, unpack(fields))
  tally('f', 1)
end

-- Why a job out of attempts died: `what`, and the last error a worker
-- gave for it, if any.
local function out_of_attempts(id, what)
  local last = redis.call('HGET', K_JOB, E(id))
  if last then return what .. ' (last error: ' .. last .. ')' end
  return what
end
