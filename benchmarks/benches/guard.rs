//! Workload 1 of the comparison (see `examples/compare/guard.rs`) under criterion:
//! a guard armed then cancelled, `timeout(5 s, f)` where `f` is pending on
//! the first poll and ready on the second, polled by hand on one thread
//! inside a 2-worker runtime's context. Ours against `tokio::time` and
//! pingora's `fast_timeout`, in two runtimes:
//!
//! - "idle server" (compare's 1a): tokio's I/O driver enabled, no other
//!   timer pending, so each tokio guard is the earliest timer and unparks
//!   tokio's driver;
//! - "busy server" (compare's 1c): the same runtime with 100 000 other
//!   timers of each implementation pending, due 20..30 s out, parked once
//!   before timing; the guards (60 s) are never the earliest.
//!
//! `cargo bench -p tiered-timer-benchmarks --bench guard` (ours alone:
//! `cargo bench --bench guard` at the workspace root).

use std::future::Future;
use std::hint::black_box;
use std::pin::{pin, Pin};
use std::task::{Context, Waker};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use tiered_timer_benchmarks::guards::{PendingOnce, BUSY_GUARD_TIMEOUT as BUSY_TIMEOUT};
use tiered_timer_benchmarks::runtime;

const TIMEOUT: Duration = Duration::from_secs(5);

fn arm_and_cancel<G: Future>(guard: G, cx: &mut Context<'_>) {
    let mut guard = pin!(guard);
    assert!(guard.as_mut().poll(cx).is_pending());
    assert!(black_box(guard.as_mut().poll(cx).is_ready()));
}

fn server_runtime() -> tokio::runtime::Runtime {
    runtime::server(2)
}

fn guard(c: &mut Criterion) {
    let rt = server_runtime();
    let _in_rt = rt.enter();
    let mut cx = Context::from_waker(Waker::noop());
    let mut group = c.benchmark_group("guard armed then cancelled, idle server");
    group.bench_function("ours", |b| {
        b.iter(|| {
            arm_and_cancel(
                tiered_timer::timeout(TIMEOUT, PendingOnce::by_hand()),
                &mut cx,
            )
        })
    });
    group.bench_function("tokio", |b| {
        b.iter(|| {
            arm_and_cancel(
                tokio::time::timeout(TIMEOUT, PendingOnce::by_hand()),
                &mut cx,
            )
        })
    });
    group.bench_function("pingora", |b| {
        b.iter(|| {
            arm_and_cancel(
                pingora_timeout::fast_timeout::fast_timeout(TIMEOUT, PendingOnce::by_hand()),
                &mut cx,
            )
        })
    });
    group.finish();
}

/// 100 000 pending sleeps due 20..30 s out, made by `sleep`, polled once.
fn others<S: Future + Unpin>(sleep: impl Fn(Duration) -> S, cx: &mut Context<'_>) -> Vec<S> {
    (0..100_000u64)
        .map(|i| {
            let mut s = sleep(Duration::from_secs(20) + Duration::from_micros(i * 100));
            assert!(Pin::new(&mut s).poll(cx).is_pending());
            s
        })
        .collect()
}

fn busy_guard(c: &mut Criterion) {
    let mut group = c.benchmark_group("guard armed then cancelled, busy server");
    {
        let rt = server_runtime();
        let _in_rt = rt.enter();
        let mut cx = Context::from_waker(Waker::noop());
        let others = others(tiered_timer::sleep, &mut cx);
        rt.block_on(tiered_timer::sleep(Duration::from_millis(1)));
        group.bench_function("ours", |b| {
            b.iter(|| {
                arm_and_cancel(
                    tiered_timer::timeout(BUSY_TIMEOUT, PendingOnce::by_hand()),
                    &mut cx,
                )
            })
        });
        drop(others);
    }
    {
        let rt = server_runtime();
        let _in_rt = rt.enter();
        let mut cx = Context::from_waker(Waker::noop());
        let others = others(|d| Box::pin(tokio::time::sleep(d)), &mut cx);
        rt.block_on(tokio::time::sleep(Duration::from_millis(1)));
        group.bench_function("tokio", |b| {
            b.iter(|| {
                arm_and_cancel(
                    tokio::time::timeout(BUSY_TIMEOUT, PendingOnce::by_hand()),
                    &mut cx,
                )
            })
        });
        drop(others);
    }
    {
        let rt = server_runtime();
        let _in_rt = rt.enter();
        let mut cx = Context::from_waker(Waker::noop());
        let others = others(
            |d| Box::pin(pingora_timeout::fast_timeout::fast_sleep(d)),
            &mut cx,
        );
        group.bench_function("pingora", |b| {
            b.iter(|| {
                arm_and_cancel(
                    pingora_timeout::fast_timeout::fast_timeout(
                        BUSY_TIMEOUT,
                        PendingOnce::by_hand(),
                    ),
                    &mut cx,
                )
            })
        });
        drop(others);
    }
    group.finish();
}

criterion_group!(benches, guard, busy_guard);
criterion_main!(benches);
