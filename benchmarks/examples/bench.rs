//! Side by side against one Redis: `tiered-timer-jobs` and the classic
//! poller (a Lua `ZRANGEBYSCORE` + `ZREM` claim every 100 ms, due times
//! from the client's clock). Prints a markdown table.
//!
//! ```sh
//! cargo run --release -p tiered-timer-benchmarks --example bench
//! REDIS_URL=redis://127.0.0.1:6379/ cargo run --release -p tiered-timer-benchmarks --example bench
//! ```
//!
//! With `REDIS_URL` it uses (and cleans up) keys under `ttr:{bench-*}` and
//! `poller:bench-*` only; otherwise it starts its own redis-server.
//! Lateness is measured on the machine's clock against each job's due time
//! (Redis and the bench share that clock here). About a minute.

use clap::Parser;
use tiered_timer_benchmarks::redis_support as support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::aio::MultiplexedConnection;
use tiered_timer_jobs::Queue;

/// How far out the lateness runs schedule their jobs.
const LEAD: Duration = Duration::from_millis(200);

static RUN: AtomicU64 = AtomicU64::new(0);

fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        RUN.fetch_add(1, Ordering::Relaxed)
    )
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

async fn delete_queue(conn: &mut MultiplexedConnection, name: &str) {
    let keys: Vec<String> = [
        "due", "leased", "dead", "payload", "attempt", "deadline", "token",
    ]
    .iter()
    .map(|k| format!("ttr:{{{name}}}:{k}"))
    .collect();
    let _: () = redis::cmd("DEL")
        .arg(&keys)
        .query_async(conn)
        .await
        .unwrap();
}

/// Microseconds from `due` to `at`, both since the epoch: negative if a
/// job came out early (this machine's clock is Redis' too, so that would be
/// early by Redis' clock). Kept signed so an early delivery is counted, not
/// hidden.
fn signed_lateness(at: u64, due: u64) -> i64 {
    at as i64 - due as i64
}

/// p50 and p99 lateness (ms), how many jobs, how many came out early.
struct Lateness {
    p50: f64,
    p99: f64,
    jobs: usize,
    early: usize,
}

fn summary(sorted: &[i64]) -> Lateness {
    Lateness {
        p50: percentile(sorted, 0.5),
        p99: percentile(sorted, 0.99),
        jobs: sorted.len(),
        early: sorted.iter().filter(|&&l| l < 0).count(),
    }
}

fn percentile(sorted: &[i64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i] as f64 / 1000.0
}

/// The classic poller: jobs in one sorted set scored by the *client's* due
/// time in ms; every 100 ms each worker claims what is due, 100 at a time.
mod poller {
    use super::*;

    pub const CLAIM: &str = r#"
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
for _, member in ipairs(due) do redis.call('ZREM', KEYS[1], member) end
return due
"#;

    pub fn key(name: &str) -> String {
        format!("poller:{name}")
    }

    pub fn member(i: u64, due_ms: u64) -> String {
        format!("{due_ms}:{i}")
    }

    pub fn due_of(member: &str) -> u64 {
        member.split(':').next().unwrap().parse().unwrap()
    }

    /// Claims until nothing is due, every `interval`, until `stop` is set;
    /// records each job's lateness in µs.
    pub async fn work(
        mut conn: MultiplexedConnection,
        key: String,
        lateness: Arc<Mutex<Vec<i64>>>,
        stop: Arc<std::sync::atomic::AtomicBool>,
    ) {
        let script = redis::Script::new(CLAIM);
        let mut ticks = tiered_timer::interval(Duration::from_millis(100));
        while !stop.load(Ordering::Relaxed) {
            ticks.tick().await;
            loop {
                let now_ms = now_us() / 1000;
                let claimed: Vec<String> = script
                    .key(&key)
                    .arg(now_ms)
                    .arg(100)
                    .invoke_async(&mut conn)
                    .await
                    .unwrap();
                let at = now_us();
                let mut l = lateness.lock().unwrap();
                for m in &claimed {
                    l.push(signed_lateness(at, due_of(m) * 1000));
                }
                if claimed.len() < 100 {
                    break;
                }
            }
        }
    }
}

struct Row {
    what: String,
    ours: String,
    poller: String,
}

async fn schedule_throughput(url: &str, conn: &mut MultiplexedConnection, rows: &mut Vec<Row>) {
    let name = unique("bench");
    let queue = Queue::connect(url, &name).await.unwrap();
    let n = 5_000u64;
    let start = Instant::now();
    for i in 0..n {
        queue
            .schedule(Duration::from_secs(3600), format!("{i}"))
            .await
            .unwrap();
    }
    let ours_one = n as f64 / start.elapsed().as_secs_f64();
    let key = poller::key(&unique("bench"));
    let start = Instant::now();
    for i in 0..n {
        let due = now_us() / 1000 + 3_600_000;
        let _: () = redis::cmd("ZADD")
            .arg(&key)
            .arg(due)
            .arg(poller::member(i, due))
            .query_async(conn)
            .await
            .unwrap();
    }
    let poller_one = n as f64 / start.elapsed().as_secs_f64();
    rows.push(Row {
        what: "schedule, one by one (jobs/s)".into(),
        ours: format!("{ours_one:.0}"),
        poller: format!("{poller_one:.0} (ZADD)"),
    });

    let n = 100_000u64;
    let batch = 1_000u64;
    let start = Instant::now();
    for b in 0..n / batch {
        queue
            .schedule_many(
                (0..batch).map(|i| (Duration::from_secs(3600), format!("{}", b * batch + i))),
            )
            .await
            .unwrap();
    }
    let ours_many = n as f64 / start.elapsed().as_secs_f64();
    let start = Instant::now();
    for b in 0..n / batch {
        let mut pipe = redis::pipe();
        for i in 0..batch {
            let due = now_us() / 1000 + 3_600_000;
            pipe.cmd("ZADD")
                .arg(&key)
                .arg(due)
                .arg(poller::member(b * batch + i, due))
                .ignore();
        }
        let _: () = pipe.query_async(conn).await.unwrap();
    }
    let poller_many = n as f64 / start.elapsed().as_secs_f64();
    rows.push(Row {
        what: "schedule, pipelined by 1 000 (jobs/s)".into(),
        ours: format!("{ours_many:.0} (`schedule_many`)"),
        poller: format!("{poller_many:.0} (ZADD)"),
    });
    delete_queue(conn, &name).await;
    let _: () = redis::cmd("DEL").arg(&key).query_async(conn).await.unwrap();
}

/// Schedules `rate` jobs/s for `seconds`, each due `LEAD` later, in batches
/// every 10 ms; returns when all were scheduled.
async fn produce(
    rate: u64,
    seconds: u64,
    mut batch_fn: impl FnMut(u64, u64) -> futures_batch::Batch,
) {
    let per_tick = (rate / 100).max(1);
    let ticks = seconds * 100;
    let mut interval = tiered_timer::interval(Duration::from_millis(10));
    let mut pending = Vec::new();
    for t in 0..ticks {
        interval.tick().await;
        pending.push(tokio::spawn(batch_fn(t * per_tick, per_tick)));
    }
    for p in pending {
        p.await.unwrap();
    }
}

/// A boxed future for one producer batch.
mod futures_batch {
    pub type Batch = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;
}

async fn lateness_ours(url: &str, rate: u64, seconds: u64, workers: usize) -> Lateness {
    let name = unique("bench");
    let producer = Queue::connect(url, &name).await.unwrap();
    let total = (rate / 100).max(1) * seconds * 100;
    let lateness = Arc::new(Mutex::new(Vec::with_capacity(total as usize)));
    let done = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();
    for _ in 0..workers {
        let queue = Queue::connect(url, &name).await.unwrap();
        let lateness = lateness.clone();
        let done = done.clone();
        handles.push(tokio::spawn(async move {
            // Aborted once every job is in: a `next` cut short by a
            // timeout could strand a claim until its lease runs out.
            loop {
                let job = queue.next().await.unwrap();
                let at = now_us();
                let due = job
                    .deadline()
                    .duration_since(UNIX_EPOCH)
                    .unwrap()
                    .as_micros() as u64;
                lateness.lock().unwrap().push(signed_lateness(at, due));
                done.fetch_add(1, Ordering::Relaxed);
                job.ack().await.unwrap();
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    produce(rate, seconds, |first, n| {
        let producer = producer.clone();
        Box::pin(async move {
            producer
                .schedule_many((first..first + n).map(|i| (LEAD, format!("{i}"))))
                .await
                .unwrap();
        })
    })
    .await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while done.load(Ordering::Relaxed) < total && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for h in handles {
        h.abort();
    }
    let mut l = lateness.lock().unwrap().clone();
    l.sort_unstable();
    let client = redis::Client::open(url).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    delete_queue(&mut conn, &name).await;
    summary(&l)
}

async fn lateness_poller(url: &str, rate: u64, seconds: u64, workers: usize) -> Lateness {
    let key = poller::key(&unique("bench"));
    let client = redis::Client::open(url).unwrap();
    let total = (rate / 100).max(1) * seconds * 100;
    let lateness = Arc::new(Mutex::new(Vec::with_capacity(total as usize)));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut handles = Vec::new();
    for _ in 0..workers {
        let conn = client.get_multiplexed_async_connection().await.unwrap();
        handles.push(tokio::spawn(poller::work(
            conn,
            key.clone(),
            lateness.clone(),
            stop.clone(),
        )));
    }
    let producer = client.get_multiplexed_async_connection().await.unwrap();
    produce(rate, seconds, |first, n| {
        let mut conn = producer.clone();
        let key = key.clone();
        Box::pin(async move {
            let mut pipe = redis::pipe();
            for i in first..first + n {
                let due = (now_us() + LEAD.as_micros() as u64).div_ceil(1000);
                pipe.cmd("ZADD")
                    .arg(&key)
                    .arg(due)
                    .arg(poller::member(i, due))
                    .ignore();
            }
            let _: () = pipe.query_async(&mut conn).await.unwrap();
        })
    })
    .await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while (lateness.lock().unwrap().len() as u64) < total && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.abort();
    }
    let mut l = lateness.lock().unwrap().clone();
    l.sort_unstable();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("DEL")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .unwrap();
    summary(&l)
}

/// Commands per second per worker while `jobs` jobs sit an hour out.
async fn idle(
    url: &str,
    conn: &mut MultiplexedConnection,
    jobs: u64,
    workers: usize,
    rows: &mut Vec<Row>,
) {
    let name = unique("bench");
    let queue = Queue::connect(url, &name).await.unwrap();
    for b in 0..jobs / 1000 {
        queue
            .schedule_many(
                (0..1000).map(|i| (Duration::from_secs(3600), format!("{}", b * 1000 + i))),
            )
            .await
            .unwrap();
    }
    let key = poller::key(&unique("bench"));
    let mut pipe = redis::pipe();
    let due = now_us() / 1000 + 3_600_000;
    for i in 0..jobs {
        pipe.cmd("ZADD")
            .arg(&key)
            .arg(due)
            .arg(poller::member(i, due))
            .ignore();
    }
    let _: () = pipe.query_async(conn).await.unwrap();

    let window = Duration::from_secs(5);
    let mut handles = Vec::new();
    for _ in 0..workers {
        let queue = Queue::connect(url, &name).await.unwrap();
        handles.push(tokio::spawn(async move { queue.next().await.map(|_| ()) }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = support::commands_processed(conn).await;
    tokio::time::sleep(window).await;
    let ours = (support::commands_processed(conn).await - before - 1) as f64
        / window.as_secs_f64()
        / workers as f64;
    for h in handles {
        h.abort();
    }

    let client = redis::Client::open(url).unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sink = Arc::new(Mutex::new(Vec::new()));
    let mut handles = Vec::new();
    for _ in 0..workers {
        let c = client.get_multiplexed_async_connection().await.unwrap();
        handles.push(tokio::spawn(poller::work(
            c,
            key.clone(),
            sink.clone(),
            stop.clone(),
        )));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = support::commands_processed(conn).await;
    tokio::time::sleep(window).await;
    let theirs = (support::commands_processed(conn).await - before - 1) as f64
        / window.as_secs_f64()
        / workers as f64;
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.abort();
    }
    rows.push(Row {
        what: format!(
            "idle Redis commands/s per worker ({workers} workers, {jobs} jobs an hour out)"
        ),
        ours: format!("{ours:.2}"),
        poller: format!("{theirs:.2}"),
    });
    delete_queue(conn, &name).await;
    let _: () = redis::cmd("DEL").arg(&key).query_async(conn).await.unwrap();
}

/// `tiered-timer-jobs` against the classic 100 ms poller, on one Redis: a markdown table.
#[derive(Parser, Debug)]
#[command(name = "bench")]
struct Args {
    /// The Redis to use (only this program's own keys are touched and
    /// deleted); a redis-server started here by default.
    #[arg(long, env = "REDIS_URL")]
    redis_url: Option<String>,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let redis = support::Redis::at_or_start(Args::parse().redis_url);
    let url = redis.url.clone();
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let started = Instant::now();
    let mut rows = Vec::new();

    // Warm up (connections, script cache, allocator) before measuring.
    lateness_ours(&url, 1_000, 1, 1).await;
    lateness_poller(&url, 1_000, 1, 1).await;
    eprintln!("schedule throughput...");
    schedule_throughput(&url, &mut conn, &mut rows).await;
    for (rate, seconds) in [(1_000u64, 3u64), (10_000, 1)] {
        for workers in [1usize, 4] {
            eprintln!("lateness at {rate} jobs/s, {workers} workers...");
            let ours = lateness_ours(&url, rate, seconds, workers).await;
            let poller = lateness_poller(&url, rate, seconds, workers).await;
            let cell = |l: Lateness| {
                format!(
                    "{:.1} / {:.1} ({} jobs, {} early)",
                    l.p50, l.p99, l.jobs, l.early
                )
            };
            rows.push(Row {
                what: format!("lateness p50 / p99 (ms), {rate} jobs/s, {workers} worker(s)"),
                ours: cell(ours),
                poller: cell(poller),
            });
        }
    }
    eprintln!("idle cost...");
    idle(&url, &mut conn, 100_000, 4, &mut rows).await;

    println!("| measure | tiered-timer-jobs | 100 ms poller |");
    println!("|---|---|---|");
    for row in rows {
        println!("| {} | {} | {} |", row.what, row.ours, row.poller);
    }
    println!();
    println!("(run took {:.0} s)", started.elapsed().as_secs_f64());
}
