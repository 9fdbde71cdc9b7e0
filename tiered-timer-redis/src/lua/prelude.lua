-- The preamble every script shares: `now_us`, `now` (ms, rounded down).
pcall(redis.replicate_commands)
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = math.floor(now_us / 1000)
local K_DUE, K_LEASED, K_DEAD = KEYS[1], KEYS[2], KEYS[3]
local K_PAYLOAD, K_ATTEMPT, K_DEADLINE, K_TOKEN = KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local K_ERROR = KEYS[8]

-- Tells waiters that `id` is due at `due` if it is now the earliest job.
local function announce(id, due, channel)
  local first = redis.call('ZRANGE', K_DUE, 0, 0)
  if first[1] == id then
    local wait = due - now
    if wait < 0 then wait = 0 end
    redis.call('PUBLISH', channel, string.format('%d', wait))
  end
end

-- Deletes everything stored about a job but its place in the sets.
local function forget(id)
  redis.call('HDEL', K_PAYLOAD, id)
  redis.call('HDEL', K_ATTEMPT, id)
  redis.call('HDEL', K_DEADLINE, id)
  redis.call('HDEL', K_TOKEN, id)
  redis.call('HDEL', K_ERROR, id)
end

-- Ends a held job's lease and makes it due `delay` ms after now (rounded
-- up, so never early), with that as its deadline (a waiting job's deadline
-- is its due score, so the field goes); wakes waiters if it is now the
-- earliest.
local function reschedule(id, delay, channel)
  redis.call('ZREM', K_LEASED, id)
  redis.call('HDEL', K_TOKEN, id)
  redis.call('HDEL', K_DEADLINE, id)
  local due = math.floor((now_us + 999) / 1000) + delay
  redis.call('ZADD', K_DUE, string.format('%d', due), id)
  announce(id, due, channel)
end

-- Moves a job to the dead letters; keeps its payload and attempt count,
-- and records `reason` (if given) as its last error.
local function bury(id, reason)
  redis.call('ZREM', K_LEASED, id)
  redis.call('ZREM', K_DUE, id)
  redis.call('HDEL', K_TOKEN, id)
  redis.call('ZADD', K_DEAD, now, id)
  if reason then redis.call('HSET', K_ERROR, id, reason) end
end

-- Why a job out of attempts died: `what`, and the last error a worker
-- gave for it, if any.
local function out_of_attempts(id, what)
  local last = redis.call('HGET', K_ERROR, id)
  if last then return what .. ' (last error: ' .. last .. ')' end
  return what
end
