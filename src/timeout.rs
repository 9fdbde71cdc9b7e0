//! [`Timeout`]: a future with a deadline.

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;

use crate::error::Elapsed;
use crate::{Handle, Instant, Sleep};

/// Requires `future` to complete before `duration` has elapsed.
///
/// `future` is anything [`IntoFuture`], as with tokio.
///
/// If the future completes first, its output is returned in `Ok`; otherwise
/// the result is `Err(Elapsed)` and the future is dropped (cancelled). The
/// future is polled before the deadline is checked, so a future that is
/// ready when first polled always wins. A `duration` too large for an
/// `Instant` (such as [`Duration::MAX`]) is clamped to about 30 years from
/// now, as tokio does (see [`sleep`](crate::sleep)).
///
/// The timer entry is registered only if the future returns `Pending`, and
/// removed in O(1) when the `Timeout` is dropped, so a guard that is armed
/// and then cancelled is cheap. Uses the current runtime's default timer.
///
/// # Panics
///
/// Outside a tokio runtime, or on one built without its time driver
/// (`enable_time`). The panic reports the caller's location.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tiered_timer::timeout;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let (_tx, rx) = tokio::sync::oneshot::channel::<u32>();
/// if let Err(_) = timeout(Duration::from_millis(10), rx).await {
///     println!("did not receive value within 10 ms");
/// }
/// # }
/// ```
#[track_caller]
pub fn timeout<F: IntoFuture>(duration: Duration, future: F) -> Timeout<F::IntoFuture> {
    // The handle looked up goes into the sleep as it is (no second clone).
    let handle = Handle::current();
    Timeout::new(future.into_future(), handle.into_sleep(duration))
}

/// Requires `future` to complete before `deadline`.
///
/// As [`timeout`], with an absolute deadline.
///
/// # Panics
///
/// Outside a tokio runtime, or on one built without its time driver
/// (`enable_time`). The panic reports the caller's location.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tiered_timer::{timeout_at, Instant};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let deadline = Instant::now() + Duration::from_millis(10);
/// assert_eq!(timeout_at(deadline, async { "fast" }).await, Ok("fast"));
/// # }
/// ```
#[track_caller]
pub fn timeout_at<F: IntoFuture>(deadline: Instant, future: F) -> Timeout<F::IntoFuture> {
    let handle = Handle::current();
    Timeout::new(future.into_future(), handle.into_sleep_until(deadline))
}

pin_project! {
    /// A future with a deadline; returned by [`timeout`] and [`timeout_at`].
    ///
    /// `Timeout<F>` is [`Unpin`] whenever `F` is.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::timeout;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let guarded = timeout(Duration::from_secs(1), async { 1 + 1 });
    /// assert_eq!(guarded.await, Ok(2));
    /// # }
    /// ```
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    #[derive(Debug)]
    pub struct Timeout<F> {
        #[pin]
        value: F,
        delay: Sleep,
    }
}

impl<F> Timeout<F> {
    pub(crate) fn new(value: F, delay: Sleep) -> Timeout<F> {
        Timeout { value, delay }
    }

    /// Gets a reference to the underlying future.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let t = tiered_timer::timeout(std::time::Duration::from_secs(1), std::future::ready(3));
    /// let _inner: &std::future::Ready<i32> = t.get_ref();
    /// # }
    /// ```
    pub fn get_ref(&self) -> &F {
        &self.value
    }

    /// Gets a mutable reference to the underlying future.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mut t = tiered_timer::timeout(std::time::Duration::from_secs(1), std::future::ready(3));
    /// let _inner: &mut std::future::Ready<i32> = t.get_mut();
    /// # }
    /// ```
    pub fn get_mut(&mut self) -> &mut F {
        &mut self.value
    }

    /// Consumes the `Timeout`, returning the underlying future (and
    /// cancelling the deadline).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let t = tiered_timer::timeout(std::time::Duration::from_secs(1), std::future::ready(3));
    /// assert_eq!(t.into_inner().await, 3);
    /// # }
    /// ```
    pub fn into_inner(self) -> F {
        self.value
    }
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let me = self.project();
        let had_budget = crate::rt::has_budget_remaining();
        if let Poll::Ready(value) = me.value.poll(cx) {
            return Poll::Ready(Ok(value));
        }
        // If the inner future spent the last of the task's budget, check the
        // deadline anyway: a timeout must be able to fire around a busy
        // future (tokio makes the same exception).
        let poll = if had_budget && !crate::rt::has_budget_remaining() {
            me.delay.poll_elapsed(cx)
        } else {
            Pin::new(me.delay).poll(cx)
        };
        poll.map(|()| Err(Elapsed::new()))
    }
}
