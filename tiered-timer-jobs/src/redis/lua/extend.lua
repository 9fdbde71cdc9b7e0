-- Renews a lease (after fence.lua): it now runs until `lease` ms after
-- Redis' now (which may be sooner than before, if `lease` is shorter).
-- ARGV: id, token, lease ms. Returns the new expiry (ms, Redis' clock),
-- or 0 if the lease was lost (nothing changed).
local new_expiry = now + tonumber(ARGV[3])
redis.call('ZADD', K_TIMELINE, fmt(LEASED + new_expiry), id)
local m = arm_event(redis.call('HGET', K_JOB, 'm'), new_expiry, true)
if m then redis.call('HSET', K_JOB, 'm', m) end
return new_expiry
