//! [`JobId`] and [`Job`], a delivered job under a lease.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::error::Error;
use crate::queue::Inner;

/// A job's id: a string, unique within its queue.
///
/// [`Queue::schedule`](crate::Queue::schedule) makes a random one;
/// [`Queue::schedule_with_id`](crate::Queue::schedule_with_id) takes yours,
/// which makes scheduling idempotent.
///
/// # Examples
///
/// ```
/// use tiered_timer_redis::JobId;
///
/// let id = JobId::from("order-42");
/// assert_eq!(id.as_str(), "order-42");
/// assert_eq!(id.to_string(), "order-42");
/// assert_eq!(id, JobId::from(String::from("order-42")));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct JobId(String);

impl JobId {
    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id as an owned string.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for JobId {
    fn from(id: &str) -> JobId {
        JobId(id.to_owned())
    }
}

impl From<String> for JobId {
    fn from(id: String) -> JobId {
        JobId(id)
    }
}

impl From<&JobId> for JobId {
    fn from(id: &JobId) -> JobId {
        id.clone()
    }
}

impl AsRef<str> for JobId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// A job delivered by [`Queue::next`](crate::Queue::next), held under a
/// lease until [`ack`](Job::ack), [`retry_after`](Job::retry_after),
/// [`fail`](Job::fail) or [`bury`](Job::bury) (which record why), or the
/// lease's expiry.
///
/// Dropping a `Job` without acking it does nothing at once: when its lease
/// runs out (by Redis' clock) the job is delivered again, with
/// [`attempt`](Job::attempt) one higher. That is what happens when a worker
/// crashes, so a dropped job behaves the same.
pub struct Job {
    pub(crate) inner: Arc<Inner>,
    pub(crate) partition: u32,
    pub(crate) id: JobId,
    pub(crate) payload: Vec<u8>,
    pub(crate) deadline_ms: u64,
    pub(crate) attempt: u32,
    pub(crate) token: String,
    pub(crate) lease: Duration,
}

impl fmt::Debug for Job {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Job")
            .field("id", &self.id)
            .field("payload_len", &self.payload.len())
            .field("deadline_ms", &self.deadline_ms)
            .field("attempt", &self.attempt)
            .field("partition", &self.partition)
            .finish_non_exhaustive()
    }
}

impl Job {
    /// The job's id.
    pub fn id(&self) -> &JobId {
        &self.id
    }

    /// The job's payload, as scheduled.
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }

    /// Takes the payload out of the job (leaving it empty); the lease is
    /// kept, so the job can still be acked.
    pub fn take_payload(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.payload)
    }

    /// When the job was due, by Redis' clock: the time it was scheduled
    /// for (for a retried job, the time of the retry). The job was never
    /// delivered before it.
    pub fn deadline(&self) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_millis(self.deadline_ms)
    }

    /// Which delivery this is: 1 for the first, one more for each
    /// redelivery after a lost lease or a [`retry_after`](Job::retry_after).
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The lease this delivery was made under: the job is this worker's for
    /// this long after Redis claimed it for it.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// Marks the job done: it is removed for good and never delivered
    /// again.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseExpired`] if the lease ran out before Redis ran the
    /// ack (the job is left as it is: due again, or already redelivered to
    /// another worker); [`Error::Timeout`] or [`Error::Redis`] if Redis
    /// could not be reached.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, SystemTime};
    /// # use tiered_timer_redis::{JobId, Queue};
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_redis::Error> {
    /// let job = queue.next().await?;
    /// // ... do the work ...
    /// job.ack().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn ack(self) -> Result<(), Error> {
        let done = self
            .inner
            .ack(self.partition, &self.id, &self.token)
            .await?;
        if done {
            Ok(())
        } else {
            Err(Error::LeaseExpired { id: self.id })
        }
    }

    /// Gives the job back, to be delivered again `delay` after now (by
    /// Redis' clock), with [`attempt`](Job::attempt) one higher. A job that
    /// has had [`max_attempts`](crate::Builder::max_attempts) deliveries
    /// goes to the dead letters instead.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseExpired`] if the lease ran out first (nothing is
    /// changed); [`Error::InvalidDeadline`] if `delay` is beyond 2^52 ms;
    /// [`Error::Timeout`] or [`Error::Redis`] if Redis could not be
    /// reached.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, SystemTime};
    /// # use tiered_timer_redis::{JobId, Queue};
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_redis::Error> {
    /// let job = queue.next().await?;
    /// // The payment provider is down: try again in a minute.
    /// job.retry_after(Duration::from_secs(60)).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn retry_after(self, delay: Duration) -> Result<(), Error> {
        let done = self
            .inner
            .retry(self.partition, &self.id, &self.token, delay)
            .await?;
        if done {
            Ok(())
        } else {
            Err(Error::LeaseExpired { id: self.id })
        }
    }
}
