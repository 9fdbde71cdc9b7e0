//! [`HyperTimer`]: hyper's [`Timer`](hyper::rt::Timer) on this crate's
//! timer (feature `hyper`).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::{Handle, Instant, Sleep};

/// Runs hyper's timers on this crate's timer: an implementation of
/// [`hyper::rt::Timer`] (feature `hyper`).
///
/// hyper needs a timer for HTTP/1 `header_read_timeout` (which also bounds
/// the idle time between requests on a kept-alive connection), HTTP/2
/// keep-alive pings and hyper-util's pool reaping. Give it this one with
/// the builders' `timer` method.
///
/// * [`HyperTimer::new`] uses the current runtime's default timer;
///   `HyperTimer::from(handle)` a timer of your own.
/// * [`reset`](hyper::rt::Timer::reset) moves hyper's existing sleep in
///   place (a reset to a later deadline takes no lock), instead of
///   allocating a new one as hyper's default does.
/// * [`now`](hyper::rt::Timer::now) reads the timer's clock, so hyper's
///   timeouts follow tokio's paused time in tests (and a
///   [`ManualClock`](crate::clock::ManualClock), for a timer built on one).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tiered_timer::HyperTimer;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let mut http = hyper::server::conn::http1::Builder::new();
/// http.timer(HyperTimer::new())
///     .header_read_timeout(Duration::from_secs(10));
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct HyperTimer {
    handle: Handle,
}

impl HyperTimer {
    /// Returns a hyper timer on the current runtime's default timer.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime, or on one built without its time driver
    /// (`enable_time`). The panic reports the caller's location.
    ///
    /// # Examples
    ///
    /// ```
    /// use hyper::rt::Timer;
    /// use tiered_timer::HyperTimer;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let timer = HyperTimer::new();
    /// timer.sleep(std::time::Duration::from_millis(10)).await;
    /// # }
    /// ```
    #[track_caller]
    #[allow(clippy::new_without_default)] // needs a runtime: not a plain value
    pub fn new() -> HyperTimer {
        HyperTimer::from(Handle::current())
    }

    /// Returns the handle of the timer it runs on.
    ///
    /// # Examples
    ///
    /// ```
    /// use tiered_timer::{HyperTimer, Timer};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let timer = Timer::new();
    /// let hyper_timer = HyperTimer::from(timer.handle());
    /// assert_eq!(hyper_timer.handle().pending(), 0);
    /// # }
    /// ```
    pub fn handle(&self) -> &Handle {
        &self.handle
    }
}

impl From<Handle> for HyperTimer {
    /// Returns a hyper timer on the timer of `handle`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::{HyperTimer, Timer};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let timer = Timer::builder().tick(Duration::from_millis(10)).build();
    /// let mut http = hyper::server::conn::http1::Builder::new();
    /// http.timer(HyperTimer::from(timer.handle()));
    /// # }
    /// ```
    fn from(handle: Handle) -> HyperTimer {
        HyperTimer { handle }
    }
}

/// The sleep handed to hyper: ours, boxed, recognisable by `reset` through
/// [`hyper::rt::Sleep`]'s downcast.
#[derive(Debug)]
struct HyperSleep(Sleep);

impl Future for HyperSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.get_mut().0).poll(cx)
    }
}

impl hyper::rt::Sleep for HyperSleep {}

impl hyper::rt::Timer for HyperTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(HyperSleep(self.handle.sleep(duration)))
    }

    fn sleep_until(&self, deadline: std::time::Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        let deadline = Instant::from_std(deadline);
        Box::pin(HyperSleep(self.handle.sleep_until(deadline)))
    }

    fn now(&self) -> std::time::Instant {
        self.handle.now().into_std()
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn hyper::rt::Sleep>>, new_deadline: std::time::Instant) {
        match sleep.as_mut().downcast_mut_pin::<HyperSleep>() {
            Some(ours) => {
                let deadline = Instant::from_std(new_deadline);
                Pin::new(&mut ours.get_mut().0).reset(deadline);
            }
            // Not one of ours (another timer made it): replace it.
            None => *sleep = self.sleep_until(new_deadline),
        }
    }
}
