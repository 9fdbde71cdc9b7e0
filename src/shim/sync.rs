//! The one place the crate takes its synchronization primitives from
//! (`crate::sync`).
//!
//! Everything shared between threads (the per-timer deadline words, the
//! flags, the mutexes) is imported from here, so that a loom build
//! (`RUSTFLAGS="--cfg loom"`) can swap in loom's checked versions without
//! touching the code it checks.
//!
//! A leaf: it imports nothing from the crate. The shards' lock, which is
//! built from these primitives (and, with the `spin-lock` feature, from the
//! spin lock, itself built from them), is in
//! [`shard_lock`](super::shard_lock), above both.

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
