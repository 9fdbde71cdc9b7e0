-- A held job failed (after `FENCE`]): records the reason as its last
-- error, then either reschedules it after a delay or, when asked to
-- (`b`) or out of attempts, buries it.
--
-- ARGV: id, token, action (`r`: retry, `b`: bury), delay ms, max
-- attempts, channel, reason. Returns 1 (rescheduled), 2 (buried) or 0
-- (lease lost, nothing changed).
local action, delay, max_attempts = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local channel, reason = ARGV[6], ARGV[7]
local attempt = tonumber(redis.call('HGET', K_ATTEMPT, id) or '0')
if action == 'b' or attempt >= max_attempts then
  bury(id, reason)
  return 2
end
redis.call('HSET', K_ERROR, id, reason)
reschedule(id, delay, channel)
return 1
