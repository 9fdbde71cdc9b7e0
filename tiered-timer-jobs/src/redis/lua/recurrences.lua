-- Every recurrence of the partition (after recur_lib.lua), with what
-- became of its last occurrence's job. No ARGV. Returns {now, then per
-- recurrence: name, definition, state, last job's state ('leased',
-- 'waiting', 'dead' or '' for gone or none), its last error or ''}.
local reply = {now}
local fields = redis.call('HKEYS', K_RECUR)
table.sort(fields)
for _, field in ipairs(fields) do
  if string.sub(field, 1, 1) == 'd' then
    local name = string.sub(field, 2)
    local got = redis.call('HMGET', K_RECUR, field, 's' .. name)
    local s = parse_state(got[2])
    local fate, err = '', ''
    if s and s.last then
      local id = name .. '@' .. s.last[2]
      local score = redis.call('ZSCORE', K_TIMELINE, id)
      if score then
        fate = tonumber(score) >= LEASED and 'leased' or 'waiting'
      elseif redis.call('ZSCORE', K_DEAD, id) then
        fate = 'dead'
      end
      err = redis.call('HGET', K_JOB, E(id)) or ''
    end
    reply[#reply + 1] = name
    reply[#reply + 1] = got[1]
    reply[#reply + 1] = got[2] or ''
    reply[#reply + 1] = fate
    reply[#reply + 1] = err
  end
end
return reply
