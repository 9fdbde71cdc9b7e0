-- Records a queue's partition count in the registry at its first
-- connect; returns the recorded count, so that a handle built with another
-- count can say so.
--
-- KEYS: the registry (`ttr:queues`). ARGV: the queue's name, its count.
local recorded = redis.call('HGET', KEYS[1], ARGV[1])
if recorded then return tonumber(recorded) end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return tonumber(ARGV[2])
