//! What the operator's calls return: one job ([`JobInfo`]), pages of jobs
//! ([`Page`] of [`JobSummary`], by [`Listing`]), and the queues of a store
//! ([`QueueInfo`]), as every backend reports them.

use std::fmt;
use std::time::SystemTime;

use super::history::Attempt;
use super::id::JobId;

/// The most jobs one [`Queue::list`](crate::Queue::list) returns.
pub const MAX_PAGE: usize = 1_000;
/// How many payload bytes a listing returns per job
/// ([`JobSummary::payload_preview`]).
pub const PREVIEW: usize = 64;

/// Where a job is in its life: waiting for its due time, leased to a
/// worker, or dead.
///
/// # Examples
///
/// ```
/// use tiered_timer_jobs::JobState;
///
/// assert_eq!(JobState::Leased.to_string(), "leased");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobState {
    /// Scheduled and not delivered (or given back): due at its due time,
    /// or already due and waiting for a worker.
    Waiting,
    /// Delivered to a worker, under a lease (which may have run out
    /// without a worker reclaiming it yet).
    Leased,
    /// A dead letter: out of attempts or buried.
    Dead,
}

impl JobState {
    /// The state as a lower-case word: `waiting`, `leased` or `dead`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(tiered_timer_jobs::JobState::Dead.as_str(), "dead");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Waiting => "waiting",
            JobState::Leased => "leased",
            JobState::Dead => "dead",
        }
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Everything stored about one job, from [`Queue::job`](crate::Queue::job), read at one
/// instant of Redis' clock.
///
/// # Examples
///
/// ```no_run
/// # use tiered_timer_jobs::{JobId, JobState, Queue};
/// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
/// if let Some(job) = queue.job(&JobId::from("order-42")).await? {
///     println!("{} is {} after {} attempt(s)", job.id, job.state, job.attempts);
///     if job.state == JobState::Dead {
///         println!("died of: {:?}", job.last_error);
///     }
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobInfo {
    /// The job's id.
    pub id: JobId,
    /// Its partition.
    pub partition: u32,
    /// Waiting, leased or dead.
    pub state: JobState,
    /// Redis' clock when it was read.
    pub redis_time: SystemTime,
    /// When it is (waiting) or was (leased: this delivery's; dead: the
    /// last delivery's, if recorded) due.
    pub due: Option<SystemTime>,
    /// When its lease runs out (leased jobs only; it may be in the past:
    /// a lease that ran out and is not reclaimed yet).
    pub lease_expiry: Option<SystemTime>,
    /// When it died (dead letters only).
    pub died_at: Option<SystemTime>,
    /// Deliveries so far (0 for a job never delivered, or requeued).
    pub attempts: u32,
    /// The last error a worker gave (or why it died), if any.
    pub last_error: Option<String>,
    /// The payload, whole.
    pub payload: Vec<u8>,
    /// When it was scheduled, by the store's clock (`None` for a job
    /// scheduled by an earlier version, which did not record it).
    pub created: Option<SystemTime>,
    /// Who holds its lease (leased jobs only): the
    /// [`Builder::holder`](crate::Builder::holder) of the handle that
    /// claimed it, if recorded.
    pub holder: Option<String>,
    /// Its last attempts, oldest first, the running one last (at most
    /// [`HISTORY_LEN`](crate::HISTORY_LEN); see [`Attempt`]). Empty for a
    /// job never delivered; attempts made by an earlier version that did
    /// not record them are missing.
    pub history: Vec<Attempt>,
}

/// Which jobs [`Queue::list`](crate::Queue::list) lists, and in what order.
///
/// # Examples
///
/// ```
/// use tiered_timer_jobs::Listing;
///
/// assert_eq!("due".parse::<Listing>(), Ok(Listing::Due));
/// assert_eq!(Listing::Dead.as_str(), "dead");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Listing {
    /// Waiting jobs, earliest due time first.
    Waiting,
    /// Waiting jobs that are due by Redis' now, most overdue first.
    Due,
    /// Leased jobs, earliest lease expiry first.
    Leased,
    /// Dead letters, most recent death first.
    Dead,
}

impl Listing {
    /// The listing as a word: `waiting`, `due`, `leased` or `dead`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(tiered_timer_jobs::Listing::Due.as_str(), "due");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Listing::Waiting => "waiting",
            Listing::Due => "due",
            Listing::Leased => "leased",
            Listing::Dead => "dead",
        }
    }

    pub(crate) fn state(self) -> JobState {
        match self {
            Listing::Waiting | Listing::Due => JobState::Waiting,
            Listing::Leased => JobState::Leased,
            Listing::Dead => JobState::Dead,
        }
    }
}

impl fmt::Display for Listing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Listing {
    type Err = String;

    /// `waiting` (or `pending`), `due`, `leased` or `dead`.
    fn from_str(s: &str) -> Result<Listing, String> {
        match s {
            "waiting" | "pending" => Ok(Listing::Waiting),
            "due" => Ok(Listing::Due),
            "leased" => Ok(Listing::Leased),
            "dead" => Ok(Listing::Dead),
            other => Err(format!(
                "unknown listing {other:?}: waiting, due, leased or dead"
            )),
        }
    }
}

/// One job in a [`Page`].
///
/// # Examples
///
/// ```no_run
/// # use tiered_timer_jobs::{Listing, Queue};
/// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
/// for job in queue.list(Listing::Leased, 0, 20).await?.jobs {
///     println!("{} attempt {} until {:?}", job.id, job.attempts, job.at);
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobSummary {
    /// The job's id.
    pub id: JobId,
    /// Its partition.
    pub partition: u32,
    /// Its state (the listing's).
    pub state: JobState,
    /// Its due time (waiting), lease expiry (leased) or time of death
    /// (dead), by Redis' clock.
    pub at: SystemTime,
    /// Deliveries so far.
    pub attempts: u32,
    /// The payload's size in bytes.
    pub payload_len: u64,
    /// The payload's first [`PREVIEW`] bytes.
    pub payload_preview: Vec<u8>,
    /// The last error, if any (a waiting job has one if it was retried
    /// with a reason).
    pub last_error: Option<String>,
}

/// A page of jobs from [`Queue::list`](crate::Queue::list).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Page {
    /// Redis' clock when it was read (the last partition's, with
    /// several).
    pub redis_time: SystemTime,
    /// How many jobs the listing has in all (summed over partitions).
    pub total: u64,
    /// Where this page starts in the listing.
    pub offset: usize,
    /// The jobs, in the listing's order.
    pub jobs: Vec<JobSummary>,
}

/// A queue found by [`find_queues`](crate::find_queues).
///
/// # Examples
///
/// ```no_run
/// # async fn demo() -> Result<(), tiered_timer_jobs::Error> {
/// use std::time::Duration;
/// let url = "redis://127.0.0.1:6379/";
/// for found in tiered_timer_jobs::find_queues(url, false, Duration::from_secs(5)).await? {
///     let queue = tiered_timer_jobs::Queue::builder(url, &found.name)
///         .partitions(found.partitions)
///         .connect()
///         .await?;
///     println!("{}: {}", found.name, queue.stats().await?);
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueInfo {
    /// The queue's name.
    pub name: String,
    /// Its partition count: as registered by its producers, else the
    /// highest partition found plus one.
    pub partitions: u32,
    /// Whether it is in the registry (else it was found by its keys
    /// alone, and `partitions` may be low if its last partitions are
    /// empty).
    pub registered: bool,
}
