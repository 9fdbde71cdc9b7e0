-- A page of dead letters, newest death first. ARGV: offset, count (at
-- least 1).
--
-- Returns `{now, id, died at, attempts, payload bytes, last error or nil,
-- ...}` (five fields per dead letter).
local offset, count = tonumber(ARGV[1]), tonumber(ARGV[2])
local rows = redis.call('ZREVRANGE', K_DEAD, offset, offset + count - 1, 'WITHSCORES')
local out = {now}
for i = 1, #rows, 2 do
  local id = rows[i]
  out[#out + 1] = id
  out[#out + 1] = tonumber(rows[i + 1])
  out[#out + 1] = tonumber(redis.call('HGET', K_ATTEMPT, id) or '0')
  out[#out + 1] = redis.call('HSTRLEN', K_PAYLOAD, id)
  out[#out + 1] = redis.call('HGET', K_ERROR, id)
end
return out
