//! The driver: one task per open queue log that sleeps on `tiered-timer`
//! until the index's next event (a job coming due, a lease running out)
//! and then wakes one waiting claim per job that became claimable.
//!
//! Ground rules:
//!
//! * Times are wall-clock milliseconds (the index's); how long to sleep is
//!   decided by the monotonic clock: the driver sleeps for the difference
//!   between the event and the wall clock's now, then looks again. A wall
//!   clock that steps back makes it look again before anything is due
//!   (never early); one that steps forward is noticed within
//!   [`MAX_SLEEP`].
//! * Anything that makes an event sooner than the driver's wake-up (a
//!   schedule due now, a release) pokes it (`Shared::sooner`, a
//!   `Notify` that keeps one permit, so a poke between its look and its
//!   sleep is not lost).
//! * It wakes claims with no lock held: one `notify_one` per job that
//!   became claimable, so each due job wakes one waiting worker however
//!   many wait. A claim that leaves due jobs behind passes one wake-up on.
//! * It holds the log weakly and ends when the last handle is dropped.

use std::sync::{Arc, Weak};
use std::time::Duration;

use super::index::Now;
use super::store::Shared;

/// The longest the driver sleeps without looking at the wall clock again.
pub(crate) const MAX_SLEEP: Duration = Duration::from_secs(10);
/// The most wake-ups one look hands out (the rest of a backlog is claimed
/// by workers that come back for more).
const MAX_WAKES: usize = 1024;

/// Starts the driver on the current runtime.
pub(crate) fn spawn(shared: &Arc<Shared>) {
    let weak = Arc::downgrade(shared);
    tokio::spawn(drive(weak));
}

/// Marks the driver stopped when its task ends or is dropped (its
/// runtime shut down), so that the next waiting claim starts another.
struct Running(Weak<Shared>);

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(shared) = self.0.upgrade() {
            shared
                .driver
                .store(false, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

async fn drive(weak: Weak<Shared>) {
    let _running = Running(weak.clone());
    // Holding the shared state does not keep the queue open: dropping its
    // last handle sets `closing` and pokes `sooner`.
    let Some(shared) = weak.upgrade() else {
        return;
    };
    loop {
        let mut sooner = std::pin::pin!(shared.sooner.notified());
        sooner.as_mut().enable();
        let now = Now::wall();
        let (woken, next) = {
            let mut state = shared.lock();
            if state.closing() {
                return;
            }
            let before = state.index.claimable();
            state.index.advance(now.floor);
            let after = state.index.claimable();
            let next = state.index.next_expiration();
            state.driver_at = next.unwrap_or(u64::MAX);
            (after.saturating_sub(before).min(MAX_WAKES), next)
        };
        for _ in 0..woken {
            shared.claimable.notify_one();
        }
        let wait = match next {
            Some(at) => until(at).min(MAX_SLEEP),
            None => MAX_SLEEP,
        };
        tokio::select! {
            () = tiered_timer::sleep(wait) => {}
            () = sooner => {}
        }
    }
}

/// How long from the wall clock's now until millisecond `at` starts.
fn until(at: u64) -> Duration {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Duration::from_millis(at).saturating_sub(now)
}
