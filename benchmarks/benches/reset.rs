//! Workload 2 of the comparison (see `examples/compare/reset.rs`) under criterion:
//! 10 000 registered sleeps, each in turn pushed to a later deadline and
//! polled again, as an idle connection's deadline guard is on every event.
//! Ours against `tokio::time` (pingora's sleeps cannot be reset).
//!
//! `cargo bench -p tiered-timer-benchmarks --bench reset` (ours alone:
//! `cargo bench --bench reset` at the workspace root).

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

/// Per-iteration times of the samples criterion took of one function
/// (warm-up included), for the summary printed after the group.
#[derive(Default)]
struct Samples(Vec<f64>);

impl Samples {
    fn record(&mut self, iters: u64, elapsed: Duration) -> Duration {
        if iters > 0 {
            self.0.push(elapsed.as_nanos() as f64 / iters as f64);
        }
        elapsed
    }

    fn median(&self) -> f64 {
        tiered_timer_benchmarks::stats::median(self.0.iter().copied())
    }
}

fn reset(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let _in_rt = rt.enter();
    let mut cx = Context::from_waker(Waker::noop());
    let mut group = c.benchmark_group("reset later + re-poll, 10 000 sleeps");

    let mut ours: Vec<_> = (0..SLEEPS).map(|_| tiered_timer::sleep(BASE)).collect();
    for s in &mut ours {
        assert!(Pin::new(s).poll(&mut cx).is_pending());
    }
    // Taken after the sleeps are made, so every reset is to a later
    // deadline (for each implementation: tokio's sleeps are made later).
    let origin = tokio::time::Instant::now();
    let mut step = 0;
    let mut ours_ns = Samples::default();
    group.bench_function("ours", |b| {
        b.iter_custom(|iters| {
            let elapsed = bench_steps(iters, &mut step, |i, at| {
                let s = &mut ours[i];
                Pin::new(&mut *s).reset(origin + at);
                black_box(Pin::new(s).poll(&mut cx).is_pending());
            });
            ours_ns.record(iters, elapsed)
        })
    });
    drop(ours);

    let mut theirs: Vec<_> = (0..SLEEPS)
        .map(|_| Box::pin(tokio::time::sleep(BASE)))
        .collect();
    for s in &mut theirs {
        assert!(s.as_mut().poll(&mut cx).is_pending());
    }
    let origin = tokio::time::Instant::now();
    let mut step = 0;
    let mut tokio_ns = Samples::default();
    group.bench_function("tokio", |b| {
        b.iter_custom(|iters| {
            let elapsed = bench_steps(iters, &mut step, |i, at| {
                let s = &mut theirs[i];
                s.as_mut().reset(origin + at);
                black_box(s.as_mut().poll(&mut cx).is_pending());
            });
            tokio_ns.record(iters, elapsed)
        })
    });
    group.finish();
    let (ours, tokio) = (ours_ns.median(), tokio_ns.median());
    println!(
        "reset later + re-poll (median of criterion's samples): ours {ours:.1} ns, \
         tokio {tokio:.1} ns, ours/tokio {:.2} ({:.1}x faster)",
        ours / tokio,
        tokio / ours
    );
}

criterion_group!(benches, reset);
criterion_main!(benches);
