-- A held job failed (after fence.lua): records the reason as its last
-- error, then either reschedules it after a delay or, when asked to (`b`)
-- or out of attempts, buries it.
--
-- ARGV: id, token, action (`r`: retry, `b`: bury), delay ms, max
-- attempts, reason. Returns 1 (rescheduled), 2 (buried) or 0 (lease lost,
-- nothing changed).
local action, delay, max_attempts, reason = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
if action == 'b' or attempts >= max_attempts then
  bury(id, attempts, reason, ended_attempt(history, attempts, claimed, holder, 'b', reason))
  return 2
end
reschedule(id, attempts, delay, with_history({E(id), reason}, id, ended_attempt(history, attempts, claimed, holder, 'f', reason)))
tally('f', 1)
return 1
