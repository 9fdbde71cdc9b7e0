//! Helpers shared by the integration tests.
#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Asserts that exactly `$ms` milliseconds of (paused) time have passed
/// since `$start`.
#[macro_export]
macro_rules! assert_elapsed {
    ($start:expr, $ms:expr) => {{
        let elapsed = $start.elapsed();
        assert_eq!(
            elapsed,
            $crate::support::ms($ms),
            "elapsed {:?}, expected {} ms",
            elapsed,
            $ms
        );
    }};
}

/// The message of a caught panic.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or_default()
}

/// Runs `case` on a current-thread runtime with paused time (auto-advance
/// on), on its own thread; fails if it panics or has not finished within
/// `limit` of real time. A paused test that waits for something the clock
/// never reaches hangs forever: this turns that into a failure.
pub fn paused_with_watchdog<F, Fut>(limit: Duration, case: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    with_watchdog(limit, true, case);
}

/// As [`paused_with_watchdog`], on a runtime that starts paused or not.
pub fn with_watchdog<F, Fut>(limit: Duration, start_paused: bool, case: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let (tx, rx) = std::sync::mpsc::channel();
    let worker = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(start_paused)
            .build()
            .unwrap();
        runtime.block_on(case());
        let _ = tx.send(());
    });
    match rx.recv_timeout(limit) {
        Ok(()) => worker.join().unwrap(),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            let panic = worker.join().unwrap_err();
            panic!("the case panicked: {}", panic_message(&*panic));
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("the case hung for {limit:?} of real time (paused clock never reached it)")
        }
    }
}
