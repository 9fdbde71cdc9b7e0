//! Explicit timer instances: [`Timer`], its [`Builder`] and its [`Handle`].

use std::fmt;
use std::time::Duration;

use crate::clock::TokioClock;
use crate::driver::Config;
use crate::schedule::Unfired;
use crate::sync::Arc;

mod builder;
mod handle;
pub(crate) mod registry;

pub use self::builder::Builder;
pub use self::handle::Handle;

/// The default `wheel_size`, also that of a `DelayQueue` made without a
/// timer.
pub(crate) const DEFAULT_WHEEL_SIZE: usize = 64;

impl Default for Config {
    fn default() -> Config {
        Config {
            tick: Duration::from_micros(250),
            wheel_size: DEFAULT_WHEEL_SIZE,
            max_pending: usize::MAX,
            shards: 1,
        }
    }
}

/// A timer: a hierarchical timing wheel with its own driver task.
///
/// Most code never builds one: the free functions ([`sleep`](crate::sleep),
/// [`timeout`](crate::timeout), ...) use a default timer per tokio runtime
/// (250 µs tick, 64 slots). Build your own to choose the granularity: a coarse
/// tick (say 10 ms) batches the wakeups of many network deadlines into few
/// driver turns, at the cost of firing up to one tick after each deadline
/// (never before it).
///
/// Besides futures, a timer runs callbacks
/// ([`Handle::schedule`]), in the manner of Kafka's `SystemTimer` and
/// Netty's `HashedWheelTimer`.
///
/// The timer's driver is a task on the tokio runtime that built it. The
/// timer lives while anything of it does: the `Timer`, a [`Handle`], or a
/// sleep, timeout, interval or `DelayQueue` made from one. So
/// `Timer::new().handle()` is a working handle. It ends when the last of
/// them is dropped (callbacks that never ran are then dropped: pending
/// callbacks alone do not keep a timer alive), when [`Timer::shutdown`] is
/// called, or when its runtime shuts down.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tiered_timer::Timer;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let timer = Timer::builder().tick(Duration::from_millis(10)).build();
/// let handle = timer.handle();
/// let start = tiered_timer::Instant::now();
/// handle.sleep(Duration::from_millis(25)).await;
/// // Fires at the first 10 ms tick boundary at or after the deadline.
/// assert!(start.elapsed() >= Duration::from_millis(25));
/// # }
/// ```
pub struct Timer {
    handle: Handle,
}

impl Timer {
    /// Returns a [`Builder`] with the default configuration (250 µs tick, 64
    /// slots per wheel).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::Timer;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let timer = Timer::builder()
    ///     .tick(Duration::from_millis(5))
    ///     .wheel_size(128)
    ///     .build();
    /// # drop(timer);
    /// # }
    /// ```
    pub fn builder() -> Builder {
        Builder {
            config: Config::default(),
            clock: Arc::new(TokioClock),
        }
    }

    /// Builds a timer with the default configuration on the current runtime.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime, or on one built without its time driver
    /// (`enable_time`). The panic reports the caller's location.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let timer = tiered_timer::Timer::new();
    /// timer.handle().sleep(std::time::Duration::from_millis(1)).await;
    /// # }
    /// ```
    #[track_caller]
    #[allow(clippy::new_without_default)] // needs a runtime: not a plain value
    #[must_use = "a timer ends when it and every handle and future of it are dropped"]
    pub fn new() -> Timer {
        Timer::builder().build()
    }

    /// Returns a handle to this timer, to create sleeps, timeouts and
    /// intervals on it. Handles are cheap to clone and can be sent anywhere.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let timer = tiered_timer::Timer::new();
    /// let handle = timer.handle();
    /// tokio::spawn(async move {
    ///     handle.sleep(std::time::Duration::from_millis(1)).await;
    /// })
    /// .await
    /// .unwrap();
    /// # }
    /// ```
    pub fn handle(&self) -> Handle {
        self.handle.clone()
    }

    /// Stops the timer and returns the callbacks that never ran, earliest
    /// deadline first.
    ///
    /// Afterwards nothing fires: scheduling returns [`Error::Shutdown`](crate::Error::Shutdown),
    /// pending sleeps, timeouts and intervals are woken and panic when next
    /// polled with a message naming the shutdown (a sleep that had already
    /// completed stays complete), and the driver task ends. Callbacks found
    /// due but not yet run are returned too; one already running finishes.
    /// Calling it again returns an empty `Vec`.
    ///
    /// Dropping the `Timer` does not shut it down while its handles or
    /// futures live (see [`Timer`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::{Error, Timer};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let timer = Timer::new();
    /// let handle = timer.handle();
    /// handle.schedule(Duration::from_secs(30), || println!("expire session 7")).unwrap();
    /// handle.schedule(Duration::from_secs(10), || println!("expire session 3")).unwrap();
    ///
    /// let unfired = timer.shutdown();
    /// assert_eq!(unfired.len(), 2);
    /// assert!(unfired[0].deadline() < unfired[1].deadline());
    /// assert_eq!(handle.schedule(Duration::ZERO, || {}).unwrap_err(), Error::Shutdown);
    /// # }
    /// ```
    pub fn shutdown(&self) -> Vec<Unfired> {
        self.handle
            .shared
            .shutdown()
            .into_iter()
            .map(Unfired::new)
            .collect()
    }
}

impl fmt::Debug for Timer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timer")
            .field("handle", &self.handle)
            .finish()
    }
}
