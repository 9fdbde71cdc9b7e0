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
//! By role, as tokio splits its `runtime/time`:
//!
//! * [`shared`]: the state a timer shares between its handles, sleeps and
//!   driver ([`Shared`], one lock and wheel per shard) with its ground
//!   rules, and the operations the async layer calls on it: register,
//!   re-file, deregister, schedule, cancel, shut down;
//! * [`flush`]: firing what is due, in bounded batches and lock holds, and
//!   running the callbacks found due;
//! * [`task`]: the driver task ([`Driver`](task::Driver)), the clock sleep
//!   it is armed with, and the waker that flushes where the clock fires it;
//! * [`deadlines`]: the per-entry deadline words a later reset moves without
//!   a lock; [`jobs`]: the scheduled callbacks' state and ready queue.
//!
//! Time itself (instants to ticks and back) is [`crate::ticks`]; the
//! entries' wheel is the pure core in [`crate::wheel`].

pub(crate) mod deadlines;
mod flush;
pub(crate) mod jobs;
#[cfg(loom)]
pub mod loom_api;
mod shared;
mod task;

use std::time::Duration;

use crate::wheel::Key;

pub(crate) use self::shared::Shared;
pub(crate) use self::task::Lifetime;

/// An entry's key as sleeps and callbacks hold it: its shard and its key in
/// that shard's wheel, packed in one word.
pub(crate) type EntryKey = usize;

/// Low bits of an [`EntryKey`] that name the shard.
const SHARD_BITS: u32 = 6;
/// Most shards a timer has.
pub(crate) const MAX_SHARDS: usize = 1 << SHARD_BITS;

fn pack(shard: usize, key: Key) -> EntryKey {
    debug_assert!(shard < MAX_SHARDS);
    (key << SHARD_BITS) | shard
}

fn unpack(key: EntryKey) -> (usize, Key) {
    (key & (MAX_SHARDS - 1), key >> SHARD_BITS)
}

/// The outcome of asking the timer to file a sleep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Filing {
    /// Filed under `key`.
    Filed { key: EntryKey },
    /// Its deadline has already been reached.
    Elapsed,
    /// The timer has shut down.
    Shutdown,
}

/// The timer's configuration, fixed at build time.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Config {
    pub(crate) tick: Duration,
    pub(crate) wheel_size: usize,
    /// Most pending entries before `schedule` refuses more.
    pub(crate) max_pending: usize,
    /// How many shards to split the entries into (the runtime's workers).
    pub(crate) shards: usize,
}

/// A snapshot of a timer's counters.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Counters {
    pub(crate) wakeups: u64,
    pub(crate) fired: u64,
    pub(crate) cascaded: u64,
    pub(crate) pending: usize,
}

#[cfg(test)]
mod tests;
