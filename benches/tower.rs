//! A request through `tiered_timer::tower::Timeout`, the tower layer: the
//! inner service answers on its second poll, so every request's deadline
//! (5 s) is armed, then cancelled, the common case. Polled by hand on one
//! thread inside a 2-worker runtime's context; "no timeout" is the inner
//! service alone, for the layer's own cost.
//!
//! `cargo bench --features tower --bench tower`. Ours alone; side by side
//! with tower's own timeout, from 1 000 tasks: `cargo bench -p
//! tiered-timer-benchmarks --bench tower_timeout`.

mod support;

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Waker};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use support::{server_runtime, PendingOnce};
use tiered_timer::tower::Timeout;
use tower::{service_fn, Service};

const TIMEOUT: Duration = Duration::from_secs(5);

/// One request through `service`: ready, call, a pending poll (the
/// deadline armed), a ready one (cancelled).
fn request<S: Service<()>>(service: &mut S, cx: &mut Context<'_>) {
    assert!(service.poll_ready(cx).is_ready());
    let mut response = pin!(service.call(()));
    assert!(response.as_mut().poll(cx).is_pending());
    assert!(black_box(response.as_mut().poll(cx)).is_ready());
}

fn tower_timeout(c: &mut Criterion) {
    let rt = server_runtime();
    let _in_rt = rt.enter();
    let mut cx = Context::from_waker(Waker::noop());
    let inner = service_fn(|()| async { Ok::<u8, tower::BoxError>(PendingOnce::new().await) });
    let mut group = c.benchmark_group("tiered-timer/tower timeout, request armed then cancelled");

    group.bench_function("no timeout", |b| {
        let mut service = inner;
        b.iter(|| request(&mut service, &mut cx));
    });
    group.bench_function("Timeout::new", |b| {
        let mut service = Timeout::new(inner, TIMEOUT);
        b.iter(|| request(&mut service, &mut cx));
    });
    group.bench_function("Timeout::with_handle", |b| {
        let handle = tiered_timer::Handle::current();
        let mut service = Timeout::with_handle(inner, TIMEOUT, handle);
        b.iter(|| request(&mut service, &mut cx));
    });
    group.finish();
}

criterion_group!(benches, tower_timeout);
criterion_main!(benches);
