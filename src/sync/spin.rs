//! [`SpinLock`], the lock each shard's wheel sits behind.
//!
//! # Why not `std::sync::Mutex`
//!
//! A guard takes a shard's lock twice: to file its entry and to remove it.
//! Both critical sections are a few dozen instructions, and a shard belongs
//! to one worker, so the lock is almost never contended. What such a lock
//! costs is its atomic read-modify-write operations: `std`'s mutex makes one
//! to lock and another to unlock (a swap, which tells it whether a waiter
//! needs waking). This lock releases with a plain store, so a guard makes
//! two such operations fewer; measured on the busy-server guard (workload
//! 1c of `examples/compare.rs`) that is about 8 of 100 ns.
//!
//! The price is that a thread which finds the lock taken cannot sleep until
//! it is released: it spins a little and then yields its time slice to the
//! OS scheduler, so a holder that was preempted gets the CPU back. That is
//! only acceptable because every hold is short and bounded.
//!
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
//! * Under `--cfg loom` the flag is loom's atomic and the value sits in
//!   loom's `UnsafeCell`, which tracks every guard's access: the model
//!   `spin_lock_excludes` in `tests/loom.rs` checks the lock alone. The
//!   timer's own models run the shards behind loom's mutex instead (see
//!   [`ShardLock`](super::ShardLock)).

// The crate denies `unsafe`; this module is the one exception (see above).
#![allow(unsafe_code)]

use std::ops::{Deref, DerefMut};

use super::{AtomicBool, Ordering};

#[cfg(loom)]
use loom::cell::UnsafeCell;
#[cfg(not(loom))]
use std::cell::UnsafeCell;

/// Busy-wait rounds before a waiting thread starts yielding its time slice.
#[cfg(not(loom))]
const SPINS: u32 = 64;

/// A mutual-exclusion lock for short, uncontended critical sections; see
/// the module docs.
pub(crate) struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: `SpinLock` gives access to `value` only through a `SpinGuard`, and
// only one guard exists at a time (see `lock`). Sharing a `&SpinLock<T>`
// between threads therefore only ever moves exclusive access to `T` from one
// thread to another, which `T: Send` allows: the bound `std::sync::Mutex`
// has.
unsafe impl<T: Send> Sync for SpinLock<T> {}

/// Exclusive access to a [`SpinLock`]'s value; the lock is released when it
/// drops.
pub(crate) struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
    /// loom's record of this guard's access, ended before the release.
    #[cfg(loom)]
    access: Option<loom::cell::MutPtr<T>>,
}

impl<T> SpinLock<T> {
    pub(crate) fn new(value: T) -> SpinLock<T> {
        SpinLock {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Takes the lock, waiting (spinning, then yielding) while another
    /// thread holds it.
    #[inline]
    pub(crate) fn lock(&self) -> SpinGuard<'_, T> {
        if !self.try_take() {
            self.wait_and_take();
        }
        SpinGuard {
            lock: self,
            #[cfg(loom)]
            access: Some(self.value.get_mut()),
        }
    }

    #[inline]
    fn try_take(&self) -> bool {
        self.locked
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    #[cold]
    fn wait_and_take(&self) {
        #[cfg(not(loom))]
        {
            let mut spins = 0;
            loop {
                // Read-only while it is held: spinning on the
                // compare-and-swap would pull the cache line away from the
                // holder each time.
                while self.locked.load(Ordering::Relaxed) {
                    if spins < SPINS {
                        spins += 1;
                        std::hint::spin_loop();
                    } else {
                        std::thread::yield_now();
                    }
                }
                if self.try_take() {
                    return;
                }
            }
        }
        // loom lets a plain load go on reading the old `true` for as long as
        // it likes, a path with no end; a compare-and-swap always reads the
        // latest value, so the model waits on that instead.
        #[cfg(loom)]
        while !self.try_take() {
            loom::thread::yield_now();
        }
    }
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        #[cfg(not(loom))]
        // SAFETY: this guard holds the lock, so no other guard, and so no
        // other reference to the value, exists until it drops; the
        // reference cannot outlive `&self`.
        unsafe {
            &*self.lock.value.get()
        }
        #[cfg(loom)]
        // SAFETY: as above; loom checks that no other access overlaps.
        unsafe {
            self.access.as_ref().expect("released on drop only").deref()
        }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        #[cfg(not(loom))]
        // SAFETY: as in `deref`, and `&mut self` makes this the only
        // reference this guard hands out.
        unsafe {
            &mut *self.lock.value.get()
        }
        #[cfg(loom)]
        // SAFETY: as above; loom checks that no other access overlaps.
        unsafe {
            self.access.as_ref().expect("released on drop only").deref()
        }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        #[cfg(loom)]
        drop(self.access.take());
        self.lock.locked.store(false, Ordering::Release);
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for SpinLock<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never waits: a `Debug` of a timer must not spin on its own lock.
        let mut out = f.debug_struct("SpinLock");
        if self.try_take() {
            let guard = SpinGuard {
                lock: self,
                #[cfg(loom)]
                access: Some(self.value.get_mut()),
            };
            out.field("value", &*guard);
        } else {
            out.field("value", &format_args!("<locked>"));
        }
        out.finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::Arc;

    use super::SpinLock;

    /// Each increment reads, yields, then writes: two holders at once would
    /// lose updates (and Miri, `cargo +nightly miri test --lib spin`, reports
    /// the data race itself).
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
