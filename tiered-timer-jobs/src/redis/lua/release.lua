-- Hands a held job back (after fence.lua), due at once, without counting
-- the delivery against max attempts. Its deadline (never later than now,
-- since it was claimed) becomes its place in the timeline again, so it
-- goes to the front (it has waited longest), and a first delivery handed
-- back is stored as it was scheduled: its place and its payload only.
-- ARGV: id, token. Returns 1, or 0 if the lease was lost (nothing
-- changed).
local due = deadline or now
if due > now then due = now end
redis.call('ZADD', K_TIMELINE, fmt(due), id)
local fields = {}
if attempts > 1 then
  fields = {L(id), fmt(attempts - 1)}
else
  redis.call('HDEL', K_JOB, L(id))
end
with_history(fields, id, ended_attempt(history, attempts, claimed, holder, 'l'))
local m = arm_event(redis.call('HGET', K_JOB, 'm'), due)
if m then
  fields[#fields + 1] = 'm'
  fields[#fields + 1] = m
end
if #fields > 0 then redis.call('HSET', K_JOB, unpack(fields)) end
return 1
