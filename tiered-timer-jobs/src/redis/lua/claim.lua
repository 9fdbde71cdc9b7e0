-- Claims up to `n` claimable jobs (first those whose lease ran out, then
-- the earliest due), optionally after acking one, and passes the chain
-- on if it is this claim's to pass.
--
-- ARGV:
--   1 n: the most jobs to claim
--   2 lease (ms); 3 max attempts
--   4 token prefix (a job's token is prefix.k)
--   5 baton: the name of the baton the caller claims with (its time, or
--     xk for an extra one, or w and its time for the watch baton); ''
--     (none) or 'r' (rescue: the caller may have lost one; re-arm in any
--     case)
--   6 keep (ms, or ''): the caller keeps the next baton itself if the
--     next event is in the future by at most this much
--   7 min due: claim only if at least this many jobs are due (a claim
--     without a baton leaves a lone due job to the baton's holder)
--   8, 9 id and token of a job to ack first ('' for none)
--   10 holder: who the claim is for (recorded with each job's lease and
--     in its history: see history.lua)
--
-- Returns one flat list (nested ones cost Redis more to convert):
-- {now, acked, head, kept, left, next, b, b buried ids, then five fields
-- per job}. acked is 1, 0 (the lease was lost: nothing else done) or -1
-- (nothing to ack); head is the chain head's time after this claim
-- (`armed`, -1: none: waiting workers that do not hold its baton check
-- it WATCH after its time, see src/redis/wake/waker.rs); kept
-- is the baton the caller now holds (-1: none); left is how many due jobs
-- it saw and left (up to BACKLOG + 1: BACKLOG or more is a backlog); next
-- is the partition's earliest event left, as it is (not moved up to now
-- as head is): its most overdue job or expired lease, or when the next
-- job comes due (-1: none), which is how a busy worker picks the
-- partition whose due jobs are the oldest (src/redis/wake/fair.rs); the
-- b ids are those this call moved to the dead letters; a job is id,
-- payload, deadline, attempt, expired (1 if taken back from a lease that
-- ran out), and the k-th job's token is prefix.k.
local n, lease, max_attempts, token = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local baton, keep, min_due = ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7])
local ack_id, ack_token, holder = ARGV[8], ARGV[9], ARGV[10]

-- The watch baton's holder checks that the chain head was claimed with:
-- if it is WATCH past its time, its holder is gone (killed between its
-- BZPOPMIN and its claim) and this claim rescues the chain.
local watch_at = tonumber(string.match(baton, '^w(%d+)$'))
if watch_at then
  local head_at = parse_meta(redis.call('HGET', K_JOB, 'm'))
  if head_at and head_at + WATCH <= now then
    baton, min_due = 'r', 1
  end
end

local acked = -1
if ack_id ~= '' then
  local _, held = parse_lease(redis.call('HGET', K_JOB, L(ack_id)))
  if held ~= ack_token then return {now, 0, -1, -1, 0, -1, 0} end
  redis.call('ZREM', K_TIMELINE, ack_id)
  redis.call('HDEL', K_JOB, P(ack_id), L(ack_id), E(ack_id), H(ack_id), C(ack_id))
  tally('p', 1)
  acked = 1
end

-- The earliest waiting jobs, one more than needed: the first one not
-- taken gives the next due time. (No more: each score costs Redis a float
-- to text conversion and this script one back.)
local first = redis.call('ZRANGE', K_TIMELINE, 0, math.max(n, min_due - 1), 'WITHSCORES')
local due_ids, due_at, next_due, due_count, taken = {}, {}, nil, 0, 0
for i = 1, #first, 2 do
  local score = tonumber(first[i + 1])
  if score >= LEASED then break end
  if score <= now then
    due_count = due_count + 1
    if taken < n then
      taken = taken + 1
      due_ids[taken] = first[i]
      due_at[taken] = score
    elseif not next_due then
      next_due = score
    end
  elseif not next_due then
    next_due = score
  end
end
-- Every job read is due, and the first one is more than LATE overdue:
-- is there a backlog behind them? (Counted up to BACKLOG past the jobs
-- taken, which is all the callers need. Workers that keep up take their
-- jobs within a few ms, with the next one often due already, and need no
-- count.)
if due_count == #first / 2 and due_count > 0 and due_at[1] and due_at[1] + LATE < now then
  due_count = math.min(redis.call('ZCOUNT', K_TIMELINE, '-inf', fmt(now)), n + BACKLOG + 1)
end
if due_count < min_due then
  if due_at[1] then next_due = due_at[1] end
  due_ids, due_at, taken = {}, {}, 0
end
local want = {'m'}
for k = 1, taken do
  want[2 * k] = L(due_ids[k])
  want[2 * k + 1] = P(due_ids[k])
end
local got = redis.call('HMGET', K_JOB, unpack(want))
local armed, lease_lb, watch = parse_meta(got[1])
-- Whether the meta field changes.
local dirty = false
if watch_at and watch == watch_at then
  -- The watch out is this one: spent.
  watch = nil
  dirty = true
end

-- Leases that ran out come first (their jobs have waited longest); only
-- looked for when the lower bound on lease expiries says there may be one.
-- Each ends its attempt as lease expired (or buried, on its last one), in
-- its history, and counts it failed.
local deliveries, buried, count, expired_histories = {}, {}, 0, {}
local recount = false
if lease_lb and lease_lb <= now then
  recount = true
  local ids = redis.call('ZRANGEBYSCORE', K_TIMELINE, fmt(LEASED), fmt(LEASED + now), 'LIMIT', 0, n)
  if #ids > 0 then
    local fields = {}
    for j, id in ipairs(ids) do
      fields[3 * j - 2] = L(id)
      fields[3 * j - 1] = P(id)
      fields[3 * j] = H(id)
    end
    local values = redis.call('HMGET', K_JOB, unpack(fields))
    for j, id in ipairs(ids) do
      local attempts, _, deadline, claimed, was_holder = parse_lease(values[3 * j - 2])
      local history = values[3 * j] or nil
      if attempts >= max_attempts then
        local why = out_of_attempts(id, string.format('lease expired after %d attempt(s)', attempts))
        bury(id, attempts, why, ended_attempt(history, attempts, claimed, was_holder, 'b', why))
        buried[#buried + 1] = id
      else
        count = count + 1
        deliveries[count] = {id, attempts + 1, deadline or now, values[3 * j - 1] or '', 1}
        with_history(expired_histories, id, ended_attempt(history, attempts, claimed, was_holder, 'x'))
      end
    end
    if count > 0 then tally('f', count) end
  end
end
for j = 1, taken do
  if count >= n then
    -- Left for later: the earliest of them is the next due time.
    if not next_due or due_at[j] < next_due then next_due = due_at[j] end
    break
  end
  count = count + 1
  deliveries[count] = {due_ids[j], parse_lease(got[2 * j]) + 1, due_at[j], got[2 * j + 1] or '', 0}
end

-- A recurrence's waiting occurrence moves its chain on (recur_claim.lua).
local occurrence_due
count, occurrence_due = recur_claimed(deliveries, count)
if occurrence_due and (not next_due or occurrence_due < next_due) then next_due = occurrence_due end

local expiry = now + lease
local leased = fmt(LEASED + expiry)
local scored, fields, late = {}, {}, {}
for k = 1, count do
  local d = deliveries[k]
  scored[2 * k - 1] = leased
  scored[2 * k] = d[1]
  fields[2 * k - 1] = L(d[1])
  fields[2 * k] = d[2] .. ' ' .. token .. '.' .. k .. ' ' .. fmt(d[3]) .. ' ' .. fmt(now) .. ' ' .. holder
  -- How late the jobs claimed from the waiting ones were.
  if d[5] == 0 then late[#late + 1] = now - d[3] end
end
if count > 0 then redis.call('ZADD', K_TIMELINE, unpack(scored)) end
if #late > 0 then record_lateness(K_LATENESS, late) end
if recount then
  local e = redis.call('ZRANGEBYSCORE', K_TIMELINE, fmt(LEASED), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  local lb = e[2] and tonumber(e[2]) - LEASED or nil
  dirty = lb ~= lease_lb
  lease_lb = lb
elseif count > 0 and (not lease_lb or expiry < lease_lb) then
  lease_lb = expiry
  dirty = true
end

-- The chain is this claim's to pass on if it was made with the chain
-- head's baton (or to rescue it), or if the chain head is missing, stale,
-- or later than an event this claim found. Times are effective: a baton
-- for an event that is due already is named by now, so a backlog's
-- claims do not move the head from one overdue job to the next.
local nxt = next_due
if lease_lb and (not nxt or lease_lb < nxt) then nxt = lease_lb end
local at = nxt and math.max(nxt, now)
local head = baton == 'r' or tonumber(baton) == armed
-- A rescue (the head's holder may be gone, and the watch with it) puts
-- a new watch in with the new head.
if baton == 'r' then watch = nil end
local kept = -1
-- Due jobs seen and left (at most BACKLOG + 1): BACKLOG or more is a
-- backlog.
local left = due_count - count
if head or not armed or head_stale(armed, watch) or (at and at < armed) then
  dirty = true
  if armed and not head and (not at or armed < at) then
    -- The chain head moves on without its baton having been used: the
    -- baton, if nobody popped it yet, would wake someone for nothing.
    redis.call('ZREM', K_MARKER, fmt(armed))
  end
  armed = at
  if at then
    -- The next baton stays with the claimer if its event is due within
    -- `keep` (the claimer will most likely be back for it by then), unless
    -- there is a backlog: that goes to the next waiting worker at once.
    if keep and at <= now + keep and left < BACKLOG then
      kept = at
      if needs_watch(at, watch) then
        watch = at + WATCH
        redis.call('ZADD', K_MARKER, fmt(watch), 'w')
      end
    else
      watch = put_baton(at, watch)
    end
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
      extras[2 * k - 1] = fmt(now)
      extras[2 * k] = 'x' .. k
    end
    if #extras > 0 then redis.call('ZADD', K_MARKER, unpack(extras)) end
  end
end
if watch_at and armed and needs_watch(armed, watch) then
  -- A watch that found the chain head alive passes itself on to it.
  watch = armed + WATCH
  redis.call('ZADD', K_MARKER, fmt(watch), 'w')
  dirty = true
end
if dirty then
  fields[#fields + 1] = 'm'
  fields[#fields + 1] = meta(armed, lease_lb, watch)
end
for _, f in ipairs(expired_histories) do fields[#fields + 1] = f end
if #fields > 0 then redis.call('HSET', K_JOB, unpack(fields)) end
local reply = {now, acked, armed or -1, kept, left, nxt or -1, #buried}
local r = 7
for _, id in ipairs(buried) do
  r = r + 1
  reply[r] = id
end
for k = 1, count do
  local d = deliveries[k]
  reply[r + 1], reply[r + 2], reply[r + 3], reply[r + 4], reply[r + 5] = d[1], d[4], d[3], d[2], d[5]
  r = r + 5
end
return reply
