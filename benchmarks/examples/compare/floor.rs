//! Workload 1f: the floor under 1c's guard, a diagnostic. In 1c's busy
//! server, the `ours` column holds our guard then the cost of each
//! component any guard of a relative timeout pays whatever the timer (no
//! timer involved), each alone and summed in one loop body; the `tokio`
//! column holds tokio's guard of the same run on every row, so ours/tokio
//! is the share of tokio's guard a component takes by itself. The other
//! peers have no column here.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tiered_timer_benchmarks::guards::in_busy_server;
use tiered_timer_benchmarks::timers::Imp;

use crate::guard::busy_guard;
use crate::{Args, Unit, Workload};

/// The rows of 1f: our guard and tokio's as in 1c, then what any guard of
/// a relative timeout pays on this thread whatever the timer, each alone
/// and summed in one loop body.
const FLOOR_ROWS: [&str; 9] = [
    "guard as in 1c (ours: our guard)",
    "a. clock read, tokio::time::Instant::now()",
    "b. runtime lookup, Handle::try_current() + drop",
    "c. uncontended Mutex<u64> lock, +1, unlock",
    "s. uncontended spin lock (compare-and-swap, +1, store)",
    "d. Arc clone + drop",
    "floor of a std-mutex design with a count per guard: a + b + 2c + d",
    "floor of ours (spin lock, count reused): a + b + 2s",
    "floor of one spin lock, no count: a + b + s",
];

/// The note under the table, saying how to read 1f.
pub const NOTE: &str =
    "1f: the ours column holds our guard, then what each component costs alone, \
     no timer involved; the tokio column holds tokio's 1c guard of the same run on \
     every row, so ours/tokio is the share of tokio's guard a component takes by \
     itself. 1.5x faster than tokio's guard is ours/tokio at most 0.67.";

pub fn workload(args: &Args) -> Workload {
    let args = args.clone();
    Workload {
        id: "1f",
        key: "floor",
        name: "the guard's floor: what any timer pays per guard, one thread, inside the busy server's runtime (as 1c)",
        metrics: FLOOR_ROWS.iter().map(|&row| (row, Unit::Ns)).collect(),
        runs: args.runs,
        run: Box::new(move |imp| guard_floor(imp, &args)),
    }
}

fn guard_floor(imp: Imp, args: &Args) -> Option<Vec<f64>> {
    match imp {
        Imp::Ours => Some(in_busy_server(imp, args.workers, || {
            let mut rows = vec![busy_guard(imp, args.guards)];
            rows.extend(floor_components(args.guards));
            rows
        })),
        Imp::Tokio => Some(vec![
            in_busy_server(imp, args.workers, || busy_guard(
                imp,
                args.guards
            ));
            FLOOR_ROWS.len()
        ]),
        _ => None,
    }
}

/// ns per iteration of each of 1f's components (rows a to the one-lock
/// floor), `n` iterations each, on this thread in the current runtime's
/// context. `black_box` keeps every read, lock and count.
fn floor_components(n: u32) -> Vec<f64> {
    let lock = std::sync::Mutex::new(0u64);
    let spin = (AtomicBool::new(false), std::cell::Cell::new(0u64));
    let count = Arc::new(0u64);
    let clock_read = || {
        black_box(tokio::time::Instant::now());
    };
    let runtime_lookup = || {
        drop(black_box(tokio::runtime::Handle::try_current()));
    };
    let lock_round_trip = || {
        *black_box(&lock)
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) += 1;
    };
    // The shards' lock: take with a compare-and-swap, release with a store.
    let spin_round_trip = || {
        let (locked, value) = black_box(&spin);
        while locked
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {}
        value.set(value.get() + 1);
        locked.store(false, Ordering::Release);
    };
    let count_round_trip = || {
        drop(black_box(Arc::clone(black_box(&count))));
    };
    vec![
        ns_per_iteration(n, clock_read),
        ns_per_iteration(n, runtime_lookup),
        ns_per_iteration(n, lock_round_trip),
        ns_per_iteration(n, spin_round_trip),
        ns_per_iteration(n, count_round_trip),
        // A std-mutex design takes a count on the timer as well.
        ns_per_iteration(n, || {
            let timer = black_box(Arc::clone(black_box(&count)));
            fixed_costs(2, lock_round_trip);
            drop(timer);
        }),
        ns_per_iteration(n, || fixed_costs(2, spin_round_trip)),
        ns_per_iteration(n, || fixed_costs(1, spin_round_trip)),
    ]
}

/// What a guard pays whatever the timer, in its order: read the clock, find
/// the runtime, `locks` round trips of `lock` (file, then remove), let go.
fn fixed_costs(locks: u32, lock: impl Fn()) {
    let now = black_box(tokio::time::Instant::now());
    let runtime = black_box(tokio::runtime::Handle::try_current());
    for _ in 0..locks {
        lock();
    }
    drop(runtime);
    black_box(now);
}

/// Calls `body` `n` times on this thread; ns per call.
fn ns_per_iteration(n: u32, mut body: impl FnMut()) -> f64 {
    let start = Instant::now();
    for _ in 0..n {
        body();
    }
    start.elapsed().as_nanos() as f64 / f64::from(n)
}
