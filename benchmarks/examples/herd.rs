//! What a job costs Redis as the fleet grows (issue 25, targets 1 and 2).
//!
//! ```sh
//! cargo run --release -p tiered-timer-benchmarks --example herd
//! HERD_ONLY=flow,idle,burst HERD_SECS=5 HERD_BURST=50000 cargo run --release -p tiered-timer-benchmarks --example herd
//! cargo run --release -p tiered-timer-benchmarks --example herd -- --only burst --burst 20000   # the same knobs as options
//! cargo run --release -p tiered-timer-benchmarks --example herd -- --help
//! ```
//!
//! Every knob is an option, also read from the environment variable named
//! below (`HERD_SECS=5` is `--secs 5`).
//!
//! Against redis-servers it starts itself (a fresh one per measurement),
//! with every worker its own `Queue` (its own connections), as separate
//! processes would have:
//!
//! * **flow**: jobs come due at 1 000 and at 100 per second for
//!   `HERD_SECS` seconds (scheduled ahead with `schedule_many_at`, due
//!   times in the payload), on 1 and 3 partitions, with 1, 4 and 16
//!   workers that claim and ack (`next`, `ack`). Per cell: Redis commands
//!   per delivered job (`INFO stats` `total_commands_processed`, commands
//!   inside scripts and the scheduling included), lateness (delivery time
//!   minus due time, by this host's clock, which is also Redis'), Redis
//!   CPU; then the same run again with `MONITOR` on, counting the commands
//!   clients sent (not those scripts ran): round trips per job.
//! * **idle**: 100 000 jobs an hour out, 4 and 16 waiting workers, 15 s:
//!   commands per second per worker (health checks included).
//! * **burst**: `HERD_BURST` jobs due at once (on `HERD_BURST_PARTITIONS`
//!   partitions, default 1), 4 workers: claim + ack
//!   throughput with `next` + `ack`, with `prefetch(64)`, with
//!   `prefetch(64)` and `ack_batched`, with `ack_and_next`, with `next_batch(64)` + `ack`, and with
//!   `next_batch(64)` + `ack_many`; Redis commands and CPU per job, and
//!   this process' CPU per job. The workers are 4 `Queue`s (as 4
//!   processes) and then 4 tasks sharing one `Queue` (as one process;
//!   `HERD_SHAPES=apart` or `shared` for one of them); `HERD_MODES` picks
//!   modes (`NextAck,Prefetch,PrefetchBatched,AckAndNext,Batch,BatchAckMany`),
//!   `HERD_ROUNDS` repeats the table. With `HERD_BASELINE` (the
//!   `burst_baseline` example built at an older commit: see that file),
//!   each `next` + `ack` row is preceded by the same burst run by that
//!   build, against a fresh server of the same kind, in the same run.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::builder::FalseyValueParser;
use clap::{Parser, ValueEnum};
use tiered_timer_benchmarks::machine;
use tiered_timer_benchmarks::process_cpu;
use tiered_timer_benchmarks::redis_support::Redis as Server;
use tiered_timer_benchmarks::stats::quantile;
use tiered_timer_jobs::Queue;

/// What a job costs Redis as the fleet grows: the flow, idle and burst
/// tables, each against redis-servers of its own.
#[derive(Parser, Debug)]
#[command(name = "herd")]
struct Args {
    /// The parts to run, comma-separated: flow, idle, burst. All by
    /// default.
    #[arg(long, env = "HERD_ONLY", value_delimiter = ',')]
    only: Vec<Part>,
    /// Seconds of jobs per flow cell (its MONITOR rerun: at most 3).
    #[arg(long, env = "HERD_SECS", default_value_t = 5)]
    secs: u64,
    /// Runs only this flow cell: `rate,partitions,workers` (`1000,3,16`).
    #[arg(long, env = "HERD_CELL", value_delimiter = ',', num_args = 3)]
    cell: Vec<u64>,
    /// Jobs due at once in a burst.
    #[arg(long, env = "HERD_BURST", default_value_t = 50_000)]
    burst: u64,
    /// Partitions of the burst's queue.
    #[arg(long, env = "HERD_BURST_PARTITIONS", default_value_t = 1)]
    burst_partitions: u32,
    /// How many times the burst table is repeated.
    #[arg(long, env = "HERD_ROUNDS", default_value_t = 1)]
    rounds: u64,
    /// The burst modes to run, comma-separated (all by default).
    #[arg(long, env = "HERD_MODES", value_delimiter = ',')]
    modes: Vec<Mode>,
    /// The burst's worker shapes, comma-separated: apart (4 `Queue`s, as 4
    /// processes), shared (4 tasks sharing one `Queue`). Both by default.
    #[arg(long, env = "HERD_SHAPES", value_delimiter = ',')]
    shapes: Vec<Shape>,
    /// The `burst_baseline` example built at an older commit (see that
    /// file): each `next` + `ack` row of a one-partition burst is then
    /// preceded by the same burst run by that build.
    #[arg(long, env = "HERD_BASELINE")]
    baseline: Option<PathBuf>,
    /// Prints Redis' `INFO commandstats` after each burst.
    #[arg(long, env = "HERD_STATS", value_parser = FalseyValueParser::new())]
    stats: bool,
    /// Appends every command MONITOR counts in the flow cells to this file.
    #[arg(long, env = "HERD_MONITOR_DUMP")]
    monitor_dump: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Part {
    Flow,
    Idle,
    Burst,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Shape {
    Apart,
    Shared,
}

impl Args {
    fn runs(&self, part: Part) -> bool {
        self.only.is_empty() || self.only.contains(&part)
    }
}

fn now_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        * 1000.0
}

async fn queue(server: &Server, partitions: u32, prefetch: usize) -> Queue {
    Queue::builder(&server.url, "herd")
        .partitions(partitions)
        .prefetch(prefetch)
        .connect()
        .await
        .expect("connect")
}

/// Waits until `workers` clients block in BZPOPMIN (every worker waits).
async fn settle(server: &Server, workers: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let blocked = server
            .cli(&["CLIENT", "LIST"])
            .lines()
            .filter(|l| l.contains("cmd=bzpopmin"))
            .count();
        if blocked >= workers {
            return;
        }
        assert!(Instant::now() < deadline, "workers never waited");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    quantile(sorted, q).unwrap_or(f64::NAN)
}

struct Flow {
    commands_per_job: f64,
    round_trips_per_job: Option<f64>,
    p50: f64,
    p99: f64,
    max: f64,
    early: usize,
    cpu: f64,
}

/// One flow cell: `rate` jobs/s for `secs` s, `workers` workers, on
/// `partitions` partitions; with `round_trips`, counts client commands
/// with MONITOR (appending them to `dump`, if given).
async fn flow(
    rate: u64,
    secs: u64,
    workers: usize,
    partitions: u32,
    round_trips: bool,
    dump: Option<PathBuf>,
) -> Flow {
    let server = Server::start_own(&[]);
    let producer = queue(&server, partitions, 0).await;
    let lateness = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let queue = queue(&server, partitions, 0).await;
        let lateness = lateness.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                let Ok(job) = queue.next().await else {
                    continue;
                };
                let due: f64 = std::str::from_utf8(job.payload())
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0.0);
                lateness.lock().unwrap().push(now_ms() - due);
                let _ = job.ack().await;
            }
        }));
    }
    settle(&server, workers).await;
    let jobs = rate * secs;
    let monitor = round_trips.then(|| server.monitor(dump));
    let (c0, cpu0) = server.counters();
    let start = SystemTime::now() + Duration::from_millis(500);
    let step = Duration::from_secs(1) / rate as u32;
    for chunk in (0..jobs).collect::<Vec<_>>().chunks(1000) {
        producer
            .schedule_many_at(chunk.iter().map(|&i| {
                let at = start + step * i as u32;
                let due = at.duration_since(UNIX_EPOCH).unwrap().as_millis();
                (at, due.to_string())
            }))
            .await
            .expect("schedule");
    }
    let deadline = Instant::now() + Duration::from_secs(secs + 60);
    while (lateness.lock().unwrap().len() as u64) < jobs {
        assert!(Instant::now() < deadline, "jobs were not all delivered");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (c1, cpu1) = server.counters();
    let round_trips = monitor.map(|m| m.stop() as f64 / jobs as f64);
    for task in tasks {
        task.abort();
    }
    let mut late = lateness.lock().unwrap().clone();
    late.sort_by(|a, b| a.partial_cmp(b).unwrap());
    // Less our own INFO calls (four per `counters`: the first pair's are
    // counted in the second).
    let commands = c1 - c0 - 4.0;
    Flow {
        commands_per_job: commands / jobs as f64,
        round_trips_per_job: round_trips,
        p50: percentile(&late, 0.5),
        p99: percentile(&late, 0.99),
        max: late.last().copied().unwrap_or(f64::NAN),
        early: late.iter().filter(|&&l| l < 0.0).count(),
        cpu: (cpu1 - cpu0) / (secs as f64 + 0.8) * 100.0,
    }
}

/// Idle: 100 000 jobs an hour out, `workers` waiting; commands per second
/// per worker over `window`.
async fn idle(workers: usize, partitions: u32, window: Duration) -> f64 {
    let server = Server::start_own(&[]);
    let producer = queue(&server, partitions, 0).await;
    let hour = Duration::from_secs(3600);
    for _ in 0..100 {
        producer
            .schedule_many((0..1000).map(|_| (hour, "later")))
            .await
            .unwrap();
    }
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let queue = queue(&server, partitions, 0).await;
        tasks.push(tokio::spawn(async move {
            let _ = queue.next().await;
        }));
    }
    settle(&server, workers).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (c0, _) = server.counters();
    tokio::time::sleep(window).await;
    let (c1, _) = server.counters();
    for task in tasks {
        task.abort();
    }
    (c1 - c0 - 4.0) / window.as_secs_f64() / workers as f64
}

/// How the burst's workers take and ack jobs (`--modes` spells them as
/// here: `NextAck,Batch`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "PascalCase")]
enum Mode {
    NextAck,
    Prefetch,
    PrefetchBatched,
    AckAndNext,
    Batch,
    BatchAckMany,
}

/// What a burst measured: claim + ack throughput (jobs/s), Redis commands
/// per job, and CPU per job (µs) of Redis and of the workers' process.
struct Burst {
    rate: f64,
    commands: f64,
    redis_cpu: f64,
    own_cpu: f64,
}

/// Burst: `jobs` due at once on `partitions` partitions, 4 workers, each
/// its own `Queue` (as separate processes) or, if `shared`, 4 tasks
/// sharing one `Queue` (as one process).
async fn burst(jobs: u64, partitions: u32, mode: Mode, shared: bool, stats: bool) -> Burst {
    let server = Server::start_own(&[]);
    let prefetch = match mode {
        Mode::Prefetch | Mode::PrefetchBatched | Mode::AckAndNext => 64,
        _ => 0,
    };
    let producer = queue(&server, partitions, 0).await;
    for chunk in (0..jobs).collect::<Vec<_>>().chunks(1000) {
        producer
            .schedule_many(chunk.iter().map(|_| (Duration::ZERO, "x")))
            .await
            .unwrap();
    }
    let done = Arc::new(AtomicU64::new(0));
    let mut queues = Vec::new();
    if shared {
        let queue = queue(&server, partitions, prefetch).await;
        queues.resize(4, queue);
    } else {
        for _ in 0..4 {
            queues.push(queue(&server, partitions, prefetch).await);
        }
    }
    let (c0, cpu0) = server.counters();
    let own0 = process_cpu();
    let started = Instant::now();
    let mut tasks = Vec::new();
    let handles = queues.clone();
    for queue in queues {
        let done = done.clone();
        tasks.push(tokio::spawn(async move {
            match mode {
                Mode::NextAck | Mode::Prefetch => loop {
                    let job = queue.next().await.unwrap();
                    job.ack().await.unwrap();
                    done.fetch_add(1, Ordering::Relaxed);
                },
                // Counted when taken; the flushes below wait for the acks.
                Mode::PrefetchBatched => loop {
                    let job = queue.next().await.unwrap();
                    job.ack_batched();
                    done.fetch_add(1, Ordering::Relaxed);
                },
                Mode::AckAndNext => {
                    let mut job = queue.next().await.unwrap();
                    loop {
                        job = job.ack_and_next().await.unwrap();
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Mode::Batch => loop {
                    for job in queue.next_batch(64).await.unwrap() {
                        job.ack().await.unwrap();
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                },
                Mode::BatchAckMany => loop {
                    let jobs = queue.next_batch(64).await.unwrap();
                    let n = jobs.len() as u64;
                    assert!(queue.ack_many(jobs).await.unwrap().is_empty());
                    done.fetch_add(n, Ordering::Relaxed);
                },
            }
        }));
    }
    // The last job of ack_and_next is never acked (its loop waits on).
    let target = if matches!(mode, Mode::AckAndNext) {
        jobs - 4
    } else {
        jobs
    };
    while done.load(Ordering::Relaxed) < target {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    for queue in &handles {
        assert!(queue.flush_acks().await.unwrap().is_empty());
    }
    let took = started.elapsed().as_secs_f64();
    let own = (process_cpu() - own0).as_secs_f64();
    if stats {
        for line in server.cli(&["INFO", "commandstats"]).lines() {
            if line.starts_with("cmdstat_") {
                eprintln!("{mode:?} {line}");
            }
        }
    }
    let (c1, cpu1) = server.counters();
    for task in tasks {
        task.abort();
    }
    let per = |x: f64| x / target as f64 * 1e6;
    Burst {
        rate: target as f64 / took,
        commands: (c1 - c0 - 4.0) / target as f64,
        redis_cpu: per(cpu1 - cpu0),
        own_cpu: per(own),
    }
}

/// The same burst with `next` + `ack` run by another build of the crate
/// (`--baseline`: `burst_baseline` built at an older commit; see that
/// example), against a fresh server of ours. That build cannot know this
/// library's child protocol, so it keeps its own: settings in the
/// environment, `ready`, `go`, one line of results.
fn burst_baseline(binary: &PathBuf, jobs: u64, shared: bool) -> Burst {
    let server = Server::start_own(&[]);
    let mut child = Command::new(binary)
        .env("BURST_URL", &server.url)
        .env("BURST_JOBS", jobs.to_string())
        .env("BURST_WORKERS", "4")
        .env("BURST_SHARED", if shared { "1" } else { "0" })
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the HERD_BASELINE binary");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "ready");
    let (c0, cpu0) = server.counters();
    {
        use std::io::Write;
        writeln!(stdin, "go").unwrap();
    }
    let result = lines.next().unwrap().unwrap();
    let (c1, cpu1) = server.counters();
    let _ = child.wait();
    let mut fields = result.split_whitespace().map(|v| v.parse::<f64>().unwrap());
    let (took, own) = (fields.next().unwrap(), fields.next().unwrap());
    let per = |x: f64| x / jobs as f64 * 1e6;
    Burst {
        rate: jobs as f64 / took,
        commands: (c1 - c0 - 4.0) / jobs as f64,
        redis_cpu: per(cpu1 - cpu0),
        own_cpu: per(own),
    }
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let args = Args::parse();
    println!(
        "herd: {} cores, load average {}",
        machine::cores(),
        machine::load_average()
    );
    if args.runs(Part::Flow) {
        flow_table(&args).await;
    }
    if args.runs(Part::Idle) {
        println!("\nidle: 100 000 jobs an hour out, 15 s");
        println!("| workers | partitions | commands/s per worker |");
        println!("|---|---|---|");
        for (workers, partitions) in [(4, 1), (16, 1), (4, 3)] {
            let per = idle(workers, partitions, Duration::from_secs(15)).await;
            println!("| {workers} | {partitions} | {per:.3} |");
        }
    }
    if args.runs(Part::Burst) {
        burst_table(&args).await;
    }
}

/// The flow table: every cell (or `--cell`'s alone), then its MONITOR rerun.
async fn flow_table(args: &Args) {
    let secs = args.secs;
    println!("\nflow: {secs} s per cell, each worker its own Queue, next + ack");
    println!("| jobs/s, partitions | workers | commands/job | round trips/job | lateness p50 / p99 / max (ms) | early | Redis CPU |");
    println!("|---|---|---|---|---|---|---|");
    for rate in [1000, 100] {
        for partitions in [1, 3] {
            for workers in [1, 4, 16] {
                if !args.cell.is_empty()
                    && args.cell[..] != [rate, u64::from(partitions), workers as u64]
                {
                    continue;
                }
                let cell = flow(rate, secs, workers, partitions, false, None).await;
                let dump = args.monitor_dump.clone();
                let traced = flow(rate, secs.min(3), workers, partitions, true, dump).await;
                println!(
                    "| {rate}, {partitions} | {workers} | {:.1} | {:.2} | {:.1} / {:.1} / {:.1} | {} | {:.0} % |",
                    cell.commands_per_job,
                    traced.round_trips_per_job.unwrap_or(f64::NAN),
                    cell.p50,
                    cell.p99,
                    cell.max,
                    cell.early,
                    cell.cpu
                );
            }
        }
    }
}

/// The burst table, `--rounds` times.
async fn burst_table(args: &Args) {
    let jobs = args.burst;
    let partitions = args.burst_partitions;
    println!("\nburst: {jobs} jobs due at once, 4 workers, {partitions} partition(s); workers as 4 `Queue`s (4 processes) or as 4 tasks sharing one `Queue` (one process)");
    println!("| how | workers | claim + ack (jobs/s) | commands/job | Redis CPU/job (µs) | worker CPU/job (µs) |");
    println!("|---|---|---|---|---|---|");
    let row = |how: &str, shared: bool, b: &Burst| {
        let workers = if shared {
            "1 Queue, 4 tasks"
        } else {
            "4 Queues"
        };
        println!(
            "| {how} | {workers} | {:.0} | {:.1} | {:.1} | {:.1} |",
            b.rate, b.commands, b.redis_cpu, b.own_cpu
        );
    };
    for _ in 0..args.rounds {
        for (shared, shape) in [(false, Shape::Apart), (true, Shape::Shared)] {
            if !args.shapes.is_empty() && !args.shapes.contains(&shape) {
                continue;
            }
            for &mode in Mode::value_variants() {
                if !args.modes.is_empty() && !args.modes.contains(&mode) {
                    continue;
                }
                if let (Some(binary), Mode::NextAck, 1) = (&args.baseline, mode, partitions) {
                    row(
                        "next + ack, baseline build",
                        shared,
                        &burst_baseline(binary, jobs, shared),
                    );
                }
                let how = match mode {
                    Mode::NextAck => "next + ack",
                    Mode::Prefetch => "next + ack, prefetch(64)",
                    Mode::PrefetchBatched => "next + ack_batched, prefetch(64)",
                    Mode::AckAndNext => "ack_and_next, prefetch(64)",
                    Mode::Batch => "next_batch(64) + ack",
                    Mode::BatchAckMany => "next_batch(64) + ack_many",
                };
                let burst = burst(jobs, partitions, mode, shared, args.stats).await;
                row(how, shared, &burst);
            }
        }
    }
}
