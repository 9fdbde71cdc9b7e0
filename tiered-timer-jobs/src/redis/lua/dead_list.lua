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
  local fields = redis.call('HMGET', K_JOB, L(id), E(id))
  out[#out + 1] = id
  out[#out + 1] = tonumber(rows[i + 1])
  out[#out + 1] = parse_lease(fields[1])
  out[#out + 1] = redis.call('HSTRLEN', K_JOB, P(id))
  out[#out + 1] = fields[2]
end
return out
