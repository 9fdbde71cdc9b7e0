-- One job, whatever its state (after the shared prelude: `now`, K_*).
-- ARGV: id.
-- Returns {now} if the id is not waiting, leased or dead; else {now,
-- state ('waiting', 'leased' or 'dead'), score (due time, lease expiry or
-- time of death, ms), attempts, deadline (ms, -1 if none), payload, last
-- error or nil, created (ms, -1 if not recorded), the running attempt's
-- claim time (ms, -1 if none or not recorded) and holder or nil, ended
-- attempts (the `h` field) or nil}.
local id = ARGV[1]
local state, score = 'waiting', redis.call('ZSCORE', K_TIMELINE, id)
if score and tonumber(score) >= LEASED then
  state, score = 'leased', tonumber(score) - LEASED
end
if not score then
  state, score = 'dead', redis.call('ZSCORE', K_DEAD, id)
end
if not score then return {now} end
local fields = redis.call('HMGET', K_JOB, L(id), P(id), E(id), C(id), H(id))
local attempts, _, deadline, claimed, holder = parse_lease(fields[1])
return {
  now,
  state,
  tonumber(score),
  attempts,
  deadline or -1,
  fields[2] or '',
  fields[3],
  tonumber(fields[4]) or -1,
  claimed or -1,
  holder or false,
  fields[5],
}
