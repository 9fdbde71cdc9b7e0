-- The wake-up chain's helpers (after time.lua and prelude.lua).

-- The partition's meta field `m`: "armed lease_lb watch". armed is the
-- time of the chain head's baton: the next event someone is to wake for
-- (a job coming due, a lease running out), or when the baton was put in if
-- that event was due already. lease_lb is at most the earliest lease
-- expiry. watch is when the watch baton's holder checks the chain head.
-- ('-': none.)
local function parse_meta(raw)
  if not raw then return nil, nil, nil end
  local armed, lease_lb, watch = string.match(raw, '^(%S+) (%S+) ?(%S*)$')
  return tonumber(armed), tonumber(lease_lb), tonumber(watch)
end
local function meta(armed, lease_lb, watch)
  return (armed and fmt(armed) or '-') .. ' ' .. (lease_lb and fmt(lease_lb) or '-')
    .. ' ' .. (watch and fmt(watch) or '-')
end

-- Whether the chain head at `at` needs a new watch baton: none is out
-- (`watch`, the time the one out checks), the one out is overdue (its
-- holder is gone too), or it checks too late for this head.
local function needs_watch(at, watch)
  return not watch or watch + WATCH <= now or watch > at + 2 * WATCH
end

-- Whether the chain head (`armed`) is stale: nobody claimed with its
-- baton, and it is GRACE past its time, or the watch that covers it is
-- WATCH overdue too (so the watch's holder is gone as well: a restarted
-- worker or a waiting worker's probe re-arms it then).
local function head_stale(armed, watch)
  return armed + GRACE <= now or (watch ~= nil and armed + WATCH <= watch and watch + WATCH <= now)
end

-- A baton: a member of the marker sorted set, named and scored by the
-- time its holder is to claim at (never in the past: a due event's baton
-- is named by now). BZPOPMIN hands each to exactly one waiting worker,
-- earliest first; two batons for one time are one. The watch baton `w`
-- goes in with it unless one out checks in time: its holder checks, WATCH
-- after the head's time, that someone claimed with it (watch.lua).
-- Returns the watch's time.
local function put_baton(at, watch)
  if needs_watch(at, watch) then
    watch = at + WATCH
    redis.call('ZADD', K_MARKER, fmt(at), fmt(at), fmt(watch), 'w')
  else
    redis.call('ZADD', K_MARKER, fmt(at), fmt(at))
  end
  return watch
end

-- This script made something happen at `at` (a job due, or a lease that
-- runs out if `lease`): wake the chain for it if it comes before the
-- chain head, or if there is no live chain head. Returns the new meta
-- field, or nil if it is unchanged.
local function arm_event(raw_meta, at, lease)
  local armed, lease_lb, watch = parse_meta(raw_meta)
  local changed = false
  if lease and (not lease_lb or at < lease_lb) then
    lease_lb = at
    changed = true
  end
  local e = math.max(at, now)
  local stale = armed and head_stale(armed, watch)
  if not armed or e < armed or stale then
    -- A stale chain head (nobody claimed at its time): wake now.
    if stale then e = now end
    watch = put_baton(e, watch)
    armed = e
    changed = true
  end
  if changed then return meta(armed, lease_lb, watch) end
  return nil
end
