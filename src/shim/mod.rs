//! The one place where a loom build (`RUSTFLAGS="--cfg loom"`) swaps what
//! the crate takes from std and tokio for loom's checked versions and for
//! stand-ins, so that the code the loom models (`tests/loom.rs`) check is
//! the code that ships.
//!
//! * [`sync`]: the atomics and the mutexes: std's, or loom's;
//! * [`shard_lock`]: the lock each shard's wheel sits behind (std's mutex,
//!   the spin lock of feature `spin-lock`, or loom's mutex), above `sync`
//!   and the spin lock it chooses between;
//! * [`rt`]: what the timer takes from the tokio runtime (its clock's
//!   `Instant`, the current runtime, the cooperative budget): tokio's, or,
//!   since tokio cannot be built under loom, stand-ins;
//! * `cell` (feature `spin-lock`): what the spin lock is built from besides
//!   atomics: a cell whose accesses loom tracks, and the wait for a flag.
//!
//! The rest of the crate names them `crate::sync` and `crate::rt` (the
//! crate root imports both; the driver's shared state alone takes
//! `shard_lock`) and never looks at `cfg(loom)` itself, except
//! to leave out what needs a real tokio (`DelayQueue` and the I/O, tower
//! and hyper adapters) and to expose the models' entry point (`__loom`).

#[cfg(feature = "spin-lock")]
pub(crate) mod cell;
pub(crate) mod rt;
pub(crate) mod shard_lock;
pub(crate) mod sync;
