//! Time sources a timer can run on: tokio's clock, or one moved by hand.
//!
//! A timer reads its [`Clock`] for the current time and asks it for a future
//! that completes at a deadline; that future is the only thing its driver
//! task ever waits on. [`TokioClock`] is the default and follows tokio's
//! paused time (`tokio::time::pause`, `advance`, `start_paused`).
//! [`ManualClock`] stands still until it is moved with
//! [`advance`](ManualClock::advance) or [`set`](ManualClock::set), for
//! deterministic simulations and for tests that do not use tokio's
//! `test-util`.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::sync::{lock, Arc, Mutex};
use crate::Instant;

/// A future that completes when a [`Clock`] reaches a deadline.
pub type ClockSleep = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A source of time for a [`Timer`](crate::Timer).
///
/// A timer calls [`now`](Clock::now) whenever it needs the time (creating a
/// sleep, checking whether a deadline has passed, flushing due entries), and
/// [`sleep_until`](Clock::sleep_until) each time the earliest due bucket
/// changes, to wait for it. Select one with
/// [`Builder::clock`](crate::Builder::clock).
///
/// # Contract
///
/// * `now` never goes backwards.
/// * The future from `sleep_until(deadline)` completes once `now() >=
///   deadline`, and wakes the waker it was last polled with when that
///   happens. It may complete later (that makes timers late), never sooner
///   (that would make them early).
///
/// # Examples
///
/// A clock that runs on tokio's time but reports it shifted, e.g. to test
/// deadlines far from the process start:
///
/// ```
/// use std::time::Duration;
/// use tiered_timer::clock::{Clock, ClockSleep};
/// use tiered_timer::{Instant, Timer};
///
/// #[derive(Debug)]
/// struct Shifted(Duration);
///
/// impl Clock for Shifted {
///     fn now(&self) -> Instant {
///         Instant::now() + self.0
///     }
///
///     fn sleep_until(&self, deadline: Instant) -> ClockSleep {
///         Box::pin(tokio::time::sleep_until(deadline - self.0))
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let timer = Timer::builder().clock(Shifted(Duration::from_secs(3600))).build();
/// let handle = timer.handle();
/// let start = handle.now();
/// handle.sleep(Duration::from_millis(10)).await;
/// assert!(handle.now() >= start + Duration::from_millis(10));
/// # }
/// ```
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// Returns the current time.
    ///
    /// The timer never calls it while holding one of its shards' locks, so
    /// it may call back into its timer (`Handle::pending`, say). It is
    /// called from whichever thread registers, resets or flushes.
    fn now(&self) -> Instant;

    /// Returns a future that completes once [`now`](Clock::now) has reached
    /// `deadline`.
    ///
    /// A panic here (tokio's clock on a runtime built without its time
    /// driver, for instance) reports the location of the call that built
    /// the timer (`Timer::new`, or the first `sleep` on a runtime), since
    /// the method is `#[track_caller]`.
    #[track_caller]
    fn sleep_until(&self, deadline: Instant) -> ClockSleep;
}

/// tokio's clock: [`Instant::now`] and [`tokio::time::sleep_until`].
///
/// The default clock. It follows tokio's paused time, so tests written with
/// `#[tokio::test(start_paused = true)]` and `tokio::time::advance` drive the
/// timer exactly as they drive tokio's own.
///
/// # Examples
///
/// ```
/// use tiered_timer::{clock::TokioClock, Timer};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let timer = Timer::builder().clock(TokioClock).build();
/// # drop(timer);
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioClock;

impl Clock for TokioClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    #[track_caller]
    fn sleep_until(&self, deadline: Instant) -> ClockSleep {
        crate::rt::sleep_until(deadline)
    }
}

/// A clock that moves only when told to.
///
/// Cloning gives another handle to the same clock: keep one, give one to
/// [`Builder::clock`](crate::Builder::clock), and move time with
/// [`advance`](ManualClock::advance) or [`set`](ManualClock::set).
///
/// Moving the clock fires everything that became due, in deadline order,
/// before control returns to the caller's next await that yields to the
/// runtime (one that is pending, or `tokio::task::yield_now()`):
///
/// * A timer whose driver task is waiting on the clock is woken by the
///   move itself, on the calling thread: by the time `advance` returns,
///   its due sleeps have been woken (the first 1 024 of them; the driver
///   task wakes any more in batches, and at each batch sleeps that came
///   due meanwhile go ahead of the rest, so deadline order holds for
///   sleeps within a batch; callbacks keep it throughout).
/// * A timer whose driver has not run since a sleep was registered (the
///   caller has not yielded since) fires it when the driver next runs,
///   which is before the caller's next yielding await resumes.
/// * Scheduled callbacks always run on the driver task, so they run when
///   the caller next yields.
///
/// A due sleep never waits for the driver anyway: polling it checks the
/// clock.
///
/// # Examples
///
/// ```
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
/// use std::time::Duration;
/// use tiered_timer::{clock::ManualClock, Timer};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let clock = ManualClock::new();
/// let timer = Timer::builder().clock(clock.clone()).build();
/// let handle = timer.handle();
///
/// let ran = Arc::new(AtomicBool::new(false));
/// let flag = ran.clone();
/// handle
///     .schedule(Duration::from_secs(60), move || flag.store(true, Ordering::SeqCst))
///     .unwrap();
///
/// clock.advance(Duration::from_secs(59));
/// tokio::task::yield_now().await;
/// assert!(!ran.load(Ordering::SeqCst));
///
/// clock.advance(Duration::from_secs(1));
/// tokio::task::yield_now().await;
/// assert!(ran.load(Ordering::SeqCst));
/// # }
/// ```
#[derive(Clone)]
pub struct ManualClock {
    inner: Arc<Mutex<ManualState>>,
}

#[derive(Debug)]
struct ManualState {
    now: Instant,
    /// Sleeps waiting for the clock, by id.
    waiters: Vec<Waiter>,
    next_id: u64,
}

#[derive(Debug)]
struct Waiter {
    id: u64,
    deadline: Instant,
    waker: Waker,
}

impl ManualClock {
    /// Creates a clock that reads the current time once and then stands
    /// still.
    ///
    /// # Examples
    ///
    /// ```
    /// use tiered_timer::clock::{Clock, ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// let t = clock.now();
    /// std::thread::sleep(std::time::Duration::from_millis(2));
    /// assert_eq!(clock.now(), t);
    /// ```
    #[allow(clippy::new_without_default)] // `Default` is implemented too
    pub fn new() -> ManualClock {
        ManualClock::starting_at(Instant::now())
    }

    /// Creates a clock that stands at `start`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tiered_timer::clock::{Clock, ManualClock};
    /// use tiered_timer::Instant;
    ///
    /// let start = Instant::now();
    /// assert_eq!(ManualClock::starting_at(start).now(), start);
    /// ```
    pub fn starting_at(start: Instant) -> ManualClock {
        ManualClock {
            inner: Arc::new(Mutex::new(ManualState {
                now: start,
                waiters: Vec::new(),
                next_id: 0,
            })),
        }
    }

    /// Moves the clock forward by `by` and wakes the timers that became due.
    ///
    /// # Panics
    ///
    /// If the new time cannot be represented as an [`Instant`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::clock::{Clock, ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// let start = clock.now();
    /// clock.advance(Duration::from_millis(1500));
    /// assert_eq!(clock.now() - start, Duration::from_millis(1500));
    /// ```
    #[track_caller]
    pub fn advance(&self, by: Duration) {
        let mut state = lock(&self.inner);
        let Some(now) = state.now.checked_add(by) else {
            drop(state);
            panic!("tiered-timer: ManualClock::advance({by:?}) overflows `Instant`");
        };
        state.now = now;
        self.wake_due(state);
    }

    /// Moves the clock to `now` and wakes the timers that became due.
    ///
    /// # Panics
    ///
    /// If `now` is earlier than the clock's current time: a clock never
    /// goes backwards.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::clock::{Clock, ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// let later = clock.now() + Duration::from_secs(5);
    /// clock.set(later);
    /// assert_eq!(clock.now(), later);
    /// ```
    #[track_caller]
    pub fn set(&self, now: Instant) {
        let mut state = lock(&self.inner);
        if now < state.now {
            let current = state.now;
            drop(state);
            panic!(
                "tiered-timer: ManualClock::set would move the clock back by {:?}; \
                 a clock never goes backwards",
                current - now
            );
        }
        state.now = now;
        self.wake_due(state);
    }

    /// Wakes, after releasing the lock, every waiter whose deadline has come.
    fn wake_due(&self, mut state: crate::sync::MutexGuard<'_, ManualState>) {
        let now = state.now;
        let mut due = Vec::new();
        state.waiters.retain_mut(|waiter| {
            if waiter.deadline <= now {
                due.push((waiter.deadline, waiter.waker.clone()));
                false
            } else {
                true
            }
        });
        drop(state);
        // Earliest first, so timers sharing the clock fire in deadline order.
        due.sort_by_key(|(deadline, _)| *deadline);
        due.into_iter().for_each(|(_, waker)| waker.wake());
    }
}

impl Default for ManualClock {
    fn default() -> ManualClock {
        ManualClock::new()
    }
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = lock(&self.inner);
        f.debug_struct("ManualClock")
            .field("now", &state.now)
            .field("waiters", &state.waiters.len())
            .finish()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        lock(&self.inner).now
    }

    fn sleep_until(&self, deadline: Instant) -> ClockSleep {
        Box::pin(ManualSleep {
            clock: self.inner.clone(),
            deadline,
            id: None,
        })
    }
}

/// Waits for a [`ManualClock`] to reach a deadline.
struct ManualSleep {
    clock: Arc<Mutex<ManualState>>,
    deadline: Instant,
    /// Our entry in the clock's waiters, if registered.
    id: Option<u64>,
}

impl Future for ManualSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        let mut state = lock(&this.clock);
        if state.now >= this.deadline {
            if let Some(id) = this.id.take() {
                state.waiters.retain(|waiter| waiter.id != id);
            }
            return Poll::Ready(());
        }
        let waker = cx.waker().clone();
        let old = match this.id {
            Some(id) => match state.waiters.iter_mut().find(|waiter| waiter.id == id) {
                Some(waiter) => Some(std::mem::replace(&mut waiter.waker, waker)),
                None => {
                    // Woken and removed, but the clock was moved back? It
                    // never is; re-register all the same.
                    state.waiters.push(Waiter {
                        id,
                        deadline: this.deadline,
                        waker,
                    });
                    None
                }
            },
            None => {
                let id = state.next_id;
                state.next_id += 1;
                this.id = Some(id);
                state.waiters.push(Waiter {
                    id,
                    deadline: this.deadline,
                    waker,
                });
                None
            }
        };
        drop(state);
        drop(old);
        Poll::Pending
    }
}

impl Drop for ManualSleep {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            let mut state = lock(&self.clock);
            let pos = state.waiters.iter().position(|waiter| waiter.id == id);
            let removed = pos.map(|pos| state.waiters.swap_remove(pos));
            drop(state);
            drop(removed);
        }
    }
}
