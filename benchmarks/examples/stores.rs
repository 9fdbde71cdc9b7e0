//! The two backends of `tiered-timer-jobs` side by side, against the
//! embedded store's targets (issue 27), in one markdown table:
//!
//! | measure | target |
//! |---|---|
//! | `schedule` one by one from 64 tasks | ≥ 20 000 jobs/s |
//! | `schedule_many`, chunks of 1 000 | ≥ 200 000 jobs/s |
//! | lateness p99 at 1 000 jobs/s | ≤ 2 ms |
//! | reopen of 1 000 000 pending jobs | ≤ 2 s |
//! | memory per pending job, besides its payload | ≤ 100 B |
//!
//! ```sh
//! cargo run --release -p tiered-timer-benchmarks --example stores
//! REDIS_URL=redis://127.0.0.1:6379/ cargo run --release -p tiered-timer-benchmarks --example stores
//! TTJ_BENCH_ONLY=lateness cargo run --release -p tiered-timer-benchmarks --example stores
//! cargo run --release -p tiered-timer-benchmarks --example stores -- --help   # the knobs
//! ```
//!
//! The embedded store is in a fresh directory under the system's
//! temporary directory (`TTJ_BENCH_DIR` to put it on another disk: its
//! fsyncs are the point); Redis is the one at `REDIS_URL` or a
//! redis-server started here (no persistence: its writes are not on disk
//! when they return, the embedded store's are). Reopening and memory are
//! measured in a child process of their own
//! (`tiered_timer_benchmarks::child`), so that its resident size counts
//! nothing else; Redis' memory is its `used_memory` growth. The
//! load average is printed before and after: quote it with the numbers.
//! About a minute.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::{Parser, ValueEnum};
use serde::{Deserialize, Serialize};
use tiered_timer_benchmarks::child;
use tiered_timer_benchmarks::machine::load_average as load;
use tiered_timer_benchmarks::redis_support as support;
use tiered_timer_jobs::Queue;

/// Payload bytes per job.
const PAYLOAD: usize = 32;

/// The embedded store (`file://`) and Redis side by side, against issue
/// 27's targets: one markdown table.
#[derive(Parser, Debug)]
#[command(name = "stores")]
struct Args {
    /// Jobs scheduled one by one, from 64 tasks.
    #[arg(long, env = "TTJ_BENCH_ONE", default_value_t = 64_000)]
    one: usize,
    /// Jobs scheduled with `schedule_many`, 1 000 a call.
    #[arg(long, env = "TTJ_BENCH_MANY", default_value_t = 400_000)]
    many: usize,
    /// Length of the lateness run at 1 000 jobs/s, in seconds.
    #[arg(long, env = "TTJ_BENCH_LATENESS_SECS", default_value_t = 10)]
    lateness_secs: u64,
    /// Pending jobs of the reopen and memory measurements.
    #[arg(long, env = "TTJ_BENCH_REOPEN", default_value_t = 1_000_000)]
    reopen: usize,
    /// Where the embedded stores go (their fsyncs are the point: put them
    /// on the disk you mean); the system's temporary directory by default.
    #[arg(long, env = "TTJ_BENCH_DIR")]
    dir: Option<PathBuf>,
    /// `lateness`: the embedded store's lateness row alone (quick).
    #[arg(long, env = "TTJ_BENCH_ONLY")]
    only: Option<Only>,
    /// The Redis to measure (its keys under `ttr:{bench-*}` are used, and
    /// its memory is not measured); a redis-server started here by default.
    #[arg(long, env = "REDIS_URL")]
    redis_url: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Only {
    Lateness,
}

/// The reopen measurement, in a child process: open the store at `url`.
#[derive(Serialize, Deserialize, Debug)]
struct Reopen {
    url: String,
}

/// What the reopen child measured.
#[derive(Serialize, Deserialize, Debug)]
struct Reopened {
    secs: f64,
    pending: u64,
    bytes_per_job: f64,
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

/// Resident memory of this process, bytes.
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split(' ')
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// A fresh directory for an embedded store, removed on drop.
struct Dir(std::path::PathBuf);

impl Dir {
    fn new(base: Option<&PathBuf>, what: &str) -> Dir {
        let base = base.cloned().unwrap_or_else(std::env::temp_dir);
        let dir = base.join(format!("ttj-bench-{what}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Dir(dir)
    }

    fn url(&self) -> String {
        format!("file://{}", self.0.display())
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn connect(url: &str, name: &str) -> Queue {
    Queue::builder(url, name)
        .lease(Duration::from_secs(60))
        .connect()
        .await
        .expect("connect")
}

/// Jobs/s of `schedule` called one by one from 64 tasks.
async fn one_by_one(url: &str, name: &str, total: usize) -> f64 {
    let queue = connect(url, name).await;
    let per_task = total / 64;
    let start = Instant::now();
    let tasks: Vec<_> = (0..64)
        .map(|_| {
            let queue = queue.clone();
            tokio::spawn(async move {
                for _ in 0..per_task {
                    queue
                        .schedule(Duration::from_secs(3600), vec![7u8; PAYLOAD])
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    (per_task * 64) as f64 / start.elapsed().as_secs_f64()
}

/// Jobs/s of `schedule_many` in calls of 1 000.
async fn many(url: &str, name: &str, total: usize) -> f64 {
    let queue = connect(url, name).await;
    let start = Instant::now();
    for _ in 0..total / 1000 {
        queue
            .schedule_many((0..1000).map(|_| (Duration::from_secs(3600), vec![7u8; PAYLOAD])))
            .await
            .unwrap();
    }
    (total / 1000 * 1000) as f64 / start.elapsed().as_secs_f64()
}

/// Lateness (µs, claim minus due) of `secs` × 1 000 jobs due 1 ms apart,
/// taken by 4 workers that ack each: p50, p99, max, and how many early.
async fn lateness(url: &str, name: &str, secs: u64) -> (f64, f64, f64, usize) {
    let queue = connect(url, name).await;
    let n = secs * 1000;
    let first_ms = now_us() / 1000 + 1000;
    let epoch = |ms: u64| UNIX_EPOCH + Duration::from_millis(ms);
    let mut i = 0;
    while i < n {
        let chunk = (n - i).min(1000);
        queue
            .schedule_many_at((i..i + chunk).map(|k| (epoch(first_ms + k), vec![1u8; PAYLOAD])))
            .await
            .unwrap();
        i += chunk;
    }
    let seen = Arc::new(Mutex::new(Vec::with_capacity(n as usize)));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (queue, seen) = (queue.clone(), Arc::clone(&seen));
            tokio::spawn(async move {
                loop {
                    let job = queue.next().await.unwrap();
                    let at = now_us();
                    let due = job
                        .deadline()
                        .duration_since(UNIX_EPOCH)
                        .unwrap()
                        .as_micros() as u64;
                    seen.lock().unwrap().push(at as i64 - due as i64);
                    job.ack().await.unwrap();
                }
            })
        })
        .collect();
    while seen.lock().unwrap().len() < n as usize {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for worker in workers {
        worker.abort();
    }
    let mut late = seen.lock().unwrap().clone();
    late.sort_unstable();
    let pick = |p: f64| late[((late.len() - 1) as f64 * p).round() as usize] as f64 / 1000.0;
    let early = late.iter().filter(|&&l| l < 0).count();
    (
        pick(0.5),
        pick(0.99),
        *late.last().unwrap() as f64 / 1000.0,
        early,
    )
}

/// The child process: opens the store at `url` and reports how long that
/// took and how much resident memory it added, per pending job.
async fn reopen_child(url: &str) -> Reopened {
    let before = rss();
    let start = Instant::now();
    let queue = connect(url, "reopen").await;
    let pending = queue.pending().await.unwrap();
    let took = start.elapsed();
    let grown = rss().saturating_sub(before);
    Reopened {
        secs: took.as_secs_f64(),
        pending,
        bytes_per_job: grown as f64 / pending.max(1) as f64,
    }
}

/// Fills an embedded store with `n` pending jobs, closes it, and reopens
/// it in a child process: (seconds, bytes per pending job).
async fn reopen(dir: &Dir, n: usize) -> (f64, f64) {
    {
        let queue = connect(&dir.url(), "reopen").await;
        for _ in 0..n / 1000 {
            queue
                .schedule_many((0..1000).map(|_| (Duration::from_secs(3600), vec![7u8; PAYLOAD])))
                .await
                .unwrap();
        }
    }
    tokio::time::sleep(Duration::from_millis(200)).await; // the store closes
    let reopened: Reopened = child::run_self(&Reopen { url: dir.url() });
    assert_eq!(
        reopened.pending as usize,
        n / 1000 * 1000,
        "every job is back"
    );
    (reopened.secs, reopened.bytes_per_job)
}

/// Redis' `used_memory` growth per pending job for `n` jobs, minus the
/// payload.
async fn redis_memory(url: &str, n: usize) -> f64 {
    let client = redis::Client::open(url).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let used = |info: String| -> u64 {
        info.lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    let before: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(&mut conn)
        .await
        .unwrap();
    let queue = connect(url, "bench-memory").await;
    for _ in 0..n / 1000 {
        queue
            .schedule_many((0..1000).map(|_| (Duration::from_secs(3600), vec![7u8; PAYLOAD])))
            .await
            .unwrap();
    }
    let after: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(&mut conn)
        .await
        .unwrap();
    let per = (used(after) as f64 - used(before) as f64) / (n / 1000 * 1000) as f64;
    let _: () = redis::cmd("FLUSHALL")
        .arg("ASYNC")
        .query_async(&mut conn)
        .await
        .unwrap();
    per - PAYLOAD as f64
}

async fn flush(url: &str) {
    let client = redis::Client::open(url).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("FLUSHALL")
        .arg("ASYNC")
        .query_async(&mut conn)
        .await
        .unwrap();
}

#[tokio::main]
async fn main() {
    if let Some(Reopen { url }) = child::request() {
        return child::reply(&reopen_child(&url).await);
    }
    let args = Args::parse();
    let one = args.one;
    let n_many = args.many;
    let secs = args.lateness_secs;
    let n_reopen = args.reopen;
    let own_redis = args.redis_url.is_none();
    let base = args.dir.as_ref();
    eprintln!("load average before: {}", load());
    if args.only == Some(Only::Lateness) {
        // The embedded store's lateness alone (quick, for its p99).
        let dir = Dir::new(base, "late");
        let (p50, p99, max, early) = lateness(&dir.url(), "late", secs).await;
        println!(
            "embedded lateness at 1 000 jobs/s, {secs} s: p50 {p50:.2} / p99 {p99:.2} / \
             max {max:.2} ms, {early} early; load average after: {}",
            load()
        );
        return;
    }

    let dir = Dir::new(base, "one");
    let e_one = one_by_one(&dir.url(), "one", one).await;
    drop(dir);
    let dir = Dir::new(base, "many");
    let e_many = many(&dir.url(), "many", n_many).await;
    drop(dir);
    let dir = Dir::new(base, "late");
    let e_late = lateness(&dir.url(), "late", secs).await;
    drop(dir);
    let dir = Dir::new(base, "reopen");
    let (e_reopen, e_memory) = reopen(&dir, n_reopen).await;
    drop(dir);
    eprintln!(
        "embedded: {e_one:.0}/s one by one, {e_many:.0}/s many, lateness {e_late:?}, \
         reopen {e_reopen:.2} s, {e_memory:.0} B/job; load average: {}",
        load()
    );

    let redis = support::Redis::at_or_start(args.redis_url.clone());
    let url = redis.url.clone();
    let r_one = one_by_one(&url, "bench-one", one).await;
    let r_many = many(&url, "bench-many", n_many).await;
    if own_redis {
        flush(&url).await;
    }
    let r_late = lateness(&url, "bench-late", secs).await;
    let r_memory = if own_redis {
        flush(&url).await;
        Some(redis_memory(&url, n_reopen).await)
    } else {
        None // a shared Redis: its memory counts other things too
    };
    eprintln!("load average after: {}", load());

    println!("| measure (target) | embedded (`file://`, fsync'd) | Redis (no persistence) |");
    println!("|---|---:|---:|");
    println!("| `schedule` one by one, 64 tasks (≥ 20 000/s) | {e_one:.0}/s | {r_one:.0}/s |");
    println!("| `schedule_many` by 1 000 (≥ 200 000/s) | {e_many:.0}/s | {r_many:.0}/s |");
    let show = |(p50, p99, max, early): (f64, f64, f64, usize)| {
        format!("p50 {p50:.2} / p99 {p99:.2} / max {max:.2} ms, {early} early")
    };
    println!(
        "| lateness at 1 000 jobs/s, {secs} s (p99 ≤ 2 ms) | {} | {} |",
        show(e_late),
        show(r_late)
    );
    println!(
        "| reopen {n_reopen} pending (≤ 2 s) | {e_reopen:.2} s | n/a (the server keeps them) |"
    );
    println!(
        "| memory per pending job besides its {PAYLOAD} B payload (≤ 100 B) | {e_memory:.0} B | {} |",
        r_memory.map_or("n/a (shared Redis)".to_owned(), |m| format!("{m:.0} B"))
    );
}
