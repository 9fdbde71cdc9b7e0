-- The partition's counts per minute (after throughput.lua): ARGV: since
-- (ms). Returns {now, then minute, processed, failed per minute from the
-- one holding `since` (or the oldest kept) to now that has a count}.
local last = math.floor(now / 60000)
local first = math.min(math.max(math.floor(tonumber(ARGV[1]) / 60000), last - KEEP + 1), last)
local fields = {}
for m = first, last do
  fields[#fields + 1] = 'p' .. m
  fields[#fields + 1] = 'f' .. m
end
local got = redis.call('HMGET', K_THROUGHPUT, unpack(fields))
local out = {now}
for i = 1, #got, 2 do
  if got[i] or got[i + 1] then
    out[#out + 1] = first + (i - 1) / 2
    out[#out + 1] = tonumber(got[i] or 0)
    out[#out + 1] = tonumber(got[i + 1] or 0)
  end
end
return out
