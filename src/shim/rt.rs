//! Everything this crate takes from the tokio runtime, in one place
//! (`crate::rt`).
//!
//! The timer needs four things from tokio: its clock's `Instant` (so paused
//! time applies), a sleep for its driver to wait on, the current runtime (to
//! spawn the driver and find the default timer), and the cooperative
//! budget. Under `--cfg loom` tokio cannot be built, so this module swaps
//! in stand-ins: std's `Instant`, no runtime, an unlimited budget. The
//! loom models (`tests/loom.rs`) drive the timer's shared state directly
//! and need none of them; together with [`super::sync`] this keeps the
//! code loom checks the code that ships.

use std::future::Future;
use std::task::{Context, Poll};

#[cfg(not(loom))]
pub use tokio::time::Instant;

#[cfg(loom)]
pub use std::time::Instant;

thread_local! {
    /// This thread's home index (see [`home_index`]), chosen on first use.
    static HOME_INDEX: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

/// Which shard this thread's sleeps go to, before reducing modulo the shard
/// count. A multi-thread runtime's worker uses its index, which it keeps for
/// life, so worker `i` of an `n`-worker runtime has shard `i` to itself
/// whatever other threads came and went; any other thread (a current-thread
/// runtime's, which tokio also calls worker 0, or one outside tokio) takes a
/// number handed out in turn, so that thread-per-core runtimes sharing a
/// timer spread over its shards too. Chosen once per thread.
pub(crate) fn home_index() -> usize {
    HOME_INDEX
        .try_with(|home| {
            home.get().unwrap_or_else(|| {
                let index = choose_home_index();
                home.set(Some(index));
                index
            })
        })
        .unwrap_or(0)
}

fn choose_home_index() -> usize {
    #[cfg(not(loom))]
    if let Some(index) = tokio::runtime::worker_index() {
        let multi_thread = tokio::runtime::Handle::try_current().is_ok_and(|handle| {
            handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread
        });
        if multi_thread {
            return index;
        }
    }
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// A runtime able to run a timer's driver task.
#[derive(Debug, Clone)]
pub(crate) struct Runtime {
    #[cfg(not(loom))]
    handle: tokio::runtime::Handle,
}

/// Identifies a runtime while it lives (tokio may reuse ids afterwards).
#[cfg(not(loom))]
pub(crate) type RuntimeId = tokio::runtime::Id;
#[cfg(loom)]
pub(crate) type RuntimeId = u64;

impl Runtime {
    /// The runtime whose context this thread is in, if any.
    pub(crate) fn try_current() -> Option<Runtime> {
        #[cfg(not(loom))]
        {
            tokio::runtime::Handle::try_current()
                .ok()
                .map(|handle| Runtime { handle })
        }
        #[cfg(loom)]
        {
            None
        }
    }

    pub(crate) fn id(&self) -> RuntimeId {
        #[cfg(not(loom))]
        {
            self.handle.id()
        }
        #[cfg(loom)]
        {
            unreachable!("no runtime under loom")
        }
    }

    /// How many worker threads run its tasks (1 for a current-thread
    /// runtime): the timer keeps a shard of entries per worker.
    pub(crate) fn workers(&self) -> usize {
        #[cfg(not(loom))]
        {
            self.handle.metrics().num_workers()
        }
        #[cfg(loom)]
        {
            unreachable!("no runtime under loom")
        }
    }

    /// Makes this runtime the current one on this thread until the guard
    /// drops, so tokio's clock and timer calls refer to it.
    pub(crate) fn enter(&self) -> EnterGuard<'_> {
        EnterGuard {
            #[cfg(not(loom))]
            _inner: self.handle.enter(),
            #[cfg(loom)]
            _runtime: self,
        }
    }

    /// Spawns `future` (a driver) as a task; a runtime shutting down drops it.
    pub(crate) fn spawn(&self, future: impl Future<Output = ()> + Send + 'static) {
        #[cfg(not(loom))]
        {
            drop(self.handle.spawn(future));
        }
        #[cfg(loom)]
        {
            drop(future);
            unreachable!("no runtime under loom")
        }
    }
}

/// The runtime made current by [`Runtime::enter`], until dropped.
pub(crate) struct EnterGuard<'a> {
    #[cfg(not(loom))]
    _inner: tokio::runtime::EnterGuard<'a>,
    #[cfg(loom)]
    _runtime: &'a Runtime,
}

/// tokio's sleep until `deadline`, for [`TokioClock`](crate::clock::TokioClock).
///
/// # Panics
///
/// On a runtime without tokio's time driver, at the caller's location, as
/// tokio's does (each public path to it is `#[track_caller]`).
#[track_caller]
pub(crate) fn sleep_until(deadline: Instant) -> crate::clock::ClockSleep {
    #[cfg(not(loom))]
    {
        Box::pin(tokio::time::sleep_until(deadline))
    }
    #[cfg(loom)]
    {
        let _ = deadline;
        panic!("TokioClock is not available under loom: use a ManualClock")
    }
}

/// A unit of tokio's cooperative budget, spent unless the poll it guards
/// made progress.
pub(crate) struct Coop {
    #[cfg(not(loom))]
    inner: tokio::task::coop::RestoreOnPending,
}

impl Coop {
    /// Marks the guarded poll as having made progress: the unit stays spent.
    #[inline]
    pub(crate) fn made_progress(&self) {
        #[cfg(not(loom))]
        self.inner.made_progress();
    }
}

/// Takes a unit of the current task's budget, or returns `Pending` (having
/// arranged a wake-up) if it is exhausted.
#[inline]
pub(crate) fn poll_proceed(cx: &mut Context<'_>) -> Poll<Coop> {
    #[cfg(not(loom))]
    {
        tokio::task::coop::poll_proceed(cx).map(|inner| Coop { inner })
    }
    #[cfg(loom)]
    {
        let _ = cx;
        Poll::Ready(Coop {})
    }
}

/// Whether the current task has budget left (always, outside tokio).
#[inline]
pub(crate) fn has_budget_remaining() -> bool {
    #[cfg(not(loom))]
    {
        tokio::task::coop::has_budget_remaining()
    }
    #[cfg(loom)]
    {
        true
    }
}
