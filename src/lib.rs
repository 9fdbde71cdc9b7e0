//! A hierarchical timing-wheel timer for tokio, and a drop-in replacement
//! for `tokio::time`.
//!
//! ```
//! use std::time::Duration;
//! use tiered_timer::{interval, sleep, timeout};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! sleep(Duration::from_millis(10)).await;
//! let slow = sleep(Duration::from_secs(10));
//! assert!(timeout(Duration::from_millis(50), slow).await.is_err());
//! let mut ticks = interval(Duration::from_millis(100));
//! ticks.tick().await;
//! # }
//! ```
//!
//! Switching from `tokio::time` is a change of imports: the free functions
//! ([`sleep`], [`sleep_until`], [`timeout`], [`timeout_at`], [`interval`],
//! [`interval_at`]) and the types ([`Sleep`], [`Timeout`], [`Interval`],
//! [`MissedTickBehavior`], [`error::Elapsed`]) have tokio's names,
//! signatures and documented behaviour, and time is tokio's [`Instant`], so
//! `tokio::time::pause`, `advance` and auto-advance drive this timer too.
//! Unlike tokio's, [`Sleep`] is [`Unpin`] and [`Timeout<F>`] is `Unpin` when
//! `F` is.
//!
//! Beyond the drop-in:
//!
//! * [`Timer`] builds a timer of your own ([`Builder::tick`],
//!   [`Builder::wheel_size`], [`Builder::max_pending`], [`Builder::clock`]);
//!   its [`Handle`] has the same constructors.
//! * [`Handle::schedule`] runs a callback at a deadline, in the manner of
//!   Kafka's `SystemTimer` and Netty's `HashedWheelTimer`: cancel it with
//!   [`Scheduled::cancel`], and get back the ones that never ran from
//!   [`Timer::shutdown`].
//! * [`io::TimeoutStream`] guards network I/O with read, write and idle
//!   timeouts and a deadline, re-armed without a lock on every event; with
//!   the `hyper` feature, `HyperTimer` runs hyper's timers on this crate.
//! * With the `tower` feature, `tower::TimeoutLayer` is tower's timeout
//!   middleware on this timer: request deadlines for axum, tonic and hyper
//!   services in one line.
//! * The [`clock`] module makes the time source pluggable: tokio's clock by
//!   default, or a [`ManualClock`](clock::ManualClock) for simulations.
//! * [`DelayQueue`] holds values until their deadlines, with the API of
//!   `tokio_util::time::DelayQueue` (switching is a change of imports) on
//!   this crate's wheel: never early, no range limit, keys that never name
//!   another value, memory returned without remapping keys, and a fair
//!   `poll_expired`. [`delay_queue`] has its [`Key`](delay_queue::Key) and
//!   [`Expired`](delay_queue::Expired). [`Interval`] and [`DelayQueue`] are
//!   `futures_core::Stream`s.
//!
//! ```
//! use std::future::poll_fn;
//! use std::time::Duration;
//! use tiered_timer::DelayQueue;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let mut queue = DelayQueue::new();
//! let key = queue.insert("retry job 7", Duration::from_secs(5));
//! queue.insert("retry job 8", Duration::from_secs(1));
//! queue.reset(&key, Duration::from_secs(2));
//! let first = poll_fn(|cx| queue.poll_expired(cx)).await.unwrap();
//! assert_eq!(first.into_inner(), "retry job 8");
//! # }
//! ```
//!
//! # Features
//!
//! None is on by default.
//!
//! * `hyper`: `HyperTimer`, hyper's `rt::Timer` on this crate.
//! * `tower`: the `tower` module, tower's timeout middleware on this timer.
//! * `spin-lock` (experimental, may be removed): the shards' wheels behind a
//!   spin lock instead of `std::sync::Mutex`; the only `unsafe` code, which
//!   the default build forbids.
//!
//! # Design
//!
//! Each timer is a hierarchy of timing wheels in the style of Kafka's
//! `SystemTimer` (after Varghese and Lauck, "Hashed and Hierarchical Timing
//! Wheels", SOSP 1987):
//!
//! * the finest wheel has `wheel_size` slots of one `tick`; coarser overflow
//!   wheels are created when a deadline first needs them, with no limit on
//!   range; when a coarse bucket comes due its entries are reinserted into
//!   finer wheels;
//! * a min-heap of non-empty bucket expirations tells the timer's single
//!   driver task how long to sleep, so nothing runs while nothing is due;
//! * entries live in a slab: registering, cancelling and resetting are O(1)
//!   and a timer costs no allocation of its own.
//! * the entries are sharded per runtime worker, each shard behind its own
//!   short-held lock (`std::sync::Mutex`), so workers rarely contend; one
//!   driver serves all shards.
//!
//! The synchronous core lives in `src/wheel/` (it reads no clock and takes no
//! lock); `src/driver/` runs it on tokio, through a [`clock::Clock`].
//! [`wheel_core::Wheel`] is that core, public for owners with their own
//! clock and lock (the durable job store of `tiered-timer-jobs` files
//! wall-clock milliseconds in it).
//!
//! # Differences from `tokio::time`
//!
//! This is the one list of them; the README links here.
//!
//! **Two that can change what your code does after the switch:**
//!
//! * **[`error::Elapsed`] is this crate's own type, not tokio's.** Code that
//!   checks a boxed error's type, such as
//!   `err.is::<tokio::time::error::Elapsed>()` or a `downcast_ref` to it,
//!   is `false` for a timeout from this crate: test for
//!   `tiered_timer::error::Elapsed` instead (or for both while you mix
//!   timers). It has the same `Display` text, and converts into an
//!   [`std::io::Error`] of kind `TimedOut` as tokio's does. (The `tower`
//!   feature's middleware returns tower's own `Elapsed`, as tower's does.)
//! * **[`Interval`] is itself a `futures_core::Stream`**: there is no
//!   `IntervalStream` wrapper. Replace
//!   `tokio_stream::wrappers::IntervalStream::new(interval(d))` with
//!   `interval(d)`.
//!
//! The rest:
//!
//! * [`Sleep`] is [`Unpin`]; [`Timeout<F>`] is `Unpin` when `F` is.
//! * A sleep whose deadline has passed completes on its first poll, unless
//!   the timer's driver is just then due to run for an earlier deadline:
//!   then on that run. (tokio's guarantee is relative to its driver's last
//!   turn in the same way.) This spares the guard path a second clock read.
//! * Under paused time, at most 1024 sleeps are woken inside the turn of
//!   `tokio::time::advance`; beyond that the driver wakes the rest on the
//!   runtime's next turns, in batches, so no flush monopolises a worker.
//! * A future belongs to its timer, whichever runtime polls it: whether
//!   its deadline has passed, and when it fires, follow the timer's clock.
//!   As with tokio, only the start of a `sleep(d)` is read from the clock
//!   of the runtime the call runs in (the same clock unless runtimes with
//!   differently paused clocks are mixed).
//! * Sleeps of a timer that was shut down ([`Timer::shutdown`]) panic when
//!   polled, saying so; resetting one does not. While a runtime shuts down,
//!   sleeps of its timers polled by its own workers stay pending (their
//!   tasks are being dropped); polled anywhere else, they panic. A
//!   [`Timer`] lives while any [`Handle`] or future of it does.
//! * "Forever" deadlines are as tokio's: `sleep(Duration::MAX)`, or any
//!   deadline `Instant` cannot represent, is clamped to 30 years from now
//!   ([`Sleep::deadline`] reports it), filed and counted by
//!   [`Handle::pending`] like any other, and completes there, never before,
//!   so paused time's auto-advance reaches it. The difference: a timer's
//!   range is `u64` ticks from its creation (about 584 million years at
//!   1 ms, 146 million at the default 250 µs), and a representable deadline
//!   past its last tick is clamped the same way, reporting the clamped
//!   instant. tokio keeps such a deadline and fires it at the end of its
//!   own range, before it; this crate never fires before the deadline it
//!   reports. Callbacks ([`Handle::schedule`]) are clamped alike.
//! * Durations the timer can serve are kept exactly: tokio caps `sleep`'s
//!   duration, [`Interval::reset_after`]'s and an interval's period at 30
//!   years (`sleep(100 years)` completes after 30); here nothing completes
//!   before the duration asked for. A next interval tick that overflows
//!   `Instant` is the far future, 30 years on, as tokio's schedule would
//!   have it, though [`Interval::period`] stays what was given.
//! * `timeout(Duration::MAX, f)` has a deadline 30 years away, like a
//!   sleep's; tokio (1.54) sets none, so a paused test awaiting a future
//!   that never completes under it hangs there and ends here.
//! * [`error::Error`] is this crate's own (returned by
//!   [`Handle::schedule`]). `pause`, `resume` and `advance` are not
//!   re-exported: tokio's own drive this timer.
//!
//! # Never early
//!
//! A timer with tick `t`, built at instant `o`, fires a deadline `d` at the
//! first tick boundary `o + k·t` with `o + k·t >= d`, and never before it.
//! (It may be later when the runtime is busy, like any timer.) The default
//! timer's tick is 250 µs.
//!
//! With tokio's clock, the driver waits on tokio's own sleeps, which fall on
//! tokio's 1 ms grid, whose phase the timer cannot see. A timer therefore
//! fires at the first point of that grid at or after its tick boundary: up
//! to 1 ms after the boundary, never before its deadline, and at most one
//! tick + 1 ms after the deadline when the runtime is idle. The default
//! tick is finer than tokio's grid so that the two roundings rarely add up.

// docs.rs (`--cfg docsrs`, see Cargo.toml) marks each feature-gated item
// with its feature; `loom` is a test build, not something to show.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![cfg_attr(docsrs, doc(auto_cfg(hide(loom))))]
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]
// No `unsafe` in the default build. The experimental `spin-lock` feature
// adds one module that needs it, `spin_lock`, which allows it for itself;
// `deny` keeps it out of everything else. Each unsafe block carries a
// `// SAFETY:` comment (checked by clippy).
#![cfg_attr(not(feature = "spin-lock"), forbid(unsafe_code))]
#![cfg_attr(feature = "spin-lock", deny(unsafe_code))]
#![warn(clippy::undocumented_unsafe_blocks)]
// The loom build compiles a subset of the crate (no `delay_queue`, `io`,
// `hyper`, `tower`): what only those use is dead there, not anywhere else.
#![cfg_attr(loom, allow(dead_code, unused_imports))]

pub mod clock;
#[cfg(not(loom))]
pub mod delay_queue;
mod driver;
pub mod error;
#[cfg(all(feature = "hyper", not(loom)))]
mod hyper_timer;
mod interval;
#[cfg(not(loom))]
pub mod io;
mod schedule;
mod shim;
mod sleep;
#[cfg(feature = "spin-lock")]
mod spin_lock;
mod stats;
mod ticks;
mod timeout;
mod timer;
#[cfg(all(feature = "tower", not(loom)))]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub mod tower;
mod wheel;
pub mod wheel_core;

// The loom shim's halves, by the names the rest of the crate uses: only
// `shim` looks at `cfg(loom)` to swap std and tokio for loom's versions.
use crate::shim::{rt, sync};

#[cfg(not(loom))]
pub use crate::delay_queue::DelayQueue;
#[cfg(loom)]
#[doc(hidden)]
pub use crate::driver::loom_api as __loom;
pub use crate::error::{BuildError, Error};
#[cfg(all(feature = "hyper", not(loom)))]
#[cfg_attr(docsrs, doc(cfg(feature = "hyper")))]
pub use crate::hyper_timer::HyperTimer;
pub use crate::interval::{interval, interval_at, Interval, MissedTickBehavior};
pub use crate::schedule::{Scheduled, Unfired};
pub use crate::sleep::{sleep, sleep_until, Sleep};
pub use crate::stats::Stats;
pub use crate::timeout::{timeout, timeout_at, Timeout};
pub use crate::timer::{Builder, Handle, Timer};

/// The fuzz target's entry point (`fuzz/`); not part of the API.
#[cfg(fuzzing)]
#[doc(hidden)]
pub mod __fuzz {
    /// Runs the wheel harness on one fuzzer input; panics on a divergence
    /// from the model.
    pub fn run(data: &[u8]) {
        crate::wheel::fuzz::run(data);
    }
}

/// A measurement of a monotonically nondecreasing clock: tokio's, so that
/// paused time applies.
pub use crate::rt::Instant;

/// std's `Duration`, re-exported as `tokio::time` does, so that
/// `use tiered_timer::{sleep, Duration, Instant}` replaces
/// `use tokio::time::{sleep, Duration, Instant}`.
#[doc(no_inline)]
pub use std::time::Duration;

/// The README's examples, compiled and run as doctests so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
