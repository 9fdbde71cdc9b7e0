//! A guard armed then cancelled, the crate's hot path: `timeout(5 s, f)`
//! where `f` is pending on its first poll and ready on its second, polled
//! by hand on one thread inside a 2-worker runtime's context (with tokio's
//! I/O driver, as a server has):
//!
//! - *idle server*: no other timer pending;
//! - *busy server*: 100 000 other sleeps pending, due 20..30 s out, the
//!   runtime parked once before timing; the guards (60 s) are never the
//!   earliest.
//!
//! `cargo bench --bench guard`. Ours alone: the same workloads side by
//! side with `tokio::time` and pingora are `cargo bench -p
//! tiered-timer-benchmarks --bench guard` (see BENCHMARKS.md).

mod support;

use std::future::Future;
use std::hint::black_box;
use std::pin::{pin, Pin};
use std::task::{Context, Waker};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use support::{server_runtime, PendingOnce};

const TIMEOUT: Duration = Duration::from_secs(5);
/// The busy server's guard: later than every other timer pending.
const BUSY_TIMEOUT: Duration = Duration::from_secs(60);

fn arm_and_cancel<G: Future>(guard: G, cx: &mut Context<'_>) {
    let mut guard = pin!(guard);
    assert!(guard.as_mut().poll(cx).is_pending());
    assert!(black_box(guard.as_mut().poll(cx).is_ready()));
}

fn idle_server(c: &mut Criterion) {
    let rt = server_runtime();
    let _in_rt = rt.enter();
    let mut cx = Context::from_waker(Waker::noop());
    c.bench_function("tiered-timer/guard armed then cancelled/idle server", |b| {
        b.iter(|| arm_and_cancel(tiered_timer::timeout(TIMEOUT, PendingOnce::new()), &mut cx))
    });
}

fn busy_server(c: &mut Criterion) {
    let rt = server_runtime();
    let _in_rt = rt.enter();
    let mut cx = Context::from_waker(Waker::noop());
    let others: Vec<_> = (0..100_000u64)
        .map(|i| {
            let mut sleep =
                tiered_timer::sleep(Duration::from_secs(20) + Duration::from_micros(i * 100));
            assert!(Pin::new(&mut sleep).poll(&mut cx).is_pending());
            sleep
        })
        .collect();
    rt.block_on(async { tiered_timer::sleep(Duration::from_millis(1)).await });
    c.bench_function("tiered-timer/guard armed then cancelled/busy server", |b| {
        b.iter(|| {
            arm_and_cancel(
                tiered_timer::timeout(BUSY_TIMEOUT, PendingOnce::new()),
                &mut cx,
            )
        })
    });
    drop(others);
}

criterion_group!(benches, idle_server, busy_server);
criterion_main!(benches);
