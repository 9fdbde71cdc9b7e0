-- Checks that the caller holds the live lease of ARGV[1] with token
-- ARGV[2] (its token, and its expiry against Redis' now): returns early
-- with 0 if not. Defines `id`, `attempts` and `deadline` for the script
-- that follows.
local id, token = ARGV[1], ARGV[2]
local attempts, held, deadline = parse_lease(redis.call('HGET', K_JOB, L(id)))
if held ~= token then return 0 end
local expiry = tonumber(redis.call('ZSCORE', K_TIMELINE, id) or '0') - LEASED
if expiry <= now then return 0 end
