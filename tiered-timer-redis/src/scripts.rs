//! The Lua scripts: every state change of a job is one of these, so each
//! is atomic on the Redis node that holds the job's partition.
//!
//! Ground rules:
//!
//! * Time is read once per script with `TIME`, never passed in by a
//!   client, so a client whose clock is off changes nothing. (Redis 7
//!   replicates a script's effects, not the script, so reading `TIME`
//!   before writing is allowed; `redis.replicate_commands()` asks for the
//!   same on Redis 3.2 to 6.)
//! * A due time is rounded *up* to a whole millisecond and "now" *down*,
//!   so "due <= now" in whole milliseconds implies the due time has passed
//!   by Redis' clock: never early.
//! * Every script takes the nine keys of [`Keys`](crate::keys::Keys) in
//!   their order, so one partition's scripts always run in one slot.
//! * A lease is fenced by a token: only the holder of the current token,
//!   before the lease's expiry by Redis' clock, may ack, retry, extend or
//!   release the job. A lease that ran out is never renewed: extending
//!   checks the expiry against `TIME` inside the same script.
//! * A script that reports "nothing to claim" also reports how long until
//!   something may be claimable, in milliseconds *from Redis' now*, so the
//!   caller sleeps a duration and never compares its clock with Redis'.

use std::sync::LazyLock;

use redis::Script;

/// The preamble every script shares: `now_us`, `now` (ms, rounded down).
const PRELUDE: &str = r#"
pcall(redis.replicate_commands)
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = math.floor(now_us / 1000)
local K_DUE, K_LEASED, K_DEAD = KEYS[1], KEYS[2], KEYS[3]
local K_PAYLOAD, K_ATTEMPT, K_DEADLINE, K_TOKEN = KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local K_ERROR = KEYS[8]

-- Tells waiters that `id` is due at `due` if it is now the earliest job.
local function announce(id, due, channel)
  local first = redis.call('ZRANGE', K_DUE, 0, 0)
  if first[1] == id then
    local wait = due - now
    if wait < 0 then wait = 0 end
    redis.call('PUBLISH', channel, string.format('%d', wait))
  end
end

-- Deletes everything stored about a job but its place in the sets.
local function forget(id)
  redis.call('HDEL', K_PAYLOAD, id)
  redis.call('HDEL', K_ATTEMPT, id)
  redis.call('HDEL', K_DEADLINE, id)
  redis.call('HDEL', K_TOKEN, id)
  redis.call('HDEL', K_ERROR, id)
end

-- Ends a held job's lease and makes it due `delay` ms after now (rounded
-- up, so never early), with that as its deadline (a waiting job's deadline
-- is its due score, so the field goes); wakes waiters if it is now the
-- earliest.
local function reschedule(id, delay, channel)
  redis.call('ZREM', K_LEASED, id)
  redis.call('HDEL', K_TOKEN, id)
  redis.call('HDEL', K_DEADLINE, id)
  local due = math.floor((now_us + 999) / 1000) + delay
  redis.call('ZADD', K_DUE, string.format('%d', due), id)
  announce(id, due, channel)
end

-- Moves a job to the dead letters; keeps its payload and attempt count,
-- and records `reason` (if given) as its last error.
local function bury(id, reason)
  redis.call('ZREM', K_LEASED, id)
  redis.call('ZREM', K_DUE, id)
  redis.call('HDEL', K_TOKEN, id)
  redis.call('ZADD', K_DEAD, now, id)
  if reason then redis.call('HSET', K_ERROR, id, reason) end
end

-- Why a job out of attempts died: `what`, and the last error a worker
-- gave for it, if any.
local function out_of_attempts(id, what)
  local last = redis.call('HGET', K_ERROR, id)
  if last then return what .. ' (last error: ' .. last .. ')' end
  return what
end
"#;

/// Schedules a job unless its id is already waiting or leased.
///
/// ARGV: id, mode (`d`: ARGV[3] is a delay in ms from Redis' now; `a`: an
/// absolute due time in ms since the epoch), value, payload, channel.
/// Returns `{1, due}` when written, `{0, due or lease expiry}` when the id
/// was already there (nothing changed).
const SCHEDULE: &str = r#"
local id, mode, value, payload, channel = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5]
local existing = redis.call('ZSCORE', K_DUE, id) or redis.call('ZSCORE', K_LEASED, id)
if existing then
  return {0, tonumber(existing)}
end
local due
if mode == 'd' then
  due = math.floor((now_us + 999) / 1000) + value
else
  due = value
end
-- A waiting job is its score in the due set and its payload, nothing
-- more: the attempt count and the deadline are written when it is
-- delivered (memory per pending job). Only a dead letter replaced by
-- this id has other fields to clear.
if redis.call('ZREM', K_DEAD, id) == 1 then
  redis.call('HDEL', K_ATTEMPT, id)
  redis.call('HDEL', K_DEADLINE, id)
  redis.call('HDEL', K_TOKEN, id)
  redis.call('HDEL', K_ERROR, id)
end
redis.call('HSET', K_PAYLOAD, id, payload)
redis.call('ZADD', K_DUE, string.format('%d', due), id)
announce(id, due, channel)
return {1, due}
"#;

/// Schedules a chunk of jobs of one partition at once (see
/// [`Queue::schedule_many`](crate::Queue::schedule_many)): each job as
/// [`SCHEDULE`] would, except that delays count from one "now" for the
/// whole chunk, and at most one wake-up is published.
///
/// ARGV: channel, mode (`d`: each value is a delay in ms from the base;
/// `a`: an absolute due time in ms), base (ms since the epoch; empty: this
/// script's `TIME`, rounded up), then `id, value, payload` per job (at
/// most [`CHUNK_JOBS`](crate::queue::CHUNK_JOBS) jobs, so the `unpack`s
/// below stay far under Lua's limit of 8 000 values). Returns `{written,
/// base}`: how many jobs were new (an id already waiting or leased, or
/// seen earlier in the chunk, is left alone), and the base used, for the
/// next chunk of the same call.
///
/// All reads come first, all writes after, and nothing between them can
/// fail on input the caller checked: a chunk is written entirely or not
/// at all.
const SCHEDULE_MANY: &str = r#"
local channel, mode = ARGV[1], ARGV[2]
local base = tonumber(ARGV[3]) or math.floor((now_us + 999) / 1000)
local any_dead = redis.call('ZCARD', K_DEAD) > 0
local asked = {}
for i = 4, #ARGV, 3 do asked[#asked + 1] = ARGV[i] end
-- Which ids are waiting or leased already: one ZMSCORE per set (Redis
-- 6.2+), else one ZSCORE per id.
local function present(key)
  local found = redis.pcall('ZMSCORE', key, unpack(asked))
  if type(found) == 'table' and found.err == nil then return found end
  found = {}
  for j, id in ipairs(asked) do found[j] = redis.call('ZSCORE', key, id) end
  return found
end
local waiting, leased = present(K_DUE), present(K_LEASED)
local ids, scored, fields, revived, mine = {}, {}, {}, {}, {}
for j, id in ipairs(asked) do
  local i = 4 + 3 * (j - 1)
  if not mine[id] and not waiting[j] and not leased[j] then
    local due = tonumber(ARGV[i + 1])
    if mode == 'd' then due = base + due end
    mine[id] = true
    ids[#ids + 1] = id
    scored[#scored + 1] = string.format('%d', due)
    scored[#scored + 1] = id
    fields[#fields + 1] = id
    fields[#fields + 1] = ARGV[i + 2]
    -- Only a dead letter has fields to clear (acked, cancelled and
    -- purged jobs leave none): replace it as SCHEDULE does.
    if any_dead and redis.call('ZSCORE', K_DEAD, id) then revived[#revived + 1] = id end
  end
end
if #ids == 0 then return {0, base} end
if #revived > 0 then
  redis.call('ZREM', K_DEAD, unpack(revived))
  redis.call('HDEL', K_ATTEMPT, unpack(revived))
  redis.call('HDEL', K_DEADLINE, unpack(revived))
  redis.call('HDEL', K_TOKEN, unpack(revived))
  redis.call('HDEL', K_ERROR, unpack(revived))
end
-- A waiting job is its score in the due set and its payload, nothing more.
redis.call('HSET', K_PAYLOAD, unpack(fields))
redis.call('ZADD', K_DUE, unpack(scored))
-- One wake-up, and only if a job of this chunk is now the earliest.
local first = redis.call('ZRANGE', K_DUE, 0, 0, 'WITHSCORES')
if mine[first[1]] then
  local wait = tonumber(first[2]) - now
  if wait < 0 then wait = 0 end
  redis.call('PUBLISH', channel, string.format('%d', wait))
end
return {#ids, base}
"#;

/// Claims the earliest claimable job: first a job whose lease ran out
/// (its worker died or overran), then the earliest due job.
///
/// ARGV: lease ms, max attempts, token.
/// Returns `{1, id, payload, deadline, attempt, lease expiry, expired,
/// buried}` for a claimed job, `{0, wait, buried}` otherwise, where `wait`
/// is the time in ms from Redis' now until the earliest due time or lease
/// expiry (`-1`: none), `expired` is 1 if the job was taken back from a
/// lease that ran out (0 if it was waiting), and `buried` lists the ids
/// this call moved to the dead letters (for the caller's tracing).
const CLAIM: &str = r#"
local lease, max_attempts, token = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local buried = {}
-- `due` is the job's score in the due set, or nil for a job taken back
-- from a lost lease. A waiting job's deadline is its due score (schedule,
-- retry, release and requeue all keep it so); it is written to the
-- deadline hash only while the job is leased, for a redelivery after a
-- lost lease or a release to read.
local function deliver(id, expired, due)
  local attempt = redis.call('HINCRBY', K_ATTEMPT, id, 1)
  local expiry = now + lease
  redis.call('ZADD', K_LEASED, string.format('%d', expiry), id)
  redis.call('HSET', K_TOKEN, id, token)
  local payload = redis.call('HGET', K_PAYLOAD, id) or ''
  local deadline = due or tonumber(redis.call('HGET', K_DEADLINE, id) or now)
  if due then redis.call('HSET', K_DEADLINE, id, string.format('%d', due)) end
  return {1, id, payload, deadline, attempt, expiry, expired, buried}
end
-- Expired leases first: their jobs have waited longest. Those out of
-- attempts go to the dead letters; bounded so one call stays short.
for _ = 1, 64 do
  local expired = redis.call('ZRANGEBYSCORE', K_LEASED, '-inf', now, 'LIMIT', 0, 1)
  local id = expired[1]
  if not id then break end
  local attempt = tonumber(redis.call('HGET', K_ATTEMPT, id) or '0')
  if attempt >= max_attempts then
    bury(id, out_of_attempts(id, string.format('lease expired after %d attempt(s)', attempt)))
    buried[#buried + 1] = id
  else
    return deliver(id, 1)
  end
end
local due = redis.call('ZRANGEBYSCORE', K_DUE, '-inf', now, 'WITHSCORES', 'LIMIT', 0, 1)
if due[1] then
  redis.call('ZREM', K_DUE, due[1])
  return deliver(due[1], 0, tonumber(due[2]))
end
local wait = -1
local next_due = redis.call('ZRANGE', K_DUE, 0, 0, 'WITHSCORES')
if next_due[2] then wait = tonumber(next_due[2]) - now end
local next_expiry = redis.call('ZRANGE', K_LEASED, 0, 0, 'WITHSCORES')
if next_expiry[2] then
  local w = tonumber(next_expiry[2]) - now
  if wait < 0 or w < wait then wait = w end
end
if wait == 0 then wait = 1 end
return {0, wait, buried}
"#;

/// Checks that the caller holds the live lease of ARGV[1] with token
/// ARGV[2]: returns early with 0 if not.
const FENCE: &str = r#"
local id, token = ARGV[1], ARGV[2]
if redis.call('HGET', K_TOKEN, id) ~= token then return 0 end
local expiry = redis.call('ZSCORE', K_LEASED, id)
if not expiry or tonumber(expiry) <= now then return 0 end
"#;

/// Acks a job: removes it for good. ARGV: id, token.
/// Returns 1, or 0 if the lease was lost (nothing changed).
const ACK: &str = r#"
redis.call('ZREM', K_LEASED, id)
forget(id)
return 1
"#;

/// Gives a job back to be delivered again after a delay, or buries it if
/// it is out of attempts. ARGV: id, token, delay ms, max attempts,
/// channel. Returns 1 (rescheduled), 2 (buried) or 0 (lease lost,
/// nothing changed).
const RETRY: &str = r#"
local delay, max_attempts, channel = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
local attempt = tonumber(redis.call('HGET', K_ATTEMPT, id) or '0')
if attempt >= max_attempts then
  bury(id, out_of_attempts(id, string.format('retried on its last attempt (%d of %d)', attempt, max_attempts)))
  return 2
end
reschedule(id, delay, channel)
return 1
"#;

/// Cancels a waiting job. ARGV: id. Returns 1 if it was waiting and is
/// now gone, 0 otherwise (leased, dead, or unknown: nothing changed).
const CANCEL: &str = r#"
local id = ARGV[1]
if redis.call('ZREM', K_DUE, id) == 0 then return 0 end
forget(id)
return 1
"#;

/// Moves a dead letter back to the waiting jobs, due now, with its attempt
/// count reset and its last error cleared. ARGV: id, channel. Returns 1,
/// or 0 if it was not dead.
const REQUEUE: &str = r#"
local id, channel = ARGV[1], ARGV[2]
if not revive(id) then return 0 end
announce(id, now, channel)
return 1
"#;

fn code(body: &[&str]) -> String {
    let mut code = String::from(PRELUDE);
    for part in body {
        code.push_str(part);
    }
    code
}

pub(crate) fn script(body: &[&str]) -> Script {
    Script::new(&code(body))
}

pub(crate) static SCHEDULE_SCRIPT: LazyLock<Script> = LazyLock::new(|| script(&[SCHEDULE]));
pub(crate) static SCHEDULE_MANY_SCRIPT: LazyLock<Script> =
    LazyLock::new(|| script(&[SCHEDULE_MANY]));
pub(crate) static CLAIM_SCRIPT: LazyLock<Script> = LazyLock::new(|| script(&[CLAIM]));
pub(crate) static ACK_SCRIPT: LazyLock<Script> = LazyLock::new(|| script(&[FENCE, ACK]));
pub(crate) static RETRY_SCRIPT: LazyLock<Script> = LazyLock::new(|| script(&[FENCE, RETRY]));
pub(crate) static CANCEL_SCRIPT: LazyLock<Script> = LazyLock::new(|| script(&[CANCEL]));
pub(crate) static REQUEUE_SCRIPT: LazyLock<Script> = LazyLock::new(|| script(&[REVIVE, REQUEUE]));

// ---------------------------------------------------------------------
// The operator's view: failures with a reason, statistics, dead letters.
// (Used by `src/failure.rs` and `src/admin.rs`.)
// ---------------------------------------------------------------------

/// Defines `revive(id)`: moves a dead letter back to the waiting jobs, due
/// now, attempts reset and last error cleared; `false` if it was not dead.
const REVIVE: &str = r#"
local function revive(id)
  if redis.call('ZREM', K_DEAD, id) == 0 then return false end
  redis.call('HDEL', K_ATTEMPT, id)
  redis.call('HDEL', K_ERROR, id)
  redis.call('HDEL', K_DEADLINE, id)
  redis.call('ZADD', K_DUE, string.format('%d', now), id)
  return true
end
"#;

/// A held job failed (after [`FENCE`]): records the reason as its last
/// error, then either reschedules it after a delay or, when asked to
/// (`b`) or out of attempts, buries it.
///
/// ARGV: id, token, action (`r`: retry, `b`: bury), delay ms, max
/// attempts, channel, reason. Returns 1 (rescheduled), 2 (buried) or 0
/// (lease lost, nothing changed).
const FAIL: &str = r#"
local action, delay, max_attempts = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local channel, reason = ARGV[6], ARGV[7]
local attempt = tonumber(redis.call('HGET', K_ATTEMPT, id) or '0')
if action == 'b' or attempt >= max_attempts then
  bury(id, reason)
  return 2
end
redis.call('HSET', K_ERROR, id, reason)
reschedule(id, delay, channel)
return 1
"#;

// Leases and shutdown (issue 19): renewing a lease, handing a job back.

/// Renews a lease: it now runs until `lease` ms after Redis' now (which
/// may be sooner than before, if `lease` is shorter). ARGV: id, token,
/// lease ms. Returns the new expiry (ms, Redis' clock), or 0 if the lease
/// was lost (nothing changed).
const EXTEND: &str = r#"
local expiry = now + tonumber(ARGV[3])
redis.call('ZADD', K_LEASED, string.format('%d', expiry), id)
return expiry
"#;

/// Hands a held job back, due at once, without counting the delivery
/// against max attempts. Its deadline (never later than now, since it was
/// claimed) becomes its due score again, so it goes to the front of the
/// waiting jobs (it has waited longest), and a first delivery handed back
/// is stored as it was scheduled: due score and payload only. ARGV: id,
/// token, channel. Returns 1, or 0 if the lease was lost (nothing
/// changed).
const RELEASE: &str = r#"
local channel = ARGV[3]
redis.call('ZREM', K_LEASED, id)
redis.call('HDEL', K_TOKEN, id)
if redis.call('HINCRBY', K_ATTEMPT, id, -1) <= 0 then
  redis.call('HDEL', K_ATTEMPT, id)
end
local due = tonumber(redis.call('HGET', K_DEADLINE, id) or now)
redis.call('HDEL', K_DEADLINE, id)
if due > now then due = now end
redis.call('ZADD', K_DUE, string.format('%d', due), id)
announce(id, due, channel)
return 1
"#;

/// One partition's numbers, read at one instant of Redis' clock. No ARGV.
///
/// Returns `{now, pending, due now, earliest due, leased, expired leases,
/// earliest lease expiry, dead, latest death}`, times in ms since the
/// epoch, `-1` where there is no such job.
const STATS: &str = r#"
local function first(key, index)
  local found = redis.call('ZRANGE', key, index, index, 'WITHSCORES')
  if found[2] then return tonumber(found[2]) end
  return -1
end
return {
  now,
  redis.call('ZCARD', K_DUE),
  redis.call('ZCOUNT', K_DUE, '-inf', now),
  first(K_DUE, 0),
  redis.call('ZCARD', K_LEASED),
  redis.call('ZCOUNT', K_LEASED, '-inf', now),
  first(K_LEASED, 0),
  redis.call('ZCARD', K_DEAD),
  first(K_DEAD, -1),
}
"#;

/// A page of dead letters, newest death first. ARGV: offset, count (at
/// least 1).
///
/// Returns `{now, id, died at, attempts, payload bytes, last error or nil,
/// ...}` (five fields per dead letter).
const DEAD_LIST: &str = r#"
local offset, count = tonumber(ARGV[1]), tonumber(ARGV[2])
local rows = redis.call('ZREVRANGE', K_DEAD, offset, offset + count - 1, 'WITHSCORES')
local out = {now}
for i = 1, #rows, 2 do
  local id = rows[i]
  out[#out + 1] = id
  out[#out + 1] = tonumber(rows[i + 1])
  out[#out + 1] = tonumber(redis.call('HGET', K_ATTEMPT, id) or '0')
  out[#out + 1] = redis.call('HSTRLEN', K_PAYLOAD, id)
  out[#out + 1] = redis.call('HGET', K_ERROR, id)
end
return out
"#;

/// Revives up to `batch` dead letters (oldest deaths first). ARGV:
/// channel, batch. Returns how many; wakes waiters if any.
const REQUEUE_ALL: &str = r#"
local channel, batch = ARGV[1], tonumber(ARGV[2])
local ids = redis.call('ZRANGE', K_DEAD, 0, batch - 1)
for _, id in ipairs(ids) do revive(id) end
if #ids > 0 then redis.call('PUBLISH', channel, '0') end
return #ids
"#;

/// Deletes a dead letter for good. ARGV: id. Returns 1, or 0 if it was not
/// dead (nothing changed).
const PURGE: &str = r#"
local id = ARGV[1]
if redis.call('ZREM', K_DEAD, id) == 0 then return 0 end
forget(id)
return 1
"#;

/// Deletes up to `batch` dead letters for good (oldest deaths first).
/// ARGV: batch. Returns how many.
const PURGE_ALL: &str = r#"
local batch = tonumber(ARGV[1])
local ids = redis.call('ZRANGE', K_DEAD, 0, batch - 1)
for _, id in ipairs(ids) do
  redis.call('ZREM', K_DEAD, id)
  forget(id)
end
return #ids
"#;

pub(crate) static FAIL_SCRIPT: LazyLock<Script> = LazyLock::new(|| script(&[FENCE, FAIL]));
pub(crate) static STATS_SCRIPT: LazyLock<Script> = LazyLock::new(|| script(&[STATS]));
pub(crate) static DEAD_LIST_SCRIPT: LazyLock<Script> = LazyLock::new(|| script(&[DEAD_LIST]));
pub(crate) static REQUEUE_ALL_SCRIPT: LazyLock<Script> =
    LazyLock::new(|| script(&[REVIVE, REQUEUE_ALL]));
pub(crate) static PURGE_SCRIPT: LazyLock<Script> = LazyLock::new(|| script(&[PURGE]));
pub(crate) static PURGE_ALL_SCRIPT: LazyLock<Script> = LazyLock::new(|| script(&[PURGE_ALL]));
pub(crate) static EXTEND_SCRIPT: LazyLock<Script> = LazyLock::new(|| script(&[FENCE, EXTEND]));
pub(crate) static RELEASE_SCRIPT: LazyLock<Script> = LazyLock::new(|| script(&[FENCE, RELEASE]));
