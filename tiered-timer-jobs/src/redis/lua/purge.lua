-- Deletes a dead letter for good. ARGV: id. Returns 1, or 0 if it was not
-- dead (nothing changed).
local id = ARGV[1]
if redis.call('ZREM', K_DEAD, id) == 0 then return 0 end
redis.call('HDEL', K_JOB, P(id), L(id), E(id), H(id), C(id))
return 1
