-- Counting jobs processed and attempts failed per minute (after time.lua
-- and prelude.lua), in the partition's `ttr:T:throughput` hash: `p<minute>`
-- and `f<minute>` (minutes since the epoch, Redis' clock), kept for KEEP
-- minutes (src/data/history.rs' THROUGHPUT_MINUTES).
local KEEP = 1440

-- Adds `n` to this minute's count of `kind` ('p' processed, 'f' failed):
-- one HINCRBY. The first count of a kind in a minute also deletes the
-- minutes that fell out of the last KEEP: from the cursor `c` (every
-- older minute is gone already) up to a day ago. A minute's counts are
-- written only in that minute, after such a deletion, so at most KEEP + 1
-- minutes past the cursor can hold counts: that bounds the deletion after
-- a long idle spell as well.
local function tally(kind, n)
  local minute = math.floor(now / 60000)
  if redis.call('HINCRBY', K_THROUGHPUT, kind .. minute, n) ~= n then return end
  local oldest = minute - KEEP + 1
  local cursor = tonumber(redis.call('HGET', K_THROUGHPUT, 'c'))
  if cursor and cursor >= oldest then return end
  if cursor then
    local stale = {}
    for m = cursor, math.min(oldest - 1, cursor + KEEP) do
      stale[#stale + 1] = 'p' .. m
      stale[#stale + 1] = 'f' .. m
    end
    redis.call('HDEL', K_THROUGHPUT, unpack(stale))
  end
  redis.call('HSET', K_THROUGHPUT, 'c', fmt(oldest))
end
