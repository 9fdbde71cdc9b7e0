-- Defines `record_lateness(key, late_ms)`, for the claim script: counts
-- the claims of one batch in the lateness histogram `key` (a partition's
-- `ttr:T:lateness`) with ONE `BITFIELD`, whatever the batch's size.
-- `late_ms` is a list of lateness values in ms (Redis' now minus the due
-- time of each job claimed from the due set). Bucket `i` (0-based) counts
-- lateness <= LATENESS_BOUNDS[i + 1] and above the bound before; the last
-- bucket everything later. The counters are `u32`s that saturate, never
-- wrap. Keep the bounds equal to `LATENESS_BOUNDS_MS` in src/keys.rs.
local LATENESS_BOUNDS = {
  0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000,
  60000, 300000, 900000, 3600000,
}
local function record_lateness(key, late_ms)
  local counts = {}
  for _, ms in ipairs(late_ms) do
    local bucket = #LATENESS_BOUNDS
    for i, bound in ipairs(LATENESS_BOUNDS) do
      if ms <= bound then
        bucket = i - 1
        break
      end
    end
    counts[bucket] = (counts[bucket] or 0) + 1
  end
  local args = {'OVERFLOW', 'SAT'}
  for bucket = 0, #LATENESS_BOUNDS do
    if counts[bucket] then
      args[#args + 1] = 'INCRBY'
      args[#args + 1] = 'u32'
      args[#args + 1] = '#' .. bucket
      args[#args + 1] = counts[bucket]
    end
  end
  if #args > 2 then redis.call('BITFIELD', key, unpack(args)) end
end
