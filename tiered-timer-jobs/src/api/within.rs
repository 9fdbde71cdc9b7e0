//! The calls that run inside the caller's own Postgres transaction
//! (feature `postgres`): [`Queue::within`] schedules and cancels beside a
//! business change, [`Job::ack_within`] acks with the job's effects. Each
//! checks its input as the plain call does, then makes one call of the
//! backend on the caller's executor; on another backend they are
//! [`Error::Unsupported`].

use std::fmt;
use std::time::{Duration, SystemTime};

use sqlx::PgExecutor;

use super::job::Job;
use super::queue::Queue;
use crate::contract::Due;
use crate::data::checks::check_job_id;
use crate::data::error::Error;
use crate::data::id::{random_id, JobId};

/// A [`Queue`]'s scheduling calls on the caller's executor (a
/// transaction, a connection, a pool): see [`Queue::within`]. Each call
/// consumes it; call [`Queue::within`] again for the next one.
pub struct Within<'q, E> {
    queue: &'q Queue,
    executor: E,
}

impl<E> fmt::Debug for Within<'_, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Within")
            .field("queue", &self.queue.name())
            .finish_non_exhaustive()
    }
}

impl Queue {
    /// Schedules or cancels on `executor`, inside the caller's own
    /// transaction: the job is written with the business change, or not
    /// at all (the outbox problem solved by construction).
    ///
    /// `executor` is any sqlx Postgres executor: `&mut *tx` for a
    /// transaction from `pool.begin()`, a `&mut PgConnection`, or a
    /// `&PgPool` (then the call commits on its own). A job scheduled in a
    /// transaction that rolls back never existed, and woke nobody;
    /// waiting workers learn of a job when its transaction commits (its
    /// NOTIFY is delivered then), not before. Delays count from the
    /// database's clock when the statement runs. The queue's command
    /// timeout does not apply (the transaction is the caller's: set
    /// `statement_timeout` there).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use tiered_timer_jobs::Queue;
    ///
    /// # async fn demo(pool: sqlx::PgPool, queue: Queue) -> Result<(), Box<dyn std::error::Error>> {
    /// let mut tx = pool.begin().await?;
    /// sqlx::query("INSERT INTO orders (id) VALUES ($1)").bind(42).execute(&mut *tx).await?;
    /// queue
    ///     .within(&mut *tx)
    ///     .schedule_with_id("close-order-42", Duration::from_secs(1800), b"42".to_vec())
    ///     .await?;
    /// tx.commit().await?; // a rollback instead: the job never existed
    /// # Ok(())
    /// # }
    /// ```
    pub fn within<'c, E: PgExecutor<'c>>(&self, executor: E) -> Within<'_, E> {
        Within {
            queue: self,
            executor,
        }
    }
}

impl<'c, E: PgExecutor<'c>> Within<'_, E> {
    /// [`Queue::schedule`] on the caller's executor: due `delay` after
    /// the database's now; returns the new job's random id.
    ///
    /// # Errors
    ///
    /// As [`Queue::schedule`]'s checks ([`Error::PayloadTooLarge`],
    /// [`Error::InvalidDeadline`]), before anything is sent;
    /// [`Error::Postgres`] from the statement (the transaction is then
    /// aborted, as after any failed statement); [`Error::Unsupported`]
    /// on a queue that is not on Postgres.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(pool: sqlx::PgPool, queue: tiered_timer_jobs::Queue) -> Result<(), Box<dyn std::error::Error>> {
    /// let mut tx = pool.begin().await?;
    /// let id = queue.within(&mut *tx).schedule(Duration::from_secs(60), b"remind".to_vec()).await?;
    /// tx.commit().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn schedule(
        self,
        delay: Duration,
        payload: impl Into<Vec<u8>>,
    ) -> Result<JobId, Error> {
        self.schedule_one(random_id().into(), Due::after(delay), payload.into())
            .await
    }

    /// [`Queue::schedule_at`] on the caller's executor: due at `at` by the
    /// database's clock.
    ///
    /// # Errors
    ///
    /// As [`schedule`](Within::schedule).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, SystemTime};
    /// # async fn demo(pool: sqlx::PgPool, queue: tiered_timer_jobs::Queue) -> Result<(), Box<dyn std::error::Error>> {
    /// let mut tx = pool.begin().await?;
    /// let at = SystemTime::now() + Duration::from_secs(3600);
    /// queue.within(&mut *tx).schedule_at(at, b"report".to_vec()).await?;
    /// tx.commit().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn schedule_at(
        self,
        at: SystemTime,
        payload: impl Into<Vec<u8>>,
    ) -> Result<JobId, Error> {
        self.schedule_one(random_id().into(), Due::at(at), payload.into())
            .await
    }

    /// [`Queue::schedule_with_id`] on the caller's executor: idempotent
    /// while a job of that id is waiting or leased.
    ///
    /// # Errors
    ///
    /// As [`schedule`](Within::schedule), and [`Error::InvalidJobId`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(pool: sqlx::PgPool, queue: tiered_timer_jobs::Queue) -> Result<(), Box<dyn std::error::Error>> {
    /// let mut tx = pool.begin().await?;
    /// queue.within(&mut *tx).schedule_with_id("order-42", Duration::from_secs(1800), b"42".to_vec()).await?;
    /// tx.commit().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn schedule_with_id(
        self,
        id: impl Into<JobId>,
        delay: Duration,
        payload: impl Into<Vec<u8>>,
    ) -> Result<JobId, Error> {
        self.schedule_one(id.into(), Due::after(delay), payload.into())
            .await
    }

    /// [`Queue::cancel`] on the caller's executor: `true` if the job was
    /// waiting (it is gone once the transaction commits).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidJobId`] before anything is sent;
    /// [`Error::Postgres`]; [`Error::Unsupported`] off Postgres.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(pool: sqlx::PgPool, queue: tiered_timer_jobs::Queue) -> Result<(), Box<dyn std::error::Error>> {
    /// let mut tx = pool.begin().await?;
    /// sqlx::query("UPDATE orders SET paid = true WHERE id = 42").execute(&mut *tx).await?;
    /// queue.within(&mut *tx).cancel(&"close-order-42".into()).await?;
    /// tx.commit().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn cancel(self, id: &JobId) -> Result<bool, Error> {
        check_job_id(id.as_str())?;
        self.queue.inner.backend.cancel_in(self.executor, id).await
    }

    async fn schedule_one(
        self,
        id: JobId,
        due: Result<Due, Error>,
        payload: Vec<u8>,
    ) -> Result<JobId, Error> {
        let job = self.queue.check(id, due, payload)?;
        let id = job.id.clone();
        self.queue
            .inner
            .backend
            .schedule_in(self.executor, job)
            .await?;
        Ok(id)
    }
}

impl Job {
    /// Acks the job on `executor`, inside the caller's transaction: the
    /// job's effects and its ack commit together or not at all.
    ///
    /// A worker that dies before the commit leaves neither (the job comes
    /// back when its lease runs out); one whose lease was taken over gets
    /// [`Error::LeaseExpired`] here and must roll back, so another
    /// delivery's effects are never doubled (effectively once, for
    /// effects in the same database). While the transaction is open the
    /// job's row is locked: no claim takes it, even if the lease runs
    /// out meanwhile, until the transaction ends. As [`ack`](Job::ack),
    /// it is not sent once the lease ran out by the local estimate.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseExpired`] if the lease was lost (roll back);
    /// [`Error::Postgres`]; [`Error::Unsupported`] off Postgres.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(pool: sqlx::PgPool, queue: tiered_timer_jobs::Queue) -> Result<(), Box<dyn std::error::Error>> {
    /// let job = queue.next().await?;
    /// let mut tx = pool.begin().await?;
    /// sqlx::query("UPDATE orders SET closed = true WHERE id = 42").execute(&mut *tx).await?;
    /// job.ack_within(&mut *tx).await?; // lease lost: an error, and the `?` drops (rolls back) tx
    /// tx.commit().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn ack_within<'c, E: PgExecutor<'c>>(mut self, executor: E) -> Result<(), Error> {
        if self.lease_ran_out() {
            self.finished = true;
            return self.lost("ack_within");
        }
        let done = self.inner.backend.ack_in(executor, self.held_lease()).await;
        self.finished = true;
        if done? {
            self.acked();
            Ok(())
        } else {
            self.lost("ack_within")
        }
    }
}
