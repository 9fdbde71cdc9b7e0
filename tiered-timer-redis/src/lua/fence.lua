-- Checks that the caller holds the live lease of ARGV[1] with token
-- ARGV[2]: returns early with 0 if not.
local id, token = ARGV[1], ARGV[2]
if redis.call('HGET', K_TOKEN, id) ~= token then return 0 end
local expiry = redis.call('ZSCORE', K_LEASED, id)
if not expiry or tonumber(expiry) <= now then return 0 end
