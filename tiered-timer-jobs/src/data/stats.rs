//! A queue's numbers ([`Stats`]) and its dead letters ([`DeadLetter`]), as
//! every backend reports them.

use std::fmt;
use std::time::{Duration, SystemTime};

use super::human;
use super::id::JobId;
use super::limits::at_ms;

/// A snapshot of a queue (or of one of its partitions), by Redis' clock,
/// from [`Queue::stats`](crate::Queue::stats).
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

    /// One partition's numbers, as its backend counted them.
    pub(crate) fn of_partition(partition: u32, counts: Counts) -> Stats {
        let overdue = match counts.earliest_due_ms {
            Some(earliest) if counts.due_now > 0 => {
                Duration::from_millis(counts.now_ms.saturating_sub(earliest))
            }
            _ => Duration::ZERO,
        };
        Stats {
            partition: Some(partition),
            redis_time: at_ms(counts.now_ms),
            pending: counts.pending,
            due_now: counts.due_now,
            earliest_due: counts.earliest_due_ms.map(at_ms),
            overdue,
            leased: counts.leased,
            expired_leases: counts.expired_leases,
            earliest_lease_expiry: counts.earliest_lease_expiry_ms.map(at_ms),
            dead: counts.dead,
            latest_death: counts.latest_death_ms.map(at_ms),
            damaged_frames: counts.damaged_frames,
            partitions: Vec::new(),
        }
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

/// A dead letter, from [`Queue::dead_letters`](crate::Queue::dead_letters): a job that used up its
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

/// One partition's numbers as a backend read them at one instant of its
/// clock (times in ms since the Unix epoch; `None`: there is none).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Counts {
    pub(crate) now_ms: u64,
    pub(crate) pending: u64,
    pub(crate) due_now: u64,
    pub(crate) earliest_due_ms: Option<u64>,
    pub(crate) leased: u64,
    pub(crate) expired_leases: u64,
    pub(crate) earliest_lease_expiry_ms: Option<u64>,
    pub(crate) dead: u64,
    pub(crate) latest_death_ms: Option<u64>,
    pub(crate) damaged_frames: u64,
}
