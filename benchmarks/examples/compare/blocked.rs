//! Workload 7: the blocked worker. Every 250 ms a CPU-heavy request (a task
//! spinning 100 ms) is spawned, blocking whichever worker takes it, while
//! 1 000 tasks keep sleeping 5..54 ms on the workers for `--blocked-ms`
//! (3 s); see `tiered_timer_benchmarks::expiry`. Reports the sleeps'
//! lateness p50, p99 and max, and keeps every sleep's for the plot.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tiered_timer_benchmarks::expiry::{blocked_sleepers, cpu_bound_requests};
use tiered_timer_benchmarks::plot::LatenessHistogram;
use tiered_timer_benchmarks::stats::lateness_ms;
use tiered_timer_benchmarks::timers::{runtime_for, Imp};

use crate::{figures, Args, Unit, Workload};

pub fn workload(args: &Args) -> Workload {
    let length = Duration::from_millis(args.blocked_ms);
    let workers = args.workers;
    Workload {
        id: "7",
        key: "blocked",
        name: "blocked worker: 1 000 tasks sleeping 5..54 ms, a 100 ms CPU-bound request every 250 ms, 2 workers",
        metrics: vec![
            ("lateness p50", Unit::Ms),
            ("lateness p99", Unit::Ms),
            ("lateness max", Unit::Ms),
        ],
        runs: args.heavy_runs,
        run: Box::new(move |imp| Some(blocked_worker(imp, length, workers))),
    }
}

fn blocked_worker(imp: Imp, length: Duration, workers: usize) -> Vec<f64> {
    let rt = runtime_for(imp, workers);
    let stop = Arc::new(AtomicBool::new(false));
    let requests = cpu_bound_requests(rt.handle().clone(), stop.clone());
    let mut late = rt.block_on(blocked_sleepers(imp, length));
    stop.store(true, Ordering::Relaxed);
    requests.join().unwrap();
    drop(rt);
    let [p50, p99, max] = lateness_ms(&mut late);
    figures::record_lateness("7", imp, LatenessHistogram::from_samples(&late));
    vec![p50, p99, max]
}
