//! One wheel of the hierarchy: `wheel_size` buckets of `tick` each.
//!
//! Level 0 has a tick of one (the timer's tick); level `n` has a tick equal to
//! the whole span (`interval`) of level `n - 1`, so it is `wheel_size^n`
//! base ticks. The level whose span no longer fits in a `u64` covers every
//! remaining deadline, which is what makes the range unbounded.

use super::list::List;

/// A bucket: the entries of one slot, and the expiration the slot currently
/// stands for (`None` while it is not in the bucket queue).
#[derive(Debug)]
pub(super) struct Bucket {
    pub(super) list: List,
    pub(super) expiration: Option<u64>,
}

/// One wheel.
#[derive(Debug)]
pub(super) struct Level {
    /// Width of one bucket, in base ticks.
    tick: u64,
    /// Span of the whole wheel, in base ticks, minus one: the furthest a
    /// deadline it covers lies from the rotation's start. `u64::MAX` when
    /// the span exceeds `u64` (then every deadline is covered).
    reach: u64,
    /// `log2(tick)` and `wheel_size - 1` when the wheel size is a power of
    /// two (the default 64 is), so that finding a slot takes shifts and
    /// masks instead of divisions: filing is on the registration path.
    pow2: Option<(u32, u64)>,
    pub(super) buckets: Box<[Bucket]>,
}

impl Level {
    /// Builds level `index`, or `None` if its tick would not fit in a `u64`
    /// (the level below it already covers every deadline then).
    pub(super) fn new(index: u32, wheel_size: u64) -> Option<Level> {
        let tick = wheel_size.checked_pow(index)?;
        let buckets = (0..wheel_size)
            .map(|_| Bucket {
                list: List::new(),
                expiration: None,
            })
            .collect();
        let pow2 = wheel_size
            .is_power_of_two()
            .then(|| (tick.trailing_zeros(), wheel_size - 1));
        Some(Level {
            tick,
            reach: tick
                .checked_mul(wheel_size)
                .map_or(u64::MAX, |interval| interval - 1),
            pow2,
            buckets,
        })
    }

    /// Whether `deadline` falls within this wheel's current rotation, given
    /// the wheel hierarchy's current time `elapsed` (`deadline >= elapsed`).
    pub(super) fn covers(&self, elapsed: u64, deadline: u64) -> bool {
        debug_assert!(deadline >= elapsed);
        // `start <= elapsed <= deadline`, so this cannot underflow, and
        // comparing the difference avoids overflowing `start + interval`.
        deadline - self.rotation_start(elapsed) <= self.reach
    }

    /// The slot that holds `deadline` in this wheel.
    pub(super) fn slot_of(&self, deadline: u64) -> usize {
        match self.pow2 {
            Some((shift, mask)) => ((deadline >> shift) & mask) as usize,
            None => ((deadline / self.tick) % self.buckets.len() as u64) as usize,
        }
    }

    /// The start of the bucket that holds `deadline`: when that bucket is due.
    pub(super) fn bucket_start(&self, deadline: u64) -> u64 {
        match self.pow2 {
            // `tick` is then a power of two too.
            Some(_) => deadline & !(self.tick - 1),
            None => deadline - deadline % self.tick,
        }
    }

    /// `elapsed` rounded down to this wheel's tick (Kafka's `currentTime`).
    fn rotation_start(&self, elapsed: u64) -> u64 {
        self.bucket_start(elapsed)
    }
}
