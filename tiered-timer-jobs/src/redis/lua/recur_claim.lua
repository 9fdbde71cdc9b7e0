-- A claim moves a recurrence's chain on (after recur_lib.lua; called by
-- claim.lua once it knows what it delivers, before it leases anything).
--
-- For each delivered job whose id is an occurrence's (name@time), the
-- recurrence's state says whether it is the occurrence it waits for. If
-- so, the decision of Recurrence::advance (src/data/recurrence.rs) is made
-- here from the precomputed times: deliver it or skip it (Missed::Skip:
-- removed, not delivered), and which occurrence waits next; that one is
-- scheduled in this script. When the times cannot answer (too few left,
-- after a long gap), the state is flagged 'w' and the claimer is asked to
-- decide: the job goes to it with a duty, and comes back with the duty if
-- the claimer dies (its lease runs out), so the chain is never lost.
--
-- Every occurrence's payload goes out behind one line for the client (it
-- strips it): '-' (nothing to do), 'a version after zone policy spec'
-- (append the occurrences after `after`), or
-- 'd version at now run zone policy spec' (decide what follows the claim
-- at `now` of the occurrence at `at`).
--
-- Returns the new count of deliveries, and the earliest occurrence it
-- scheduled (or nil).
local function recur_policy_max(policy)
  return tonumber(string.match(policy, '^run%-all:(%d+)$'))
end

-- The duty line of recurrence `name` (reads its definition).
local function duty(name, head)
  local d = redis.call('HGET', K_RECUR, 'd' .. name)
  local _, _, policy, zone, spec = string.match(d, '^(%d+) (%d) (%S+) (%S+)\n(.*)$')
  return head .. ' ' .. zone .. ' ' .. policy .. ' ' .. spec .. '\n'
end

local function recur_claimed(deliveries, count)
  local kept, earliest = {}, nil
  for k = 1, count do
    local d = deliveries[k]
    local deliver, line = true, '-\n'
    local name = string.match(d[1], '^(.+)@%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%d[%.%d]*Z$')
    local got = name and redis.call('HMGET', K_RECUR, 's' .. name, 't' .. name)
    local s = got and parse_state(got[1])
    if s and s.pending and name .. '@' .. s.pending[2] == d[1] then
      local at = s.pending[1]
      local times = parse_times(got[2])
      -- times[1] is the occurrence after `at`; `first_after_now` the first
      -- one after now (nil: the times do not reach past now).
      local first_after_now = nil
      for i = 1, #times do
        if times[i][1] > now then first_after_now = i break end
      end
      local missed = times[1] and times[1][1] <= now
      local next_i, run = nil, 0
      if s.flag == 'w' or not times[1] then
        next_i = nil
      elseif not missed then
        next_i = 1
      elseif s.policy == 'skip' then
        deliver, next_i = false, first_after_now
      elseif s.policy == 'run-once' or s.run + 1 >= (recur_policy_max(s.policy) or 1) then
        next_i = first_after_now
      else
        next_i, run = 1, s.run + 1
      end
      if next_i then
        s.last = deliver and s.pending or s.last
        s.pending, s.run = times[next_i], run
        local due = put_occurrence(name, s.pending, redis.call('HGET', K_RECUR, 'p' .. name))
        if not earliest or due < earliest then earliest = due end
        local left = #times - next_i
        if left < RECUR_LOW then
          local tail = times[#times]
          line = duty(name, 'a ' .. fmt(s.version) .. ' ' .. fmt(tail[1]))
        end
        redis.call('HSET', K_RECUR, 's' .. name, state_text(s), 't' .. name, times_text(times, next_i + 1))
      else
        -- The times cannot answer: the claimer decides (and the job is
        -- delivered to it either way: it drops a skipped one itself).
        deliver = true
        s.flag = 'w'
        redis.call('HSET', K_RECUR, 's' .. name, state_text(s))
        line = duty(name, 'd ' .. fmt(s.version) .. ' ' .. fmt(at) .. ' ' .. fmt(now) .. ' ' .. fmt(s.run))
      end
    end
    if deliver then
      if name then d[4] = line .. d[4] end
      kept[#kept + 1] = d
    else
      drop_job(d[1])
    end
  end
  for k = 1, count do deliveries[k] = kept[k] end
  return #kept, earliest
end
