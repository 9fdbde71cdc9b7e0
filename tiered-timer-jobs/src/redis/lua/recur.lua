-- Registers, replaces, pauses, resumes or removes a recurrence (after
-- recur_lib.lua). ARGV: mode, name, then
--   'r' (recur): spec, zone, policy, payload, from, times...
--   'u' (resume): from, times...
--   'p' (pause), 'x' (remove): nothing
-- `times` are "ms:suffix", every occurrence after `from` (ms), computed by
-- the client; only those after Redis' now are used.
-- Returns {status, now}: 1 changed (or, for 'p', 'u' and 'x': there is
-- such a recurrence), 0 unchanged (or none), -1 the times start after now
-- or end before it
-- (the client computes them again from `now`).
local mode, name = ARGV[1], ARGV[2]
-- Times that start after now miss the first occurrence: asked again,
-- before anything is written.
-- So do times that all lie before now (the client's clock ahead of
-- Redis' by more than it allowed for).
local first = (mode == 'r' and 7) or (mode == 'u' and 3)
if first then
  if tonumber(ARGV[first]) > now then return {-1, now} end
  local last = ARGV[#ARGV]
  if #ARGV > first and tonumber(string.match(last, '^(%d+):')) <= now then return {-1, now} end
end
local raw = redis.call('HMGET', K_RECUR, 'd' .. name, 'p' .. name, 's' .. name)
local s = parse_state(raw[3])

-- The pending occurrence's job, if it is still waiting.
local function pending_id(state)
  if state and state.pending then return name .. '@' .. state.pending[2] end
  return nil
end
local function cancel_pending(state)
  local id = pending_id(state)
  if id and waiting(id) then drop_job(id) end
end

-- Schedules the first occurrence after now from ARGV[first..] (from,
-- times), which start at or before now (checked above).
local function start(state, first, payload)
  local times = {}
  for i = first + 1, #ARGV do
    local ms, suffix = string.match(ARGV[i], '^(%d+):(%S+)$')
    if tonumber(ms) > now then times[#times + 1] = {tonumber(ms), suffix} end
  end
  state.pending, state.run, state.flag = times[1], 0, '-'
  if times[1] then
    arm_occurrence(put_occurrence(name, times[1], payload))
  end
  redis.call('HSET', K_RECUR, 's' .. name, state_text(state), 't' .. name, times_text(times, 2))
end

if mode == 'r' then
  local spec, zone, policy, payload = ARGV[3], ARGV[4], ARGV[5], ARGV[6]
  local paused = '0'
  local version = 1
  if raw[1] then
    local v, p, old_policy, old_zone, old_spec = string.match(raw[1], '^(%d+) (%d) (%S+) (%S+)\n(.*)$')
    paused, version = p, tonumber(v) + 1
    if old_spec == spec and old_zone == zone and old_policy == policy and raw[2] == payload then
      -- The same again: nothing to do, unless its chain lost its waiting
      -- occurrence (then it starts again).
      local id = pending_id(s)
      if paused == '1' or (s and s.flag == 'w') or (id and waiting(id)) then return {0, now} end
      version = tonumber(v)
    end
  end
  cancel_pending(s)
  local state = {version = version, pending = nil, last = s and s.last, run = 0, flag = '-', policy = policy}
  if paused == '0' then
    start(state, 7, payload)
  else
    redis.call('HSET', K_RECUR, 's' .. name, state_text(state), 't' .. name, '')
  end
  redis.call('HSET', K_RECUR, 'd' .. name, fmt(version) .. ' ' .. paused .. ' ' .. policy .. ' ' .. zone .. '\n' .. spec,
    'p' .. name, payload)
  return {1, now}
end

if not raw[1] then return {0, now} end
local v, paused, policy, zone, spec = string.match(raw[1], '^(%d+) (%d) (%S+) (%S+)\n(.*)$')
if mode == 'x' then
  cancel_pending(s)
  redis.call('HDEL', K_RECUR, 'd' .. name, 'p' .. name, 's' .. name, 't' .. name)
  return {1, now}
end
local want = mode == 'p' and '1' or '0'
if paused == want then return {1, now} end
if mode == 'p' then
  cancel_pending(s)
  s.pending, s.run, s.flag = nil, 0, '-'
  redis.call('HSET', K_RECUR, 's' .. name, state_text(s), 't' .. name, '')
else
  start(s, 3, raw[2])
end
redis.call('HSET', K_RECUR, 'd' .. name, v .. ' ' .. want .. ' ' .. policy .. ' ' .. zone .. '\n' .. spec)
return {1, now}
