-- Claims the earliest claimable job: first a job whose lease ran out
-- (its worker died or overran), then the earliest due job.
--
-- ARGV: lease ms, max attempts, token.
-- Returns `{1, id, payload, deadline, attempt, lease expiry, expired,
-- buried}` for a claimed job, `{0, wait, buried}` otherwise, where `wait`
-- is the time in ms from Redis' now until the earliest due time or lease
-- expiry (`-1`: none), `expired` is 1 if the job was taken back from a
-- lease that ran out (0 if it was waiting), and `buried` lists the ids
-- this call moved to the dead letters (for the caller's tracing).
local lease, max_attempts, token = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local buried = {}
-- `due` is the job's score in the due set, or nil for a job taken back
-- from a lost lease. A waiting job's deadline is its due score (schedule,
-- retry, release and requeue all keep it so); it is written to the
-- deadline hash only while the job is leased, for a redelivery after a
-- lost lease or a release to read.
local function deliver(id, expired, due)
  local attempt = redis.call('HINCRBY', K_ATTEMPT, id, 1)
  local expiry = now + lease
  redis.call('ZADD', K_LEASED, string.format('%d', expiry), id)
  redis.call('HSET', K_TOKEN, id, token)
  local payload = redis.call('HGET', K_PAYLOAD, id) or ''
  local deadline = due or tonumber(redis.call('HGET', K_DEADLINE, id) or now)
  if due then redis.call('HSET', K_DEADLINE, id, string.format('%d', due)) end
  return {1, id, payload, deadline, attempt, expiry, expired, buried}
end
-- Expired leases first: their jobs have waited longest. Those out of
-- attempts go to the dead letters; bounded so one call stays short.
for _ = 1, 64 do
  local expired = redis.call('ZRANGEBYSCORE', K_LEASED, '-inf', now, 'LIMIT', 0, 1)
  local id = expired[1]
  if not id then break end
  local attempt = tonumber(redis.call('HGET', K_ATTEMPT, id) or '0')
  if attempt >= max_attempts then
    bury(id, out_of_attempts(id, string.format('lease expired after %d attempt(s)', attempt)))
    buried[#buried + 1] = id
  else
    return deliver(id, 1)
  end
end
local due = redis.call('ZRANGEBYSCORE', K_DUE, '-inf', now, 'WITHSCORES', 'LIMIT', 0, 1)
if due[1] then
  redis.call('ZREM', K_DUE, due[1])
  return deliver(due[1], 0, tonumber(due[2]))
end
local wait = -1
local next_due = redis.call('ZRANGE', K_DUE, 0, 0, 'WITHSCORES')
if next_due[2] then wait = tonumber(next_due[2]) - now end
local next_expiry = redis.call('ZRANGE', K_LEASED, 0, 0, 'WITHSCORES')
if next_expiry[2] then
  local w = tonumber(next_expiry[2]) - now
  if wait < 0 or w < wait then wait = w end
end
if wait == 0 then wait = 1 end
return {0, wait, buried}
