//! [`Queue`]'s scheduling calls: one job or many, after a delay or at a
//! time, with a random id or an idempotent one of yours. Every job is
//! checked here (id, payload size, due time) before the backend sees any
//! of a call's jobs.

use std::time::{Duration, SystemTime};

use super::queue::Queue;
use crate::contract::{Due, NewJob};
use crate::data::checks::check_job_id;
use crate::data::error::Error;
use crate::data::id::{random_id, JobId};

impl Queue {
    /// Schedules a job due `delay` from now, where "now" is Redis' clock
    /// when it receives the job, under a new random id.
    ///
    /// # Errors
    ///
    /// [`Error::PayloadTooLarge`]; [`Error::InvalidDeadline`] if `delay`
    /// is beyond 2^52 ms; [`Error::Timeout`] or [`Error::Redis`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, SystemTime};
    /// # use tiered_timer_jobs::{JobId, Queue};
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// let id = queue.schedule(Duration::from_secs(1800), b"close order 42".to_vec()).await?;
    /// println!("scheduled {id}");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn schedule(
        &self,
        delay: Duration,
        payload: impl Into<Vec<u8>>,
    ) -> Result<JobId, Error> {
        self.schedule_one(random_id().into(), Due::after(delay), payload.into())
            .await
    }

    /// Schedules a job due at `at`, under a new random id. A time in the
    /// past makes the job due at once.
    ///
    /// `at` is read as a point on Redis' clock: a client whose clock is off
    /// by `e` gets its job `e` early or late relative to its own intent,
    /// but never before `at` by Redis' clock. Prefer
    /// [`schedule`](Queue::schedule) with a delay when clocks may differ.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidDeadline`] if `at` is before the Unix epoch or past
    /// 2^52 ms after it; otherwise as [`schedule`](Queue::schedule).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, SystemTime};
    /// # use tiered_timer_jobs::{JobId, Queue};
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// let at = SystemTime::now() + Duration::from_secs(60);
    /// queue.schedule_at(at, "remind the shop owner").await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn schedule_at(
        &self,
        at: SystemTime,
        payload: impl Into<Vec<u8>>,
    ) -> Result<JobId, Error> {
        self.schedule_one(random_id().into(), Due::at(at), payload.into())
            .await
    }

    /// Schedules a job under your id, due `delay` from Redis' now; if a job
    /// with this id is already waiting or leased, changes nothing and
    /// returns the id. A producer that retries after a timeout therefore
    /// makes no duplicate. (A dead letter with this id is replaced.)
    ///
    /// # Errors
    ///
    /// [`Error::InvalidJobId`]; otherwise as [`schedule`](Queue::schedule).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, SystemTime};
    /// # use tiered_timer_jobs::{JobId, Queue};
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// let first = queue.schedule_with_id("order-42", Duration::from_secs(1800), "close").await?;
    /// // A retry after a timeout makes no duplicate.
    /// let again = queue.schedule_with_id("order-42", Duration::from_secs(1800), "close").await?;
    /// assert_eq!(first, again);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn schedule_with_id(
        &self,
        id: impl Into<JobId>,
        delay: Duration,
        payload: impl Into<Vec<u8>>,
    ) -> Result<JobId, Error> {
        self.schedule_one(id.into(), Due::after(delay), payload.into())
            .await
    }

    /// Schedules many jobs under new random ids, each `(delay, payload)`,
    /// with every delay counted from one instant of Redis' clock. Returns
    /// their ids in order.
    ///
    /// The jobs go in chunks, each one script on its partition: at most
    /// 1 000 jobs (or about 4 MiB of payload) per script, so no single
    /// script holds Redis for long (a chunk of 1 000 small jobs runs in
    /// about 3 ms). Each chunk reads `TIME` once, writes all its jobs or
    /// none, and wakes one worker at most (only if one of its jobs is
    /// now the partition's earliest).
    ///
    /// "Now" is the same for the whole call: the first script reads
    /// Redis' `TIME` and every later chunk on the same Redis counts from
    /// that instant, so equal delays give equal due times and no job is
    /// due before the call plus its delay. (On a [cluster](crate::Builder::cluster)
    /// each partition's first chunk reads its own node's clock instead,
    /// which is the one that decides whether its jobs are due.) As in
    /// [`schedule`](Queue::schedule), a delay is rounded up to the
    /// millisecond, and so is "now".
    ///
    /// Atomic per chunk, not per call: the input is checked in full before
    /// anything is sent (a bad job anywhere writes nothing), then the
    /// chunks run one after another, partition by partition. A call of at
    /// most 1 000 jobs on a queue of one partition is one script: all or
    /// nothing. On an error from Redis (a timeout, a lost connection) the
    /// chunks before the failing one are written, those after it are not
    /// sent, and the failing one may or may not have run; to retry such a
    /// call without duplicates, use
    /// [`schedule_many_with_ids`](Queue::schedule_many_with_ids).
    ///
    /// # Errors
    ///
    /// As [`schedule`](Queue::schedule), for any one of the jobs.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, SystemTime};
    /// # use tiered_timer_jobs::{JobId, Queue};
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// let ids = queue
    ///     .schedule_many((0..1000).map(|i| (Duration::from_secs(60), format!("job {i}"))))
    ///     .await?;
    /// assert_eq!(ids.len(), 1000); // all due at the same millisecond
    /// # Ok(())
    /// # }
    /// ```
    pub async fn schedule_many<P: Into<Vec<u8>>>(
        &self,
        jobs: impl IntoIterator<Item = (Duration, P)>,
    ) -> Result<Vec<JobId>, Error> {
        let jobs = jobs
            .into_iter()
            .map(|(delay, payload)| (JobId::from(random_id()), Due::after(delay), payload.into()));
        let jobs = self.checked(jobs)?;
        let ids = jobs.iter().map(|job| job.id.clone()).collect();
        self.inner.backend.schedule_many(jobs).await?;
        Ok(ids)
    }

    /// Schedules many jobs under new random ids, each `(at, payload)`, due
    /// at those exact times (rounded up to the millisecond). Returns their
    /// ids in order.
    ///
    /// Each `at` is read on Redis' clock and converted as in
    /// [`schedule_at`](Queue::schedule_at) (a time in the past is due at
    /// once); the jobs go in chunks as in
    /// [`schedule_many`](Queue::schedule_many), with the same atomicity.
    /// This is the call for a producer that computes its own due times:
    /// how long the batch takes to send changes none of them.
    ///
    /// # Errors
    ///
    /// As [`schedule_at`](Queue::schedule_at), for any one of the jobs.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, SystemTime};
    /// # use tiered_timer_jobs::{JobId, Queue};
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// // One reminder a second for the next ten minutes.
    /// let start = SystemTime::now();
    /// let ids = queue
    ///     .schedule_many_at((1..=600).map(|s| (start + Duration::from_secs(s), "tick")))
    ///     .await?;
    /// assert_eq!(ids.len(), 600);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn schedule_many_at<P: Into<Vec<u8>>>(
        &self,
        jobs: impl IntoIterator<Item = (SystemTime, P)>,
    ) -> Result<Vec<JobId>, Error> {
        let jobs = jobs
            .into_iter()
            .map(|(at, payload)| (JobId::from(random_id()), Due::at(at), payload.into()));
        let jobs = self.checked(jobs)?;
        let ids = jobs.iter().map(|job| job.id.clone()).collect();
        self.inner.backend.schedule_many(jobs).await?;
        Ok(ids)
    }

    /// Schedules many jobs under your ids, each `(id, delay, payload)`, as
    /// [`schedule_with_id`](Queue::schedule_with_id) would one by one: an
    /// id that is already waiting or leased, or that comes earlier in the
    /// same call, is left alone. Returns how many jobs were new.
    ///
    /// Delays count from one instant of Redis' clock, and the jobs go in
    /// chunks, as in [`schedule_many`](Queue::schedule_many). Being
    /// idempotent, the whole call can be repeated after an error (a
    /// timeout in the middle, say): what was written stays as it was, the
    /// rest is written.
    ///
    /// # Errors
    ///
    /// As [`schedule_with_id`](Queue::schedule_with_id), for any one of the
    /// jobs.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, SystemTime};
    /// # use tiered_timer_jobs::{JobId, Queue};
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// let close = |order: u32| (format!("close-{order}"), Duration::from_secs(1800), "close");
    /// assert_eq!(queue.schedule_many_with_ids((1..=100).map(close)).await?, 100);
    /// // Sent again (a retry after a timeout): nothing new.
    /// assert_eq!(queue.schedule_many_with_ids((1..=100).map(close)).await?, 0);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn schedule_many_with_ids<I: Into<JobId>, P: Into<Vec<u8>>>(
        &self,
        jobs: impl IntoIterator<Item = (I, Duration, P)>,
    ) -> Result<usize, Error> {
        let jobs = jobs
            .into_iter()
            .map(|(id, delay, payload)| (id.into(), Due::after(delay), payload.into()));
        let jobs = self.checked(jobs)?;
        self.inner.backend.schedule_many(jobs).await
    }

    /// Checks one job and schedules it.
    async fn schedule_one(
        &self,
        id: JobId,
        due: Result<Due, Error>,
        payload: Vec<u8>,
    ) -> Result<JobId, Error> {
        let job = self.check(id, due, payload)?;
        let id = job.id.clone();
        self.inner.backend.schedule(job).await?;
        Ok(id)
    }

    /// Checks every job of a batch before any is sent: a bad job anywhere
    /// writes nothing.
    fn checked(
        &self,
        jobs: impl Iterator<Item = (JobId, Result<Due, Error>, Vec<u8>)>,
    ) -> Result<Vec<NewJob>, Error> {
        jobs.map(|(id, due, payload)| self.check(id, due, payload))
            .collect()
    }

    /// The one check of a job, whatever the backend: its id, its
    /// payload's size, its due time (already converted, with its error).
    pub(super) fn check(
        &self,
        id: JobId,
        due: Result<Due, Error>,
        payload: Vec<u8>,
    ) -> Result<NewJob, Error> {
        check_job_id(id.as_str())?;
        let limit = self.inner.max_payload;
        if payload.len() > limit {
            return Err(Error::PayloadTooLarge {
                len: payload.len(),
                limit,
            });
        }
        Ok(NewJob {
            id,
            due: due?,
            payload,
        })
    }
}
