//! `interval` and `interval_at`, in the style of tokio's `time_interval`
//! tests: exact schedules under paused time for each missed-tick behaviour.

mod support;

use std::future::poll_fn;
use std::task::Poll;
use std::time::Duration;

use support::ms;
use tiered_timer::{interval, interval_at, Instant, Interval, MissedTickBehavior};
use tokio::time;
use tokio_test::{assert_pending, task};

/// Polls the interval's next tick once.
fn poll_next(i: &mut task::Spawn<Interval>) -> Poll<Instant> {
    i.enter(|cx, mut i| i.poll_tick(cx))
}

/// Asserts that the interval ticks now, for the tick scheduled at
/// `start + ms(offset)`.
macro_rules! assert_tick {
    ($i:expr, $start:expr, $offset:expr) => {{
        match poll_next(&mut $i) {
            Poll::Ready(at) => assert_eq!(at, $start + ms($offset), "tick at the wrong instant"),
            Poll::Pending => panic!("expected the tick for {} ms", $offset),
        }
    }};
}

#[tokio::test(start_paused = true)]
#[should_panic(expected = "`period` must be non-zero.")]
async fn zero_period_panics() {
    let _ = interval(Duration::ZERO);
}

#[tokio::test(start_paused = true)]
#[should_panic(expected = "`period` must be non-zero.")]
async fn zero_period_interval_at_panics() {
    let _ = interval_at(Instant::now(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn first_tick_is_immediate_then_every_period() {
    let start = Instant::now();
    let mut i = task::spawn(interval(ms(300)));
    assert_tick!(i, start, 0);
    assert_pending!(poll_next(&mut i));
    time::advance(ms(299)).await;
    assert!(!i.is_woken());
    assert_pending!(poll_next(&mut i));
    time::advance(ms(1)).await;
    assert!(i.is_woken());
    assert_tick!(i, start, 300);
    assert_pending!(poll_next(&mut i));
}

/// The shared part of the missed-tick scenarios: ticks at 0 and 300, then
/// the task wakes up at 950, late for the tick at 600.
async fn late_at_950(behavior: MissedTickBehavior) -> (Instant, task::Spawn<Interval>) {
    let start = Instant::now();
    let mut i = task::spawn(interval_at(start, ms(300)));
    i.enter(|_, mut i| i.set_missed_tick_behavior(behavior));
    assert_tick!(i, start, 0);
    time::advance(ms(100)).await;
    assert_pending!(poll_next(&mut i));
    time::advance(ms(200)).await;
    assert_tick!(i, start, 300);
    time::advance(ms(650)).await;
    assert_tick!(i, start, 600);
    (start, i)
}

#[tokio::test(start_paused = true)]
async fn burst_catches_up_on_the_original_schedule() {
    let (start, mut i) = late_at_950(MissedTickBehavior::Burst).await;
    assert_tick!(i, start, 900);
    assert_pending!(poll_next(&mut i));
    time::advance(ms(250)).await;
    assert_tick!(i, start, 1200);
    assert_pending!(poll_next(&mut i));
}

#[tokio::test(start_paused = true)]
async fn delay_shifts_the_schedule() {
    let (start, mut i) = late_at_950(MissedTickBehavior::Delay).await;
    assert_pending!(poll_next(&mut i));
    time::advance(ms(299)).await;
    assert_pending!(poll_next(&mut i));
    time::advance(ms(1)).await;
    assert_tick!(i, start, 1250);
    time::advance(ms(300)).await;
    assert_tick!(i, start, 1550);
}

#[tokio::test(start_paused = true)]
async fn skip_resumes_at_the_next_multiple() {
    let (start, mut i) = late_at_950(MissedTickBehavior::Skip).await;
    assert_pending!(poll_next(&mut i));
    time::advance(ms(249)).await;
    assert_pending!(poll_next(&mut i));
    time::advance(ms(1)).await;
    assert_tick!(i, start, 1200);
    time::advance(ms(300)).await;
    assert_tick!(i, start, 1500);
}

#[tokio::test(start_paused = true)]
async fn slightly_late_tick_is_not_missed() {
    // Under 5 ms late keeps the schedule, whatever the behaviour (tokio's rule).
    let start = Instant::now();
    let mut i = task::spawn(interval_at(start, ms(100)));
    i.enter(|_, mut i| i.set_missed_tick_behavior(MissedTickBehavior::Delay));
    assert_tick!(i, start, 0);
    time::advance(ms(104)).await;
    assert_tick!(i, start, 100);
    time::advance(ms(96)).await;
    assert_tick!(i, start, 200);
}

#[tokio::test(start_paused = true)]
async fn reset() {
    let start = Instant::now();
    let mut i = task::spawn(interval_at(start, ms(300)));
    assert_tick!(i, start, 0);
    time::advance(ms(100)).await;
    assert_pending!(poll_next(&mut i));
    i.enter(|_, mut i| i.reset());
    time::advance(ms(250)).await;
    assert_pending!(poll_next(&mut i));
    time::advance(ms(50)).await;
    assert_tick!(i, start, 400);
}

#[tokio::test(start_paused = true)]
async fn reset_immediately() {
    let start = Instant::now();
    let mut i = task::spawn(interval_at(start, ms(300)));
    assert_tick!(i, start, 0);
    time::advance(ms(100)).await;
    i.enter(|_, mut i| i.reset_immediately());
    assert_tick!(i, start, 100);
    time::advance(ms(300)).await;
    assert_tick!(i, start, 400);
}

#[tokio::test(start_paused = true)]
async fn reset_after() {
    let start = Instant::now();
    let mut i = task::spawn(interval_at(start, ms(300)));
    assert_tick!(i, start, 0);
    time::advance(ms(100)).await;
    i.enter(|_, mut i| i.reset_after(ms(20)));
    time::advance(ms(19)).await;
    assert_pending!(poll_next(&mut i));
    time::advance(ms(1)).await;
    assert_tick!(i, start, 120);
}

#[tokio::test(start_paused = true)]
async fn reset_at_and_accessors() {
    let start = Instant::now();
    let mut i = interval_at(start, ms(300));
    assert_eq!(i.period(), ms(300));
    assert_eq!(i.missed_tick_behavior(), MissedTickBehavior::Burst);
    i.reset_at(start + ms(42));
    assert_eq!(i.tick().await, start + ms(42));
    assert_eq!(i.tick().await, start + ms(342));
}

/// As tokio: a next tick that overflows `Instant` is at the far future,
/// 30 years on, which paused time reaches.
#[tokio::test(start_paused = true)]
async fn huge_period_ticks_next_at_the_far_future() {
    let start = Instant::now();
    let thirty_years = Duration::from_secs(86_400 * 365 * 30);
    let mut i = task::spawn(interval_at(start, Duration::MAX));
    assert_tick!(i, start, 0);
    assert_pending!(poll_next(&mut i));
    time::advance(thirty_years - ms(1)).await;
    assert!(!i.is_woken());
    assert_pending!(poll_next(&mut i));
    time::advance(ms(1)).await;
    assert!(i.is_woken());
    assert_tick!(i, start, thirty_years.as_millis() as u64);
}

#[tokio::test(start_paused = true)]
async fn tick_is_cancel_safe() {
    let start = Instant::now();
    let mut i = interval_at(start, ms(10));
    assert_eq!(i.tick().await, start);
    tokio::select! {
        _ = i.tick() => panic!("not due yet"),
        _ = time::sleep(ms(5)) => {}
    }
    assert_eq!(i.tick().await, start + ms(10));
}

#[tokio::test(start_paused = true)]
async fn poll_tick_through_poll_fn() {
    let start = Instant::now();
    let mut i = interval(ms(7));
    let mut ticks = Vec::new();
    for _ in 0..4 {
        ticks.push(poll_fn(|cx| i.poll_tick(cx)).await - start);
    }
    assert_eq!(ticks, vec![ms(0), ms(7), ms(14), ms(21)]);
}

#[tokio::test(start_paused = true)]
async fn huge_period_keeps_its_far_tick_pending() {
    let handle = tiered_timer::Handle::current();
    let start = Instant::now() + ms(10);
    let mut i = task::spawn(interval_at(start, Duration::MAX));
    assert_pending!(poll_next(&mut i));
    assert_eq!(handle.pending(), 1);
    time::advance(ms(10)).await;
    assert_tick!(i, start, 0);
    // The next tick is 30 years away, and counted like any other.
    assert_eq!(handle.pending(), 1);
    assert_pending!(poll_next(&mut i));
    i.enter(|_, mut i| i.reset_after(ms(5)));
    assert_eq!(handle.pending(), 1);
    time::advance(ms(5)).await;
    assert_tick!(i, start, 5);
    assert_eq!(handle.pending(), 1);
    drop(i);
    assert_eq!(handle.pending(), 0);
}

// ----- Scenarios of tokio's own tests/time_interval.rs -------------------------

/// tokio's `reset_doesnt_panic_max_duration`.
#[tokio::test]
async fn reset_doesnt_panic_max_duration() {
    let mut i = interval(Duration::MAX);
    i.reset();
}

/// tokio's `reset_after_doesnt_panic_max_duration`.
#[tokio::test]
async fn reset_after_doesnt_panic_max_duration() {
    let mut i = interval(ms(1));
    i.reset_after(Duration::MAX);
}

/// tokio's `interval_doesnt_panic_max_duration_when_polling`.
#[tokio::test(start_paused = true)]
async fn interval_doesnt_panic_max_duration_when_polling() {
    let mut i = task::spawn(interval(Duration::MAX));
    assert!(poll_next(&mut i).is_ready());
}

/// tokio's `reset_at_bigger_than_interval`, with the same instants.
#[tokio::test(start_paused = true)]
async fn reset_at_bigger_than_interval() {
    let start = Instant::now();
    time::advance(ms(1)).await;
    let mut i = task::spawn(interval_at(start, ms(300)));
    assert_tick!(i, start, 0);
    time::advance(ms(100)).await;
    assert_pending!(poll_next(&mut i));
    time::advance(ms(200)).await;
    assert_tick!(i, start, 300);
    time::advance(ms(100)).await;
    assert_pending!(poll_next(&mut i));
    i.enter(|_, mut i| i.reset_at(Instant::now() + Duration::from_millis(1000)));
    for _ in 0..3 {
        time::advance(ms(300)).await;
        assert_pending!(poll_next(&mut i));
    }
    time::advance(ms(100)).await;
    assert_tick!(i, start, 1401);
    time::advance(ms(300)).await;
    assert_tick!(i, start, 1701);
}

// ----- Side by side with tokio's own Interval ----------------------------------

/// What to do to both intervals before the clock moves on.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// Advance the paused clock by this many ms, then take every tick that
    /// is ready.
    Advance(u64),
    Reset,
    ResetImmediately,
    ResetAfter(u64),
    /// `reset_at(now + ms)`.
    ResetAt(u64),
}

/// Takes every ready tick (at most 1000), as offsets from `start`.
fn drain<F: FnMut() -> Poll<Instant>>(start: Instant, mut poll: F) -> Vec<Duration> {
    let mut ticks = Vec::new();
    while let Poll::Ready(at) = poll() {
        ticks.push(at - start);
        assert!(ticks.len() < 1000, "an interval ticked without end");
    }
    ticks
}

/// Runs `steps` on our interval and on tokio's, on the same paused clock,
/// and asserts that they tick at the same instants, step by step.
async fn same_ticks_as_tokio(behavior: MissedTickBehavior, period: u64, steps: &[Step]) {
    let tokio_behavior = match behavior {
        MissedTickBehavior::Burst => time::MissedTickBehavior::Burst,
        MissedTickBehavior::Delay => time::MissedTickBehavior::Delay,
        MissedTickBehavior::Skip => time::MissedTickBehavior::Skip,
    };
    let start = Instant::now();
    let mut ours = task::spawn(interval_at(start, ms(period)));
    let mut theirs = task::spawn(time::interval_at(start, ms(period)));
    ours.enter(|_, mut i| i.set_missed_tick_behavior(behavior));
    theirs.enter(|_, mut i| i.set_missed_tick_behavior(tokio_behavior));
    for (n, step) in steps.iter().enumerate() {
        match *step {
            Step::Advance(by) => time::advance(ms(by)).await,
            Step::Reset => {
                ours.enter(|_, mut i| i.reset());
                theirs.enter(|_, mut i| i.reset());
            }
            Step::ResetImmediately => {
                ours.enter(|_, mut i| i.reset_immediately());
                theirs.enter(|_, mut i| i.reset_immediately());
            }
            Step::ResetAfter(after) => {
                ours.enter(|_, mut i| i.reset_after(ms(after)));
                theirs.enter(|_, mut i| i.reset_after(ms(after)));
            }
            Step::ResetAt(after) => {
                let at = Instant::now() + ms(after);
                ours.enter(|_, mut i| i.reset_at(at));
                theirs.enter(|_, mut i| i.reset_at(at));
            }
        }
        let ours_ticks = drain(start, || ours.enter(|cx, mut i| i.poll_tick(cx)));
        let their_ticks = drain(start, || theirs.enter(|cx, mut i| i.poll_tick(cx)));
        assert_eq!(
            ours_ticks, their_ticks,
            "{behavior:?}, period {period} ms, step {n} ({step:?}): ours vs tokio's"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn ticks_like_tokios_interval_for_every_behavior_and_reset() {
    use Step::*;
    // On time, slightly late (under 5 ms), late by several periods, resets
    // of every kind, late again after a reset.
    let steps = [
        Advance(0),
        Advance(10),
        Advance(3),
        Advance(7),
        Advance(14),
        Advance(36),
        Advance(1),
        Reset,
        Advance(9),
        Advance(1),
        Advance(47),
        ResetImmediately,
        Advance(2),
        ResetAfter(23),
        Advance(22),
        Advance(1),
        Advance(100),
        ResetAt(15),
        Advance(15),
        Advance(4),
        Advance(6),
        Advance(33),
        Advance(10),
    ];
    for behavior in [
        MissedTickBehavior::Burst,
        MissedTickBehavior::Delay,
        MissedTickBehavior::Skip,
    ] {
        for period in [10, 7, 1] {
            // Unconstrained: a burst of catch-up ticks spends more of the
            // task's cooperative budget than a turn allows, and both
            // timers honour it (they would stop after 128 ticks between them).
            tokio::task::unconstrained(same_ticks_as_tokio(behavior, period, &steps)).await;
        }
    }
}
