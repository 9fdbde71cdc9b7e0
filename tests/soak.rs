//! Soak: millions of timers (sleeps and callbacks) with random cancels and
//! resets through a 2-worker runtime, in real time. Checks that every timer
//! not cancelled fired exactly once and none early, that nothing is left
//! pending, and that memory returns to its starting level.
//!
//! The default `cargo test` runs a short version (100 000 timers). The full
//! soak, 10 million timers (about a minute in release):
//!
//! ```text
//! cargo test --release --test soak -- --ignored --nocapture
//! ```
//!
//! `SOAK_TIMERS=<n>` changes the count of the full run.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tiered_timer::{Handle, Instant, Timer};

/// Counts live heap bytes, to see whether memory comes back.
#[path = "support/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::live_bytes;

/// xorshift: deterministic per worker, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What happened to each callback: bit 0 ran, bit 1 ran twice, bit 2 ran
/// early, bit 3 cancelled (cancel returned true).
const RAN: u8 = 1;
const TWICE: u8 = 2;
const EARLY: u8 = 4;
const CANCELLED: u8 = 8;

#[derive(Debug, Default)]
struct Report {
    callbacks: usize,
    cancelled: usize,
    sleeps: usize,
    sleeps_dropped: usize,
    resets: usize,
}

/// Runs `timers` timers through `handle` from `tasks` concurrent tasks, each
/// keeping up to `window` timers in flight.
async fn load(handle: &Handle, timers: usize, seed: u64) -> Report {
    const TASKS: usize = 32;
    let outcomes: Arc<Vec<AtomicU8>> = Arc::new((0..timers).map(|_| AtomicU8::new(0)).collect());
    let early_sleeps = Arc::new(AtomicUsize::new(0));
    let mut workers = tokio::task::JoinSet::new();
    for worker in 0..TASKS {
        let handle = handle.clone();
        let outcomes = outcomes.clone();
        let early_sleeps = early_sleeps.clone();
        workers.spawn(async move {
            let mut rng = Rng(seed ^ (worker as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let mut report = Report::default();
            let mut in_flight = tokio::task::JoinSet::new();
            for i in (worker..outcomes.len()).step_by(TASKS) {
                let delay = Duration::from_micros(rng.below(20_000));
                if rng.below(2) == 0 {
                    report.callbacks += 1;
                    let outcomes2 = outcomes.clone();
                    let scheduled = handle
                        .schedule(delay, {
                            let deadline = Instant::now() + delay;
                            move || {
                                let mut flags = RAN;
                                if Instant::now() < deadline {
                                    flags |= EARLY;
                                }
                                let before = outcomes2[i].fetch_or(flags, Ordering::SeqCst);
                                if before & RAN != 0 {
                                    outcomes2[i].fetch_or(TWICE, Ordering::SeqCst);
                                }
                            }
                        })
                        .expect("no capacity limit, not shut down");
                    if rng.below(3) == 0 {
                        if rng.below(2) == 0 {
                            tokio::task::yield_now().await;
                        }
                        if scheduled.cancel() {
                            report.cancelled += 1;
                            outcomes[i].fetch_or(CANCELLED, Ordering::SeqCst);
                        }
                    }
                } else {
                    report.sleeps += 1;
                    let mut sleep = handle.sleep(delay);
                    let op = rng.below(4);
                    let shift = Duration::from_micros(rng.below(10_000));
                    let early = early_sleeps.clone();
                    if op >= 2 {
                        report.resets += 1;
                    }
                    if op == 1 {
                        report.sleeps_dropped += 1;
                    }
                    in_flight.spawn(async move {
                        // Register first, so cancels and resets touch the wheel.
                        tokio::select! {
                            biased;
                            () = &mut sleep => {}
                            () = tokio::task::yield_now() => {}
                        }
                        let deadline = match op {
                            1 => return, // cancelled by drop
                            2 => sleep.deadline() + shift,
                            3 => sleep
                                .deadline()
                                .checked_sub(shift)
                                .unwrap_or(sleep.deadline()),
                            _ => sleep.deadline(),
                        };
                        std::pin::Pin::new(&mut sleep).reset(deadline);
                        sleep.await;
                        if Instant::now() < deadline {
                            early.fetch_add(1, Ordering::SeqCst);
                        }
                    });
                }
                // Bound the timers in flight per worker.
                while in_flight.len() > 2_000 {
                    in_flight.join_next().await.unwrap().unwrap();
                }
            }
            while let Some(done) = in_flight.join_next().await {
                done.unwrap();
            }
            report
        });
    }
    let mut total = Report::default();
    while let Some(report) = workers.join_next().await {
        let report = report.unwrap();
        total.callbacks += report.callbacks;
        total.cancelled += report.cancelled;
        total.sleeps += report.sleeps;
        total.sleeps_dropped += report.sleeps_dropped;
        total.resets += report.resets;
    }
    // Every sleep has completed; let the last callbacks run.
    let settle = Instant::now();
    while handle.pending() > 0 {
        assert!(
            settle.elapsed() < Duration::from_secs(30),
            "{} timers still pending 30 s after the last was due",
            handle.pending()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        early_sleeps.load(Ordering::SeqCst),
        0,
        "sleeps completed early"
    );
    let mut counted = [0usize; 3];
    for (i, outcome) in outcomes.iter().enumerate() {
        let flags = outcome.load(Ordering::SeqCst);
        assert_eq!(flags & (TWICE | EARLY), 0, "timer {i}: flags {flags:#b}");
        assert!(
            flags & RAN == 0 || flags & CANCELLED == 0,
            "timer {i} ran although cancel returned true"
        );
        counted[usize::from(flags & RAN != 0) + 2 * usize::from(flags & CANCELLED != 0)] += 1;
    }
    // Callbacks neither run nor cancelled would be lost; sleeps show as 0.
    let ran = counted[1];
    let cancelled = counted[2];
    assert_eq!(cancelled, total.cancelled);
    assert_eq!(
        ran + cancelled,
        total.callbacks,
        "callbacks lost: {} scheduled, {ran} ran, {cancelled} cancelled",
        total.callbacks
    );
    total
}

fn soak(timers: usize) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let timer = Timer::new();
        let handle = timer.handle();
        // Warm the runtime and the timer so their one-time allocations are
        // in the baseline.
        load(&handle, 1_000, 1).await;
        let start = live_bytes();
        let began = std::time::Instant::now();
        let first = load(&handle, timers, 2).await;
        let after_first = live_bytes();
        let second = load(&handle, timers, 3).await;
        let after_second = live_bytes();
        eprintln!(
            "soak: 2 x {timers} timers in {:.1?} ({first:?}, {second:?}); live heap bytes: \
             start {start}, after first {after_first}, after second {after_second}; {:?}",
            began.elapsed(),
            handle.stats(),
        );
        assert_eq!(handle.pending(), 0);
        // The wheel's slab and queues are given back when they empty; what
        // stays is the per-key deadline table (8 bytes per key at the peak
        // number in flight) and tokio's own caches. A leak would grow with
        // the number of timers, so the second run must not add to the first.
        let grown = after_second - after_first;
        assert!(
            grown < 1 << 20,
            "memory grew by {grown} bytes over a second run of {timers} timers"
        );
        assert!(
            after_first - start < 16 << 20,
            "{} bytes more live after {timers} timers than before",
            after_first - start
        );
    });
}

#[test]
fn soak_short() {
    soak(100_000);
}

#[test]
#[ignore = "about a minute in release: cargo test --release --test soak -- --ignored"]
fn soak_ten_million() {
    let timers = std::env::var("SOAK_TIMERS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000_000);
    soak(timers);
}
