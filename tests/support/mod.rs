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
