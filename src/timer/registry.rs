//! The default timer of each tokio runtime, created on first use.
//!
//! The free functions (`sleep`, `timeout`, ...) need a timer without any
//! set-up, as tokio's do. The first call inside a runtime builds a timer with
//! the default configuration and spawns its driver on that runtime; later
//! calls find it again by the runtime's id. A per-thread cache makes the
//! common case one thread-local read and usually no `Arc` clone: a sleep
//! dropped on a thread hands its count on the timer back to that thread
//! ([`recycle`]), for the thread's next sleep.
//!
//! A default timer lives as long as its driver task: when the runtime shuts
//! down the task is dropped, which shuts the timer down, and the next lookup
//! for a runtime with the same id (tokio reuses ids) builds a fresh one.

use std::cell::RefCell;

use crate::clock::TokioClock;
use crate::driver::{Config, Lifetime, Shared};
use crate::rt::{Runtime, RuntimeId};
use crate::sync::{Arc, Weak};
// Process-wide bookkeeping, not part of what loom models: plain std.
use crate::Handle;
use std::sync::Mutex;

static DEFAULTS: Mutex<Vec<(RuntimeId, Weak<Shared>)>> = Mutex::new(Vec::new());

/// A thread's cached default timer.
#[derive(Debug)]
struct Cached {
    id: RuntimeId,
    handle: Handle,
    /// One more count on `handle`'s timer, given back by a sleep dropped on
    /// this thread and handed to the thread's next sleep instead of a clone.
    spare: Option<Handle>,
}

thread_local! {
    static CACHED: RefCell<Option<Cached>> = const { RefCell::new(None) };
}

/// The default timer of the runtime this thread is in.
///
/// # Panics
///
/// Outside a tokio runtime, or on one built without its time driver
/// (`enable_time`). The panic reports the caller's location.
#[track_caller]
#[inline]
pub(crate) fn current() -> Handle {
    let runtime = match Runtime::try_current() {
        Some(runtime) => runtime,
        None => panic!(
            "tiered-timer: there is no timer running; this must be called from the \
             context of a Tokio 1.x runtime (or use a `Handle` of an explicit `Timer`)"
        ),
    };
    let id = runtime.id();
    let cached = CACHED
        .try_with(|cached| match &mut *cached.try_borrow_mut().ok()? {
            Some(cached) if cached.id == id && !cached.handle.shared.is_shutdown() => {
                Some(cached.spare.take().unwrap_or_else(|| cached.handle.clone()))
            }
            _ => None,
        })
        .ok()
        .flatten();
    if let Some(handle) = cached {
        return handle;
    }
    let handle = find_or_start(&runtime, id);
    let fresh = Cached {
        id,
        handle: handle.clone(),
        spare: None,
    };
    // The entry replaced (another runtime's timer) is dropped after the
    // borrow ends: dropping a timer drops wakers, which may run any code.
    let old = CACHED
        .try_with(|cached| Some(cached.try_borrow_mut().ok()?.replace(fresh)))
        .ok()
        .flatten();
    drop(old);
    handle
}

/// Takes back the count a dropped sleep held on its timer: if that is this
/// thread's cached default timer, and the cache has no spare yet, it becomes
/// the spare that [`current`] hands to the thread's next sleep; otherwise it
/// is dropped. The count is shared by every worker, so each clone and drop
/// is an atomic operation on a cache line the workers fight over; recycled,
/// a guard armed and dropped on one thread touches it not at all.
#[inline]
pub(crate) fn recycle(handle: Handle) {
    let unused = CACHED.try_with(|cached| {
        let Ok(mut cached) = cached.try_borrow_mut() else {
            return Some(handle);
        };
        match &mut *cached {
            Some(cached)
                if cached.spare.is_none() && Arc::ptr_eq(&cached.handle.shared, &handle.shared) =>
            {
                cached.spare = Some(handle);
                None
            }
            _ => Some(handle),
        }
    });
    // Dropped outside the borrow. (If the thread's storage is already gone,
    // at thread exit, `try_with` has dropped the handle.)
    drop(unused);
}

#[track_caller]
fn find_or_start(runtime: &Runtime, id: RuntimeId) -> Handle {
    let mut defaults = DEFAULTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // Forget timers whose runtime has gone (their driver shut them down).
    defaults.retain(|(_, shared)| shared.upgrade().is_some_and(|s| !s.is_shutdown()));
    if let Some(shared) = defaults
        .iter()
        .find(|(default_id, _)| *default_id == id)
        .and_then(|(_, shared)| shared.upgrade())
    {
        return Handle { shared };
    }
    let (shared, driver) = crate::driver::timer(
        Config {
            shards: runtime.workers(),
            ..Config::default()
        },
        Arc::new(TokioClock),
        Some(runtime.clone()),
        Lifetime::Runtime,
    );
    defaults.push((id, Arc::downgrade(&shared)));
    drop(defaults);
    // Spawning onto a runtime that is shutting down drops the driver at
    // once, which shuts the new timer down: its sleeps then say so.
    runtime.spawn(driver);
    Handle { shared }
}
