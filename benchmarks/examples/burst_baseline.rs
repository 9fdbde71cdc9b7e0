//! The claim + ack burst of `herd` with nothing but `next` and `ack`, so
//! that the same file builds against an older `tiered-timer-redis` (the
//! crate's name before issue 27; main before issue 25: commit 70c2c68)
//! and `herd` can alternate it with the current crate in one run
//! (`HERD_BASELINE`).
//!
//! ```sh
//! git worktree add --detach /tmp/old 70c2c68
//! sed s/tiered_timer_jobs/tiered_timer_redis/ benchmarks/examples/burst_baseline.rs \
//!     > /tmp/old/benchmarks/examples/burst_baseline.rs
//! (cd /tmp/old && cargo build --release -p tiered-timer-benchmarks --example burst_baseline)
//! HERD_BASELINE=/tmp/old/target/release/examples/burst_baseline HERD_ONLY=burst \
//!     cargo run --release -p tiered-timer-benchmarks --example herd
//! ```
//!
//! `benchmarks/cg_burst.sh` runs it against a redis-server under callgrind
//! and prints Redis' instructions per job.
//!
//! Driven by `herd` (or `cg_burst.sh`) over stdin/stdout: `BURST_URL`, `BURST_JOBS`,
//! `BURST_WORKERS` and `BURST_SHARED` (1: the workers are tasks sharing
//! one `Queue`, as in one process; 0: each its own `Queue`, as separate
//! processes) in the environment; it schedules the jobs, prints `ready`,
//! waits for a line on stdin, runs the workers until every job is acked,
//! and prints `took_secs cpu_secs` (its own CPU time over the run).

use std::io::BufRead;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tiered_timer_jobs::Queue;

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"))
}

/// This process' CPU time so far (user + system).
fn own_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks: u64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0)
        + fields.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let url = env("BURST_URL");
    let jobs: u64 = env("BURST_JOBS").parse().unwrap();
    let workers: usize = env("BURST_WORKERS").parse().unwrap();
    let shared = env("BURST_SHARED") == "1";
    let connect = || async {
        Queue::builder(&url, "herd")
            .connect()
            .await
            .expect("connect")
    };
    let producer = connect().await;
    for chunk in (0..jobs).collect::<Vec<_>>().chunks(1000) {
        producer
            .schedule_many(chunk.iter().map(|_| (Duration::ZERO, "x")))
            .await
            .expect("schedule");
    }
    let mut queues = Vec::new();
    if shared {
        let queue = connect().await;
        queues.resize(workers, queue);
    } else {
        for _ in 0..workers {
            queues.push(connect().await);
        }
    }
    println!("ready");
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).unwrap();
    let done = Arc::new(AtomicU64::new(0));
    let cpu0 = own_cpu();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for queue in queues {
        let done = done.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                let job = queue.next().await.expect("next");
                job.ack().await.expect("ack");
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    while done.load(Ordering::Relaxed) < jobs {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let took = started.elapsed().as_secs_f64();
    let cpu = (own_cpu() - cpu0).as_secs_f64();
    println!("{took} {cpu}");
    std::process::exit(0);
}
