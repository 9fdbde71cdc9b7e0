//! What the spin lock ([`crate::spin_lock`], feature `spin-lock`) is built
//! from besides atomics, in one form for std and one for loom.
//!
//! * [`UnsafeCell`] hands out an [`Access`] to its value, held by the lock's
//!   guard from lock to release. Under loom the access is loom's record of
//!   it, so loom reports two guards that overlap; with std it is the cell.
//! * [`SpinWait`] is how a thread that found the lock taken waits before it
//!   looks again. With std it spins 64 rounds, then yields its time slice 16
//!   times (so a holder that was preempted gets the CPU back), then sleeps
//!   between looks, 10 µs doubling up to 1 ms, reading the flag without
//!   writing it (a compare-and-swap would pull the cache line away from the
//!   holder each time). Under loom a plain load may go on reading the old
//!   `true` for as long as the model likes, a path with no end; so there it
//!   yields once, and the caller's compare-and-swap, which always reads the
//!   latest value, looks again.

#[cfg(loom)]
use std::marker::PhantomData;

use super::sync::AtomicBool;

/// A cell whose value is reached through an [`Access`].
pub(crate) struct UnsafeCell<T> {
    #[cfg(not(loom))]
    inner: std::cell::UnsafeCell<T>,
    #[cfg(loom)]
    inner: loom::cell::UnsafeCell<T>,
}

/// Access to an [`UnsafeCell`]'s value, for as long as it lives; dropping
/// it ends the access (for loom's tracking).
pub(crate) struct Access<'a, T> {
    #[cfg(not(loom))]
    cell: &'a std::cell::UnsafeCell<T>,
    /// loom's record of the access, and the pointer it grants.
    #[cfg(loom)]
    inner: (loom::cell::MutPtr<T>, *mut T),
    #[cfg(loom)]
    _cell: PhantomData<&'a T>,
}

impl<T> UnsafeCell<T> {
    pub(crate) fn new(value: T) -> UnsafeCell<T> {
        UnsafeCell {
            #[cfg(not(loom))]
            inner: std::cell::UnsafeCell::new(value),
            #[cfg(loom)]
            inner: loom::cell::UnsafeCell::new(value),
        }
    }

    /// Starts an access to the value. The caller ensures that no other
    /// access is live while this one is used.
    pub(crate) fn access(&self) -> Access<'_, T> {
        #[cfg(not(loom))]
        {
            Access { cell: &self.inner }
        }
        #[cfg(loom)]
        {
            let access = self.inner.get_mut();
            let pointer = access.with(|pointer| pointer);
            Access {
                inner: (access, pointer),
                _cell: PhantomData,
            }
        }
    }
}

impl<T> Access<'_, T> {
    /// The pointer to the value.
    #[inline]
    pub(crate) fn as_ptr(&self) -> *mut T {
        #[cfg(not(loom))]
        {
            self.cell.get()
        }
        #[cfg(loom)]
        {
            self.inner.1
        }
    }
}

/// Busy-wait rounds before a waiting thread starts yielding its time slice.
#[cfg(not(loom))]
const SPINS: u32 = 64;
/// Yields before a waiting thread starts sleeping between looks: by then
/// the holder is off the CPU, or in one of the rare long holds.
#[cfg(not(loom))]
const YIELDS: u32 = 16;
/// The longest sleep between looks (they start at 10 µs and double).
#[cfg(not(loom))]
const MAX_NAP: std::time::Duration = std::time::Duration::from_millis(1);

/// The waiting of one thread for a lock, across its looks; see the module
/// docs.
#[derive(Debug)]
pub(crate) struct SpinWait {
    #[cfg(not(loom))]
    rounds: u32,
    #[cfg(not(loom))]
    nap: std::time::Duration,
}

impl SpinWait {
    pub(crate) fn new() -> SpinWait {
        SpinWait {
            #[cfg(not(loom))]
            rounds: 0,
            #[cfg(not(loom))]
            nap: std::time::Duration::from_micros(10),
        }
    }

    /// Waits while `locked` looks set; the caller then tries to take it.
    pub(crate) fn while_set(&mut self, locked: &AtomicBool) {
        #[cfg(not(loom))]
        while locked.load(super::sync::Ordering::Relaxed) {
            self.rounds += 1;
            if self.rounds <= SPINS {
                std::hint::spin_loop();
            } else if self.rounds <= SPINS + YIELDS {
                std::thread::yield_now();
            } else {
                // A long hold (a shutdown, a slab growing) or a holder off
                // the CPU: stop burning it.
                std::thread::sleep(self.nap);
                self.nap = (self.nap * 2).min(MAX_NAP);
            }
        }
        #[cfg(loom)]
        {
            let _ = locked;
            loom::thread::yield_now();
        }
    }
}
