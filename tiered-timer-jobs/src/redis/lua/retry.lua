-- Gives a job back to be delivered again after a delay, or buries it if
-- it is out of attempts (after fence.lua). ARGV: id, token, delay ms, max
-- attempts. Returns 1 (rescheduled), 2 (buried) or 0 (lease lost,
-- nothing changed).
local delay, max_attempts = tonumber(ARGV[3]), tonumber(ARGV[4])
if attempts >= max_attempts then
  local why = out_of_attempts(id, string.format('retried on its last attempt (%d of %d)', attempts, max_attempts))
  bury(id, attempts, why, ended_attempt(history, attempts, claimed, holder, 'b', why))
  return 2
end
reschedule(id, attempts, delay, with_history({}, id, ended_attempt(history, attempts, claimed, holder, 'r')))
return 1
