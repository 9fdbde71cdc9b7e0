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
}

fn op() -> impl Strategy<Value = Op> {
    let delay = prop_oneof![4 => 0u64..200, 2 => 0u64..20_000, 1 => 0u64..5_000_000];
    prop_oneof![
        3 => delay.clone().prop_map(Op::New),
        3 => (any::<usize>(), -500i64..20_000).prop_map(|(i, d)| Op::Reset(i, d)),
        1 => any::<usize>().prop_map(Op::Drop),
        4 => prop_oneof![0u64..30, 0u64..2_000, 0u64..6_000_000].prop_map(Op::Advance),
    ]
}

struct Live {
    sleep: Spawn<Sleep>,
    /// Whether the last poll returned `Pending` (so a wake is owed when due).
    waiting: bool,
    done: bool,
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
            for entry in &mut live {
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
