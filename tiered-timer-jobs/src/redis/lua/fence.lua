-- Checks that the caller holds the live lease of ARGV[1] with token
-- ARGV[2] (its token, and its expiry against Redis' now): returns early
-- with 0 if not. Defines `id`, `attempts`, `deadline`, the attempt's
-- `claimed` and `holder`, and the job's ended attempts `history` (its `h`
-- field) for the script that follows.
local id, token = ARGV[1], ARGV[2]
local lease_field, history = unpack(redis.call('HMGET', K_JOB, L(id), H(id)))
local attempts, held, deadline, claimed, holder = parse_lease(lease_field)
if not history then history = nil end
if held ~= token then return 0 end
local expiry = tonumber(redis.call('ZSCORE', K_TIMELINE, id) or '0') - LEASED
if expiry <= now then return 0 end
