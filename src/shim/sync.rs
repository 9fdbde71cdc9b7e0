//! The one place the crate takes its synchronization primitives from
//! (`crate::sync`).
//!
//! Everything shared between threads (the shards' locks, the per-timer
//! deadline words, the flags) is imported from here, so that a loom build
//! (`RUSTFLAGS="--cfg loom"`) can swap in loom's checked versions without
//! touching the code it checks.

#[cfg(not(loom))]
pub(crate) use std::sync::{
    atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering},
    Mutex, MutexGuard,
};

#[cfg(loom)]
pub(crate) use loom::sync::{
    atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering},
    Mutex, MutexGuard,
};

/// With the experimental `spin-lock` feature, the shards' wheels sit behind
/// a [`SpinLock`](crate::spin_lock::SpinLock) (see [`crate::spin_lock`]).
#[cfg(all(feature = "spin-lock", not(loom)))]
pub(crate) type ShardLock<T> = crate::spin_lock::SpinLock<T>;

/// The lock each shard's wheel sits behind: std's `Mutex`, poisoning
/// ignored as by [`lock`].
///
/// Under loom it is loom's mutex, with or without the `spin-lock` feature:
/// it has the spin lock's contract (one holder; what a holder wrote happens
/// before the next holder reads), and a spin loop would make each explored
/// path as long as the spinning, so the timer's models could not finish
/// with it; the model `spin_lock_excludes` checks the spin lock on its own.
#[cfg(not(all(feature = "spin-lock", not(loom))))]
#[derive(Debug)]
pub(crate) struct ShardLock<T>(Mutex<T>);

#[cfg(not(all(feature = "spin-lock", not(loom))))]
impl<T> ShardLock<T> {
    pub(crate) fn new(value: T) -> ShardLock<T> {
        ShardLock(Mutex::new(value))
    }

    /// Takes the lock, waiting while another thread holds it.
    #[inline]
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        lock(&self.0)
    }

    /// Takes the lock if it is free, without waiting.
    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        match self.0.try_lock() {
            Ok(guard) => Some(guard),
            Err(std::sync::TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }
}

// Not modelled: reference counts and one-time initialisation are std's own
// business (loom has no `Weak` or `OnceLock`); the timer's invariants live
// in the mutex-guarded state and the atomics above.
pub(crate) use std::sync::{Arc, OnceLock, Weak};

/// Locks `mutex`, ignoring poisoning.
///
/// No code that can panic on user input runs while the timer's lock is held
/// (wakers are woken and dropped after it is released), so a poisoned lock
/// still guards consistent data.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
