//! Workload 6: memory. Live heap (a counting global allocator) per pending
//! timer at 1 000 000 timers an hour out, each boxed and polled once,
//! future included; and the future's own size. Each run is a fresh child
//! process, which counts nothing else.

use std::task::{Context, Waker};
use std::time::Duration;

use tiered_timer_benchmarks::alloc;
use tiered_timer_benchmarks::child::{self, Numbers};
use tiered_timer_benchmarks::runtime;
use tiered_timer_benchmarks::timers::{boxed_sleep, Imp};

use crate::{Args, Request, Unit, Workload};

const MEMORY_TIMERS: usize = 1_000_000;

pub fn workload(args: &Args) -> Workload {
    let workers = args.workers;
    Workload {
        id: "6",
        key: "memory",
        name: "memory: 1 000 000 pending timers, future included, fresh process",
        metrics: vec![
            ("heap per timer", Unit::Bytes),
            ("of which the future itself", Unit::Bytes),
        ],
        runs: args.heavy_runs,
        run: Box::new(move |imp| {
            (imp != Imp::TokioAlt).then(|| {
                let Numbers(values) = child::run_self(&Request::Memory { imp, workers });
                values
            })
        }),
    }
}

/// The run, in the child: creates and polls the timers, each boxed in a
/// vector allocated beforehand; the growth of the live heap per timer, and
/// the size of one future.
pub fn child(imp: Imp, workers: usize) -> Numbers {
    alloc::set_counting(true);
    let rt = runtime::multi_thread(workers);
    let _in_rt = rt.enter();
    let mut cx = Context::from_waker(Waker::noop());
    let mut timers = Vec::with_capacity(MEMORY_TIMERS);
    let before = alloc::live_bytes();
    for i in 0..MEMORY_TIMERS {
        let mut t = boxed_sleep(
            imp,
            Duration::from_secs(3600) + Duration::from_micros(i as u64),
        );
        assert!(t.as_mut().poll(&mut cx).is_pending());
        timers.push(t);
    }
    let after = alloc::live_bytes();
    let future = std::mem::size_of_val(&*timers[0]);
    alloc::set_counting(false);
    let per_timer = (after - before) as f64 / MEMORY_TIMERS as f64;
    drop(timers);
    Numbers(vec![per_timer, future as f64])
}
