//! [`Queue`]'s recurring jobs: [`Queue::recur`], [`Queue::unrecur`],
//! [`Queue::pause_recurrence`], [`Queue::resume_recurrence`] and
//! [`Queue::recurrences`]. The name, the policy and the payload are
//! checked here, then one call of the backend: the chain of occurrences
//! is the store's (see `src/data/recurrence.rs` and each backend).

use super::queue::Queue;
use crate::contract::NewRecurrence;
use crate::data::error::Error;
use crate::data::recurrence::{check_recurrence_name, Recurrence, RecurrenceInfo};

impl Queue {
    /// Registers a recurring job: one job per occurrence of `recurrence`,
    /// each with `payload`, due at the occurrence's time (never before it,
    /// by the store's clock), under the id `name@<time in UTC>`
    /// ([`Job::recurrence`](crate::Job::recurrence) and
    /// [`Job::occurrence`](crate::Job::occurrence) read it back). Returns
    /// `true` if this created or changed the recurrence.
    ///
    /// **Idempotent, and safe from any number of processes**: with the
    /// same spec, zone, policy and payload it changes nothing, so every
    /// process of a fleet may call it at start-up; each occurrence is still
    /// one job, delivered once (at least once under the lease rules). With
    /// another spec, zone, policy or payload it **replaces** the recurrence
    /// and its waiting occurrence in one step: once it returns, no job of
    /// the old definition is waiting (an occurrence already delivered to a
    /// worker finishes as any job does).
    ///
    /// The store keeps one occurrence waiting at a time; claiming it
    /// schedules the next in the same atomic step (a script on Redis, a
    /// log frame in a `file://` store), so the chain needs no leader and
    /// survives any process dying, and a recurrence with no worker running
    /// piles nothing up: what happens to the occurrences missed meanwhile
    /// is its [`Missed`](crate::Missed) policy's.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRecurrence`] for a bad name (empty, over 256 bytes,
    /// control characters) or [`Missed::RunAll`](crate::Missed::RunAll)'s
    /// `max` out of 1..=10 000; [`Error::PayloadTooLarge`]; the store's
    /// errors ([`Error::Timeout`], [`Error::Redis`], [`Error::Io`]...).
    /// Nothing is registered on an error.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use tiered_timer_jobs::{Missed, Queue, Recurrence};
    ///
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// let nightly = Recurrence::cron("0 30 2 * * *")?
    ///     .time_zone("Europe/Berlin")?
    ///     .missed(Missed::RunOnce);
    /// queue.recur("nightly-report", nightly, b"{}".to_vec()).await?; // at every start-up
    ///
    /// let job = queue.next().await?;
    /// if job.recurrence() == Some("nightly-report") {
    ///     println!("the report of {:?}", job.occurrence().unwrap());
    /// }
    /// job.ack().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn recur(
        &self,
        name: &str,
        recurrence: Recurrence,
        payload: impl Into<Vec<u8>>,
    ) -> Result<bool, Error> {
        check_recurrence_name(name)?;
        recurrence.check()?;
        let payload = payload.into();
        let limit = self.inner.max_payload;
        if payload.len() > limit {
            return Err(Error::PayloadTooLarge {
                len: payload.len(),
                limit,
            });
        }
        self.inner
            .backend
            .recur(NewRecurrence {
                name: name.to_owned(),
                recurrence,
                payload,
            })
            .await
    }

    /// Removes the recurrence `name` and cancels its waiting occurrence;
    /// an occurrence already delivered to a worker finishes. Returns
    /// `true` if there was one.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRecurrence`] for a bad name; the store's errors.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tiered_timer_jobs::Queue;
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// if queue.unrecur("nightly-report").await? {
    ///     println!("no more nightly reports");
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn unrecur(&self, name: &str) -> Result<bool, Error> {
        check_recurrence_name(name)?;
        self.inner.backend.unrecur(name).await
    }

    /// Pauses the recurrence `name`: its waiting occurrence is cancelled
    /// and no other is scheduled until
    /// [`resume_recurrence`](Queue::resume_recurrence) (occurrences that
    /// come meanwhile are not delivered, whatever its [`Missed`](crate::Missed)
    /// policy). Returns `true` if there is such a recurrence (paused now,
    /// or already).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRecurrence`] for a bad name; the store's errors.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tiered_timer_jobs::Queue;
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// queue.pause_recurrence("nightly-report").await?; // during the migration
    /// queue.resume_recurrence("nightly-report").await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn pause_recurrence(&self, name: &str) -> Result<bool, Error> {
        check_recurrence_name(name)?;
        self.inner.backend.pause_recurrence(name, true).await
    }

    /// Resumes a paused recurrence at its next occurrence after now.
    /// Returns `true` if there is such a recurrence (running now, or
    /// already).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRecurrence`] for a bad name; the store's errors.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tiered_timer_jobs::Queue;
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// assert!(queue.resume_recurrence("nightly-report").await?);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn resume_recurrence(&self, name: &str) -> Result<bool, Error> {
        check_recurrence_name(name)?;
        self.inner.backend.pause_recurrence(name, false).await
    }

    /// Every recurrence of the queue, by name: its spec, zone and policy,
    /// whether it is paused, its waiting occurrence, its last delivered
    /// occurrence and what became of that job.
    ///
    /// # Errors
    ///
    /// The store's errors.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tiered_timer_jobs::Queue;
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// for r in queue.recurrences().await? {
    ///     println!("{}: {} ({}), next {:?}", r.name, r.spec, r.time_zone, r.next);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn recurrences(&self) -> Result<Vec<RecurrenceInfo>, Error> {
        self.inner.backend.recurrences().await
    }
}
