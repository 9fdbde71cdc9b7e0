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
//! * Every script takes the eight keys of [`Keys`](crate::keys::Keys) in
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
const PRELUDE: &str = include_str!("lua/prelude.lua");

/// Schedules a job unless its id is already waiting or leased.
///
/// ARGV: id, mode (`d`: ARGV[3] is a delay in ms from Redis' now; `a`: an
/// absolute due time in ms since the epoch), value, payload, channel.
/// Returns `{1, due}` when written, `{0, due or lease expiry}` when the id
/// was already there (nothing changed).
const SCHEDULE: &str = include_str!("lua/schedule.lua");

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
const SCHEDULE_MANY: &str = include_str!("lua/schedule_many.lua");

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
const CLAIM: &str = include_str!("lua/claim.lua");

/// Checks that the caller holds the live lease of ARGV[1] with token
/// ARGV[2]: returns early with 0 if not.
const FENCE: &str = include_str!("lua/fence.lua");

/// Acks a job: removes it for good. ARGV: id, token.
/// Returns 1, or 0 if the lease was lost (nothing changed).
const ACK: &str = include_str!("lua/ack.lua");

/// Gives a job back to be delivered again after a delay, or buries it if
/// it is out of attempts. ARGV: id, token, delay ms, max attempts,
/// channel. Returns 1 (rescheduled), 2 (buried) or 0 (lease lost,
/// nothing changed).
const RETRY: &str = include_str!("lua/retry.lua");

/// Cancels a waiting job. ARGV: id. Returns 1 if it was waiting and is
/// now gone, 0 otherwise (leased, dead, or unknown: nothing changed).
const CANCEL: &str = include_str!("lua/cancel.lua");

/// Moves a dead letter back to the waiting jobs, due now, with its attempt
/// count reset and its last error cleared. ARGV: id, channel. Returns 1,
/// or 0 if it was not dead.
const REQUEUE: &str = include_str!("lua/requeue.lua");

fn code(body: &[&str]) -> String {
    let mut code = String::from(PRELUDE);
    for part in body {
        code.push_str(part);
    }
    code
}

fn script(body: &[&str]) -> Script {
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
const REVIVE: &str = include_str!("lua/revive.lua");

/// A held job failed (after [`FENCE`]): records the reason as its last
/// error, then either reschedules it after a delay or, when asked to
/// (`b`) or out of attempts, buries it.
///
/// ARGV: id, token, action (`r`: retry, `b`: bury), delay ms, max
/// attempts, channel, reason. Returns 1 (rescheduled), 2 (buried) or 0
/// (lease lost, nothing changed).
const FAIL: &str = include_str!("lua/fail.lua");

// Leases and shutdown (issue 19): renewing a lease, handing a job back.

/// Renews a lease: it now runs until `lease` ms after Redis' now (which
/// may be sooner than before, if `lease` is shorter). ARGV: id, token,
/// lease ms. Returns the new expiry (ms, Redis' clock), or 0 if the lease
/// was lost (nothing changed).
const EXTEND: &str = include_str!("lua/extend.lua");

/// Hands a held job back, due at once, without counting the delivery
/// against max attempts. Its deadline (never later than now, since it was
/// claimed) becomes its due score again, so it goes to the front of the
/// waiting jobs (it has waited longest), and a first delivery handed back
/// is stored as it was scheduled: due score and payload only. ARGV: id,
/// token, channel. Returns 1, or 0 if the lease was lost (nothing
/// changed).
const RELEASE: &str = include_str!("lua/release.lua");

/// One partition's numbers, read at one instant of Redis' clock. No ARGV.
///
/// Returns `{now, pending, due now, earliest due, leased, expired leases,
/// earliest lease expiry, dead, latest death}`, times in ms since the
/// epoch, `-1` where there is no such job.
const STATS: &str = include_str!("lua/stats.lua");

/// A page of dead letters, newest death first. ARGV: offset, count (at
/// least 1).
///
/// Returns `{now, id, died at, attempts, payload bytes, last error or nil,
/// ...}` (five fields per dead letter).
const DEAD_LIST: &str = include_str!("lua/dead_list.lua");

/// Revives up to `batch` dead letters (oldest deaths first). ARGV:
/// channel, batch. Returns how many; wakes waiters if any.
const REQUEUE_ALL: &str = include_str!("lua/requeue_all.lua");

/// Deletes a dead letter for good. ARGV: id. Returns 1, or 0 if it was not
/// dead (nothing changed).
const PURGE: &str = include_str!("lua/purge.lua");

/// Deletes up to `batch` dead letters for good (oldest deaths first).
/// ARGV: batch. Returns how many.
const PURGE_ALL: &str = include_str!("lua/purge_all.lua");

pub(crate) static FAIL_SCRIPT: LazyLock<Script> = LazyLock::new(|| script(&[FENCE, FAIL]));
pub(crate) static STATS_SCRIPT: LazyLock<Script> = LazyLock::new(|| script(&[STATS]));
pub(crate) static DEAD_LIST_SCRIPT: LazyLock<Script> = LazyLock::new(|| script(&[DEAD_LIST]));
pub(crate) static REQUEUE_ALL_SCRIPT: LazyLock<Script> =
    LazyLock::new(|| script(&[REVIVE, REQUEUE_ALL]));
pub(crate) static PURGE_SCRIPT: LazyLock<Script> = LazyLock::new(|| script(&[PURGE]));
pub(crate) static PURGE_ALL_SCRIPT: LazyLock<Script> = LazyLock::new(|| script(&[PURGE_ALL]));
pub(crate) static EXTEND_SCRIPT: LazyLock<Script> = LazyLock::new(|| script(&[FENCE, EXTEND]));
pub(crate) static RELEASE_SCRIPT: LazyLock<Script> = LazyLock::new(|| script(&[FENCE, RELEASE]));

/// Records a queue's partition count if none is recorded yet; returns the
/// recorded count. KEYS: the queue's config hash. ARGV: the count. (No
/// prelude: it needs no time and no partition keys.)
pub(crate) static RECORD_PARTITIONS_SCRIPT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/record_partitions.lua")));

/// Whether `script` only reads (no `WAIT` after it, even with replicas).
pub(crate) fn is_read_only(script: &Script) -> bool {
    [&*STATS_SCRIPT, &*DEAD_LIST_SCRIPT]
        .iter()
        .any(|read| read.get_hash() == script.get_hash())
}
