-- Rescheduling a held job (after chain.lua).

-- Ends a held job's lease and makes it due `delay` ms after now (rounded
-- up, so never early) with `attempts` kept, plus `extra` fields; wakes the
-- chain if it is now the earliest event.
local function reschedule(id, attempts, delay, extra)
  local due = math.floor((now_us + 999) / 1000) + delay
  redis.call('ZADD', K_TIMELINE, fmt(due), id)
  local fields = {L(id), fmt(attempts)}
  for _, field in ipairs(extra or {}) do fields[#fields + 1] = field end
  local m = arm_event(redis.call('HGET', K_JOB, 'm'), due)
  if m then
    fields[#fields + 1] = 'm'
    fields[#fields + 1] = m
  end
  redis.call('HSET', K_JOB, unpack(fields))
end
