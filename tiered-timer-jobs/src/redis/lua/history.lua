-- A job's attempt history (after time.lua and prelude.lua): the `h`
-- field holds its ended attempts, oldest first, at most HISTORY of them;
-- the running one is its `l` field's claim time and holder. Each ended
-- attempt is
--
--   attempt,claimed,ended,outcome,holder bytes,error bytes:holder error
--
-- (times in ms, Redis' clock; error bytes -1: none), so that the next can
-- be found without reading the text. Outcomes: r retried, f failed, l
-- released, x lease expired, b buried (src/redis/operator.rs reads
-- them). The same bounds as src/data/history.rs.
local HISTORY, ERROR_KEPT = 16, 1024

-- The `h` field `raw` (nil: none) with the attempt `attempt` claimed at
-- `claimed` by `holder` appended, ended now with `outcome` and `error`
-- (nil: none), the oldest dropped beyond HISTORY. nil if the attempt's
-- claim was not recorded (claimed by an earlier version): `raw` is kept.
local function ended_attempt(raw, attempt, claimed, holder, outcome, error)
  if not claimed then return raw end
  holder = holder or ''
  local elen = -1
  if error then
    error = string.sub(error, 1, ERROR_KEPT)
    elen = #error
  else
    error = ''
  end
  local entry = fmt(attempt) .. ',' .. fmt(claimed) .. ',' .. fmt(now) .. ',' .. outcome
    .. ',' .. #holder .. ',' .. elen .. ':' .. holder .. error
  if not raw then return entry end
  -- Walk the entries (at most HISTORY) to count them and find the second.
  local count, pos, second = 0, 1, nil
  while pos <= #raw do
    local head, hlen, elen_at = string.match(raw, '^([^:]-,(%d+),(%-?%d+)):', pos)
    if not head then return entry end -- unreadable: the history starts again
    count = count + 1
    pos = pos + #head + 1 + tonumber(hlen) + math.max(tonumber(elen_at), 0)
    if count == 1 then second = pos end
  end
  if count >= HISTORY then raw = string.sub(raw, second) end
  return raw .. entry
end

-- `fields` (an HSET's field-value list) with `id`'s `h` field set to
-- `history`, unless that is nil.
local function with_history(fields, id, history)
  if history then
    fields[#fields + 1] = H(id)
    fields[#fields + 1] = history
  end
  return fields
end
