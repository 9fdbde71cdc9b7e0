//! The limits every backend keeps, and the conversions of times to the
//! whole milliseconds the stores count in (due times rounded up: never
//! early).

use std::time::{Duration, SystemTime};

/// The latest due time a job may have, in ms since the Unix epoch: 2^52,
/// well inside the range where a sorted set's `f64` score is exact.
pub(crate) const MAX_DEADLINE_MS: u64 = 1 << 52;

/// The longest lease, and the longest delay counted from now: 2^51 ms
/// (about 71 000 years). Both are added to the clock's now (about 2^40.6
/// ms today), and the sum must stay under [`MAX_DEADLINE_MS`]: a leased
/// job's timeline score is 2^52 + its lease expiry, exact in a sorted
/// set's `f64` only while that expiry is below 2^52.
pub(crate) const MAX_SPAN_MS: u64 = MAX_DEADLINE_MS / 2;

/// What a lease out of range is told, by [`Builder::lease`](crate::Builder::lease) and
/// [`Job::extend_lease`](crate::Job::extend_lease) alike.
pub(crate) const LEASE_RANGE: &str =
    "a lease must be at least 1 ms and at most 2^51 ms (about 71 000 years)";

/// The most jobs one batched schedule script takes (see
/// [`Queue::schedule_many`](crate::Queue::schedule_many)): a chunk of 1 000 small jobs holds Redis for
/// about 3 ms.
pub(crate) const CHUNK_JOBS: usize = 1_000;
/// About the most payload bytes one batched schedule script takes: a
/// chunk closes once it holds this much, however few jobs.
pub(crate) const CHUNK_BYTES: usize = 4 << 20;

/// A listing's offset no store reaches (about 10^12 jobs): a page that
/// starts further is read as one that starts here, and is empty.
pub(crate) const MAX_OFFSET: usize = 1 << 40;

/// On a queue of several partitions, a page must end within this many
/// jobs: each partition is read from its start up to the page's end.
pub(crate) const MAX_PARTITIONED_END: usize = 10_000;

/// The most partitions a queue may have.
pub(crate) const MAX_PARTITIONS: u32 = 1024;

/// A duration in whole milliseconds, rounded up (never early).
pub(crate) fn millis_up(d: Duration) -> u64 {
    let ms = d.as_millis() + u128::from(d.subsec_nanos() % 1_000_000 != 0);
    u64::try_from(ms).unwrap_or(u64::MAX)
}

/// A time in ms since the Unix epoch.
pub(crate) fn at_ms(ms: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn millis_round_up() {
        assert_eq!(millis_up(Duration::ZERO), 0);
        assert_eq!(millis_up(Duration::from_micros(1)), 1);
        assert_eq!(millis_up(Duration::from_millis(5)), 5);
        assert_eq!(millis_up(Duration::from_micros(5001)), 6);
        assert_eq!(millis_up(Duration::MAX), u64::MAX);
    }
}
