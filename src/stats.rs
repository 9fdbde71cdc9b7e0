//! [`Stats`]: counters a timer keeps about its own work.

use crate::driver::Counters;

/// A snapshot of a timer's counters, from [`Handle::stats`](crate::Handle::stats).
///
/// Cheap to take (one lock round-trip), so a service can export it as
/// metrics. The counters only grow, except `pending`.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tiered_timer::Timer;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let timer = Timer::new();
/// let handle = timer.handle();
/// handle.sleep(Duration::from_millis(10)).await;
/// let stats = handle.stats();
/// assert_eq!(stats.fired, 1);
/// assert_eq!(stats.pending, 0);
/// assert!(stats.wakeups >= 1);
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Times the driver ran: each time the clock reached the earliest due
    /// bucket, each time a registration woke it to wait for an earlier one,
    /// and each batch of a large flush. Zero while nothing is due and
    /// nothing new is registered.
    pub wakeups: u64,
    /// Timers fired: sleeps woken at their deadline and callbacks found due.
    pub fired: u64,
    /// Entries reinserted from a coarse (overflow) bucket into a finer one
    /// as their bucket came due: the "reinsert downward" of a hierarchical
    /// wheel. Entries that became due instead are counted in `fired`.
    pub cascaded: u64,
    /// Timers pending now, as [`Handle::pending`](crate::Handle::pending).
    pub pending: usize,
}

impl From<Counters> for Stats {
    fn from(counters: Counters) -> Stats {
        Stats {
            wakeups: counters.wakeups,
            fired: counters.fired,
            cascaded: counters.cascaded,
            pending: counters.pending,
        }
    }
}
