//! Acks sent in the background, many per round trip: what
//! [`Job::ack_batched`](crate::Job::ack_batched) queues and
//! [`Queue::flush_acks`](crate::Queue::flush_acks) waits for. The flush
//! task that sends them is the queue handle's (`inner.rs`); this is its
//! bookkeeping.
//!
//! A worker that awaits each ack waits a round trip per job, and Redis
//! serves one script per job: on a 2-core machine that caps four such
//! workers near 45 000 jobs/s whatever the claims cost (see
//! BENCHMARKS.md). Here the acks of a queue handle go out as group commits
//! do: the first ack queued starts a flush (one ack of many, one call per
//! partition), and the acks queued while it is in flight go out together
//! in the next one. A lone worker thus waits for nothing and the store sees
//! one call per batch.
//!
//! Ground rules:
//!
//! * A queued ack is a [`PendingAck`]: the job's lease (id, token, local
//!   estimate), and its count as held, so
//!   [`Queue::shutdown`](crate::Queue::shutdown) waits for it; its lease
//!   is checked when its batch is sent, not when it was queued (an ack
//!   whose lease ran out meanwhile is not sent, as
//!   [`Job::ack`](crate::Job::ack) would not send it). It holds nothing of
//!   the queue handle: acks queued on a handle whose flush task died with
//!   its runtime do not keep the handle alive.
//! * At most one flush task per queue handle runs; the lock is held only
//!   to move acks and counters, never across an `.await`, and waiters are
//!   woken after it is released.

use std::sync::{Mutex, MutexGuard};

use tokio::sync::Notify;

use super::lease::{Held, LocalLease};
use crate::contract::LeaseToken;
use crate::data::error::Error;
use crate::data::id::JobId;

/// How many lost acks' ids are kept for
/// [`Queue::flush_acks`](crate::Queue::flush_acks) (a worker that never
/// calls it must not grow without bound).
const LOST_KEPT: usize = 10_000;

/// An ack to send: a job's lease, and its count as held until then.
#[derive(Debug)]
pub(crate) struct PendingAck {
    pub(crate) partition: u32,
    pub(crate) id: JobId,
    pub(crate) token: LeaseToken,
    pub(crate) attempt: u32,
    pub(crate) local_lease: LocalLease,
    pub(crate) held: Option<Held>,
}

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
    queued: Vec<PendingAck>,
    /// A flush task runs.
    flushing: bool,
    /// The ids of the acks it is sending.
    in_flight: Vec<JobId>,
    /// Acks queued since the handle was made, and how many of them were
    /// flushed (sent, refused or failed): a flush waits until the second
    /// catches up with what the first was when it was called.
    queued_total: u64,
    settled_total: u64,
    /// Since the last `flush_acks`: the jobs whose ack was refused (lease
    /// lost; the first [`LOST_KEPT`], each is traced anyway), and the
    /// first error a flush met.
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

    /// Queues an ack; returns whether a flush must be started (none
    /// runs: the one running takes this ack on its next round).
    pub(crate) fn push(&self, ack: PendingAck) -> bool {
        let mut state = self.lock();
        state.queued.push(ack);
        state.queued_total += 1;
        !std::mem::replace(&mut state.flushing, true)
    }

    /// What a flush waits for: the count of acks queued so far, and
    /// whether a flush must be started (acks are queued and none runs:
    /// their flush task was dropped with another runtime).
    pub(crate) fn flush_target(&self) -> (u64, bool) {
        let mut state = self.lock();
        let start = !state.queued.is_empty() && !state.flushing;
        state.flushing |= start;
        (state.queued_total, start)
    }

    /// Once every ack counted in `target` is flushed, what the flushes
    /// since the last call reported; `None` before.
    pub(crate) fn flushed_up_to(&self, target: u64) -> Option<Result<Vec<JobId>, Error>> {
        let mut state = self.lock();
        if state.settled_total < target {
            return None;
        }
        let lost = std::mem::take(&mut state.lost);
        Some(match state.error.take() {
            Some(error) => Err(error),
            None => Ok(lost),
        })
    }

    /// A future that completes after the next flush (enable it before
    /// checking [`flushed_up_to`](AckBatch::flushed_up_to)).
    pub(crate) fn next_flush(&self) -> tokio::sync::futures::Notified<'_> {
        self.flushed.notified()
    }

    /// The acks to send next, or `None` (and the flush task is done) when
    /// nothing is queued: under the lock that `push` takes, so an ack
    /// queued after this starts a new flush.
    pub(crate) fn take_batch(&self) -> Option<Vec<PendingAck>> {
        let mut state = self.lock();
        if state.queued.is_empty() {
            state.flushing = false;
            return None;
        }
        let batch = std::mem::take(&mut state.queued);
        state.in_flight = batch.iter().map(|ack| ack.id.clone()).collect();
        Some(batch)
    }

    /// A batch was sent: `Ok` with the ids refused (lease lost), or the
    /// error (whether each ack was applied is unknown). Returns the ids
    /// sent, for the caller's warning.
    pub(crate) fn settle(&self, result: Result<Vec<JobId>, Error>) -> usize {
        let sent = {
            let mut state = self.lock();
            let ids = std::mem::take(&mut state.in_flight);
            state.settled_total += ids.len() as u64;
            match result {
                Ok(lost) => state.keep_lost(lost),
                Err(error) => {
                    if state.error.is_none() {
                        state.error = Some(error);
                    }
                }
            }
            ids.len()
        };
        self.flushed.notify_waiters();
        sent
    }

    /// The flush task ended without finishing (its runtime shut down,
    /// maybe before it ran at all): the batch in flight may or may not
    /// have been applied (reported lost), and the next ack or
    /// `flush_acks` starts another flush.
    pub(crate) fn abandoned(&self) {
        {
            let mut state = self.lock();
            state.flushing = false;
            let ids = std::mem::take(&mut state.in_flight);
            state.settled_total += ids.len() as u64;
            state.keep_lost(ids);
        }
        self.flushed.notify_waiters();
    }
}
