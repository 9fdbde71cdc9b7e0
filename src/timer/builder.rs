//! [`Builder`]: a timer's configuration, checked when it is built.

use std::time::Duration;

use crate::clock::Clock;
use crate::driver::{Config, Lifetime};
use crate::error::BuildError;
use crate::sync::Arc;
use crate::wheel::MAX_WHEEL_SIZE;

use super::{Handle, Timer};

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
    pub(super) config: Config,
    pub(super) clock: Arc<dyn Clock>,
}

impl Builder {
    /// Sets the width of one slot of the finest wheel: timers fire at the
    /// first multiple of `tick` (since the timer was built) at or after their
    /// deadline. Default: 250 µs. Must be at least 1 µs and at most
    /// `u64::MAX` nanoseconds; checked by [`try_build`](Builder::try_build)
    /// and [`build`](Builder::build).
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
    /// and 2^20; checked by [`try_build`](Builder::try_build) and
    /// [`build`](Builder::build).
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
    /// [`Handle::schedule`] fails with [`Error::AtCapacity`](crate::Error::AtCapacity). Default:
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

    /// Sets the time source. Default:
    /// [`TokioClock`](crate::clock::TokioClock), which follows tokio's paused
    /// time.
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
    /// [`try_build`](Builder::try_build) returns the same problems as an
    /// error instead: use it where the settings come from outside (a
    /// configuration file); `build` is for settings written in the code,
    /// as tokio's builders' documented panics are.
    ///
    /// # Panics
    ///
    /// With the message of the [`BuildError`] that
    /// [`try_build`](Builder::try_build) would return: if the tick is
    /// under 1 µs or over `u64::MAX` nanoseconds, if the wheel size is
    /// outside 2..=2^20, or if called outside a tokio runtime. And, as
    /// `try_build`, on a runtime built without its time driver
    /// (`enable_time`) while the clock is tokio's. The panic reports the
    /// caller's location.
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
        match self.try_build() {
            Ok(timer) => timer,
            Err(error) => panic!("tiered-timer: {error}"),
        }
    }

    /// Builds the timer and spawns its driver task on the current runtime,
    /// or says which setting is out of range.
    ///
    /// # Errors
    ///
    /// [`BuildError::Tick`] if the tick is under 1 µs or over `u64::MAX`
    /// nanoseconds, [`BuildError::WheelSize`] if the wheel size is outside
    /// 2..=2^20, [`BuildError::NoRuntime`] if called outside a tokio
    /// runtime. Nothing is spawned then.
    ///
    /// # Panics
    ///
    /// On a runtime built without its time driver (`enable_time`) while
    /// the clock is tokio's: tokio offers no way to ask whether it has
    /// one, so its own panic stands, as its `sleep`'s does. The panic
    /// reports the caller's location.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::{BuildError, Timer};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let tick = Duration::ZERO; // read from a configuration file, say
    /// match Timer::builder().tick(tick).try_build() {
    ///     Ok(timer) => drop(timer),
    ///     Err(BuildError::Tick(tick)) => eprintln!("bad tick in the config: {tick:?}"),
    ///     Err(other) => eprintln!("cannot build the timer: {other}"),
    /// }
    /// assert_eq!(
    ///     Timer::builder().wheel_size(0).try_build().unwrap_err(),
    ///     BuildError::WheelSize(0)
    /// );
    /// # }
    /// ```
    #[track_caller]
    pub fn try_build(self) -> Result<Timer, BuildError> {
        self.check()?;
        let Some(runtime) = crate::rt::Runtime::try_current() else {
            return Err(BuildError::NoRuntime);
        };
        let config = Config {
            shards: runtime.workers(),
            ..self.config
        };
        let (shared, driver) =
            crate::driver::timer(config, self.clock, Some(runtime.clone()), Lifetime::Owners);
        runtime.spawn(driver);
        Ok(Timer {
            handle: Handle { shared },
        })
    }

    /// Checks the settings (see [`try_build`](Builder::try_build)).
    fn check(&self) -> Result<(), BuildError> {
        let Config {
            tick, wheel_size, ..
        } = self.config;
        if tick < Duration::from_micros(1) || tick.as_nanos() > u128::from(u64::MAX) {
            return Err(BuildError::Tick(tick));
        }
        if !(2..=MAX_WHEEL_SIZE).contains(&wheel_size) {
            return Err(BuildError::WheelSize(wheel_size));
        }
        Ok(())
    }
}
