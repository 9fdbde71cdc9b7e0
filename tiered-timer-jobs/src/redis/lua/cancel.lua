-- Cancels a waiting job. ARGV: id. Returns 1 if it was waiting and is now
-- gone, 0 otherwise (leased, dead, or unknown: nothing changed). (A
-- baton for it finds nothing and passes the chain on.)
local id = ARGV[1]
local score = redis.call('ZSCORE', K_TIMELINE, id)
if not score or tonumber(score) >= LEASED then return 0 end
-- A recurrence's waiting occurrence is not cancelled (its chain would
-- stop): pause or remove the recurrence instead.
local name = string.match(id, '^(.+)@%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%d[%.%d]*Z$')
if name then
  local state = redis.call('HGET', KEYS[6], 's' .. name)
  local pending = state and string.match(state, '^%d+ %d+:(%S+) ')
  if pending and name .. '@' .. pending == id then return 0 end
end
redis.call('ZREM', K_TIMELINE, id)
redis.call('HDEL', K_JOB, P(id), L(id), E(id), H(id), C(id))
return 1
