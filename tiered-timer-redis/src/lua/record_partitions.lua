-- Records a queue's partition count at its first connect; returns the
-- recorded count, so that a handle built with another count can say so.
--
-- KEYS: the queue's config hash (`ttr:{name}:config`). ARGV: the count.
local recorded = redis.call('HGET', KEYS[1], 'partitions')
if recorded then return tonumber(recorded) end
redis.call('HSET', KEYS[1], 'partitions', ARGV[1])
return tonumber(ARGV[1])
