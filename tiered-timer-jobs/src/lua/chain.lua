-- The wake-up chain's helpers (after time.lua and prelude.lua).

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
