//! [`Inner`]: what every clone of a [`Queue`](crate::Queue) and every
//! [`Job`](crate::Job) share. Its settings, its closed flag and count of
//! jobs out, its backend, and the calls a job makes under its lease,
//! checked here and made on the backend; and the task that sends
//! background acks (see `ack_batch.rs`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::ack_batch::{AckBatch, PendingAck};
use super::lease::{Held, HeldCount};
use crate::backends::AnyBackend;
use crate::contract::{delay_ms, Failure, GaveUp, Lease, LeaseToken, Settings};
use crate::data::error::Error;
use crate::data::id::JobId;
use crate::data::limits::CHUNK_JOBS;
use crate::targets;

/// The shared state behind every clone of a [`Queue`](crate::Queue) and
/// every [`Job`](crate::Job).
pub(crate) struct Inner {
    pub(crate) name: String,
    pub(crate) lease: Duration,
    pub(crate) max_attempts: u32,
    pub(crate) max_payload: usize,
    /// Set once by [`Queue::close`](crate::Queue::close).
    closed: AtomicBool,
    /// How many jobs of this queue are out.
    held: HeldCount,
    /// Where the jobs are.
    pub(crate) backend: AnyBackend,
    /// Acks queued by [`Job::ack_batched`](crate::Job::ack_batched).
    pub(crate) acks: AckBatch,
}

impl Inner {
    pub(crate) fn new(settings: Settings, backend: AnyBackend) -> Inner {
        Inner {
            name: settings.name,
            lease: settings.lease,
            max_attempts: settings.max_attempts,
            max_payload: settings.max_payload,
            closed: AtomicBool::new(false),
            held: Arc::new(watch::Sender::new(0)),
            backend,
            acks: AckBatch::default(),
        }
    }

    /// The queue's name, for events.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Sets the closed flag; `true` the first time.
    pub(crate) fn close(&self) -> bool {
        !self.closed.swap(true, Ordering::SeqCst)
    }

    /// Counts one more job out, until the `Held` is dropped.
    pub(crate) fn hold(&self) -> Held {
        Held::new(&self.held)
    }

    /// Waits until no job is out.
    pub(crate) async fn all_returned(&self) {
        let mut held = self.held.subscribe();
        // `wait_for` only fails if the sender is gone; `self` keeps it.
        let _ = held.wait_for(|n| *n == 0).await;
    }

    /// Gives a job back with a delay: [`GaveUp::Buried`] if it was its
    /// last attempt (traced here).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidDeadline`] for a delay beyond 2^51 ms, before
    /// anything is sent; the backend's errors.
    pub(crate) async fn retry(&self, lease: Lease<'_>, delay: Duration) -> Result<GaveUp, Error> {
        let delay = delay_ms(delay)?;
        let done = self.backend.retry(lease, delay).await?;
        if done == GaveUp::Buried {
            tracing::warn!(target: targets::JOB, queue = %self.name, job = %lease.id, attempts = self.max_attempts, "job moved to the dead letters: retried on its last attempt");
            crate::metrics::dead_lettered(&self.name);
        }
        Ok(done)
    }

    /// Gives up on an attempt with a reason (retried after `delay`, or
    /// buried).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidDeadline`] for a delay beyond 2^51 ms, before
    /// anything is sent; the backend's errors.
    pub(crate) async fn fail(
        &self,
        lease: Lease<'_>,
        retry_after: Option<Duration>,
        reason: &str,
    ) -> Result<GaveUp, Error> {
        let failure = match retry_after {
            Some(delay) => Failure::Retry(delay_ms(delay)?),
            None => Failure::Bury,
        };
        self.backend.fail(lease, failure, reason).await
    }

    /// Acks jobs of this handle, as [`Job::ack`](crate::Job::ack) would one
    /// by one: those whose lease ran out by the local estimate are not
    /// sent; the others go one call per partition per chunk of at most
    /// [`CHUNK_JOBS`]. Returns the ids of the jobs whose lease was lost.
    ///
    /// # Errors
    ///
    /// The backend's: the chunks before the error are acked, the others
    /// may or may not be.
    pub(crate) async fn ack_pending(&self, acks: Vec<PendingAck>) -> Result<Vec<JobId>, Error> {
        let mut lost = Vec::new();
        // Per partition: (id, token) to send. The acks count as held
        // until they are done, so that `shutdown` waits for them.
        let mut by_partition: Vec<(u32, Vec<(JobId, LeaseToken)>)> = Vec::new();
        let mut held = Vec::with_capacity(acks.len());
        for ack in acks {
            held.extend(ack.held);
            if ack.local_lease.ran_out() {
                tracing::warn!(target: targets::JOB, queue = %self.name, job = %ack.id, attempt = ack.attempt, call = "ack_many", "lease lost: it ran out before the call, and the job is delivered again");
                crate::metrics::acked_many(&self.name, 0, 1);
                lost.push(ack.id);
                continue;
            }
            match by_partition.iter_mut().find(|(p, _)| *p == ack.partition) {
                Some((_, list)) => list.push((ack.id, ack.token)),
                None => by_partition.push((ack.partition, vec![(ack.id, ack.token)])),
            }
        }
        for (partition, list) in by_partition {
            for chunk in list.chunks(CHUNK_JOBS) {
                let refused = self.backend.ack_many(partition, chunk).await?;
                for (id, _) in chunk {
                    if !refused.contains(id) {
                        tracing::debug!(target: targets::JOB, queue = %self.name, job = %id, "job acked");
                    }
                }
                let acked = (chunk.len() - refused.len()) as u64;
                crate::metrics::acked_many(&self.name, acked, refused.len() as u64);
                lost.extend(refused);
            }
        }
        drop(held);
        Ok(lost)
    }

    /// Queues a background ack; starts a flush task unless one runs.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime, if a flush must be started.
    #[track_caller]
    pub(crate) fn queue_ack(self: &Arc<Inner>, ack: PendingAck) {
        if self.acks.push(ack) {
            tokio::spawn(flush_until_empty(Flushing::new(self)));
        }
    }

    /// Waits until every ack queued before this call has been sent;
    /// returns what the flushes since the last call reported.
    ///
    /// # Errors
    ///
    /// The first error a flush met since the last call.
    pub(crate) async fn flush_acks(self: &Arc<Inner>) -> Result<Vec<JobId>, Error> {
        let (target, start) = self.acks.flush_target();
        if start {
            tokio::spawn(flush_until_empty(Flushing::new(self)));
        }
        loop {
            let flushed = self.acks.next_flush();
            tokio::pin!(flushed);
            flushed.as_mut().enable();
            if let Some(report) = self.acks.flushed_up_to(target) {
                return report;
            }
            flushed.await;
        }
    }
}

/// The flush task: sends what is queued, one [`Inner::ack_pending`] at a
/// time, until nothing is.
async fn flush_until_empty(mut flushing: Flushing) {
    let inner = Arc::clone(&flushing.inner);
    while let Some(batch) = inner.acks.take_batch() {
        let result = inner.ack_pending(batch).await;
        let failed = result.as_ref().err().map(ToString::to_string);
        let jobs = inner.acks.settle(result);
        if let Some(error) = failed {
            // `flush_acks` returns the error, not ids: whether each of
            // these was applied is unknown.
            tracing::warn!(target: targets::QUEUE, queue = %inner.name, jobs, %error, "batched acks failed: the jobs not acked come back after their lease");
        }
    }
    flushing.done = true;
}

/// A flush task, made before it is spawned: if the task is dropped before
/// it is `done` (its runtime shut down, maybe before it ran at all), the
/// batch no longer counts it as running, so the next ack or `flush_acks`
/// starts another.
struct Flushing {
    inner: Arc<Inner>,
    done: bool,
}

impl Flushing {
    fn new(inner: &Arc<Inner>) -> Flushing {
        Flushing {
            inner: Arc::clone(inner),
            done: false,
        }
    }
}

impl Drop for Flushing {
    fn drop(&mut self) {
        if !self.done {
            self.inner.acks.abandoned();
        }
    }
}
