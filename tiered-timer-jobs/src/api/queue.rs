//! [`Queue`]: a handle on a queue of durable delayed jobs, and its calls
//! that hand jobs out, count them and close the handle. Scheduling is in
//! `schedule.rs`, the operator's calls in `operator.rs`, the settings in
//! `builder.rs`; every call checks its input and makes one call of the
//! queue's backend (`src/backends.rs`).
//!
//! Ground rules:
//!
//! * The store owns every job's state (Redis, or the embedded store's log
//!   and index); a handle owns nothing but open leases' tokens (inside
//!   [`Job`]s and prefetched jobs) and, on Redis, the wake-up batons it
//!   holds. A process that dies loses nothing but its leases, which run
//!   out, and its batons, which the chain re-arms.
//! * Input is checked here, once, before the backend sees it: both
//!   backends give the same answer to the same bad input.
//! * [`Queue::next`] asks the backend for jobs and waits; dropping it
//!   never strands a claimed job.
//! * [`Queue::close`] sets a flag shared by every clone and tells the
//!   backend, which fails the waiting calls and hands back what it holds;
//!   jobs claimed but not handed out are released. The number of [`Job`]s
//!   out is counted in a `watch` channel so that [`Queue::shutdown`] can
//!   wait for it to reach zero.

use std::fmt;
use std::sync::Arc;

use super::inner::Inner;
use super::job::Job;
use crate::data::checks::check_job_id;
use crate::data::error::Error;
use crate::data::id::JobId;
use crate::targets;

/// A durable queue of delayed jobs, in an embedded store (`file://`) or
/// on Redis.
///
/// Cheap to clone (an `Arc`); clones share one connection and one waker
/// (see [`next`](Queue::next)). On Redis any number of processes may open
/// the same queue (same Redis, same name, same
/// [`partitions`](crate::Builder::partitions)); an embedded store is one
/// process's, shared by every `Queue` connected to it in that process.
/// Either way each due job is delivered to exactly one
/// [`next`](Queue::next) call at a time.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use tiered_timer_jobs::Queue;
///
/// # async fn demo() -> Result<(), tiered_timer_jobs::Error> {
/// let queue = Queue::connect("redis://127.0.0.1:6379/", "orders").await?;
/// queue.schedule_with_id("order-42", Duration::from_secs(1800), b"close order 42".to_vec()).await?;
///
/// let job = queue.next().await?; // sleeps until a job is due
/// println!("{}: {:?}", job.id(), job.payload());
/// job.ack().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Queue {
    pub(crate) inner: Arc<Inner>,
}

impl fmt::Debug for Queue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Queue")
            .field("name", &self.inner.name)
            .field("backend", &self.inner.backend.name())
            .field("lease", &self.inner.lease)
            .field("max_attempts", &self.inner.max_attempts)
            .finish_non_exhaustive()
    }
}

impl Queue {
    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// How many partitions the queue has: the count recorded for it, which
    /// a handle built without [`Builder::partitions`](crate::Builder::partitions) adopts (1 on a
    /// `file://` store).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), tiered_timer_jobs::Error> {
    /// let queue = tiered_timer_jobs::Queue::connect("redis://127.0.0.1:6379/", "mail").await?;
    /// println!("mail has {} partition(s)", queue.partitions());
    /// # Ok(())
    /// # }
    /// ```
    pub fn partitions(&self) -> u32 {
        self.inner.backend.partitions()
    }

    /// Acks many jobs in one round trip per partition: each removed for
    /// good if its delivery still holds it, as [`Job::ack`] would one by
    /// one. Returns the ids of those whose lease was lost (ran out by the
    /// local estimate, so not sent; or taken over by another delivery):
    /// nothing changed for them.
    ///
    /// One script per partition per chunk of at most 1 000 jobs; with
    /// [`next_batch`](Queue::next_batch), a batch of jobs costs two
    /// scripts in all. Jobs of another queue are acked on their own
    /// queue.
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`] or [`Error::Redis`] if Redis could not be
    /// reached: the chunks before the error are acked, the others may or
    /// may not be (their jobs come back after their lease if not);
    /// [`Error::NotReplicated`] with [`replicas`](crate::Builder::replicas).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tiered_timer_jobs::Queue;
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// let jobs = queue.next_batch(100).await?;
    /// // ... work on them ...
    /// let lost = queue.ack_many(jobs).await?;
    /// if !lost.is_empty() {
    ///     eprintln!("{} jobs ran out of their lease and come back", lost.len());
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn ack_many(&self, jobs: impl IntoIterator<Item = Job>) -> Result<Vec<JobId>, Error> {
        // Per queue handle: its acks (a job is acked on its own queue).
        let mut groups: Vec<(Arc<Inner>, Vec<_>)> = Vec::new();
        for job in jobs {
            let inner = Arc::clone(&job.inner);
            let ack = job.into_pending();
            match groups.iter_mut().find(|(i, _)| Arc::ptr_eq(i, &inner)) {
                Some((_, acks)) => acks.push(ack),
                None => groups.push((inner, vec![ack])),
            }
        }
        let mut lost = Vec::new();
        for (inner, acks) in groups {
            lost.extend(inner.ack_pending(acks).await?);
        }
        Ok(lost)
    }

    /// Waits until every ack queued with [`Job::ack_batched`] on this
    /// handle (or a clone) before this call has been sent; returns the ids
    /// of the jobs whose background ack was refused since the last call
    /// (their lease ran out: they come back as redeliveries; up to 10 000
    /// ids, each is a `tracing` warning anyway).
    ///
    /// # Errors
    ///
    /// The first error a flush met since the last call
    /// ([`Error::Timeout`], [`Error::Redis`], [`Error::NotReplicated`]...):
    /// the acks of that flush may or may not have been applied; those that
    /// were not come back after their lease.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tiered_timer_jobs::Queue;
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// let job = queue.next().await?;
    /// job.ack_batched();
    /// let lost = queue.flush_acks().await?; // the ack has been applied
    /// assert!(lost.is_empty());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn flush_acks(&self) -> Result<Vec<JobId>, Error> {
        self.inner.flush_acks().await
    }

    /// Cancels a waiting job. Returns `true` if it was waiting and will now
    /// never be delivered; `false` if it was leased (a delivered job cannot
    /// be cancelled), dead, done or unknown. Nothing changes on `false`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidJobId`]; [`Error::Timeout`] or [`Error::Redis`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, SystemTime};
    /// # use tiered_timer_jobs::{JobId, Queue};
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// let id = queue.schedule(Duration::from_secs(1800), "close").await?;
    /// assert!(queue.cancel(&id).await?); // paid: never delivered
    /// assert!(!queue.cancel(&id).await?);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn cancel(&self, id: &JobId) -> Result<bool, Error> {
        check_job_id(id.as_str())?;
        self.inner.backend.cancel(id).await
    }

    /// How many jobs are waiting: scheduled, not leased, not dead. (A job
    /// whose lease ran out counts again once it is redelivered or buried.)
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`] or [`Error::Redis`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, SystemTime};
    /// # use tiered_timer_jobs::{JobId, Queue};
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// println!("{} jobs waiting", queue.pending().await?);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn pending(&self) -> Result<u64, Error> {
        self.inner.backend.pending().await
    }

    /// How many jobs are leased to workers right now (including leases
    /// that ran out and have not been reclaimed yet).
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`] or [`Error::Redis`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, SystemTime};
    /// # use tiered_timer_jobs::{JobId, Queue};
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// println!("{} jobs being worked on", queue.leased().await?);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn leased(&self) -> Result<u64, Error> {
        self.inner.backend.leased().await
    }

    /// Stops handing out jobs, for a worker that is shutting down.
    ///
    /// From now on every [`next`](Queue::next) of this queue and its clones
    /// returns [`Error::Closed`]: waiting calls at once, later calls
    /// without asking Redis. Jobs already delivered are left to their
    /// workers, which may finish them (ack, retry, extend and release go on
    /// working), and any of them dropped unfinished from now on is
    /// [released](Job::release) at once instead of waiting out its lease.
    /// So a worker that drops its work on a signal hands the job straight
    /// to another worker. Scheduling and the other calls go on working.
    ///
    /// Only this process' handle is closed (this `Queue` and its clones):
    /// other processes and other `Queue`s on the same Redis queue go on.
    /// Closing twice changes nothing; a closed queue cannot be reopened
    /// (connect a new one).
    ///
    /// See [`shutdown`](Queue::shutdown) to also wait until every job out
    /// is finished or handed back.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tiered_timer_jobs::{Error, Queue};
    /// # async fn demo(queue: Queue) -> Result<(), Error> {
    /// let worker = tokio::spawn({
    ///     let queue = queue.clone();
    ///     async move {
    ///         loop {
    ///             let job = match queue.next().await {
    ///                 Err(Error::Closed) => return, // shutting down
    ///                 other => other.expect("Redis is up"),
    ///             };
    ///             // ... work, then ack ...
    ///             let _ = job.ack().await;
    ///         }
    ///     }
    /// });
    /// tokio::signal::ctrl_c().await.expect("listen for Ctrl-C");
    /// queue.close();
    /// worker.abort(); // drops the job in hand, if any: it is released
    /// queue.shutdown().await; // waits for that release
    /// # Ok(())
    /// # }
    /// ```
    pub fn close(&self) {
        if self.inner.close() {
            tracing::info!(target: targets::QUEUE, queue = %self.inner.name, "queue closed: no more jobs handed out");
            // Waiting calls fail, batons go back; prefetched jobs become
            // jobs dropped after close, which release themselves.
            for claimed in self.inner.backend.close() {
                drop(Job::from_claimed(&self.inner, claimed));
            }
        }
    }

    /// Whether [`close`](Queue::close) was called on this queue or a
    /// clone.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tiered_timer_jobs::Queue;
    /// # async fn demo(queue: Queue) {
    /// assert!(!queue.is_closed());
    /// queue.close();
    /// assert!(queue.is_closed());
    /// # }
    /// ```
    pub fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// Closes the queue ([`close`](Queue::close)) and waits until every
    /// [`Job`] it handed out is finished: acked, retried, released, or
    /// dropped and then released (the release runs in a spawned task,
    /// which this call waits for).
    ///
    /// It waits for work in progress: put a timeout around it, and drop
    /// (abort) the work that has not finished in time, to hand those jobs
    /// back too. A release that fails (Redis unreachable) is reported as a
    /// `tracing` warning, and that job comes back when its lease runs out,
    /// as after a crash.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use tiered_timer_jobs::Queue;
    /// # async fn demo(queue: Queue, workers: Vec<tokio::task::JoinHandle<()>>) {
    /// queue.close();
    /// // Ten seconds of grace for the jobs in hand, then drop them.
    /// if tokio::time::timeout(Duration::from_secs(10), queue.shutdown()).await.is_err() {
    ///     for worker in &workers {
    ///         worker.abort();
    ///     }
    ///     queue.shutdown().await; // the dropped jobs are released
    /// }
    /// # }
    /// ```
    pub async fn shutdown(&self) {
        self.close();
        self.inner.all_returned().await;
    }

    /// Waits until a job is due, claims it under a lease, and returns it.
    ///
    /// Waiting costs nothing while nothing is due: the queue's waker
    /// blocks on the partitions' wake-up batons (`BZPOPMIN`, one call per
    /// [`health_check`](crate::Builder::health_check), which is also how a dead
    /// connection is noticed) and sleeps on `tiered-timer` until the time
    /// of the baton it holds. Each due job wakes exactly one waiting
    /// worker across all processes, which claims it in one script; a
    /// worker that comes back for its next job within a few milliseconds
    /// keeps the baton and claims the next job without waiting for one.
    /// So a job costs one claim and one ack, and at most one `BZPOPMIN`,
    /// however many workers wait. Under a backlog the calls claim at once,
    /// oldest due first across partitions (a claim at a time: with
    /// [`prefetch`](crate::Builder::prefetch), a claim takes its jobs from one
    /// partition).
    ///
    /// Cancel-safe: a job claimed for a call that was dropped goes to the
    /// next call on this queue (or is released, see
    /// [`prefetch`](crate::Builder::prefetch)).
    ///
    /// # Errors
    ///
    /// [`Error::Closed`] once the queue was [closed](Queue::close), at
    /// once for a call that was waiting. [`Error::Timeout`] or
    /// [`Error::Redis`] when a claim cannot reach Redis or no wake-up
    /// connection can be opened; call again to go on waiting (the queue
    /// reconnects by itself). Never [`Error::NotReplicated`]: with
    /// [`replicas`](crate::Builder::replicas), a claim goes on when fewer
    /// replicas are left (a claim lost in a failover only means a
    /// redelivery).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, SystemTime};
    /// # use tiered_timer_jobs::{JobId, Queue};
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// loop {
    ///     let job = queue.next().await?;
    ///     println!("{} (attempt {})", job.id(), job.attempt());
    ///     job.ack().await?;
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn next(&self) -> Result<Job, Error> {
        let mut jobs = Job::take(&self.inner, 1).await?;
        Ok(jobs.pop().expect("a delivery holds at least one job"))
    }

    /// Waits until at least one job is due, then claims up to `max` due
    /// jobs in one round trip and returns them, each under its own lease
    /// with its own token and attempt (a `max` of 0 is taken as 1).
    ///
    /// As [`next`](Queue::next) otherwise: the jobs come in due order,
    /// fewer than `max` if fewer are due at once.
    ///
    /// # Errors
    ///
    /// As [`next`](Queue::next).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tiered_timer_jobs::Queue;
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// for job in queue.next_batch(100).await? {
    ///     // ... work on each ...
    ///     job.ack().await?;
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn next_batch(&self, max: usize) -> Result<Vec<Job>, Error> {
        Job::take(&self.inner, max.max(1)).await
    }
}
