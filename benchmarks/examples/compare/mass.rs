//! Workload 3: mass expiry. 200 000 tasks each sleeping 1..=1000 ms
//! (spread evenly, shuffled over the spawn order) from their first poll
//! (`tiered_timer_benchmarks::expiry::mass_expiry`): process CPU from the
//! first spawn to the last wake, lateness p50, p99 and max, and our
//! driver's wakeups. Each run is a fresh child process, as in 5 and 6:
//! process CPU counts every thread, and the peers' own threads (pingora's
//! clock, futures-timer's and async-io's) would otherwise run, and be
//! charged, during everyone's run.

use serde::{Deserialize, Serialize};
use tiered_timer_benchmarks::child::{self, Numbers};
use tiered_timer_benchmarks::expiry::mass_expiry;
use tiered_timer_benchmarks::plot::LatenessHistogram;
use tiered_timer_benchmarks::process_cpu;
use tiered_timer_benchmarks::stats::lateness_ms;
use tiered_timer_benchmarks::timers::{runtime_for, Imp};

use crate::{figures, ms, Args, Request, Unit, Workload};

/// What a run's child reports.
#[derive(Serialize, Deserialize)]
pub struct MassRun {
    /// The workload's metrics, in order.
    values: Numbers,
    /// The lateness of every sleep, for the plot
    /// (`LatenessHistogram::to_text`).
    lateness: String,
}

pub fn workload(args: &Args) -> Workload {
    let workers = args.workers;
    Workload {
        id: "3",
        key: "mass",
        name: "mass expiry: 200 000 tasks sleeping 1..1000 ms, 2 workers",
        metrics: vec![
            ("process CPU", Unit::Ms),
            ("lateness p50", Unit::Ms),
            ("lateness p99", Unit::Ms),
            ("lateness max", Unit::Ms),
            ("driver wakeups", Unit::Count),
        ],
        runs: args.mass_runs,
        run: Box::new(move |imp| Some(run(imp, workers))),
    }
}

/// One run in a child; records its lateness for the plot.
fn run(imp: Imp, workers: usize) -> Vec<f64> {
    let result: MassRun = child::run_self(&Request::Mass { imp, workers });
    let lateness =
        LatenessHistogram::from_text(&result.lateness).expect("the child's lateness histogram");
    figures::record_lateness("3", imp, lateness);
    result.values.0
}

/// The run, in the child.
pub fn child(imp: Imp, workers: usize) -> MassRun {
    let rt = runtime_for(imp, workers);
    let woken = rt.block_on(async move { imp.driver_wakeups() });
    let cpu = process_cpu();
    let mut late = rt.block_on(mass_expiry(imp));
    let cpu = process_cpu() - cpu;
    let woken = rt.block_on(async move { imp.driver_wakeups() }) - woken;
    drop(rt);
    let [p50, p99, max] = lateness_ms(&mut late);
    MassRun {
        values: Numbers(vec![ms(cpu), p50, p99, max, woken]),
        lateness: LatenessHistogram::from_samples(&late).to_text(),
    }
}
