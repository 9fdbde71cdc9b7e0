-- Schedules a chunk of jobs of one partition at once: each job as
-- schedule.lua would, except that delays count from one "now" for the
-- whole chunk, and the chain is armed once at most.
--
-- ARGV: mode (`d`: each value is a delay in ms from the base; `a`: an
-- absolute due time in ms), base (ms since the epoch; empty: this
-- script's `TIME`, rounded up), then `id, value, payload` per job (at
-- most 1 000 jobs, so the `unpack`s below stay far under Lua's limit of
-- 8 000 values). Returns `{written, base}`: how many jobs were new (an id
-- already waiting or leased, or seen earlier in the chunk, is left
-- alone), and the base used, for the next chunk of the same call.
--
-- All reads come first, all writes after, and nothing between them can
-- fail on input the caller checked: a chunk is written entirely or not
-- at all.
local mode = ARGV[1]
local base = tonumber(ARGV[2]) or math.floor((now_us + 999) / 1000)
local any_dead = redis.call('ZCARD', K_DEAD) > 0
local created = fmt(now)
local asked = {}
for i = 3, #ARGV, 3 do asked[#asked + 1] = ARGV[i] end
-- Which ids are waiting or leased already: one ZMSCORE (Redis 6.2+), else
-- one ZSCORE per id.
local function present(key)
  local found = redis.pcall('ZMSCORE', key, unpack(asked))
  if type(found) == 'table' and found.err == nil then return found end
  found = {}
  for j, id in ipairs(asked) do found[j] = redis.call('ZSCORE', key, id) end
  return found
end
local there = present(K_TIMELINE)
local raw_meta = redis.call('HGET', K_JOB, 'm')
local scored, fields, revived, mine = {}, {}, {}, {}
local written, earliest = 0, nil
for j, id in ipairs(asked) do
  local i = 3 + 3 * (j - 1)
  if not mine[id] and not there[j] then
    local due = tonumber(ARGV[i + 1])
    if mode == 'd' then due = base + due end
    mine[id] = true
    written = written + 1
    if not earliest or due < earliest then earliest = due end
    scored[#scored + 1] = fmt(due)
    scored[#scored + 1] = id
    fields[#fields + 1] = P(id)
    fields[#fields + 1] = ARGV[i + 2]
    fields[#fields + 1] = C(id)
    fields[#fields + 1] = created
    -- Only a dead letter has fields to clear: replace it as schedule does.
    if any_dead and redis.call('ZSCORE', K_DEAD, id) then revived[#revived + 1] = id end
  end
end
if written == 0 then return {0, base} end
if #revived > 0 then
  redis.call('ZREM', K_DEAD, unpack(revived))
  local stale = {}
  for _, id in ipairs(revived) do
    stale[#stale + 1] = L(id)
    stale[#stale + 1] = E(id)
    stale[#stale + 1] = H(id)
  end
  redis.call('HDEL', K_JOB, unpack(stale))
end
-- The chain wakes once, for the chunk's earliest job, if it comes first.
local m = arm_event(raw_meta, earliest)
if m then
  fields[#fields + 1] = 'm'
  fields[#fields + 1] = m
end
redis.call('HSET', K_JOB, unpack(fields))
redis.call('ZADD', K_TIMELINE, unpack(scored))
return {written, base}
