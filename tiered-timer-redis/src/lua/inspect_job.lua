-- One job, whatever its state (after the shared prelude: `now`, K_*).
-- ARGV: id.
-- Returns {now} if the id is not waiting, leased or dead; else {now,
-- state ('waiting', 'leased' or 'dead'), score (due time, lease expiry or
-- time of death, ms), attempts, deadline (ms, -1 if none), payload, last
-- error or nil}.
local id = ARGV[1]
local state, score = 'waiting', redis.call('ZSCORE', K_DUE, id)
if not score then
  state, score = 'leased', redis.call('ZSCORE', K_LEASED, id)
end
if not score then
  state, score = 'dead', redis.call('ZSCORE', K_DEAD, id)
end
if not score then return {now} end
return {
  now,
  state,
  tonumber(score),
  tonumber(redis.call('HGET', K_ATTEMPT, id) or '0'),
  tonumber(redis.call('HGET', K_DEADLINE, id) or '-1'),
  redis.call('HGET', K_PAYLOAD, id) or '',
  redis.call('HGET', K_ERROR, id),
}
