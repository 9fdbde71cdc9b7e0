//! The statistics the programs report: the median of runs, and quantiles
//! of samples. One definition for every table, so that "median" and "p99"
//! mean the same thing in each.
//!
//! - [`median`]: the middle value of the runs once sorted; for an even count
//!   the upper of the two middle ones, so that it is always a value some run
//!   measured (the bar the plots draw, see [`crate::plot::Bar`]);
//! - [`quantile`]: nearest rank, the rank `(n - 1) * q` rounded: p50 of
//!   1 000 000 samples is the 500 000th smallest (0-based), p99 the
//!   989 999th, max the last.

/// The median of `values`; NaN if there are none.
///
/// # Examples
///
/// ```
/// use tiered_timer_benchmarks::stats::median;
///
/// assert_eq!(median([3.0, 1.0, 2.0]), 2.0);
/// assert_eq!(median([4.0, 1.0, 3.0, 2.0]), 3.0); // the upper middle
/// assert!(median([]).is_nan());
/// ```
pub fn median(values: impl IntoIterator<Item = f64>) -> f64 {
    let mut sorted: Vec<f64> = values.into_iter().collect();
    sorted.sort_by(f64::total_cmp);
    quantile(&sorted, 0.5).unwrap_or(f64::NAN)
}

/// The sample at quantile `q` (0 to 1) of `sorted` (ascending), by nearest
/// rank; `None` if there are no samples.
///
/// # Examples
///
/// ```
/// use tiered_timer_benchmarks::stats::quantile;
///
/// let sorted: Vec<u64> = (1..=100).collect();
/// assert_eq!(quantile(&sorted, 0.5), Some(51));
/// assert_eq!(quantile(&sorted, 0.99), Some(99));
/// assert_eq!(quantile(&sorted, 1.0), Some(100));
/// assert_eq!(quantile::<u64>(&[], 0.5), None);
/// ```
pub fn quantile<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    let last = sorted.len().checked_sub(1)?;
    let rank = (last as f64 * q.clamp(0.0, 1.0)).round() as usize;
    sorted.get(rank).copied()
}

/// Lateness p50, p99 and max, in ms, of `samples` in ns (sorted here);
/// NaN for none.
///
/// # Examples
///
/// ```
/// use tiered_timer_benchmarks::stats::lateness_ms;
///
/// let mut late = vec![3_000_000, 1_000_000, 2_000_000];
/// assert_eq!(lateness_ms(&mut late), [2.0, 3.0, 3.0]);
/// ```
pub fn lateness_ms(samples: &mut [u64]) -> [f64; 3] {
    samples.sort_unstable();
    let ms = |q: f64| quantile(samples, q).map_or(f64::NAN, |ns| ns as f64 / 1e6);
    [ms(0.5), ms(0.99), ms(1.0)]
}
