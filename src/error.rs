//! Error types.

use std::fmt;

/// Returned by a [`Timeout`](crate::Timeout) whose deadline passed before
/// its future completed.
///
/// Converts into [`std::io::Error`] with kind
/// [`TimedOut`](std::io::ErrorKind::TimedOut), as tokio's does.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tiered_timer::{error::Elapsed, timeout};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let result = timeout(Duration::from_millis(10), std::future::pending::<()>()).await;
/// let elapsed: Elapsed = result.unwrap_err();
/// assert_eq!(elapsed.to_string(), "deadline has elapsed");
/// let io: std::io::Error = elapsed.into();
/// assert_eq!(io.kind(), std::io::ErrorKind::TimedOut);
/// # }
/// ```
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub struct Elapsed(());

impl Elapsed {
    pub(crate) fn new() -> Elapsed {
        Elapsed(())
    }
}

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("deadline has elapsed")
    }
}

impl std::error::Error for Elapsed {}

impl From<Elapsed> for std::io::Error {
    fn from(elapsed: Elapsed) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::TimedOut, elapsed)
    }
}
