//! Explicit timer instances: [`Timer`], its [`Builder`] and its [`Handle`].

use std::fmt;
use std::future::Future;
use std::time::Duration;

use crate::driver::{registry, Config, Shared};
use crate::sync::Arc;
use crate::{Instant, Interval, Sleep, Timeout};

/// The largest accepted `wheel_size`: each level allocates this many buckets.
const MAX_WHEEL_SIZE: usize = 1 << 20;

impl Default for Config {
    fn default() -> Config {
        Config {
            tick: Duration::from_millis(1),
            wheel_size: 64,
        }
    }
}

/// A timer: a hierarchical timing wheel with its own driver task.
///
/// Most code never builds one: the free functions ([`sleep`](crate::sleep),
/// [`timeout`](crate::timeout), ...) use a default timer per tokio runtime
/// (1 ms tick, 64 slots). Build your own to choose the granularity: a coarse
/// tick (say 10 ms) batches the wakeups of many network deadlines into few
/// driver turns, at the cost of firing up to one tick after each deadline
/// (never before it).
///
/// The timer's driver is a task on the tokio runtime that built it.
/// **Dropping the `Timer` shuts it down**: its pending sleeps are woken and
/// panic when next polled, saying so. Keep the `Timer` alive for as long as
/// its [`Handle`]s are used.
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
    /// Returns a [`Builder`] with the default configuration (1 ms tick, 64
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
        }
    }

    /// Builds a timer with the default configuration on the current runtime.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
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
}

impl Drop for Timer {
    fn drop(&mut self) {
        self.handle.shared.shutdown();
    }
}

impl fmt::Debug for Timer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timer")
            .field("handle", &self.handle)
            .finish()
    }
}

/// Configures and builds a [`Timer`].
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tiered_timer::Timer;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// // Network deadlines rarely need better than 10 ms.
/// let timer = Timer::builder().tick(Duration::from_millis(10)).build();
/// # drop(timer);
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Builder {
    config: Config,
}

impl Builder {
    /// Sets the width of one slot of the finest wheel: timers fire at the
    /// first multiple of `tick` (since the timer was built) at or after their
    /// deadline. Default: 1 ms. Must be at least 1 ms; checked by
    /// [`build`](Builder::build).
    ///
    /// # Examples
    ///
    /// ```
    /// let builder = tiered_timer::Timer::builder().tick(std::time::Duration::from_millis(10));
    /// # drop(builder);
    /// ```
    pub fn tick(mut self, tick: Duration) -> Builder {
        self.config.tick = tick;
        self
    }

    /// Sets the number of slots per wheel. The finest wheel spans
    /// `tick * wheel_size`; each overflow wheel, created when first needed,
    /// spans `wheel_size` times the one below. Default: 64. Must be between 2
    /// and 2^20; checked by [`build`](Builder::build).
    ///
    /// # Examples
    ///
    /// ```
    /// let builder = tiered_timer::Timer::builder().wheel_size(512);
    /// # drop(builder);
    /// ```
    pub fn wheel_size(mut self, wheel_size: usize) -> Builder {
        self.config.wheel_size = wheel_size;
        self
    }

    /// Builds the timer and spawns its driver task on the current runtime.
    ///
    /// # Panics
    ///
    /// If the tick is under 1 ms or over `u64::MAX` nanoseconds, if the wheel
    /// size is outside 2..=2^20, or if called outside a tokio runtime.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let timer = tiered_timer::Timer::builder().wheel_size(16).build();
    /// # drop(timer);
    /// # }
    /// ```
    #[track_caller]
    pub fn build(self) -> Timer {
        let Config { tick, wheel_size } = self.config;
        assert!(
            tick >= Duration::from_millis(1),
            "tiered-timer: tick must be at least 1 ms, got {tick:?}"
        );
        assert!(
            tick.as_nanos() <= u128::from(u64::MAX),
            "tiered-timer: tick must be at most u64::MAX nanoseconds, got {tick:?}"
        );
        assert!(
            (2..=MAX_WHEEL_SIZE).contains(&wheel_size),
            "tiered-timer: wheel_size must be between 2 and {MAX_WHEEL_SIZE}, got {wheel_size}"
        );
        let runtime = match tokio::runtime::Handle::try_current() {
            Ok(runtime) => runtime,
            Err(_) => panic!(
                "tiered-timer: `Builder::build` must be called from the context of a Tokio 1.x \
                 runtime, which runs the timer's driver task"
            ),
        };
        let (shared, driver) = Shared::new(self.config);
        drop(runtime.spawn(driver));
        Timer {
            handle: Handle { shared },
        }
    }
}

/// A cheap, cloneable reference to a [`Timer`], to create sleeps, timeouts
/// and intervals on it. `Send + Sync`.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let timer = tiered_timer::Timer::new();
/// let handle = timer.handle();
/// let result = handle
///     .timeout(Duration::from_millis(10), std::future::pending::<()>())
///     .await;
/// assert!(result.is_err());
/// # }
/// ```
#[derive(Clone)]
pub struct Handle {
    pub(crate) shared: Arc<Shared>,
}

impl Handle {
    /// Returns the default timer of the current tokio runtime, creating it
    /// on first use. This is the timer the free functions use.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let handle = tiered_timer::Handle::current();
    /// handle.sleep(std::time::Duration::from_millis(1)).await;
    /// # }
    /// ```
    #[track_caller]
    pub fn current() -> Handle {
        registry::current()
    }

    /// Waits until `duration` has elapsed, on this timer. See
    /// [`sleep`](crate::sleep).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let timer = tiered_timer::Timer::new();
    /// timer.handle().sleep(std::time::Duration::from_secs(1)).await;
    /// # }
    /// ```
    pub fn sleep(&self, duration: Duration) -> Sleep {
        let now = self.shared.now();
        match now.checked_add(duration) {
            Some(deadline) => Sleep::new(self.clone(), deadline),
            None => Sleep::never(self.clone(), far_future(now)),
        }
    }

    /// Waits until `deadline` is reached, on this timer. See
    /// [`sleep_until`](crate::sleep_until).
    ///
    /// # Examples
    ///
    /// ```
    /// use tiered_timer::Instant;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let timer = tiered_timer::Timer::new();
    /// let deadline = Instant::now() + std::time::Duration::from_millis(5);
    /// timer.handle().sleep_until(deadline).await;
    /// assert!(Instant::now() >= deadline);
    /// # }
    /// ```
    pub fn sleep_until(&self, deadline: Instant) -> Sleep {
        Sleep::new(self.clone(), deadline)
    }

    /// Requires `future` to complete within `duration`, on this timer. See
    /// [`timeout`](crate::timeout).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let timer = tiered_timer::Timer::new();
    /// let value = timer.handle().timeout(Duration::from_secs(1), async { 7 }).await;
    /// assert_eq!(value, Ok(7));
    /// # }
    /// ```
    pub fn timeout<F: Future>(&self, duration: Duration, future: F) -> Timeout<F> {
        Timeout::new(future, self.sleep(duration))
    }

    /// Requires `future` to complete before `deadline`, on this timer. See
    /// [`timeout_at`](crate::timeout_at).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::Instant;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let timer = tiered_timer::Timer::new();
    /// let deadline = Instant::now() + Duration::from_millis(10);
    /// let result = timer.handle().timeout_at(deadline, std::future::pending::<()>()).await;
    /// assert!(result.is_err());
    /// # }
    /// ```
    pub fn timeout_at<F: Future>(&self, deadline: Instant, future: F) -> Timeout<F> {
        Timeout::new(future, self.sleep_until(deadline))
    }

    /// Creates an [`Interval`] on this timer whose first tick completes at
    /// once. See [`interval`](crate::interval).
    ///
    /// # Panics
    ///
    /// If `period` is zero.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let timer = tiered_timer::Timer::new();
    /// let mut interval = timer.handle().interval(std::time::Duration::from_millis(10));
    /// interval.tick().await; // at once
    /// interval.tick().await; // 10 ms later
    /// # }
    /// ```
    #[track_caller]
    pub fn interval(&self, period: Duration) -> Interval {
        self.interval_at(self.shared.now(), period)
    }

    /// Creates an [`Interval`] on this timer whose first tick completes at
    /// `start`. See [`interval_at`](crate::interval_at).
    ///
    /// # Panics
    ///
    /// If `period` is zero.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::Instant;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let timer = tiered_timer::Timer::new();
    /// let start = Instant::now() + Duration::from_millis(50);
    /// let mut interval = timer.handle().interval_at(start, Duration::from_millis(10));
    /// assert_eq!(interval.tick().await, start);
    /// # }
    /// ```
    #[track_caller]
    pub fn interval_at(&self, start: Instant, period: Duration) -> Interval {
        assert!(period > Duration::ZERO, "`period` must be non-zero.");
        Interval::new(self.sleep_until(start), period)
    }

    /// Returns how many timers are registered on this timer and have neither
    /// fired nor been cancelled.
    ///
    /// A sleep counts from its first poll (registration is lazy) until it
    /// fires or is dropped.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let timer = tiered_timer::Timer::new();
    /// let handle = timer.handle();
    /// let mut sleep = handle.sleep(Duration::from_secs(1));
    /// assert_eq!(handle.pending(), 0); // not polled yet
    /// assert!(futures_poll_once(&mut sleep).is_pending());
    /// assert_eq!(handle.pending(), 1);
    /// drop(sleep);
    /// assert_eq!(handle.pending(), 0);
    /// # fn futures_poll_once(f: &mut tiered_timer::Sleep) -> std::task::Poll<()> {
    /// #     use std::future::Future;
    /// #     let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    /// #     std::pin::Pin::new(f).poll(&mut cx)
    /// # }
    /// # }
    /// ```
    pub fn pending(&self) -> usize {
        self.shared.pending()
    }

    /// The timer's current time, from its clock.
    pub(crate) fn now(&self) -> Instant {
        self.shared.now()
    }
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let config = self.shared.config();
        f.debug_struct("Handle")
            .field("tick", &config.tick)
            .field("wheel_size", &config.wheel_size)
            .field("pending", &self.shared.pending())
            .field("is_shutdown", &self.shared.is_shutdown())
            .finish()
    }
}

/// A deadline that stands for "never": about 30 years from `now`, as tokio
/// uses, or as far as `Instant` reaches.
pub(crate) fn far_future(now: Instant) -> Instant {
    const THIRTY_YEARS: Duration = Duration::from_secs(86_400 * 365 * 30);
    now.checked_add(THIRTY_YEARS)
        .or_else(|| now.checked_add(Duration::from_secs(86_400)))
        .unwrap_or(now)
}
