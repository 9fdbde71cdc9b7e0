//! The driver task of a timer, the clock sleep it is armed with, and the
//! waker ([`DriverWake`]) that flushes where the clock fires that sleep.
//!
//! The driver task flushes what is due, runs the callbacks found due, then
//! arms its clock sleep for the next due bucket and waits. When the clock
//! fires the sleep, [`DriverWake`] flushes right there (sleeps only), so
//! that `tokio::time::advance` has woken every sleep due by the time it
//! returns, and re-arms; callbacks and big flushes are left to the task.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Wake, Waker};

use crate::rt::Runtime;
use crate::sync::{lock, Arc, Ordering, Weak};
use crate::ticks::earliest;

use super::flush::{Flushed, DRIVER_BATCH, INLINE_BATCH};
use super::shared::Shared;

/// What arming the driver's clock sleep found.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Armed {
    /// Waiting: the sleep will wake [`DriverWake`] when the next bucket is
    /// due, or nothing is due and a registration will wake the driver.
    Waiting,
    /// The next bucket is already due: flush again.
    Due,
    /// Someone else is arming it just now; they will see the same state.
    Busy,
}

impl Shared {
    /// Stores the driver task's waker. Returns `false` if the timer has shut
    /// down (the driver should then finish).
    fn set_driver_waker(&self, waker: &Waker) -> bool {
        let mut control = lock(&self.control);
        if control.shutdown {
            return false;
        }
        if !control.driver.as_ref().is_some_and(|w| w.will_wake(waker)) {
            let old = control.driver.replace(waker.clone());
            drop(control);
            drop(old);
        }
        true
    }

    /// Points the driver's clock sleep at the tick the driver is armed for
    /// (as the last flush or a registration left it), polled with `wake`.
    ///
    /// Called by the driver task and by the inline flush in [`DriverWake`].
    /// The latter re-arms right where tokio's time driver woke it, so the
    /// timer keeps time even when the driver task waits behind thousands of
    /// woken tasks in a worker's queue. It only tries the lock: whoever holds
    /// it reads `armed` after any flush that changed it (the lock order is
    /// arm, then state), or the driver task, which it then wakes, does.
    pub(super) fn arm(&self, wake: &Waker, wait_for_lock: bool) -> Armed {
        let mut arm = if wait_for_lock {
            lock(&self.arm)
        } else {
            match self.arm.try_lock() {
                Ok(arm) => arm,
                Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => return Armed::Busy,
            }
        };
        // Requests made before this point lowered their shard's `next`
        // first, so the scan below sees them; later ones are kept in
        // `requested`, and taken into account at the end.
        {
            let mut control = lock(&self.control);
            if control.shutdown {
                return Armed::Waiting;
            }
            control.requested = None;
        }
        let mut next = None;
        for shard in self.shards.iter() {
            next = earliest(next, shard.state.lock().next);
        }
        let next = {
            let mut control = lock(&self.control);
            if control.shutdown {
                return Armed::Waiting;
            }
            let next = earliest(next, control.requested.take());
            control.armed = next;
            self.armed_at
                .store(next.unwrap_or(u64::MAX), Ordering::Relaxed);
            next
        };
        let Some(at) = next.map(|tick| self.ticks.instant_of(tick)) else {
            // Nothing is due: a registration will wake the driver.
            let old = arm.sleep.take();
            arm.until = None;
            drop(arm);
            drop(old);
            return Armed::Waiting;
        };
        if arm.until != next || arm.sleep.is_none() {
            // tokio's sleep belongs to the runtime current when it is made.
            let _runtime = self.runtime.as_ref().map(Runtime::enter);
            arm.sleep = Some(self.clock.sleep_until(at));
            arm.until = next;
        }
        let sleep = arm.sleep.as_mut().expect("armed just above");
        if sleep
            .as_mut()
            .poll(&mut Context::from_waker(wake))
            .is_pending()
        {
            Armed::Waiting
        } else {
            Armed::Due
        }
    }

    /// Whether callbacks found due wait for the driver task to run them.
    fn has_ready(&self) -> bool {
        !self.shards[0].state.lock().ready.is_empty()
    }

    /// The turn taken where the clock woke [`DriverWake`]: flush what is
    /// due, then re-arm the clock for the next bucket. Callbacks, a flush
    /// too big for one batch, and a re-arm that someone else is doing are
    /// left to the driver task.
    fn turn_inline(&self, wake: &Waker) {
        // Bounded: under a clock that keeps moving, the driver task takes over.
        for _ in 0..4 {
            match self.flush(INLINE_BATCH) {
                Flushed::Shutdown => return,
                Flushed::More => break,
                Flushed::Done if self.has_ready() => break,
                Flushed::Done => {}
            }
            match self.arm(wake, false) {
                Armed::Waiting => return,
                Armed::Due => {}
                Armed::Busy => break,
            }
        }
        self.wake_driver();
    }
}

/// The waker the driver polls its clock sleep with: when tokio (or a manual
/// clock) fires the sleep, this flushes due entries at once and re-arms.
#[derive(Debug)]
pub(super) struct DriverWake {
    pub(super) shared: Weak<Shared>,
}

impl Wake for DriverWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if let Some(shared) = self.shared.upgrade() {
            shared.turn_inline(&Waker::from(self.clone()));
        }
    }
}

/// How long a timer lives: see [`Driver::new`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lifetime {
    /// Until its runtime drops the driver task.
    Runtime,
    /// Until its last owner is dropped (or its runtime drops the driver).
    Owners,
}

/// The driver's hold on its timer.
#[derive(Debug)]
pub(super) enum DriverRef {
    Strong(Arc<Shared>),
    Weak(Weak<Shared>),
}

impl DriverRef {
    fn get(&self) -> Option<Arc<Shared>> {
        match self {
            DriverRef::Strong(shared) => Some(shared.clone()),
            DriverRef::Weak(shared) => shared.upgrade(),
        }
    }
}

/// The driver task of one timer.
///
/// Dropping it (the runtime shutting down, for instance) shuts the timer
/// down. It ends when the timer shuts down, or when the last owner of a
/// [`Lifetime::Owners`] timer is dropped.
#[derive(Debug)]
pub(crate) struct Driver {
    pub(super) shared: DriverRef,
    /// A [`DriverWake`]: what the clock sleep is polled with.
    pub(super) wake: Waker,
}

impl Driver {
    /// The driver task of the timer whose state is `shared`, which the
    /// caller must spawn on a runtime.
    ///
    /// With [`Lifetime::Runtime`] the driver keeps the timer alive until the
    /// runtime drops it (a runtime's default timer); with
    /// [`Lifetime::Owners`] it holds it weakly, so the timer ends when its
    /// last owner (a `Timer`, `Handle` or future) is dropped.
    pub(crate) fn new(shared: &Arc<Shared>, lifetime: Lifetime) -> Driver {
        let wake = Waker::from(Arc::new(DriverWake {
            shared: Arc::downgrade(shared),
        }));
        Driver {
            shared: match lifetime {
                Lifetime::Runtime => DriverRef::Strong(shared.clone()),
                Lifetime::Owners => DriverRef::Weak(Arc::downgrade(shared)),
            },
            wake,
        }
    }
}

impl Future for Driver {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // Every owner gone: the timer was dropped (and woke us, see
        // `Shared`'s `Drop`), nothing is left to drive.
        let Some(shared) = self.shared.get() else {
            return Poll::Ready(());
        };
        if !shared.set_driver_waker(cx.waker()) {
            return Poll::Ready(());
        }
        loop {
            let flushed = shared.flush(DRIVER_BATCH);
            // Callbacks found due by this flush, or by an inline one.
            let more_ready = shared.run_ready(DRIVER_BATCH);
            if flushed == Flushed::Shutdown {
                return Poll::Ready(());
            }
            if more_ready || flushed == Flushed::More {
                // Yield between batches so the worker serves other tasks.
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            match shared.arm(&self.wake, true) {
                Armed::Waiting | Armed::Busy => return Poll::Pending,
                // Time moved while we flushed: go round again.
                Armed::Due => {}
            }
        }
    }
}

impl Drop for Driver {
    /// The runtime is dropping the driver task: shut the timer down. The
    /// callbacks that never ran are dropped. (If the timer had already
    /// shut down, or every owner is gone, there is nothing to do.)
    fn drop(&mut self) {
        if let Some(shared) = self.shared.get() {
            if !shared.is_shutdown() {
                shared.runtime_gone.store(true, Ordering::Release);
            }
            drop(shared.shutdown());
        }
    }
}
