//! Model-based test of the whole timer under tokio's paused clock: random
//! sleeps, resets (earlier, later, into the past), drops and advances,
//! checked after every step against the rule a timer must follow.
//!
//! The model is the never-early rule itself: with tick `t` and origin `o`, a
//! sleep with deadline `d` completes exactly when the clock reaches
//! `o + ceil((d - o) / t) * t`. After every step each live sleep is polled
//! and must be ready exactly when that instant has passed, each advance must
//! have woken exactly the sleeps that came due (no lost and no spurious
//! wakeups), and `pending()` must count the registered, unfired sleeps.

use std::time::Duration;

use proptest::prelude::*;
use tiered_timer::{Instant, Sleep, Timer};
use tokio_test::task::{spawn, Spawn};

#[derive(Debug, Clone)]
enum Op {
    /// A new sleep this many ms from now.
    New(u64),
    /// Reset sleep `i` to now plus this many ms (negative: in the past).
    Reset(usize, i64),
    Drop(usize),
    /// Advance the paused clock.
    Advance(u64),
    /// A sleep with a "forever" deadline: `Duration::MAX`, or an `Instant`
    /// past the timer's range. It is clamped to 30 years from now, and
    /// must then behave as any other sleep with that deadline.
    NewFar(u8),
    /// A sleep this many ms from now that is not polled until it is reset:
    /// the reset's next poll registers it, when the wheel may lag the clock.
    NewLazy(u64),
}

fn op() -> impl Strategy<Value = Op> {
    let delay = prop_oneof![4 => 0u64..200, 2 => 0u64..20_000, 1 => 0u64..5_000_000];
    prop_oneof![
        3 => delay.clone().prop_map(Op::New),
        3 => (any::<usize>(), -500i64..20_000).prop_map(|(i, d)| Op::Reset(i, d)),
        1 => any::<usize>().prop_map(Op::Drop),
        4 => prop_oneof![0u64..30, 0u64..2_000, 0u64..6_000_000].prop_map(Op::Advance),
        1 => any::<u8>().prop_map(Op::NewFar),
        1 => delay.prop_map(Op::NewLazy),
    ]
}

/// What tokio clamps a deadline it cannot represent to.
const THIRTY_YEARS: Duration = Duration::from_secs(86_400 * 365 * 30);

/// A "forever" deadline, chosen by `k`: `Duration::MAX` (`None`), or
/// an `Instant` past the timer's range (`u64` ticks), up to the largest
/// `now + 2^i s` that `Instant` can represent.
fn far_deadline(now: Instant, k: u8) -> Option<Instant> {
    if k % 3 == 0 {
        return None;
    }
    (0..=63u32)
        .rev()
        .skip(usize::from(k % 8))
        .find_map(|bit| now.checked_add(Duration::from_secs(1 << bit)))
        // Past u64::MAX ticks of 10 ms (5.8 billion years) at the least.
        .filter(|d| *d > now + Duration::from_secs(1 << 58))
}

struct Live {
    sleep: Spawn<Sleep>,
    /// Whether the last poll returned `Pending` (so a wake is owed when due).
    waiting: bool,
    done: bool,
    /// Not polled (so not registered) until it is reset.
    lazy: bool,
}

/// The instant the model says a deadline fires at.
fn fires_at(origin: Instant, tick: Duration, deadline: Instant) -> Instant {
    let since = deadline.saturating_duration_since(origin).as_nanos();
    let tick_ns = tick.as_nanos();
    let ticks = since.div_ceil(tick_ns);
    origin + Duration::from_nanos((ticks * tick_ns) as u64)
}

fn run(tick_ms: u64, wheel_size: usize, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    // Unconstrained: the checks poll far more sleeps per turn than tokio's
    // cooperative budget allows, which would make ready sleeps look pending.
    rt.block_on(tokio::task::unconstrained(async move {
        let tick = Duration::from_millis(tick_ms);
        let origin = Instant::now();
        let timer = Timer::builder().tick(tick).wheel_size(wheel_size).build();
        let handle = timer.handle();
        let mut live: Vec<Live> = Vec::new();
        for op in ops {
            let now = Instant::now();
            match op {
                Op::New(ms) => live.push(Live {
                    sleep: spawn(handle.sleep(Duration::from_millis(ms))),
                    waiting: false,
                    done: false,
                    lazy: false,
                }),
                Op::NewFar(k) => {
                    let sleep = match far_deadline(now, k) {
                        Some(deadline) => handle.sleep_until(deadline),
                        None => handle.sleep(Duration::MAX),
                    };
                    prop_assert_eq!(sleep.deadline(), now + THIRTY_YEARS);
                    live.push(Live {
                        sleep: spawn(sleep),
                        waiting: false,
                        done: false,
                        lazy: false,
                    });
                }
                Op::NewLazy(ms) => live.push(Live {
                    sleep: spawn(handle.sleep(Duration::from_millis(ms))),
                    waiting: false,
                    done: false,
                    lazy: true,
                }),
                Op::Reset(i, ms) if !live.is_empty() => {
                    let n = live.len();
                    let entry = &mut live[i % n];
                    let deadline = if ms >= 0 {
                        now + Duration::from_millis(ms as u64)
                    } else {
                        now.checked_sub(Duration::from_millis(ms.unsigned_abs()))
                            .unwrap_or(origin)
                    };
                    entry.sleep.enter(|_, sleep| sleep.reset(deadline));
                    entry.done = false;
                    entry.lazy = false;
                }
                Op::Drop(i) if !live.is_empty() => {
                    let n = live.len();
                    live.swap_remove(i % n);
                }
                Op::Advance(ms) => {
                    tokio::time::advance(Duration::from_millis(ms)).await;
                    let now = Instant::now();
                    for entry in &live {
                        let due = fires_at(origin, tick, entry.sleep.deadline()) <= now;
                        if entry.waiting {
                            prop_assert_eq!(
                                entry.sleep.is_woken(),
                                due,
                                "after advancing to {:?}: deadline {:?} woken {} (tick {:?})",
                                now - origin,
                                entry.sleep.deadline() - origin,
                                entry.sleep.is_woken(),
                                tick
                            );
                        }
                    }
                }
                _ => {}
            }
            // Poll every live sleep; each must be ready exactly when due.
            let now = Instant::now();
            let mut registered = 0;
            for entry in live.iter_mut().filter(|entry| !entry.lazy) {
                let due = fires_at(origin, tick, entry.sleep.deadline()) <= now;
                let ready = entry.sleep.poll().is_ready();
                prop_assert_eq!(
                    ready,
                    due,
                    "at {:?}: deadline {:?} ready {} (tick {:?})",
                    now - origin,
                    entry.sleep.deadline() - origin,
                    ready,
                    tick
                );
                prop_assert_eq!(entry.sleep.is_elapsed(), due);
                entry.waiting = !ready;
                entry.done |= ready;
                registered += usize::from(!ready);
            }
            prop_assert_eq!(handle.pending(), registered);
        }
        drop(live);
        prop_assert_eq!(handle.pending(), 0);
        Ok(())
    }))
}

proptest! {
    // 256 cases by default; set PROPTEST_CASES for a longer hunt.
    #![proptest_config(ProptestConfig::default())]

    #[test]
    fn timer_matches_model(
        tick_ms in prop_oneof![Just(1u64), Just(3), Just(10)],
        wheel_size in prop_oneof![Just(2usize), Just(3), 4usize..80],
        ops in prop::collection::vec(op(), 1..80),
    ) {
        run(tick_ms, wheel_size, ops)?;
    }
}

// ----- Scheduled callbacks on a ManualClock ---------------------------------

#[derive(Debug, Clone)]
enum CallbackOp {
    /// `schedule` this many ms from now (`u64::MAX`: `Duration::MAX`).
    Schedule(u64),
    /// `schedule_at` now plus this many ms (negative: in the past;
    /// `i64::MAX`: near `Instant`'s limit).
    ScheduleAt(i64),
    Cancel(usize),
    Advance(u64),
}

fn callback_op() -> impl Strategy<Value = CallbackOp> {
    prop_oneof![
        4 => prop_oneof![8 => 0u64..300, 2 => 0u64..50_000, 1 => Just(u64::MAX)]
            .prop_map(CallbackOp::Schedule),
        2 => prop_oneof![8 => -300i64..300, 1 => Just(i64::MAX)].prop_map(CallbackOp::ScheduleAt),
        2 => any::<usize>().prop_map(CallbackOp::Cancel),
        4 => prop_oneof![0u64..20, 0u64..500, 0u64..60_000].prop_map(CallbackOp::Advance),
    ]
}

struct Callback {
    scheduled: tiered_timer::Scheduled,
    deadline: Instant,
    /// Due at the moment it was scheduled (runs on the driver's next turn,
    /// ahead of the wheel's order).
    due_at_once: bool,
    cancelled: bool,
}

fn add(
    callbacks: &mut Vec<Callback>,
    now: Instant,
    deadline: Option<Instant>,
    result: Result<tiered_timer::Scheduled, tiered_timer::Error>,
) {
    let scheduled = result.expect("no capacity limit, not shut down");
    // Past the timer's range (u64 ticks of 1 ms at the least: 584 million
    // years; the far deadlines here are billions of years out, or
    // overflow), a deadline is clamped to 30 years from now.
    let deadline = match deadline {
        Some(deadline) if deadline < now + 1_000_000 * THIRTY_YEARS => deadline,
        _ => now + THIRTY_YEARS,
    };
    assert_eq!(scheduled.deadline(), deadline);
    callbacks.push(Callback {
        scheduled,
        deadline,
        due_at_once: deadline <= now,
        cancelled: false,
    });
}

fn run_callbacks(
    tick_ms: u64,
    wheel_size: usize,
    ops: Vec<CallbackOp>,
) -> Result<(), TestCaseError> {
    use std::sync::{Arc, Mutex};
    use tiered_timer::clock::{Clock, ManualClock};

    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async move {
        let clock = ManualClock::new();
        let tick = Duration::from_millis(tick_ms);
        let origin = clock.now();
        let timer = Timer::builder()
            .tick(tick)
            .wheel_size(wheel_size)
            .clock(clock.clone())
            .build();
        let handle = timer.handle();
        let log: Arc<Mutex<Vec<(usize, Instant)>>> = Arc::default();
        let mut callbacks: Vec<Callback> = Vec::new();
        let mut seen = 0;
        for op in ops {
            let now = clock.now();
            let id = callbacks.len();
            let record = {
                let log = log.clone();
                let clock = clock.clone();
                move || log.lock().unwrap().push((id, clock.now()))
            };
            match op {
                CallbackOp::Schedule(ms) => {
                    let delay = if ms == u64::MAX {
                        Duration::MAX
                    } else {
                        Duration::from_millis(ms)
                    };
                    add(
                        &mut callbacks,
                        now,
                        now.checked_add(delay),
                        handle.schedule(delay, record),
                    );
                }
                CallbackOp::ScheduleAt(ms) => {
                    let deadline = if ms == i64::MAX {
                        now.checked_add(Duration::from_secs(u64::MAX / 4))
                            .unwrap_or(now + Duration::from_secs(1 << 40))
                    } else if ms >= 0 {
                        now + Duration::from_millis(ms as u64)
                    } else {
                        now.checked_sub(Duration::from_millis(ms.unsigned_abs()))
                            .unwrap_or(origin)
                    };
                    add(
                        &mut callbacks,
                        now,
                        Some(deadline),
                        handle.schedule_at(deadline, record),
                    );
                }
                CallbackOp::Cancel(i) if !callbacks.is_empty() => {
                    let n = callbacks.len();
                    let (i, ran) = {
                        let i = i % n;
                        (i, log.lock().unwrap().iter().any(|&(id, _)| id == i))
                    };
                    let entry = &mut callbacks[i];
                    let stopped = entry.scheduled.cancel();
                    prop_assert_eq!(stopped, !ran && !entry.cancelled, "cancel of {}", i);
                    entry.cancelled |= stopped;
                }
                CallbackOp::Advance(ms) => clock.advance(Duration::from_millis(ms)),
                _ => {}
            }
            for _ in 0..8 {
                tokio::task::yield_now().await;
            }
            let now = clock.now();
            let now_tick = (now - origin).as_nanos() / tick.as_nanos();
            let log = log.lock().unwrap();
            let mut ran = vec![false; callbacks.len()];
            for &(id, at) in log.iter() {
                prop_assert!(!ran[id], "callback {} ran twice", id);
                ran[id] = true;
                prop_assert!(!callbacks[id].cancelled, "callback {} ran after cancel", id);
                prop_assert!(at >= callbacks[id].deadline, "callback {} ran early", id);
            }
            // This step's runs: the wheel's in deadline order.
            let mut last = 0;
            for &(id, _) in &log[seen..] {
                if callbacks[id].due_at_once {
                    continue;
                }
                let tick_of = fires_at(origin, tick, callbacks[id].deadline);
                let k = (tick_of - origin).as_nanos();
                prop_assert!(k >= last, "callback {} ran out of deadline order", id);
                last = k;
            }
            seen = log.len();
            let mut pending = 0;
            for (id, entry) in callbacks.iter().enumerate() {
                let due = entry.deadline <= now
                    && (fires_at(origin, tick, entry.deadline) - origin).as_nanos()
                        / tick.as_nanos()
                        <= now_tick;
                if !entry.cancelled {
                    prop_assert_eq!(ran[id], due, "callback {} at {:?}", id, now - origin);
                }
                pending += usize::from(!entry.cancelled && !ran[id]);
            }
            prop_assert_eq!(handle.pending(), pending);
        }
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn callbacks_match_model(
        tick_ms in prop_oneof![Just(1u64), Just(3), Just(10)],
        wheel_size in prop_oneof![Just(2usize), Just(3), 4usize..80],
        ops in prop::collection::vec(callback_op(), 1..60),
    ) {
        run_callbacks(tick_ms, wheel_size, ops)?;
    }
}

#[tokio::test(start_paused = true)]
async fn extreme_deadlines_through_the_model() {
    // Deadlines at Instant's and Duration's limits next to ordinary ones.
    let timer = Timer::builder()
        .tick(Duration::from_millis(1))
        .wheel_size(2)
        .build();
    let handle = timer.handle();
    let now = Instant::now();
    let far = now.checked_add(Duration::from_secs(u64::MAX / 4));
    let mut forever = spawn(handle.sleep(Duration::MAX));
    let mut far_sleep = far.map(|far| spawn(handle.sleep_until(far)));
    let mut near = spawn(handle.sleep(Duration::from_millis(3)));
    let mut edge = spawn(handle.sleep(Duration::from_millis(u64::MAX / 2)));
    // `forever` and `far` are clamped; `edge` (within 2^64 ticks) is not.
    assert_eq!(forever.deadline(), now + THIRTY_YEARS);
    if let Some(far) = far_sleep.as_ref() {
        assert_eq!(far.deadline(), now + THIRTY_YEARS);
    }
    assert_eq!(edge.deadline(), now + Duration::from_millis(u64::MAX / 2));
    assert!(forever.poll().is_pending());
    if let Some(far) = far_sleep.as_mut() {
        assert!(far.poll().is_pending());
    }
    assert!(near.poll().is_pending());
    assert!(edge.poll().is_pending());
    let clamped = 1 + usize::from(far_sleep.is_some());
    assert_eq!(handle.pending(), clamped + 2);
    tokio::time::advance(Duration::from_millis(3)).await;
    assert!(near.poll().is_ready());
    tokio::time::advance(THIRTY_YEARS - Duration::from_millis(4)).await;
    assert!(forever.poll().is_pending());
    assert_eq!(handle.pending(), clamped + 1);
    tokio::time::advance(Duration::from_millis(1)).await;
    assert!(forever.poll().is_ready());
    if let Some(far) = far_sleep.as_mut() {
        assert!(far.poll().is_ready());
    }
    assert!(edge.poll().is_pending());
    assert_eq!(handle.pending(), 1);
}
