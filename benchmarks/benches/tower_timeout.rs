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
//! (`ROUNDS=31 cargo bench ...`, or `-- --rounds 31`, for more rounds; `--
//! --help` for the others). Ours alone, under criterion:
//! `cargo bench --features tower --bench tower` at the workspace root.

use std::time::{Duration, Instant};

use clap::Parser;
use tiered_timer_benchmarks::guards::PendingOnce;
use tiered_timer_benchmarks::process_cpu;
use tiered_timer_benchmarks::stats::median;
use tower::{service_fn, BoxError, Service, ServiceExt};

const TASKS: usize = 1_000;
const REQUESTS: usize = 200;
const TIMEOUT: Duration = Duration::from_secs(5);

/// What a request deadline costs: tower's timeout, ours, and none, side by
/// side in one process.
#[derive(Parser, Debug)]
#[command(name = "tower_timeout")]
struct Args {
    /// Rounds of each variant (default: 21 under `cargo bench`, 1 as a
    /// smoke run under `cargo test --benches`).
    #[arg(long, env = "ROUNDS")]
    rounds: Option<usize>,
    /// Runs only the variant of this row (0 to 3), printing each round
    /// instead of the table: for a profiler.
    #[arg(long, env = "ONLY")]
    only: Option<usize>,
    /// Passed by `cargo bench`: measure, rather than check that it runs.
    #[arg(long, hide = true)]
    bench: bool,
    /// Filters `cargo` may pass on; ignored.
    #[arg(hide = true)]
    filters: Vec<String>,
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

/// Time per request of one round: wall clock and process CPU.
#[derive(Clone, Copy, Debug)]
struct Sample {
    wall: Duration,
    cpu: Duration,
}

/// Runs one round of `variant` on `rt`.
fn round(rt: &tokio::runtime::Runtime, variant: Variant, handle: &tiered_timer::Handle) -> Sample {
    let inner = service_fn(|()| PendingOnce::in_task_then(Ok::<u8, BoxError>(1)));
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
fn median_ns(samples: impl Iterator<Item = Duration>) -> f64 {
    median(samples.map(|d| d.as_secs_f64() * 1e9))
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
    let args = Args::parse();
    // `cargo bench` passes `--bench`; `cargo test --benches` does not: then
    // one short round checks that it runs.
    let rounds = args.rounds.unwrap_or(if args.bench { 21 } else { 1 });
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
    if let Some(only) = args.only {
        let variant = *Variant::ALL
            .get(only)
            .unwrap_or_else(|| panic!("--only {only}: a row number, 0 to 3"));
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
            .map(|rounds| median_ns(rounds.iter().map(of)))
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
