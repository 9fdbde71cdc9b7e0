//! [`Job`], a delivered job under a lease, and the claims that hand jobs
//! out ([`Job::take`], what [`Queue::next`](crate::Queue::next) calls).
//!
//! Ground rules:
//!
//! * The store decides whether a lease is held: every call here is one
//!   fenced call of the backend (on Redis one script) that checks the
//!   token and the expiry against the deciding clock.
//! * The `Job` keeps a local, conservative estimate of when its lease runs
//!   out (the local instant the claim or last renewal was *sent*, plus the
//!   lease): Redis' expiry is never earlier than that, so
//!   [`Job::keep_alive`] renews in time and gives up before another worker
//!   can have the job. The estimate is only ever used to stop early.
//! * A `Job` counts as held by its queue until it is acked, retried,
//!   released or dropped; [`Queue::shutdown`](crate::Queue::shutdown)
//!   waits for that count to reach zero. After
//!   [`Queue::close`](crate::Queue::close), a job dropped unfinished is
//!   released by a spawned task, which holds the count until it is done.

use std::fmt;
use std::future::IntoFuture;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use super::ack_batch::PendingAck;
use super::inner::Inner;
use super::lease::{Held, LocalLease};
use crate::contract::{AckAndClaim, Claimed, GaveUp, Lease, LeaseToken};
use crate::data::error::Error;
use crate::data::id::JobId;
use crate::data::limits::{millis_up, LEASE_RANGE, MAX_SPAN_MS};
use crate::targets;

/// A job delivered by [`Queue::next`](crate::Queue::next), held under a
/// lease until [`ack`](Job::ack), [`retry_after`](Job::retry_after),
/// [`release`](Job::release), [`fail`](Job::fail) or [`bury`](Job::bury)
/// (which record why), or the lease's expiry.
///
/// The lease is not renewed unless the worker asks:
/// [`extend_lease`](Job::extend_lease) once, or
/// [`keep_alive`](Job::keep_alive) around the work. A worker that hangs or
/// dies therefore loses its job after one lease.
///
/// Dropping a `Job` without acking it does nothing at once: when its lease
/// runs out (by Redis' clock) the job is delivered again, with
/// [`attempt`](Job::attempt) one higher. That is what happens when a worker
/// crashes, so a dropped job behaves the same. The exception is a queue
/// that was [closed](crate::Queue::close): a job dropped after that is
/// [released](Job::release) at once, so a stopping worker hands back what
/// it drops.
pub struct Job {
    pub(crate) inner: Arc<Inner>,
    pub(crate) partition: u32,
    pub(crate) id: JobId,
    pub(crate) payload: Vec<u8>,
    pub(crate) deadline_ms: u64,
    pub(crate) attempt: u32,
    pub(crate) token: LeaseToken,
    pub(crate) lease: Duration,
    /// The local estimate of the lease (see the ground rules).
    pub(crate) local_lease: Mutex<LocalLease>,
    /// Counts this job as held until it is dropped.
    pub(crate) held: Option<Held>,
    /// Acked, retried or released (or found lost): nothing to hand back.
    pub(crate) finished: bool,
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
    /// A claimed job as a `Job` of `inner` (counted as held).
    pub(crate) fn from_claimed(inner: &Arc<Inner>, claimed: Claimed) -> Job {
        Job {
            inner: Arc::clone(inner),
            partition: claimed.partition,
            id: claimed.id,
            payload: claimed.payload,
            deadline_ms: claimed.deadline_ms,
            attempt: claimed.attempt,
            token: claimed.token,
            lease: claimed.lease,
            local_lease: Mutex::new(LocalLease {
                sent: claimed.sent,
                length: claimed.lease,
            }),
            held: Some(inner.hold()),
            finished: false,
        }
    }

    /// A claimed job handed to a worker, with its `tracing` event.
    pub(crate) fn handed_out(inner: &Arc<Inner>, claimed: Claimed) -> Job {
        let (expired, partition) = (claimed.expired, claimed.partition);
        crate::metrics::claimed(
            inner.name(),
            (!expired).then(|| {
                Duration::from_millis(claimed.claimed_ms.saturating_sub(claimed.deadline_ms))
            }),
        );
        let job = Job::from_claimed(inner, claimed);
        if expired {
            tracing::warn!(target: targets::JOB, queue = inner.name(), job = %job.id, attempt = job.attempt, partition, "job redelivered: its last lease ran out before an ack");
        } else {
            tracing::debug!(target: targets::JOB, queue = inner.name(), job = %job.id, attempt = job.attempt, partition, "job claimed");
        }
        job
    }

    /// Waits until a job is due, claims between one and `max` under a
    /// lease and hands them out (what [`Queue::next`](crate::Queue::next)
    /// and [`Queue::next_batch`](crate::Queue::next_batch) do).
    ///
    /// # Errors
    ///
    /// [`Error::Closed`] once the queue was closed; the backend's.
    pub(crate) async fn take(inner: &Arc<Inner>, max: usize) -> Result<Vec<Job>, Error> {
        if inner.is_closed() {
            return Err(Error::Closed);
        }
        let claimed = inner.backend.claim(max).await?;
        let jobs: Vec<Job> = claimed
            .into_iter()
            .map(|c| Job::handed_out(inner, c))
            .collect();
        if inner.is_closed() {
            // Closed while the claim was in flight: dropped after close,
            // the jobs are released.
            drop(jobs);
            return Err(Error::Closed);
        }
        Ok(jobs)
    }

    /// The lease this delivery holds.
    pub(crate) fn held_lease(&self) -> Lease<'_> {
        Lease {
            partition: self.partition,
            id: &self.id,
            token: &self.token,
        }
    }

    /// The local estimate of the lease.
    fn local_lease(&self) -> LocalLease {
        *self.local_lease.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the lease has run out by the local estimate (which is never
    /// later than the store's expiry).
    pub(crate) fn lease_ran_out(&self) -> bool {
        self.local_lease().ran_out()
    }

    /// This job as an ack to send (see [`ack_pending`](Inner::ack_pending)):
    /// it is finished here, and counts as held until the ack is done.
    pub(crate) fn into_pending(mut self) -> PendingAck {
        self.finished = true;
        PendingAck {
            partition: self.partition,
            id: std::mem::replace(&mut self.id, JobId::from("")),
            token: std::mem::replace(&mut self.token, LeaseToken::NONE),
            attempt: self.attempt,
            local_lease: self.local_lease(),
            held: self.held.take(),
        }
    }

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
    /// redelivery after a lost lease or a [`retry_after`](Job::retry_after)
    /// ([`release`](Job::release) does not count).
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The lease this delivery was made under: the job is this worker's for
    /// this long after Redis claimed it for it, unless renewed with
    /// [`extend_lease`](Job::extend_lease) or
    /// [`keep_alive`](Job::keep_alive). (This stays the claim's lease after
    /// a renewal of another length.)
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// Marks the job done: it is removed for good and never delivered
    /// again.
    ///
    /// An ack is one script fenced by the lease's token: it succeeds if no
    /// other delivery has claimed the job since. It is not sent at all
    /// once the lease ran out by the local estimate (the instant the claim
    /// or last renewal was sent, plus the lease: never later than Redis'
    /// expiry); an ack sent just before that and arriving just after
    /// still succeeds if nobody took the job meanwhile, which is safe.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseExpired`] if the lease ran out first (the job is left
    /// as it is: due again, or already redelivered to another worker);
    /// [`Error::Timeout`] or [`Error::Redis`] if Redis could not be
    /// reached; [`Error::NotReplicated`] with
    /// [`replicas`](crate::Builder::replicas) if the ack did not reach
    /// them (it is done on the master; a failover may bring the job back
    /// as a redelivery).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, SystemTime};
    /// # use tiered_timer_jobs::{JobId, Queue};
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// let job = queue.next().await?;
    /// // ... do the work ...
    /// job.ack().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn ack(mut self) -> Result<(), Error> {
        if self.lease_ran_out() {
            self.finished = true;
            return self.lost("ack");
        }
        let done = self.inner.backend.ack(self.held_lease()).await;
        self.finished = true;
        if done? {
            self.acked();
            Ok(())
        } else {
            self.lost("ack")
        }
    }

    /// Reports an ack that succeeded.
    pub(super) fn acked(&self) {
        tracing::debug!(target: targets::JOB, queue = self.inner.name(), job = %self.id, attempt = self.attempt, "job acked");
        crate::metrics::acked(self.inner.name());
    }

    /// Acks this job in the background, batched with this queue's other
    /// background acks; returns at once.
    ///
    /// [`ack`](Job::ack) waits a round trip for its script, so a worker
    /// that acks each job waits a round trip per job, and Redis runs a
    /// script per job. A background ack goes out with the others queued
    /// on the same [`Queue`](crate::Queue) handle (or a clone): the first
    /// starts a flush (one [`Queue::ack_many`](crate::Queue::ack_many):
    /// one script per partition), and those queued meanwhile go out
    /// together in the next one. With [`prefetch`](crate::Builder::prefetch)
    /// a worker then takes and acks jobs with no round trip of its own.
    ///
    /// The ack is as safe as [`ack`](Job::ack): fenced by the lease's
    /// token, and not sent if the lease ran out by the local estimate by
    /// the time its batch goes. What is weaker is the report: the caller
    /// does not learn here whether it succeeded. A lost lease is a
    /// `tracing` warning and `ttr_leases_lost_total`, the job comes back
    /// as a redelivery (as after any lost lease), and
    /// [`Queue::flush_acks`](crate::Queue::flush_acks) waits for the acks
    /// queued so far and returns the ids of those lost. Until its flush the
    /// job counts as held: [`Queue::shutdown`](crate::Queue::shutdown)
    /// waits for it. A process that dies first loses the ack, not the
    /// job: it is delivered again after its lease.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime (the flush is a spawned task).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tiered_timer_jobs::Queue;
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// for _ in 0..1000 {
    ///     let job = queue.next().await?;
    ///     // ... do the work ...
    ///     job.ack_batched();
    /// }
    /// let lost = queue.flush_acks().await?;
    /// assert!(lost.is_empty(), "{} jobs lost their lease and come back", lost.len());
    /// # Ok(())
    /// # }
    /// ```
    #[track_caller]
    pub fn ack_batched(self) {
        let inner = Arc::clone(&self.inner);
        inner.queue_ack(self.into_pending());
    }

    /// Acks this job and claims the next due job of its partition in the
    /// same round trip; if none is due, waits for one as
    /// [`Queue::next`](crate::Queue::next) does (on any partition).
    ///
    /// The claim in the ack's round trip uses this process' wake-up baton
    /// for the partition if it holds a due one; without it, it takes a job
    /// only if more than one is due (the baton's holder takes the first).
    /// With [`prefetch`](crate::Builder::prefetch), it claims that many
    /// more, for the next calls.
    ///
    /// Under a backlog on several partitions, the claim stays on this
    /// job's partition for at most 7 claims in a row while another
    /// partition's due jobs are older; then the ack goes alone and the
    /// claim goes to that partition, side by side (two scripts, one round
    /// trip of waiting), so that no partition falls behind.
    ///
    /// # Errors
    ///
    /// As [`ack`](Job::ack) (nothing is claimed if the ack fails; after
    /// [`Error::NotReplicated`] the jobs claimed with the ack go to the
    /// next [`Queue::next`](crate::Queue::next) calls), then as
    /// [`Queue::next`](crate::Queue::next).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tiered_timer_jobs::Queue;
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// let mut job = queue.next().await?;
    /// loop {
    ///     // ... work on the job ...
    ///     job = job.ack_and_next().await?;
    /// }
    /// # }
    /// ```
    pub async fn ack_and_next(mut self) -> Result<Job, Error> {
        if self.lease_ran_out() {
            self.finished = true;
            return self.lost("ack");
        }
        if self.inner.is_closed() {
            self.ack_quietly().await?;
            return Err(Error::Closed);
        }
        let inner = Arc::clone(&self.inner);
        // A prefetched job is here already: the ack alone is the round
        // trip.
        if let Some(next) = inner.backend.take_claimed() {
            return match self.ack().await {
                Ok(()) => Ok(Job::handed_out(&inner, next)),
                Err(error) => {
                    inner.backend.give_back(vec![next]);
                    Err(error)
                }
            };
        }
        let outcome = inner.backend.ack_and_claim(self.held_lease()).await;
        self.finished = true;
        let AckAndClaim {
            acked,
            replicated,
            jobs,
        } = outcome?;
        if !acked {
            return self.lost("ack");
        }
        self.acked();
        if let Err(error) = replicated {
            // The ack reached too few replicas (it is done on the master):
            // the caller hears so. The jobs claimed with it are claimed
            // all the same (a claim is best effort): they go to the next
            // `next` calls.
            inner.backend.give_back(jobs);
            return Err(error);
        }
        let mut jobs = jobs.into_iter();
        match jobs.next() {
            Some(first) => {
                inner.backend.give_back(jobs.collect());
                Ok(Job::handed_out(&inner, first))
            }
            None => {
                drop(self);
                let mut next = Job::take(&inner, 1).await?;
                Ok(next.pop().expect("a delivery holds at least one job"))
            }
        }
    }

    /// Acks without the "acked" event's caller context (for a closed
    /// queue's `ack_and_next`).
    async fn ack_quietly(&mut self) -> Result<(), Error> {
        let done = self.inner.backend.ack(self.held_lease()).await;
        self.finished = true;
        if done? {
            Ok(())
        } else {
            self.lost("ack")
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
    /// # use tiered_timer_jobs::{JobId, Queue};
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// let job = queue.next().await?;
    /// // The payment provider is down: try again in a minute.
    /// job.retry_after(Duration::from_secs(60)).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn retry_after(mut self, delay: Duration) -> Result<(), Error> {
        let done = self.inner.retry(self.held_lease(), delay).await?;
        self.finished = true;
        match done {
            GaveUp::Rescheduled => {
                tracing::debug!(target: targets::JOB, queue = self.inner.name(), job = %self.id, attempt = self.attempt, ?delay, "job retried");
                crate::metrics::retried(self.inner.name());
                Ok(())
            }
            GaveUp::Buried => Ok(()), // traced as such by the queue
            GaveUp::Lost => self.lost("retry"),
        }
    }

    /// Hands the job back at once: it is due again now (by Redis' clock),
    /// at the front of the waiting jobs, and this delivery does not count
    /// against [`max_attempts`](crate::Builder::max_attempts) (the next
    /// delivery has the same [`attempt`](Job::attempt)).
    ///
    /// This is for a worker that stops before finishing (a deploy, a
    /// shutdown): another worker gets the job at once instead of after the
    /// lease (one waiting worker is woken for it). A
    /// job that fails should use [`retry_after`](Job::retry_after), which
    /// counts the attempt, so a job that always fails ends in the dead
    /// letters.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseExpired`] if the lease ran out first (nothing is
    /// changed: the job is due again anyway, with the attempt counted);
    /// [`Error::Timeout`] or [`Error::Redis`] if Redis could not be
    /// reached (the job then comes back when its lease runs out).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tiered_timer_jobs::Queue;
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// let job = queue.next().await?;
    /// // Shutting down before the work could start: give it to another worker.
    /// job.release().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn release(mut self) -> Result<(), Error> {
        let done = self.inner.backend.release(self.held_lease()).await?;
        self.finished = true;
        if done {
            tracing::info!(target: targets::JOB, queue = self.inner.name(), job = %self.id, attempt = self.attempt, "job released");
            Ok(())
        } else {
            self.lost("release")
        }
    }

    /// Renews the lease: if this delivery still holds it (by its token) and
    /// it has not run out by Redis' clock, it now runs until `lease` after
    /// Redis' now. Otherwise nothing changes and the call fails: a lease
    /// that ran out is never revived, even if no other worker has claimed
    /// the job yet, because one may be about to.
    ///
    /// The new expiry replaces the old one, so a `lease` shorter than what
    /// is left shortens it. Most workers want
    /// [`keep_alive`](Job::keep_alive), which calls this for them.
    ///
    /// Waiting workers sleep until the earliest lease expiry they read; a
    /// renewal costs each of them one claim round (that finds nothing)
    /// when the old expiry passes.
    ///
    /// `ack`, `retry_after` and `release` take the `Job` by value, so a
    /// finished job cannot be extended:
    ///
    /// ```compile_fail,E0382
    /// # use std::time::Duration;
    /// # async fn demo(queue: tiered_timer_jobs::Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// let job = queue.next().await?;
    /// job.ack().await?;
    /// job.extend_lease(Duration::from_secs(30)).await?; // error: use of moved value
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::LeaseExpired`] if the lease was lost (it ran out, the job
    /// was redelivered, or acked by the next holder); nothing changed.
    /// [`Error::InvalidArgument`] if `lease` is zero or beyond 2^51 ms (the
    /// limit of [`Builder::lease`](crate::Builder::lease)).
    /// [`Error::Timeout`] or [`Error::Redis`] if Redis could not be
    /// reached (the renewal may or may not have happened).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use tiered_timer_jobs::Queue;
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// let job = queue.next().await?;
    /// for chunk in job.payload().chunks(1024) {
    ///     // ... work on one chunk, in less than a lease ...
    ///     job.extend_lease(Duration::from_secs(30)).await?; // stop if it was lost
    /// }
    /// job.ack().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn extend_lease(&self, lease: Duration) -> Result<(), Error> {
        let lease_ms = millis_up(lease);
        if lease_ms == 0 || lease_ms > MAX_SPAN_MS {
            return Err(Error::InvalidArgument {
                reason: LEASE_RANGE,
            });
        }
        let sent = Instant::now();
        let renewed = self
            .inner
            .backend
            .extend(self.held_lease(), lease_ms)
            .await?;
        if renewed {
            let length = Duration::from_millis(lease_ms);
            *self.local_lease.lock().unwrap_or_else(|e| e.into_inner()) =
                LocalLease { sent, length };
            tracing::debug!(target: targets::JOB, queue = self.inner.name(), job = %self.id, attempt = self.attempt, lease = ?length, "lease extended");
            crate::metrics::lease_renewed(self.inner.name());
            Ok(())
        } else {
            self.lost("extend_lease")
        }
    }

    /// Runs `work` while keeping the lease: renews it (for the length of
    /// the last lease granted) each time a third of it has passed, for as
    /// long as `work` runs, and stops renewing when `work` ends or this
    /// future is dropped. Returns `work`'s output.
    ///
    /// If the lease is lost, `work` is dropped at once (at its next
    /// `.await`) and the call fails: from then on another worker may hold
    /// the job, and the contract is that no two do. So `work` must be safe
    /// to stop at an `.await`, like any future that may be cancelled; work
    /// that must not be cut off should call
    /// [`extend_lease`](Job::extend_lease) at points of its choosing
    /// instead. Renewal is never automatic outside this call: a worker
    /// that hangs (its task is no longer polled) or dies loses the job
    /// after one lease.
    ///
    /// Renewals run in the same task as `work`, so a `work` that blocks its
    /// thread blocks them too, and the lease runs out as it would for a
    /// hung worker. If such a `work` then finishes, its output is returned
    /// (the work is done; it cannot be undone) and the following
    /// [`ack`](Job::ack) reports the lost lease.
    ///
    /// A renewal that fails for lack of Redis is tried again until the
    /// lease would run out by the local estimate (the instant the last
    /// renewal was *sent* plus the lease, never later than Redis' expiry);
    /// then the work is stopped too.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseExpired`] if Redis said the lease was lost (the job
    /// was redelivered, say), or if the lease had run out by the local
    /// estimate before a renewal could even be sent (this task was not
    /// polled for a whole lease: a blocked thread, or `keep_alive` called
    /// too late); [`Error::Timeout`] or [`Error::Redis`] if Redis could not
    /// be reached to renew it before it would run out. In every case
    /// `work` was stopped; assume another worker may now have the job, and
    /// drop it (acking would most likely fail).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tiered_timer_jobs::{Job, Queue};
    /// # async fn charge_card(job: &Job) {}
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// let job = queue.next().await?;
    /// job.keep_alive(charge_card(&job)).await?; // may take many leases
    /// job.ack().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn keep_alive<F: IntoFuture>(&self, work: F) -> Result<F::Output, Error> {
        let work = std::pin::pin!(work.into_future());
        let renewals = std::pin::pin!(self.renew_until_lost());
        tokio::select! {
            biased;
            output = work => Ok(output),
            error = renewals => Err(error),
        }
    }

    /// Renews the lease every third of it until a renewal fails for good;
    /// returns why.
    async fn renew_until_lost(&self) -> Error {
        loop {
            let granted = self.local_lease();
            let renew_at = granted
                .sent
                .checked_add(granted.length / 3)
                .unwrap_or_else(|| granted.expires_by());
            tiered_timer::sleep_until(renew_at).await;
            let expires_by = granted.expires_by();
            let pause =
                (granted.length / 10).clamp(Duration::from_millis(1), Duration::from_secs(1));
            let mut last_error = None;
            loop {
                if Instant::now() >= expires_by {
                    return self.given_up(last_error);
                }
                let sent = Instant::now();
                let renewal = self.extend_lease(granted.length);
                match tiered_timer::timeout_at(expires_by, renewal).await {
                    Ok(Ok(())) => break,
                    Ok(Err(error @ Error::LeaseExpired { .. })) => return error,
                    Ok(Err(error)) => {
                        tracing::warn!(target: targets::JOB, queue = self.inner.name(), job = %self.id, attempt = self.attempt, %error, "lease renewal failed; trying again");
                        last_error = Some(error);
                        let again = (Instant::now() + pause).min(expires_by);
                        tiered_timer::sleep_until(again).await;
                    }
                    Err(_) => {
                        let after = sent.elapsed();
                        return self.given_up(Some(Error::Timeout { after }));
                    }
                }
            }
        }
    }

    /// The lease would run out (by the local estimate) before it could be
    /// renewed: `last_error` if Redis could not be reached, else the lease
    /// ran out while this task was not polled (a blocked thread, say).
    fn given_up(&self, last_error: Option<Error>) -> Error {
        crate::metrics::lease_lost(self.inner.name());
        match last_error {
            Some(error) => {
                tracing::warn!(target: targets::JOB, queue = self.inner.name(), job = %self.id, attempt = self.attempt, %error, "lease given up: Redis could not be reached before it would run out");
                error
            }
            None => {
                tracing::warn!(target: targets::JOB, queue = self.inner.name(), job = %self.id, attempt = self.attempt, "lease lost: it ran out before keep_alive could renew it");
                Error::LeaseExpired {
                    id: self.id.clone(),
                }
            }
        }
    }

    /// Reports a lease found lost by `call`.
    pub(crate) fn lost<T>(&self, call: &'static str) -> Result<T, Error> {
        crate::metrics::lease_lost(self.inner.name());
        tracing::warn!(target: targets::JOB, queue = self.inner.name(), job = %self.id, attempt = self.attempt, call, "lease lost: it ran out before the call, and the job is delivered again");
        Err(Error::LeaseExpired {
            id: self.id.clone(),
        })
    }
}

impl Drop for Job {
    /// After [`Queue::close`](crate::Queue::close), hands an unfinished job
    /// back (see [`Job::release`]) from a spawned task; otherwise leaves it
    /// to its lease.
    fn drop(&mut self) {
        let held = self.held.take();
        if self.finished || !self.inner.is_closed() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return; // no runtime to release from: the lease runs out instead
        };
        let inner = Arc::clone(&self.inner);
        let (partition, id, token, attempt) = (
            self.partition,
            self.id.clone(),
            std::mem::replace(&mut self.token, LeaseToken::NONE),
            self.attempt,
        );
        runtime.spawn(async move {
            let _held = held;
            let lease = Lease {
                partition,
                id: &id,
                token: &token,
            };
            match inner.backend.release(lease).await {
                Ok(true) => tracing::info!(target: targets::JOB, queue = inner.name(), job = %id, attempt, "job released (dropped after close)"),
                Ok(false) => tracing::warn!(target: targets::JOB, queue = inner.name(), job = %id, attempt, "job dropped after close had already lost its lease"),
                Err(error) => tracing::warn!(target: targets::JOB, queue = inner.name(), job = %id, attempt, %error, "could not release a job dropped after close; it comes back when its lease runs out"),
            }
        });
    }
}
