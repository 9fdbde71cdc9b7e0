-- Makes a waiting job due now (after the shared prelude): its due score
-- becomes Redis' now unless it is due already, and waiters are woken as a
-- schedule wakes them (if it is now the earliest job). ARGV: id, channel.
-- Returns 1, or 0 if the job is not waiting (leased, dead or unknown:
-- nothing changed).
local id, channel = ARGV[1], ARGV[2]
local due = redis.call('ZSCORE', K_DUE, id)
if not due then return 0 end
if tonumber(due) > now then
  redis.call('ZADD', K_DUE, string.format('%d', now), id)
end
announce(id, now, channel)
return 1
