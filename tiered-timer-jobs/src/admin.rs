//! The operator's view of a queue: [`Queue::stats`] and the dead letters
//! ([`Queue::dead_letters`], [`Queue::requeue`], [`Queue::requeue_all`],
//! [`Queue::purge`], [`Queue::purge_all`]). The `ttr` binary is built on
//! these alone.
//!
//! Ground rules:
//!
//! * Every read is one script per partition, so each partition's numbers
//!   are one snapshot at one instant of Redis' clock ("how overdue" is
//!   that instant minus the earliest due time, never a local clock against
//!   Redis'). Partitions are read one after another, so a total is a sum
//!   of snapshots a round trip apart.
//! * Bulk changes (`*_all`) and dead-letter listings go in batches of
//!   [`BATCH`] dead letters per script, so no single script holds Redis
//!   for long, and stop when a batch comes back short.

use std::fmt;
use std::time::{Duration, SystemTime};

#[cfg(feature = "redis")]
use redis::Value;

use crate::error::Error;
use crate::human;
use crate::job::JobId;
#[cfg(feature = "redis")]
use crate::keys::Keys;
#[cfg(feature = "redis")]
use crate::queue::{arg, parse, Inner};
use crate::queue::{Backend, Queue};
#[cfg(feature = "redis")]
use crate::scripts;

/// How many dead letters one `requeue_all` / `purge_all` script moves, or
/// one `dead_letters` script lists.
#[cfg(feature = "redis")]
const BATCH: usize = 500;

/// A snapshot of a queue (or of one of its partitions), by Redis' clock,
/// from [`Queue::stats`].
///
/// `Display` writes one line for a person:
/// `pending 120 (3 due, most overdue 3m 12s), leased 2 (1 lease(s) expired), dead 1`.
///
/// # Examples
///
/// ```no_run
/// # use tiered_timer_jobs::Queue;
/// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
/// let stats = queue.stats().await?;
/// println!("{stats}");
/// if stats.overdue > std::time::Duration::from_secs(60) {
///     eprintln!("workers are falling behind: {} jobs due", stats.due_now);
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Which partition these numbers are for; `None` for the whole queue.
    pub partition: Option<u32>,
    /// Redis' clock when the numbers were read (for a whole queue of
    /// several partitions, when the last partition was read).
    pub redis_time: SystemTime,
    /// Waiting jobs: scheduled, not leased, not dead.
    pub pending: u64,
    /// Waiting jobs whose due time has passed: they are ready for a
    /// worker.
    pub due_now: u64,
    /// The earliest due time of a waiting job (`None`: none waiting).
    pub earliest_due: Option<SystemTime>,
    /// How overdue the most overdue waiting job is: Redis' now minus the
    /// earliest due time, zero if nothing waiting is due. (The largest of
    /// the partitions', each by its own snapshot.)
    pub overdue: Duration,
    /// Jobs delivered to workers and not yet acked, including those whose
    /// lease ran out and that no worker has reclaimed yet.
    pub leased: u64,
    /// Leased jobs whose lease has run out: their worker died, hung or
    /// overran; the next claim delivers them again (or buries them).
    pub expired_leases: u64,
    /// The earliest lease expiry (`None`: nothing leased).
    pub earliest_lease_expiry: Option<SystemTime>,
    /// Dead letters.
    pub dead: u64,
    /// When the most recent dead letter died (`None`: no dead letters).
    pub latest_death: Option<SystemTime>,
    /// Damaged frames of an embedded queue's log (always 0 on Redis): the
    /// quarantine files beside the log (`<queue>.log.quarantine-<offset>`,
    /// each a damaged last frame that [`repair`](crate::repair) set
    /// aside; counted when the handle opened the log, until an operator
    /// deletes them), plus, for a [read-only](crate::Builder::read_only)
    /// handle, a damaged last frame still at the end of the log, which it
    /// could not read. Not 0: the jobs in those frames may be missing or
    /// back; an operator should look.
    pub damaged_frames: u64,
    /// The same numbers per partition, in partition order (one entry for
    /// a queue of one partition); empty in a partition's own `Stats`.
    pub partitions: Vec<Stats>,
}

impl Stats {
    /// How long until the earliest waiting job is due, by Redis' clock at
    /// [`redis_time`](Stats::redis_time); zero if it is due already,
    /// `None` if nothing is waiting.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tiered_timer_jobs::Queue;
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// if let Some(wait) = queue.stats().await?.next_due_in() {
    ///     println!("next job due in {wait:?}");
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn next_due_in(&self) -> Option<Duration> {
        let due = self.earliest_due?;
        Some(due.duration_since(self.redis_time).unwrap_or_default())
    }

    /// One partition's numbers from the stats script's reply.
    pub(crate) fn from_reply(partition: u32, reply: &[i64]) -> Result<Stats, Error> {
        let [now, pending, due_now, earliest_due, leased, expired, earliest_expiry, dead, latest_death] =
            *reply
        else {
            return Err(unexpected_reply("the stats script"));
        };
        let count = |n: i64| u64::try_from(n).unwrap_or(0);
        let overdue = if due_now > 0 {
            Duration::from_millis(count(now - earliest_due))
        } else {
            Duration::ZERO
        };
        Ok(Stats {
            partition: Some(partition),
            redis_time: at_ms(now).unwrap_or(SystemTime::UNIX_EPOCH),
            pending: count(pending),
            due_now: count(due_now),
            earliest_due: at_ms(earliest_due),
            overdue,
            leased: count(leased),
            expired_leases: count(expired),
            earliest_lease_expiry: at_ms(earliest_expiry),
            dead: count(dead),
            latest_death: at_ms(latest_death),
            damaged_frames: 0,
            partitions: Vec::new(),
        })
    }

    /// The whole queue's numbers: sums, and the earliest / latest /
    /// largest of the partitions'.
    pub(crate) fn total(partitions: Vec<Stats>) -> Stats {
        let mut total = Stats {
            partition: None,
            redis_time: SystemTime::UNIX_EPOCH,
            pending: 0,
            due_now: 0,
            earliest_due: None,
            overdue: Duration::ZERO,
            leased: 0,
            expired_leases: 0,
            earliest_lease_expiry: None,
            dead: 0,
            latest_death: None,
            damaged_frames: 0,
            partitions: Vec::new(),
        };
        let earliest = |a: Option<SystemTime>, b: Option<SystemTime>| match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        for p in &partitions {
            total.redis_time = total.redis_time.max(p.redis_time);
            total.pending += p.pending;
            total.due_now += p.due_now;
            total.earliest_due = earliest(total.earliest_due, p.earliest_due);
            total.overdue = total.overdue.max(p.overdue);
            total.leased += p.leased;
            total.expired_leases += p.expired_leases;
            total.earliest_lease_expiry =
                earliest(total.earliest_lease_expiry, p.earliest_lease_expiry);
            total.dead += p.dead;
            total.latest_death = total.latest_death.max(p.latest_death);
            total.damaged_frames += p.damaged_frames;
        }
        total.partitions = partitions;
        total
    }
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pending {}", self.pending)?;
        if self.due_now > 0 {
            write!(
                f,
                " ({} due, most overdue {})",
                self.due_now,
                human::duration(self.overdue)
            )?;
        } else if let Some(wait) = self.next_due_in() {
            write!(f, " (next due in {})", human::duration(wait))?;
        }
        write!(f, ", leased {}", self.leased)?;
        if self.expired_leases > 0 {
            write!(f, " ({} lease(s) expired)", self.expired_leases)?;
        }
        write!(f, ", dead {}", self.dead)?;
        if self.damaged_frames > 0 {
            write!(f, ", damaged frames {}", self.damaged_frames)?;
        }
        Ok(())
    }
}

/// A dead letter, from [`Queue::dead_letters`]: a job that used up its
/// attempts or was [buried](crate::Job::bury), with why.
///
/// # Examples
///
/// ```no_run
/// # use tiered_timer_jobs::Queue;
/// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
/// for dead in queue.dead_letters(20).await? {
///     println!(
///         "{} after {} attempt(s): {}",
///         dead.id,
///         dead.attempts,
///         dead.last_error.as_deref().unwrap_or("(no reason recorded)"),
///     );
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeadLetter {
    /// The job's id.
    pub id: JobId,
    /// Its partition.
    pub partition: u32,
    /// When it died, by Redis' clock.
    pub died_at: SystemTime,
    /// How long it had been dead when listed, by Redis' clock.
    pub dead_for: Duration,
    /// How many deliveries it had.
    pub attempts: u32,
    /// Its payload's size in bytes.
    pub payload_len: u64,
    /// The last error: the reason given to [`Job::fail`](crate::Job::fail),
    /// [`Job::bury`](crate::Job::bury) or
    /// [`Job::retry_after_with_reason`](crate::Job::retry_after_with_reason),
    /// or why the queue gave up on it ("lease expired after 3 attempt(s)",
    /// followed by the last error a worker gave, if any). `None` for jobs
    /// that died before this was recorded.
    pub last_error: Option<String>,
}

impl Queue {
    /// A snapshot of the queue by Redis' clock: how many jobs are waiting,
    /// due, leased (and with an expired lease) and dead, the earliest due
    /// time and how overdue the most overdue waiting job is; summed over
    /// the partitions, and per partition in [`Stats::partitions`].
    ///
    /// Each partition is read by one script, so its numbers are
    /// consistent with each other and with one instant of Redis' clock.
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`] or [`Error::Redis`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tiered_timer_jobs::Queue;
    /// # async fn demo() -> Result<(), tiered_timer_jobs::Error> {
    /// let queue = Queue::connect("redis://127.0.0.1:6379/", "orders").await?;
    /// let stats = queue.stats().await?;
    /// println!("{stats}"); // pending 120 (3 due, most overdue 3m 12s), leased 2, dead 1
    /// assert_eq!(stats.pending, stats.partitions.iter().map(|p| p.pending).sum::<u64>());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn stats(&self) -> Result<Stats, Error> {
        match &self.inner.backend {
            #[cfg(feature = "embedded")]
            Backend::Embedded(local) => local.stats().await,
            #[cfg(feature = "redis")]
            Backend::Redis(_) => self.stats_redis().await,
        }
    }

    #[cfg(feature = "redis")]
    async fn stats_redis(&self) -> Result<Stats, Error> {
        let mut partitions = Vec::with_capacity(self.inner.redis().partitions.len());
        for (p, keys) in self.inner.redis().partitions.iter().enumerate() {
            let reply: Vec<i64> = self
                .inner
                .eval(&scripts::STATS_SCRIPT, keys, Vec::new())
                .await?;
            partitions.push(Stats::from_reply(p as u32, &reply)?);
        }
        Ok(Stats::total(partitions))
    }

    /// Up to `limit` dead letters, the most recent deaths first, with their
    /// last error, attempts and payload size.
    ///
    /// Read in pages of 500 per script, so a large `limit` never holds
    /// Redis for long (each page is one snapshot: a dead letter that comes
    /// or goes between pages may be missed or listed twice). With several
    /// partitions, the newest `limit` of all are kept.
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`] or [`Error::Redis`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tiered_timer_jobs::Queue;
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// for dead in queue.dead_letters(100).await? {
    ///     println!("{}: {:?}", dead.id, dead.last_error);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>, Error> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        match &self.inner.backend {
            #[cfg(feature = "embedded")]
            Backend::Embedded(local) => local.dead_letters(limit).await,
            #[cfg(feature = "redis")]
            Backend::Redis(_) => self.dead_letters_redis(limit).await,
        }
    }

    #[cfg(feature = "redis")]
    async fn dead_letters_redis(&self, limit: usize) -> Result<Vec<DeadLetter>, Error> {
        let mut all = Vec::new();
        for (p, keys) in self.inner.redis().partitions.iter().enumerate() {
            // This partition's newest `limit`, a page of BATCH at a time.
            let first = all.len();
            loop {
                let offset = all.len() - first;
                let count = (limit - offset).min(BATCH);
                let reply: Vec<Value> = self
                    .inner
                    .eval(
                        &scripts::DEAD_LIST_SCRIPT,
                        keys,
                        vec![arg(&offset.to_string()), arg(&count.to_string())],
                    )
                    .await?;
                let got = dead_from_reply(p as u32, reply, &mut all)?;
                if got < count || all.len() - first == limit {
                    break;
                }
            }
        }
        all.sort_by(|a, b| b.died_at.cmp(&a.died_at).then_with(|| a.id.cmp(&b.id)));
        all.truncate(limit);
        Ok(all)
    }

    /// Moves a dead letter back to the waiting jobs, due at once, with its
    /// attempt count reset and its last error cleared. Returns `false`
    /// (changing nothing) if `id` is not a dead letter.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidJobId`]; [`Error::Timeout`] or [`Error::Redis`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tiered_timer_jobs::{JobId, Queue};
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// if !queue.requeue(&JobId::from("order-42")).await? {
    ///     println!("order-42 is not a dead letter");
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn requeue(&self, id: &JobId) -> Result<bool, Error> {
        match &self.inner.backend {
            #[cfg(feature = "embedded")]
            Backend::Embedded(local) => local.requeue(id).await,
            #[cfg(feature = "redis")]
            Backend::Redis(_) => self.requeue_redis(id).await,
        }
    }

    #[cfg(feature = "redis")]
    async fn requeue_redis(&self, id: &JobId) -> Result<bool, Error> {
        crate::keys::check_job_id(id.as_str())?;
        let keys = self.inner.keys_of(id);
        let moved: i64 = self
            .inner
            .eval(&scripts::REQUEUE_SCRIPT, keys, vec![arg(id.as_str())])
            .await?;
        Ok(moved == 1)
    }

    /// Moves every dead letter back to the waiting jobs, as
    /// [`requeue`](Queue::requeue) does one; returns how many. Goes in
    /// batches of 500 per script, so jobs that die meanwhile may be
    /// requeued too.
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`] or [`Error::Redis`]; the batches before the
    /// error stay requeued.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tiered_timer_jobs::Queue;
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// // The payment provider is back: try every dead order again.
    /// let n = queue.requeue_all().await?;
    /// println!("requeued {n} jobs");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn requeue_all(&self) -> Result<u64, Error> {
        match &self.inner.backend {
            #[cfg(feature = "embedded")]
            Backend::Embedded(local) => local.requeue_all().await,
            #[cfg(feature = "redis")]
            Backend::Redis(_) => self.requeue_all_redis().await,
        }
    }

    #[cfg(feature = "redis")]
    async fn requeue_all_redis(&self) -> Result<u64, Error> {
        self.in_batches(&scripts::REQUEUE_ALL_SCRIPT, |_| {
            vec![arg(&BATCH.to_string())]
        })
        .await
    }

    /// Deletes a dead letter for good, payload, attempts and last error
    /// with it. Returns `false` (changing nothing) if `id` is not a dead
    /// letter: a waiting or leased job is never purged.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidJobId`]; [`Error::Timeout`] or [`Error::Redis`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tiered_timer_jobs::{JobId, Queue};
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// assert!(queue.purge(&JobId::from("order-42")).await?);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn purge(&self, id: &JobId) -> Result<bool, Error> {
        match &self.inner.backend {
            #[cfg(feature = "embedded")]
            Backend::Embedded(local) => local.purge(id).await,
            #[cfg(feature = "redis")]
            Backend::Redis(_) => self.purge_redis(id).await,
        }
    }

    #[cfg(feature = "redis")]
    async fn purge_redis(&self, id: &JobId) -> Result<bool, Error> {
        crate::keys::check_job_id(id.as_str())?;
        let keys = self.inner.keys_of(id);
        let removed: i64 = self
            .inner
            .eval(&scripts::PURGE_SCRIPT, keys, vec![arg(id.as_str())])
            .await?;
        Ok(removed == 1)
    }

    /// Deletes every dead letter for good; returns how many. Goes in
    /// batches of 500 per script.
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`] or [`Error::Redis`]; the batches before the
    /// error stay deleted.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tiered_timer_jobs::Queue;
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// let n = queue.purge_all().await?;
    /// println!("deleted {n} dead letters");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn purge_all(&self) -> Result<u64, Error> {
        match &self.inner.backend {
            #[cfg(feature = "embedded")]
            Backend::Embedded(local) => local.purge_all().await,
            #[cfg(feature = "redis")]
            Backend::Redis(_) => self.purge_all_redis().await,
        }
    }

    #[cfg(feature = "redis")]
    async fn purge_all_redis(&self) -> Result<u64, Error> {
        self.in_batches(&scripts::PURGE_ALL_SCRIPT, |_| {
            vec![arg(&BATCH.to_string())]
        })
        .await
    }

    /// Runs a batch script on every partition until it reports a short
    /// batch, or has handled as many dead letters as the partition held
    /// when it began (so jobs that die again as fast as they are requeued
    /// cannot keep it going); returns the sum of what it reported.
    #[cfg(feature = "redis")]
    async fn in_batches(
        &self,
        script: &redis::Script,
        args: impl Fn(&Keys) -> Vec<Vec<u8>>,
    ) -> Result<u64, Error> {
        let inner: &Inner = &self.inner;
        let mut total = 0;
        for keys in &inner.redis().partitions {
            let mut left: u64 = inner.query(redis::cmd("ZCARD").arg(keys.dead())).await?;
            while left > 0 {
                let n: u64 = inner.eval(script, keys, args(keys)).await?;
                total += n;
                left = left.saturating_sub(n);
                if n < BATCH as u64 {
                    break;
                }
            }
        }
        Ok(total)
    }
}

/// Appends one partition's dead letters from the list script's reply;
/// returns how many.
#[cfg(feature = "redis")]
fn dead_from_reply(
    partition: u32,
    reply: Vec<Value>,
    out: &mut Vec<DeadLetter>,
) -> Result<usize, Error> {
    let mut fields = reply.into_iter();
    let now: i64 = parse(fields.next())?;
    let rest: Vec<Value> = fields.collect();
    let listed = rest.len() / 5;
    if rest.len() % 5 != 0 {
        return Err(unexpected_reply("the dead-letter script"));
    }
    let mut rows = rest.into_iter();
    while let Some(id) = rows.next() {
        let id: String = parse(Some(id))?;
        let died: i64 = parse(rows.next())?;
        let attempts: u32 = parse(rows.next())?;
        let payload_len: u64 = parse(rows.next())?;
        let last_error: Option<Vec<u8>> = parse(rows.next())?;
        out.push(DeadLetter {
            id: JobId::from(id),
            partition,
            died_at: at_ms(died).unwrap_or(SystemTime::UNIX_EPOCH),
            dead_for: Duration::from_millis(u64::try_from(now - died).unwrap_or(0)),
            attempts,
            payload_len,
            last_error: last_error.map(|e| String::from_utf8_lossy(&e).into_owned()),
        });
    }
    Ok(listed)
}

/// A time in ms since the epoch; `None` for the scripts' `-1`.
pub(crate) fn at_ms(ms: i64) -> Option<SystemTime> {
    let ms = u64::try_from(ms).ok()?;
    Some(SystemTime::UNIX_EPOCH + Duration::from_millis(ms))
}

#[cfg(not(feature = "redis"))]
pub(crate) fn unexpected_reply(what: &str) -> Error {
    Error::Io {
        path: std::path::PathBuf::new(),
        doing: format!("reading {what}"),
        source: std::io::Error::other("unexpected reply"),
    }
}

#[cfg(feature = "redis")]
pub(crate) fn unexpected_reply(what: &str) -> Error {
    Error::Redis(redis::RedisError::from((
        redis::ErrorKind::UnexpectedReturnType,
        "unexpected reply",
        what.to_owned(),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(ms: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
    }

    #[test]
    fn a_partition_snapshot_reads_overdue_from_one_clock() {
        let stats = Stats::from_reply(2, &[10_000, 5, 2, 7_000, 1, 0, 40_000, 3, 9_000]).unwrap();
        assert_eq!(stats.partition, Some(2));
        assert_eq!(stats.redis_time, ms(10_000));
        assert_eq!((stats.pending, stats.due_now), (5, 2));
        assert_eq!(stats.earliest_due, Some(ms(7_000)));
        assert_eq!(stats.overdue, Duration::from_secs(3));
        assert_eq!(stats.next_due_in(), Some(Duration::ZERO));
        assert_eq!(stats.earliest_lease_expiry, Some(ms(40_000)));
        assert_eq!((stats.dead, stats.latest_death), (3, Some(ms(9_000))));
        assert_eq!(
            stats.to_string(),
            "pending 5 (2 due, most overdue 3s), leased 1, dead 3"
        );

        let idle = Stats::from_reply(0, &[10_000, 1, 0, 250_000, 0, 0, -1, 0, -1]).unwrap();
        assert_eq!(idle.overdue, Duration::ZERO);
        assert_eq!(idle.next_due_in(), Some(Duration::from_secs(240)));
        assert_eq!(idle.earliest_lease_expiry, None);
        assert_eq!(
            idle.to_string(),
            "pending 1 (next due in 4m), leased 0, dead 0"
        );
        assert!(Stats::from_reply(0, &[1, 2, 3]).is_err());
    }

    #[test]
    fn totals_sum_counts_and_take_extremes() {
        let a = Stats::from_reply(0, &[10_000, 5, 2, 7_000, 1, 1, 9_500, 3, 9_000]).unwrap();
        let b = Stats::from_reply(1, &[10_004, 4, 1, 8_000, 2, 0, 12_000, 0, -1]).unwrap();
        let total = Stats::total(vec![a.clone(), b.clone()]);
        assert_eq!(total.partition, None);
        assert_eq!(total.redis_time, ms(10_004));
        assert_eq!((total.pending, total.due_now), (9, 3));
        assert_eq!(total.earliest_due, Some(ms(7_000)));
        assert_eq!(total.overdue, Duration::from_secs(3));
        assert_eq!((total.leased, total.expired_leases), (3, 1));
        assert_eq!(total.earliest_lease_expiry, Some(ms(9_500)));
        assert_eq!((total.dead, total.latest_death), (3, Some(ms(9_000))));
        assert_eq!(total.partitions, vec![a, b]);
        assert_eq!(
            total.to_string(),
            "pending 9 (3 due, most overdue 3s), leased 3 (1 lease(s) expired), dead 3"
        );
    }
}
