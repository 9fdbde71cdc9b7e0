//! Side-by-side benchmarks of `tiered-timer` against its peers, in one
//! process, alternating implementations within each run, median of several
//! runs. Prints a markdown table: one row per workload and metric, one column
//! per implementation, and the ratio ours/peer for each peer.
//!
//! ```sh
//! cargo run --release -p tiered-timer-benchmarks --example compare          # everything, a few minutes
//! cargo run --release -p tiered-timer-benchmarks --example compare 3        # one workload (id prefix)
//! cargo run --release -p tiered-timer-benchmarks --example compare cascade  # or its key: guard, reset,
//!                                 # mass, cascade, idle, memory, blocked, arm, floor
//! # with tokio's alternative (per-worker) timer as a peer column:
//! RUSTFLAGS="--cfg tokio_unstable" cargo run --release \
//!     --target-dir target/unstable -p tiered-timer-benchmarks --example compare
//! ```
//!
//! Peers: `tokio::time`, tokio's alternative timer (`tokio-alt`, only in a
//! `--cfg tokio_unstable` build, and only in the workloads run by tasks:
//! 1b, 3, 4 and 7), `pingora-timeout` (`fast_timeout`/`fast_sleep`: 10 ms
//! buckets, a clock thread), `futures-timer` (its own timer thread) and
//! `async-io`'s `Timer` (its own reactor thread). Every run builds a fresh
//! 2-worker tokio runtime, with only the time driver enabled except in the
//! two server guards (1a, 1c, and 1c's floor 1f), which enable tokio's I/O
//! driver too.
//!
//! 1f is a diagnostic, not a comparison, and runs last: in 1c's runtime it
//! times what any guard pays whatever the timer (the clock read, finding
//! the current runtime, a lock round trip, a reference count), each alone
//! and summed, against tokio's 1c guard of the same run (see the note the
//! table ends with).
//!
//! Knobs (environment):
//! - `COMPARE_RUNS`: runs of the cheap workloads (1, 2), default 5;
//! - `COMPARE_HEAVY_RUNS`: runs of workloads 4, 6 and 7, default 3;
//! - `COMPARE_MASS_RUNS`: runs of workload 3, default 7 (its CPU swings
//!   by 15% from run to run for every implementation);
//! - `COMPARE_IDLE_RUNS`: runs of workload 5, default 1;
//! - `COMPARE_RESET_ROUNDS`: rounds of workload 2, default 50;
//! - `COMPARE_ARM_RUNS`: runs of workload 8, default 7;
//! - `COMPARE_ARM_TASKS`: tasks per run of workload 8, default 1 000 000;
//! - `COMPARE_IDLE_SECS`: length of the idle window, default 10;
//! - `COMPARE_CASCADE_MS`: the common deadline of workload 4, default 4500
//!   (beyond the 4.096 s span of the two finest wheels of both tokio and a
//!   default `tiered-timer`, so entries pass through overflow wheels);
//! - `COMPARE_GUARDS`: guards per run of 1a and 1c, and iterations of each
//!   of 1f's components, default 1 000 000;
//! - `COMPARE_BLOCKED_MS`: length of workload 7, default 3000;
//! - `COMPARE_IMPLS`: a comma list restricting the implementations, e.g.
//!   `ours,tokio`;
//! - `COMPARE_WORKERS`: workers of every runtime, default 2 (4 on this
//!   2-core machine oversubscribes it: a timer's lock holder can then be
//!   preempted).
//!
//! Workloads 3 (mass expiry), 5 (idle), 6 (memory) and 8 (arming) run each measurement
//! in a fresh child process (this binary re-executed with a hidden
//! argument): a peer's background thread (pingora's clock thread ticks every
//! 10 ms forever) would otherwise be charged to whoever is measured after
//! it, and live heap is only meaningful in a process that holds nothing
//! else.
//!
//! Output: the markdown table on stdout, and the same table with SVG plots
//! of it in the directory `COMPARE_PLOTS` (default `target/compare/`, the
//! `compare/` directory of the cargo target directory this binary was
//! built into; `COMPARE_PLOTS=off` writes nothing), drawn with plotters
//! (see `tiered_timer_benchmarks::plot`), each for the workloads that ran:
//! - `table.md`: the table printed;
//! - `guard.svg` (1a, 1b, 1c) and `reset.svg` (2): ns per operation per
//!   implementation, the median of the runs with their min..max;
//! - `mass-lateness.svg` (3) and `blocked-lateness.svg` (7): the lateness
//!   of every sleep of every run, per implementation, as the share of
//!   sleeps at least `x` ms late, log-log (where a curve crosses 50% is its
//!   median, 1% its p99, its end its maximum).

use std::future::Future;
use std::hint::black_box;
use std::pin::{pin, Pin};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------
// Live heap counting, switched on only in the memory child process so the
// timing workloads pay nothing but one relaxed load per allocation.

#[path = "../../tests/support/counting_alloc.rs"]
mod counting_alloc;

// ---------------------------------------------------------------------------
// Implementations.

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Imp {
    Ours,
    Tokio,
    /// tokio's per-worker timer (`Builder::enable_alt_timer`): only in a
    /// build with `RUSTFLAGS="--cfg tokio_unstable"`, and only in the
    /// workloads run by tasks on a multi-thread runtime (it has no
    /// by-hand mode).
    TokioAlt,
    Pingora,
    FuturesTimer,
    AsyncIo,
}

impl Imp {
    #[cfg(not(tokio_unstable))]
    const ALL: &[Imp] = &[
        Imp::Ours,
        Imp::Tokio,
        Imp::Pingora,
        Imp::FuturesTimer,
        Imp::AsyncIo,
    ];
    #[cfg(tokio_unstable)]
    const ALL: &[Imp] = &[
        Imp::Ours,
        Imp::Tokio,
        Imp::TokioAlt,
        Imp::Pingora,
        Imp::FuturesTimer,
        Imp::AsyncIo,
    ];

    fn name(self) -> &'static str {
        match self {
            Imp::Ours => "ours",
            Imp::Tokio => "tokio",
            Imp::TokioAlt => "tokio-alt",
            Imp::Pingora => "pingora",
            Imp::FuturesTimer => "futures-timer",
            Imp::AsyncIo => "async-io",
        }
    }

    fn parse(name: &str) -> Option<Imp> {
        Imp::ALL
            .iter()
            .copied()
            .find(|imp| imp.name() == name.trim())
    }
}

/// Sleeps until `deadline` with the implementation's own sleep. Those
/// without an absolute deadline get the remaining duration at first poll.
async fn sleep_until(imp: Imp, deadline: Instant) {
    match imp {
        Imp::Ours => tiered_timer::sleep_until(deadline.into()).await,
        Imp::Tokio | Imp::TokioAlt => tokio::time::sleep_until(deadline.into()).await,
        Imp::Pingora => {
            pingora_timeout::fast_timeout::fast_sleep(
                deadline.saturating_duration_since(Instant::now()),
            )
            .await
        }
        Imp::FuturesTimer => {
            futures_timer::Delay::new(deadline.saturating_duration_since(Instant::now())).await
        }
        Imp::AsyncIo => {
            async_io::Timer::at(deadline).await;
        }
    }
}

/// One implementation's sleep for `d`, boxed, each at its own size.
fn boxed_sleep(imp: Imp, d: Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    match imp {
        Imp::Ours => Box::pin(tiered_timer::sleep(d)),
        Imp::Tokio | Imp::TokioAlt => Box::pin(tokio::time::sleep(d)),
        Imp::Pingora => Box::pin(pingora_timeout::fast_timeout::fast_sleep(d)),
        Imp::FuturesTimer => Box::pin(futures_timer::Delay::new(d)),
        Imp::AsyncIo => Box::pin(async move {
            async_io::Timer::after(d).await;
        }),
    }
}

/// Workers of the multi-thread runtimes: `COMPARE_WORKERS`, default 2
/// (more than this machine's 2 cores to see an oversubscribed one).
fn workers() -> usize {
    env_or("COMPARE_WORKERS", 2)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers())
        .enable_time()
        .build()
        .expect("tokio runtime")
}

/// The 2-worker runtime a multi-thread workload of `imp` runs on: tokio's
/// alternative timer for `TokioAlt`, the default one otherwise.
fn runtime_for(imp: Imp) -> tokio::runtime::Runtime {
    if imp != Imp::TokioAlt {
        return runtime();
    }
    #[cfg(tokio_unstable)]
    {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers())
            .enable_alt_timer()
            .build()
            .expect("tokio runtime")
    }
    #[cfg(not(tokio_unstable))]
    unreachable!("tokio's alternative timer needs RUSTFLAGS=\"--cfg tokio_unstable\"")
}

/// A 2-worker runtime with tokio's I/O driver as well as its time driver,
/// as a server has: tokio then wakes its driver thread through an eventfd.
fn server_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers())
        .enable_all()
        .build()
        .expect("tokio runtime")
}

use tiered_timer_benchmarks::process_cpu;

/// Our default timer's driver wakeups so far (NaN for the peers). Call in
/// the runtime's context.
fn our_wakeups(imp: Imp) -> f64 {
    match imp {
        Imp::Ours => tiered_timer::Handle::current().stats().wakeups as f64,
        _ => f64::NAN,
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx] as f64 / 1e6
}

// ---------------------------------------------------------------------------
// Workload 1: a guard armed then cancelled.

/// Pending on the first poll, ready on the second; wakes itself when
/// `wake` so it can run as a task.
struct PendingOnce {
    polled: bool,
    wake: bool,
}

impl PendingOnce {
    fn by_hand() -> PendingOnce {
        PendingOnce {
            polled: false,
            wake: false,
        }
    }

    fn in_task() -> PendingOnce {
        PendingOnce {
            polled: false,
            wake: true,
        }
    }
}

impl Future for PendingOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if std::mem::replace(&mut self.polled, true) {
            Poll::Ready(())
        } else {
            if self.wake {
                cx.waker().wake_by_ref();
            }
            Poll::Pending
        }
    }
}

/// `timeout` for the peers that have none (futures-timer, async-io): the
/// future first, then the delay, as tokio's `Timeout` does.
struct Guard<F, D> {
    future: F,
    delay: D,
}

impl<F: Future + Unpin, D: Future + Unpin> Future for Guard<F, D> {
    type Output = Option<F::Output>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Poll::Ready(v) = Pin::new(&mut self.future).poll(cx) {
            return Poll::Ready(Some(v));
        }
        match Pin::new(&mut self.delay).poll(cx) {
            Poll::Ready(_) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

const GUARD_TIMEOUT: Duration = Duration::from_secs(5);
/// The busy server's guard (1c): later than every other timer pending.
const BUSY_GUARD_TIMEOUT: Duration = Duration::from_secs(60);
/// Guards per by-hand run (1a, 1c, 1f): `COMPARE_GUARDS`, default 1 000 000
/// (fewer for a run under callgrind).
fn guards_by_hand_count() -> u32 {
    env_or("COMPARE_GUARDS", 1_000_000)
}

/// Calls `body` with a constructor of the implementation's guard around
/// `inner`, monomorphised per implementation.
macro_rules! with_guard {
    ($imp:expr, $inner:expr, $body:ident $(, $arg:expr)*) => {
        with_guard!($imp, GUARD_TIMEOUT, $inner, $body $(, $arg)*)
    };
    ($imp:expr, $timeout:expr, $inner:expr, $body:ident $(, $arg:expr)*) => {
        match $imp {
            Imp::Ours => $body(|| tiered_timer::timeout($timeout, $inner) $(, $arg)*),
            Imp::Tokio | Imp::TokioAlt => {
                $body(|| tokio::time::timeout($timeout, $inner) $(, $arg)*)
            }
            Imp::Pingora => $body(
                || pingora_timeout::fast_timeout::fast_timeout($timeout, $inner)
                $(, $arg)*
            ),
            Imp::FuturesTimer => $body(
                || Guard { future: $inner, delay: futures_timer::Delay::new($timeout) }
                $(, $arg)*
            ),
            Imp::AsyncIo => $body(
                || Guard { future: $inner, delay: async_io::Timer::after($timeout) }
                $(, $arg)*
            ),
        }
    };
}

/// Arms and cancels `n` guards on this thread, polling by hand; ns per guard.
fn guards_by_hand<G: Future>(make: impl Fn() -> G, n: u32) -> f64 {
    let mut cx = Context::from_waker(Waker::noop());
    let start = Instant::now();
    for _ in 0..n {
        let mut guard = pin!(make());
        assert!(guard.as_mut().poll(&mut cx).is_pending());
        assert!(black_box(guard.as_mut().poll(&mut cx).is_ready()));
    }
    start.elapsed().as_nanos() as f64 / f64::from(n)
}

/// Other timers pending in the busy-server guard (1c).
const BUSY_OTHERS: u64 = 100_000;

/// 1a, the idle server: one thread, inside the context of a 2-worker runtime
/// with tokio's I/O driver, no other timer pending. Each guard is the
/// earliest timer, so tokio unparks its driver (an eventfd write) on every
/// registration.
fn guard_idle_server(imp: Imp) -> Option<Vec<f64>> {
    if imp == Imp::TokioAlt {
        return None;
    }
    let rt = server_runtime();
    let _in_rt = rt.enter();
    let ns = with_guard!(
        imp,
        PendingOnce::by_hand(),
        guards_by_hand,
        guards_by_hand_count()
    );
    Some(vec![ns])
}

/// 1c, the busy server: as 1a, with 100 000 other timers of the same
/// implementation pending and the runtime parked once (see
/// [`in_busy_server`]).
fn guard_busy_server(imp: Imp) -> Option<Vec<f64>> {
    if imp == Imp::TokioAlt {
        return None;
    }
    Some(vec![in_busy_server(imp, || busy_guard(imp))])
}

/// Runs `body` on this thread in the context of 1c's busy server: a
/// server runtime with 100 000 other timers of `imp` pending (due 20..30 s
/// out, none due during the run even under callgrind), parked once
/// (`block_on` of a 1 ms sleep) so tokio's driver sleeps until the earliest
/// of them.
fn in_busy_server<T>(imp: Imp, body: impl FnOnce() -> T) -> T {
    let rt = server_runtime();
    let _in_rt = rt.enter();
    let mut cx = Context::from_waker(Waker::noop());
    let mut others: Vec<_> = (0..BUSY_OTHERS)
        .map(|i| {
            boxed_sleep(
                imp,
                Duration::from_secs(20) + Duration::from_micros(i * 100),
            )
        })
        .collect();
    for other in &mut others {
        assert!(other.as_mut().poll(&mut cx).is_pending());
    }
    rt.block_on(sleep_until(imp, Instant::now() + Duration::from_millis(1)));
    let result = body();
    drop(others);
    result
}

/// ns per guard of `imp` in the busy server (call inside
/// [`in_busy_server`]): the guards, of 60 s, are never the earliest timer.
fn busy_guard(imp: Imp) -> f64 {
    with_guard!(
        imp,
        BUSY_GUARD_TIMEOUT,
        PendingOnce::by_hand(),
        guards_by_hand,
        guards_by_hand_count()
    )
}

// ---------------------------------------------------------------------------
// Workload 1f: the floor under 1c's guard, a diagnostic.

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

/// 1f, the guard's floor: in 1c's busy server, the `ours` column holds our
/// guard then the cost of each component alone (no timer involved); the
/// `tokio` column holds tokio's guard of the same run on every row, so
/// ours/tokio is the share of tokio's guard a component takes by itself.
/// The other peers have no column here.
fn guard_floor(imp: Imp) -> Option<Vec<f64>> {
    match imp {
        Imp::Ours => Some(in_busy_server(imp, || {
            let mut rows = vec![busy_guard(imp)];
            rows.extend(floor_components(guards_by_hand_count()));
            rows
        })),
        Imp::Tokio => Some(vec![
            in_busy_server(imp, || busy_guard(imp));
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

const GUARD_TASKS: u32 = 1000;
const GUARDS_PER_TASK: u32 = 1000;

/// 1b: 1000 tasks on 2 workers, each arming and cancelling guards in turn
/// (the inner future wakes its task and is ready on its second poll);
/// wall-clock ns per guard.
fn guards_in_tasks<G>(
    make: impl Fn() -> G + Copy + Send + 'static,
    rt: &tokio::runtime::Runtime,
) -> f64
where
    G: Future + Send,
{
    let start = Instant::now();
    rt.block_on(async move {
        let handles: Vec<_> = (0..GUARD_TASKS)
            .map(|_| {
                tokio::spawn(async move {
                    for _ in 0..GUARDS_PER_TASK {
                        black_box(make().await);
                    }
                })
            })
            .collect();
        for h in handles {
            h.await.unwrap();
        }
    });
    start.elapsed().as_nanos() as f64 / f64::from(GUARD_TASKS * GUARDS_PER_TASK)
}

fn guard_tasks(imp: Imp) -> Option<Vec<f64>> {
    let rt = runtime_for(imp);
    let ns = with_guard!(imp, PendingOnce::in_task(), guards_in_tasks, &rt);
    Some(vec![ns])
}

// ---------------------------------------------------------------------------
// Workload 2: reset-heavy idle guards.

const RESET_SLEEPS: usize = 10_000;
/// Rounds of workload 2: `COMPARE_RESET_ROUNDS`, default 50 (under
/// callgrind, two round counts give the instructions per reset + poll).
fn reset_rounds() -> u32 {
    env_or("COMPARE_RESET_ROUNDS", 50)
}

/// 10 000 registered sleeps, each pushed later and re-polled 50 times, in
/// rounds over all of them; ns per reset + poll. pingora's sleeps cannot be
/// reset.
fn reset_later(imp: Imp) -> Option<Vec<f64>> {
    let rt = runtime();
    let _in_rt = rt.enter();
    let mut cx = Context::from_waker(Waker::noop());
    let base = Duration::from_secs(10);
    let at = |round: u32| Duration::from_millis(u64::from(round));
    let rounds = reset_rounds();
    let ops = f64::from(rounds) * RESET_SLEEPS as f64;
    let ns = match imp {
        Imp::Ours => {
            let mut sleeps: Vec<_> = (0..RESET_SLEEPS)
                .map(|_| tiered_timer::sleep(base))
                .collect();
            for s in &mut sleeps {
                assert!(Pin::new(s).poll(&mut cx).is_pending());
            }
            // After the sleeps are made: every reset is to a later deadline
            // (making 10 000 sleeps can take longer than one round's 1 ms).
            let origin = Instant::now();
            let start = origin;
            for round in 1..=rounds {
                let deadline = (origin + base + at(round)).into();
                for s in &mut sleeps {
                    Pin::new(&mut *s).reset(deadline);
                    black_box(Pin::new(s).poll(&mut cx).is_pending());
                }
            }
            start.elapsed()
        }
        Imp::Tokio => {
            let mut sleeps: Vec<_> = (0..RESET_SLEEPS)
                .map(|_| Box::pin(tokio::time::sleep(base)))
                .collect();
            for s in &mut sleeps {
                assert!(s.as_mut().poll(&mut cx).is_pending());
            }
            // After the sleeps are made: every reset is to a later deadline
            // (making 10 000 sleeps can take longer than one round's 1 ms).
            let origin = Instant::now();
            let start = origin;
            for round in 1..=rounds {
                let deadline = (origin + base + at(round)).into();
                for s in &mut sleeps {
                    s.as_mut().reset(deadline);
                    black_box(s.as_mut().poll(&mut cx).is_pending());
                }
            }
            start.elapsed()
        }
        Imp::Pingora | Imp::TokioAlt => return None,
        Imp::FuturesTimer => {
            let mut sleeps: Vec<_> = (0..RESET_SLEEPS)
                .map(|_| futures_timer::Delay::new(base))
                .collect();
            for s in &mut sleeps {
                assert!(Pin::new(s).poll(&mut cx).is_pending());
            }
            // After the sleeps are made: every reset is to a later deadline
            // (making 10 000 sleeps can take longer than one round's 1 ms).
            let origin = Instant::now();
            let start = origin;
            for round in 1..=rounds {
                for s in &mut sleeps {
                    s.reset(base + at(round));
                    black_box(Pin::new(s).poll(&mut cx).is_pending());
                }
            }
            start.elapsed()
        }
        Imp::AsyncIo => {
            let mut sleeps: Vec<_> = (0..RESET_SLEEPS)
                .map(|_| async_io::Timer::after(base))
                .collect();
            for s in &mut sleeps {
                assert!(Pin::new(s).poll(&mut cx).is_pending());
            }
            // After the sleeps are made: every reset is to a later deadline
            // (making 10 000 sleeps can take longer than one round's 1 ms).
            let origin = Instant::now();
            let start = origin;
            for round in 1..=rounds {
                let deadline = origin + base + at(round);
                for s in &mut sleeps {
                    s.set_at(deadline);
                    black_box(Pin::new(s).poll(&mut cx).is_pending());
                }
            }
            start.elapsed()
        }
    };
    Some(vec![ns.as_nanos() as f64 / ops])
}

// ---------------------------------------------------------------------------
// Workload 3: mass expiry.

const MASS_TASKS: usize = 200_000;

/// 200 000 tasks each sleeping 1..=1000 ms (spread evenly, shuffled over the
/// spawn order) from their first poll. Returns process CPU from the first
/// spawn to the last wake, and lateness p50, p99 and max. Each run is a
/// fresh child process, as in 5 and 6: process CPU counts every thread,
/// and the peers' own threads (pingora's clock, futures-timer's and
/// async-io's) would otherwise run, and be charged, during everyone's run.
fn mass_expiry(imp: Imp) -> Option<Vec<f64>> {
    Some(run_child_with_lateness(
        "3",
        imp,
        &["mass".into(), imp.name().into()],
    ))
}

/// 3, in the child: prints the values [`mass_expiry`] returns, then the
/// lateness of every sleep on a line of its own (for the plots).
fn mass_expiry_child(imp: Imp) {
    let (values, lateness) = mass_expiry_here(imp);
    let line: Vec<String> = values.iter().map(f64::to_string).collect();
    println!("{}", line.join(" "));
    println!("{}", lateness.to_text());
}

fn mass_expiry_here(imp: Imp) -> (Vec<f64>, LatenessHistogram) {
    let rt = runtime_for(imp);
    let woken = rt.block_on(async move { our_wakeups(imp) });
    let cpu = process_cpu();
    let mut late: Vec<u64> = rt.block_on(async move {
        let handles: Vec<_> = (0..MASS_TASKS)
            .map(|i| {
                let d = Duration::from_millis(1 + (i as u64 * 7919) % 1000);
                tokio::spawn(async move {
                    let deadline = Instant::now() + d;
                    sleep_until(imp, deadline).await;
                    Instant::now().duration_since(deadline).as_nanos() as u64
                })
            })
            .collect();
        let mut late = Vec::with_capacity(MASS_TASKS);
        for h in handles {
            late.push(h.await.unwrap());
        }
        late
    });
    let cpu = process_cpu() - cpu;
    let woken = rt.block_on(async move { our_wakeups(imp) }) - woken;
    drop(rt);
    late.sort_unstable();
    let values = vec![
        ms(cpu),
        percentile(&late, 0.5),
        percentile(&late, 0.99),
        percentile(&late, 1.0),
        woken,
    ];
    (values, LatenessHistogram::from_samples(&late))
}

// ---------------------------------------------------------------------------
// Workload 4: cascade storm.

const STORM_TASKS: usize = 300_000;

/// 300 000 tasks due at one far deadline, while a 1 ms ticker (the same
/// implementation's sleeps) records its worst lateness from the moment every
/// storm task has registered until the last one woke. Returns the time from
/// the deadline to the last wake, the ticker's worst lateness, and process
/// CPU from the first spawn to the last wake.
fn cascade_storm(imp: Imp, far: Duration) -> Option<Vec<f64>> {
    let rt = runtime_for(imp);
    let woken = rt.block_on(async move { our_wakeups(imp) });
    let cpu = process_cpu();
    let (all_fired, ticker_worst) = rt.block_on(async move {
        let deadline = Instant::now() + far;
        let registered = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let worst = Arc::new(AtomicU64::new(0));
        let ticker = tokio::spawn({
            let (registered, done, worst) = (registered.clone(), done.clone(), worst.clone());
            async move {
                let start = Instant::now();
                let mut k = 0u32;
                while !done.load(Ordering::Relaxed) {
                    k += 1;
                    let next = start + Duration::from_millis(u64::from(k));
                    sleep_until(imp, next).await;
                    let now = Instant::now();
                    if registered.load(Ordering::Relaxed) == STORM_TASKS {
                        let late = now.duration_since(next).as_nanos() as u64;
                        worst.fetch_max(late, Ordering::Relaxed);
                    }
                    // Skip ticks already missed, as `MissedTickBehavior::Skip`.
                    while start + Duration::from_millis(u64::from(k) + 1) < now {
                        k += 1;
                    }
                }
            }
        });
        let handles: Vec<_> = (0..STORM_TASKS)
            .map(|_| {
                let registered = registered.clone();
                tokio::spawn(async move {
                    let mut sleep = pin!(sleep_until(imp, deadline));
                    // The first poll registers the timer.
                    if std::future::poll_fn(|cx| Poll::Ready(sleep.as_mut().poll(cx).is_ready()))
                        .await
                    {
                        registered.fetch_add(1, Ordering::Relaxed);
                        return Instant::now();
                    }
                    registered.fetch_add(1, Ordering::Relaxed);
                    sleep.await;
                    Instant::now()
                })
            })
            .collect();
        let mut last = deadline;
        for h in handles {
            last = last.max(h.await.unwrap());
        }
        done.store(true, Ordering::Relaxed);
        ticker.await.unwrap();
        (last.duration_since(deadline), worst.load(Ordering::Relaxed))
    });
    let cpu = process_cpu() - cpu;
    let woken = rt.block_on(async move { our_wakeups(imp) }) - woken;
    drop(rt);
    Some(vec![
        ms(all_fired),
        ticker_worst as f64 / 1e6,
        ms(cpu),
        woken,
    ])
}

// ---------------------------------------------------------------------------
// Workload 7: the blocked worker.

const BLOCKED_SLEEPERS: u64 = 1000;
const BLOCKED_EVERY: Duration = Duration::from_millis(250);
const BLOCKED_FOR: Duration = Duration::from_millis(100);

/// 2 workers; every 250 ms a CPU-heavy request arrives (spawned from
/// outside the runtime, so whichever worker picks it up runs it) and spins
/// on its worker for 100 ms, while 1 000 tasks keep sleeping 5..54 ms each
/// in turn. Returns the sleeps' lateness p50, p99 and max over `length`.
fn blocked_worker(imp: Imp, length: Duration) -> Option<Vec<f64>> {
    let rt = runtime_for(imp);
    let stop = Arc::new(AtomicBool::new(false));
    let requests = std::thread::spawn({
        let (handle, stop) = (rt.handle().clone(), stop.clone());
        move || {
            let start = Instant::now();
            let mut k = 1;
            while !stop.load(Ordering::Relaxed) {
                let next = start + BLOCKED_EVERY * k;
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
                k += 1;
                drop(handle.spawn(async {
                    let until = Instant::now() + BLOCKED_FOR;
                    while Instant::now() < until {
                        std::hint::spin_loop();
                    }
                }));
            }
        }
    });
    let mut late: Vec<u64> = rt.block_on(async move {
        let end = Instant::now() + length;
        let handles: Vec<_> = (0..BLOCKED_SLEEPERS)
            .map(|i| {
                tokio::spawn(async move {
                    let mut late = Vec::new();
                    let mut n = i;
                    while Instant::now() < end {
                        n = n * 31 + 7;
                        let deadline = Instant::now() + Duration::from_millis(5 + n % 50);
                        sleep_until(imp, deadline).await;
                        late.push(Instant::now().duration_since(deadline).as_nanos() as u64);
                    }
                    late
                })
            })
            .collect();
        let mut late = Vec::new();
        for h in handles {
            late.extend(h.await.unwrap());
        }
        late
    });
    stop.store(true, Ordering::Relaxed);
    requests.join().unwrap();
    drop(rt);
    late.sort_unstable();
    record_lateness("7", imp, &late);
    Some(vec![
        percentile(&late, 0.5),
        percentile(&late, 0.99),
        percentile(&late, 1.0),
    ])
}

// ---------------------------------------------------------------------------
// Workload 8: arming many long timers from tasks.

/// Tasks per run of workload 8: `COMPARE_ARM_TASKS`, default 1 000 000
/// (fewer for a run under callgrind).
fn arm_tasks() -> usize {
    env_or("COMPARE_ARM_TASKS", 1_000_000)
}

/// A server accepting a million connections, each arming an idle timeout
/// in its first poll: 1 000 000 tasks on a current-thread runtime, each
/// sleeping an hour (plus up to 1 000 s, spread over the spawn order).
/// Returns the CPU per task above the same tasks with no timer, and that
/// baseline itself. Each measurement is a fresh child process (a fresh heap:
/// the timer's tables grow from empty, as in a new server), the two
/// back to back in each run.
fn arm_many(imp: Imp) -> Option<Vec<f64>> {
    if imp == Imp::TokioAlt {
        // Ignored on a current-thread runtime.
        return None;
    }
    let with = run_child(&["arm".into(), imp.name().into()])[0];
    let without = run_child(&["arm".into(), "none".into()])[0];
    Some(vec![with - without, without])
}

/// 8, in the child: prints the process CPU per task, in ns, from the first
/// spawn until every task has been polled once (`imp` of `None`: tasks
/// that arm nothing).
fn arm_child(imp: Option<Imp>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("tokio runtime");
    // Start the timer (ours is made on first use), and the peers' threads.
    if let Some(imp) = imp {
        rt.block_on(sleep_until(imp, Instant::now() + Duration::from_millis(1)));
    }
    let polled = Arc::new(AtomicUsize::new(0));
    let cpu = process_cpu();
    let tasks = arm_tasks();
    rt.block_on(async {
        for i in 0..tasks as u64 {
            let timeout = Duration::from_secs(3600) + Duration::from_millis(i * 7919 % 1_000_000);
            let polled = polled.clone();
            // Each task counts its first poll, arming its timer in it.
            let first_poll = std::future::poll_fn(move |_| {
                polled.fetch_add(1, Ordering::Relaxed);
                Poll::Ready(())
            });
            drop(match imp {
                Some(Imp::Ours) => tokio::spawn(async move {
                    let sleep = tiered_timer::sleep(timeout);
                    first_poll.await;
                    sleep.await;
                }),
                Some(Imp::Tokio | Imp::TokioAlt) => tokio::spawn(async move {
                    let sleep = tokio::time::sleep(timeout);
                    first_poll.await;
                    sleep.await;
                }),
                Some(Imp::Pingora) => tokio::spawn(async move {
                    let sleep = pingora_timeout::fast_timeout::fast_sleep(timeout);
                    first_poll.await;
                    sleep.await;
                }),
                Some(Imp::FuturesTimer) => tokio::spawn(async move {
                    let sleep = futures_timer::Delay::new(timeout);
                    first_poll.await;
                    sleep.await;
                }),
                Some(Imp::AsyncIo) => tokio::spawn(async move {
                    let sleep = async_io::Timer::after(timeout);
                    first_poll.await;
                    sleep.await;
                }),
                None => tokio::spawn(async move {
                    black_box(timeout);
                    first_poll.await;
                    std::future::pending::<()>().await;
                }),
            });
        }
        while polled.load(Ordering::Relaxed) < tasks {
            tokio::task::yield_now().await;
        }
    });
    let cpu = process_cpu() - cpu;
    println!("{}", cpu.as_nanos() as f64 / tasks as f64);
    // Skip tearing down a million tasks.
    std::process::exit(0);
}

// ---------------------------------------------------------------------------
// Workloads 5 and 6, each measurement in a fresh child process.

const IDLE_TIMERS: u64 = 100_000;
const MEMORY_TIMERS: usize = 1_000_000;

/// Runs this binary again with `--child args...` and parses the numbers it
/// prints.
fn run_child(args: &[String]) -> Vec<f64> {
    let exe = std::env::current_exe().expect("path of this binary");
    let out = Command::new(exe)
        .arg("--child")
        .args(args)
        .output()
        .expect("run a child");
    assert!(
        out.status.success(),
        "child {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(|v| v.parse().expect("a number from the child"))
        .collect()
}

/// 5: `imp` of `None` is a runtime with no timers at all, the baseline.
fn idle(imp: Option<Imp>, secs: u64) -> Option<Vec<f64>> {
    if imp == Some(Imp::TokioAlt) {
        return None;
    }
    let name = imp.map_or("none", Imp::name);
    let out = run_child(&["idle".into(), name.into(), secs.to_string()]);
    // The child prints milliseconds; idle CPU is shown in microseconds.
    Some(vec![out[0] * 1e3, out[1]])
}

/// 6: bytes per pending timer, future included.
fn memory(imp: Imp) -> Option<Vec<f64>> {
    if imp == Imp::TokioAlt {
        return None;
    }
    Some(run_child(&["memory".into(), imp.name().into()]))
}

fn child(args: &[String]) {
    match args {
        [what, imp, secs] if what == "idle" => {
            idle_child(Imp::parse(imp), secs.parse().expect("seconds"));
        }
        [what, imp] if what == "memory" => {
            memory_child(Imp::parse(imp).expect("an implementation"));
        }
        [what, imp] if what == "arm" => arm_child(Imp::parse(imp)),
        [what, imp] if what == "mass" => {
            mass_expiry_child(Imp::parse(imp).expect("an implementation"));
        }
        _ => panic!("unknown child {args:?}"),
    }
}

/// 100 000 timers an hour out, registered by a poll, then nothing due for
/// `secs`: prints the process CPU used and our driver's wakeups over that
/// window (NaN for the peers, which have no such count).
fn idle_child(imp: Option<Imp>, secs: u64) {
    let rt = runtime();
    let _in_rt = rt.enter();
    let mut cx = Context::from_waker(Waker::noop());
    let mut timers: Vec<_> = match imp {
        Some(imp) => (0..IDLE_TIMERS)
            .map(|i| boxed_sleep(imp, Duration::from_secs(3600) + Duration::from_micros(i)))
            .collect(),
        None => Vec::new(),
    };
    for t in &mut timers {
        assert!(t.as_mut().poll(&mut cx).is_pending());
    }
    let wakeups = || imp.map_or(f64::NAN, our_wakeups);
    // Let registrations, thread starts and the runtime settle.
    std::thread::sleep(Duration::from_millis(500));
    let (cpu, woken) = (process_cpu(), wakeups());
    std::thread::sleep(Duration::from_secs(secs));
    let (cpu, woken) = (process_cpu() - cpu, wakeups() - woken);
    println!("{} {}", ms(cpu), woken);
    drop(timers);
}

/// Creates and polls 1 000 000 timers an hour out, each boxed (the future
/// is part of the cost) in a vector allocated beforehand, and prints the
/// growth of the live heap per timer.
fn memory_child(imp: Imp) {
    counting_alloc::set_counting(true);
    let rt = runtime();
    let _in_rt = rt.enter();
    let mut cx = Context::from_waker(Waker::noop());
    let mut timers = Vec::with_capacity(MEMORY_TIMERS);
    let before = counting_alloc::live_bytes();
    for i in 0..MEMORY_TIMERS {
        let mut t = boxed_sleep(
            imp,
            Duration::from_secs(3600) + Duration::from_micros(i as u64),
        );
        assert!(t.as_mut().poll(&mut cx).is_pending());
        timers.push(t);
    }
    let after = counting_alloc::live_bytes();
    let future = std::mem::size_of_val(&*timers[0]);
    println!(
        "{} {future}",
        (after - before) as f64 / MEMORY_TIMERS as f64
    );
    counting_alloc::set_counting(false);
    drop(timers);
}

// ---------------------------------------------------------------------------
// The harness: workloads, runs, medians, the table.

#[derive(Clone, Copy)]
enum Unit {
    Ns,
    Us,
    Ms,
    Bytes,
    Count,
}

impl Unit {
    fn show(self, v: f64) -> String {
        if v.is_nan() {
            return "n/a".into();
        }
        match self {
            Unit::Ns => format!("{v:.0} ns"),
            Unit::Us => format!("{v:.0} µs"),
            Unit::Ms if v < 10.0 => format!("{v:.2} ms"),
            Unit::Ms => format!("{v:.1} ms"),
            Unit::Bytes => format!("{v:.0} B"),
            Unit::Count => format!("{v:.0}"),
        }
    }
}

type Run = Box<dyn Fn(Imp) -> Option<Vec<f64>>>;

struct Workload {
    /// "1a", "3", ...: `compare 1` selects every id starting with 1.
    id: &'static str,
    /// "guard", "mass", ...: `compare mass` selects by it.
    key: &'static str,
    name: &'static str,
    metrics: Vec<(&'static str, Unit)>,
    runs: usize,
    run: Run,
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn workloads() -> Vec<Workload> {
    let runs = env_or("COMPARE_RUNS", 5usize);
    let heavy = env_or("COMPARE_HEAVY_RUNS", 3usize);
    let far = Duration::from_millis(env_or("COMPARE_CASCADE_MS", 4500u64));
    let idle_secs = env_or("COMPARE_IDLE_SECS", 10u64);
    let blocked = Duration::from_millis(env_or("COMPARE_BLOCKED_MS", 3000u64));
    vec![
        Workload {
            id: "1a",
            key: "guard",
            name: "guard armed then cancelled, by hand, one thread: idle server (I/O driver, no other timer)",
            metrics: vec![("per guard", Unit::Ns)],
            runs,
            run: Box::new(guard_idle_server),
        },
        Workload {
            id: "1b",
            key: "guard",
            name: "guard armed then cancelled, 1 000 tasks, 2 workers",
            metrics: vec![("per guard (wall)", Unit::Ns)],
            runs,
            run: Box::new(guard_tasks),
        },
        Workload {
            id: "1c",
            key: "guard",
            name: "guard armed then cancelled, by hand, one thread: busy server (I/O driver, 100 000 other timers, parked once)",
            metrics: vec![("per guard", Unit::Ns)],
            runs,
            run: Box::new(guard_busy_server),
        },
        Workload {
            id: "2",
            key: "reset",
            name: "reset-heavy idle guard: 10 000 sleeps pushed later 50 times",
            metrics: vec![("per reset + poll", Unit::Ns)],
            runs,
            run: Box::new(reset_later),
        },
        Workload {
            id: "3",
            key: "mass",
            name: "mass expiry: 200 000 tasks sleeping 1..1000 ms, 2 workers",
            metrics: vec![
                ("process CPU", Unit::Ms),
                ("lateness p50", Unit::Ms),
                ("lateness p99", Unit::Ms),
                ("lateness max", Unit::Ms),
                ("driver wakeups", Unit::Count),
            ],
            // Its CPU swings by 15% from run to run for every peer alike.
            runs: env_or("COMPARE_MASS_RUNS", 7usize),
            run: Box::new(mass_expiry),
        },
        Workload {
            id: "4",
            key: "cascade",
            name: "cascade storm: 300 000 tasks at one far deadline + 1 ms ticker",
            metrics: vec![
                ("all fired, after the deadline", Unit::Ms),
                ("ticker worst lateness", Unit::Ms),
                ("process CPU", Unit::Ms),
                ("driver wakeups", Unit::Count),
            ],
            runs: heavy,
            run: Box::new(move |imp| cascade_storm(imp, far)),
        },
        Workload {
            id: "5",
            key: "idle",
            name: "idle: 100 000 timers an hour out, nothing due",
            metrics: vec![
                ("process CPU over the window", Unit::Us),
                ("driver wakeups", Unit::Count),
            ],
            runs: env_or("COMPARE_IDLE_RUNS", 1usize),
            run: Box::new(move |imp| idle(Some(imp), idle_secs)),
        },
        Workload {
            id: "6",
            key: "memory",
            name: "memory: 1 000 000 pending timers, future included, fresh process",
            metrics: vec![
                ("heap per timer", Unit::Bytes),
                ("of which the future itself", Unit::Bytes),
            ],
            runs: heavy,
            run: Box::new(memory),
        },
        Workload {
            id: "7",
            key: "blocked",
            name: "blocked worker: 1 000 tasks sleeping 5..54 ms, a 100 ms CPU-bound request every 250 ms, 2 workers",
            metrics: vec![
                ("lateness p50", Unit::Ms),
                ("lateness p99", Unit::Ms),
                ("lateness max", Unit::Ms),
            ],
            runs: heavy,
            run: Box::new(move |imp| blocked_worker(imp, blocked)),
        },
        Workload {
            id: "8",
            key: "arm",
            name: "arming: 1 000 000 tasks each arm a 1 h sleep (spread over 1 000 s) in their first poll, current-thread runtime, fresh process",
            metrics: vec![
                ("CPU per timer, above tasks with none", Unit::Ns),
                ("CPU per task with no timer (the baseline)", Unit::Ns),
            ],
            runs: env_or("COMPARE_ARM_RUNS", 7usize),
            run: Box::new(arm_many),
        },
        // A diagnostic of 1c, not a comparison: its `ours` column holds
        // what a guard pays whatever the timer, so it comes after the
        // workloads, next to the note that says how to read it.
        Workload {
            id: "1f",
            key: "floor",
            name: "the guard's floor: what any timer pays per guard, one thread, inside the busy server's runtime (as 1c)",
            metrics: FLOOR_ROWS.iter().map(|&row| (row, Unit::Ns)).collect(),
            runs,
            run: Box::new(guard_floor),
        },
    ]
}

fn selected(w: &Workload, filter: Option<&str>) -> bool {
    match filter {
        None => true,
        Some(f) if f.starts_with(|c: char| c.is_ascii_digit()) => w.id.starts_with(f),
        Some(f) => w.key.starts_with(&f.to_lowercase()),
    }
}

fn machine() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{model}, {cores} cores, {}", std::env::consts::OS)
}

fn main() {
    // Counted only in the memory child (`memory_child`), so the timing
    // workloads share no counter.
    counting_alloc::set_counting(false);
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--child") {
        child(&args[1..]);
        return;
    }
    let filter = args.first().map(String::as_str);
    let idle_secs = env_or("COMPARE_IDLE_SECS", 10u64);
    let impls: Vec<Imp> = match std::env::var("COMPARE_IMPLS") {
        Ok(list) => list
            .split(',')
            .map(|n| Imp::parse(n).unwrap_or_else(|| panic!("unknown implementation {n:?}")))
            .collect(),
        Err(_) => Imp::ALL.to_vec(),
    };
    let peers: Vec<Imp> = impls.iter().copied().filter(|&i| i != Imp::Ours).collect();
    let has_ours = impls.contains(&Imp::Ours);

    let mut rows: Vec<(String, Vec<f64>)> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let mut figures = Figures::default();
    for w in workloads().into_iter().filter(|w| selected(w, filter)) {
        // samples[imp][metric] = one value per run; None once a run says n/a.
        let mut samples: Vec<Option<Vec<Vec<f64>>>> =
            vec![Some(vec![Vec::new(); w.metrics.len()]); impls.len()];
        for run in 0..w.runs {
            // Each run starts with the next implementation, so that none
            // always goes first (after another workload's heap, or first to
            // grow this one's) or always follows the same peer.
            let turns = (0..impls.len()).map(|i| (i + run) % impls.len());
            for (k, imp) in turns.map(|k| (k, impls[k])) {
                let Some(per_metric) = samples[k].as_mut() else {
                    continue;
                };
                eprint!("{} run {}/{} {:<14}", w.id, run + 1, w.runs, imp.name());
                match (w.run)(imp) {
                    Some(values) => {
                        eprintln!("{values:.2?}");
                        for (m, v) in values.into_iter().enumerate() {
                            per_metric[m].push(v);
                        }
                    }
                    None => {
                        eprintln!("n/a");
                        samples[k] = None;
                    }
                }
            }
        }
        figures.add_runs(w.id, &impls, &samples);
        for (m, &(metric, unit)) in w.metrics.iter().enumerate() {
            let medians: Vec<f64> = samples
                .iter()
                .map(|s| s.as_ref().map_or(f64::NAN, |s| median(s[m].clone())))
                .collect();
            let mut cells: Vec<String> = medians.iter().map(|&v| unit.show(v)).collect();
            if has_ours {
                let ours = medians[0];
                for &peer in &peers {
                    let k = impls.iter().position(|&i| i == peer).unwrap();
                    let ratio = ours / medians[k];
                    cells.push(if ratio.is_finite() && ratio < 0.1 {
                        format!("{ratio:.3}")
                    } else if ratio.is_finite() {
                        format!("{ratio:.2}")
                    } else {
                        "n/a".into()
                    });
                }
            }
            let label = if m == 0 {
                format!("{} {}", w.id, w.name)
            } else {
                String::new()
            };
            rows.push((format!("{label} | {metric}"), medians));
            let last = rows.len() - 1;
            rows[last].0 = format!("| {} | {} |", rows[last].0, cells.join(" | "));
        }
        if w.id == "1f" {
            notes.push(
                "1f: the ours column holds our guard, then what each component costs alone, \
                 no timer involved; the tokio column holds tokio's 1c guard of the same run on \
                 every row, so ours/tokio is the share of tokio's guard a component takes by \
                 itself. 1.5x faster than tokio's guard is ours/tokio at most 0.67."
                    .into(),
            );
        }
        if w.id == "5" {
            let cpu: Vec<f64> = (0..w.runs)
                .map(|_| idle(None, idle_secs).unwrap()[0])
                .collect();
            notes.push(format!(
                "5: a runtime with no timers at all used {} of CPU over the same {idle_secs} s.",
                Unit::Us.show(median(cpu))
            ));
        }
    }

    // The table, printed and (with the plots) written to `plots_dir()`.
    let mut table = String::new();
    let command = format!(
        "cargo run --release -p tiered-timer-benchmarks --example compare {}",
        filter.unwrap_or("")
    );
    let mut line = |text: String| {
        table.push_str(&text);
        table.push('\n');
    };
    line(format!("Machine: {}", machine()));
    line(format!("Command: {command}"));
    line(String::new());
    let mut header = vec!["workload".to_string(), "metric".to_string()];
    header.extend(impls.iter().map(|i| i.name().to_string()));
    if has_ours {
        header.extend(peers.iter().map(|p| format!("ours/{}", p.name())));
    }
    line(format!("| {} |", header.join(" | ")));
    line(format!("|{}", "---|".repeat(header.len())));
    for (row, _) in &rows {
        line(row.clone());
    }
    for note in notes {
        line(String::new());
        line(note);
    }
    print!("{table}");
    if let Some(dir) = plots_dir() {
        write_figures(&dir, &table, &figures, command.trim_end());
    }
}

// ---------------------------------------------------------------------------
// Plots: SVG figures of the table's data (tiered_timer_benchmarks::plot),
// written with the table into `COMPARE_PLOTS` (default target/compare/).

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use tiered_timer_benchmarks::plot::{self, Bar, BarGroup, Curve, LatenessHistogram};

/// Lateness of every sleep of workloads 3 and 7, pooled over runs per
/// implementation: (workload id, implementation, runs pooled, lateness).
/// Filled by the workloads (3 through [`run_child_with_lateness`], 7
/// directly), read once by [`write_figures`].
static LATENESS: Mutex<Vec<(&'static str, Imp, usize, LatenessHistogram)>> = Mutex::new(Vec::new());

/// Adds one run's lateness samples (ns) of workload `id` for `imp`.
fn record_lateness(id: &'static str, imp: Imp, samples: &[u64]) {
    record_lateness_histogram(id, imp, LatenessHistogram::from_samples(samples));
}

fn record_lateness_histogram(id: &'static str, imp: Imp, run: LatenessHistogram) {
    let mut pooled = LATENESS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match pooled.iter_mut().find(|(w, i, ..)| *w == id && *i == imp) {
        Some((_, _, runs, lateness)) => {
            *runs += 1;
            lateness.merge(&run);
        }
        None => pooled.push((id, imp, 1, run)),
    }
}

/// As [`run_child`], for a child that prints its values on a first line
/// and its lateness histogram (`LatenessHistogram::to_text`) on a second:
/// records the lateness for workload `id` and returns the values.
fn run_child_with_lateness(id: &'static str, imp: Imp, args: &[String]) -> Vec<f64> {
    let exe = std::env::current_exe().expect("path of this binary");
    let out = Command::new(exe)
        .arg("--child")
        .args(args)
        .output()
        .expect("run a child");
    assert!(
        out.status.success(),
        "child {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut lines = stdout.lines();
    let values = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .map(|v| v.parse().expect("a number from the child"))
        .collect();
    let lateness = LatenessHistogram::from_text(lines.next().unwrap_or_default())
        .expect("the child's lateness histogram");
    record_lateness_histogram(id, imp, lateness);
    values
}

/// Where the table and the plots go: `COMPARE_PLOTS` (a directory, or
/// `off` for neither), default `compare/` in the target directory.
fn plots_dir() -> Option<PathBuf> {
    match std::env::var("COMPARE_PLOTS") {
        Ok(dir) if dir == "off" => None,
        Ok(dir) if !dir.is_empty() => Some(dir.into()),
        _ => Some(tiered_timer_benchmarks::target_dir().join("compare")),
    }
}

/// One workload's first metric: each implementation's value in each run.
type RunsPerImp = Vec<(Imp, Vec<f64>)>;

/// The first metric's value of every run, per implementation, of each
/// workload run: what the bar charts show.
#[derive(Default)]
struct Figures {
    runs: Vec<(&'static str, RunsPerImp)>,
}

impl Figures {
    /// Keeps workload `id`'s runs (`samples[imp][metric][run]`, `None` for
    /// an implementation it does not apply to).
    fn add_runs(&mut self, id: &'static str, impls: &[Imp], samples: &[Option<Vec<Vec<f64>>>]) {
        let per_imp = impls
            .iter()
            .zip(samples)
            .filter_map(|(&imp, s)| {
                let runs = s.as_ref()?.first()?;
                (!runs.is_empty()).then(|| (imp, runs.clone()))
            })
            .collect();
        self.runs.push((id, per_imp));
    }

    /// A bar group of workload `id`, if it ran.
    fn group(&self, id: &str, label: &str) -> Option<BarGroup> {
        let (_, per_imp) = self.runs.iter().find(|(w, _)| *w == id)?;
        Some(BarGroup {
            label: label.to_string(),
            bars: per_imp
                .iter()
                .map(|(imp, runs)| Bar::of_runs(imp.name(), runs))
                .collect(),
        })
    }

    fn runs_of(&self, ids: &[&str]) -> usize {
        self.runs
            .iter()
            .filter(|(w, _)| ids.contains(w))
            .flat_map(|(_, per_imp)| per_imp.iter().map(|(_, runs)| runs.len()))
            .max()
            .unwrap_or(0)
    }
}

/// Writes the table and every figure whose workloads ran into `dir`, and
/// says where on stderr.
fn write_figures(dir: &Path, table: &str, figures: &Figures, command: &str) {
    let written = (|| -> Result<Vec<PathBuf>, Box<dyn std::error::Error>> {
        std::fs::create_dir_all(dir)?;
        let mut written = Vec::new();
        let table_path = dir.join("table.md");
        std::fs::write(&table_path, table)?;
        written.push(table_path);
        let note = format!(
            "{} · {} · {command}",
            machine(),
            tiered_timer_benchmarks::utc_date()
        );

        let workers = workers();
        let guards: Vec<BarGroup> = [
            ("1a", "1a: idle server, by hand".to_string()),
            ("1b", format!("1b: 1 000 tasks, {workers} workers (wall)")),
            ("1c", "1c: busy server, by hand".to_string()),
        ]
        .iter()
        .filter_map(|(id, label)| figures.group(id, label))
        .collect();
        if !guards.is_empty() {
            let path = dir.join("guard.svg");
            plot::bar_chart(
                &path,
                &format!(
                    "Guard armed then cancelled: median of {} runs, whiskers min..max",
                    figures.runs_of(&["1a", "1b", "1c"])
                ),
                "ns per guard",
                &note,
                &guards,
            )?;
            written.push(path);
        }
        if let Some(reset) = figures.group("2", "2: 10 000 sleeps, each pushed later 50 times") {
            let path = dir.join("reset.svg");
            plot::bar_chart(
                &path,
                &format!(
                    "Reset to a later deadline + re-poll: median of {} runs, whiskers min..max",
                    figures.runs_of(&["2"])
                ),
                "ns per reset + poll",
                &note,
                &[reset],
            )?;
            written.push(path);
        }

        let pooled = LATENESS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let lateness_figures = [
            (
                "3",
                "mass-lateness.svg",
                format!(
                    "Mass expiry (3): lateness of {} sleeps per run",
                    plot::group_thousands(MASS_TASKS as u64)
                ),
            ),
            (
                "7",
                "blocked-lateness.svg",
                format!(
                    "Blocked worker (7): lateness of {} tasks' sleeps",
                    plot::group_thousands(BLOCKED_SLEEPERS)
                ),
            ),
        ];
        for (id, file, title) in lateness_figures {
            let curves: Vec<Curve> = pooled
                .iter()
                .filter(|(w, ..)| *w == id)
                .map(|(_, imp, _, lateness)| Curve {
                    series: imp.name().to_string(),
                    lateness: lateness.clone(),
                })
                .collect();
            let Some(runs) = pooled.iter().filter(|(w, ..)| *w == id).map(|p| p.2).max() else {
                continue;
            };
            let path = dir.join(file);
            plot::lateness_chart(
                &path,
                &format!("{title}, {runs} runs pooled"),
                &note,
                &curves,
            )?;
            written.push(path);
        }
        Ok(written)
    })();
    match written {
        Ok(paths) => {
            for path in paths {
                eprintln!("wrote {}", path.display());
            }
        }
        Err(e) => eprintln!(
            "could not write the table and plots to {}: {e}",
            dir.display()
        ),
    }
}
