//! Conversions between instants and the wheel's integer ticks.
//!
//! This is where the never-early rule is made exact: a deadline is rounded
//! *up* to the next tick boundary and the current time *down*, so
//! `now_tick(now) >= deadline_tick(deadline)` implies `now >= deadline`.

use std::time::Duration;

use crate::Instant;

/// Ticks at or above this are "never": the entry is not filed at all.
/// (With a 1 ms tick this is over 500 million years away; with the default
/// 250 µs, over 140 million.)
pub(crate) const NEVER: u64 = u64::MAX - 2;

/// The timer's time base: tick `t` is the instant `origin + t * tick`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ticks {
    origin: Instant,
    tick_ns: u64,
    /// `u64::MAX / tick_ns`: dividing by a multiplication (see [`Ticks::div`]).
    reciprocal: u64,
}

impl Ticks {
    /// A time base starting at `origin` with ticks of `tick` (non-zero, at
    /// most `u64::MAX` nanoseconds: the builder checks both).
    pub(crate) fn new(origin: Instant, tick: Duration) -> Ticks {
        let tick_ns = u64::try_from(tick.as_nanos()).expect("tick checked by the builder");
        assert!(tick_ns > 0, "tick checked by the builder");
        Ticks {
            origin,
            tick_ns,
            reciprocal: u64::MAX / tick_ns,
        }
    }

    /// `(nanos / tick_ns, nanos % tick_ns)`, without a division instruction.
    ///
    /// Every registration converts instants to ticks, and a 64-bit division
    /// costs tens of cycles. With `r = floor((2^64 - 1) / d)`, the estimate
    /// `q = floor(n * r / 2^64)` is at most the true quotient and at most
    /// two below it (`n / d - n * r / 2^64 <= n / 2^64 < 1`, plus one for
    /// flooring), so at most two correction steps make it exact.
    fn div(&self, nanos: u64) -> (u64, u64) {
        let mut quotient = ((u128::from(nanos) * u128::from(self.reciprocal)) >> 64) as u64;
        let mut rem = nanos - quotient * self.tick_ns;
        while rem >= self.tick_ns {
            quotient += 1;
            rem -= self.tick_ns;
        }
        (quotient, rem)
    }

    /// The first tick boundary at or after `deadline`; `NEVER` if that is
    /// out of range. Deadlines before the origin map to tick 0 (due at once).
    pub(crate) fn deadline_tick(&self, deadline: Instant) -> u64 {
        let Some(since) = deadline.checked_duration_since(self.origin) else {
            return 0;
        };
        // 64-bit division when the span fits (584 years), 128-bit beyond:
        // this runs on every registration.
        let ticks = match u64::try_from(since.as_nanos()) {
            Ok(nanos) => {
                let (quotient, rem) = self.div(nanos);
                u128::from(quotient + u64::from(rem > 0))
            }
            Err(_) => since.as_nanos().div_ceil(u128::from(self.tick_ns)),
        };
        u64::try_from(ticks).map_or(NEVER, |t| t.min(NEVER))
    }

    /// The last tick boundary at or before `now`.
    pub(crate) fn now_tick(&self, now: Instant) -> u64 {
        let since = now.saturating_duration_since(self.origin);
        let ticks = match u64::try_from(since.as_nanos()) {
            Ok(nanos) => u128::from(self.div(nanos).0),
            Err(_) => since.as_nanos() / u128::from(self.tick_ns),
        };
        u64::try_from(ticks).map_or(NEVER - 1, |t| t.min(NEVER - 1))
    }

    /// The instant of tick boundary `tick`, if `Instant` can represent it.
    pub(crate) fn instant_of(&self, tick: u64) -> Option<Instant> {
        if tick >= NEVER {
            return None;
        }
        if let Some(nanos) = tick.checked_mul(self.tick_ns) {
            // Within 584 years: no 128-bit division (a `DelayQueue` reports
            // a deadline for every value it hands out).
            return self.origin.checked_add(Duration::from_nanos(nanos));
        }
        let nanos = u128::from(tick) * u128::from(self.tick_ns);
        let secs = u64::try_from(nanos / 1_000_000_000).ok()?;
        let offset = Duration::new(secs, (nanos % 1_000_000_000) as u32);
        self.origin.checked_add(offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_round_up_and_now_rounds_down() {
        let origin = Instant::now();
        let ticks = Ticks::new(origin, Duration::from_millis(10));
        let at = |ms: u64| origin + Duration::from_millis(ms);
        assert_eq!(ticks.deadline_tick(at(0)), 0);
        assert_eq!(ticks.deadline_tick(at(1)), 1);
        assert_eq!(ticks.deadline_tick(at(10)), 1);
        assert_eq!(ticks.deadline_tick(at(11)), 2);
        assert_eq!(ticks.now_tick(at(19)), 1);
        assert_eq!(ticks.now_tick(at(20)), 2);
        assert_eq!(ticks.instant_of(2), Some(at(20)));
        // Before the origin: due at once.
        assert_eq!(ticks.deadline_tick(origin - Duration::from_secs(1)), 0);
        assert_eq!(ticks.now_tick(origin - Duration::from_secs(1)), 0);
    }

    #[test]
    fn never_early_at_every_nanosecond_offset() {
        let origin = Instant::now();
        let ticks = Ticks::new(origin, Duration::from_micros(1_500));
        for offset in (0..10_000_000u64).step_by(99_991) {
            let deadline = origin + Duration::from_nanos(offset);
            let tick = ticks.deadline_tick(deadline);
            let fires_at = ticks.instant_of(tick).unwrap();
            assert!(fires_at >= deadline, "tick {tick} fires before {offset} ns");
            assert!(fires_at - deadline < Duration::from_micros(1_500));
            assert_eq!(ticks.now_tick(fires_at), tick);
            assert_eq!(
                ticks.now_tick(fires_at - Duration::from_nanos(1)),
                tick.saturating_sub(1)
            );
        }
    }

    #[test]
    fn division_by_reciprocal_is_exact() {
        let origin = Instant::now();
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut divisors = vec![
            1,
            2,
            3,
            7,
            999_999,
            1_000_000,
            1_500_000,
            10_000_000,
            u64::MAX,
        ];
        divisors.extend((0..200).map(|_| (next() >> (next() % 64)).max(1)));
        for d in divisors {
            let ticks = Ticks::new(origin, Duration::from_nanos(d));
            let mut numerators = vec![0, 1, d - 1, d, d.wrapping_add(1), u64::MAX, u64::MAX - 1];
            numerators.extend((0..500).map(|_| next() >> (next() % 64)));
            for n in numerators {
                assert_eq!(ticks.div(n), (n / d, n % d), "{n} / {d}");
            }
        }
    }

    #[test]
    fn far_future_is_never() {
        let origin = Instant::now();
        let ticks = Ticks::new(origin, Duration::from_nanos(1));
        let far = origin + Duration::from_secs(u64::MAX / 1_000_000_000 + 10);
        assert_eq!(ticks.deadline_tick(far), NEVER);
        assert_eq!(ticks.instant_of(NEVER), None);
    }
}
