-- The keys of one partition (see src/redis/keys.rs), the layout's constants and
-- the helpers every script shares (kept small: it runs on every call).
local K_TIMELINE, K_JOB, K_DEAD, K_MARKER = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local K_LATENESS = KEYS[5]
-- The partition's recurrences (see recur.lua).
local K_RECUR = KEYS[6]
-- The partition's counts per minute (see throughput.lua).
local K_THROUGHPUT = KEYS[7]

-- A leased job sits in the timeline at LEASED + its lease expiry (ms), a
-- waiting job at its due time: scores below LEASED are waiting jobs, and
-- 2^52 + any time before the year 142 000 is still exact in a double.
local LEASED = 4503599627370496
-- How long past its time the chain head may go unclaimed before any
-- script that notices re-arms the chain (its holder died or hung): the
-- last line, behind the watch baton (see chain.lua).
local GRACE = 10000
-- The watch baton's holder checks the chain head this long after its
-- time, and re-arms it if nobody claimed with it.
local WATCH = 2000
-- The most extra batons a claim puts in for a backlog (see claim.lua).
local EXTRAS = 32
-- How many due jobs left behind a claim make a backlog: from then on every
-- worker claims at once instead of one after the other (see claim.lua).
local BACKLOG = 8
-- A claim looks for a backlog only when its first job was more than this
-- late (ms).
local LATE = 20

local function fmt(n) return string.format('%d', n) end
-- A job's fields in the job hash: payload, lease (or attempts), last
-- error, ended attempts, when it was created.
local function P(id) return 'p' .. id end
local function L(id) return 'l' .. id end
local function E(id) return 'e' .. id end
local function H(id) return 'h' .. id end
local function C(id) return 'c' .. id end

-- The `l` field: "attempts" for a job delivered before and now waiting (or
-- dead); "attempts token deadline claimed holder" while leased (without
-- "claimed holder" if an earlier version claimed it). Returns attempts (0
-- for a job never delivered), token, deadline, claim time and holder (nil
-- unless leased, or unrecorded).
local function parse_lease(raw)
  if not raw then return 0, nil, nil end
  local a, token, deadline, rest = string.match(raw, '^(%d+) (%S+) (%d+)(.*)$')
  if a then
    local claimed, holder = string.match(rest, '^ (%d+) (.*)$')
    return tonumber(a), token, tonumber(deadline), tonumber(claimed), holder
  end
  return tonumber(raw), nil, nil
end
