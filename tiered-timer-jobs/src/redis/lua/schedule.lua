-- Schedules a job unless its id is already waiting or leased.
--
-- ARGV: id, mode (`d`: ARGV[3] is a delay in ms from Redis' now; `a`: an
-- absolute due time in ms since the epoch), value, payload.
-- Returns `{1, due}` when written, `{0, due or lease expiry}` when the id
-- was already there (nothing changed).
local id, mode, value, payload = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local existing = redis.call('ZSCORE', K_TIMELINE, id)
if existing then
  existing = tonumber(existing)
  if existing >= LEASED then existing = existing - LEASED end
  return {0, existing}
end
local due
if mode == 'd' then
  due = math.floor((now_us + 999) / 1000) + value
else
  due = value
end
-- A dead letter replaced by this id has fields to clear; a waiting job is
-- its place in the timeline, its payload and when it was created, nothing
-- more.
if redis.call('ZREM', K_DEAD, id) == 1 then
  redis.call('HDEL', K_JOB, L(id), E(id), H(id))
end
local fields = {P(id), payload, C(id), fmt(now)}
local m = arm_event(redis.call('HGET', K_JOB, 'm'), due)
if m then
  fields[5] = 'm'
  fields[6] = m
end
redis.call('HSET', K_JOB, unpack(fields))
redis.call('ZADD', K_TIMELINE, fmt(due), id)
return {1, due}
