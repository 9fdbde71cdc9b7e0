-- Recurrences' helpers (after time.lua, prelude.lua and chain.lua): their
-- records, and scheduling an occurrence.
--
-- Per recurrence `name`, fields of K_RECUR:
--   d<name>  "version paused policy zone" then a newline and the spec
--   p<name>  the payload of its occurrences
--   s<name>  "version pending last run flag policy": pending and last are
--            "ms:suffix" (the occurrence's time, and its id's suffix) or
--            '-'; flag is '-' or 'w' (its waiting occurrence was claimed
--            and the claimer computes what follows: see recur_claim.lua)
--   t<name>  the next occurrences after pending, "ms:suffix ms:suffix ..."
--            computed by a client (Lua has no time zones), refilled by the
--            client that claims an occurrence when few are left
-- An occurrence's job id is name .. '@' .. suffix.

-- How many precomputed occurrences leave a claimer refilling them.
local RECUR_LOW = 8

local function parse_state(raw)
  if not raw then return nil end
  local version, pending, last, run, flag, policy =
    string.match(raw, '^(%d+) (%S+) (%S+) (%d+) (%S) (%S+)$')
  local function at(text)
    if text == '-' then return nil end
    local ms, suffix = string.match(text, '^(%d+):(%S+)$')
    return {tonumber(ms), suffix}
  end
  return {version = tonumber(version), pending = at(pending), last = at(last),
    run = tonumber(run), flag = flag, policy = policy}
end

local function state_text(s)
  local function at(o) if o then return fmt(o[1]) .. ':' .. o[2] end return '-' end
  return fmt(s.version) .. ' ' .. at(s.pending) .. ' ' .. at(s.last) .. ' ' .. fmt(s.run)
    .. ' ' .. s.flag .. ' ' .. s.policy
end

-- "ms:suffix ..." as a list of {ms, suffix}.
local function parse_times(raw)
  local times = {}
  if raw then
    for ms, suffix in string.gmatch(raw, '(%d+):(%S+)') do
      times[#times + 1] = {tonumber(ms), suffix}
    end
  end
  return times
end

local function times_text(times, from)
  local parts = {}
  for i = from, #times do parts[#parts + 1] = fmt(times[i][1]) .. ':' .. times[i][2] end
  return table.concat(parts, ' ')
end

-- Whether job `id` is waiting (not leased, not dead).
local function waiting(id)
  local score = redis.call('ZSCORE', K_TIMELINE, id)
  return score and tonumber(score) < LEASED
end

-- Removes job `id` for good (a skipped or cancelled occurrence).
local function drop_job(id)
  redis.call('ZREM', K_TIMELINE, id)
  redis.call('HDEL', K_JOB, P(id), L(id), E(id))
end

-- Makes occurrence `o` ({ms, suffix}) of `name` wait, with `payload`,
-- unless its id is waiting or leased already (a dead letter of that id is
-- replaced). Returns its due time.
local function put_occurrence(name, o, payload)
  local id = name .. '@' .. o[2]
  if redis.call('ZSCORE', K_TIMELINE, id) then return o[1] end
  -- A dead letter of its id is replaced, and forgets its attempts (as
  -- schedule.lua does); the occurrence is created now, by Redis' clock.
  if redis.call('ZREM', K_DEAD, id) == 1 then redis.call('HDEL', K_JOB, L(id), E(id), H(id)) end
  redis.call('HSET', K_JOB, P(id), payload, C(id), fmt(now))
  redis.call('ZADD', K_TIMELINE, fmt(o[1]), id)
  return o[1]
end

-- Wakes the chain for an occurrence due at `due` (as schedule.lua does).
local function arm_occurrence(due)
  local m = arm_event(redis.call('HGET', K_JOB, 'm'), due)
  if m then redis.call('HSET', K_JOB, 'm', m) end
end
