//! The Lua scripts (`src/redis/lua/`, one file per script): every state change
//! of a job is one of these, so each is atomic on the Redis node that
//! holds the job's partition.
//!
//! Ground rules:
//!
//! * Time is read once per script with `TIME` (`time.lua`), never passed
//!   in by a client, so a client whose clock is off changes nothing.
//!   (Redis 7 replicates a script's effects, not the script, so reading
//!   `TIME` before writing is allowed; `redis.replicate_commands()` asks
//!   for the same on Redis 5 and 6.) `cancel` and `purge` need no clock
//!   and read none; `ack` reads it only to count the job in its minute.
//! * A due time is rounded *up* to a whole millisecond and "now" *down*,
//!   so "due <= now" in whole milliseconds implies the due time has passed
//!   by Redis' clock: never early.
//! * Every script takes the six keys of [`Keys`](crate::redis::keys::Keys) in
//!   their order, so one partition's scripts always run in one slot.
//! * What a change does to a job's history (`history.lua`) and to the
//!   counts per minute (`throughput.lua`) is done by the same script, so
//!   neither costs a command of the client's.
//! * A lease is fenced by a token: only the holder of the current token
//!   may ack, retry, extend or release the job; all but `ack` also check
//!   the lease's expiry against `TIME` in the same script (a lease that
//!   ran out is never renewed). `ack` needs no clock: its caller refuses
//!   to send it once the lease ran out by its own estimate, which is never
//!   later than Redis' expiry, and a token no later claim has replaced
//!   means nobody else holds the job.
//! * The wake-up chain (see `src/redis/wake/`): a script that makes something
//!   happen before the chain head (a job due, a lease that runs out), or
//!   finds the chain head missing or more than `GRACE` past its time, puts
//!   a baton in the partition's marker set for it and records it as
//!   `armed`; a claim that took jobs, or was made with the chain head's
//!   baton, passes the baton on to the next event. So exactly one worker
//!   wakes per event, however many wait.
//! * The scripts' replies report times on Redis' clock together with
//!   Redis' now, so that callers convert them to durations and never
//!   compare their clock with Redis'.

use std::sync::LazyLock;

use redis::Script;

use super::replication::Durability;

/// Reads Redis' `TIME` (`now_us`, `now`): first in every script that
/// needs the clock.
const TIME: &str = include_str!("lua/time.lua");
/// The keys, the layout's constants and the helpers every script needs.
const PRELUDE: &str = include_str!("lua/prelude.lua");
/// The wake-up chain's helpers (after [`TIME`] and [`PRELUDE`]).
const CHAIN: &str = include_str!("lua/chain.lua");
/// `bury` and `out_of_attempts`.
const BURY: &str = include_str!("lua/bury.lua");
/// `reschedule` (after [`CHAIN`]).
const RESCHEDULE: &str = include_str!("lua/reschedule.lua");
/// The lease check of retry, fail, extend and release.
const FENCE: &str = include_str!("lua/fence.lua");
/// `revive(id)` and `arm_now()`, for requeue and requeue-all.
const REVIVE: &str = include_str!("lua/revive.lua");
/// Recurrences' records and `put_occurrence` (after [`CHAIN`]).
const RECUR_LIB: &str = include_str!("lua/recur_lib.lua");
/// `recur_claimed`, the claim's move of a recurrence's chain (after
/// [`RECUR_LIB`]).
const RECUR_CLAIM: &str = include_str!("lua/recur_claim.lua");
/// `ended_attempt` and `with_history`: a job's attempt history (after
/// [`TIME`] and [`PRELUDE`]).
const HISTORY: &str = include_str!("lua/history.lua");
/// `tally`: the counts per minute (after [`TIME`] and [`PRELUDE`]).
const THROUGHPUT: &str = include_str!("lua/throughput.lua");

fn assemble(parts: &[&str]) -> Script {
    Script::new(&parts.concat())
}

/// The Lua that defines `record_lateness(key, late_ms)`, included in the
/// claim script (see the file's comments).
pub(crate) const RECORD_LATENESS: &str = include_str!("lua/record_lateness.lua");

/// Schedules one job unless its id is waiting or leased (`schedule.lua`).
pub(crate) static SCHEDULE_SCRIPT: LazyLock<Script> =
    LazyLock::new(|| assemble(&[TIME, PRELUDE, CHAIN, include_str!("lua/schedule.lua")]));
/// Schedules a chunk of up to 1 000 jobs of one partition
/// (`schedule_many.lua`).
pub(crate) static SCHEDULE_MANY_SCRIPT: LazyLock<Script> =
    LazyLock::new(|| assemble(&[TIME, PRELUDE, CHAIN, include_str!("lua/schedule_many.lua")]));
/// Claims up to `n` jobs, optionally after an ack, and passes the wake-up
/// chain on (`claim.lua`).
pub(crate) static CLAIM_SCRIPT: LazyLock<Script> = LazyLock::new(|| {
    assemble(&[
        TIME,
        PRELUDE,
        CHAIN,
        HISTORY,
        THROUGHPUT,
        BURY,
        RECORD_LATENESS,
        RECUR_LIB,
        RECUR_CLAIM,
        include_str!("lua/claim.lua"),
    ])
});
/// Acks a job, fenced by its token (`ack.lua`).
pub(crate) static ACK_SCRIPT: LazyLock<Script> =
    LazyLock::new(|| assemble(&[TIME, PRELUDE, THROUGHPUT, include_str!("lua/ack.lua")]));
/// Acks many jobs of one partition (`ack_many.lua`).
pub(crate) static ACK_MANY_SCRIPT: LazyLock<Script> =
    LazyLock::new(|| assemble(&[TIME, PRELUDE, THROUGHPUT, include_str!("lua/ack_many.lua")]));
/// Reschedules a held job, or buries it on its last attempt (`retry.lua`).
pub(crate) static RETRY_SCRIPT: LazyLock<Script> = LazyLock::new(|| {
    assemble(&[
        TIME,
        PRELUDE,
        CHAIN,
        HISTORY,
        THROUGHPUT,
        BURY,
        RESCHEDULE,
        FENCE,
        include_str!("lua/retry.lua"),
    ])
});
/// Cancels a waiting job (`cancel.lua`).
pub(crate) static CANCEL_SCRIPT: LazyLock<Script> =
    LazyLock::new(|| assemble(&[PRELUDE, include_str!("lua/cancel.lua")]));
/// Moves a dead letter back to the waiting jobs (`requeue.lua`).
pub(crate) static REQUEUE_SCRIPT: LazyLock<Script> = LazyLock::new(|| {
    assemble(&[
        TIME,
        PRELUDE,
        CHAIN,
        REVIVE,
        include_str!("lua/requeue.lua"),
    ])
});
/// A held job failed, with a reason: retried later or buried (`fail.lua`).
pub(crate) static FAIL_SCRIPT: LazyLock<Script> = LazyLock::new(|| {
    assemble(&[
        TIME,
        PRELUDE,
        CHAIN,
        HISTORY,
        THROUGHPUT,
        BURY,
        RESCHEDULE,
        FENCE,
        include_str!("lua/fail.lua"),
    ])
});
/// One partition's numbers at one instant of Redis' clock (`stats.lua`).
pub(crate) static STATS_SCRIPT: LazyLock<Script> =
    LazyLock::new(|| assemble(&[TIME, PRELUDE, include_str!("lua/stats.lua")]));
/// A page of dead letters, newest first (`dead_list.lua`).
pub(crate) static DEAD_LIST_SCRIPT: LazyLock<Script> =
    LazyLock::new(|| assemble(&[TIME, PRELUDE, include_str!("lua/dead_list.lua")]));
/// Revives a batch of dead letters (`requeue_all.lua`).
pub(crate) static REQUEUE_ALL_SCRIPT: LazyLock<Script> = LazyLock::new(|| {
    assemble(&[
        TIME,
        PRELUDE,
        CHAIN,
        REVIVE,
        include_str!("lua/requeue_all.lua"),
    ])
});
/// Deletes a dead letter (`purge.lua`).
pub(crate) static PURGE_SCRIPT: LazyLock<Script> =
    LazyLock::new(|| assemble(&[PRELUDE, include_str!("lua/purge.lua")]));
/// Deletes a batch of dead letters (`purge_all.lua`).
pub(crate) static PURGE_ALL_SCRIPT: LazyLock<Script> =
    LazyLock::new(|| assemble(&[PRELUDE, include_str!("lua/purge_all.lua")]));
/// Renews a lease (`extend.lua`).
pub(crate) static EXTEND_SCRIPT: LazyLock<Script> =
    LazyLock::new(|| assemble(&[TIME, PRELUDE, CHAIN, FENCE, include_str!("lua/extend.lua")]));
/// Hands a held job back, due now (`release.lua`).
pub(crate) static RELEASE_SCRIPT: LazyLock<Script> = LazyLock::new(|| {
    assemble(&[
        TIME,
        PRELUDE,
        CHAIN,
        HISTORY,
        FENCE,
        include_str!("lua/release.lua"),
    ])
});
/// A partition's counts per minute (`read_throughput.lua`).
pub(crate) static THROUGHPUT_SCRIPT: LazyLock<Script> = LazyLock::new(|| {
    assemble(&[
        TIME,
        PRELUDE,
        THROUGHPUT,
        include_str!("lua/read_throughput.lua"),
    ])
});

/// Everything stored about one job (`inspect_job.lua`).
pub(crate) static INSPECT_JOB_SCRIPT: LazyLock<Script> =
    LazyLock::new(|| assemble(&[TIME, PRELUDE, CHAIN, include_str!("lua/inspect_job.lua")]));
/// A page of one partition's jobs (`list_jobs.lua`).
pub(crate) static LIST_JOBS_SCRIPT: LazyLock<Script> =
    LazyLock::new(|| assemble(&[TIME, PRELUDE, CHAIN, include_str!("lua/list_jobs.lua")]));
/// Makes a waiting job due now, waking waiters as a schedule does
/// (`promote.lua`).
pub(crate) static PROMOTE_SCRIPT: LazyLock<Script> =
    LazyLock::new(|| assemble(&[TIME, PRELUDE, CHAIN, include_str!("lua/promote.lua")]));

/// Registers, replaces, pauses, resumes or removes a recurrence
/// (`recur.lua`).
pub(crate) static RECUR_SCRIPT: LazyLock<Script> = LazyLock::new(|| {
    assemble(&[
        TIME,
        PRELUDE,
        CHAIN,
        RECUR_LIB,
        include_str!("lua/recur.lua"),
    ])
});
/// A claimer's answer to a recurrence's duty: more occurrences, or what
/// follows an occurrence the times could not decide (`recur_refill.lua`).
pub(crate) static RECUR_REFILL_SCRIPT: LazyLock<Script> = LazyLock::new(|| {
    assemble(&[
        TIME,
        PRELUDE,
        CHAIN,
        RECUR_LIB,
        include_str!("lua/recur_refill.lua"),
    ])
});
/// Every recurrence of a partition (`recurrences.lua`).
pub(crate) static RECURRENCES_SCRIPT: LazyLock<Script> = LazyLock::new(|| {
    assemble(&[
        TIME,
        PRELUDE,
        CHAIN,
        RECUR_LIB,
        include_str!("lua/recurrences.lua"),
    ])
});

/// Records a queue's partition count if none is recorded yet; returns the
/// recorded count (`record_partitions.lua`; no prelude: it needs neither
/// the time nor a partition's keys).
pub(crate) static RECORD_PARTITIONS_SCRIPT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/record_partitions.lua")));

/// How much `script`'s writes must survive a failover (see
/// [`crate::redis::replication`]): reads need no `WAIT`; claims, lease renewals
/// and releases only cost a redelivery or a delay if lost; every other
/// write was promised to its caller.
pub(crate) fn durability(script: &Script) -> Durability {
    let is = |list: &[&Script]| list.iter().any(|s| s.get_hash() == script.get_hash());
    if is(&[
        &STATS_SCRIPT,
        &DEAD_LIST_SCRIPT,
        &INSPECT_JOB_SCRIPT,
        &LIST_JOBS_SCRIPT,
        &RECURRENCES_SCRIPT,
        &THROUGHPUT_SCRIPT,
    ]) {
        Durability::Read
    } else if is(&[
        &CLAIM_SCRIPT,
        &EXTEND_SCRIPT,
        &RELEASE_SCRIPT,
        &RECUR_REFILL_SCRIPT,
    ]) {
        Durability::BestEffort
    } else {
        Durability::Required
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_never_wait_and_only_claims_renewals_and_releases_are_best_effort() {
        for read in [
            &*STATS_SCRIPT,
            &*DEAD_LIST_SCRIPT,
            &*INSPECT_JOB_SCRIPT,
            &*LIST_JOBS_SCRIPT,
            &*RECURRENCES_SCRIPT,
            &*THROUGHPUT_SCRIPT,
        ] {
            assert_eq!(durability(read), Durability::Read);
        }
        // A lost refill is asked for again by the next claim (its duty
        // rides on the occurrence's job).
        for best_effort in [
            &*CLAIM_SCRIPT,
            &*EXTEND_SCRIPT,
            &*RELEASE_SCRIPT,
            &*RECUR_REFILL_SCRIPT,
        ] {
            assert_eq!(durability(best_effort), Durability::BestEffort);
        }
        // What a caller is promised.
        for required in [
            &*SCHEDULE_SCRIPT,
            &*SCHEDULE_MANY_SCRIPT,
            &*ACK_SCRIPT,
            &*ACK_MANY_SCRIPT,
            &*RETRY_SCRIPT,
            &*FAIL_SCRIPT,
            &*CANCEL_SCRIPT,
            &*REQUEUE_SCRIPT,
            &*REQUEUE_ALL_SCRIPT,
            &*PURGE_SCRIPT,
            &*PURGE_ALL_SCRIPT,
            &*RECUR_SCRIPT,
        ] {
            assert_eq!(durability(required), Durability::Required);
        }
    }
}
