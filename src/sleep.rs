//! [`Sleep`], the future behind `sleep`, `sleep_until`, timeouts and
//! intervals.

use std::fmt;
use std::future::Future;
use std::num::NonZeroUsize;
use std::pin::Pin;
use std::task::{ready, Context, Poll, Waker};
use std::time::Duration;

use crate::driver::deadlines::Status;
use crate::driver::EntryKey;
use crate::driver::Filing;
use crate::timer::registry;
use crate::{Handle, Instant};

/// Waits until `duration` has elapsed.
///
/// Equivalent to `sleep_until(Instant::now() + duration)`: the sleep
/// completes at the first tick of the timer (250 µs for the default timer) at
/// or after that deadline, never before it. No work is done while waiting.
/// A `duration` too large for an `Instant` (such as [`Duration::MAX`]) is
/// clamped, as tokio clamps it, to about 30 years from now: the
/// [`deadline`](Sleep::deadline) the sleep reports, and the one a paused
/// clock's auto-advance reaches.
///
/// Uses the current runtime's default timer. The future is [`Unpin`], so it
/// can be used in `select!` loops without pinning.
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
/// use tiered_timer::sleep;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// sleep(Duration::from_millis(100)).await;
/// println!("100 ms have elapsed");
/// # }
/// ```
#[track_caller]
pub fn sleep(duration: Duration) -> Sleep {
    Handle::current().into_sleep(duration)
}

/// Waits until `deadline` is reached.
///
/// Completes at the first tick of the timer at or after `deadline`, never
/// before it; a deadline already passed completes on the first poll (or, if
/// the timer's driver is just then due to run for an earlier deadline, on
/// that run). Uses the current runtime's default timer.
///
/// A deadline past the timer's last tick (with the default timer, about 146
/// million years away) is clamped to about 30 years from now, as for
/// `sleep(Duration::MAX)`; [`Sleep::deadline`] reports the clamped one.
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
/// use tiered_timer::{sleep_until, Instant};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let deadline = Instant::now() + Duration::from_millis(100);
/// sleep_until(deadline).await;
/// assert!(Instant::now() >= deadline);
/// # }
/// ```
#[track_caller]
pub fn sleep_until(deadline: Instant) -> Sleep {
    Handle::current().into_sleep_until(deadline)
}

/// A future that completes at a deadline; returned by [`sleep`] and
/// [`sleep_until`].
///
/// It registers with its timer on the first poll (dropping one that was
/// never polled touches nothing shared), and dropping it cancels it in O(1).
/// Resetting it to a later deadline takes no lock; resetting it earlier, or
/// after it completed, files it again.
///
/// Unlike tokio's `Sleep` it is [`Unpin`]: its timer entry lives in the
/// timer's slab, not in the future.
///
/// # Panics
///
/// Polling panics if the timer has shut down before the deadline
/// ([`Timer::shutdown`](crate::Timer::shutdown), or the runtime running its
/// driver shut down and the sleep is polled outside that runtime): the
/// sleep could otherwise never complete.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tiered_timer::{sleep, Instant};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let mut sleep = sleep(Duration::from_millis(10));
/// tokio::select! {
///     _ = &mut sleep => println!("timed out"),
///     _ = std::future::ready(()) => println!("ready first"),
/// }
/// // Unpin: extend it in place, no `Box::pin` needed.
/// std::pin::Pin::new(&mut sleep).reset(Instant::now() + Duration::from_millis(20));
/// sleep.await;
/// # }
/// ```
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct Sleep {
    /// The sleep's timer: always `Some` until the sleep is dropped, when
    /// the count it holds goes back to the thread's cache (see
    /// [`registry::recycle`]).
    handle: Option<Handle>,
    deadline: Instant,
    /// Which waker the entry holds, kept to skip the lock when re-polled
    /// by the same task: its identity, not a clone (a clone would cost an
    /// atomic increment and decrement of the task's count per sleep).
    waker: Option<WakerId>,
    /// The timer entry's key, once registered, and whether the sleep has
    /// been seen complete (it stays so until reset).
    state: SleepState,
}

/// What `Waker::will_wake` compares: the waker's data pointer and its
/// vtable's address. Compared with a poll's waker only after the entry's
/// word said it has neither fired nor shut down, so while the entry still
/// held a clone of the waker identified (an entry keeps its waker until
/// its sleep replaces it or is dropped, or the timer shuts down): no other
/// live waker can share those addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct WakerId {
    data: usize,
    /// Never zero (it is a reference): an `Option<WakerId>` is no bigger.
    vtable: NonZeroUsize,
}

impl WakerId {
    #[inline]
    fn of(waker: &Waker) -> WakerId {
        let vtable = std::ptr::from_ref(waker.vtable()) as usize;
        WakerId {
            data: waker.data() as usize,
            vtable: NonZeroUsize::new(vtable).expect("a reference is not null"),
        }
    }
}

/// A sleep's entry key and its "seen complete" flag in one word: a
/// million pending sleeps are a million of these. (The deadline's tick is
/// not kept: it is worked out when the sleep registers.)
#[derive(Debug, Clone, Copy)]
struct SleepState(u64);

impl SleepState {
    /// The top bit; the bits below it hold the entry key plus one.
    const ELAPSED: u64 = 1 << 63;

    #[inline]
    fn entry(self) -> Option<EntryKey> {
        match self.0 & !SleepState::ELAPSED {
            0 => None,
            key => Some((key - 1) as EntryKey),
        }
    }

    #[inline]
    fn set_entry(&mut self, key: EntryKey) {
        let key = key as u64 + 1;
        debug_assert!(key & SleepState::ELAPSED == 0);
        self.0 = (self.0 & SleepState::ELAPSED) | key;
    }

    #[inline]
    fn elapsed(self) -> bool {
        self.0 & SleepState::ELAPSED != 0
    }

    #[inline]
    fn set_elapsed(&mut self, elapsed: bool) {
        if elapsed {
            self.0 |= SleepState::ELAPSED;
        } else {
            self.0 &= !SleepState::ELAPSED;
        }
    }
}

impl Sleep {
    /// A sleep until `deadline`, which the timer serves (see
    /// [`Ticks::clamp`](crate::ticks::Ticks::clamp)).
    pub(crate) fn new(handle: Handle, deadline: Instant) -> Sleep {
        debug_assert!(deadline <= handle.shared.ticks().last());
        Sleep {
            handle: Some(handle),
            deadline,
            waker: None,
            state: SleepState(0),
        }
    }

    /// The sleep's timer.
    #[inline]
    pub(crate) fn handle(&self) -> &Handle {
        expect_handle(&self.handle)
    }

    /// Returns the instant at which the sleep completes (rounded up to the
    /// timer's tick when it fires).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::{sleep_until, Instant};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let deadline = Instant::now() + Duration::from_secs(1);
    /// assert_eq!(sleep_until(deadline).deadline(), deadline);
    /// # }
    /// ```
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Returns `true` if the sleep has completed: it has fired, or a poll
    /// found its deadline passed. A sleep that was never polled reports
    /// `false`, as tokio's does.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::sleep;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut sleep = sleep(Duration::from_millis(5));
    /// assert!(!sleep.is_elapsed());
    /// (&mut sleep).await;
    /// assert!(sleep.is_elapsed());
    /// # }
    /// ```
    pub fn is_elapsed(&self) -> bool {
        self.state.elapsed()
            || self
                .state
                .entry()
                .is_some_and(|key| self.handle().shared.is_done(key))
    }

    /// Resets the sleep to a new deadline, whether or not it has completed.
    ///
    /// A later deadline is recorded with a plain store, no lock and no
    /// read-modify-write operation; the timer moves the entry when its old
    /// bucket comes due. An earlier one
    /// moves it at once. A deadline already passed makes the next poll
    /// complete. The waker last registered stays registered. A deadline
    /// past the timer's last tick is clamped as in
    /// [`sleep_until`](crate::sleep_until).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::{sleep, Instant};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut sleep = Box::pin(sleep(Duration::from_millis(10)));
    /// let later = Instant::now() + Duration::from_millis(50);
    /// sleep.as_mut().reset(later);
    /// sleep.await;
    /// assert!(Instant::now() >= later);
    /// # }
    /// ```
    #[inline]
    pub fn reset(self: Pin<&mut Self>, deadline: Instant) {
        let this = self.get_mut();
        let shared = &expect_handle(&this.handle).shared;
        let ticks = shared.ticks();
        let deadline = if deadline <= ticks.last() {
            deadline
        } else {
            ticks.clamp(Some(deadline), || shared.now())
        };
        let tick = ticks.deadline_tick(deadline);
        this.deadline = deadline;
        this.state.set_elapsed(false);
        match this.state.entry() {
            // Not registered yet: the first poll files it.
            None => {}
            // The common case, a later deadline while filed: two loads
            // and a store, no lock.
            Some(key) if shared.try_extend(key, tick) => {}
            Some(key) => this.refile(key, tick),
        }
    }

    /// The locked path of [`reset`](Sleep::reset): to an earlier deadline,
    /// or after the entry fired (or the timer shut down).
    #[inline(never)]
    fn refile(&mut self, key: EntryKey, tick: u64) {
        let shared = &self.handle().shared;
        match shared.refile(key, tick, shared.now_tick()) {
            Filing::Filed { .. } => {}
            Filing::Elapsed => self.state.set_elapsed(true),
            // Like tokio, only polling fails: the entry is marked so the
            // next poll reports the shutdown.
            Filing::Shutdown => {}
        }
    }

    /// Polls without spending tokio's cooperative budget.
    #[inline]
    pub(crate) fn poll_elapsed(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.state.elapsed() {
            return Poll::Ready(());
        }
        // The common re-poll: filed, by the task that registered it. (The
        // waker's identity is compared first, as it is at hand; both must
        // hold, see `WakerId`.)
        if let Some(key) = self.state.entry() {
            if self.waker == Some(WakerId::of(cx.waker()))
                && self.handle().shared.status_of(key) == Status::Filed
            {
                return Poll::Pending;
            }
        }
        self.poll_registering(cx)
    }

    /// The rest of [`poll_elapsed`](Sleep::poll_elapsed): registering, a
    /// new waker, a fired entry, a shut-down timer.
    #[inline(never)]
    fn poll_registering(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let shared = &self.handle().shared;
        let filing = match self.state.entry() {
            None => shared.register(shared.ticks().deadline_tick(self.deadline), cx.waker()),
            Some(key) => match shared.status_of(key) {
                Status::Filed if self.waker == Some(WakerId::of(cx.waker())) => {
                    return Poll::Pending;
                }
                Status::Filed => shared.update_waker(key, cx.waker()),
                Status::Shutdown => Filing::Shutdown,
                // Fired: done, unless for a deadline since moved later (see
                // `driver::deadlines`), which `update_waker` files again.
                Status::Fired if shared.is_done(key) => Filing::Elapsed,
                Status::Fired => shared.update_waker(key, cx.waker()),
            },
        };
        match filing {
            Filing::Filed { key } => {
                self.state.set_entry(key);
                self.waker = Some(WakerId::of(cx.waker()));
                Poll::Pending
            }
            Filing::Elapsed => {
                self.state.set_elapsed(true);
                Poll::Ready(())
            }
            // The runtime is dropping this sleep's task: stay pending.
            Filing::Shutdown if self.handle().shared.shut_down_by_this_runtime() => Poll::Pending,
            Filing::Shutdown => shutdown_panic(),
        }
    }
}

/// A sleep's timer, from its field (borrowing only the field).
#[inline]
fn expect_handle(handle: &Option<Handle>) -> &Handle {
    handle
        .as_ref()
        .expect("a sleep's handle is only taken when it is dropped")
}

#[cold]
#[track_caller]
fn shutdown_panic() -> ! {
    panic!(
        "tiered-timer: this sleep's timer has shut down (`Timer::shutdown` was called, or the \
         runtime running its driver shut down), so it can never complete"
    )
}

impl Future for Sleep {
    type Output = ();

    #[inline]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // Take part in tokio's cooperative scheduling, as tokio's own timer
        // does, so a busy `select!` loop cannot starve its neighbours: a
        // sleep that is ready completes only if the task has budget left.
        // A sleep that is not ready returns `Pending` either way, its
        // waker registered, so it asks for the budget only when ready (tokio
        // asks first, and when the budget is spent also wakes the task at
        // once: a wake-up that changes nothing, skipped here).
        ready!(self.poll_elapsed(cx));
        let coop = ready!(crate::rt::poll_proceed(cx));
        coop.made_progress();
        Poll::Ready(())
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        let Some(handle) = self.handle.take() else {
            return;
        };
        if let Some(key) = self.state.entry() {
            handle.shared.deregister(key);
        }
        registry::recycle(handle);
    }
}

impl fmt::Debug for Sleep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sleep")
            .field("deadline", &self.deadline)
            .field("registered", &self.state.entry().is_some())
            .field("is_elapsed", &self.is_elapsed())
            .finish()
    }
}
