-- A page of one partition's jobs (after the shared prelude).
-- ARGV: which ('waiting': by due time; 'due': waiting and due by Redis'
-- now, most overdue first; 'leased': by lease expiry; 'dead': newest death
-- first), offset, count (at least 1), preview (payload bytes to return).
-- Returns {now, total in this listing, then per job: id, score (ms),
-- attempts, payload bytes, payload preview, last error or false}.
local which, offset, count = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local preview = tonumber(ARGV[4])
local last = offset + count - 1
local rows, total
if which == 'waiting' then
  total = redis.call('ZCARD', K_DUE)
  rows = redis.call('ZRANGE', K_DUE, offset, last, 'WITHSCORES')
elseif which == 'due' then
  total = redis.call('ZCOUNT', K_DUE, '-inf', now)
  rows = redis.call('ZRANGEBYSCORE', K_DUE, '-inf', now, 'WITHSCORES', 'LIMIT', offset, count)
elseif which == 'leased' then
  total = redis.call('ZCARD', K_LEASED)
  rows = redis.call('ZRANGE', K_LEASED, offset, last, 'WITHSCORES')
elseif which == 'dead' then
  total = redis.call('ZCARD', K_DEAD)
  rows = redis.call('ZREVRANGE', K_DEAD, offset, last, 'WITHSCORES')
else
  return redis.error_reply('unknown listing ' .. which)
end
local out = {now, total}
for i = 1, #rows, 2 do
  local id = rows[i]
  local payload = redis.call('HGET', K_PAYLOAD, id) or ''
  out[#out + 1] = id
  out[#out + 1] = tonumber(rows[i + 1])
  out[#out + 1] = tonumber(redis.call('HGET', K_ATTEMPT, id) or '0')
  out[#out + 1] = #payload
  out[#out + 1] = string.sub(payload, 1, preview)
  out[#out + 1] = redis.call('HGET', K_ERROR, id)
end
return out
