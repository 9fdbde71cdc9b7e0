-- Makes a waiting job due now (after the shared prelude): its due time
-- becomes Redis' now unless it is due already, and a worker is woken for
-- it as a schedule would (if it is now the earliest event). ARGV: id.
-- Returns 1, or 0 if the job is not waiting (leased, dead or unknown:
-- nothing changed).
local id = ARGV[1]
local due = redis.call('ZSCORE', K_TIMELINE, id)
if not due or tonumber(due) >= LEASED then return 0 end
if tonumber(due) > now then
  redis.call('ZADD', K_TIMELINE, fmt(now), id)
end
local m = arm_event(redis.call('HGET', K_JOB, 'm'), now)
if m then redis.call('HSET', K_JOB, 'm', m) end
return 1
