//! What a store keeps of the past, for operators: each job's recent
//! attempts ([`Attempt`], in [`JobInfo::history`](crate::JobInfo::history))
//! and a queue's jobs processed and failed per minute ([`Throughput`],
//! from [`Queue::throughput`](crate::Queue::throughput)).
//!
//! Ground rules, the same on every backend:
//!
//! * **Bounded.** A job keeps its last [`HISTORY_LEN`] attempts (an older
//!   one is dropped when a newer one ends), each with at most
//!   [`ERROR_KEPT`] bytes of its error; a queue keeps its last
//!   [`THROUGHPUT_MINUTES`] minutes of counts. So what a store keeps does
//!   not grow with a job's retries or a queue's age.
//! * **Kept with the job, gone with it.** An attempt is recorded by the
//!   same atomic change that claims the job or ends the attempt (inside
//!   the Redis script; in the embedded store's log record; in the
//!   Postgres statement), so a history
//!   never disagrees with the job's state, and an ack, cancel or purge
//!   deletes it with the job. A requeued dead letter keeps its history
//!   (its attempts count from 1 again).
//! * **By the deciding clock.** Every time is the store's (Redis' `TIME`,
//!   the embedded store's host, Postgres' `clock_timestamp()`), as the
//!   job's due time is.
//! * **One rule for "failed".** An attempt counts as failed in
//!   [`Throughput`] when it ended [`Failed`](Outcome::Failed),
//!   [`LeaseExpired`](Outcome::LeaseExpired) or
//!   [`Buried`](Outcome::Buried): the outcomes that say something went
//!   wrong. A retry without a reason, and a release, are not failures; an
//!   ack is "processed".

use std::fmt;
use std::time::{Duration, SystemTime};

use super::limits::at_ms;

/// The most attempts a job's history holds (the running one included):
/// an older one is dropped when a newer one ends.
pub const HISTORY_LEN: usize = 16;

/// The most bytes of an attempt's error its history keeps (the job's
/// [`last_error`](crate::JobInfo::last_error) is kept whole). A longer one
/// is cut there, which may leave a `U+FFFD` where a character was cut.
pub const ERROR_KEPT: usize = 1024;

/// How many minutes of [`Throughput`] a queue keeps: the last 24 hours.
pub const THROUGHPUT_MINUTES: u64 = 24 * 60;

/// The most bytes of a [`Builder::holder`](crate::Builder::holder) name.
pub const MAX_HOLDER: usize = 128;

/// How an attempt ended (or that it has not).
///
/// # Examples
///
/// ```
/// use tiered_timer_jobs::Outcome;
///
/// assert_eq!(Outcome::LeaseExpired.to_string(), "lease expired");
/// assert!(Outcome::Buried.is_failure());
/// assert!(!Outcome::Released.is_failure());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Outcome {
    /// Still leased to its holder (whose lease may have run out, the job
    /// not yet taken back).
    Running,
    /// Given back to be tried again, without a reason
    /// ([`Job::retry_after`](crate::Job::retry_after)).
    Retried,
    /// Given up with a reason, to be tried again
    /// ([`Job::fail`](crate::Job::fail),
    /// [`Job::retry_after_with_reason`](crate::Job::retry_after_with_reason)).
    Failed,
    /// Handed back, the attempt not counted
    /// ([`Job::release`](crate::Job::release), or a job claimed for a
    /// caller that was gone).
    Released,
    /// Its lease ran out and the queue took the job back for another
    /// attempt (its worker died, hung or overran).
    LeaseExpired,
    /// The job went to the dead letters: [`Job::bury`](crate::Job::bury),
    /// or a failure, retry or lease that ran out on its last attempt (the
    /// attempt's error says which).
    Buried,
}

impl Outcome {
    /// The outcome in words: `running`, `retried`, `failed`, `released`,
    /// `lease expired` or `buried`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(tiered_timer_jobs::Outcome::Running.as_str(), "running");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Running => "running",
            Outcome::Retried => "retried",
            Outcome::Failed => "failed",
            Outcome::Released => "released",
            Outcome::LeaseExpired => "lease expired",
            Outcome::Buried => "buried",
        }
    }

    /// Whether the attempt counts as failed in [`Throughput`]: it ended
    /// failed, with its lease run out, or buried.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(tiered_timer_jobs::Outcome::Failed.is_failure());
    /// assert!(!tiered_timer_jobs::Outcome::Retried.is_failure());
    /// ```
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            Outcome::Failed | Outcome::LeaseExpired | Outcome::Buried
        )
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One delivery of a job, from its history
/// ([`JobInfo::history`](crate::JobInfo::history)).
///
/// # Examples
///
/// ```no_run
/// # use tiered_timer_jobs::{JobId, Queue};
/// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
/// if let Some(job) = queue.job(&JobId::from("order-42")).await? {
///     for attempt in &job.history {
///         println!(
///             "#{} by {} {}: {}",
///             attempt.number,
///             attempt.holder.as_deref().unwrap_or("?"),
///             attempt.outcome,
///             attempt.error.as_deref().unwrap_or(""),
///         );
///     }
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Attempt {
    /// Which delivery it was ([`Job::attempt`](crate::Job::attempt)): a
    /// released attempt's number comes again, and a requeued job's count
    /// starts again at 1.
    pub number: u32,
    /// When it was claimed, by the store's clock.
    pub claimed: SystemTime,
    /// Who claimed it ([`Builder::holder`](crate::Builder::holder));
    /// `None` if the store did not record it (an embedded log written by
    /// an earlier version).
    pub holder: Option<String>,
    /// How it ended.
    pub outcome: Outcome,
    /// When it ended, by the store's clock; `None` while it runs, or if
    /// the store did not record it (an embedded log written by an earlier
    /// version).
    pub ended: Option<SystemTime>,
    /// The error it ended with: a worker's reason, or why the queue gave
    /// up on it (at most [`ERROR_KEPT`] bytes).
    pub error: Option<String>,
}

/// An attempt as a backend read it (times in ms since the Unix epoch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredAttempt {
    pub(crate) number: u32,
    pub(crate) claimed_ms: u64,
    pub(crate) holder: Option<String>,
    pub(crate) outcome: Outcome,
    pub(crate) ended_ms: Option<u64>,
    pub(crate) error: Option<Vec<u8>>,
}

impl StoredAttempt {
    /// The public form, the error as text.
    pub(crate) fn into_attempt(self) -> Attempt {
        Attempt {
            number: self.number,
            claimed: at_ms(self.claimed_ms),
            holder: self.holder.filter(|h| !h.is_empty()),
            outcome: self.outcome,
            ended: self.ended_ms.map(at_ms),
            error: self.error.map(|e| error_text(&e)),
        }
    }
}

/// An error as its history keeps it: at most [`ERROR_KEPT`] bytes.
pub(crate) fn kept_error(error: &[u8]) -> &[u8] {
    &error[..error.len().min(ERROR_KEPT)]
}

/// Bytes kept of an error, as text (a character cut at the bound reads
/// as `U+FFFD`).
fn error_text(error: &[u8]) -> String {
    String::from_utf8_lossy(kept_error(error)).into_owned()
}

/// A job's history as [`JobInfo`](crate::JobInfo) shows it: the ended
/// attempts a backend keeps, oldest first, then the running one, the last
/// [`HISTORY_LEN`] of them.
pub(crate) fn history(ended: Vec<StoredAttempt>, running: Option<StoredAttempt>) -> Vec<Attempt> {
    let mut all: Vec<Attempt> = ended
        .into_iter()
        .chain(running)
        .map(StoredAttempt::into_attempt)
        .collect();
    let extra = all.len().saturating_sub(HISTORY_LEN);
    all.drain(..extra);
    all
}

/// One minute of a queue's [`Throughput`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Minute {
    /// When the minute began, by the store's clock (a whole minute since
    /// the Unix epoch).
    pub start: SystemTime,
    /// Jobs acked in it.
    pub processed: u64,
    /// Attempts that ended failed, with their lease run out, or buried in
    /// it (see [`Outcome::is_failure`]).
    pub failed: u64,
}

/// Jobs processed and failed per minute, as the store counted them (so a
/// dashboard started now sees the minutes before it), from
/// [`Queue::throughput`](crate::Queue::throughput).
///
/// # Examples
///
/// ```no_run
/// # use std::time::{Duration, SystemTime};
/// # use tiered_timer_jobs::Queue;
/// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
/// let hour = queue.throughput(SystemTime::now() - Duration::from_secs(3600)).await?;
/// println!("last hour: {} processed, {} failed", hour.processed(), hour.failed());
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Throughput {
    /// The store's clock when it was read (the last partition's, with
    /// several).
    pub store_time: SystemTime,
    /// Every minute from the one holding `since` (or the oldest kept) to
    /// the one holding `store_time` (still counting), oldest first,
    /// minutes with nothing counted included.
    pub minutes: Vec<Minute>,
}

impl Throughput {
    /// Jobs acked in all the minutes.
    ///
    /// # Examples
    ///
    /// ```
    /// # use tiered_timer_jobs::Throughput;
    /// # fn demo(throughput: &Throughput) {
    /// println!("{} processed", throughput.processed());
    /// # }
    /// ```
    pub fn processed(&self) -> u64 {
        self.minutes.iter().map(|m| m.processed).sum()
    }

    /// Attempts failed in all the minutes.
    ///
    /// # Examples
    ///
    /// ```
    /// # use tiered_timer_jobs::Throughput;
    /// # fn demo(throughput: &Throughput) {
    /// println!("{} failed", throughput.failed());
    /// # }
    /// ```
    pub fn failed(&self) -> u64 {
        self.minutes.iter().map(|m| m.failed).sum()
    }

    /// Every minute from `since_ms` (or the oldest kept) to `now_ms`, from
    /// sparse counts `(minute since the epoch, processed, failed)` (a
    /// minute may come more than once, from several partitions: summed).
    pub(crate) fn from_counts(
        now_ms: u64,
        since_ms: u64,
        counts: impl IntoIterator<Item = (u64, u64, u64)>,
    ) -> Throughput {
        let last = now_ms / 60_000;
        let first = first_minute(now_ms, since_ms);
        let mut minutes: Vec<Minute> = (first..=last)
            .map(|m| Minute {
                start: at_ms(m * 60_000),
                processed: 0,
                failed: 0,
            })
            .collect();
        for (minute, processed, failed) in counts {
            if let Some(m) = minute
                .checked_sub(first)
                .and_then(|i| minutes.get_mut(i as usize))
            {
                m.processed += processed;
                m.failed += failed;
            }
        }
        Throughput {
            store_time: at_ms(now_ms),
            minutes,
        }
    }
}

/// The first minute a read from `since_ms` at `now_ms` covers: the one
/// holding `since_ms`, or the oldest kept.
pub(crate) fn first_minute(now_ms: u64, since_ms: u64) -> u64 {
    let last = now_ms / 60_000;
    (since_ms / 60_000).clamp((last + 1).saturating_sub(THROUGHPUT_MINUTES), last)
}

/// A time as ms since the Unix epoch (0 before it).
pub(crate) fn ms_since_epoch(at: SystemTime) -> u64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_millis()
        .try_into()
        .unwrap_or(u64::MAX)
}

/// This process' default [`Builder::holder`](crate::Builder::holder):
/// `hostname:pid`, the host's name from the kernel (`/proc`) or the
/// environment, else `localhost`.
pub(crate) fn default_holder() -> String {
    let host = ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .find_map(|path| std::fs::read_to_string(path).ok())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| std::env::var("COMPUTERNAME").ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty() && check_holder(name).is_ok())
        .unwrap_or_else(|| "localhost".to_owned());
    let pid = std::process::id();
    // Room for `:` and a pid of up to 10 digits.
    let mut end = host.len().min(MAX_HOLDER - 11);
    while !host.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}:{pid}", &host[..end])
}

/// Checks a holder name: 1 to [`MAX_HOLDER`] bytes, no control
/// characters (it is shown in terminals and pages).
pub(crate) fn check_holder(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("the holder name is empty");
    }
    if name.len() > MAX_HOLDER {
        return Err("the holder name is longer than 128 bytes");
    }
    if name.chars().any(char::is_control) {
        return Err("the holder name has a control character");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(number: u32) -> StoredAttempt {
        StoredAttempt {
            number,
            claimed_ms: 1000 * u64::from(number),
            holder: Some("h:1".to_owned()),
            outcome: Outcome::Failed,
            ended_ms: Some(1000 * u64::from(number) + 1),
            error: Some(b"boom".to_vec()),
        }
    }

    #[test]
    fn a_history_shows_the_last_attempts_with_the_running_one() {
        let running = StoredAttempt {
            outcome: Outcome::Running,
            ended_ms: None,
            error: None,
            ..ended(17)
        };
        let all = history((1..=16).map(ended).collect(), Some(running));
        assert_eq!(all.len(), HISTORY_LEN);
        assert_eq!(all[0].number, 2);
        assert_eq!(all[15].outcome, Outcome::Running);
        assert_eq!(all[15].ended, None);
        assert_eq!(all[0].error.as_deref(), Some("boom"));
    }

    #[test]
    fn errors_are_cut_at_the_bound() {
        let long = "é".repeat(ERROR_KEPT);
        let attempt = StoredAttempt {
            error: Some(long.into_bytes()),
            ..ended(1)
        }
        .into_attempt();
        let error = attempt.error.unwrap();
        assert_eq!(error.len(), ERROR_KEPT);
        assert!(error.chars().all(|c| c == 'é'));
    }

    #[test]
    fn throughput_fills_every_minute_and_sums_partitions() {
        let now = 10 * 60_000 + 5;
        let t = Throughput::from_counts(
            now,
            7 * 60_000,
            [(8, 2, 1), (8, 1, 0), (3, 9, 9), (10, 4, 0)],
        );
        let counts: Vec<(u64, u64)> = t.minutes.iter().map(|m| (m.processed, m.failed)).collect();
        assert_eq!(counts, [(0, 0), (3, 1), (0, 0), (4, 0)]);
        assert_eq!(t.minutes[0].start, at_ms(7 * 60_000));
        assert_eq!((t.processed(), t.failed()), (7, 1));
        // At most a day, however far back `since` is.
        let day = Throughput::from_counts(now, 0, []);
        assert_eq!(day.minutes.len() as u64, THROUGHPUT_MINUTES.min(11));
        let far = Throughput::from_counts(10_000 * 60_000, 0, []);
        assert_eq!(far.minutes.len() as u64, THROUGHPUT_MINUTES);
        // A `since` in the future reads the current minute.
        assert_eq!(Throughput::from_counts(now, u64::MAX, []).minutes.len(), 1);
    }

    #[test]
    fn the_default_holder_is_host_and_pid() {
        let holder = default_holder();
        assert!(
            holder.ends_with(&format!(":{}", std::process::id())),
            "{holder}"
        );
        assert!(check_holder(&holder).is_ok());
        assert!(check_holder("").is_err());
        assert!(check_holder("a\nb").is_err());
        assert!(check_holder(&"x".repeat(129)).is_err());
    }
}
