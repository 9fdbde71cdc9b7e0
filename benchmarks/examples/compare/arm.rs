//! Workload 8: arming many long timers from tasks. A server accepting a
//! million connections, each arming an idle timeout in its first poll:
//! `--arm-tasks` (1 000 000) tasks on a current-thread runtime, each
//! sleeping an hour (plus up to 1 000 s, spread over the spawn order).
//! Reports the CPU per task above the same tasks with no timer, and that
//! baseline itself. Each measurement is a fresh child process (a fresh
//! heap: the timer's tables grow from empty, as in a new server), the two
//! back to back in each run.

use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use tiered_timer_benchmarks::child;
use tiered_timer_benchmarks::process_cpu;
use tiered_timer_benchmarks::runtime;
use tiered_timer_benchmarks::timers::{sleep_until, Imp};

use crate::{Args, Request, Unit, Workload};

pub fn workload(args: &Args) -> Workload {
    let tasks = args.arm_tasks;
    Workload {
        id: "8",
        key: "arm",
        name: "arming: 1 000 000 tasks each arm a 1 h sleep (spread over 1 000 s) in their first poll, current-thread runtime, fresh process",
        metrics: vec![
            ("CPU per timer, above tasks with none", Unit::Ns),
            ("CPU per task with no timer (the baseline)", Unit::Ns),
        ],
        runs: args.arm_runs,
        run: Box::new(move |imp| arm_many(imp, tasks)),
    }
}

fn arm_many(imp: Imp, tasks: usize) -> Option<Vec<f64>> {
    if imp == Imp::TokioAlt {
        // Ignored on a current-thread runtime.
        return None;
    }
    let with: f64 = child::run_self(&Request::Arm {
        imp: Some(imp),
        tasks,
    });
    let without: f64 = child::run_self(&Request::Arm { imp: None, tasks });
    Some(vec![with - without, without])
}

/// The run, in the child: replies with the process CPU per task, in ns,
/// from the first spawn until every task has been polled once (`imp` of
/// `None`: tasks that arm nothing), and exits without tearing down a
/// million tasks.
pub fn child(imp: Option<Imp>, tasks: usize) {
    let rt = runtime::current_thread();
    // Start the timer (ours is made on first use), and the peers' threads.
    if let Some(imp) = imp {
        rt.block_on(sleep_until(imp, Instant::now() + Duration::from_millis(1)));
    }
    let polled = Arc::new(AtomicUsize::new(0));
    let cpu = process_cpu();
    rt.block_on(async {
        for i in 0..tasks as u64 {
            let timeout = Duration::from_secs(3600) + Duration::from_millis(i * 7919 % 1_000_000);
            let polled = polled.clone();
            // Each task counts its first poll, arming its timer in it.
            let first_poll = std::future::poll_fn(move |_| {
                polled.fetch_add(1, Ordering::Relaxed);
                Poll::Ready(())
            });
            drop(match imp {
                Some(Imp::Ours) => tokio::spawn(async move {
                    let sleep = tiered_timer::sleep(timeout);
                    first_poll.await;
                    sleep.await;
                }),
                Some(Imp::Tokio | Imp::TokioAlt) => tokio::spawn(async move {
                    let sleep = tokio::time::sleep(timeout);
                    first_poll.await;
                    sleep.await;
                }),
                Some(Imp::Pingora) => tokio::spawn(async move {
                    let sleep = pingora_timeout::fast_timeout::fast_sleep(timeout);
                    first_poll.await;
                    sleep.await;
                }),
                Some(Imp::FuturesTimer) => tokio::spawn(async move {
                    let sleep = futures_timer::Delay::new(timeout);
                    first_poll.await;
                    sleep.await;
                }),
                Some(Imp::AsyncIo) => tokio::spawn(async move {
                    let sleep = async_io::Timer::after(timeout);
                    first_poll.await;
                    sleep.await;
                }),
                None => tokio::spawn(async move {
                    black_box(timeout);
                    first_poll.await;
                    std::future::pending::<()>().await;
                }),
            });
        }
        while polled.load(Ordering::Relaxed) < tasks {
            tokio::task::yield_now().await;
        }
    });
    let cpu = process_cpu() - cpu;
    child::reply(&(cpu.as_nanos() as f64 / tasks as f64));
    // Skip tearing down a million tasks.
    std::process::exit(0);
}
