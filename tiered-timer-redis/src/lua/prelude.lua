-- The keys of one partition (see src/keys.rs), the layout's constants and
-- the helpers every script shares. Scripts that need the time include
-- time.lua before this file, so `now` is defined for the helpers that use
-- it.
local K_TIMELINE, K_JOB, K_DEAD, K_MARKER = KEYS[1], KEYS[2], KEYS[3], KEYS[4]

-- A leased job sits in the timeline at LEASED + its lease expiry (ms), a
-- waiting job at its due time: scores below LEASED are waiting jobs, and
-- 2^52 + any time before the year 142 000 is still exact in a double.
local LEASED = 4503599627370496
-- How long past its time the chain head may go unclaimed before any
-- script that notices re-arms the chain (its holder died or hung).
local GRACE = 10000

local function fmt(n) return string.format('%d', n) end
-- A job's fields in the job hash: payload, lease (or attempts), last error.
local function P(id) return 'p' .. id end
local function L(id) return 'l' .. id end
local function E(id) return 'e' .. id end

-- The `l` field: "attempts" for a job delivered before and now waiting (or
-- dead); "attempts token deadline" while leased. Returns attempts (0 for
-- a job never delivered), token and deadline (nil unless leased).
local function parse_lease(raw)
  if not raw then return 0, nil, nil end
  local a, token, deadline = string.match(raw, '^(%d+) (%S+) (%d+)$')
  if a then return tonumber(a), token, tonumber(deadline) end
  return tonumber(raw), nil, nil
end

-- The partition's meta field `m`: "armed lease_lb", where armed is the
-- time of the chain head's baton (the earliest event someone is to wake
-- for) and lease_lb is at most the earliest lease expiry ('-': none).
local function parse_meta(raw)
  if not raw then return nil, nil end
  local armed, lease_lb = string.match(raw, '^(%S+) (%S+)$')
  return tonumber(armed), tonumber(lease_lb)
end
local function meta(armed, lease_lb)
  return (armed and fmt(armed) or '-') .. ' ' .. (lease_lb and fmt(lease_lb) or '-')
end

-- A baton: a member of the marker sorted set, named and scored by the
-- time its holder is to claim at. BZPOPMIN hands each to exactly one
-- waiting worker, earliest first; two batons for one time are one.
local function put_baton(at)
  redis.call('ZADD', K_MARKER, fmt(at), fmt(at))
end

-- This script made something happen at `at` (a job due, or a lease that
-- runs out if `lease`): wake the chain for it if it comes before the
-- chain head, or if there is no live chain head. Returns the new meta
-- field, or nil if it is unchanged.
local function arm_event(raw_meta, at, lease)
  local armed, lease_lb = parse_meta(raw_meta)
  local changed = false
  if lease and (not lease_lb or at < lease_lb) then
    lease_lb = at
    changed = true
  end
  if not armed or at < armed or armed + GRACE <= now then
    -- A stale chain head (nobody claimed at its time): wake now.
    if armed and armed + GRACE <= now then at = now end
    put_baton(at)
    armed = at
    changed = true
  end
  if changed then return meta(armed, lease_lb) end
  return nil
end

-- Moves a job (waiting or leased) to the dead letters with `attempts`,
-- keeping its payload, and records `reason` as its last error.
local function bury(id, attempts, reason)
  redis.call('ZREM', K_TIMELINE, id)
  redis.call('ZADD', K_DEAD, fmt(now), id)
  local fields = {L(id), fmt(attempts)}
  if reason then
    fields[3] = E(id)
    fields[4] = reason
  end
  redis.call('HSET', K_JOB, unpack(fields))
end

-- Why a job out of attempts died: `what`, and the last error a worker
-- gave for it, if any.
local function out_of_attempts(id, what)
  local last = redis.call('HGET', K_JOB, E(id))
  if last then return what .. ' (last error: ' .. last .. ')' end
  return what
end

-- Ends a held job's lease and makes it due `delay` ms after now (rounded
-- up, so never early) with `attempts` kept, plus `extra` fields; wakes the
-- chain if it is now the earliest event.
local function reschedule(id, attempts, delay, extra)
  local due = math.floor((now_us + 999) / 1000) + delay
  redis.call('ZADD', K_TIMELINE, fmt(due), id)
  local fields = {L(id), fmt(attempts)}
  for _, field in ipairs(extra or {}) do fields[#fields + 1] = field end
  local m = arm_event(redis.call('HGET', K_JOB, 'm'), due)
  if m then
    fields[#fields + 1] = 'm'
    fields[#fields + 1] = m
  end
  redis.call('HSET', K_JOB, unpack(fields))
end
