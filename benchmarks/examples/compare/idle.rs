//! Workload 5: idle. 100 000 timers an hour out, registered by a poll, then
//! nothing due for `--idle-secs` (10 s): process CPU over that window, and
//! our driver's wakeups (none: it sleeps until the earliest bucket). Each
//! run is a fresh child process; a run with no timers at all (the
//! baseline, in the note under the table) too.

use std::task::{Context, Waker};
use std::time::Duration;

use tiered_timer_benchmarks::child::{self, Numbers};
use tiered_timer_benchmarks::process_cpu;
use tiered_timer_benchmarks::runtime;
use tiered_timer_benchmarks::timers::{boxed_sleep, Imp};

use crate::{ms, Args, Request, Unit, Workload};

const IDLE_TIMERS: u64 = 100_000;

pub fn workload(args: &Args) -> Workload {
    let args = args.clone();
    Workload {
        id: "5",
        key: "idle",
        name: "idle: 100 000 timers an hour out, nothing due",
        metrics: vec![
            ("process CPU over the window", Unit::Us),
            ("driver wakeups", Unit::Count),
        ],
        runs: args.idle_runs,
        run: Box::new(move |imp| (imp != Imp::TokioAlt).then(|| measure(Some(imp), &args))),
    }
}

/// One run in a child: CPU in µs and wakeups. `imp` of `None` is a runtime
/// with no timers at all, the baseline.
pub fn measure(imp: Option<Imp>, args: &Args) -> Vec<f64> {
    let Numbers(out) = child::run_self(&Request::Idle {
        imp,
        secs: args.idle_secs,
        workers: args.workers,
    });
    // The child reports milliseconds; idle CPU is shown in microseconds.
    vec![out[0] * 1e3, out[1]]
}

/// The run, in the child: the process CPU used over the window, in ms, and
/// our driver's wakeups (NaN for the peers, which have no such count).
pub fn child(imp: Option<Imp>, secs: u64, workers: usize) -> Numbers {
    let rt = runtime::multi_thread(workers);
    let _in_rt = rt.enter();
    let mut cx = Context::from_waker(Waker::noop());
    let mut timers: Vec<_> = match imp {
        Some(imp) => (0..IDLE_TIMERS)
            .map(|i| boxed_sleep(imp, Duration::from_secs(3600) + Duration::from_micros(i)))
            .collect(),
        None => Vec::new(),
    };
    for t in &mut timers {
        assert!(t.as_mut().poll(&mut cx).is_pending());
    }
    let wakeups = || imp.map_or(f64::NAN, Imp::driver_wakeups);
    // Let registrations, thread starts and the runtime settle.
    std::thread::sleep(Duration::from_millis(500));
    let (cpu, woken) = (process_cpu(), wakeups());
    std::thread::sleep(Duration::from_secs(secs));
    let (cpu, woken) = (process_cpu() - cpu, wakeups() - woken);
    drop(timers);
    Numbers(vec![ms(cpu), woken])
}
