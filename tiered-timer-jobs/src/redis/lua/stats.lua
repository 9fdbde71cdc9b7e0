-- One partition's numbers, read at one instant of Redis' clock. No ARGV.
--
-- Returns `{now, pending, due now, earliest due, leased, expired leases,
-- earliest lease expiry, dead, latest death}`, times in ms since the
-- epoch, `-1` where there is no such job.
local function score(found, less)
  if found[2] then return tonumber(found[2]) - less end
  return -1
end
return {
  now,
  redis.call('ZCOUNT', K_TIMELINE, '-inf', '(' .. fmt(LEASED)),
  redis.call('ZCOUNT', K_TIMELINE, '-inf', fmt(now)),
  score(redis.call('ZRANGEBYSCORE', K_TIMELINE, '-inf', '(' .. fmt(LEASED), 'WITHSCORES', 'LIMIT', 0, 1), 0),
  redis.call('ZCOUNT', K_TIMELINE, fmt(LEASED), '+inf'),
  redis.call('ZCOUNT', K_TIMELINE, fmt(LEASED), fmt(LEASED + now)),
  score(redis.call('ZRANGEBYSCORE', K_TIMELINE, fmt(LEASED), '+inf', 'WITHSCORES', 'LIMIT', 0, 1), LEASED),
  redis.call('ZCARD', K_DEAD),
  score(redis.call('ZRANGE', K_DEAD, -1, -1, 'WITHSCORES'), 0),
}
