-- Defines `record_lateness(key, late_ms)`, for the claim script: counts
-- the claims of one batch in the lateness histogram `key` (a partition's
-- `ttr:T:lateness`) with ONE `BITFIELD`, whatever the batch's size.
-- `late_ms` is a list of lateness values in ms (Redis' now minus the due
-- time of each job claimed from the due set). Bucket `i` (0-based) counts
-- lateness up to the i-th bound of `LATENESS_BOUNDS_MS` in src/data/lateness.rs
-- (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000,
-- 60000, 300000, 900000, 3600000 ms) and above the bound before; the last
-- bucket everything later. The counters are `u32`s that saturate, never
-- wrap. (An if-chain rather than a table of the bounds: this runs in
-- every claim, and a table would be built in every one.)
local function lateness_bucket(ms)
  if ms <= 50 then
    if ms <= 2 then
      if ms <= 0 then return '#0' elseif ms <= 1 then return '#1' end
      return '#2'
    end
    if ms <= 5 then return '#3' elseif ms <= 10 then return '#4' elseif ms <= 20 then return '#5' end
    return '#6'
  end
  if ms <= 100 then return '#7' elseif ms <= 200 then return '#8' elseif ms <= 500 then return '#9' end
  if ms <= 1000 then return '#10' elseif ms <= 2000 then return '#11' elseif ms <= 5000 then return '#12' end
  if ms <= 10000 then return '#13' elseif ms <= 30000 then return '#14' elseif ms <= 60000 then return '#15' end
  if ms <= 300000 then return '#16' elseif ms <= 900000 then return '#17' elseif ms <= 3600000 then return '#18' end
  return '#19'
end
local function record_lateness(key, late_ms)
  if #late_ms == 1 then
    -- One job (most claims): no tables to build.
    redis.call('BITFIELD', key, 'OVERFLOW', 'SAT', 'INCRBY', 'u32', lateness_bucket(late_ms[1]), 1)
    return
  end
  local counts, order = {}, {}
  for _, ms in ipairs(late_ms) do
    local b = lateness_bucket(ms)
    local c = counts[b]
    if c then counts[b] = c + 1 else counts[b] = 1; order[#order + 1] = b end
  end
  local args, k = {'OVERFLOW', 'SAT'}, 2
  for _, b in ipairs(order) do
    args[k + 1], args[k + 2], args[k + 3], args[k + 4] = 'INCRBY', 'u32', b, counts[b]
    k = k + 4
  end
  redis.call('BITFIELD', key, unpack(args))
end
