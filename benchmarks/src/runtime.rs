//! The tokio runtimes the timer benchmarks run on, built the same way by
//! every program so that a number from `compare` and one from `lock_quota`
//! or a criterion bench come from the same kind of runtime.
//!
//! For tokio's alternative timer see [`crate::timers::runtime_for`].

use tokio::runtime::{Builder, Runtime};

/// A multi-thread runtime of `workers` workers with tokio's time driver
/// only (no I/O driver): where tasks sleep and wake.
///
/// # Panics
///
/// If the runtime cannot be built (no threads left, for instance).
///
/// # Examples
///
/// ```
/// let rt = tiered_timer_benchmarks::runtime::multi_thread(2);
/// rt.block_on(async { tokio::time::sleep(std::time::Duration::from_millis(1)).await });
/// ```
#[track_caller]
pub fn multi_thread(workers: usize) -> Runtime {
    Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_time()
        .build()
        .expect("a tokio runtime")
}

/// A multi-thread runtime of `workers` workers with tokio's I/O driver as
/// well as its time driver, as a server has: tokio then wakes its driver
/// thread through an eventfd when a new timer is the earliest.
///
/// # Panics
///
/// If the runtime cannot be built.
///
/// # Examples
///
/// ```
/// let rt = tiered_timer_benchmarks::runtime::server(2);
/// let _in_rt = rt.enter();
/// ```
#[track_caller]
pub fn server(workers: usize) -> Runtime {
    Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// A current-thread runtime with tokio's time driver.
///
/// # Panics
///
/// If the runtime cannot be built.
///
/// # Examples
///
/// ```
/// let rt = tiered_timer_benchmarks::runtime::current_thread();
/// rt.block_on(async { tiered_timer::sleep(std::time::Duration::from_millis(1)).await });
/// ```
#[track_caller]
pub fn current_thread() -> Runtime {
    Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a tokio runtime")
}
