//! The async layer's engine room: the state a timer shares between its
//! handles, its sleeps and its driver task, and the driver itself.
//!
//! # How time moves
//!
//! The driver is one tokio task per timer. It asks the wheel for the next
//! due bucket, waits on its [`Clock`](crate::clock::Clock)'s sleep (a
//! single `tokio::time::Sleep` by default) until that bucket's instant,
//! then flushes everything due: it wakes the owners of due sleeps, and runs
//! due callbacks itself, earliest deadline first. Nothing ticks while
//! nothing is due. When a registration creates a new earliest bucket the
//! registering thread wakes the driver so it can sleep less; no other
//! registration touches the driver.
//!
//! The clock's sleep is polled with a waker of our own
//! ([`DriverWake`](task::DriverWake)) rather than the driver task's. When
//! tokio's time driver (or a manual clock being advanced) fires it, that
//! waker flushes the due entries right there, before tokio returns to any
//! task. Callbacks are not run there: they go to a ready queue that the
//! driver task works through, so user code never runs inside tokio's time
//! driver. This is what makes `tokio::time::advance(d).await` behave as it
//! does for tokio's own timers: when it returns, every sleep due by then
//! has been woken. Each flush is bounded (`INLINE_BATCH`, `DRIVER_BATCH`),
//! and so is each lock hold within it (`WAKE_CHUNK`, with a coarse bucket's
//! entries moved down a few dozen at a time: see [`flush`]); the driver
//! task carries on with the rest, yielding between batches, so a million
//! simultaneous expiries never monopolise a worker or a shard's lock. At
//! each batch, sleeps that came due meanwhile go first
//! ([`Wheel::overtake`](crate::wheel::Wheel::overtake)), so a sleep due
//! just after a storm is not held behind all of it; callbacks never
//! overtake, so they still run earliest deadline first.
//!
//! # Layout
//!
//! By role, as tokio splits its `runtime/time`, each module importing only
//! those below it:
//!
//! * [`task`]: the driver task ([`Driver`](task::Driver)), the arming of
//!   its clock sleep, and the waker that flushes where the clock fires it;
//! * [`flush`]: firing what is due, in bounded batches and lock holds, and
//!   running the callbacks found due;
//! * [`shared`]: the state a timer shares between its handles, sleeps and
//!   driver ([`Shared`], one lock and wheel per shard, and the clock sleep
//!   the driver waits on) with its ground rules, and the operations the
//!   async layer calls on it: register, re-file, deregister, schedule,
//!   cancel, shut down;
//! * [`deadlines`]: the per-entry deadline words a later reset moves without
//!   a lock; [`jobs`]: the scheduled callbacks' state and ready queue;
//!   [`entry`]: an entry's key and the outcome of filing one.
//!
//! The driver task is made from the shared state ([`timer`] makes both),
//! never the other way round: the state knows its driver only by the waker
//! the task leaves in it.
//!
//! Time itself (instants to ticks and back) is [`crate::ticks`]; the
//! entries' wheel is the pure core in [`crate::wheel`].

pub(crate) mod deadlines;
pub(crate) mod entry;
mod flush;
pub(crate) mod jobs;
#[cfg(loom)]
pub mod loom_api;
mod shared;
mod task;

pub(crate) use self::entry::{EntryKey, Filing};
pub(crate) use self::shared::{Config, Counters, Shared};
pub(crate) use self::task::{Driver, Lifetime};

use crate::clock::Clock;
use crate::rt::Runtime;
use crate::sync::Arc;

/// Creates a timer's state and its driver future, which the caller must
/// spawn on a runtime.
///
/// With [`Lifetime::Runtime`] the driver keeps the timer alive until the
/// runtime drops it (a runtime's default timer); with
/// [`Lifetime::Owners`] it holds it weakly, so the timer ends when its
/// last owner (a `Timer`, `Handle` or future) is dropped.
///
/// # Panics
///
/// If the clock cannot make a sleep (tokio's, on a runtime without its
/// time driver), at the caller's location.
#[track_caller]
pub(crate) fn timer(
    config: Config,
    clock: Arc<dyn Clock>,
    runtime: Option<Runtime>,
    lifetime: Lifetime,
) -> (Arc<Shared>, Driver) {
    let shared = Shared::new(config, clock, runtime);
    let driver = Driver::new(&shared, lifetime);
    (shared, driver)
}

#[cfg(test)]
mod tests;
