//! Scheduled callbacks: [`Scheduled`] and [`Unfired`].

use std::fmt;

use crate::driver::jobs::{Job, Task, CANCELLED, EXPIRED};
use crate::driver::Shared;
use crate::sync::{Arc, Weak};
use crate::Instant;

/// A callback scheduled with [`Handle::schedule`](crate::Handle::schedule)
/// or [`Handle::schedule_at`](crate::Handle::schedule_at).
///
/// Dropping a `Scheduled` does **not** cancel the callback (as with Netty's
/// `Timeout`): keep it only if you may want to cancel it or ask about it.
///
/// A callback ends in exactly one of three ways: it runs (once), it is
/// cancelled ([`cancel`](Scheduled::cancel) returned `true`), or its timer
/// shuts down first (then [`Timer::shutdown`](crate::Timer::shutdown) hands
/// it back as an [`Unfired`]).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tiered_timer::Handle;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let handle = Handle::current();
/// let retry = handle
///     .schedule(Duration::from_secs(5), || println!("retrying"))
///     .unwrap();
/// // The reply came in time: no retry.
/// assert!(retry.cancel());
/// assert!(retry.is_cancelled());
/// # }
/// ```
#[derive(Clone)]
pub struct Scheduled {
    task: Arc<Task>,
    /// The timer to cancel it through. Held here, not in the task, which
    /// the timer itself holds: a callback's record need not know its timer.
    timer: Weak<Shared>,
}

impl Scheduled {
    pub(crate) fn new(task: Arc<Task>, timer: Weak<Shared>) -> Scheduled {
        Scheduled { task, timer }
    }

    /// Cancels the callback if it has not been found due yet.
    ///
    /// Returns `true` only if this call stopped it from running: it was
    /// pending and now never runs. Returns `false` if it has already run or
    /// is about to (found due), was already cancelled, or its timer shut
    /// down. Cancelling races with expiry to exactly one outcome: either
    /// this returns `true` and the callback never runs, or it returns
    /// `false` and the callback runs exactly once (unless the timer shuts
    /// down first).
    ///
    /// Safe to call from inside a callback, including the callback's own.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::Handle;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let scheduled = Handle::current().schedule(Duration::from_secs(1), || {}).unwrap();
    /// assert!(scheduled.cancel());
    /// assert!(!scheduled.cancel(), "only the first cancel stops it");
    /// # }
    /// ```
    pub fn cancel(&self) -> bool {
        match self.timer.upgrade() {
            Some(timer) => timer.cancel(&self.task),
            // The timer is gone, so it shut down first.
            None => false,
        }
    }

    /// Returns `true` if the callback was cancelled by [`cancel`](Scheduled::cancel).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::Handle;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let scheduled = Handle::current().schedule(Duration::from_secs(1), || {}).unwrap();
    /// assert!(!scheduled.is_cancelled());
    /// scheduled.cancel();
    /// assert!(scheduled.is_cancelled());
    /// # }
    /// ```
    pub fn is_cancelled(&self) -> bool {
        self.task.state() == CANCELLED
    }

    /// Returns `true` once the callback has been found due: it has run, is
    /// running, or is queued to run on the driver task. From then on
    /// [`cancel`](Scheduled::cancel) returns `false`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::Handle;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let scheduled = Handle::current().schedule(Duration::from_secs(1), || {}).unwrap();
    /// assert!(!scheduled.is_expired());
    /// tokio::time::sleep(Duration::from_secs(1)).await;
    /// assert!(scheduled.is_expired());
    /// assert!(!scheduled.cancel());
    /// # }
    /// ```
    pub fn is_expired(&self) -> bool {
        self.task.state() == EXPIRED
    }

    /// Returns the instant the callback was scheduled for. It runs at the
    /// first tick boundary at or after it, never before.
    ///
    /// For a delay too large to represent (such as `Duration::MAX`), or a
    /// deadline past the timer's last tick, this is the clamped deadline:
    /// about 30 years from when it was scheduled. The callback runs then
    /// (a paused clock's auto-advance reaches it), never before.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::{Handle, Instant};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let at = Instant::now() + Duration::from_secs(30);
    /// let scheduled = Handle::current().schedule_at(at, || {}).unwrap();
    /// assert_eq!(scheduled.deadline(), at);
    /// # }
    /// ```
    pub fn deadline(&self) -> Instant {
        self.task.deadline
    }
}

impl fmt::Debug for Scheduled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scheduled")
            .field("deadline", &self.task.deadline)
            .field("is_cancelled", &self.is_cancelled())
            .field("is_expired", &self.is_expired())
            .finish()
    }
}

/// A callback that never ran because its timer shut down, as returned by
/// [`Timer::shutdown`](crate::Timer::shutdown).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tiered_timer::Timer;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let timer = Timer::new();
/// timer.handle().schedule(Duration::from_secs(60), || println!("flushed")).unwrap();
/// for unfired in timer.shutdown() {
///     println!("never ran: due at {:?}", unfired.deadline());
///     unfired.run(); // or drop it
/// }
/// # }
/// ```
pub struct Unfired {
    job: Job,
}

impl Unfired {
    pub(crate) fn new(job: Job) -> Unfired {
        Unfired { job }
    }

    /// Returns the instant the callback was scheduled for.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::Timer;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let timer = Timer::new();
    /// let scheduled = timer.handle().schedule(Duration::from_secs(1), || {}).unwrap();
    /// let unfired = timer.shutdown();
    /// assert_eq!(unfired[0].deadline(), scheduled.deadline());
    /// # }
    /// ```
    pub fn deadline(&self) -> Instant {
        self.job.task.deadline
    }

    /// Runs the callback now, on the calling thread.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use tiered_timer::Timer;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let timer = Timer::new();
    /// let ran = Arc::new(AtomicBool::new(false));
    /// let flag = ran.clone();
    /// timer
    ///     .handle()
    ///     .schedule(Duration::from_secs(1), move || flag.store(true, Ordering::SeqCst))
    ///     .unwrap();
    /// timer.shutdown().into_iter().for_each(|unfired| unfired.run());
    /// assert!(ran.load(Ordering::SeqCst));
    /// # }
    /// ```
    pub fn run(self) {
        if let Some(run) = self.job.take() {
            run();
        }
    }
}

impl fmt::Debug for Unfired {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Unfired")
            .field("deadline", &self.job.task.deadline)
            .finish_non_exhaustive()
    }
}
