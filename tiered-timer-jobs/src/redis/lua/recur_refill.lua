-- A claimer's answer to a recurrence's duty (after recur_lib.lua; see
-- recur_claim.lua). ARGV: mode, name, version, then
--   'a' (append): times... (the occurrences after the last one stored)
--   'd' (decide): id, token, deliver (1/0), run, times... (the first is
--                 the occurrence to wait for next; none: there is none)
-- `times` are "ms:suffix". Nothing happens if the recurrence was
-- replaced (another version), paused or removed since, or, for 'd', if
-- the duty was done already. Returns 1 if applied, 0 if not.
local mode, name, version = ARGV[1], ARGV[2], tonumber(ARGV[3])
local raw = redis.call('HMGET', K_RECUR, 's' .. name, 't' .. name, 'p' .. name)
local s = parse_state(raw[1])
local first = mode == 'a' and 4 or 8
local given = {}
for i = first, #ARGV do
  local ms, suffix = string.match(ARGV[i], '^(%d+):(%S+)$')
  given[#given + 1] = {tonumber(ms), suffix}
end

if mode == 'd' then
  local id, token, deliver, run = ARGV[4], ARGV[5], ARGV[6] == '1', tonumber(ARGV[7])
  -- A skipped occurrence goes, if this claim still holds it.
  if not deliver then
    local _, held = parse_lease(redis.call('HGET', K_JOB, L(id)))
    if held == token then drop_job(id) end
  end
  if not s or s.version ~= version or s.flag ~= 'w' or not s.pending
    or name .. '@' .. s.pending[2] ~= id then
    return 0
  end
  if deliver then s.last = s.pending end
  s.pending, s.run, s.flag = given[1], run, '-'
  if given[1] then arm_occurrence(put_occurrence(name, given[1], raw[3])) end
  redis.call('HSET', K_RECUR, 's' .. name, state_text(s), 't' .. name, times_text(given, 2))
  return 1
end

if not s or s.version ~= version then return 0 end
local times = parse_times(raw[2])
local last = times[#times] and times[#times][1] or (s.pending and s.pending[1]) or 0
for _, t in ipairs(given) do
  if t[1] > last then
    times[#times + 1] = t
    last = t[1]
  end
end
redis.call('HSET', K_RECUR, 't' .. name, times_text(times, 1))
return 1
