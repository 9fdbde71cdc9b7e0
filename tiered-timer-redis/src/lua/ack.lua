-- Acks a job: removes it for good. ARGV: id, token.
-- Returns 1, or 0 if the lease was lost (nothing changed).
redis.call('ZREM', K_LEASED, id)
forget(id)
return 1
