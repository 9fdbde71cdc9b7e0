//! A sleep pushed to a later deadline and polled again, as an idle
//! connection's deadline guard is on every event: 10 000 registered
//! sleeps, reset round-robin, each deadline a microsecond later than the
//! last, so every reset is to a later deadline (a plain store, no lock).
//!
//! `cargo bench --bench reset`. Ours alone; side by side with
//! `tokio::time`: `cargo bench -p tiered-timer-benchmarks --bench reset`.

use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};

const SLEEPS: usize = 10_000;
const BASE: Duration = Duration::from_secs(10);

fn reset_later(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .expect("a tokio runtime");
    let _in_rt = rt.enter();
    let mut cx = Context::from_waker(Waker::noop());
    let mut sleeps: Vec<_> = (0..SLEEPS).map(|_| tiered_timer::sleep(BASE)).collect();
    for sleep in &mut sleeps {
        assert!(Pin::new(sleep).poll(&mut cx).is_pending());
    }
    // Taken after the sleeps are made, so every reset is to a later
    // deadline than the one a sleep has.
    let origin = tiered_timer::Instant::now();
    let mut step = 0u64;
    c.bench_function("tiered-timer/reset later + re-poll, 10 000 sleeps", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                step += 1;
                let sleep = &mut sleeps[(step % SLEEPS as u64) as usize];
                Pin::new(&mut *sleep).reset(origin + BASE + Duration::from_micros(step));
                black_box(Pin::new(sleep).poll(&mut cx).is_pending());
            }
            start.elapsed()
        })
    });
}

criterion_group!(benches, reset_later);
criterion_main!(benches);
