//! What a request deadline costs, side by side in one process: requests
//! through tower's `timeout::Timeout` (a `tokio::time::sleep` per request),
//! through `tiered_timer::tower::Timeout`, and through no timeout at all.
//!
//! The inner service answers after one pending poll, so every guard is
//! armed (filed in its timer) and then cancelled, the common case for a
//! request deadline. 1 000 tasks on a 2-worker runtime each make
//! `REQUESTS` requests in turn (`ready`, `call`, await). A round times all
//! the requests of one variant; the variants take turns, in a rotating
//! order, for `ROUNDS` rounds, and the table reports medians of the wall
//! time per request and of the process's CPU time (user + system) per
//! request; the latter counts no time spent waiting for a core, so it moves
//! less when the machine is shared. A timer's cost per request is its
//! median minus the median of no timeout.
//!
//! `cargo bench -p tiered-timer-benchmarks --bench tower_timeout`
//! (`ROUNDS=31 cargo bench ...` for more rounds).

use std::time::{Duration, Instant};

use tower::{service_fn, BoxError, Service, ServiceExt};

const TASKS: usize = 1_000;
const REQUESTS: usize = 200;
const TIMEOUT: Duration = Duration::from_secs(5);

#[path = "../../tests/support/pending_once.rs"]
mod pending_once;
use pending_once::PendingOnce;

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

use tiered_timer_benchmarks::process_cpu;

/// Time per request of one round: wall clock and process CPU.
#[derive(Clone, Copy, Debug)]
struct Sample {
    wall: Duration,
    cpu: Duration,
}

/// Runs one round of `variant` on `rt`.
fn round(rt: &tokio::runtime::Runtime, variant: Variant, handle: &tiered_timer::Handle) -> Sample {
    let inner = service_fn(|()| PendingOnce(false));
    let cpu = process_cpu();
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
    let requests = (TASKS * REQUESTS) as u32;
    Sample {
        wall: start.elapsed() / requests,
        cpu: (process_cpu() - cpu) / requests,
    }
}

/// The median of `samples`, in ns.
fn median_ns(mut samples: Vec<Duration>) -> f64 {
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1e9
}

/// A timer's cost per request against no timeout (row 0), and its ratio to
/// tower's (row 1), as table cells.
fn cost_cells(medians: &[f64], row: usize) -> (String, String) {
    if row == 0 {
        return ("-".to_owned(), "-".to_owned());
    }
    let cost = medians[row] - medians[0];
    let tower = medians[1] - medians[0];
    (format!("{cost:.0}"), format!("{:.2}x", cost / tower))
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
            let sample = round(&rt, variant, &handle);
            println!("{:<32} {sample:?} per request", variant.name());
        }
        return;
    }
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); Variant::ALL.len()];
    for r in 0..rounds {
        for i in 0..Variant::ALL.len() {
            let which = (r + i) % Variant::ALL.len();
            samples[which].push(round(&rt, Variant::ALL[which], &handle));
        }
    }
    let medians = |of: fn(&Sample) -> Duration| -> Vec<f64> {
        samples
            .iter()
            .map(|rounds| median_ns(rounds.iter().map(of).collect()))
            .collect()
    };
    let wall = medians(|sample| sample.wall);
    let cpu = medians(|sample| sample.cpu);

    println!(
        "{TASKS} tasks x {REQUESTS} requests on 2 workers, a {TIMEOUT:?} deadline armed \
         then cancelled per request; medians of {rounds} rounds, ns per request"
    );
    println!(
        "{:<30} {:>6} {:>11} {:>9} {:>6} {:>10} {:>9}",
        "variant", "wall", "timer wall", "vs tower", "CPU", "timer CPU", "vs tower"
    );
    for (row, variant) in Variant::ALL.iter().enumerate() {
        let (wall_cost, wall_ratio) = cost_cells(&wall, row);
        let (cpu_cost, cpu_ratio) = cost_cells(&cpu, row);
        println!(
            "{:<30} {:>6.0} {:>11} {:>9} {:>6.0} {:>10} {:>9}",
            variant.name(),
            wall[row],
            wall_cost,
            wall_ratio,
            cpu[row],
            cpu_cost,
            cpu_ratio
        );
    }
    assert_eq!(
        tiered_timer::Handle::pending(&handle),
        0,
        "every guard was cancelled"
    );
}
