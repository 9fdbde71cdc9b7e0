//! [`Interval`]: ticks at a fixed period.

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use crate::ticks::far_future;
use crate::{Handle, Instant, Sleep};

/// A tick this late or more counts as missed, and [`MissedTickBehavior`]
/// decides the next one. tokio uses the same 5 ms, so schedules match.
const MISSED_AFTER: Duration = Duration::from_millis(5);

/// Creates an [`Interval`] that yields every `period`, the first tick
/// completing immediately.
///
/// Missed ticks are handled with [`MissedTickBehavior::Burst`] by default.
/// Uses the current runtime's default timer.
///
/// # Panics
///
/// If `period` is zero, outside a tokio runtime, or on one built without
/// its time driver (`enable_time`). The panic reports the caller's
/// location.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tiered_timer::interval;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let mut interval = interval(Duration::from_millis(10));
/// interval.tick().await; // ticks immediately
/// interval.tick().await; // ticks after 10 ms
/// interval.tick().await; // ticks after 10 ms
/// # }
/// ```
#[track_caller]
pub fn interval(period: Duration) -> Interval {
    Handle::current().interval(period)
}

/// Creates an [`Interval`] that yields every `period`, the first tick
/// completing at `start`.
///
/// # Panics
///
/// If `period` is zero, outside a tokio runtime, or on one built without
/// its time driver (`enable_time`). The panic reports the caller's
/// location.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tiered_timer::{interval_at, Instant};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let start = Instant::now() + Duration::from_millis(50);
/// let mut interval = interval_at(start, Duration::from_millis(10));
/// assert_eq!(interval.tick().await, start);
/// assert_eq!(interval.tick().await, start + Duration::from_millis(10));
/// # }
/// ```
#[track_caller]
pub fn interval_at(start: Instant, period: Duration) -> Interval {
    Handle::current().interval_at(start, period)
}

/// What an [`Interval`] does when ticks were missed (the task was busy, or
/// not polled, past the next tick).
///
/// The default is [`Burst`](MissedTickBehavior::Burst).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tiered_timer::{interval, MissedTickBehavior};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let mut interval = interval(Duration::from_millis(50));
/// interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MissedTickBehavior {
    /// Ticks as fast as possible until caught up, keeping the original
    /// schedule (`start + n * period`).
    #[default]
    Burst,
    /// Ticks once for the missed ticks, then every `period` from then on:
    /// the schedule shifts to when the late tick was yielded.
    Delay,
    /// Ticks once for the missed ticks, then resumes at the next multiple of
    /// `period` on the original schedule.
    Skip,
}

impl MissedTickBehavior {
    /// The deadline after a tick due at `timeout` was yielded late, at `now`
    /// (`None` if it overflows `Instant`: no further tick).
    fn next_timeout(self, timeout: Instant, now: Instant, period: Duration) -> Option<Instant> {
        match self {
            MissedTickBehavior::Burst => timeout.checked_add(period),
            MissedTickBehavior::Delay => now.checked_add(period),
            MissedTickBehavior::Skip => {
                let behind = (now - timeout).as_nanos() % period.as_nanos();
                // `behind < period`, which is a `Duration`, so this fits.
                now.checked_add(period - Duration::from_nanos(behind as u64))
            }
        }
    }
}

/// Yields at a fixed period; returned by [`interval`] and [`interval_at`].
///
/// Each [`tick`](Interval::tick) returns the instant the tick was scheduled
/// for (not the instant it was yielded). An `Interval` is [`Unpin`].
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tiered_timer::interval;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let mut ticks = interval(Duration::from_secs(1));
/// for _ in 0..3 {
///     let at = ticks.tick().await;
///     println!("tick scheduled for {at:?}");
/// }
/// # }
/// ```
#[derive(Debug)]
pub struct Interval {
    delay: Sleep,
    period: Duration,
    missed_tick_behavior: MissedTickBehavior,
}

impl Interval {
    pub(crate) fn new(delay: Sleep, period: Duration) -> Interval {
        Interval {
            delay,
            period,
            missed_tick_behavior: MissedTickBehavior::default(),
        }
    }

    /// Completes when the next tick is due, returning the instant it was
    /// scheduled for.
    ///
    /// Cancel safe: dropping the future before it completes loses no tick.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::{interval, Instant};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let start = Instant::now();
    /// let mut interval = interval(Duration::from_millis(10));
    /// assert_eq!(interval.tick().await, start);
    /// assert_eq!(interval.tick().await, start + Duration::from_millis(10));
    /// # }
    /// ```
    pub async fn tick(&mut self) -> Instant {
        poll_fn(|cx| self.poll_tick(cx)).await
    }

    /// Polls for the next tick, returning the instant it was scheduled for.
    ///
    /// When this returns `Poll::Pending`, the waker of `cx` is woken when
    /// the tick is due. Only the waker of the latest call is woken.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::future::poll_fn;
    /// use std::time::Duration;
    /// use tiered_timer::interval;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut interval = interval(Duration::from_millis(10));
    /// let first = poll_fn(|cx| interval.poll_tick(cx)).await;
    /// # let _ = first;
    /// # }
    /// ```
    pub fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
        ready!(Pin::new(&mut self.delay).poll(cx));
        let timeout = self.delay.deadline();
        let now = self.delay_handle_now();
        let late = now.checked_duration_since(timeout);
        let next = if late.is_some_and(|late| late > MISSED_AFTER) {
            self.missed_tick_behavior
                .next_timeout(timeout, now, self.period)
        } else {
            timeout.checked_add(self.period)
        };
        self.reset_at_or_far(next);
        Poll::Ready(timeout)
    }

    /// Resets the interval so the next tick completes one `period` from now.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::interval;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut interval = interval(Duration::from_millis(100));
    /// interval.tick().await;
    /// interval.reset(); // next tick in 100 ms from now
    /// interval.tick().await;
    /// # }
    /// ```
    pub fn reset(&mut self) {
        self.reset_after(self.period);
    }

    /// Resets the interval so the next tick completes immediately.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::interval;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut interval = interval(Duration::from_secs(100));
    /// interval.tick().await;
    /// interval.reset_immediately();
    /// interval.tick().await; // no wait
    /// # }
    /// ```
    pub fn reset_immediately(&mut self) {
        let now = self.delay_handle_now();
        Pin::new(&mut self.delay).reset(now);
    }

    /// Resets the interval so the next tick completes after `after`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::interval;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut interval = interval(Duration::from_millis(100));
    /// interval.tick().await;
    /// interval.reset_after(Duration::from_millis(30));
    /// interval.tick().await; // 30 ms later
    /// # }
    /// ```
    pub fn reset_after(&mut self, after: Duration) {
        let now = self.delay_handle_now();
        self.reset_at_or_far(now.checked_add(after));
    }

    /// Resets the interval so the next tick completes at `deadline`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::{interval, Instant};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut interval = interval(Duration::from_millis(100));
    /// let at = Instant::now() + Duration::from_millis(7);
    /// interval.reset_at(at);
    /// assert_eq!(interval.tick().await, at);
    /// # }
    /// ```
    pub fn reset_at(&mut self, deadline: Instant) {
        Pin::new(&mut self.delay).reset(deadline);
    }

    /// Returns the period of the interval.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let interval = tiered_timer::interval(std::time::Duration::from_secs(2));
    /// assert_eq!(interval.period(), std::time::Duration::from_secs(2));
    /// # }
    /// ```
    pub fn period(&self) -> Duration {
        self.period
    }

    /// Returns the current [`MissedTickBehavior`].
    ///
    /// # Examples
    ///
    /// ```
    /// use tiered_timer::MissedTickBehavior;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let interval = tiered_timer::interval(std::time::Duration::from_secs(1));
    /// assert_eq!(interval.missed_tick_behavior(), MissedTickBehavior::Burst);
    /// # }
    /// ```
    pub fn missed_tick_behavior(&self) -> MissedTickBehavior {
        self.missed_tick_behavior
    }

    /// Sets the [`MissedTickBehavior`].
    ///
    /// # Examples
    ///
    /// ```
    /// use tiered_timer::MissedTickBehavior;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mut interval = tiered_timer::interval(std::time::Duration::from_secs(1));
    /// interval.set_missed_tick_behavior(MissedTickBehavior::Skip);
    /// assert_eq!(interval.missed_tick_behavior(), MissedTickBehavior::Skip);
    /// # }
    /// ```
    pub fn set_missed_tick_behavior(&mut self, behavior: MissedTickBehavior) {
        self.missed_tick_behavior = behavior;
    }

    fn delay_handle_now(&self) -> Instant {
        self.delay.handle().now()
    }

    /// Resets to `deadline`, or to the far future if it overflowed `Instant`
    /// (as tokio does).
    fn reset_at_or_far(&mut self, deadline: Option<Instant>) {
        let deadline = deadline.unwrap_or_else(|| far_future(self.delay_handle_now()));
        Pin::new(&mut self.delay).reset(deadline);
    }
}

/// An `Interval` is a stream of its ticks, each the instant it was
/// scheduled for; it never ends. (tokio's needs `tokio-stream`'s
/// `IntervalStream` wrapper for this.)
///
/// # Examples
///
/// ```
/// use std::future::poll_fn;
/// use std::pin::Pin;
/// use std::time::Duration;
/// use futures_core::Stream;
/// use tiered_timer::{interval, Instant};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let start = Instant::now();
/// let mut ticks = interval(Duration::from_millis(10));
/// let first = poll_fn(|cx| Pin::new(&mut ticks).poll_next(cx)).await;
/// assert_eq!(first, Some(start));
/// let second = poll_fn(|cx| Pin::new(&mut ticks).poll_next(cx)).await;
/// assert_eq!(second, Some(start + Duration::from_millis(10)));
/// # }
/// ```
impl futures_core::Stream for Interval {
    type Item = Instant;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Instant>> {
        self.get_mut().poll_tick(cx).map(Some)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (usize::MAX, None)
    }
}
