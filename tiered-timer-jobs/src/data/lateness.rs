//! How late claims were: [`Lateness`], a histogram of fixed buckets that
//! every backend keeps with its jobs (Redis in a `BITFIELD` per partition,
//! the embedded store in its log's index), read by
//! [`Queue::lateness`](crate::Queue::lateness).
//!
//! Ground rules:
//!
//! * Lateness is the deciding clock's now at the claim minus the job's due
//!   time, both on that clock (Redis' `TIME`, or the embedded store's
//!   host), counted where the claim is made; no client clock is involved.
//! * Recording is bounded: per bucket of [`LATENESS_BOUNDS_MS`] a
//!   saturating counter, so the histogram is a few dozen bytes per
//!   partition, forever.
//! * The counters only grow: "recent" lateness is the difference of two
//!   reads ([`Lateness::since`]), which is what the dashboard charts.

use std::time::Duration;

/// The upper bounds (inclusive, in ms) of the lateness histogram's
/// buckets; a last bucket counts everything later. The Redis claim
/// script's `record_lateness` (`src/redis/lua/record_lateness.lua`) has
/// the same list.
pub(crate) const LATENESS_BOUNDS_MS: [u64; 19] = [
    0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 30_000, 60_000, 300_000,
    900_000, 3_600_000,
];

/// A histogram of how late jobs were claimed (Redis' now at the claim
/// minus the due time), from [`Queue::lateness`](crate::Queue::lateness).
///
/// Buckets are fixed: 0 ms (on time to the millisecond), up to 1, 2, 5, 10,
/// 20, 50, 100, 200, 500 ms, 1, 2, 5, 10, 30 s, 1, 5, 15 min, 1 h, and
/// later. Counts only grow (each saturates at `u32::MAX` per partition);
/// subtract an earlier read with [`since`](Lateness::since) for a recent
/// window.
///
/// # Examples
///
/// ```no_run
/// # use tiered_timer_jobs::Queue;
/// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
/// let before = queue.lateness().await?;
/// tokio::time::sleep(std::time::Duration::from_secs(60)).await;
/// let last_minute = queue.lateness().await?.since(&before);
/// println!("{} claims, 99% within {:?}", last_minute.total(), last_minute.quantile(0.99));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Lateness {
    counts: Vec<u64>,
}

impl Lateness {
    /// The buckets: each one's upper bound (inclusive; `None` for the last,
    /// which has none) and its count.
    ///
    /// # Examples
    ///
    /// ```
    /// let empty = tiered_timer_jobs::Lateness::default();
    /// let buckets = empty.buckets();
    /// assert_eq!(buckets.len(), 20);
    /// assert_eq!(buckets[0], (Some(std::time::Duration::ZERO), 0));
    /// assert_eq!(buckets[19].0, None);
    /// ```
    pub fn buckets(&self) -> Vec<(Option<Duration>, u64)> {
        let bounds = LATENESS_BOUNDS_MS
            .iter()
            .map(|&ms| Some(Duration::from_millis(ms)))
            .chain([None]);
        bounds
            .enumerate()
            .map(|(i, bound)| (bound, self.counts.get(i).copied().unwrap_or(0)))
            .collect()
    }

    /// How many claims were counted.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(tiered_timer_jobs::Lateness::default().total(), 0);
    /// ```
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The upper bound of the bucket holding the `q`-quantile (`q` in
    /// 0..=1): "a fraction `q` of the claims were at most this late".
    /// `None` if nothing was counted, or if the quantile falls in the last
    /// bucket (later than an hour).
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(tiered_timer_jobs::Lateness::default().quantile(0.5), None);
    /// ```
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        let total = self.total();
        if total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (bound, count) in self.buckets() {
            seen += count;
            if seen >= rank {
                return bound;
            }
        }
        None
    }

    /// The claims counted in `self` but not in `earlier` (an older read of
    /// the same queue): the lateness of the claims in between.
    ///
    /// # Examples
    ///
    /// ```
    /// use tiered_timer_jobs::Lateness;
    /// assert_eq!(Lateness::default().since(&Lateness::default()).total(), 0);
    /// ```
    pub fn since(&self, earlier: &Lateness) -> Lateness {
        let counts = (0..self.counts.len().max(earlier.counts.len()))
            .map(|i| {
                let now = self.counts.get(i).copied().unwrap_or(0);
                now.saturating_sub(earlier.counts.get(i).copied().unwrap_or(0))
            })
            .collect();
        Lateness { counts }
    }

    /// A histogram from its counts, bucket by bucket (in the order of
    /// [`LATENESS_BOUNDS_MS`], then the last bucket).
    pub(crate) fn from_counts(counts: Vec<u64>) -> Lateness {
        Lateness { counts }
    }

    /// Adds `other`'s counts to these, bucket by bucket (a queue's
    /// partitions, summed).
    // Only a backend with several partitions per queue sums histograms.
    #[allow(dead_code)]
    pub(crate) fn add(&mut self, other: &Lateness) {
        if self.counts.len() < other.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine = mine.saturating_add(*theirs);
        }
    }
}
