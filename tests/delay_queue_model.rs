//! `DelayQueue` against a model (a `BTreeMap` of what is in the queue),
//! under tokio's paused clock: random insertions (past, near, years away,
//! `Duration::MAX`), removals, resets, stale-key lookups and clock advances.
//! After every step: each value comes out exactly once unless removed,
//! never before its deadline, in the order of its reported deadline, with
//! its own key; a value a few ticks overdue has come out, though the queue
//! is polled only when it wakes its task; a stale key never finds a value.

#![cfg(not(loom))]

use std::collections::BTreeMap;
use std::task::Poll;
use std::time::Duration;

use proptest::prelude::*;
use tiered_timer::delay_queue::Key;
use tiered_timer::{DelayQueue, Instant};
use tokio_test::task;

const THIRTY_YEARS: Duration = Duration::from_secs(30 * 365 * 86_400);
/// How late a value may be: our tick (250 µs) plus tokio's 1 ms grid.
const SLACK: Duration = Duration::from_millis(2);

#[derive(Debug, Clone)]
enum Op {
    Insert(Duration),
    InsertPast(Duration),
    Remove(usize),
    Reset(usize, Duration),
    TryStale(usize),
    Clear,
    Advance(Duration),
}

fn delay() -> impl Strategy<Value = Duration> {
    prop_oneof![
        6 => (0u64..20_000).prop_map(Duration::from_micros),
        2 => (0u64..2_000).prop_map(Duration::from_millis),
        1 => Just(Duration::from_secs(3 * 365 * 86_400)),
        1 => Just(Duration::MAX),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => delay().prop_map(Op::Insert),
        1 => (0u64..10_000).prop_map(|us| Op::InsertPast(Duration::from_micros(us))),
        2 => any::<usize>().prop_map(Op::Remove),
        3 => (any::<usize>(), delay()).prop_map(|(i, d)| Op::Reset(i, d)),
        1 => any::<usize>().prop_map(Op::TryStale),
        1 => Just(Op::Clear),
        4 => (0u64..5_000).prop_map(|us| Op::Advance(Duration::from_micros(us))),
    ]
}

/// What the model knows of a value in the queue.
#[derive(Debug, Clone, Copy)]
struct Live {
    key: Key,
    deadline: Instant,
}

struct Harness {
    queue: task::Spawn<DelayQueue<u32>>,
    model: BTreeMap<u32, Live>,
    dead: Vec<Key>,
    next_value: u32,
    last_out: Option<Instant>,
}

/// The deadline a delay from now stands for (`Duration::MAX` is clamped to
/// about 30 years, as tokio clamps it).
fn deadline_after(delay: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(delay).unwrap_or(now + THIRTY_YEARS)
}

impl Harness {
    fn pick(&self, i: usize) -> Option<u32> {
        (!self.model.is_empty()).then(|| *self.model.keys().nth(i % self.model.len()).unwrap())
    }

    fn apply(&mut self, op: Op) -> Result<(), TestCaseError> {
        match op {
            Op::Insert(delay) => {
                let value = self.next_value;
                self.next_value += 1;
                let deadline = deadline_after(delay);
                let key = self.queue.insert(value, delay);
                self.model.insert(value, Live { key, deadline });
            }
            Op::InsertPast(ago) => {
                let value = self.next_value;
                self.next_value += 1;
                let deadline = Instant::now() - ago;
                let key = self.queue.insert_at(value, deadline);
                self.model.insert(value, Live { key, deadline });
            }
            Op::Remove(i) => {
                if let Some(value) = self.pick(i) {
                    let live = self.model.remove(&value).unwrap();
                    let removed = self.queue.remove(&live.key);
                    prop_assert_eq!(removed.into_inner(), value);
                    self.dead.push(live.key);
                }
            }
            Op::Reset(i, delay) => {
                if let Some(value) = self.pick(i) {
                    let live = self.model.get_mut(&value).unwrap();
                    live.deadline = deadline_after(delay);
                    self.queue.reset(&live.key, delay);
                    prop_assert!(self.queue.deadline(&live.key) >= live.deadline);
                }
            }
            Op::TryStale(i) => {
                if !self.dead.is_empty() {
                    let key = self.dead[i % self.dead.len()];
                    let len = self.queue.len();
                    prop_assert!(
                        self.queue.try_remove(&key).is_none(),
                        "a stale key found a value"
                    );
                    prop_assert_eq!(self.queue.len(), len);
                }
            }
            Op::Clear => {
                self.queue.clear();
                self.dead.extend(self.model.values().map(|live| live.key));
                self.model.clear();
            }
            Op::Advance(_) => unreachable!("handled by the caller"),
        }
        Ok(())
    }

    /// Polls until nothing is due, checking each value that comes out.
    fn drain(&mut self) -> Result<(), TestCaseError> {
        // `peek` names a value with the deadline of the next one out.
        let mut peeked = self.queue.peek().map(|key| self.queue.deadline(&key));
        loop {
            match self.queue.enter(|cx, mut queue| queue.poll_expired(cx)) {
                Poll::Ready(Some(expired)) => {
                    if let Some(deadline) = peeked.take() {
                        prop_assert_eq!(expired.deadline(), deadline, "peek named a later value");
                    }
                    let now = Instant::now();
                    let value = *expired.get_ref();
                    let live = self.model.remove(&value);
                    prop_assert!(
                        live.is_some(),
                        "value {} came out twice or after removal",
                        value
                    );
                    let live = live.unwrap();
                    prop_assert_eq!(expired.key(), live.key);
                    prop_assert!(now >= live.deadline, "value {} came out early", value);
                    prop_assert!(expired.deadline() >= live.deadline);
                    prop_assert!(expired.deadline() <= now);
                    if let Some(last) = self.last_out {
                        prop_assert!(expired.deadline() >= last, "out of deadline order");
                    }
                    self.last_out = Some(expired.deadline());
                    self.dead.push(live.key);
                }
                Poll::Ready(None) => {
                    prop_assert!(self.model.is_empty(), "the queue ended with values left");
                    return Ok(());
                }
                Poll::Pending => return Ok(()),
            }
        }
    }

    /// Nothing more than [`SLACK`] overdue is left in the queue.
    fn check_none_overdue(&self) -> Result<(), TestCaseError> {
        let now = Instant::now();
        let overdue: Vec<_> = self
            .model
            .iter()
            .filter(|(_, live)| live.deadline + SLACK <= now)
            .map(|(value, _)| value)
            .collect();
        prop_assert!(
            overdue.is_empty(),
            "overdue but still queued: {:?}",
            overdue
        );
        prop_assert_eq!(self.queue.len(), self.model.len());
        Ok(())
    }
}

async fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut harness = Harness {
        queue: task::spawn(DelayQueue::new()),
        model: BTreeMap::new(),
        dead: Vec::new(),
        next_value: 0,
        last_out: None,
    };
    harness.drain()?;
    for op in ops {
        match op {
            Op::Advance(by) => tokio::time::advance(by).await,
            op => harness.apply(op)?,
        }
        // As an executor would: the queue is polled only when woken, so a
        // missed wake-up leaves a value overdue.
        if harness.queue.is_woken() {
            harness.drain()?;
        }
        harness.check_none_overdue()?;
    }
    // Everything left comes out once its deadline is reached.
    tokio::time::advance(THIRTY_YEARS + Duration::from_secs(86_400)).await;
    harness.drain()?;
    prop_assert!(
        harness.model.is_empty(),
        "never came out: {:?}",
        harness.model
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn delay_queue_matches_model(ops in prop::collection::vec(op(), 1..120)) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        runtime.block_on(run(ops))?;
    }
}
