//! Durable delayed jobs: schedule and cancel that outlive the process,
//! delivered at least once, never early, and with nothing polled while
//! nothing is due. Three backends behind one API, picked by the URL given
//! to [`Queue::connect`] / [`Queue::builder`]:
//!
//! * `file:///var/lib/shop/jobs`: the **embedded store** (feature
//!   `embedded`), for a service that is one process on one host: an
//!   fsync'd delay log in local files, nothing to install (see
//!   [The embedded store](#the-embedded-store));
//! * `redis://`, `rediss://`, `redis+unix://`: **Redis** (feature `redis`),
//!   shared by many workers in many processes, never early by Redis' clock;
//! * `postgres://`, `postgresql://`: **Postgres** (feature `postgres`, not
//!   default), jobs beside the application's own rows: scheduled and acked
//!   inside its transactions (`Queue::within`, `Job::ack_within`),
//!   never early by the database's clock (see [Postgres](#postgres)).
//!
//! `embedded` and `redis` are on by default. The contract below is
//! written for Redis; the embedded store keeps it on one host, with the
//! host's wall clock in place of Redis' `TIME`, and Postgres with the
//! database's `clock_timestamp()`.
//!
//! ```no_run
//! use std::time::Duration;
//! use tiered_timer_jobs::{Error, Job, JobId, Queue};
//!
//! # async fn close_order(job: &Job) {}
//! # async fn demo() -> Result<(), Error> {
//! let queue = Queue::builder("redis://127.0.0.1:6379/", "orders")
//!     .lease(Duration::from_secs(30)) // how long a delivered job stays claimed
//!     .max_attempts(10)               // then it goes to the dead letters
//!     .connect()
//!     .await?;
//!
//! let id: JobId = queue
//!     .schedule_with_id("order-42", Duration::from_secs(1800), b"close order 42".to_vec())
//!     .await?;
//!
//! let job: Job = queue.next().await?; // sleeps until a job is due, then claims it
//! println!("{} (attempt {}): {:?}", job.id(), job.attempt(), job.payload());
//! job.keep_alive(close_order(&job)).await?; // renews the lease while it works
//! job.ack().await?;                   // done: removed for good
//! # Ok(())
//! # }
//! ```
//!
//! # The delivery contract
//!
//! * **At least once, never twice at once.** A due job is claimed by
//!   exactly one [`Queue::next`] across all processes, under a lease.
//!   [`Job::ack`] removes it. If the lease runs out first (the worker died,
//!   hung, or dropped the [`Job`]) the job is delivered again with
//!   [`Job::attempt`] one higher; an ack after that is
//!   [`Error::LeaseExpired`] and leaves the job alone. After
//!   [`Builder::max_attempts`] deliveries the job goes to the dead letters
//!   ([`Queue::dead_letters`], [`Queue::requeue`]).
//! * **Failures say why.** [`Job::fail`] gives up on an attempt with a
//!   reason (retried after a backoff, dead on the last attempt),
//!   [`Job::bury`] gives up for good; the reason is kept as the job's last
//!   error, and jobs that die of lost leases say so too. Both are fenced
//!   like [`Job::ack`].
//! * **Long jobs keep their lease, if the worker asks.**
//!   [`Job::extend_lease`] renews the lease only if this delivery still
//!   holds it (its token) and it has not run out by Redis' clock;
//!   [`Job::keep_alive`] does so every third of a lease while a future
//!   runs, and stops that future (with [`Error::LeaseExpired`]) if the
//!   lease is lost anyway. Nothing renews a lease on its own: a worker
//!   that hangs or dies loses its job after one lease.
//! * **Clean shutdown.** [`Job::release`] hands a job back at once, due
//!   now, without counting the attempt. [`Queue::close`] makes every
//!   [`Queue::next`] return [`Error::Closed`] and releases any job dropped
//!   after it; [`Queue::shutdown`] also waits until every job handed out
//!   is finished or released. So a stopped worker's jobs go to another
//!   worker at once instead of after their lease.
//! * **Never early, by one clock.** Whether a job is due is decided inside
//!   the scripts by Redis' `TIME`, and [`Queue::schedule`]'s delay counts
//!   from it, so a client whose clock is off never makes a job early.
//! * **Idempotent ids.** [`Queue::schedule_with_id`] with an id that is
//!   waiting or leased changes nothing. [`Queue::cancel`] is `true` only if
//!   the job was waiting and now will never be delivered.
//! * **Batches.** [`Queue::schedule_many`] (delays),
//!   [`Queue::schedule_many_at`] (exact times) and
//!   [`Queue::schedule_many_with_ids`] (idempotent) check every job first,
//!   then write one script per partition per chunk of at most 1 000 jobs:
//!   each chunk all or nothing, waking one worker at most. Every delay of
//!   one call counts from the same instant of Redis' clock, so equal
//!   delays give equal due times. Claims and acks come in batches too:
//!   [`Queue::next_batch`], [`Queue::ack_many`], [`Job::ack_and_next`],
//!   and for a worker that takes one job at a time,
//!   [`Builder::prefetch`] with [`Job::ack_batched`] (acks sent in the
//!   background, many per script; [`Queue::flush_acks`] waits for them).
//! * **No polling, no herd.** Each due job (or lease that runs out) wakes
//!   exactly one waiting worker across all processes: waiting workers
//!   block on the partitions' wake-up batons, and the one that gets a
//!   baton sleeps on `tiered-timer` until its time. A job costs one claim
//!   and one ack however many workers wait; an idle worker sends one
//!   command per [`Builder::health_check`].
//! * **Health.** A connection that stops answering without a FIN or RST is
//!   noticed within [`Builder::health_check`] and replaced; a refused
//!   connection is an error at once, a silent one after the command
//!   timeout.
//!
//! # Operating a queue
//!
//! [`Queue::stats`] reads, per partition in one script (one instant of
//! Redis' clock), how many jobs are waiting, due and leased (and with an
//! expired lease), how many are dead, the earliest due time and how
//! overdue the most overdue waiting job is. [`Queue::dead_letters`] lists
//! the dead with their last error, attempts, time of death and payload
//! size; [`Queue::requeue`] / [`Queue::requeue_all`] give them another
//! round, [`Queue::purge`] / [`Queue::purge_all`] delete them.
//! [`Queue::job`] shows one job whatever its state, [`Queue::list`] pages
//! through waiting, due, leased or dead jobs, [`Queue::promote`] makes a
//! waiting job due now, [`find_queues`] finds every queue on a Redis, and
//! [`Queue::lateness`] reads how late claims were. The `ttr` binary (crate
//! `tiered-timer-ttr`) puts these on the command line and in a web
//! dashboard, with Prometheus metrics; the `metrics` feature reports
//! counters through the `metrics` facade (see `src/metrics.rs`):
//!
//! ```text
//! $ cargo run -p tiered-timer-ttr -- --url redis://127.0.0.1:6379/ stats orders
//! queue orders (1 partition), Redis time 2026-11-24 22:35:48 UTC
//!
//! pending  1206   6 due now, the oldest 1m 16s overdue
//! leased      3   1 expired lease(s), the oldest 3s ago, not reclaimed yet (worker gone?)
//! dead        3   latest died 3s ago; see `ttr dead orders`
//! ```
//!
//! # Design
//!
//! The crate is layered (CONTRIBUTING.md, "Architecture of the jobs
//! crate", draws it): the public API (`src/api/`) checks every input once
//! and calls the queue's backend through one enum (`src/backends.rs`, the
//! only place backends are named); each backend (`src/redis/`,
//! `src/embedded/`, `src/postgres/`) implements one
//! private trait, the backend contract (`src/contract.rs`), in the
//! backend-neutral values of `src/data/`. So every backend gives the same
//! answer to the same bad input, and a setting one of them lacks is
//! [`Error::Unsupported`], said in one place.
//!
//! On Redis, per queue (or per partition), under one hash tag (see
//! `src/redis/keys.rs`):
//! a sorted set of jobs (the *timeline*: waiting jobs scored by due time
//! in milliseconds of Redis' clock, leased ones by 2^52 + their lease
//! expiry); a hash of payloads, leases (attempts, token, deadline) and
//! last errors; a sorted set of dead letters scored by when they died; and
//! a sorted set of wake-up batons.
//!
//! Every change is one Lua script (`src/redis/scripts.rs`,
//! `src/redis/lua/`), so it is atomic:
//!
//! * *schedule* reads `TIME`, adds the job unless its id is waiting or
//!   leased, and, if it is now the partition's earliest event, puts a
//!   baton in for it;
//! * *schedule many* does the same for a chunk of up to 1 000 jobs of one
//!   partition: all reads first, then one variadic `HSET` and `ZADD`, and
//!   one baton at most; delays count from the `TIME` of the call's first
//!   chunk (passed on to the next chunks; on a cluster, per partition);
//! * *claim* reads `TIME` and takes up to `n` jobs: those whose lease ran
//!   out, then the earliest due, each with a fresh token and attempt + 1
//!   (a job out of attempts goes to the dead letters instead), and passes
//!   the baton on to the partition's next event;
//! * *ack* checks the token; *retry*, *fail*, *extend* and *release* check
//!   the token and that the lease has not run out by Redis' clock; then
//!   they remove, reschedule (or bury), renew (expiry = Redis' now + the
//!   lease) or hand back the job.
//!
//! Waiting is the waker's (`src/redis/wake/`): one task per [`Queue`] handle
//! that blocks on the batons (`BZPOPMIN`, one worker per baton), converts
//! a baton's time to a local instant with the clock offset measured on
//! its last claim (never comparing clocks beyond that: a baton that fires
//! early costs one claim that finds nothing), sleeps on `tiered-timer`,
//! and claims for the waiting [`Queue::next`] calls. A claim passes the
//! next baton straight back to its claimer when the next event is due
//! within 50 ms, so a worker that comes back at once claims again without
//! waiting for a baton. Every blocking call carries a reply deadline
//! ([`Builder::health_check`]); a lost connection costs one re-read.
//!
//! [`Builder::partitions`] spreads a queue over several hash tags (so over
//! a Redis Cluster's nodes): a job's partition is a hash of its id; each
//! partition has its own chain of batons, and a worker waits on all of
//! them (one `BZPOPMIN` over all markers on one Redis, one per partition
//! on a cluster, so a dead node stops only its own partitions). The count
//! is recorded by the queue's first connect; a handle that sets none
//! adopts it. A worker that is never idle pops no baton: under a backlog
//! it claims at once, oldest due first across partitions, from what each
//! claim's reply said of its partition (its most overdue job), so that no
//! partition falls behind while the others are served.
//!
//! # The embedded store
//!
//! A store is a directory, locked by one process at a time (a second
//! process gets [`Error::Locked`]); inside that process any number of
//! [`Queue`]s connected to it share it. Each queue is an append-only delay
//! log of checksummed records, written and `fdatasync`'d before a call
//! returns `Ok` (concurrent calls share one write and one sync: group
//! commit), replayed on open into an in-memory index on `tiered-timer`'s
//! own wheel; payloads stay on disk until a job is claimed. A call that
//! returned `Ok` survives SIGKILL and power cuts (the store's directory and
//! each log are created durably; a failed `fdatasync` makes the queue
//! refuse every change until it is reopened). A torn last write (a crash in
//! the middle of it, never acknowledged) is cut off on open, with a
//! warning. A whole last frame damaged since it was written (bit rot, a bad
//! disk) is never cut silently: the queue does not open ([`Error::Corrupt`]
//! with the file and offset) until [`repair`] (`ttr repair`) moves it to a
//! quarantine file beside the log, counted in [`Stats::damaged_frames`];
//! other damage is [`Error::Corrupt`] too. A full disk is
//! [`Error::DiskFull`], nothing written. [`Builder::read_only`] opens a
//! queue to look at it without the store's lock and without writing
//! anything, so tools (`ttr`, dashboards) can look while the service that
//! owns the store runs.
//! Leases are not logged: on open, every job that was leased is due again,
//! its delivery counted. A claim is the one call that does not wait for
//! its `fdatasync`: the job reaches its worker as soon as the claim is in
//! the log's next write (the sync is most of the lateness), which is safe
//! because a crash before that sync takes the worker with it; the job is
//! then due again on open, that one delivery not counted. A job that was
//! due when the store opened is handed out only once its claim is synced,
//! so a job whose work kills the process at once still reaches
//! [`Builder::max_attempts`]. [`Builder::partitions`], [`Builder::cluster`] and
//! [`Builder::replicas`] are Redis' ([`Error::Unsupported`] here).
//!
//! # Postgres
//!
//! One table per schema (the URL's `schema` parameter, `tiered_timer_jobs`
//! by default), `jobs`, holds every waiting, leased and dead job, with one
//! index, `(queue, state, at_ms)`, that serves every claim, the next
//! wake-up, the listings and the counts; the crate creates and migrates
//! it (versioned, under an advisory lock, so processes that start at once
//! apply each migration once; never from a handle that only looks).
//! Every call is one statement whose "now" is the database's
//! `clock_timestamp()`; a claim takes up to `n` due jobs with `FOR UPDATE
//! SKIP LOCKED`, each with a fencing token from a sequence, and answers
//! when the queue's next event is; an ack deletes the row. A waiting
//! handle sleeps on `tiered-timer` until that event, and hears of an
//! earlier job on its one LISTEN connection: every statement that makes
//! a job waiting sends `pg_notify` with its due time, delivered at
//! commit, so a job scheduled in a transaction that rolls back woke
//! nobody. The workers of one handle take turns to claim (one claim per
//! handle per wake-up); idle, a handle sends only its listener's health
//! check. The table's autovacuum settings, and what the server needs so
//! that it does not bloat, are in the README's "Postgres" section.
//!
//! # Tracing
//!
//! The crate emits [`tracing`](https://docs.rs/tracing) events, silent
//! unless the application installs a subscriber. Every event names its
//! target, one of five that do not change when code moves between
//! modules (filter on them, or on `tiered_timer_jobs` for all):
//!
//! | target | events |
//! |---|---|
//! | `tiered_timer_jobs::job` | one job's life: claimed, redelivered, acked, retried, failed, released, moved to the dead letters; its lease extended, lost or given up |
//! | `tiered_timer_jobs::queue` | a queue handle: closed; background acks that failed; its registration in `ttr:queues` |
//! | `tiered_timer_jobs::wake` | the Redis waker: wake-up connections lost and re-established, batons handed back, stale chain heads re-armed, claims that failed |
//! | `tiered_timer_jobs::redis` | Redis connections: cluster connections replaced, redirects sent again, masters short of replicas |
//! | `tiered_timer_jobs::embedded` | the embedded store: torn writes cut off, damaged frames found or quarantined, compactions that failed, its driver thread |
//!
//! Fields are `queue`, `job` (the id), `attempt` and, where it helps,
//! `partition`, `lease`, `error`:
//!
//! | event | level |
//! |---|---|
//! | job claimed; acked; retried; lease extended | debug |
//! | job released; wake-up connection re-established; queue closed | info |
//! | job redelivered after its lease ran out; moved to the dead letters; lease lost; renewal failed; wake-up connection lost | warn |
//!
//! Dead-letter events carry `attempts` (the limit) instead of `attempt`;
//! the wake-up connection's events have `queue` and `partitions`.
//!
//! # Metrics
//!
//! With the feature `metrics`, the crate also reports through the
//! [`metrics`](https://docs.rs/metrics) facade, labelled `queue`: the
//! counters `ttr_jobs_claimed_total`, `ttr_jobs_acked_total`,
//! `ttr_jobs_retried_total`, `ttr_jobs_failed_total`,
//! `ttr_jobs_dead_lettered_total`, `ttr_leases_lost_total` and
//! `ttr_lease_renewals_total`, and the histogram
//! `ttr_claim_lateness_seconds` (Redis' now at a claim minus the due time,
//! for jobs claimed from the waiting jobs). Without the feature there is no
//! `metrics` dependency and no cost.

#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]
#![forbid(unsafe_code)]

#[cfg(not(any(feature = "embedded", feature = "redis", feature = "postgres")))]
compile_error!("tiered-timer-jobs needs a backend: enable the `embedded`, `redis` or `postgres` feature (the first two are default)");

// The layers, top to bottom (see CONTRIBUTING.md, "Architecture of the
// jobs crate"): the API; where backends are chosen; the backends; the
// contract they implement; backend-neutral data.
mod api;
mod backends;
mod contract;
mod data;
#[cfg(feature = "embedded")]
mod embedded;
mod metrics;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "redis")]
mod redis;
mod targets;

#[cfg(feature = "postgres")]
pub use crate::api::Within;
pub use crate::api::{find_queues, repair, Builder, Fate, Job, Queue};
pub use crate::data::clock::Clock;
pub use crate::data::error::Error;
pub use crate::data::history::{
    Attempt, Minute, Outcome, Throughput, ERROR_KEPT, HISTORY_LEN, MAX_HOLDER, THROUGHPUT_MINUTES,
};
pub use crate::data::id::JobId;
pub use crate::data::lateness::Lateness;
pub use crate::data::listing::{
    JobInfo, JobState, JobSummary, Listing, Page, QueueInfo, MAX_PAGE, PREVIEW,
};
pub use crate::data::recurrence::{LastRun, Missed, Recurrence, RecurrenceInfo};
pub use crate::data::repaired::{Quarantined, Repaired};
pub use crate::data::stats::{DeadLetter, Stats};
/// The sqlx this crate is built with (feature `postgres`): the
/// executors [`Queue::within`] and [`Job::ack_within`] take, and the
/// error inside [`Error::Postgres`], are its types.
#[cfg(feature = "postgres")]
#[doc(no_inline)]
pub use sqlx;

#[cfg(test)]
mod tests {
    /// `Queue` is shared between tasks and threads; `Job` moves to the task
    /// that works on it.
    #[test]
    fn public_types_are_send_and_sync() {
        fn send_sync<T: Send + Sync + 'static>() {}
        fn clone<T: Clone>() {}
        send_sync::<crate::Queue>();
        clone::<crate::Queue>();
        send_sync::<crate::Job>();
        send_sync::<crate::JobId>();
        send_sync::<crate::Error>();
        send_sync::<crate::Builder>();
        send_sync::<crate::Stats>();
        send_sync::<crate::DeadLetter>();
        send_sync::<crate::Fate>();
        send_sync::<crate::JobInfo>();
        send_sync::<crate::Page>();
        send_sync::<crate::Lateness>();
        send_sync::<crate::QueueInfo>();
        send_sync::<crate::Repaired>();
    }
}

/// The README's examples, compiled and run as doctests so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
