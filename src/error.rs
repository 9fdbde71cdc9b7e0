//! Error types.

use std::fmt;
use std::time::Duration;

/// Returned by a [`Timeout`](crate::Timeout) whose deadline passed before
/// its future completed.
///
/// Converts into [`std::io::Error`] with kind
/// [`TimedOut`](std::io::ErrorKind::TimedOut), as tokio's does.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tiered_timer::{error::Elapsed, timeout};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let result = timeout(Duration::from_millis(10), std::future::pending::<()>()).await;
/// let elapsed: Elapsed = result.unwrap_err();
/// assert_eq!(elapsed.to_string(), "deadline has elapsed");
/// let io: std::io::Error = elapsed.into();
/// assert_eq!(io.kind(), std::io::ErrorKind::TimedOut);
/// # }
/// ```
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub struct Elapsed(());

impl Elapsed {
    pub(crate) fn new() -> Elapsed {
        Elapsed(())
    }
}

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("deadline has elapsed")
    }
}

impl std::error::Error for Elapsed {}

impl From<Elapsed> for std::io::Error {
    fn from(elapsed: Elapsed) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::TimedOut, elapsed)
    }
}

/// Why a timer refused to schedule a callback.
///
/// Returned by [`Handle::schedule`](crate::Handle::schedule) and
/// [`Handle::schedule_at`](crate::Handle::schedule_at).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tiered_timer::{Error, Timer};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let timer = Timer::builder().max_pending(1).build();
/// let handle = timer.handle();
/// handle.schedule(Duration::from_secs(1), || {}).unwrap();
/// let err = handle.schedule(Duration::from_secs(1), || {}).unwrap_err();
/// assert_eq!(err, Error::AtCapacity);
/// println!("{err}");
///
/// timer.shutdown();
/// assert_eq!(handle.schedule(Duration::from_secs(1), || {}).unwrap_err(), Error::Shutdown);
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Error {
    /// The timer already holds as many pending timers as its
    /// [`max_pending`](crate::Builder::max_pending) allows. Room comes back
    /// as soon as one is cancelled or runs.
    AtCapacity,
    /// The timer has shut down: its [`Timer`](crate::Timer) was
    /// [shut down](crate::Timer::shutdown), or the runtime that ran its
    /// driver task shut down.
    Shutdown,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Error::AtCapacity => {
                "the timer is at capacity: it already holds `max_pending` pending timers"
            }
            Error::Shutdown => "the timer has shut down, so it cannot schedule anything",
        })
    }
}

impl std::error::Error for Error {}

/// Why [`Builder::try_build`](crate::Builder::try_build) could not build a
/// timer: a setting out of range, or no runtime to run its driver on.
///
/// [`Builder::build`](crate::Builder::build) panics with the same message.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tiered_timer::{error::BuildError, Timer};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let error = Timer::builder().tick(Duration::ZERO).try_build().unwrap_err();
/// assert_eq!(error, BuildError::Tick(Duration::ZERO));
/// assert_eq!(error.to_string(), "tick must be at least 1 µs, got 0ns");
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BuildError {
    /// [`tick`](crate::Builder::tick) is under 1 µs or over `u64::MAX`
    /// nanoseconds (about 584 years): the wheel counts ticks in a `u64`
    /// of nanoseconds.
    Tick(Duration),
    /// [`wheel_size`](crate::Builder::wheel_size) is outside 2..=2^20:
    /// each wheel allocates this many slots.
    WheelSize(usize),
    /// Not called from the context of a tokio runtime, which runs the
    /// timer's driver task.
    NoRuntime,
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::Tick(tick) if *tick < Duration::from_micros(1) => {
                write!(f, "tick must be at least 1 µs, got {tick:?}")
            }
            BuildError::Tick(tick) => write!(
                f,
                "tick must be at most u64::MAX nanoseconds (about 584 years), got {tick:?}"
            ),
            BuildError::WheelSize(size) => write!(
                f,
                "wheel_size must be between 2 and {}, got {size}",
                crate::wheel::MAX_WHEEL_SIZE
            ),
            BuildError::NoRuntime => f.write_str(
                "`Builder::build` must be called from the context of a Tokio 1.x runtime, which \
                 runs the timer's driver task",
            ),
        }
    }
}

impl std::error::Error for BuildError {}
