-- Acks a job: removes it for good (its history with it), if this
-- delivery still holds it (its token: nobody has claimed it since), and
-- counts it processed in this minute (after throughput.lua). The caller
-- refuses an ack itself once the lease ran out by its own estimate (never
-- later than Redis' expiry), so the clock is read for the count only.
--
-- ARGV: id, token. Returns 1, or 0 if the lease was lost (nothing
-- changed).
local id, token = ARGV[1], ARGV[2]
local _, held = parse_lease(redis.call('HGET', K_JOB, L(id)))
if held ~= token then return 0 end
redis.call('ZREM', K_TIMELINE, id)
redis.call('HDEL', K_JOB, P(id), L(id), E(id), H(id), C(id))
tally('p', 1)
return 1
