//! Failures with a reason: [`Job::fail`], [`Job::retry_after_with_reason`]
//! and [`Job::bury`], and what became of the job, [`Fate`].
//!
//! How the peers treat a failing job, and what this crate does:
//!
//! * BullMQ retries a job that threw while it has attempts left (with the
//!   backoff the job asked for) and fails it for good on an
//!   `UnrecoverableError`; Sidekiq retries an exception with exponential
//!   backoff until its retries are used up and then moves the job to its
//!   dead set, keeping the error; apalis retries `Error::Failed` and stops
//!   at `Error::Abort`.
//! * So here: [`Job::fail`] is a failed *attempt*: the reason is recorded
//!   as the job's last error and the job is delivered again after an
//!   exponential backoff (1 s after the first attempt, doubling, at most
//!   1 h), like a lost lease but sooner and with a reason; on its last
//!   attempt ([`Builder::max_attempts`](crate::Builder::max_attempts)) it
//!   goes to the dead letters with that reason.
//!   [`Job::retry_after_with_reason`] is the same with a delay of your
//!   choosing. [`Job::bury`] is a *permanent* failure (bad payload, a
//!   customer that no longer exists): dead at once, whatever attempts are
//!   left.
//! * Every one of them is fenced like [`Job::ack`]: only the delivery that
//!   still holds the lease may fail or bury the job; a stale one gets
//!   [`Error::LeaseExpired`] and changes nothing, not even the last error.
//! * Jobs that die without a worker's word get a reason too: "lease
//!   expired after 3 attempt(s)" or "retried on its last attempt (3 of
//!   3)", followed by the last error a worker gave, if any.
//!
//! The dead letters and their last errors are listed by
//! [`Queue::dead_letters`](crate::Queue::dead_letters).

use std::time::Duration;

use super::job::Job;
use crate::contract::GaveUp;
use crate::data::error::Error;
use crate::targets;

/// The longest reason kept, in bytes; a longer one is cut at a character
/// boundary and ends in `…`.
pub(crate) const MAX_REASON: usize = 4096;

/// The first retry's delay after [`Job::fail`]; it doubles with each
/// attempt.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// The longest retry delay after [`Job::fail`].
const MAX_BACKOFF: Duration = Duration::from_secs(3600);

/// What became of a job that was given back with a failure.
///
/// # Examples
///
/// ```no_run
/// # use tiered_timer_jobs::{Fate, Queue};
/// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
/// let job = queue.next().await?;
/// match job.fail("payment provider timed out").await? {
///     Fate::Retried => println!("will try again"),
///     Fate::Dead => println!("out of attempts: see `ttr dead`"),
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fate {
    /// The job is waiting again and will be delivered after its delay,
    /// with [`attempt`](Job::attempt) one higher.
    Retried,
    /// The job is a dead letter, with the reason as its last error.
    Dead,
}

/// The delay before the next delivery of a job whose attempt `attempt`
/// failed: 1 s, 2 s, 4 s, ... at most 1 h.
pub(crate) fn backoff(attempt: u32) -> Duration {
    let doublings = attempt.saturating_sub(1).min(16);
    (FIRST_BACKOFF * (1 << doublings)).min(MAX_BACKOFF)
}

/// `reason`, cut to at most [`MAX_REASON`] bytes at a character boundary.
fn clip(mut reason: String) -> String {
    if reason.len() > MAX_REASON {
        let mut end = MAX_REASON - '…'.len_utf8();
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        reason.truncate(end);
        reason.push('…');
    }
    reason
}

impl Job {
    /// Gives up on this attempt because of `reason`: the job is delivered
    /// again after a backoff (1 s after the first attempt, doubling with
    /// each one, at most 1 h), with [`attempt`](Job::attempt) one higher,
    /// or, if this was its last attempt, goes to the dead letters. Either
    /// way `reason` becomes the job's last error, which
    /// [`Queue::dead_letters`](crate::Queue::dead_letters) shows.
    ///
    /// Use it for errors that may pass (a timeout, a service that is
    /// down); use [`bury`](Job::bury) for errors that will not, and
    /// [`retry_after_with_reason`](Job::retry_after_with_reason) to choose
    /// the delay. A reason longer than 4 KiB is cut to 4 KiB.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseExpired`] if this delivery no longer holds the lease
    /// (nothing is changed, the reason is not recorded);
    /// [`Error::Timeout`] or [`Error::Redis`] if Redis could not be
    /// reached.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tiered_timer_jobs::{Fate, Queue};
    /// # async fn charge(_: &[u8]) -> Result<(), String> { Ok(()) }
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// let job = queue.next().await?;
    /// match charge(job.payload()).await {
    ///     Ok(()) => job.ack().await?,
    ///     Err(why) => {
    ///         job.fail(format!("charge failed: {why}")).await?;
    ///     }
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn fail(self, reason: impl Into<String>) -> Result<Fate, Error> {
        let delay = backoff(self.attempt);
        self.give_up(Some(delay), reason.into()).await
    }

    /// Gives up on this attempt because of `reason`, to be delivered again
    /// `delay` after now (by Redis' clock): as [`fail`](Job::fail), but
    /// with your delay. It is [`retry_after`](Job::retry_after) that also
    /// records why.
    ///
    /// # Errors
    ///
    /// As [`fail`](Job::fail), and [`Error::InvalidDeadline`] if `delay`
    /// is beyond 2^51 ms.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use tiered_timer_jobs::Queue;
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// let job = queue.next().await?;
    /// // The provider said "429, retry in 30 s".
    /// job.retry_after_with_reason(Duration::from_secs(30), "rate limited by the provider")
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn retry_after_with_reason(
        self,
        delay: Duration,
        reason: impl Into<String>,
    ) -> Result<Fate, Error> {
        self.give_up(Some(delay), reason.into()).await
    }

    /// Gives up on the job for good because of `reason`: it goes to the
    /// dead letters at once, whatever attempts it has left, with `reason`
    /// as its last error. An operator can still
    /// [`requeue`](crate::Queue::requeue) it (after fixing what was wrong)
    /// or [`purge`](crate::Queue::purge) it.
    ///
    /// Use it for failures no retry can fix: a payload that does not
    /// parse, an order that no longer exists. A reason longer than 4 KiB is
    /// cut to 4 KiB.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseExpired`] if this delivery no longer holds the lease
    /// (nothing is changed: the job is not buried); [`Error::Timeout`] or
    /// [`Error::Redis`] if Redis could not be reached.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tiered_timer_jobs::Queue;
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// let job = queue.next().await?;
    /// match std::str::from_utf8(job.payload()) {
    ///     Ok(order) => { /* ... */ job.ack().await? }
    ///     Err(_) => job.bury("payload is not UTF-8").await?,
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn bury(self, reason: impl Into<String>) -> Result<(), Error> {
        self.give_up(None, reason.into()).await.map(|_| ())
    }

    /// Gives up on this attempt: retried after `retry_after`, or buried.
    async fn give_up(
        mut self,
        retry_after: Option<Duration>,
        reason: String,
    ) -> Result<Fate, Error> {
        let reason = clip(reason);
        let inner = std::sync::Arc::clone(&self.inner);
        let outcome = inner.fail(self.held_lease(), retry_after, &reason).await?;
        self.finished = true;
        match outcome {
            GaveUp::Rescheduled => {
                tracing::debug!(target: targets::JOB, queue = self.inner.name(), job = %self.id, attempt = self.attempt, %reason, "job failed; retried later");
                crate::metrics::failed(self.inner.name());
                crate::metrics::retried(self.inner.name());
                Ok(Fate::Retried)
            }
            GaveUp::Buried => {
                tracing::warn!(target: targets::JOB, queue = self.inner.name(), job = %self.id, attempt = self.attempt, %reason, "job moved to the dead letters: it failed");
                crate::metrics::failed(self.inner.name());
                crate::metrics::dead_lettered(self.inner.name());
                Ok(Fate::Dead)
            }
            GaveUp::Lost => self.lost("fail"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_an_hour() {
        let s = Duration::from_secs;
        assert_eq!(backoff(0), s(1));
        assert_eq!(backoff(1), s(1));
        assert_eq!(backoff(2), s(2));
        assert_eq!(backoff(3), s(4));
        assert_eq!(backoff(12), s(2048));
        assert_eq!(backoff(13), s(3600));
        assert_eq!(backoff(u32::MAX), s(3600));
    }

    #[test]
    fn long_reasons_are_cut_at_a_character_boundary() {
        assert_eq!(clip("short".into()), "short");
        let exact = "x".repeat(MAX_REASON);
        assert_eq!(clip(exact.clone()), exact);
        let long = "é".repeat(MAX_REASON); // 2 bytes each
        let cut = clip(long);
        assert!(cut.len() <= MAX_REASON, "{}", cut.len());
        assert!(cut.len() >= MAX_REASON - 4);
        assert!(cut.ends_with('…'));
    }
}
