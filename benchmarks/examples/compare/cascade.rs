//! Workload 4: cascade storm. 300 000 tasks due at one far deadline
//! (`--cascade-ms`, 4.5 s: past the two finest wheels), while a 1 ms ticker
//! (the same implementation's sleeps) records its worst lateness from the
//! moment every storm task has registered until the last one woke. Reports
//! the time from the deadline to the last wake, the ticker's worst
//! lateness, process CPU from the first spawn to the last wake, and our
//! driver's wakeups.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use tiered_timer_benchmarks::process_cpu;
use tiered_timer_benchmarks::timers::{runtime_for, sleep_until, Imp};

use crate::{ms, Args, Unit, Workload};

const STORM_TASKS: usize = 300_000;

pub fn workload(args: &Args) -> Workload {
    let far = Duration::from_millis(args.cascade_ms);
    let workers = args.workers;
    Workload {
        id: "4",
        key: "cascade",
        name: "cascade storm: 300 000 tasks at one far deadline + 1 ms ticker",
        metrics: vec![
            ("all fired, after the deadline", Unit::Ms),
            ("ticker worst lateness", Unit::Ms),
            ("process CPU", Unit::Ms),
            ("driver wakeups", Unit::Count),
        ],
        runs: args.heavy_runs,
        run: Box::new(move |imp| Some(cascade_storm(imp, far, workers))),
    }
}

fn cascade_storm(imp: Imp, far: Duration, workers: usize) -> Vec<f64> {
    let rt = runtime_for(imp, workers);
    let woken = rt.block_on(async move { imp.driver_wakeups() });
    let cpu = process_cpu();
    let (all_fired, ticker_worst) = rt.block_on(async move {
        let deadline = Instant::now() + far;
        let registered = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let worst = Arc::new(AtomicU64::new(0));
        let ticker = tokio::spawn(ticker(imp, registered.clone(), done.clone(), worst.clone()));
        let handles: Vec<_> = (0..STORM_TASKS)
            .map(|_| tokio::spawn(storm_task(imp, deadline, registered.clone())))
            .collect();
        let mut last = deadline;
        for h in handles {
            last = last.max(h.await.unwrap());
        }
        done.store(true, Ordering::Relaxed);
        ticker.await.unwrap();
        (last.duration_since(deadline), worst.load(Ordering::Relaxed))
    });
    let cpu = process_cpu() - cpu;
    let woken = rt.block_on(async move { imp.driver_wakeups() }) - woken;
    drop(rt);
    vec![ms(all_fired), ticker_worst as f64 / 1e6, ms(cpu), woken]
}

/// A 1 ms ticker until `done`, keeping in `worst` its worst lateness (ns)
/// once every storm task has `registered`.
async fn ticker(
    imp: Imp,
    registered: Arc<AtomicUsize>,
    done: Arc<AtomicBool>,
    worst: Arc<AtomicU64>,
) {
    let start = Instant::now();
    let mut k = 0u32;
    while !done.load(Ordering::Relaxed) {
        k += 1;
        let next = start + Duration::from_millis(u64::from(k));
        sleep_until(imp, next).await;
        let now = Instant::now();
        if registered.load(Ordering::Relaxed) == STORM_TASKS {
            let late = now.duration_since(next).as_nanos() as u64;
            worst.fetch_max(late, Ordering::Relaxed);
        }
        // Skip ticks already missed, as `MissedTickBehavior::Skip`.
        while start + Duration::from_millis(u64::from(k) + 1) < now {
            k += 1;
        }
    }
}

/// A storm task: registers its sleep (counting itself in `registered`),
/// sleeps until `deadline`, returns when it woke.
async fn storm_task(imp: Imp, deadline: Instant, registered: Arc<AtomicUsize>) -> Instant {
    let mut sleep = pin!(sleep_until(imp, deadline));
    // The first poll registers the timer.
    if std::future::poll_fn(|cx| Poll::Ready(sleep.as_mut().poll(cx).is_ready())).await {
        registered.fetch_add(1, Ordering::Relaxed);
        return Instant::now();
    }
    registered.fetch_add(1, Ordering::Relaxed);
    sleep.await;
    Instant::now()
}
