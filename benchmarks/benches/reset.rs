//! Workload 2 of the comparison (see `examples/compare.rs`) under criterion:
//! 10 000 registered sleeps, each in turn pushed to a later deadline and
//! polled again, as an idle connection's deadline guard is on every event.
//! Ours against `tokio::time` (pingora's sleeps cannot be reset).
//!
//! `cargo bench -p tiered-timer-benchmarks --bench reset`

use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};

const SLEEPS: usize = 10_000;
const BASE: Duration = Duration::from_secs(10);

/// Runs `iters` reset-and-poll steps round-robin over the sleeps, each
/// deadline a microsecond later than the last one, so every reset is later.
fn bench_steps(
    iters: u64,
    step: &mut u64,
    mut reset_and_poll: impl FnMut(usize, Duration),
) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        *step += 1;
        reset_and_poll(
            (*step % SLEEPS as u64) as usize,
            BASE + Duration::from_micros(*step),
        );
    }
    start.elapsed()
}

fn reset(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let _in_rt = rt.enter();
    let mut cx = Context::from_waker(Waker::noop());
    let origin = tokio::time::Instant::now();
    let mut group = c.benchmark_group("reset later + re-poll, 10 000 sleeps");

    let mut ours: Vec<_> = (0..SLEEPS).map(|_| tiered_timer::sleep(BASE)).collect();
    for s in &mut ours {
        assert!(Pin::new(s).poll(&mut cx).is_pending());
    }
    let mut step = 0;
    group.bench_function("ours", |b| {
        b.iter_custom(|iters| {
            bench_steps(iters, &mut step, |i, at| {
                let s = &mut ours[i];
                Pin::new(&mut *s).reset(origin + at);
                black_box(Pin::new(s).poll(&mut cx).is_pending());
            })
        })
    });
    drop(ours);

    let mut theirs: Vec<_> = (0..SLEEPS)
        .map(|_| Box::pin(tokio::time::sleep(BASE)))
        .collect();
    for s in &mut theirs {
        assert!(s.as_mut().poll(&mut cx).is_pending());
    }
    let mut step = 0;
    group.bench_function("tokio", |b| {
        b.iter_custom(|iters| {
            bench_steps(iters, &mut step, |i, at| {
                let s = &mut theirs[i];
                s.as_mut().reset(origin + at);
                black_box(s.as_mut().poll(&mut cx).is_pending());
            })
        })
    });
    group.finish();
}

criterion_group!(benches, reset);
criterion_main!(benches);
