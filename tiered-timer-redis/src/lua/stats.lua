-- One partition's numbers, read at one instant of Redis' clock. No ARGV.
--
-- Returns `{now, pending, due now, earliest due, leased, expired leases,
-- earliest lease expiry, dead, latest death}`, times in ms since the
-- epoch, `-1` where there is no such job.
local function first(key, index)
  local found = redis.call('ZRANGE', key, index, index, 'WITHSCORES')
  if found[2] then return tonumber(found[2]) end
  return -1
end
return {
  now,
  redis.call('ZCARD', K_DUE),
  redis.call('ZCOUNT', K_DUE, '-inf', now),
  first(K_DUE, 0),
  redis.call('ZCARD', K_LEASED),
  redis.call('ZCOUNT', K_LEASED, '-inf', now),
  first(K_LEASED, 0),
  redis.call('ZCARD', K_DEAD),
  first(K_DEAD, -1),
}
