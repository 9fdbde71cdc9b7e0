-- Acks many jobs of one partition, each fenced by its token as ack.lua
-- is (the caller leaves out those whose lease ran out by its estimate),
-- counted processed with one HINCRBY (after throughput.lua).
--
-- ARGV: id, token, id, token, ... (at most 1 000 jobs). Returns the ids
-- whose lease was lost (nothing changed for them).
local fields = {}
for i = 1, #ARGV, 2 do fields[#fields + 1] = L(ARGV[i]) end
local leases = redis.call('HMGET', K_JOB, unpack(fields))
local done, gone, lost = {}, {}, {}
for j = 1, #leases do
  local id, token = ARGV[2 * j - 1], ARGV[2 * j]
  local _, held = parse_lease(leases[j])
  if held == token then
    done[#done + 1] = id
    gone[#gone + 1] = P(id)
    gone[#gone + 1] = L(id)
    gone[#gone + 1] = E(id)
    gone[#gone + 1] = H(id)
    gone[#gone + 1] = C(id)
  else
    lost[#lost + 1] = id
  end
end
if #done > 0 then
  redis.call('ZREM', K_TIMELINE, unpack(done))
  redis.call('HDEL', K_JOB, unpack(gone))
  tally('p', #done)
end
return lost
