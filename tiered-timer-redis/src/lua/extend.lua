-- Renews a lease: it now runs until `lease` ms after Redis' now (which
-- may be sooner than before, if `lease` is shorter). ARGV: id, token,
-- lease ms. Returns the new expiry (ms, Redis' clock), or 0 if the lease
-- was lost (nothing changed).
local expiry = now + tonumber(ARGV[3])
redis.call('ZADD', K_LEASED, string.format('%d', expiry), id)
return expiry
