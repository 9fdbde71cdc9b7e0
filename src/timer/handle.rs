//! [`Handle`]: what sleeps, timeouts, intervals and callbacks are made
//! from, for an explicit timer or the runtime's default one.

use std::fmt;
use std::future::IntoFuture;
use std::time::Duration;

use crate::driver::Shared;
use crate::error::Error;
use crate::schedule::Scheduled;
use crate::sync::Arc;
use crate::{Instant, Interval, Sleep, Stats, Timeout};

use super::registry;

/// A cheap, cloneable reference to a [`Timer`](crate::Timer), to create sleeps, timeouts
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
    /// [`Error::AtCapacity`] if
    /// [`Builder::max_pending`](crate::Builder::max_pending) timers are
    /// pending; [`Error::Shutdown`] if the timer has shut down.
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
    /// [`Error::AtCapacity`] if
    /// [`Builder::max_pending`](crate::Builder::max_pending) timers are
    /// pending; [`Error::Shutdown`] if the timer has shut down.
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
        Ok(Scheduled::new(task, Arc::downgrade(shared)))
    }

    /// Returns how many timers are registered on this timer and have neither
    /// fired nor been cancelled: callbacks and futures alike.
    ///
    /// A sleep counts from its first poll (registration is lazy) until it
    /// fires or is dropped, whatever its deadline (`sleep(Duration::MAX)`
    /// too: it is clamped, and filed, like any other). A callback
    /// counts from [`schedule`](Handle::schedule) until it starts running,
    /// is cancelled, or is handed back by [`Timer::shutdown`](crate::Timer::shutdown).
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

    /// Returns the current time by this timer's [`Clock`](crate::clock::Clock).
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
