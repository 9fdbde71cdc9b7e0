-- Moves a dead letter back to the waiting jobs, due now, with its attempt
-- count reset and its last error cleared. ARGV: id, channel. Returns 1,
-- or 0 if it was not dead.
local id, channel = ARGV[1], ARGV[2]
if not revive(id) then return 0 end
announce(id, now, channel)
return 1
