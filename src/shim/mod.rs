//! The one place where a loom build (`RUSTFLAGS="--cfg loom"`) swaps what
//! the crate takes from std and tokio for loom's checked versions and for
//! stand-ins, so that the code the loom models (`tests/loom.rs`) check is
//! the code that ships.
//!
//! * [`sync`]: the atomics, the mutexes and the shards' lock: std's, or
//!   loom's;
//! * [`rt`]: what the timer takes from the tokio runtime (its clock's
//!   `Instant`, the current runtime, the cooperative budget): tokio's, or,
//!   since tokio cannot be built under loom, stand-ins;
//! * `cell` (feature `spin-lock`): what the spin lock is built from besides
//!   atomics: a cell whose accesses loom tracks, and the wait for a flag.
//!
//! The rest of the crate names them `crate::sync` and `crate::rt` (the
//! crate root imports both) and never looks at `cfg(loom)` itself, except
//! to leave out what needs a real tokio (`DelayQueue` and the I/O, tower
//! and hyper adapters) and to expose the models' entry point (`__loom`).

#[cfg(feature = "spin-lock")]
pub(crate) mod cell;
pub(crate) mod rt;
pub(crate) mod sync;
