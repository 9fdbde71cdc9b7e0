-- Cancels a waiting job. ARGV: id. Returns 1 if it was waiting and is
-- now gone, 0 otherwise (leased, dead, or unknown: nothing changed).
local id = ARGV[1]
if redis.call('ZREM', K_DUE, id) == 0 then return 0 end
forget(id)
return 1
