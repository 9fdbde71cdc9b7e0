//! Time as the wheels count it: conversions between instants and integer
//! ticks, shared by the timer's driver and by `DelayQueue`.
//!
//! This is where the never-early rule is made exact: a deadline is rounded
//! *up* to the next tick boundary and the current time *down*, so
//! `now_tick(now) >= deadline_tick(deadline)` implies `now >= deadline`.
//!
//! A timer serves deadlines up to its last tick, [`Ticks::last`] (with the
//! default 250 µs tick, about 146 million years out). A deadline past it,
//! or one `Instant` cannot represent, is first clamped to the far future
//! ([`Ticks::clamp`]), as tokio does, and the clamped instant is what the
//! caller reports as its deadline: so it is filed like any other, and
//! still never fires before the deadline it reports.

use std::time::Duration;

use crate::Instant;

const NANOS_PER_SEC: u64 = 1_000_000_000;

/// The largest tick a timer serves: two below `u64::MAX`, from when the
/// deadline words kept markers above it (see `deadlines`); kept, as the
/// last two ticks of a 584-year range serve nobody.
pub(crate) const MAX_TICK: u64 = u64::MAX - 2;

/// The timer's time base: tick `t` is the instant `origin + t * tick`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ticks {
    origin: Instant,
    tick_ns: u64,
    /// `u64::MAX / tick_ns`: dividing by a multiplication (see [`Ticks::div`]).
    reciprocal: u64,
    /// The last tick served: the latest one up to [`MAX_TICK`] whose
    /// instant `Instant` can represent.
    last_tick: u64,
    /// The instant of `last_tick`.
    last: Instant,
}

impl Ticks {
    /// A time base starting at `origin` with ticks of `tick` (non-zero, at
    /// most `u64::MAX` nanoseconds: the builder checks both).
    pub(crate) fn new(origin: Instant, tick: Duration) -> Ticks {
        let tick_ns = u64::try_from(tick.as_nanos()).expect("tick checked by the builder");
        assert!(tick_ns > 0, "tick checked by the builder");
        let mut ticks = Ticks {
            origin,
            tick_ns,
            reciprocal: u64::MAX / tick_ns,
            last_tick: 0,
            last: origin,
        };
        // Whether a tick's instant is representable is monotone in the
        // tick, and tick 0 (the origin) is: search for the last one.
        let (mut lo, mut hi) = (0, MAX_TICK);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if ticks.checked_instant_of(mid).is_some() {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        ticks.last_tick = lo;
        ticks.last = ticks.checked_instant_of(lo).expect("found representable");
        ticks
    }

    /// The last instant the timer serves: a deadline up to it is filed as
    /// it is; a later one must be [clamped](Ticks::clamp) first.
    #[inline]
    pub(crate) fn last(&self) -> Instant {
        self.last
    }

    /// The deadline to use for `deadline` (`None`: `Instant` cannot
    /// represent it): itself if the timer serves it, otherwise the far
    /// future (about 30 years after `now()`, as tokio clamps), or the last
    /// instant the timer serves if that is sooner. `now` is read only then.
    pub(crate) fn clamp(
        &self,
        deadline: Option<Instant>,
        now: impl FnOnce() -> Instant,
    ) -> Instant {
        match deadline {
            Some(deadline) if deadline <= self.last => deadline,
            _ => far_future(now()).min(self.last),
        }
    }

    /// `(nanos / tick_ns, nanos % tick_ns)`, without a division instruction.
    ///
    /// Every registration converts instants to ticks, and a 64-bit division
    /// costs tens of cycles. With `r = floor((2^64 - 1) / d)`, the estimate
    /// `q = floor(n * r / 2^64)` is at most the true quotient and at most
    /// two below it (`n / d - n * r / 2^64 <= n / 2^64 < 1`, plus one for
    /// flooring), so at most two correction steps make it exact.
    #[inline]
    fn div(&self, nanos: u64) -> (u64, u64) {
        let mut quotient = ((u128::from(nanos) * u128::from(self.reciprocal)) >> 64) as u64;
        let mut rem = nanos - quotient * self.tick_ns;
        while rem >= self.tick_ns {
            quotient += 1;
            rem -= self.tick_ns;
        }
        (quotient, rem)
    }

    /// The first tick boundary at or after `deadline`. Deadlines before the
    /// origin map to tick 0 (due at once); those after [`Ticks::last`] to
    /// the last tick, which would be early: callers [clamp](Ticks::clamp)
    /// them first.
    #[inline]
    pub(crate) fn deadline_tick(&self, deadline: Instant) -> u64 {
        let Some(since) = deadline.checked_duration_since(self.origin) else {
            return 0;
        };
        // 64-bit arithmetic when the span fits (584 years), 128-bit beyond:
        // this runs on every registration and reset.
        let nanos = since
            .as_secs()
            .checked_mul(NANOS_PER_SEC)
            .and_then(|nanos| nanos.checked_add(u64::from(since.subsec_nanos())));
        let Some(nanos) = nanos else {
            return self.wide_deadline_tick(since);
        };
        let (quotient, rem) = self.div(nanos);
        // No overflow: with a tick of 1 ns the remainder is 0, with a
        // longer one the quotient is at most half of `u64::MAX`.
        (quotient + u64::from(rem > 0)).min(self.last_tick)
    }

    /// [`Ticks::deadline_tick`] for a span past `u64` nanoseconds.
    #[cold]
    fn wide_deadline_tick(&self, since: Duration) -> u64 {
        let ticks = since.as_nanos().div_ceil(u128::from(self.tick_ns));
        u64::try_from(ticks).map_or(self.last_tick, |t| t.min(self.last_tick))
    }

    /// The last tick boundary at or before `now` (at most the last tick).
    pub(crate) fn now_tick(&self, now: Instant) -> u64 {
        let since = now.saturating_duration_since(self.origin);
        let ticks = match u64::try_from(since.as_nanos()) {
            Ok(nanos) => u128::from(self.div(nanos).0),
            Err(_) => since.as_nanos() / u128::from(self.tick_ns),
        };
        u64::try_from(ticks).map_or(self.last_tick, |t| t.min(self.last_tick))
    }

    /// The instant of tick boundary `tick`; of the last tick for a later
    /// one (never filed: deadlines are clamped to the last tick).
    pub(crate) fn instant_of(&self, tick: u64) -> Instant {
        if tick >= self.last_tick {
            return self.last;
        }
        self.checked_instant_of(tick)
            .expect("ticks up to the last one are representable")
    }

    /// The instant of tick boundary `tick`, if `Instant` can represent it.
    fn checked_instant_of(&self, tick: u64) -> Option<Instant> {
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

/// The deadline that stands for "forever": about 30 years from `now`, as
/// tokio clamps it, or as far as `Instant` reaches.
pub(crate) fn far_future(now: Instant) -> Instant {
    const THIRTY_YEARS: Duration = Duration::from_secs(86_400 * 365 * 30);
    now.checked_add(THIRTY_YEARS)
        .or_else(|| now.checked_add(Duration::from_secs(86_400)))
        .unwrap_or(now)
}

/// The smaller of two optional ticks, `None` being "never".
pub(crate) fn earliest(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
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
        assert_eq!(ticks.instant_of(2), at(20));
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
            let fires_at = ticks.instant_of(tick);
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
    fn deadlines_past_the_last_tick_clamp_to_the_far_future() {
        let origin = Instant::now();
        let ticks = Ticks::new(origin, Duration::from_nanos(1));
        // u64 nanoseconds: about 584 years.
        let last = ticks.last();
        assert_eq!(last, origin + Duration::from_nanos(MAX_TICK));
        assert_eq!(ticks.deadline_tick(last), MAX_TICK);
        assert_eq!(ticks.instant_of(MAX_TICK), last);
        let thirty_years = Duration::from_secs(86_400 * 365 * 30);
        let now = origin + Duration::from_secs(1);
        let clock = || now;
        // Within range: kept.
        assert_eq!(ticks.clamp(Some(last), clock), last);
        let soon = origin + Duration::from_secs(5);
        assert_eq!(ticks.clamp(Some(soon), || unreachable!()), soon);
        // Past it, or not representable: the far future, which is served.
        let far = origin + Duration::from_secs(u64::MAX / 1_000_000_000 + 10);
        assert_eq!(ticks.clamp(Some(far), clock), now + thirty_years);
        assert_eq!(ticks.clamp(None, clock), now + thirty_years);
        let clamped = ticks.deadline_tick(now + thirty_years);
        assert!(ticks.instant_of(clamped) >= now + thirty_years);
        // Within 30 years of the end of the range: the last instant served.
        let late = last - Duration::from_secs(86_400);
        assert_eq!(ticks.clamp(None, || late), last);
        // The clock saturates at the last tick too.
        assert_eq!(ticks.now_tick(far), MAX_TICK);
    }

    #[test]
    fn a_coarse_tick_is_served_up_to_the_last_representable_instant() {
        let origin = Instant::now();
        // u64::MAX ticks of u64::MAX ns overflow `Instant`: the last tick
        // served is the last whose instant it can represent.
        let ticks = Ticks::new(origin, Duration::from_nanos(u64::MAX));
        let last = ticks.last();
        assert!(last > origin);
        assert!(ticks.deadline_tick(last) < MAX_TICK);
        assert_eq!(ticks.instant_of(ticks.deadline_tick(last)), last);
        assert!(last.checked_add(Duration::from_nanos(u64::MAX)).is_none());
    }
}
