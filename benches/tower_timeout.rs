//! What a request deadline costs, side by side in one process: requests
//! through tower's `timeout::Timeout` (a `tokio::time::sleep` per request),
//! through `tiered_timer::tower::Timeout`, and through no timeout at all.
//!
//! The inner service answers after one pending poll, so every guard is
//! armed (filed in its timer) and then cancelled, the common case for a
//! request deadline. 1 000 tasks on a 2-worker runtime each make
//! `REQUESTS` requests in turn (`ready`, `call`, await). A round times all
//! the requests of one variant; the variants take turns, in a rotating
//! order, for `ROUNDS` rounds, and the table reports medians. A timer's
//! cost per request is its median minus the median of no timeout.
//!
//! `cargo bench --bench tower_timeout --features tower`
//! (`ROUNDS=31 cargo bench ...` for more rounds).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tower::{service_fn, BoxError, Service, ServiceExt};

const TASKS: usize = 1_000;
const REQUESTS: usize = 200;
const TIMEOUT: Duration = Duration::from_secs(5);

/// Pending on the first poll (waking itself), ready on the second.
struct PendingOnce(bool);

impl Future for PendingOnce {
    type Output = Result<u8, BoxError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if std::mem::replace(&mut self.0, true) {
            Poll::Ready(Ok(1))
        } else {
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Variant {
    NoTimeout,
    Tower,
    Ours,
    OursWithHandle,
}

impl Variant {
    const ALL: [Variant; 4] = [
        Variant::NoTimeout,
        Variant::Tower,
        Variant::Ours,
        Variant::OursWithHandle,
    ];

    fn name(self) -> &'static str {
        match self {
            Variant::NoTimeout => "no timeout",
            Variant::Tower => "tower::timeout::Timeout",
            Variant::Ours => "tiered_timer::tower::Timeout",
            Variant::OursWithHandle => "  the same, with_handle",
        }
    }
}

/// Makes `REQUESTS` requests through `service`, one after another.
async fn client<S>(mut service: S)
where
    S: Service<(), Response = u8, Error = BoxError>,
{
    for _ in 0..REQUESTS {
        let answer = service.ready().await.unwrap().call(()).await.unwrap();
        std::hint::black_box(answer);
    }
}

/// Runs one round of `variant` on `rt`; returns the time per request.
fn round(
    rt: &tokio::runtime::Runtime,
    variant: Variant,
    handle: &tiered_timer::Handle,
) -> Duration {
    let inner = service_fn(|()| PendingOnce(false));
    let start = Instant::now();
    rt.block_on(async {
        let tasks: Vec<_> = (0..TASKS)
            .map(|_| match variant {
                Variant::NoTimeout => tokio::spawn(client(inner)),
                Variant::Tower => {
                    tokio::spawn(client(tower::timeout::Timeout::new(inner, TIMEOUT)))
                }
                Variant::Ours => {
                    tokio::spawn(client(tiered_timer::tower::Timeout::new(inner, TIMEOUT)))
                }
                Variant::OursWithHandle => tokio::spawn(client(
                    tiered_timer::tower::Timeout::with_handle(inner, TIMEOUT, handle.clone()),
                )),
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
    });
    start.elapsed() / (TASKS * REQUESTS) as u32
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ns(d: Duration) -> f64 {
    d.as_secs_f64() * 1e9
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not: then
    // one short round checks that it runs.
    let benching = std::env::args().any(|arg| arg == "--bench");
    let rounds: usize = match std::env::var("ROUNDS") {
        Ok(rounds) => rounds.parse().expect("ROUNDS: a number"),
        Err(_) if benching => 21,
        Err(_) => 1,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    // The default timer of `rt`, for the `with_handle` row.
    let handle = rt.block_on(async { tiered_timer::Handle::current() });
    // Warm up: every timer built, every code path run once.
    for variant in Variant::ALL {
        round(&rt, variant, &handle);
    }
    // `ONLY=2` runs variant 2 alone (for a profiler), no table.
    if let Ok(only) = std::env::var("ONLY") {
        let variant = Variant::ALL[only.parse::<usize>().expect("ONLY: a row number")];
        for _ in 0..rounds {
            println!(
                "{:<32} {:>8.0} ns/request",
                variant.name(),
                ns(round(&rt, variant, &handle))
            );
        }
        return;
    }
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); Variant::ALL.len()];
    for r in 0..rounds {
        for i in 0..Variant::ALL.len() {
            let which = (r + i) % Variant::ALL.len();
            samples[which].push(round(&rt, Variant::ALL[which], &handle));
        }
    }
    let medians: Vec<Duration> = samples.iter_mut().map(|s| median(s)).collect();
    let baseline = ns(medians[0]);
    let tower_cost = ns(medians[1]) - baseline;

    println!(
        "{TASKS} tasks x {REQUESTS} requests on 2 workers, a {TIMEOUT:?} deadline armed \
         then cancelled per request; medians of {rounds} rounds"
    );
    println!(
        "{:<32} {:>12} {:>16} {:>14}",
        "variant", "ns/request", "timer ns/req", "vs tower's"
    );
    for (variant, median) in Variant::ALL.iter().zip(&medians) {
        let per_request = ns(*median);
        let (cost, ratio) = match variant {
            Variant::NoTimeout => ("-".to_owned(), "-".to_owned()),
            _ => {
                let cost = per_request - baseline;
                (format!("{cost:.0}"), format!("{:.2}x", cost / tower_cost))
            }
        };
        println!(
            "{:<32} {:>12.0} {:>16} {:>14}",
            variant.name(),
            per_request,
            cost,
            ratio
        );
    }
    assert_eq!(
        tiered_timer::Handle::pending(&handle),
        0,
        "every guard was cancelled"
    );
}
