-- A page of one partition's jobs (after the shared prelude).
-- ARGV: which ('waiting': by due time; 'due': waiting and due by Redis'
-- now, most overdue first; 'leased': by lease expiry; 'dead': newest death
-- first), offset, count (at least 1), preview (payload bytes to return).
-- Returns {now, total in this listing, then per job: id, score (ms),
-- attempts, payload bytes, payload preview, last error or false}.
local which, offset, count = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local preview = tonumber(ARGV[4])
local last = offset + count - 1
local before_leased = '(' .. fmt(LEASED)
local rows, total
local less = 0
if which == 'waiting' then
  total = redis.call('ZCOUNT', K_TIMELINE, '-inf', before_leased)
  rows = redis.call('ZRANGEBYSCORE', K_TIMELINE, '-inf', before_leased, 'WITHSCORES', 'LIMIT', offset, count)
elseif which == 'due' then
  total = redis.call('ZCOUNT', K_TIMELINE, '-inf', fmt(now))
  rows = redis.call('ZRANGEBYSCORE', K_TIMELINE, '-inf', fmt(now), 'WITHSCORES', 'LIMIT', offset, count)
elseif which == 'leased' then
  total = redis.call('ZCOUNT', K_TIMELINE, fmt(LEASED), '+inf')
  rows = redis.call('ZRANGEBYSCORE', K_TIMELINE, fmt(LEASED), '+inf', 'WITHSCORES', 'LIMIT', offset, count)
  less = LEASED
elseif which == 'dead' then
  total = redis.call('ZCARD', K_DEAD)
  rows = redis.call('ZREVRANGE', K_DEAD, offset, last, 'WITHSCORES')
else
  return redis.error_reply('unknown listing ' .. which)
end
local out = {now, total}
for i = 1, #rows, 2 do
  local id = rows[i]
  local fields = redis.call('HMGET', K_JOB, P(id), L(id), E(id))
  local payload = fields[1] or ''
  out[#out + 1] = id
  out[#out + 1] = tonumber(rows[i + 1]) - less
  out[#out + 1] = (parse_lease(fields[2]))
  out[#out + 1] = #payload
  out[#out + 1] = string.sub(payload, 1, preview)
  out[#out + 1] = fields[3]
end
return out
