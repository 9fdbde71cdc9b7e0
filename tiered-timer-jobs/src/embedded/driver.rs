//! The driver: one thread per open queue log that sleeps until the
//! index's next event (a job coming due, a lease running out) and then
//! wakes one waiting claim per job that became claimable.
//!
//! Ground rules:
//!
//! * Times are wall-clock milliseconds (the index's); how long to sleep is
//!   decided by the monotonic clock: the driver sleeps for the difference
//!   between the event and the wall clock's now, then looks again. A wall
//!   clock that steps back makes it look again before anything is due
//!   (never early); one that steps forward is noticed within
//!   [`MAX_SLEEP`].
//! * It sleeps on a condition variable of the queue's lock
//!   (`Shared::sooner`), not on a runtime's timer: tokio's timer (and so
//!   `tiered-timer`'s driver) wakes on whole milliseconds, rounded up,
//!   which would add half a millisecond to every job's lateness on
//!   average; a timed wait on the condition variable wakes within tens
//!   of microseconds. Being a thread, it does not depend on any runtime
//!   staying up.
//! * Anything that makes an event sooner than the driver's wake-up (a
//!   schedule due now, a release) pokes it (`Shared::sooner`), after
//!   releasing the lock; the driver decides and waits under the lock, so
//!   a poke is never lost between its look and its sleep.
//! * It wakes claims with no lock held: one `notify_one` per job that
//!   became claimable, so each due job wakes one waiting worker however
//!   many wait. A claim that leaves due jobs behind passes one wake-up on.
//! * With a manual clock (`Builder::clock`, for tests) real time moves
//!   nothing: the driver waits until the clock is moved, which pokes it.
//! * It ends when the last handle is dropped (`closing`).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::index::Now;
use super::store::{QueueLog, Shared};
use crate::targets;

/// The longest the driver sleeps without looking at the wall clock again.
pub(crate) const MAX_SLEEP: Duration = Duration::from_secs(10);
/// The shortest it sleeps when an event seems due but nothing came out
/// (a coarse bucket whose start came first): no busy loop.
const MIN_SLEEP: Duration = Duration::from_micros(50);
/// The most wake-ups one look hands out (the rest of a backlog is claimed
/// by workers that come back for more).
const MAX_WAKES: usize = 1024;

impl QueueLog {
    /// Starts the driver thread unless it was started.
    pub(crate) fn ensure_driver(&self) {
        if !self.shared.driver.swap(true, Ordering::SeqCst) {
            spawn(&self.shared);
        }
    }
}

/// Starts the driver thread (once per queue log: see
/// [`QueueLog::ensure_driver`]).
fn spawn(shared: &Arc<Shared>) {
    let weak = Arc::downgrade(shared);
    // A manual clock that moves pokes the driver, as a sooner event does:
    // under the lock first, so the poke cannot fall between the driver's
    // look at the clock and its wait.
    let poked = Weak::clone(&weak);
    let poke: Arc<dyn Fn() + Send + Sync> = Arc::new(move || {
        if let Some(shared) = poked.upgrade() {
            drop(shared.lock());
            shared.sooner.notify_one();
        }
    });
    shared.clock.on_move(&poke);
    let started = std::thread::Builder::new()
        .name("ttr-log-driver".to_owned())
        .spawn(move || {
            let _poke = poke; // registered for as long as the driver runs
            drive(&weak)
        });
    if let Err(error) = started {
        tracing::warn!(target: targets::EMBEDDED, %error, "could not start a job log's driver thread; the next call tries again");
        shared.driver.store(false, Ordering::SeqCst);
    }
}

fn drive(weak: &Weak<Shared>) {
    // Holding the shared state does not keep the queue open: dropping its
    // last handle sets `closing` and pokes `sooner`.
    let Some(shared) = weak.upgrade() else {
        return;
    };
    let mut state = shared.lock();
    loop {
        if state.closing() {
            return;
        }
        let now = Now::of(&shared.clock);
        let before = state.index.claimable();
        state.index.advance(now.floor);
        let after = state.index.claimable();
        let next = state.index.next_expiration();
        state.driver_at = next.unwrap_or(u64::MAX);
        let woken = after.saturating_sub(before).min(MAX_WAKES);
        if woken > 0 {
            drop(state);
            for _ in 0..woken {
                shared.claimable.notify_one();
            }
            state = shared.lock();
            continue;
        }
        // A manual clock does not move with real time: the driver waits
        // for its poke (see `spawn`).
        let wait = match next {
            Some(at) if !shared.clock.is_manual() => until(at).clamp(MIN_SLEEP, MAX_SLEEP),
            _ => MAX_SLEEP,
        };
        state = shared
            .sooner
            .wait_timeout(state, wait)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}

/// How long from the wall clock's now until millisecond `at` starts.
fn until(at: u64) -> Duration {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Duration::from_millis(at).saturating_sub(now)
}
