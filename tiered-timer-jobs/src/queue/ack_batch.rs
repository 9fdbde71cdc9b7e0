//! Acks sent in the background, many per round trip: what
//! [`Job::ack_batched`] queues and [`Queue::flush_acks`] waits for.
//!
//! A worker that awaits each ack waits a round trip per job, and Redis
//! serves one script per job: on a 2-core machine that caps four such
//! workers near 45 000 jobs/s whatever the claims cost (see
//! BENCHMARKS.md). Here the acks of a queue handle go out as group commits
//! do: the first ack queued starts a flush (one [`Queue::ack_many`], one
//! script per partition), and the acks queued while it is in flight go
//! out together in the next one. A lone worker thus waits for nothing and
//! Redis sees one script per batch.
//!
//! Ground rules:
//!
//! * A queued ack is a [`Job`] kept here until its flush: it still counts
//!   as held, so [`Queue::shutdown`] waits for it; its lease is checked
//!   when its batch is sent, not when it was queued (an ack whose lease
//!   ran out meanwhile is not sent, as [`Job::ack`] would not send it).
//! * At most one flush task per queue handle runs; the lock is held only
//!   to move jobs and counters, never across an `.await`, and waiters are
//!   woken after it is released.

use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use super::{Inner, Queue};
use crate::data::error::Error;
use crate::data::id::JobId;
use crate::job::Job;

/// How many lost acks' ids are kept for [`Queue::flush_acks`] (a worker
/// that never calls it must not grow without bound).
const LOST_KEPT: usize = 10_000;

/// The background acks of one queue handle.
#[derive(Default)]
pub(crate) struct AckBatch {
    state: Mutex<State>,
    /// Notified after each flush.
    flushed: Notify,
}

#[derive(Default)]
struct State {
    /// Acks waiting for the next flush.
    queued: Vec<Job>,
    /// A flush task runs.
    flushing: bool,
    /// The ids of the acks it is sending.
    in_flight: Vec<JobId>,
    /// Acks queued since the handle was made, and how many of them were
    /// flushed (sent, refused or failed): a flush waits until the second
    /// catches up with what the first was when it was called.
    queued_total: u64,
    settled_total: u64,
    /// Since the last [`Queue::flush_acks`]: the jobs whose ack was
    /// refused (lease lost; the first [`LOST_KEPT`], each is traced
    /// anyway), and the first error a flush met.
    lost: Vec<JobId>,
    error: Option<Error>,
}

impl std::fmt::Debug for AckBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.lock();
        f.debug_struct("AckBatch")
            .field("queued", &state.queued.len())
            .field("flushing", &state.flushing)
            .finish_non_exhaustive()
    }
}

impl State {
    fn keep_lost(&mut self, ids: Vec<JobId>) {
        let room = LOST_KEPT.saturating_sub(self.lost.len());
        self.lost.extend(ids.into_iter().take(room));
    }
}

impl AckBatch {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `job`'s ack; starts a flush unless one runs (it takes this
    /// ack on its next round).
    #[track_caller]
    pub(crate) fn push(inner: &Arc<Inner>, job: Job) {
        let start = {
            let mut state = inner.acks.lock();
            state.queued.push(job);
            state.queued_total += 1;
            !std::mem::replace(&mut state.flushing, true)
        };
        if start {
            tokio::spawn(flush_until_empty(Running::new(inner)));
        }
    }

    /// Waits until every ack queued before this call is flushed; returns
    /// what the flushes since the last call reported.
    pub(crate) async fn wait_flushed(inner: &Arc<Inner>) -> Result<Vec<JobId>, Error> {
        let this = &inner.acks;
        let (target, start) = {
            let mut state = this.lock();
            // Acks queued with no flush running: their flush task was
            // dropped with another runtime. Flush them from this one.
            let start = !state.queued.is_empty() && !state.flushing;
            state.flushing |= start;
            (state.queued_total, start)
        };
        if start {
            tokio::spawn(flush_until_empty(Running::new(inner)));
        }
        loop {
            let flushed = this.flushed.notified();
            tokio::pin!(flushed);
            flushed.as_mut().enable();
            {
                let mut state = this.lock();
                if state.settled_total >= target {
                    let lost = std::mem::take(&mut state.lost);
                    return match state.error.take() {
                        Some(error) => Err(error),
                        None => Ok(lost),
                    };
                }
            }
            flushed.await;
        }
    }
}

/// The flush task: sends what is queued, one [`Queue::ack_many`] at a
/// time, until nothing is.
async fn flush_until_empty(mut running: Running) {
    let queue = Queue {
        inner: Arc::clone(&running.inner),
    };
    loop {
        let batch = {
            let mut state = queue.inner.acks.lock();
            if state.queued.is_empty() {
                // Under the lock that `push` takes: an ack queued after
                // this starts a new flush.
                state.flushing = false;
                running.done = true;
                break;
            }
            let batch = std::mem::take(&mut state.queued);
            state.in_flight = batch.iter().map(|job| job.id().clone()).collect();
            batch
        };
        let result = queue.ack_many(batch).await;
        {
            let mut state = queue.inner.acks.lock();
            let ids = std::mem::take(&mut state.in_flight);
            state.settled_total += ids.len() as u64;
            match result {
                Ok(lost) => state.keep_lost(lost),
                Err(error) => {
                    // `flush_acks` returns the error, not ids: whether
                    // each of these was applied is unknown.
                    tracing::warn!(queue = %queue.inner.name, jobs = ids.len(), %error, "batched acks failed: the jobs not acked come back after their lease");
                    if state.error.is_none() {
                        state.error = Some(error);
                    }
                }
            }
        }
        queue.inner.acks.flushed.notify_waiters();
    }
}

/// A flush task of an [`AckBatch`], made before it is spawned: if the task
/// is dropped before it is `done` (its runtime shut down, maybe before it
/// ran at all), the batch no longer counts it as running, so the next ack
/// or [`Queue::flush_acks`] starts another.
struct Running {
    inner: Arc<Inner>,
    done: bool,
}

impl Running {
    fn new(inner: &Arc<Inner>) -> Running {
        Running {
            inner: Arc::clone(inner),
            done: false,
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let batch = &self.inner.acks;
        if !self.done {
            // Its batch may or may not have been applied: reported lost.
            let mut state = batch.lock();
            state.flushing = false;
            let ids = std::mem::take(&mut state.in_flight);
            state.settled_total += ids.len() as u64;
            state.keep_lost(ids);
        }
        batch.flushed.notify_waiters();
    }
}
