//! [`SpinLock`], the lock each shard's wheel sits behind with the
//! experimental `spin-lock` feature (by default, `std::sync::Mutex`; see
//! [`ShardLock`](crate::shim::shard_lock::ShardLock)). This is the crate's only
//! `unsafe`.
//!
//! # What it saves, and what it risks
//!
//! A guard takes a shard's lock twice: to file its entry and to remove it.
//! Both critical sections are a few dozen instructions, and a shard belongs
//! to one worker, so the lock is almost never contended. What such a lock
//! costs is its atomic read-modify-write operations: `std`'s mutex makes one
//! to lock and another to unlock (a swap, which tells it whether a waiter
//! needs waking). This lock releases with a plain store, so a guard makes
//! two such operations fewer; measured on the busy-server guard (workload
//! 1c of `benchmarks/examples/compare/`) that is about 8 of 100 ns.
//!
//! The price is that a thread which finds the lock taken is not queued and
//! woken when it is released: it looks again. It spins 64 rounds, then
//! yields its time slice 16 times (so a holder that was preempted gets the
//! CPU back), then sleeps between looks, 10 µs doubling up to 1 ms, so that
//! a long hold or a holder kept off the CPU costs the waiter latency, not a
//! core. The lock is not fair. Most holds are a few dozen instructions; the
//! long ones are rare and bounded by the data, not by other threads: a slab
//! or deadline table growing (a copy of the shard's entries), shutdown
//! (a walk over them). Threads at a real-time priority (`SCHED_FIFO`) should
//! not share a timer with threads of a lower one: yielding does not let a
//! lower-priority holder run. In debug builds a thread that takes a lock it
//! already holds panics, naming the cause, instead of waiting for ever.
//!
//! Those are the risks of a service in a container: a holder throttled by a
//! CPU quota leaves its waiters spinning and yielding on the same quota,
//! then napping, so they notice the release late. tokio's timer uses a
//! mutex; so does this crate by default. The feature stays only if
//! measurements show the spin lock better somewhere real and no worse under
//! a quota.

//! # Ground rules
//!
//! * Hold it for bounded work only: nothing that wakes a task, drops a
//!   waker, reads a [`Clock`](crate::clock::Clock) or blocks. The one piece
//!   of others' code that runs under it is a waker's clone, when the driver
//!   fires a sleep and keeps its waker (an atomic increment, for tokio's
//!   wakers and any built on `Arc`). The driver bounds each hold of a big
//!   flush (32 wakers, or a few dozen entries moved down); sleeps and
//!   callbacks hold it for one entry at a time.
//! * [`SpinLock::lock`] succeeds for one thread at a time: its
//!   compare-and-swap takes `locked` from `false` to `true` with `Acquire`,
//!   and the guard's drop stores `false` with `Release`, so everything a
//!   holder wrote happens before the next holder reads. The value is only
//!   reached through a guard.
//! * It is built from the loom shim's primitives ([`crate::shim::cell`]):
//!   under `--cfg loom` the flag is loom's atomic and the value sits in
//!   loom's `UnsafeCell`, which tracks every guard's access from lock to
//!   release: the model `spin_lock_excludes` in `tests/loom.rs` checks the
//!   lock alone. The timer's own models run the shards behind loom's mutex
//!   instead (see [`ShardLock`](crate::shim::shard_lock::ShardLock)).

// The crate denies `unsafe`; this module is the one exception (see above).
#![allow(unsafe_code)]

use std::ops::{Deref, DerefMut};

use crate::shim::cell::{Access, SpinWait, UnsafeCell};
use crate::sync::{AtomicBool, Ordering};

/// A mutual-exclusion lock for short, uncontended critical sections; see
/// the module docs.
pub(crate) struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
    /// The thread holding the lock, in debug builds: taking it again on the
    /// same thread panics (saying what ran under the lock) instead of
    /// waiting for ever.
    #[cfg(debug_assertions)]
    holder: std::sync::atomic::AtomicUsize,
}

// SAFETY: `SpinLock` gives access to `value` only through a `SpinGuard`, and
// only one guard exists at a time (see `lock`). Sharing a `&SpinLock<T>`
// between threads therefore only ever moves exclusive access to `T` from one
// thread to another, which `T: Send` allows: the bound `std::sync::Mutex`
// has.
unsafe impl<T: Send> Sync for SpinLock<T> {}

/// Exclusive access to a [`SpinLock`]'s value; the lock is released when it
/// drops.
///
/// Neither `Send` nor `Sync` (its access holds the cell): it stays on the
/// thread that took the lock, and shares `&T` with no other. (std's guard is
/// `Sync` for `T: Sync`; nothing here shares a guard.)
pub(crate) struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
    /// The access to the value, ended before the release (`None` only
    /// during the guard's drop).
    access: Option<Access<'a, T>>,
}

impl<T> SpinLock<T> {
    pub(crate) fn new(value: T) -> SpinLock<T> {
        SpinLock {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
            #[cfg(debug_assertions)]
            holder: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Takes the lock, waiting (spinning, then yielding, then sleeping
    /// briefly) while another thread holds it.
    ///
    /// # Panics
    ///
    /// In debug builds, if this thread already holds it.
    #[inline]
    #[track_caller]
    pub(crate) fn lock(&self) -> SpinGuard<'_, T> {
        if !self.try_take() {
            self.check_reentry();
            self.wait_and_take();
        }
        self.guard()
    }

    /// Takes the lock if it is free, without waiting.
    pub(crate) fn try_lock(&self) -> Option<SpinGuard<'_, T>> {
        self.try_take().then(|| self.guard())
    }

    /// The guard of a lock just taken.
    fn guard(&self) -> SpinGuard<'_, T> {
        #[cfg(debug_assertions)]
        self.holder.store(thread_number(), Ordering::Relaxed);
        SpinGuard {
            lock: self,
            access: Some(self.value.access()),
        }
    }

    #[inline]
    fn try_take(&self) -> bool {
        self.locked
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Panics, in debug builds, if this thread holds the lock: waiting would
    /// never end. (Nothing of this crate does that; code of the caller's
    /// that runs under the lock and calls back into the timer would.)
    #[track_caller]
    fn check_reentry(&self) {
        #[cfg(debug_assertions)]
        assert_ne!(
            self.holder.load(Ordering::Relaxed),
            thread_number(),
            "tiered-timer: a timer's lock was taken again by the thread holding it: \
             code run under it (a waker's clone) called back into the timer"
        );
    }

    #[cold]
    fn wait_and_take(&self) {
        let mut wait = SpinWait::new();
        loop {
            wait.while_set(&self.locked);
            if self.try_take() {
                return;
            }
        }
    }
}

/// A number for this thread, unique among live threads (debug builds):
/// the address of a thread-local.
#[cfg(debug_assertions)]
fn thread_number() -> usize {
    thread_local! {
        static ME: u8 = const { 0 };
    }
    ME.with(|me| std::ptr::from_ref(me) as usize)
}

impl<T> SpinGuard<'_, T> {
    fn as_ptr(&self) -> *mut T {
        self.access
            .as_ref()
            .expect("released on drop only")
            .as_ptr()
    }
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock, so no other guard, and so no
        // other reference to the value, exists until it drops; the
        // reference cannot outlive `&self`.
        unsafe { &*self.as_ptr() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and `&mut self` makes this the only
        // reference this guard hands out.
        unsafe { &mut *self.as_ptr() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // Ends the access (loom's record of it) before the release.
        self.access = None;
        #[cfg(debug_assertions)]
        self.lock.holder.store(0, Ordering::Relaxed);
        self.lock.locked.store(false, Ordering::Release);
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for SpinLock<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never waits: a `Debug` of a timer must not spin on its own lock.
        let mut out = f.debug_struct("SpinLock");
        match self.try_lock() {
            Some(guard) => out.field("value", &*guard),
            None => out.field("value", &format_args!("<locked>")),
        };
        out.finish()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{SpinGuard, SpinLock};

    /// Each increment reads, yields, then writes: two holders at once would
    /// lose updates (and Miri, `cargo +nightly miri test --lib --features
    /// spin-lock spin_lock`, reports the data race itself).
    #[test]
    fn one_holder_at_a_time() {
        let lock = Arc::new(SpinLock::new(0u64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let lock = lock.clone();
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        let mut value = lock.lock();
                        let read = *value;
                        std::thread::yield_now();
                        *value = read + 1;
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(*lock.lock(), 200);
    }

    /// A guard shares `&T`, so it must not be `Sync` unless `T` is (it is
    /// never `Sync`, stricter than std's): this compiles only while
    /// `SpinGuard<Cell<u8>>` is not `Sync` (were it, both impls would apply
    /// and the call would be ambiguous).
    #[test]
    fn a_guard_of_a_value_that_is_not_sync_is_not_sync() {
        trait NotSync<Marker> {
            fn check() {}
        }
        impl<T: ?Sized> NotSync<()> for T {}
        impl<T: ?Sized + Sync> NotSync<u8> for T {}
        <SpinGuard<'static, std::cell::Cell<u8>> as NotSync<_>>::check();
    }

    /// `Debug` never waits for the lock, even on the thread that holds it.
    #[test]
    fn debug_shows_the_value_or_that_it_is_locked() {
        let lock = SpinLock::new(7u8);
        assert_eq!(format!("{lock:?}"), "SpinLock { value: 7 }");
        let guard = lock.lock();
        assert_eq!(format!("{lock:?}"), "SpinLock { value: <locked> }");
        drop(guard);
        assert_eq!(format!("{lock:?}"), "SpinLock { value: 7 }");
    }
}
