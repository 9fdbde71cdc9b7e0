//! Explicit timer instances: [`Timer`], its [`Builder`] and its [`Handle`].

use std::fmt;
use std::future::IntoFuture;
use std::time::Duration;

use crate::clock::{Clock, TokioClock};
use crate::driver::{registry, Config, Lifetime, Shared};
use crate::error::Error;
use crate::schedule::{Scheduled, Unfired};
use crate::sync::Arc;
use crate::{Instant, Interval, Sleep, Stats, Timeout};

/// The largest accepted `wheel_size`: each level allocates this many buckets.
const MAX_WHEEL_SIZE: usize = 1 << 20;

impl Default for Config {
    fn default() -> Config {
        Config {
            tick: Duration::from_micros(250),
            wheel_size: 64,
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
    /// Afterwards nothing fires: scheduling returns [`Error::Shutdown`],
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
    clock: Arc<dyn Clock>,
}

impl Builder {
    /// Sets the width of one slot of the finest wheel: timers fire at the
    /// first multiple of `tick` (since the timer was built) at or after their
    /// deadline. Default: 250 µs. Must be at least 1 µs; checked by
    /// [`build`](Builder::build).
    ///
    /// With tokio's clock the driver waits on tokio's sleeps, which fall on
    /// tokio's own 1 ms grid, so a timer fires at the first point of that
    /// grid at or after its tick boundary: up to 1 ms after the boundary,
    /// never before the deadline. A tick finer than 1 ms keeps the two
    /// roundings from adding up (the default's 250 µs costs about 0.1 ms on
    /// average over tokio's own lateness; a 1 ms tick whose boundaries fall
    /// just after tokio's grid points would cost up to 1 ms); a coarser tick
    /// batches more deadlines into each driver turn. The range is `u64`
    /// ticks from the timer's creation; deadlines beyond it are clamped to
    /// about 30 years from when they are set, as tokio clamps
    /// `sleep(Duration::MAX)`.
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

    /// Limits how many timers may be pending at once; past it,
    /// [`Handle::schedule`] fails with [`Error::AtCapacity`]. Default:
    /// unlimited.
    ///
    /// The count is [`Handle::pending`]: callbacks and futures alike. Room
    /// comes back as soon as one is cancelled, fires or starts running.
    /// Only scheduling is refused: sleeps and timeouts have no way to
    /// report an error through tokio's API, so they are always accepted
    /// (and counted), as a drop-in must.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::{Error, Timer};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let timer = Timer::builder().max_pending(2).build();
    /// let handle = timer.handle();
    /// let first = handle.schedule(Duration::from_secs(1), || {}).unwrap();
    /// handle.schedule(Duration::from_secs(1), || {}).unwrap();
    /// assert_eq!(handle.schedule(Duration::from_secs(1), || {}).unwrap_err(), Error::AtCapacity);
    /// first.cancel();
    /// assert!(handle.schedule(Duration::from_secs(1), || {}).is_ok());
    /// # }
    /// ```
    pub fn max_pending(mut self, max_pending: usize) -> Builder {
        self.config.max_pending = max_pending;
        self
    }

    /// Sets the time source. Default: [`TokioClock`], which follows tokio's
    /// paused time.
    ///
    /// A [`ManualClock`](crate::clock::ManualClock) makes a timer that moves
    /// only when told to, for simulations and deterministic tests.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::{clock::ManualClock, Timer};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let clock = ManualClock::new();
    /// let timer = Timer::builder().clock(clock.clone()).build();
    /// let handle = timer.handle();
    /// let sleep = handle.sleep(Duration::from_secs(3600));
    /// clock.advance(Duration::from_secs(3600));
    /// sleep.await; // no real hour passes
    /// # }
    /// ```
    pub fn clock(mut self, clock: impl Clock) -> Builder {
        self.clock = Arc::new(clock);
        self
    }

    /// Builds the timer and spawns its driver task on the current runtime.
    ///
    /// # Panics
    ///
    /// If the tick is under 1 µs or over `u64::MAX` nanoseconds, if the wheel
    /// size is outside 2..=2^20, or if called outside a tokio runtime or on
    /// one built without its time driver (`enable_time`) while the clock is
    /// tokio's. The panic reports the caller's location.
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
    #[must_use = "a timer ends when it and every handle and future of it are dropped"]
    pub fn build(self) -> Timer {
        let Config {
            tick, wheel_size, ..
        } = self.config;
        assert!(
            tick >= Duration::from_micros(1),
            "tiered-timer: tick must be at least 1 µs, got {tick:?}"
        );
        assert!(
            tick.as_nanos() <= u128::from(u64::MAX),
            "tiered-timer: tick must be at most u64::MAX nanoseconds, got {tick:?}"
        );
        assert!(
            (2..=MAX_WHEEL_SIZE).contains(&wheel_size),
            "tiered-timer: wheel_size must be between 2 and {MAX_WHEEL_SIZE}, got {wheel_size}"
        );
        let runtime = match crate::rt::Runtime::try_current() {
            Some(runtime) => runtime,
            None => panic!(
                "tiered-timer: `Builder::build` must be called from the context of a Tokio 1.x \
                 runtime, which runs the timer's driver task"
            ),
        };
        let config = Config {
            shards: runtime.workers(),
            ..self.config
        };
        let (shared, driver) =
            Shared::new(config, self.clock, Some(runtime.clone()), Lifetime::Owners);
        runtime.spawn(driver);
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
    /// Outside a tokio runtime, or on one built without its time driver
    /// (`enable_time`). The panic reports the caller's location.
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
        self.clone().into_sleep(duration)
    }

    /// As [`Handle::sleep`], consuming the handle: the free functions own
    /// the handle they looked up, and giving it to the sleep saves a
    /// reference-count round trip (two atomic operations on a counter all
    /// workers share) per sleep.
    #[inline]
    pub(crate) fn into_sleep(self, duration: Duration) -> Sleep {
        // Like tokio's, the duration counts from the clock of the runtime
        // this runs in (the timer's own, unless runtimes are mixed).
        let now = self.shared.now();
        self.into_sleep_from(now, duration)
    }

    pub(crate) fn sleep_from(&self, now: Instant, duration: Duration) -> Sleep {
        self.clone().into_sleep_from(now, duration)
    }

    fn into_sleep_from(self, now: Instant, duration: Duration) -> Sleep {
        let deadline = self.shared.ticks().clamp(now.checked_add(duration), || now);
        Sleep::new(self, deadline)
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
        self.clone().into_sleep_until(deadline)
    }

    /// As [`Handle::sleep_until`], consuming the handle (see
    /// [`Handle::into_sleep`]).
    pub(crate) fn into_sleep_until(self, deadline: Instant) -> Sleep {
        let shared = &self.shared;
        let deadline = shared.ticks().clamp(Some(deadline), || shared.now());
        Sleep::new(self, deadline)
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
    pub fn timeout<F: IntoFuture>(&self, duration: Duration, future: F) -> Timeout<F::IntoFuture> {
        Timeout::new(future.into_future(), self.sleep(duration))
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
    pub fn timeout_at<F: IntoFuture>(
        &self,
        deadline: Instant,
        future: F,
    ) -> Timeout<F::IntoFuture> {
        Timeout::new(future.into_future(), self.sleep_until(deadline))
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

    /// Schedules `f` to run once `delay` has passed.
    ///
    /// `f` runs on the timer's driver task at the first tick boundary at or
    /// after the deadline, never before it, and never inside `schedule`
    /// itself: a zero or past delay runs on the driver's next turn. Due
    /// callbacks run in deadline order.
    ///
    /// Callbacks share the driver task with every timer of this timer, so
    /// **keep them short**: spawn a task for anything that blocks or takes
    /// long. They may call `schedule` and [`Scheduled::cancel`] (a callback
    /// can re-arm itself). A callback that panics is caught, reported on
    /// standard error, and the timer carries on.
    ///
    /// Dropping the returned [`Scheduled`] does not cancel the callback.
    /// A `delay` too large to represent (such as `Duration::MAX`), or one
    /// past the timer's last tick, is clamped to about 30 years from now,
    /// as a sleep's is: [`Scheduled::deadline`] reports the clamped one.
    ///
    /// # Errors
    ///
    /// [`Error::AtCapacity`] if [`Builder::max_pending`] timers are pending;
    /// [`Error::Shutdown`] if the timer has shut down.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tokio::sync::oneshot;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), tiered_timer::Error> {
    /// let handle = tiered_timer::Handle::current();
    /// let (tx, rx) = oneshot::channel();
    /// handle.schedule(Duration::from_secs(30), move || {
    ///     let _ = tx.send("session expired");
    /// })?;
    /// assert_eq!(rx.await.unwrap(), "session expired");
    /// # Ok(())
    /// # }
    /// ```
    pub fn schedule<F>(&self, delay: Duration, f: F) -> Result<Scheduled, Error>
    where
        F: FnOnce() + Send + 'static,
    {
        let now = self.shared.own_now();
        let deadline = self.shared.ticks().clamp(now.checked_add(delay), || now);
        self.schedule_boxed(deadline, Box::new(f))
    }

    /// Schedules `f` to run once `deadline` has been reached.
    ///
    /// As [`Handle::schedule`], with an absolute deadline: one in the past
    /// runs on the driver's next turn; one past the timer's last tick is
    /// clamped to about 30 years from now.
    ///
    /// # Errors
    ///
    /// [`Error::AtCapacity`] if [`Builder::max_pending`] timers are pending;
    /// [`Error::Shutdown`] if the timer has shut down.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::{Handle, Instant};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), tiered_timer::Error> {
    /// let close_at = Instant::now() + Duration::from_secs(1800);
    /// let scheduled = Handle::current().schedule_at(close_at, || println!("order closed"))?;
    /// assert_eq!(scheduled.deadline(), close_at);
    /// # Ok(())
    /// # }
    /// ```
    pub fn schedule_at<F>(&self, deadline: Instant, f: F) -> Result<Scheduled, Error>
    where
        F: FnOnce() + Send + 'static,
    {
        self.schedule_boxed(deadline, Box::new(f))
    }

    fn schedule_boxed(
        &self,
        deadline: Instant,
        f: Box<dyn FnOnce() + Send + 'static>,
    ) -> Result<Scheduled, Error> {
        let shared = &self.shared;
        let deadline = shared.ticks().clamp(Some(deadline), || shared.own_now());
        let tick = shared.ticks().deadline_tick(deadline);
        let task = shared.schedule(deadline, tick, f)?;
        Ok(Scheduled::new(task))
    }

    /// Returns how many timers are registered on this timer and have neither
    /// fired nor been cancelled: callbacks and futures alike.
    ///
    /// A sleep counts from its first poll (registration is lazy) until it
    /// fires or is dropped, whatever its deadline (`sleep(Duration::MAX)`
    /// too: it is clamped, and filed, like any other). A callback
    /// counts from [`schedule`](Handle::schedule) until it starts running,
    /// is cancelled, or is handed back by [`Timer::shutdown`].
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

    /// Returns a snapshot of this timer's counters: driver wakeups, timers
    /// fired, entries cascaded between wheels, and timers pending.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::Timer;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let timer = Timer::new();
    /// let handle = timer.handle();
    /// // Far enough out to sit in an overflow wheel first.
    /// handle.sleep(Duration::from_secs(10)).await;
    /// let stats = handle.stats();
    /// assert_eq!(stats.fired, 1);
    /// assert!(stats.cascaded >= 1);
    /// # }
    /// ```
    pub fn stats(&self) -> Stats {
        self.shared.counters().into()
    }

    /// Returns the current time by this timer's [`Clock`].
    ///
    /// For the default clock this is [`Instant::now`], which follows tokio's
    /// paused time; for a [`ManualClock`](crate::clock::ManualClock), the
    /// time it was last moved to.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::{clock::ManualClock, Timer};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let clock = ManualClock::new();
    /// let timer = Timer::builder().clock(clock.clone()).build();
    /// let before = timer.handle().now();
    /// clock.advance(Duration::from_secs(10));
    /// assert_eq!(timer.handle().now() - before, Duration::from_secs(10));
    /// # }
    /// ```
    pub fn now(&self) -> Instant {
        self.shared.own_now()
    }
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let config = self.shared.config();
        f.debug_struct("Handle")
            .field("tick", &config.tick)
            .field("wheel_size", &config.wheel_size)
            .field("pending", &self.shared.try_pending())
            .field("is_shutdown", &self.shared.is_shutdown())
            .finish()
    }
}

/// The deadline that stands for "forever": about 30 years from `now`, as
/// tokio clamps it, or as far as `Instant` reaches.
pub(crate) fn far_future(now: Instant) -> Instant {
    const THIRTY_YEARS: Duration = Duration::from_secs(86_400 * 365 * 30);
    now.checked_add(THIRTY_YEARS)
        .or_else(|| now.checked_add(Duration::from_secs(86_400)))
        .unwrap_or(now)
}
