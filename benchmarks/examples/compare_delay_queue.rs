//! `tiered_timer::DelayQueue` side by side with
//! `tokio_util::time::DelayQueue`, in one process, alternating the two
//! within each round, median of the rounds. Prints a markdown table.
//!
//! ```sh
//! cargo run --release -p tiered-timer-benchmarks --example compare_delay_queue   # under a minute
//! cargo run --release -p tiered-timer-benchmarks --example compare_delay_queue -- --rounds 3
//! ```
//!
//! Workloads (values are `u64`; each round runs on a fresh current-thread
//! tokio runtime with the time driver, real time):
//!
//! 1. churn: a cache refreshed: 10 000 live values with a 30 s TTL; each
//!    operation inserts one and removes the oldest, before it expires;
//!    1 000 000 operations; ns per insert + remove.
//! 2. reset-heavy: 100 000 keys, each reset 50 times to a later deadline;
//!    ns per reset.
//! 3. expire-all: 1 000 000 values due over 1 s (the first 300 ms after
//!    the insertions start, so that they are all in by then), drained by
//!    one task polling `poll_expired`: CPU time of the process from the
//!    first insertion to the last value out, and lateness (time out minus
//!    the deadline asked) p50 and p99.
//! 4. memory: live heap per value with 1 000 000 values in the queue, and
//!    live heap left after they all expired, were drained, and
//!    `shrink_to_fit` ran (counted by a global allocator).
//!
//! Knob: `--rounds` (`COMPARE_ROUNDS`, default 5; the expire-all and
//! memory workloads run `max(3, rounds / 2)` rounds).

use std::future::poll_fn;
use std::hint::black_box;
use std::task::{Context, Poll};
use std::time::Duration;

use clap::Parser;
use tiered_timer_benchmarks::alloc::{live_bytes as live, CountingAllocator};
use tiered_timer_benchmarks::process_cpu as cpu_time;
use tiered_timer_benchmarks::runtime::current_thread as runtime;
use tiered_timer_benchmarks::stats::{median, quantile};
use tokio::time::Instant;

// Live heap, counted for every allocation (both queues pay the same).
#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// `tiered_timer::DelayQueue` side by side with tokio-util's: a markdown
/// table of medians and ratios.
#[derive(Parser, Debug)]
#[command(name = "compare_delay_queue")]
struct Args {
    /// Rounds of the light workloads (churn, reset); the heavy ones
    /// (expire-all, memory) run max(3, rounds / 2).
    #[arg(long, env = "COMPARE_ROUNDS", default_value_t = 5)]
    rounds: usize,
}

// ---------------------------------------------------------------------------
// The two queues behind one interface.

trait Queue {
    type Key: Copy;
    const NAME: &'static str;
    fn new() -> Self;
    fn insert(&mut self, value: u64, timeout: Duration) -> Self::Key;
    fn insert_at(&mut self, value: u64, when: Instant) -> Self::Key;
    fn remove(&mut self, key: &Self::Key) -> u64;
    fn reset(&mut self, key: &Self::Key, timeout: Duration);
    fn poll_expired(&mut self, cx: &mut Context<'_>) -> Poll<Option<u64>>;
    fn shrink_to_fit(&mut self);
}

impl Queue for tiered_timer::DelayQueue<u64> {
    type Key = tiered_timer::delay_queue::Key;
    const NAME: &'static str = "tiered-timer";
    fn new() -> Self {
        tiered_timer::DelayQueue::new()
    }
    fn insert(&mut self, value: u64, timeout: Duration) -> Self::Key {
        self.insert(value, timeout)
    }
    fn insert_at(&mut self, value: u64, when: Instant) -> Self::Key {
        self.insert_at(value, when)
    }
    fn remove(&mut self, key: &Self::Key) -> u64 {
        self.remove(key).into_inner()
    }
    fn reset(&mut self, key: &Self::Key, timeout: Duration) {
        self.reset(key, timeout);
    }
    fn poll_expired(&mut self, cx: &mut Context<'_>) -> Poll<Option<u64>> {
        self.poll_expired(cx).map(|e| e.map(|e| e.into_inner()))
    }
    fn shrink_to_fit(&mut self) {
        self.shrink_to_fit();
    }
}

impl Queue for tokio_util::time::DelayQueue<u64> {
    type Key = tokio_util::time::delay_queue::Key;
    const NAME: &'static str = "tokio-util";
    fn new() -> Self {
        tokio_util::time::DelayQueue::new()
    }
    fn insert(&mut self, value: u64, timeout: Duration) -> Self::Key {
        self.insert(value, timeout)
    }
    fn insert_at(&mut self, value: u64, when: Instant) -> Self::Key {
        self.insert_at(value, when)
    }
    fn remove(&mut self, key: &Self::Key) -> u64 {
        self.remove(key).into_inner()
    }
    fn reset(&mut self, key: &Self::Key, timeout: Duration) {
        self.reset(key, timeout);
    }
    fn poll_expired(&mut self, cx: &mut Context<'_>) -> Poll<Option<u64>> {
        self.poll_expired(cx).map(|e| e.map(|e| e.into_inner()))
    }
    fn shrink_to_fit(&mut self) {
        self.shrink_to_fit();
    }
}

// ---------------------------------------------------------------------------
// Workloads. Each returns its metrics in the order of `METRICS`.

const CHURN_OPS: u64 = 1_000_000;
const CHURN_LIVE: usize = 10_000;

/// ns per insert + remove.
fn churn<Q: Queue>() -> Vec<f64> {
    runtime().block_on(async {
        let mut queue = Q::new();
        let mut window = std::collections::VecDeque::with_capacity(CHURN_LIVE);
        for i in 0..CHURN_LIVE as u64 {
            window.push_back(queue.insert(i, Duration::from_secs(30)));
        }
        let start = std::time::Instant::now();
        for i in 0..CHURN_OPS {
            window.push_back(queue.insert(i, Duration::from_secs(30)));
            let oldest = window.pop_front().unwrap();
            black_box(queue.remove(&oldest));
        }
        vec![start.elapsed().as_nanos() as f64 / CHURN_OPS as f64]
    })
}

const RESET_KEYS: u64 = 100_000;
const RESETS_PER_KEY: u64 = 50;

/// ns per reset.
fn reset_heavy<Q: Queue>() -> Vec<f64> {
    runtime().block_on(async {
        let mut queue = Q::new();
        let keys: Vec<_> = (0..RESET_KEYS)
            .map(|i| queue.insert(i, Duration::from_secs(10)))
            .collect();
        let start = std::time::Instant::now();
        for round in 1..=RESETS_PER_KEY {
            let timeout = Duration::from_secs(10) + Duration::from_millis(round * 10);
            for key in &keys {
                queue.reset(key, timeout);
            }
        }
        let ns = start.elapsed().as_nanos() as f64 / (RESET_KEYS * RESETS_PER_KEY) as f64;
        black_box(queue);
        vec![ns]
    })
}

const EXPIRE_VALUES: u64 = 1_000_000;

/// CPU ms from the first insertion to the last value out; lateness p50 and
/// p99 in µs.
fn expire_all<Q: Queue>() -> Vec<f64> {
    runtime().block_on(async {
        let mut queue = Q::new();
        let cpu = cpu_time();
        // Far enough out that every insertion is done before the first
        // deadline: lateness measures the drain, not the set-up.
        let start = Instant::now() + Duration::from_millis(300);
        let deadline = |i: u64| start + Duration::from_micros(i);
        for i in 0..EXPIRE_VALUES {
            queue.insert_at(i, deadline(i));
        }
        let mut late = Vec::with_capacity(EXPIRE_VALUES as usize);
        for _ in 0..EXPIRE_VALUES {
            let value = poll_fn(|cx| queue.poll_expired(cx)).await.unwrap();
            let now = Instant::now();
            late.push(now.saturating_duration_since(deadline(value)).as_secs_f64() * 1e6);
        }
        let cpu_ms = (cpu_time() - cpu).as_secs_f64() * 1e3;
        late.sort_unstable_by(f64::total_cmp);
        let pct = |q: f64| quantile(&late, q).unwrap_or(f64::NAN);
        vec![cpu_ms, pct(0.50), pct(0.99)]
    })
}

const MEMORY_VALUES: u64 = 1_000_000;

/// Bytes per value at 1 000 000 values; bytes left after drain and
/// `shrink_to_fit` (over the queue's empty start).
fn memory<Q: Queue>() -> Vec<f64> {
    runtime().block_on(async {
        // The runtime's timer machinery (and, for ours, the default timer)
        // exists before the baseline: a first queue is used and dropped.
        let mut warm = Q::new();
        warm.insert(0, Duration::from_millis(1));
        black_box(poll_fn(|cx| warm.poll_expired(cx)).await.unwrap());
        drop(warm);
        let before = live();
        let mut queue = Q::new();
        let start = Instant::now();
        for i in 0..MEMORY_VALUES {
            queue.insert_at(i, start + Duration::from_nanos(i * 50));
        }
        let full = live();
        for _ in 0..MEMORY_VALUES {
            black_box(poll_fn(|cx| queue.poll_expired(cx)).await.unwrap());
        }
        queue.shrink_to_fit();
        let after = live();
        let per_value = (full - before) as f64 / MEMORY_VALUES as f64;
        black_box(&queue);
        vec![per_value, (after - before) as f64]
    })
}

// ---------------------------------------------------------------------------

struct Workload {
    name: &'static str,
    metrics: &'static [(&'static str, Better)],
    heavy: bool,
    ours: Run,
    peer: Run,
}

#[derive(Clone, Copy)]
enum Better {
    Lower,
}

/// One run of a workload, returning its metrics.
type Run = fn() -> Vec<f64>;
/// Each metric's samples, one per round.
type Samples = Vec<Vec<f64>>;

type Ours = tiered_timer::DelayQueue<u64>;
type Peer = tokio_util::time::DelayQueue<u64>;

fn main() {
    let rounds = Args::parse().rounds;
    let workloads = [
        Workload {
            name: "1. churn, 1 000 000 insert + remove",
            metrics: &[("ns per op", Better::Lower)],
            heavy: false,
            ours: churn::<Ours>,
            peer: churn::<Peer>,
        },
        Workload {
            name: "2. reset-heavy, 100 000 keys × 50",
            metrics: &[("ns per reset", Better::Lower)],
            heavy: false,
            ours: reset_heavy::<Ours>,
            peer: reset_heavy::<Peer>,
        },
        Workload {
            name: "3. expire-all, 1 000 000 over 1 s",
            metrics: &[
                ("CPU ms", Better::Lower),
                ("lateness p50 µs", Better::Lower),
                ("lateness p99 µs", Better::Lower),
            ],
            heavy: true,
            ours: expire_all::<Ours>,
            peer: expire_all::<Peer>,
        },
        Workload {
            name: "4. memory, 1 000 000 values",
            metrics: &[
                ("bytes per value", Better::Lower),
                ("bytes left after drain + shrink_to_fit", Better::Lower),
            ],
            heavy: true,
            ours: memory::<Ours>,
            peer: memory::<Peer>,
        },
    ];
    println!("| workload | metric | tiered-timer | tokio-util | ours / tokio-util |");
    println!("|---|---|---:|---:|---:|");
    for workload in &workloads {
        let runs = if workload.heavy {
            (rounds / 2).max(3)
        } else {
            rounds
        };
        let mut ours: Samples = vec![Vec::new(); workload.metrics.len()];
        let mut peer: Samples = vec![Vec::new(); workload.metrics.len()];
        for round in 0..runs {
            // Alternate which goes first, so neither always runs on a
            // warmer (or busier) machine.
            let order: [(Run, &mut Samples); 2] = if round % 2 == 0 {
                [(workload.ours, &mut ours), (workload.peer, &mut peer)]
            } else {
                [(workload.peer, &mut peer), (workload.ours, &mut ours)]
            };
            for (run, into) in order {
                for (slot, value) in into.iter_mut().zip(run()) {
                    slot.push(value);
                }
            }
        }
        for (i, (metric, Better::Lower)) in workload.metrics.iter().enumerate() {
            let ours = median(ours[i].iter().copied());
            let peer = median(peer[i].iter().copied());
            let ratio = if peer == 0.0 {
                "-".to_string()
            } else {
                format!("{:.2}x", ours / peer)
            };
            println!(
                "| {} | {metric} | {ours:.1} | {peer:.1} | {ratio} |",
                workload.name
            );
        }
    }
    println!(
        "\n{} vs {}; {rounds} rounds (heavy workloads {}), medians; ratio < 1 favours tiered-timer.",
        Ours::NAME,
        Peer::NAME,
        (rounds / 2).max(3)
    );
}
