//! Workload 1 of the comparison (see `examples/compare.rs`) under criterion:
//! a guard armed then cancelled, `timeout(5 s, f)` where `f` is pending on
//! the first poll and ready on the second, polled by hand on one thread
//! inside a 2-worker runtime's context. Ours against `tokio::time` and
//! pingora's `fast_timeout`.
//!
//! `cargo bench --bench guard`

use std::future::Future;
use std::hint::black_box;
use std::pin::{pin, Pin};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};

/// Pending on the first poll, ready on the second.
struct PendingOnce(bool);

impl Future for PendingOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if std::mem::replace(&mut self.0, true) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

const TIMEOUT: Duration = Duration::from_secs(5);

fn arm_and_cancel<G: Future>(guard: G, cx: &mut Context<'_>) {
    let mut guard = pin!(guard);
    assert!(guard.as_mut().poll(cx).is_pending());
    assert!(black_box(guard.as_mut().poll(cx).is_ready()));
}

fn guard(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let _in_rt = rt.enter();
    let mut cx = Context::from_waker(Waker::noop());
    let mut group = c.benchmark_group("guard armed then cancelled");
    group.bench_function("ours", |b| {
        b.iter(|| arm_and_cancel(tiered_timer::timeout(TIMEOUT, PendingOnce(false)), &mut cx))
    });
    group.bench_function("tokio", |b| {
        b.iter(|| arm_and_cancel(tokio::time::timeout(TIMEOUT, PendingOnce(false)), &mut cx))
    });
    group.bench_function("pingora", |b| {
        b.iter(|| {
            arm_and_cancel(
                pingora_timeout::fast_timeout::fast_timeout(TIMEOUT, PendingOnce(false)),
                &mut cx,
            )
        })
    });
    group.finish();
}

criterion_group!(benches, guard);
criterion_main!(benches);
