-- Cancels a waiting job. ARGV: id. Returns 1 if it was waiting and is now
-- gone, 0 otherwise (leased, dead, or unknown: nothing changed). (A
-- baton for it finds nothing and passes the chain on.)
local id = ARGV[1]
local score = redis.call('ZSCORE', K_TIMELINE, id)
if not score or tonumber(score) >= LEASED then return 0 end
redis.call('ZREM', K_TIMELINE, id)
redis.call('HDEL', K_JOB, P(id), L(id), E(id), H(id), C(id))
return 1
