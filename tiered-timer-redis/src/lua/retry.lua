-- Gives a job back to be delivered again after a delay, or buries it if
-- it is out of attempts. ARGV: id, token, delay ms, max attempts,
-- channel. Returns 1 (rescheduled), 2 (buried) or 0 (lease lost,
-- nothing changed).
local delay, max_attempts, channel = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
local attempt = tonumber(redis.call('HGET', K_ATTEMPT, id) or '0')
if attempt >= max_attempts then
  bury(id, out_of_attempts(id, string.format('retried on its last attempt (%d of %d)', attempt, max_attempts)))
  return 2
end
reschedule(id, delay, channel)
return 1
