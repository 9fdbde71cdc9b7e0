-- Hands a held job back, due at once, without counting the delivery
-- against max attempts. Its deadline (never later than now, since it was
-- claimed) becomes its due score again, so it goes to the front of the
-- waiting jobs (it has waited longest), and a first delivery handed back
-- is stored as it was scheduled: due score and payload only. ARGV: id,
-- token, channel. Returns 1, or 0 if the lease was lost (nothing
-- changed).
local channel = ARGV[3]
redis.call('ZREM', K_LEASED, id)
redis.call('HDEL', K_TOKEN, id)
if redis.call('HINCRBY', K_ATTEMPT, id, -1) <= 0 then
  redis.call('HDEL', K_ATTEMPT, id)
end
local due = tonumber(redis.call('HGET', K_DEADLINE, id) or now)
redis.call('HDEL', K_DEADLINE, id)
if due > now then due = now end
redis.call('ZADD', K_DUE, string.format('%d', due), id)
announce(id, due, channel)
return 1
