//! Side-by-side benchmarks of `tiered-timer` against its peers, in one
//! process, alternating implementations within each run, median of several
//! runs. Prints a markdown table: one row per workload and metric, one column
//! per implementation, and the ratio ours/peer for each peer.
//!
//! ```sh
//! cargo run --release -p tiered-timer-benchmarks --example compare          # everything, a few minutes
//! cargo run --release -p tiered-timer-benchmarks --example compare 3        # one workload (id prefix)
//! cargo run --release -p tiered-timer-benchmarks --example compare cascade  # or its key: guard, reset,
//!                                 # mass, cascade, idle, memory, blocked, arm, floor
//! cargo run --release -p tiered-timer-benchmarks --example compare -- --help  # the knobs
//! # with tokio's alternative (per-worker) timer as a peer column:
//! RUSTFLAGS="--cfg tokio_unstable" cargo run --release \
//!     --target-dir target/unstable -p tiered-timer-benchmarks --example compare
//! ```
//!
//! Peers: `tokio::time`, tokio's alternative timer (`tokio-alt`, only in a
//! `--cfg tokio_unstable` build, and only in the workloads run by tasks:
//! 1b, 3, 4 and 7), `pingora-timeout` (`fast_timeout`/`fast_sleep`: 10 ms
//! buckets, a clock thread), `futures-timer` (its own timer thread) and
//! `async-io`'s `Timer` (its own reactor thread); see
//! `tiered_timer_benchmarks::timers`. Every run builds a fresh 2-worker
//! tokio runtime, with only the time driver enabled except in the two
//! server guards (1a, 1c, and 1c's floor 1f), which enable tokio's I/O
//! driver too.
//!
//! One file per workload, each saying what it measures: [`guard`] (1a, 1b,
//! 1c), [`reset`] (2), [`mass`] (3), [`cascade`] (4), [`idle`] (5),
//! [`memory`] (6), [`blocked`] (7), [`arm`] (8) and [`floor`] (1f). 1f is a
//! diagnostic, not a comparison, and runs last: in 1c's runtime it times
//! what any guard pays whatever the timer (the clock read, finding the
//! current runtime, a lock round trip, a reference count), each alone and
//! summed, against tokio's 1c guard of the same run (see the note the table
//! ends with).
//!
//! The knobs are options (`--help`), each also read from the environment
//! variable it has always been read from: `--runs` (`COMPARE_RUNS`) for the
//! cheap workloads (1, 2), `--heavy-runs` for 4, 6 and 7, `--mass-runs`,
//! `--idle-runs`, `--arm-runs`, `--reset-rounds`, `--arm-tasks`,
//! `--idle-secs`, `--cascade-ms`, `--guards`, `--blocked-ms`, `--impls`
//! (`ours,tokio`), `--workers`, `--plots`.
//!
//! Workloads 3 (mass expiry), 5 (idle), 6 (memory) and 8 (arming) run each
//! measurement in a fresh child process (`tiered_timer_benchmarks::child`):
//! a peer's background thread (pingora's clock thread ticks every 10 ms
//! forever) would otherwise be charged to whoever is measured after it, and
//! live heap is only meaningful in a process that holds nothing else.
//!
//! Output: the markdown table on stdout, and the same table with SVG plots
//! of it in the directory `--plots` (default `target/compare/`, the
//! `compare/` directory of the cargo target directory this binary was
//! built into; `off` writes nothing), drawn with plotters (see
//! `tiered_timer_benchmarks::plot`), each for the workloads that ran:
//! - `table.md`: the table printed;
//! - `guard.svg` (1a, 1b, 1c) and `reset.svg` (2): ns per operation per
//!   implementation, the median of the runs with their min..max;
//! - `mass-lateness.svg` (3) and `blocked-lateness.svg` (7): the lateness
//!   of every sleep of every run, per implementation, as the share of
//!   sleeps at least `x` ms late, log-log (where a curve crosses 50% is its
//!   median, 1% its p99, its end its maximum).

mod arm;
mod blocked;
mod cascade;
mod figures;
mod floor;
mod guard;
mod idle;
mod mass;
mod memory;
mod reset;

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use serde::{Deserialize, Serialize};
use tiered_timer_benchmarks::alloc::{self, CountingAllocator};
use tiered_timer_benchmarks::child;
use tiered_timer_benchmarks::machine;
use tiered_timer_benchmarks::stats::median;
use tiered_timer_benchmarks::timers::Imp;

use crate::figures::Figures;

/// The live heap, for workload 6 (see `main`).
#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// Side-by-side benchmarks of tiered-timer against tokio::time, tokio's
/// alternative timer, pingora-timeout, futures-timer and async-io: a
/// markdown table of medians and ratios, and SVG plots of it.
#[derive(Parser, Clone, Debug)]
#[command(name = "compare")]
pub struct Args {
    /// Runs only the workloads whose id starts with this (`3`; `1` for 1a
    /// to 1f) or whose key does: guard, reset, mass, cascade, idle,
    /// memory, blocked, arm, floor. All by default.
    pub workload: Option<String>,
    /// Runs of the cheap workloads (1a to 1c, 1f, 2).
    #[arg(long, env = "COMPARE_RUNS", default_value_t = 5)]
    pub runs: usize,
    /// Runs of workloads 4, 6 and 7.
    #[arg(long, env = "COMPARE_HEAVY_RUNS", default_value_t = 3)]
    pub heavy_runs: usize,
    /// Runs of workload 3 (its CPU swings by 15% from run to run for
    /// every implementation).
    #[arg(long, env = "COMPARE_MASS_RUNS", default_value_t = 7)]
    pub mass_runs: usize,
    /// Runs of workload 5.
    #[arg(long, env = "COMPARE_IDLE_RUNS", default_value_t = 1)]
    pub idle_runs: usize,
    /// Runs of workload 8.
    #[arg(long, env = "COMPARE_ARM_RUNS", default_value_t = 7)]
    pub arm_runs: usize,
    /// Rounds of workload 2 (under callgrind, two round counts give the
    /// instructions per reset + poll).
    #[arg(long, env = "COMPARE_RESET_ROUNDS", default_value_t = 50)]
    pub reset_rounds: u32,
    /// Tasks per run of workload 8 (fewer for a run under callgrind).
    #[arg(long, env = "COMPARE_ARM_TASKS", default_value_t = 1_000_000)]
    pub arm_tasks: usize,
    /// Length of workload 5's idle window, in seconds.
    #[arg(long, env = "COMPARE_IDLE_SECS", default_value_t = 10)]
    pub idle_secs: u64,
    /// Workload 4's common deadline, in ms: beyond the 4.096 s span of the
    /// two finest wheels of both tokio and a default tiered-timer, so
    /// entries pass through overflow wheels.
    #[arg(long, env = "COMPARE_CASCADE_MS", default_value_t = 4500)]
    pub cascade_ms: u64,
    /// Guards per run of 1a and 1c, and iterations of each of 1f's
    /// components (fewer for a run under callgrind).
    #[arg(long, env = "COMPARE_GUARDS", default_value_t = 1_000_000)]
    pub guards: u32,
    /// Length of workload 7, in ms.
    #[arg(long, env = "COMPARE_BLOCKED_MS", default_value_t = 3000)]
    pub blocked_ms: u64,
    /// The implementations to run, comma-separated (`ours,tokio`); all of
    /// this build's by default.
    #[arg(long, env = "COMPARE_IMPLS", value_delimiter = ',')]
    pub impls: Vec<Imp>,
    /// Workers of every multi-thread runtime (4 on a 2-core machine
    /// oversubscribes it: a timer's lock holder can then be preempted).
    #[arg(long, env = "COMPARE_WORKERS", default_value_t = 2)]
    pub workers: usize,
    /// Where the table and the plots go: a directory, or `off` for
    /// neither. By default `compare/` in the cargo target directory this
    /// program was built into (`target/compare/`).
    #[arg(long, env = "COMPARE_PLOTS")]
    pub plots: Option<String>,
}

impl Args {
    /// The directory for the table and the plots, `None` for `off`.
    fn plots_dir(&self) -> Option<PathBuf> {
        match self.plots.as_deref() {
            Some("off") => None,
            Some(dir) if !dir.is_empty() => Some(dir.into()),
            _ => Some(tiered_timer_benchmarks::target_dir().join("compare")),
        }
    }
}

/// What a child process of this program measures: one run of workload 3,
/// 5, 6 or 8 (see `tiered_timer_benchmarks::child`).
#[derive(Serialize, Deserialize, Debug)]
pub enum Request {
    Mass {
        imp: Imp,
        workers: usize,
    },
    Idle {
        imp: Option<Imp>,
        secs: u64,
        workers: usize,
    },
    Memory {
        imp: Imp,
        workers: usize,
    },
    Arm {
        imp: Option<Imp>,
        tasks: usize,
    },
}

/// Runs the child's one measurement and prints its result.
fn serve(request: Request) {
    match request {
        Request::Mass { imp, workers } => child::reply(&mass::child(imp, workers)),
        Request::Idle { imp, secs, workers } => child::reply(&idle::child(imp, secs, workers)),
        Request::Memory { imp, workers } => child::reply(&memory::child(imp, workers)),
        Request::Arm { imp, tasks } => arm::child(imp, tasks),
    }
}

/// How a metric's value is shown.
#[derive(Clone, Copy)]
pub enum Unit {
    Ns,
    Us,
    Ms,
    Bytes,
    Count,
}

impl Unit {
    fn show(self, v: f64) -> String {
        if v.is_nan() {
            return "n/a".into();
        }
        match self {
            Unit::Ns => format!("{v:.0} ns"),
            Unit::Us => format!("{v:.0} µs"),
            Unit::Ms if v < 10.0 => format!("{v:.2} ms"),
            Unit::Ms => format!("{v:.1} ms"),
            Unit::Bytes => format!("{v:.0} B"),
            Unit::Count => format!("{v:.0}"),
        }
    }
}

/// One run of a workload for one implementation: its metrics' values, or
/// `None` where the workload does not apply to it (n/a).
type Run = Box<dyn Fn(Imp) -> Option<Vec<f64>>>;

/// A workload of the table.
pub struct Workload {
    /// "1a", "3", ...: `compare 1` selects every id starting with 1.
    id: &'static str,
    /// "guard", "mass", ...: `compare mass` selects by it.
    key: &'static str,
    name: &'static str,
    metrics: Vec<(&'static str, Unit)>,
    runs: usize,
    run: Run,
}

/// Every workload, in the table's order, with the runs `args` asks for.
fn workloads(args: &Args) -> Vec<Workload> {
    let mut all = guard::workloads(args);
    all.push(reset::workload(args));
    all.push(mass::workload(args));
    all.push(cascade::workload(args));
    all.push(idle::workload(args));
    all.push(memory::workload(args));
    all.push(blocked::workload(args));
    all.push(arm::workload(args));
    // A diagnostic of 1c, not a comparison: its `ours` column holds what a
    // guard pays whatever the timer, so it comes after the workloads, next
    // to the note that says how to read it.
    all.push(floor::workload(args));
    all
}

fn selected(w: &Workload, filter: Option<&str>) -> bool {
    match filter {
        None => true,
        Some(f) if f.starts_with(|c: char| c.is_ascii_digit()) => w.id.starts_with(f),
        Some(f) => w.key.starts_with(&f.to_lowercase()),
    }
}

/// Every run of `w`: `samples[imp][metric]` holds one value per run, `None`
/// once a run said n/a. Each run starts with the next implementation, so
/// that none always goes first (after another workload's heap, or first to
/// grow this one's) or always follows the same peer.
fn run_workload(w: &Workload, impls: &[Imp]) -> Vec<Option<Vec<Vec<f64>>>> {
    let mut samples: Vec<Option<Vec<Vec<f64>>>> =
        vec![Some(vec![Vec::new(); w.metrics.len()]); impls.len()];
    for run in 0..w.runs {
        let turns = (0..impls.len()).map(|i| (i + run) % impls.len());
        for (k, imp) in turns.map(|k| (k, impls[k])) {
            let Some(per_metric) = samples[k].as_mut() else {
                continue;
            };
            eprint!("{} run {}/{} {:<14}", w.id, run + 1, w.runs, imp.name());
            match (w.run)(imp) {
                Some(values) => {
                    eprintln!("{values:.2?}");
                    for (m, v) in values.into_iter().enumerate() {
                        per_metric[m].push(v);
                    }
                }
                None => {
                    eprintln!("n/a");
                    samples[k] = None;
                }
            }
        }
    }
    samples
}

/// The table's rows of `w`: a row per metric, the medians and the ratios
/// ours/peer (when ours ran).
fn rows(w: &Workload, impls: &[Imp], samples: &[Option<Vec<Vec<f64>>>]) -> Vec<String> {
    let peers: Vec<usize> = (0..impls.len())
        .filter(|&k| impls[k] != Imp::Ours)
        .collect();
    let mut rows = Vec::new();
    for (m, &(metric, unit)) in w.metrics.iter().enumerate() {
        let medians: Vec<f64> = samples
            .iter()
            .map(|s| {
                s.as_ref()
                    .map_or(f64::NAN, |s| median(s[m].iter().copied()))
            })
            .collect();
        let mut cells: Vec<String> = medians.iter().map(|&v| unit.show(v)).collect();
        if let Some(ours) = impls.iter().position(|&i| i == Imp::Ours) {
            let ours = medians[ours];
            for &k in &peers {
                cells.push(ratio(ours / medians[k]));
            }
        }
        let label = if m == 0 {
            format!("{} {}", w.id, w.name)
        } else {
            String::new()
        };
        rows.push(format!("| {label} | {metric} | {} |", cells.join(" | ")));
    }
    rows
}

/// A ratio as the table shows it: 3 decimals under 0.1, else 2; n/a when
/// either side is missing.
fn ratio(ratio: f64) -> String {
    if ratio.is_finite() && ratio < 0.1 {
        format!("{ratio:.3}")
    } else if ratio.is_finite() {
        format!("{ratio:.2}")
    } else {
        "n/a".into()
    }
}

/// The notes under the table for workload `w` (after its runs).
fn notes(w: &Workload, args: &Args) -> Option<String> {
    match w.id {
        "1f" => Some(floor::NOTE.into()),
        "5" => {
            let cpu = (0..w.runs).map(|_| idle::measure(None, args)[0]);
            Some(format!(
                "5: a runtime with no timers at all used {} of CPU over the same {} s.",
                Unit::Us.show(median(cpu)),
                args.idle_secs
            ))
        }
        _ => None,
    }
}

fn main() {
    // Counted only in the memory child (`memory::child` switches it on),
    // so the timing workloads share no counter.
    alloc::set_counting(false);
    if let Some(request) = child::request::<Request>() {
        serve(request);
        return;
    }
    let mut args = Args::parse();
    if args.impls.is_empty() {
        args.impls = Imp::ALL.to_vec();
    }
    let impls = args.impls.clone();
    let filter = args.workload.clone();

    let mut rows: Vec<String> = Vec::new();
    let mut notes_below: Vec<String> = Vec::new();
    let mut figures = Figures::default();
    for w in workloads(&args)
        .into_iter()
        .filter(|w| selected(w, filter.as_deref()))
    {
        let samples = run_workload(&w, &impls);
        figures.add_runs(w.id, &impls, &samples);
        rows.extend(self::rows(&w, &impls, &samples));
        notes_below.extend(notes(&w, &args));
    }

    // The table, printed and (with the plots) written to the plots' directory.
    let command = format!(
        "cargo run --release -p tiered-timer-benchmarks --example compare {}",
        filter.as_deref().unwrap_or("")
    );
    let mut table = String::new();
    let mut line = |text: &str| {
        table.push_str(text);
        table.push('\n');
    };
    line(&format!("Machine: {}", machine::describe()));
    line(&format!("Command: {command}"));
    line("");
    let mut header = vec!["workload".to_string(), "metric".to_string()];
    header.extend(impls.iter().map(|i| i.name().to_string()));
    if impls.contains(&Imp::Ours) {
        header.extend(
            impls
                .iter()
                .filter(|&&i| i != Imp::Ours)
                .map(|p| format!("ours/{}", p.name())),
        );
    }
    line(&format!("| {} |", header.join(" | ")));
    line(&format!("|{}", "---|".repeat(header.len())));
    for row in &rows {
        line(row);
    }
    for note in &notes_below {
        line("");
        line(note);
    }
    print!("{table}");
    if let Some(dir) = args.plots_dir() {
        figures::write(&dir, &table, &figures, command.trim_end(), args.workers);
    }
}

/// `d` in ms.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: the ratio columns divided the first implementation's
    /// median by each peer's, so with `--impls tokio,ours` the column
    /// "ours/tokio" held tokio's over tokio's, 1.00.
    #[test]
    fn ratios_are_ours_over_each_peer_wherever_ours_is_listed() {
        let workload = Workload {
            id: "2",
            key: "reset",
            name: "reset",
            metrics: vec![("per reset", Unit::Ns)],
            runs: 1,
            run: Box::new(|_| None),
        };
        let samples = [Some(vec![vec![40.0]]), Some(vec![vec![10.0]])];
        let rows = rows(&workload, &[Imp::Tokio, Imp::Ours], &samples);
        assert_eq!(rows, ["| 2 reset | per reset | 40 ns | 10 ns | 0.25 |"]);
    }
}
