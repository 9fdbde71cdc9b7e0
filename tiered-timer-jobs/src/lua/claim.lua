-- Claims up to `n` claimable jobs (first those whose lease ran out, then
-- the earliest due), optionally after acking one, and passes the chain
-- on: the next event (due time or lease expiry) gets a baton, unless
-- someone holds one for it already.
--
-- ARGV:
--   1 n: the most jobs to claim
--   2 lease (ms); 3 max attempts
--   4 token prefix (a job's token is prefix.k)
--   5 baton: the name of the baton the caller claims with (its time, or
--     xk for an extra one); '' (none) or 'r' (rescue: the caller may have
--     lost one; re-arm in any case)
--   6 keep (ms, or ''): the caller keeps the next baton itself if the
--     next event is in the future by at most this much
--   7 min due: claim only if at least this many jobs are due (a claim
--     without a baton leaves a lone due job to the baton's holder)
--   8, 9 id and token of a job to ack first ('' for none)
--
-- Returns {now, acked, next, kept, buried, jobs, left}: acked is 1, 0 (the
-- lease was lost: nothing else done) or -1 (nothing to ack); next is the
-- time of the next event (-1: none); kept is the baton the caller now
-- holds (-1: none); buried lists the ids this call moved to the dead
-- letters; jobs is flat, five fields per job: id, payload, deadline,
-- attempt, expired (1 if taken back from a lease that ran out); the k-th
-- job's token is prefix.k; left is how many due jobs it saw and left (up
-- to BACKLOG + 1: BACKLOG or more is a backlog).
local n, lease, max_attempts, token = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local baton, keep, min_due = ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7])
local ack_id, ack_token = ARGV[8], ARGV[9]

local acked = -1
if ack_id ~= '' then
  local _, held = parse_lease(redis.call('HGET', K_JOB, L(ack_id)))
  if held ~= ack_token then return {now, 0, -1, -1, {}, {}, 0} end
  redis.call('ZREM', K_TIMELINE, ack_id)
  redis.call('HDEL', K_JOB, P(ack_id), L(ack_id), E(ack_id))
  acked = 1
end

-- The earliest waiting jobs; the first one not taken gives the next due
-- time.
-- (BACKLOG more than needed: is there a backlog behind the next due job?)
local first = redis.call('ZRANGE', K_TIMELINE, 0, math.max(n + BACKLOG, min_due - 1), 'WITHSCORES')
local due_ids, due_at, next_due, due_count = {}, {}, nil, 0
for i = 1, #first, 2 do
  local score = tonumber(first[i + 1])
  if score >= LEASED then break end
  if score <= now then due_count = due_count + 1 end
  if score <= now and #due_ids < n then
    due_ids[#due_ids + 1] = first[i]
    due_at[#due_ids] = score
  elseif not next_due then
    next_due = score
  end
end
if due_count < min_due then
  if due_at[1] then next_due = due_at[1] end
  due_ids, due_at = {}, {}
end
local want = {'m'}
for _, id in ipairs(due_ids) do
  want[#want + 1] = L(id)
  want[#want + 1] = P(id)
end
local got = redis.call('HMGET', K_JOB, unpack(want))
local raw_meta = got[1]
local armed, lease_lb = parse_meta(raw_meta)

-- Leases that ran out come first (their jobs have waited longest); only
-- looked for when the lower bound on lease expiries says there may be one.
local deliveries, buried = {}, {}
local recount = false
if lease_lb and lease_lb <= now then
  recount = true
  local ids = redis.call('ZRANGEBYSCORE', K_TIMELINE, fmt(LEASED), fmt(LEASED + now), 'LIMIT', 0, n)
  if #ids > 0 then
    local fields = {}
    for _, id in ipairs(ids) do
      fields[#fields + 1] = L(id)
      fields[#fields + 1] = P(id)
    end
    local values = redis.call('HMGET', K_JOB, unpack(fields))
    for j, id in ipairs(ids) do
      local attempts, _, deadline = parse_lease(values[2 * j - 1])
      if attempts >= max_attempts then
        bury(id, attempts, out_of_attempts(id, string.format('lease expired after %d attempt(s)', attempts)))
        buried[#buried + 1] = id
      else
        deliveries[#deliveries + 1] = {id, attempts + 1, deadline or now, values[2 * j] or '', 1}
      end
    end
  end
end
for j, id in ipairs(due_ids) do
  if #deliveries >= n then
    -- Left for later: the earliest of them is the next due time.
    if not next_due or due_at[j] < next_due then next_due = due_at[j] end
    break
  end
  local attempts = parse_lease(got[2 * j])
  deliveries[#deliveries + 1] = {id, attempts + 1, due_at[j], got[2 * j + 1] or '', 0}
end

local expiry = now + lease
local scored, fields, jobs = {}, {}, {}
for k, d in ipairs(deliveries) do
  local tok = token .. '.' .. k
  scored[#scored + 1] = fmt(LEASED + expiry)
  scored[#scored + 1] = d[1]
  fields[#fields + 1] = L(d[1])
  fields[#fields + 1] = d[2] .. ' ' .. tok .. ' ' .. fmt(d[3])
  for _, v in ipairs({d[1], d[4], d[3], d[2], d[5]}) do jobs[#jobs + 1] = v end
end
if #scored > 0 then redis.call('ZADD', K_TIMELINE, unpack(scored)) end
-- How late the jobs claimed from the waiting ones were (one BITFIELD).
local late = {}
for _, d in ipairs(deliveries) do
  if d[5] == 0 then late[#late + 1] = now - d[3] end
end
if #late > 0 then record_lateness(K_LATENESS, late) end
if recount then
  local e = redis.call('ZRANGEBYSCORE', K_TIMELINE, fmt(LEASED), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  lease_lb = e[2] and tonumber(e[2]) - LEASED or nil
elseif #deliveries > 0 and (not lease_lb or expiry < lease_lb) then
  lease_lb = expiry
end

-- Pass the chain on, if it is ours to pass: we claimed (so the baton we
-- used is spent), we were asked to, the caller's baton is the chain head,
-- or the chain head is missing, stale, or later than an event we found.
local nxt = next_due
if lease_lb and (not nxt or lease_lb < nxt) then nxt = lease_lb end
local ours = #deliveries > 0 or baton == 'r' or not armed or armed + GRACE <= now
  or (nxt and nxt < armed) or tonumber(baton) == armed
local kept = -1
local head = baton == 'r' or tonumber(baton) == armed
-- Due jobs seen and left (at most BACKLOG + 1): BACKLOG or more is a
-- backlog.
local left = due_count - #deliveries
if ours then
  if armed and tonumber(baton) ~= armed and (not nxt or armed < nxt) then
    -- The chain head moves on without its baton having been used: the
    -- baton, if nobody popped it yet, would wake someone for nothing.
    redis.call('ZREM', K_MARKER, fmt(armed))
  end
  if not nxt then
    armed = nil
  elseif armed == nxt and baton ~= 'r' and tonumber(baton) ~= armed and armed + GRACE > now then
    -- Someone else holds (or will pop) the baton for that very event.
  else
    armed = nxt
    -- The next baton stays with the claimer if its event is due within
    -- `keep` (the claimer will most likely be back for it by then), unless
    -- there is a backlog: that goes to the next waiting worker at once.
    if keep and nxt <= now + keep and left < BACKLOG then kept = nxt else put_baton(nxt) end
  end
  -- A backlog (more jobs due than the next baton covers): wake more
  -- waiting workers at once, up to EXTRAS of them, with extra batons
  -- named x1.. (so that they never pile up). Only the chain head's claim
  -- does, so extras do not multiply (workers that are not waiting claim
  -- from a backlog without a baton).
  if head and left >= BACKLOG then
    local backlog = redis.call('ZCOUNT', K_TIMELINE, '-inf', fmt(now)) - 1
    local extras = {}
    for k = 1, math.min(backlog, EXTRAS) do
      extras[#extras + 1] = fmt(now)
      extras[#extras + 1] = 'x' .. k
    end
    if #extras > 0 then redis.call('ZADD', K_MARKER, unpack(extras)) end
  end
end
local m = meta(armed, lease_lb)
if m ~= (raw_meta or '') then
  fields[#fields + 1] = 'm'
  fields[#fields + 1] = m
end
if #fields > 0 then redis.call('HSET', K_JOB, unpack(fields)) end
return {now, acked, nxt or -1, kept, buried, jobs, left}
