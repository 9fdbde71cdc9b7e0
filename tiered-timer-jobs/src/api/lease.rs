//! What a handle knows of a lease it holds without asking its store: a
//! local, conservative estimate of when it runs out ([`LocalLease`]), and
//! the count of jobs out that [`Queue::shutdown`](crate::Queue::shutdown)
//! waits for ([`Held`]).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

/// When the current lease was granted, by the local clock, at the latest
/// (the instant its request was sent), and for how long. The store's
/// expiry is never earlier than [`expires_by`](LocalLease::expires_by), so
/// the estimate is only ever used to stop early.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LocalLease {
    pub(crate) sent: Instant,
    pub(crate) length: Duration,
}

impl LocalLease {
    /// The earliest the lease can run out, as a local instant.
    pub(crate) fn expires_by(&self) -> Instant {
        self.sent
            .checked_add(self.length)
            .unwrap_or_else(|| self.sent + Duration::from_secs(86_400 * 365 * 30))
    }

    /// Whether the lease has run out by this estimate.
    pub(crate) fn ran_out(&self) -> bool {
        Instant::now() >= self.expires_by()
    }
}

/// How many jobs of a queue handle are out (handed to workers, or queued
/// for a background ack): a `watch` channel, so that
/// [`Queue::shutdown`](crate::Queue::shutdown) can wait for zero.
pub(crate) type HeldCount = Arc<watch::Sender<usize>>;

/// Counts one job as out while it lives.
#[derive(Debug)]
pub(crate) struct Held(HeldCount);

impl Held {
    pub(crate) fn new(count: &HeldCount) -> Held {
        count.send_modify(|n| *n += 1);
        Held(Arc::clone(count))
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}
