-- Moves a dead letter back to the waiting jobs, due now, with its attempt
-- count reset and its last error cleared (after revive.lua). ARGV: id.
-- Returns 1, or 0 if it was not dead.
if not revive(ARGV[1]) then return 0 end
arm_now()
return 1
