//! Unit and model-based tests of the pure wheel core.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::{Key, Polled, Wheel};

/// Polls everything due at `now`, returning the values in the order given.
fn fire(wheel: &mut Wheel<u32>, now: u64) -> Vec<u32> {
    let mut fired = Vec::new();
    while let Some(key) = wheel.poll(now) {
        fired.push(wheel.remove(key));
    }
    fired
}

/// Advances tick by tick from the wheel's time to `until`, checking that no
/// value fires before its deadline, and returns `(value, tick)` pairs.
fn run_until(
    wheel: &mut Wheel<u32>,
    deadlines: &BTreeMap<u32, u64>,
    until: u64,
) -> Vec<(u32, u64)> {
    let mut out = Vec::new();
    let mut now = wheel.elapsed();
    while now <= until {
        for value in fire(wheel, now) {
            assert!(
                deadlines[&value] <= now,
                "value {value} fired early at {now}"
            );
            out.push((value, now));
        }
        now += 1;
    }
    out
}

#[test]
fn fires_exactly_at_deadline() {
    let mut wheel = Wheel::new(64);
    wheel.insert(10, 1);
    assert_eq!(wheel.next_expiration(), Some(10));
    assert!(fire(&mut wheel, 9).is_empty());
    assert_eq!(fire(&mut wheel, 10), vec![1]);
    assert_eq!(wheel.len(), 0);
    assert_eq!(wheel.next_expiration(), None);
}

#[test]
fn deadline_at_or_before_now_is_due_at_once() {
    let mut wheel = Wheel::new(8);
    fire(&mut wheel, 100);
    let (_, due_at) = wheel.insert(50, 1);
    assert_eq!(due_at, 100);
    let (_, due_at) = wheel.insert(100, 2);
    assert_eq!(due_at, 100);
    assert_eq!(wheel.next_expiration(), Some(100));
    assert_eq!(fire(&mut wheel, 100), vec![1, 2]);
}

#[test]
fn overflow_levels_are_created_lazily() {
    let mut wheel = Wheel::new(64);
    assert_eq!(wheel.level_count(), 1);
    wheel.insert(63, 0);
    assert_eq!(wheel.level_count(), 1, "63 fits level 0");
    wheel.insert(64, 1);
    assert_eq!(wheel.level_count(), 2);
    wheel.insert(64 * 64 - 1, 2);
    assert_eq!(wheel.level_count(), 2);
    wheel.insert(64 * 64, 3);
    assert_eq!(wheel.level_count(), 3);
    wheel.insert(u64::MAX, 4);
    // 64^11 > 2^64, so the top level is level 10 and covers the rest.
    assert_eq!(wheel.level_count(), 11);
}

#[test]
fn overflow_bucket_reinserts_downward_without_firing_early() {
    let mut wheel = Wheel::new(64);
    let (key, due_at) = wheel.insert(5000, 7);
    // Level 2 (ticks of 4096): the bucket starts at 4096.
    assert_eq!(due_at, 4096);
    assert_eq!(wheel.next_expiration(), Some(4096));
    assert!(
        fire(&mut wheel, 4096).is_empty(),
        "a coarse bucket only reinserts"
    );
    assert!(wheel.is_filed(key));
    // Now in level 1 (ticks of 64): 5000 - 5000 % 64 = 4992.
    assert_eq!(wheel.next_expiration(), Some(4992));
    assert!(fire(&mut wheel, 4999).is_empty());
    assert_eq!(wheel.next_expiration(), Some(5000));
    assert_eq!(fire(&mut wheel, 5000), vec![7]);
}

#[test]
fn a_late_poll_hands_out_everything_due_in_deadline_order() {
    let mut wheel = Wheel::new(4);
    for (value, deadline) in [(3, 300), (1, 5), (2, 70), (4, 301), (5, 10_000)] {
        wheel.insert(deadline, value);
    }
    assert_eq!(fire(&mut wheel, 301), vec![1, 2, 3, 4]);
    assert_eq!(wheel.elapsed(), 301);
    assert_eq!(fire(&mut wheel, 10_000), vec![5]);
}

#[test]
fn cancelled_bucket_is_discarded_at_the_head() {
    let mut wheel = Wheel::new(64);
    let (key, _) = wheel.insert(10, 1);
    wheel.insert(20, 2);
    assert_eq!(wheel.remove(key), 1);
    // The emptied bucket is skipped: nobody sleeps until tick 10 for it.
    assert_eq!(wheel.next_expiration(), Some(20));
    assert_eq!(fire(&mut wheel, 20), vec![2]);
}

#[test]
fn reset_earlier_and_later() {
    let mut wheel = Wheel::new(8);
    let (a, _) = wheel.insert(1_000, 1);
    let (b, _) = wheel.insert(5, 2);
    assert_eq!(wheel.reset(a, 3), 3);
    assert_eq!(wheel.reset(b, 2_000), 1536);
    assert_eq!(wheel.deadline(b), 2_000);
    assert_eq!(fire(&mut wheel, 1_999), vec![1]);
    assert_eq!(fire(&mut wheel, 2_000), vec![2]);
}

#[test]
fn handed_out_entry_can_be_refiled() {
    let mut wheel = Wheel::new(8);
    let (key, _) = wheel.insert(4, 1);
    assert_eq!(wheel.poll(4), Some(key));
    assert!(!wheel.is_filed(key));
    wheel.reset(key, 9);
    assert_eq!(wheel.poll(8), None);
    assert_eq!(wheel.poll(9), Some(key));
}

/// A coarse bucket is emptied a few entries per step; meanwhile the wheel
/// says work is due now, its remaining entries can be removed or reset,
/// and new entries go to finer buckets, never into it.
#[test]
fn a_coarse_bucket_drains_in_bounded_steps() {
    assert_eq!(super::CASCADE_STEP, 3, "the test build's step");
    let mut wheel = Wheel::new(4);
    // Level 2 (buckets of 16 ticks): all in the bucket [32, 48). The first
    // three moved go to a level-1 bucket starting at 44, after 33 and 34.
    let keys: Vec<Key> = [47, 46, 45, 34, 33, 40]
        .iter()
        .map(|&deadline| wheel.insert(deadline, deadline as u32).0)
        .collect();
    assert_eq!(wheel.next_expiration(), Some(32));
    assert_eq!(wheel.poll_step(32), Polled::Busy);
    assert_eq!(wheel.elapsed(), 32);
    // 34, 33 and 40 are still in the draining bucket: work is due now.
    assert_eq!(wheel.next_expiration(), Some(32));
    assert!(
        !wheel.catch_up(40),
        "caught up over a partly drained bucket"
    );
    assert_eq!(wheel.remove(keys[4]), 33);
    wheel.reset(keys[5], 35);
    // Due within the draining bucket's span: filed in a finer level.
    wheel.insert(36, 36);
    assert_eq!(fire(&mut wheel, 34), vec![34]);
    // Values are the original deadlines: 40 was reset to 35.
    assert_eq!(fire(&mut wheel, 36), vec![40, 36]);
    assert_eq!(fire(&mut wheel, 47), vec![45, 46, 47]);
    assert_eq!(wheel.len(), 0);
    assert_eq!(wheel.next_expiration(), None);
}

/// Between batches, entries of a finest bucket due meanwhile go ahead of
/// the rest of a partly handed out one, and so do the latest filings of
/// that one (a share of each batch); nothing due later moves.
#[test]
fn a_later_due_bucket_overtakes_a_partly_drained_one() {
    let mut wheel = Wheel::new(8);
    for value in 0..20 {
        wheel.insert(5, value);
    }
    wheel.insert(6, 60);
    wheel.insert(7, 70);
    wheel.insert(20, 200);
    assert_eq!(wheel.overtake(7, 32, |_| true), 0, "nothing partly drained");
    let first: Vec<u32> = (0..2)
        .map(|_| match wheel.poll_step(7) {
            Polled::Due(key) => wheel.remove(key),
            other => panic!("expected an entry, got {other:?}"),
        })
        .collect();
    assert_eq!(first, vec![0, 1]);
    // Now 6: the last 32 / 4 of the bucket of 5, then the bucket of 6 may
    // overtake; not the one of 7.
    assert_eq!(wheel.overtake(6, 32, |_| true), 9);
    assert_eq!(wheel.elapsed(), 5, "time does not move");
    let mut expected: Vec<u32> = (12..20).rev().collect();
    expected.push(60);
    expected.extend(2..12);
    assert_eq!(fire(&mut wheel, 6), expected);
    assert_eq!(fire(&mut wheel, 7), vec![70]);
    // A bucket filed into after it was overtaken is queued again.
    wheel.insert(8, 80);
    assert_eq!(wheel.next_expiration(), Some(8));
    assert_eq!(fire(&mut wheel, 19), vec![80]);
    assert_eq!(fire(&mut wheel, 20), vec![200]);
    assert_eq!(wheel.len(), 0);
}

/// A coarse bucket that came due gives up its due entries and keeps the
/// rest, for its turn.
#[test]
fn due_entries_of_a_coarse_bucket_overtake_too() {
    let mut wheel = Wheel::new(8);
    for value in 0..4 {
        wheel.insert(5, value);
    }
    // Level 1 (buckets of 8 ticks): [8, 16) starts at 8.
    wheel.insert(14, 140);
    wheel.insert(9, 90);
    assert!(matches!(wheel.poll_step(10), Polled::Due(_)));
    assert_eq!(wheel.overtake(10, 32, |_| true), 4);
    assert_eq!(fire(&mut wheel, 10), vec![3, 2, 1, 90]);
    assert_eq!(fire(&mut wheel, 13), Vec::<u32>::new());
    assert_eq!(fire(&mut wheel, 14), vec![140]);
    assert_eq!(wheel.len(), 1, "the first one, handed out, not removed");
}

/// Entries the caller does not let overtake (callbacks, in the driver)
/// keep their place: among themselves they still come out in deadline
/// order, while the others around them go ahead.
#[test]
fn entries_that_may_not_overtake_keep_deadline_order() {
    let mut wheel = Wheel::new(8);
    let is_odd = |value: &u32| value % 2 == 1;
    for value in 0..20 {
        wheel.insert(5, value);
    }
    wheel.insert(6, 60);
    wheel.insert(6, 61);
    assert_eq!(fire_some(&mut wheel, 5, 2), vec![0, 1]);
    // The last 8 of the bucket of 5 are looked at (12..20): the odd ones
    // move, latest first; then the bucket of 6 gives up 61, not 60.
    assert_eq!(wheel.overtake(6, 32, is_odd), 5);
    let fired = fire(&mut wheel, 6);
    let mut expected = vec![19, 17, 15, 13, 61];
    expected.extend(2..12);
    expected.extend([12, 14, 16, 18, 60]);
    assert_eq!(fired, expected);
    let evens: Vec<u32> = fired.into_iter().filter(|v| v % 2 == 0).collect();
    assert!(evens.windows(2).all(|w| w[0] < w[1]), "{evens:?}");
    assert_eq!(wheel.len(), 0);
}

/// Hands out and removes up to `n` entries due by `now`.
fn fire_some(wheel: &mut Wheel<u32>, now: u64, n: usize) -> Vec<u32> {
    let mut fired = Vec::new();
    while fired.len() < n {
        let Some(key) = wheel.poll(now) else { break };
        fired.push(wheel.remove(key));
    }
    fired
}

/// `limit` bounds one call; the rest of an overtaking bucket stays queued.
#[test]
fn overtaking_is_bounded() {
    let mut wheel = Wheel::new(8);
    let early: Vec<Key> = (0..3).map(|v| wheel.insert(1, v).0).collect();
    for value in 10..15 {
        wheel.insert(2, value);
    }
    assert!(matches!(wheel.poll_step(2), Polled::Due(key) if key == early[0]));
    assert_eq!(wheel.overtake(2, 2, |_| true), 2);
    assert_eq!(wheel.next_expiration(), Some(1));
    wheel.remove(early[0]);
    assert_eq!(fire(&mut wheel, 2), vec![10, 11, 1, 2, 12, 13, 14]);
}

/// A bucket emptied by removals while it drains is nothing to wake for.
#[test]
fn a_draining_bucket_emptied_by_removals_is_not_due() {
    let mut wheel = Wheel::new(4);
    let keys: Vec<Key> = (40..46).map(|d| wheel.insert(d, d as u32).0).collect();
    // Level 2 holds [32, 48); the first step moves 40, 41 and 42 down.
    assert_eq!(wheel.poll_step(32), Polled::Busy);
    for &key in &keys[3..] {
        wheel.remove(key);
    }
    assert_eq!(
        wheel.next_expiration(),
        Some(40),
        "only the moved entries' bucket"
    );
    assert_eq!(fire(&mut wheel, 42), vec![40, 41, 42]);
}

#[test]
fn unfiled_entries_never_come_due() {
    let mut wheel = Wheel::new(8);
    let (key, _) = wheel.insert(4, 1);
    wheel.unfile(key);
    assert_eq!(wheel.next_expiration(), None);
    assert_eq!(wheel.poll(u64::MAX), None);
    assert_eq!(wheel.len(), 1);
    assert_eq!(wheel.remove(key), 1);
}

#[test]
fn unfile_all_keeps_keys_valid() {
    let mut wheel = Wheel::new(2);
    let keys: Vec<Key> = (0..50)
        .map(|i| wheel.insert(i * 37 + 1, i as u32).0)
        .collect();
    wheel.unfile_all();
    assert_eq!(wheel.next_expiration(), None);
    assert_eq!(wheel.poll(u64::MAX), None);
    for (i, key) in keys.into_iter().enumerate() {
        assert_eq!(wheel.remove(key), i as u32);
    }
}

#[test]
fn huge_deadlines_and_u64_max() {
    let mut wheel = Wheel::new(2);
    wheel.insert(u64::MAX, 1);
    wheel.insert(u64::MAX - 1, 2);
    wheel.insert(1 << 63, 3);
    assert_eq!(wheel.level_count(), 64);
    assert_eq!(fire(&mut wheel, (1 << 63) - 1), Vec::<u32>::new());
    assert_eq!(fire(&mut wheel, 1 << 63), vec![3]);
    assert_eq!(fire(&mut wheel, u64::MAX), vec![2, 1]);
}

/// Kafka's own test of its wheel: tick 1, wheel size 3 (about six levels),
/// tasks at 0..4, 10..99 (twice each) and 100..499 all run exactly once.
#[test]
fn kafka_small_wheel_runs_every_task_once() {
    let mut wheel = Wheel::new(3);
    let mut deadlines = BTreeMap::new();
    let mut value = 0;
    let ranges = [(0..5), (10..100), (10..100), (100..500)];
    for range in ranges {
        for deadline in range {
            wheel.insert(deadline, value);
            deadlines.insert(value, deadline);
            value += 1;
        }
    }
    let fired = run_until(&mut wheel, &deadlines, 600);
    assert_eq!(fired.len(), deadlines.len());
    for (value, at) in fired {
        assert_eq!(
            deadlines[&value], at,
            "value {value} must fire exactly at its tick"
        );
    }
    assert_eq!(wheel.len(), 0);
}

/// One step of a random workload.
#[derive(Debug, Clone)]
enum Op {
    Insert(u64),
    Remove(usize),
    Reset(usize, u64),
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    // Deadlines are relative to the current time; large ones reach the top
    // levels, and some sit near `u64::MAX`.
    let delta = prop_oneof![
        4 => 0u64..100,
        3 => 0u64..100_000,
        1 => Just(u64::MAX / 2),
        1 => (u64::MAX - 10)..=u64::MAX,
    ];
    prop_oneof![
        4 => delta.clone().prop_map(Op::Insert),
        2 => any::<usize>().prop_map(Op::Remove),
        2 => (any::<usize>(), delta).prop_map(|(i, d)| Op::Reset(i, d)),
        3 => prop_oneof![0u64..10, 0u64..5_000, Just(u64::MAX / 4)].prop_map(Op::Advance),
    ]
}

/// Applies a wheel operation to the wheel and the model alike; returns the
/// new "now". Removes and resets pick a live entry by index.
fn apply(
    op: Op,
    wheel: &mut Wheel<u32>,
    model: &mut BTreeMap<u32, (Key, u64)>,
    now: u64,
    next_value: &mut u32,
) -> Result<u64, TestCaseError> {
    match op {
        Op::Insert(delta) => {
            let deadline = now.saturating_add(delta);
            let (key, due_at) = wheel.insert(deadline, *next_value);
            prop_assert!(due_at <= deadline.max(now));
            model.insert(*next_value, (key, deadline));
            *next_value += 1;
        }
        Op::Remove(i) if !model.is_empty() => {
            let value = *model.keys().nth(i % model.len()).unwrap();
            let (key, _) = model.remove(&value).unwrap();
            prop_assert_eq!(wheel.remove(key), value);
        }
        Op::Reset(i, delta) if !model.is_empty() => {
            let value = *model.keys().nth(i % model.len()).unwrap();
            let entry = model.get_mut(&value).unwrap();
            entry.1 = now.saturating_add(delta);
            wheel.reset(entry.0, entry.1);
        }
        Op::Advance(delta) => return Ok(now.saturating_add(delta)),
        Op::Remove(_) | Op::Reset(..) => {}
    }
    Ok(now)
}

proptest! {
    // 256 cases by default; set PROPTEST_CASES for a longer hunt.
    #![proptest_config(ProptestConfig::default())]

    /// The wheel against a map of live deadlines: after every step, exactly
    /// the entries whose deadline is at or before now have fired, each once,
    /// none early, in deadline order, and `next_expiration` never lies about
    /// the earliest entry.
    #[test]
    fn wheel_matches_model(wheel_size in 2usize..70, ops in prop::collection::vec(op(), 1..200)) {
        let mut wheel = Wheel::new(wheel_size);
        let mut model: BTreeMap<u32, (Key, u64)> = BTreeMap::new();
        let mut now = 0u64;
        let mut next_value = 0u32;
        for op in ops {
            now = apply(op, &mut wheel, &mut model, now, &mut next_value)?;
            check_next_expiration(&mut wheel, &model)?;
            // Entries filed in buckets come out in deadline order; ones that
            // were already due when inserted come out first, in insertion order.
            let before = wheel.elapsed();
            let mut last = before;
            while let Some(key) = wheel.poll(now) {
                let deadline = hand_out(&mut wheel, &mut model, key, now)?;
                if deadline > before {
                    prop_assert!(deadline >= last, "out of order: {} after {}", deadline, last);
                    last = deadline;
                }
            }
            check_none_overdue(&model, now)?;
            prop_assert_eq!(wheel.len(), model.len());
        }
    }
}

/// Removes a handed-out entry, checking it against the model.
fn hand_out(
    wheel: &mut Wheel<u32>,
    model: &mut BTreeMap<u32, (Key, u64)>,
    key: Key,
    now: u64,
) -> Result<u64, TestCaseError> {
    let value = wheel.remove(key);
    let (model_key, deadline) = model.remove(&value).expect("fired twice or never inserted");
    prop_assert_eq!(key, model_key);
    prop_assert!(
        deadline <= now,
        "fired early: deadline {} now {}",
        deadline,
        now
    );
    Ok(deadline)
}

/// `next_expiration` never lies: nothing queued only when nothing is left,
/// and never later than the earliest deadline (or now, for work already
/// due, such as a partly drained bucket).
fn check_next_expiration(
    wheel: &mut Wheel<u32>,
    model: &BTreeMap<u32, (Key, u64)>,
) -> Result<(), TestCaseError> {
    let earliest = model.values().map(|&(_, d)| d).min();
    match wheel.next_expiration() {
        Some(next) => prop_assert!(
            earliest.is_some_and(|e| next <= e.max(wheel.elapsed())),
            "next_expiration {} is after the earliest deadline {:?}",
            next,
            earliest
        ),
        None => prop_assert!(model.is_empty(), "entries left but nothing queued"),
    }
    Ok(())
}

/// Every entry due by `now` has been handed out.
fn check_none_overdue(model: &BTreeMap<u32, (Key, u64)>, now: u64) -> Result<(), TestCaseError> {
    let overdue: Vec<_> = model.iter().filter(|(_, &(_, d))| d <= now).collect();
    prop_assert!(overdue.is_empty(), "due but not fired: {:?}", overdue);
    Ok(())
}

/// What a driver does to a wheel between its turns: time passes unseen,
/// registrations may bring the wheel up to the clock, and a turn polls.
#[derive(Debug, Clone)]
enum LagOp {
    Wheel(Op),
    CatchUp,
    Poll,
    /// A few bounded steps of a poll, as a driver takes between releases
    /// of its lock: other operations then meet a partly drained bucket.
    Steps(u8),
    /// What the driver does between batches: due finest buckets overtake.
    Overtake(u8),
}

fn lag_op() -> impl Strategy<Value = LagOp> {
    prop_oneof![
        6 => op().prop_map(LagOp::Wheel),
        2 => Just(LagOp::CatchUp),
        2 => Just(LagOp::Poll),
        3 => (1u8..6).prop_map(LagOp::Steps),
        2 => (1u8..4).prop_map(LagOp::Overtake),
    ]
}

proptest! {
    /// `catch_up` against the model, with time moving between polls as it
    /// does while the driver sleeps: it only moves the wheel's time when
    /// nothing is due, and what is filed afterwards still fires exactly once,
    /// never early, and no later than the first poll at or after its deadline.
    #[test]
    fn catch_up_matches_model(wheel_size in 2usize..10, ops in prop::collection::vec(lag_op(), 1..200)) {
        let mut wheel = Wheel::new(wheel_size);
        let mut model: BTreeMap<u32, (Key, u64)> = BTreeMap::new();
        let mut now = 0u64;
        let mut next_value = 0u32;
        for op in ops {
            match op {
                LagOp::Wheel(op) => now = apply(op, &mut wheel, &mut model, now, &mut next_value)?,
                LagOp::CatchUp => {
                    let before = wheel.elapsed();
                    let earliest = model.values().map(|&(_, d)| d).min();
                    if wheel.catch_up(now) {
                        prop_assert_eq!(wheel.elapsed(), before.max(now));
                        prop_assert!(earliest.is_none_or(|d| d > now), "caught up past a due entry");
                    } else {
                        prop_assert_eq!(wheel.elapsed(), before);
                    }
                }
                LagOp::Poll => {
                    let mut peeked = peek_with_deadline(&wheel);
                    while let Some(key) = wheel.poll(now) {
                        check_peeked(&wheel, &mut peeked, key)?;
                        hand_out(&mut wheel, &mut model, key, now)?;
                    }
                    check_none_overdue(&model, now)?;
                }
                LagOp::Overtake(limit) => {
                    let before = wheel.elapsed();
                    // Odd values overtake, even ones (callbacks, say) may not.
                    let moved = wheel.overtake(now, usize::from(limit), |value| value % 2 == 1);
                    prop_assert!(moved <= usize::from(limit));
                    prop_assert_eq!(wheel.elapsed(), before);
                }
                LagOp::Steps(n) => {
                    let mut peeked = peek_with_deadline(&wheel);
                    for _ in 0..n {
                        match wheel.poll_step(now) {
                            Polled::Due(key) => {
                                check_peeked(&wheel, &mut peeked, key)?;
                                hand_out(&mut wheel, &mut model, key, now)?;
                            }
                            Polled::Busy => {}
                            Polled::Idle => break,
                        }
                    }
                }
            }
            check_next_expiration(&mut wheel, &model)?;
            prop_assert_eq!(wheel.len(), model.len());
            prop_assert_eq!(wheel.peek().is_none(), model.is_empty());
        }
    }
}

/// The first entry handed out after a `peek` has the deadline of the one
/// it named (which of several due at the same tick is unspecified).
fn check_peeked(
    wheel: &Wheel<u32>,
    peeked: &mut Option<(Key, u64)>,
    key: Key,
) -> Result<(), TestCaseError> {
    if let Some((expected, deadline)) = peeked.take() {
        prop_assert_eq!(
            wheel.deadline(key),
            deadline,
            "peek named {} but {} came out first",
            expected,
            key
        );
    }
    Ok(())
}

/// What `peek` names, with its deadline.
fn peek_with_deadline(wheel: &Wheel<u32>) -> Option<(Key, u64)> {
    wheel.peek().map(|key| (key, wheel.deadline(key)))
}

#[test]
fn peek_names_the_earliest_entry_of_a_coarse_bucket() {
    let mut wheel = Wheel::new(4);
    // Level 1 (ticks 4..16): one bucket holds 13, 9 and 11.
    let (late, _) = wheel.insert(13, 0u32);
    let (early, _) = wheel.insert(9, 1);
    wheel.insert(11, 2);
    assert_eq!(wheel.peek(), Some(early));
    assert_eq!(wheel.remove(early), 1);
    assert_ne!(wheel.peek(), Some(late));
    // Something already due comes first.
    let (due, _) = wheel.insert(0, 3);
    assert_eq!(wheel.peek(), Some(due));
    assert_eq!(wheel.poll(0), Some(due));
    wheel.remove(due);
    let mut empty: Wheel<u32> = Wheel::new(4);
    assert_eq!(empty.peek(), None);
    assert_eq!(empty.poll(100), None);
}

#[test]
fn shrink_to_fit_keeps_every_live_key() {
    let mut wheel = Wheel::new(64);
    let keys: Vec<Key> = (0..10_000u32)
        .map(|i| wheel.insert(u64::from(i) + 1, i).0)
        .collect();
    let grown = wheel.capacity();
    // Keep a low key and a middle one; free everything above the middle.
    for (i, &key) in keys.iter().enumerate() {
        if i != 10 && i != 5_000 {
            wheel.remove(key);
        }
    }
    wheel.shrink_to_fit();
    assert!(wheel.capacity() <= 5_001 && wheel.capacity() < grown);
    assert_eq!(wheel.get(keys[10]), Some(&10));
    assert_eq!(wheel.get(keys[5_000]), Some(&5_000));
    // Both still fire, at their deadlines.
    assert_eq!(wheel.poll(11), Some(keys[10]));
    assert_eq!(wheel.poll(5_000), None);
    assert_eq!(wheel.poll(5_001), Some(keys[5_000]));
    // Freed low slots are reused first.
    let (key, _) = wheel.insert(99_999, 1);
    assert!(key < 5_000);
    wheel.reserve(100);
    assert!(wheel.capacity() >= wheel.len() + 100);
}

#[test]
fn an_emptied_wheel_gives_back_its_levels_and_keeps_its_time() {
    let mut wheel = Wheel::new(4);
    let keys: Vec<Key> = (0..2_000u32)
        .map(|i| wheel.insert(u64::from(i) * 97, i).0)
        .collect();
    assert!(wheel.level_count() > 3);
    assert_eq!(wheel.poll(50), Some(keys[0]));
    assert_eq!(wheel.poll(50), None);
    for key in keys {
        wheel.remove(key);
    }
    // More than `SHRINK_ABOVE` entries: released as the last one left.
    assert_eq!((wheel.level_count(), wheel.capacity()), (1, 0));
    assert_eq!(wheel.elapsed(), 50);
    assert_eq!(wheel.next_expiration(), None);
    // And it works as before.
    let (key, _) = wheel.insert(1_000, 7);
    assert_eq!(wheel.poll(999), None);
    assert_eq!(wheel.poll(1_000), Some(key));
    wheel.remove(key);
    wheel.insert(100_000, 8);
    wheel.remove(0);
    wheel.shrink_to_fit();
    assert_eq!((wheel.level_count(), wheel.capacity()), (1, 0));
}

#[test]
fn a_slab_slot_is_no_wider_than_its_entry() {
    // The shape of `slab`'s own slot: the packed place's niche holds the
    // tag, so a million timers do not pay a word each for it.
    #[allow(dead_code)]
    enum SlabSlot<T> {
        Vacant(usize),
        Occupied(T),
    }
    assert_eq!(
        std::mem::size_of::<SlabSlot<super::Entry<u64>>>(),
        std::mem::size_of::<super::Entry<u64>>()
    );
    assert_eq!(std::mem::size_of::<super::Entry<u64>>(), 32);
    assert_eq!(
        std::mem::size_of::<SlabSlot<super::Entry<std::task::Waker>>>(),
        40
    );
}
