//! What the operator's view costs: `Queue::stats` and
//! `Queue::dead_letters` next to the plainest read, `Queue::pending` (one
//! `ZCARD` per partition), on a queue of 100 000 waiting jobs and 1 000
//! dead letters, in one process against one Redis. Prints a markdown
//! table: latency per call (p50 / p99) and Redis commands per call
//! (`INFO stats`' `total_commands_processed`, which counts the commands
//! inside a script too).
//!
//! ```sh
//! cargo run --release -p tiered-timer-benchmarks --example ops_cost
//! ```
//!
//! With `REDIS_URL` it uses (and deletes) keys under `ttr:{ops-cost-*}`
//! only; otherwise it starts its own redis-server. A few seconds.

use clap::Parser;
use tiered_timer_benchmarks::redis_support as support;

use std::future::Future;
use std::time::{Duration, Instant};

use tiered_timer_jobs::Queue;

const PENDING: usize = 100_000;
const DEAD: usize = 1_000;
const CALLS: usize = 500;

/// A queue of `partitions` with [`PENDING`] jobs an hour out and [`DEAD`]
/// dead letters.
async fn filled_queue(url: &str, partitions: u32) -> Queue {
    let name = format!("ops-cost-{}-{partitions}", std::process::id());
    let queue = Queue::builder(url, &name)
        .partitions(partitions)
        .connect()
        .await
        .unwrap();
    for _ in 0..PENDING / 10_000 {
        queue
            .schedule_many((0..10_000).map(|i| (Duration::from_secs(3600 + i), "pending job")))
            .await
            .unwrap();
    }
    queue
        .schedule_many((0..DEAD).map(|_| (Duration::ZERO, "dead job")))
        .await
        .unwrap();
    for _ in 0..DEAD {
        let job = queue.next().await.unwrap();
        job.bury("measured").await.unwrap();
    }
    queue
}

/// p50 and p99 of `CALLS` calls in µs, and Redis commands per call.
async fn measure<F, Fut, T>(url: &str, mut call: F) -> (f64, f64, f64)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = T>,
{
    for _ in 0..20 {
        call().await; // warm up: scripts loaded, connection hot
    }
    // One connection for both reads: opening one sends commands of its own.
    let client = redis::Client::open(url).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let before = support::commands_processed(&mut conn).await;
    let mut took = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let start = Instant::now();
        call().await;
        took.push(start.elapsed());
    }
    // The INFO call itself counts as one command.
    let commands =
        (support::commands_processed(&mut conn).await - before - 1) as f64 / CALLS as f64;
    took.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    (us(took[CALLS / 2]), us(took[CALLS * 99 / 100]), commands)
}

/// What the operator's reads cost (`stats`, `dead_letters` next to `pending`) on one Redis: a markdown table.
#[derive(Parser, Debug)]
#[command(name = "ops_cost")]
struct Args {
    /// The Redis to use (only this program's own keys are touched and
    /// deleted); a redis-server started here by default.
    #[arg(long, env = "REDIS_URL")]
    redis_url: Option<String>,
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let redis = support::Redis::at_or_start(Args::parse().redis_url);
    let url = redis.url.clone();
    println!("| call | partitions | p50 (µs) | p99 (µs) | p50 vs `pending()` | Redis commands per call |");
    println!("|---|---|---|---|---|---|");
    for partitions in [1, 4] {
        let queue = filled_queue(&url, partitions).await;
        let stats = queue.stats().await.unwrap();
        assert_eq!((stats.pending, stats.dead), (PENDING as u64, DEAD as u64));
        let (base, _, _) = measure(&url, || queue.pending()).await;
        let rows = [
            ("`pending()`", measure(&url, || queue.pending()).await),
            ("`stats()`", measure(&url, || queue.stats()).await),
            (
                "`dead_letters(20)`",
                measure(&url, || queue.dead_letters(20)).await,
            ),
        ];
        for (call, (p50, p99, commands)) in rows {
            println!(
                "| {call} | {partitions} | {p50:.0} | {p99:.0} | {:.2}x | {commands:.1} |",
                p50 / base
            );
        }
        queue.purge_all().await.unwrap();
        // Delete what purge_all left: the waiting jobs' keys, by name.
        let mut keys = Vec::new();
        for p in 0..partitions {
            let tag = if partitions == 1 {
                queue.name().to_owned()
            } else {
                format!("{}#{p}", queue.name())
            };
            for what in [
                "due", "leased", "dead", "payload", "attempt", "deadline", "token", "error",
            ] {
                keys.push(format!("ttr:{{{tag}}}:{what}"));
            }
        }
        let client = redis::Client::open(url.as_str()).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let _: () = redis::cmd("DEL")
            .arg(&keys)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
}
