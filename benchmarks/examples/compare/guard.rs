//! Workload 1: a guard armed then cancelled. `timeout(d, f)` where `f` is
//! pending on its first poll and ready on its second, so the timer
//! registers and is then cancelled.
//!
//! - 1a, *idle server*: polled by hand on one thread in a runtime with
//!   tokio's I/O driver and no other timer pending, so each tokio guard is
//!   the earliest timer and tokio unparks its driver (an eventfd write) on
//!   every registration;
//! - 1b: 1 000 tasks on the workers, 1 000 guards each (time driver only);
//!   wall-clock ns per guard;
//! - 1c, *busy server*: as 1a with 100 000 other timers pending and the
//!   runtime parked once, so tokio's guard is never the earliest: the case
//!   that flatters tokio most.

use std::time::Duration;

use tiered_timer_benchmarks::guards::{
    guards_by_hand, guards_in_tasks, in_busy_server, Guard, PendingOnce, BUSY_GUARD_TIMEOUT,
};
use tiered_timer_benchmarks::runtime;
use tiered_timer_benchmarks::timers::{runtime_for, Imp};

use crate::{Args, Unit, Workload};

/// The guard of 1a and 1b.
const GUARD_TIMEOUT: Duration = Duration::from_secs(5);
const GUARD_TASKS: u32 = 1000;
const GUARDS_PER_TASK: u32 = 1000;

/// Calls `body` with a constructor of the implementation's guard of
/// `timeout` around `inner`, monomorphised per implementation.
macro_rules! with_guard {
    ($imp:expr, $timeout:expr, $inner:expr, $body:ident $(, $arg:expr)*) => {
        match $imp {
            Imp::Ours => $body(|| tiered_timer::timeout($timeout, $inner) $(, $arg)*),
            Imp::Tokio | Imp::TokioAlt => {
                $body(|| tokio::time::timeout($timeout, $inner) $(, $arg)*)
            }
            Imp::Pingora => $body(
                || pingora_timeout::fast_timeout::fast_timeout($timeout, $inner)
                $(, $arg)*
            ),
            Imp::FuturesTimer => $body(
                || Guard { future: $inner, delay: futures_timer::Delay::new($timeout) }
                $(, $arg)*
            ),
            Imp::AsyncIo => $body(
                || Guard { future: $inner, delay: async_io::Timer::after($timeout) }
                $(, $arg)*
            ),
        }
    };
}

pub fn workloads(args: &Args) -> Vec<Workload> {
    let (a, b, c) = (args.clone(), args.clone(), args.clone());
    vec![
        Workload {
            id: "1a",
            key: "guard",
            name: "guard armed then cancelled, by hand, one thread: idle server (I/O driver, no other timer)",
            metrics: vec![("per guard", Unit::Ns)],
            runs: args.runs,
            run: Box::new(move |imp| idle_server(imp, &a)),
        },
        Workload {
            id: "1b",
            key: "guard",
            name: "guard armed then cancelled, 1 000 tasks, 2 workers",
            metrics: vec![("per guard (wall)", Unit::Ns)],
            runs: args.runs,
            run: Box::new(move |imp| in_tasks(imp, &b)),
        },
        Workload {
            id: "1c",
            key: "guard",
            name: "guard armed then cancelled, by hand, one thread: busy server (I/O driver, 100 000 other timers, parked once)",
            metrics: vec![("per guard", Unit::Ns)],
            runs: args.runs,
            run: Box::new(move |imp| busy_server(imp, &c)),
        },
    ]
}

/// 1a: in the context of a server runtime with no other timer pending.
fn idle_server(imp: Imp, args: &Args) -> Option<Vec<f64>> {
    if imp == Imp::TokioAlt {
        return None;
    }
    let rt = runtime::server(args.workers);
    let _in_rt = rt.enter();
    let ns = with_guard!(
        imp,
        GUARD_TIMEOUT,
        PendingOnce::by_hand(),
        guards_by_hand,
        args.guards
    );
    Some(vec![ns])
}

/// 1b: in tasks on the workers.
fn in_tasks(imp: Imp, args: &Args) -> Option<Vec<f64>> {
    let rt = runtime_for(imp, args.workers);
    let ns = with_guard!(
        imp,
        GUARD_TIMEOUT,
        PendingOnce::in_task(),
        guards_in_tasks,
        &rt,
        GUARD_TASKS,
        GUARDS_PER_TASK
    );
    Some(vec![ns])
}

/// 1c: in the busy server (`guards::in_busy_server`).
fn busy_server(imp: Imp, args: &Args) -> Option<Vec<f64>> {
    if imp == Imp::TokioAlt {
        return None;
    }
    Some(vec![in_busy_server(imp, args.workers, || {
        busy_guard(imp, args.guards)
    })])
}

/// ns per guard of `imp` in the busy server (call inside
/// `in_busy_server`): the guards, of 60 s, are never the earliest timer.
pub fn busy_guard(imp: Imp, guards: u32) -> f64 {
    with_guard!(
        imp,
        BUSY_GUARD_TIMEOUT,
        PendingOnce::by_hand(),
        guards_by_hand,
        guards
    )
}
