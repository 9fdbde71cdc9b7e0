-- Redis' clock, read once per script (never passed in by a client).
-- `redis.replicate_commands()` lets Redis 5 and 6 write after reading
-- `TIME` (it replicates the effects, not the script); Redis 7, which
-- always does, is told by its `REDIS_VERSION_NUM` and skips the call.
if not redis.REDIS_VERSION_NUM then pcall(redis.replicate_commands) end
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
-- Now, in whole milliseconds rounded down; due times are rounded up, so
-- "due <= now" means the due time has passed: never early.
local now = math.floor(now_us / 1000)
