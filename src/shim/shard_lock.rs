//! [`ShardLock`], the lock each shard's wheel sits behind: std's `Mutex`
//! by default, the experimental [`SpinLock`](crate::spin_lock::SpinLock)
//! with the `spin-lock` feature, loom's mutex in a loom build.
//!
//! Its own module, above both [`sync`](super::sync) and
//! [`spin_lock`](crate::spin_lock): the spin lock is built from `sync`'s
//! atomics, so the choice between the two cannot live in `sync` without an
//! import circle (`sync` -> `spin_lock` -> `sync`). Only the driver's shared
//! state imports it.

#[cfg(not(all(feature = "spin-lock", not(loom))))]
use super::sync::{lock, Mutex, MutexGuard};

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
