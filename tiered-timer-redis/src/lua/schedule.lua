-- Schedules a job unless its id is already waiting or leased.
--
-- ARGV: id, mode (`d`: ARGV[3] is a delay in ms from Redis' now; `a`: an
-- absolute due time in ms since the epoch), value, payload, channel.
-- Returns `{1, due}` when written, `{0, due or lease expiry}` when the id
-- was already there (nothing changed).
local id, mode, value, payload, channel = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5]
local existing = redis.call('ZSCORE', K_DUE, id) or redis.call('ZSCORE', K_LEASED, id)
if existing then
  return {0, tonumber(existing)}
end
local due
if mode == 'd' then
  due = math.floor((now_us + 999) / 1000) + value
else
  due = value
end
-- A waiting job is its score in the due set and its payload, nothing
-- more: the attempt count and the deadline are written when it is
-- delivered (memory per pending job). Only a dead letter replaced by
-- this id has other fields to clear.
if redis.call('ZREM', K_DEAD, id) == 1 then
  redis.call('HDEL', K_ATTEMPT, id)
  redis.call('HDEL', K_DEADLINE, id)
  redis.call('HDEL', K_TOKEN, id)
  redis.call('HDEL', K_ERROR, id)
end
redis.call('HSET', K_PAYLOAD, id, payload)
redis.call('ZADD', K_DUE, string.format('%d', due), id)
announce(id, due, channel)
return {1, due}
