-- Schedules a chunk of jobs of one partition at once (see
-- `Queue::schedule_many`): each job as
-- `SCHEDULE`] would, except that delays count from one "now" for the
-- whole chunk, and at most one wake-up is published.
--
-- ARGV: channel, mode (`d`: each value is a delay in ms from the base;
-- `a`: an absolute due time in ms), base (ms since the epoch; empty: this
-- script's `TIME`, rounded up), then `id, value, payload` per job (at
-- most `CHUNK_JOBS` jobs, so the `unpack`s
-- below stay far under Lua's limit of 8 000 values). Returns `{written,
-- base}`: how many jobs were new (an id already waiting or leased, or
-- seen earlier in the chunk, is left alone), and the base used, for the
-- next chunk of the same call.
--
-- All reads come first, all writes after, and nothing between them can
-- fail on input the caller checked: a chunk is written entirely or not
-- at all.
local channel, mode = ARGV[1], ARGV[2]
local base = tonumber(ARGV[3]) or math.floor((now_us + 999) / 1000)
local any_dead = redis.call('ZCARD', K_DEAD) > 0
local asked = {}
for i = 4, #ARGV, 3 do asked[#asked + 1] = ARGV[i] end
-- Which ids are waiting or leased already: one ZMSCORE per set (Redis
-- 6.2+), else one ZSCORE per id.
local function present(key)
  local found = redis.pcall('ZMSCORE', key, unpack(asked))
  if type(found) == 'table' and found.err == nil then return found end
  found = {}
  for j, id in ipairs(asked) do found[j] = redis.call('ZSCORE', key, id) end
  return found
end
local waiting, leased = present(K_DUE), present(K_LEASED)
local ids, scored, fields, revived, mine = {}, {}, {}, {}, {}
for j, id in ipairs(asked) do
  local i = 4 + 3 * (j - 1)
  if not mine[id] and not waiting[j] and not leased[j] then
    local due = tonumber(ARGV[i + 1])
    if mode == 'd' then due = base + due end
    mine[id] = true
    ids[#ids + 1] = id
    scored[#scored + 1] = string.format('%d', due)
    scored[#scored + 1] = id
    fields[#fields + 1] = id
    fields[#fields + 1] = ARGV[i + 2]
    -- Only a dead letter has fields to clear (acked, cancelled and
    -- purged jobs leave none): replace it as SCHEDULE does.
    if any_dead and redis.call('ZSCORE', K_DEAD, id) then revived[#revived + 1] = id end
  end
end
if #ids == 0 then return {0, base} end
if #revived > 0 then
  redis.call('ZREM', K_DEAD, unpack(revived))
  redis.call('HDEL', K_ATTEMPT, unpack(revived))
  redis.call('HDEL', K_DEADLINE, unpack(revived))
  redis.call('HDEL', K_TOKEN, unpack(revived))
  redis.call('HDEL', K_ERROR, unpack(revived))
end
-- A waiting job is its score in the due set and its payload, nothing more.
redis.call('HSET', K_PAYLOAD, unpack(fields))
redis.call('ZADD', K_DUE, unpack(scored))
-- One wake-up, and only if a job of this chunk is now the earliest.
local first = redis.call('ZRANGE', K_DUE, 0, 0, 'WITHSCORES')
if mine[first[1]] then
  local wait = tonumber(first[2]) - now
  if wait < 0 then wait = 0 end
  redis.call('PUBLISH', channel, string.format('%d', wait))
end
return {#ids, base}
