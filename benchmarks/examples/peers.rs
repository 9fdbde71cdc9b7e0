//! Side by side with the crates a Rust user would pick instead, against
//! redis-servers this example starts itself: `tiered-timer-jobs`,
//! `rsmq_async` (RSMQ) and `apalis-redis` (apalis 1.0). Prints markdown
//! tables.
//!
//! ```sh
//! cargo run --release -p tiered-timer-benchmarks --example peers                  # full: 4-5 min
//! PEERS_QUICK=1 cargo run --release -p tiered-timer-benchmarks --example peers    # quick: < 2 min
//! cargo run --release -p tiered-timer-benchmarks --example peers -- --quick --only fleet
//! cargo run --release -p tiered-timer-benchmarks --example peers -- --help
//! ```
//!
//! Every knob below is an option too (`PEERS_RATE=100` is `--rate 100`).
//!
//! Workloads (each peer on a freshly flushed server, `FLUSHALL SYNC`):
//!
//! 1. **Lateness** at `PEERS_RATE` jobs/s (1 000) for `PEERS_LATENESS_SECS`
//!    (20; quick 5) with `PEERS_WORKERS` workers (4), each with its own
//!    connection. All jobs are scheduled ahead, due at `t0 + i / rate`, with
//!    32-byte payloads that carry the due time; lateness is the time a
//!    worker got the job minus that due time, on this machine's clock. Our
//!    queue decides "due" by Redis' `TIME`; the server runs on this host, so
//!    that is the same clock (`CLOCK_REALTIME`), and a negative lateness
//!    is an early delivery by the deciding clock.
//! 2. **Idle cost** with `PEERS_IDLE_JOBS` (100 000) jobs an hour out and the
//!    workers waiting: Redis commands/s (`INFO stats`
//!    `total_commands_processed`) and Redis CPU (`INFO cpu`
//!    `used_cpu_sys + used_cpu_user`) over `PEERS_IDLE_SECS` (15; quick 5),
//!    per worker, less the bench's own `INFO` and less an idle server's CPU
//!    measured the same way with no client.
//! 3. **Schedule throughput**, `PEERS_ONE_BY_ONE` (10 000; quick 2 000) jobs
//!    one call at a time, then `PEERS_MEMORY_JOBS` (1 000 000; quick 100 000)
//!    in calls of 1 000; then Redis `used_memory` growth per pending job.
//! 4. **Our queue on a 3-master Redis Cluster** with `partitions(3)` against
//!    one node: claim throughput (`PEERS_CLAIM_JOBS`, 20 000; quick 5 000,
//!    jobs due at once, claimed and acked by the workers) and lateness as
//!    in 1.
//! 5. **Commands per job as the fleet grows** (`fleet`): the run of
//!    workload 1, `PEERS_FLEET_SECS` (5; quick 3) long, with 1, 4 and 16
//!    workers (`PEERS_FLEET`, comma-separated), each with its own
//!    connection (our queue: each its own `Queue`, as separate processes
//!    would have): Redis commands per delivered job (`INFO stats`
//!    `total_commands_processed`, scripts' inner commands included).
//!
//! `PEERS_ONLY=schedule` (or `lateness`, `fleet`, `idle`, `cluster`, comma-separated)
//! runs only those workloads.
//!
//! The peers poll: `PEERS_POLL_MS` (100) between empty polls for both.
//! apalis-redis releases before 1.0 polled every 100 ms; apalis 1.0 has none
//! (without a poll strategy a worker re-fetches only at its 30 s heartbeat,
//! so `poll_with_interval` is what a user must add), and rsmq_async's own
//! `Worker` defaults to 1 s.

use clap::builder::FalseyValueParser;
use clap::Parser;
use tiered_timer_benchmarks::redis_support as support;
use tiered_timer_benchmarks::stats::quantile;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use apalis_core::backend::ext::BackendExt;
use apalis_core::backend::TaskSink;
use apalis_core::task::builder::TaskBuilder;
use apalis_core::worker::builder::WorkerBuilder;
use apalis_redis::{Config as ApalisConfig, RedisStorage};
use redis::aio::MultiplexedConnection;
use rsmq_async::{Rsmq, RsmqConnection};
use tiered_timer_jobs::Queue;

/// Every payload is this long, for every peer.
const PAYLOAD_LEN: usize = 32;
/// Jobs per batched call.
const BATCH: usize = 1_000;
/// "An hour out".
const HOUR: Duration = Duration::from_secs(3600);

/// The size of a run, from the command line or the environment.
#[derive(Debug, Clone)]
struct Scale {
    rate: u64,
    lateness_secs: u64,
    workers: usize,
    idle_jobs: u64,
    idle_secs: u64,
    one_by_one: u64,
    memory_jobs: u64,
    claim_jobs: u64,
    poll: Duration,
    /// Worker counts of the fleet workload.
    fleet: Vec<usize>,
    fleet_secs: u64,
    /// The workloads to run (`--only`; all by default).
    only: Option<String>,
}

/// `tiered-timer-jobs` side by side with rsmq_async and apalis-redis,
/// against redis-servers of its own: markdown tables.
#[derive(Parser, Debug)]
#[command(name = "peers")]
struct Args {
    /// The quick run: shorter windows and fewer jobs (each default below
    /// says its quick value).
    #[arg(long, env = "PEERS_QUICK", value_parser = FalseyValueParser::new())]
    quick: bool,
    /// The workloads to run, comma-separated: lateness, fleet, idle,
    /// schedule, cluster. All by default.
    #[arg(long, env = "PEERS_ONLY")]
    only: Option<String>,
    /// Jobs per second of the lateness and fleet runs.
    #[arg(long, env = "PEERS_RATE", default_value_t = 1_000)]
    rate: u64,
    /// Length of the lateness run, s [default: 20; quick 5].
    #[arg(long, env = "PEERS_LATENESS_SECS")]
    lateness_secs: Option<u64>,
    /// Workers of the lateness and idle runs, each with its own connection.
    #[arg(long, env = "PEERS_WORKERS", default_value_t = 4)]
    workers: usize,
    /// Jobs an hour out during the idle run.
    #[arg(long, env = "PEERS_IDLE_JOBS", default_value_t = 100_000)]
    idle_jobs: u64,
    /// Length of the idle window, s [default: 15; quick 5].
    #[arg(long, env = "PEERS_IDLE_SECS")]
    idle_secs: Option<u64>,
    /// Jobs scheduled one call at a time [default: 10 000; quick 2 000].
    #[arg(long, env = "PEERS_ONE_BY_ONE")]
    one_by_one: Option<u64>,
    /// Jobs scheduled in batches, then measured in Redis' memory
    /// [default: 1 000 000; quick 100 000].
    #[arg(long, env = "PEERS_MEMORY_JOBS")]
    memory_jobs: Option<u64>,
    /// Jobs due at once for the cluster's claim throughput
    /// [default: 20 000; quick 5 000].
    #[arg(long, env = "PEERS_CLAIM_JOBS")]
    claim_jobs: Option<u64>,
    /// The peers' pause between empty polls, ms.
    #[arg(long, env = "PEERS_POLL_MS", default_value_t = 100)]
    poll_ms: u64,
    /// Worker counts of the fleet workload, comma-separated.
    #[arg(
        long,
        env = "PEERS_FLEET",
        value_delimiter = ',',
        default_value = "1,4,16"
    )]
    fleet: Vec<usize>,
    /// Length of each fleet run, s [default: 5; quick 3].
    #[arg(long, env = "PEERS_FLEET_SECS")]
    fleet_secs: Option<u64>,
}

impl Scale {
    fn from_args(args: Args) -> Scale {
        let pick = |full: u64, quick: u64| if args.quick { quick } else { full };
        Scale {
            rate: args.rate,
            lateness_secs: args.lateness_secs.unwrap_or(pick(20, 5)),
            workers: args.workers,
            idle_jobs: args.idle_jobs,
            idle_secs: args.idle_secs.unwrap_or(pick(15, 5)),
            one_by_one: args.one_by_one.unwrap_or(pick(10_000, 2_000)),
            memory_jobs: args.memory_jobs.unwrap_or(pick(1_000_000, 100_000)),
            claim_jobs: args.claim_jobs.unwrap_or(pick(20_000, 5_000)),
            poll: Duration::from_millis(args.poll_ms),
            fleet: args.fleet,
            fleet_secs: args.fleet_secs.unwrap_or(pick(5, 3)),
            only: args.only,
        }
    }

    /// Whether workload `part` runs.
    fn runs(&self, part: &str) -> bool {
        self.only
            .as_deref()
            .is_none_or(|only| only.split(',').any(|p| p.trim() == part))
    }
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

/// A payload of [`PAYLOAD_LEN`] bytes: the due time in µs since the epoch,
/// zero-padded.
fn payload(due_us: u64) -> String {
    format!("{due_us:0width$}", width = PAYLOAD_LEN)
}

fn due_of(payload: &[u8]) -> u64 {
    std::str::from_utf8(payload)
        .ok()
        .and_then(|s| s.trim_matches('"').parse().ok())
        .expect("a payload made by `payload`")
}

/// The delay from now until `due_us`, rounded up to whole milliseconds
/// (every peer takes milliseconds or coarser), never negative.
fn delay_until(due_us: u64) -> Duration {
    Duration::from_millis(due_us.saturating_sub(now_us()).div_ceil(1000))
}

/// What the workers of one lateness run saw.
#[derive(Default)]
struct Deliveries {
    /// Signed lateness in µs (negative: early).
    lateness: Mutex<Vec<i64>>,
    count: AtomicU64,
    /// When the last job came, µs since the epoch.
    last_us: AtomicU64,
}

impl Deliveries {
    fn record(&self, payload: &[u8]) {
        let at = now_us() as i64;
        let due = due_of(payload) as i64;
        self.lateness.lock().unwrap().push(at - due);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.last_us.fetch_max(at as u64, Ordering::Relaxed);
    }

    /// Waits until `total` were delivered or `until` passes.
    async fn wait_for(&self, total: u64, until: Instant) {
        while self.count.load(Ordering::Relaxed) < total && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn summary(&self, expected: u64) -> Lateness {
        let mut l = self.lateness.lock().unwrap().clone();
        l.sort_unstable();
        let pick = |q: f64| quantile(&l, q).map_or(f64::NAN, |us| us as f64 / 1000.0);
        Lateness {
            p50: pick(0.5),
            p99: pick(0.99),
            max: pick(1.0),
            min: pick(0.0),
            delivered: l.len() as u64,
            expected,
            early: l.iter().filter(|&&x| x < 0).count(),
            commands_per_job: 0.0,
            cpu: 0.0,
            stalls: (0.0, 0.0),
        }
    }
}

/// A thread of its own that sleeps 1 ms at a time and records how much
/// longer each sleep took: how much the (shared) machine held this process
/// back while a lateness run went on. Not part of any queue.
struct Stalls {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Vec<u64>>,
}

impl Stalls {
    fn start() -> Stalls {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut over = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                let t = Instant::now();
                std::thread::sleep(Duration::from_millis(1));
                over.push((t.elapsed().as_micros() as u64).saturating_sub(1000));
            }
            over
        });
        Stalls { stop, thread }
    }

    /// p99 and max oversleep, ms.
    fn finish(self) -> (f64, f64) {
        self.stop.store(true, Ordering::Relaxed);
        let mut over = self.thread.join().unwrap();
        over.sort_unstable();
        let ms = |q: f64| quantile(&over, q).map_or(f64::NAN, |us| us as f64 / 1000.0);
        (ms(0.99), ms(1.0))
    }
}

/// Lateness in ms, and what the run cost Redis.
struct Lateness {
    p50: f64,
    p99: f64,
    max: f64,
    min: f64,
    delivered: u64,
    expected: u64,
    early: usize,
    /// Redis commands per delivered job.
    commands_per_job: f64,
    /// Redis CPU, % of a core, over the run.
    cpu: f64,
    /// This process held back: p99 and max oversleep of 1 ms sleeps.
    stalls: (f64, f64),
}

impl Lateness {
    fn cell(&self) -> String {
        let mut s = format!(
            "{:.1} / {:.1} / {:.1}; **{} early**",
            self.p50, self.p99, self.max, self.early
        );
        if self.early > 0 {
            s.push_str(&format!(" (up to {:.1} ms)", -self.min));
        }
        s.push_str(&format!(
            "; Redis {:.1} commands/job, {:.0} % CPU; host stalls p99 {:.1} / max {:.1}",
            self.commands_per_job, self.cpu, self.stalls.0, self.stalls.1
        ));
        if self.delivered != self.expected {
            s.push_str(&format!(
                "; {} of {} delivered",
                self.delivered, self.expected
            ));
        }
        s
    }
}

/// The end of every peer's lateness run: waits for the deliveries of `plan`
/// (due times in µs) to the workers that record into `sink`, watching
/// `watch`, until 10 s past the last due time at most, then stops the
/// workers.
async fn observe_plan(
    watch: &[String],
    plan: &[u64],
    sink: &Deliveries,
    workers: Vec<tokio::task::JoinHandle<()>>,
) -> Lateness {
    let until = Instant::now() + delay_until(*plan.last().unwrap()) + Duration::from_secs(10);
    let lateness = observe(watch, sink, plan.len() as u64, until).await;
    for worker in workers {
        worker.abort();
    }
    lateness
}

/// Waits for a lateness run's deliveries (and 200 ms more, to catch a
/// second delivery) while watching Redis (`INFO` on every node in `watch`,
/// added up) and the host's stalls.
async fn observe(watch: &[String], sink: &Deliveries, total: u64, until: Instant) -> Lateness {
    let mut conns = Vec::new();
    for url in watch {
        let client = redis::Client::open(url.as_str()).unwrap();
        let conn = client
            .get_multiplexed_async_connection_with_config(&patient())
            .await
            .unwrap();
        conns.push(conn);
    }
    // Commands and CPU over all nodes, less one INFO per node.
    async fn total_info(conns: &mut [MultiplexedConnection]) -> (u64, f64) {
        let mut sum = (0, 0.0);
        for conn in conns.iter_mut() {
            let i = info(conn).await;
            sum.0 += i.commands;
            sum.1 += i.cpu;
        }
        sum
    }
    let stalls = Stalls::start();
    let started = Instant::now();
    let before = total_info(&mut conns).await;
    sink.wait_for(total, until).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after = total_info(&mut conns).await;
    let secs = started.elapsed().as_secs_f64();
    let mut l = sink.summary(total);
    l.commands_per_job =
        (after.0 - before.0).saturating_sub(conns.len() as u64) as f64 / l.delivered.max(1) as f64;
    l.cpu = (after.1 - before.1) / secs * 100.0;
    l.stalls = stalls.finish();
    l
}

/// The due times of a lateness run: `rate` per second from `lead` after
/// now.
fn plan(scale: &Scale, lead: Duration) -> Vec<u64> {
    let n = scale.rate * scale.lateness_secs;
    let t0 = now_us() + lead.as_micros() as u64;
    (0..n).map(|i| t0 + i * 1_000_000 / scale.rate).collect()
}

/// How far ahead the first job of a lateness run is due: time enough to
/// schedule them all (checked: a run whose scheduling overran says so).
fn lead(scale: &Scale) -> Duration {
    Duration::from_millis(2_000 + scale.rate * scale.lateness_secs / 4)
}

fn check_scheduled_in_time(peer: &str, plan: &[u64]) {
    let late = now_us() as i64 - plan[0] as i64;
    if late > 0 {
        eprintln!(
            "  WARNING: {peer}: scheduling overran the first due time by {} ms; raise the lead",
            late / 1000
        );
    }
}

/// One `INFO stats cpu memory` reading.
#[derive(Debug, Clone, Copy)]
struct Info {
    commands: u64,
    cpu: f64,
    memory: u64,
}

async fn info(conn: &mut MultiplexedConnection) -> Info {
    let text: String = redis::cmd("INFO")
        .arg("stats")
        .arg("cpu")
        .arg("memory")
        .query_async(conn)
        .await
        .unwrap();
    let field = |name: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(':')))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} in INFO"))
    };
    Info {
        commands: field("total_commands_processed") as u64,
        cpu: field("used_cpu_sys") + field("used_cpu_user"),
        memory: field("used_memory") as u64,
    }
}

/// The response timeout of the peers' connections and of the bench's own:
/// redis-rs' default of 500 ms is too short for a `FLUSHALL` of a million
/// jobs or a 1 000-job batch on a loaded machine. (Ours: its
/// `command_timeout`, 5 s by default.)
const PATIENCE: Duration = Duration::from_secs(30);

fn patient() -> redis::AsyncConnectionConfig {
    redis::AsyncConnectionConfig::new()
        .set_response_timeout(Some(PATIENCE))
        .set_connection_timeout(Some(PATIENCE))
}

async fn flush(conn: &mut MultiplexedConnection) {
    let _: () = redis::cmd("FLUSHALL")
        .arg("SYNC")
        .query_async(conn)
        .await
        .unwrap();
    // Let the allocator settle before a memory baseline.
    tokio::time::sleep(Duration::from_millis(200)).await;
}

/// Commands/s and Redis CPU (percent of one core) over `window`, less the
/// reading's own INFO command.
async fn measure_window(conn: &mut MultiplexedConnection, window: Duration) -> (f64, f64) {
    let before = info(conn).await;
    tokio::time::sleep(window).await;
    let after = info(conn).await;
    let secs = window.as_secs_f64();
    let commands = (after.commands - before.commands).saturating_sub(1) as f64 / secs;
    let cpu = (after.cpu - before.cpu) / secs * 100.0;
    (commands, cpu)
}

// ---------------------------------------------------------------- ours

mod ours {
    use super::*;

    pub async fn connect(url: &str, name: &str, cluster: bool, partitions: u32) -> Queue {
        let mut builder = Queue::builder(url, name).partitions(partitions);
        if cluster {
            builder = builder.cluster();
        }
        builder.connect().await.unwrap()
    }

    /// Workers that claim, record and ack until aborted.
    pub async fn workers(
        url: &str,
        name: &str,
        cluster: bool,
        partitions: u32,
        n: usize,
        sink: Arc<Deliveries>,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        let mut queues = Vec::new();
        for _ in 0..n {
            queues.push(connect(url, name, cluster, partitions).await);
        }
        spawn_workers(queues, sink)
    }

    /// One worker per (connected) queue.
    pub fn spawn_workers(
        queues: Vec<Queue>,
        sink: Arc<Deliveries>,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        let mut handles = Vec::new();
        for queue in queues {
            let sink = sink.clone();
            handles.push(tokio::spawn(async move {
                loop {
                    let job = queue.next().await.unwrap();
                    sink.record(job.payload());
                    job.ack().await.unwrap();
                }
            }));
        }
        handles
    }

    /// A lateness run; `watch` are the Redis nodes whose commands and CPU
    /// count.
    pub async fn lateness(
        url: &str,
        watch: &[String],
        cluster: bool,
        partitions: u32,
        scale: &Scale,
    ) -> Lateness {
        let name = "peers-ours";
        let producer = connect(url, name, cluster, partitions).await;
        let plan = plan(scale, lead(scale));
        // `schedule_many_at` in calls of 1 000: the due time asked for is
        // exactly the payload's, however long a call takes.
        for chunk in plan.chunks(BATCH) {
            let jobs = chunk
                .iter()
                .map(|&due| (UNIX_EPOCH + Duration::from_micros(due), payload(due)));
            producer.schedule_many_at(jobs).await.unwrap();
        }
        check_scheduled_in_time("tiered-timer-jobs", &plan);
        let sink = Arc::new(Deliveries::default());
        let handles = workers(url, name, cluster, partitions, scale.workers, sink.clone()).await;
        observe_plan(watch, &plan, &sink, handles).await
    }

    /// Jobs/s claimed and acked by the workers, all due at once.
    pub async fn claim_throughput(url: &str, cluster: bool, partitions: u32, scale: &Scale) -> f64 {
        let name = "peers-claim";
        let producer = connect(url, name, cluster, partitions).await;
        let n = scale.claim_jobs;
        for start in (0..n).step_by(BATCH) {
            producer
                .schedule_many(
                    (start..(start + BATCH as u64).min(n)).map(|_| (Duration::ZERO, payload(0))),
                )
                .await
                .unwrap();
        }
        let sink = Arc::new(Deliveries::default());
        let mut queues = Vec::new();
        for _ in 0..scale.workers {
            queues.push(connect(url, name, cluster, partitions).await);
        }
        // From the workers' start (their connections are made) to the last
        // job's arrival, not to the wait's next 20 ms check.
        let started = now_us();
        let handles = spawn_workers(queues, sink.clone());
        sink.wait_for(n, Instant::now() + Duration::from_secs(120))
            .await;
        for h in handles {
            h.abort();
        }
        assert_eq!(sink.count.load(Ordering::Relaxed), n, "every job claimed");
        let elapsed_us = sink.last_us.load(Ordering::Relaxed).saturating_sub(started);
        n as f64 / (elapsed_us.max(1) as f64 / 1e6)
    }

    pub async fn schedule(url: &str, scale: &Scale) -> (f64, f64) {
        let queue = connect(url, "peers-ours", false, 1).await;
        let started = Instant::now();
        for _ in 0..scale.one_by_one {
            queue.schedule(HOUR, payload(0)).await.unwrap();
        }
        let one = scale.one_by_one as f64 / started.elapsed().as_secs_f64();
        let started = Instant::now();
        fill(&queue, scale.memory_jobs).await;
        let many = scale.memory_jobs as f64 / started.elapsed().as_secs_f64();
        (one, many)
    }

    pub async fn fill(queue: &Queue, n: u64) {
        for start in (0..n).step_by(BATCH) {
            let end = (start + BATCH as u64).min(n);
            queue
                .schedule_many((start..end).map(|_| (HOUR, payload(0))))
                .await
                .unwrap();
        }
    }
}

// ---------------------------------------------------------------- rsmq

mod rsmq {
    use super::*;

    pub const QUEUE: &str = "peers";

    pub async fn connect(url: &str) -> Rsmq {
        let client = redis::Client::open(url).unwrap();
        let conn = client
            .get_multiplexed_async_connection_with_config(&patient())
            .await
            .unwrap();
        Rsmq::new_with_connection(conn, false, None).await.unwrap()
    }

    pub async fn create(url: &str) -> Rsmq {
        let mut rsmq = connect(url).await;
        // Hidden 30 s after a receive (our lease), no queue-wide delay,
        // no size limit.
        rsmq.create_queue(QUEUE, Some(Duration::from_secs(30)), None, Some(-1))
            .await
            .unwrap();
        rsmq
    }

    /// Workers that receive, record and delete until aborted, sleeping
    /// `poll` after an empty receive (as rsmq_async's own `Worker` does).
    pub async fn workers(
        url: &str,
        n: usize,
        poll: Duration,
        sink: Arc<Deliveries>,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        let mut handles = Vec::new();
        for _ in 0..n {
            let mut rsmq = connect(url).await;
            let sink = sink.clone();
            handles.push(tokio::spawn(async move {
                loop {
                    match rsmq.receive_message::<Vec<u8>>(QUEUE, None).await.unwrap() {
                        Some(message) => {
                            sink.record(&message.message);
                            rsmq.delete_message(QUEUE, &message.id).await.unwrap();
                        }
                        None => tokio::time::sleep(poll).await,
                    }
                }
            }));
        }
        handles
    }

    pub async fn lateness(url: &str, scale: &Scale) -> Lateness {
        let rsmq = create(url).await;
        let plan = plan(scale, lead(scale));
        // Per-message delays exist only one message at a time
        // (`send_message_batch` takes one delay for the batch): eight
        // producers send in parallel.
        let plan_ref = Arc::new(plan.clone());
        let producers: Vec<_> = (0..8)
            .map(|p| {
                let mut rsmq = rsmq.clone();
                let plan = plan_ref.clone();
                tokio::spawn(async move {
                    for &due in plan.iter().skip(p).step_by(8) {
                        rsmq.send_message(QUEUE, payload(due), Some(delay_until(due)))
                            .await
                            .unwrap();
                    }
                })
            })
            .collect();
        for p in producers {
            p.await.unwrap();
        }
        check_scheduled_in_time("rsmq_async", &plan);
        let sink = Arc::new(Deliveries::default());
        let handles = workers(url, scale.workers, scale.poll, sink.clone()).await;
        observe_plan(&[url.to_owned()], &plan, &sink, handles).await
    }

    pub async fn schedule(url: &str, scale: &Scale) -> (f64, f64) {
        let mut rsmq = create(url).await;
        let started = Instant::now();
        for _ in 0..scale.one_by_one {
            rsmq.send_message(QUEUE, payload(0), Some(HOUR))
                .await
                .unwrap();
        }
        let one = scale.one_by_one as f64 / started.elapsed().as_secs_f64();
        let started = Instant::now();
        fill(&mut rsmq, scale.memory_jobs).await;
        let many = scale.memory_jobs as f64 / started.elapsed().as_secs_f64();
        (one, many)
    }

    pub async fn fill(rsmq: &mut Rsmq, n: u64) {
        for start in (0..n).step_by(BATCH) {
            let end = (start + BATCH as u64).min(n);
            let batch: Vec<String> = (start..end).map(|_| payload(0)).collect();
            rsmq.send_message_batch(QUEUE, batch, Some(HOUR))
                .await
                .unwrap();
        }
    }
}

// ---------------------------------------------------------------- apalis

mod apalis {
    use super::*;

    pub const QUEUE: &str = "peers";

    pub type Storage = RedisStorage<String>;

    pub async fn storage(url: &str) -> Storage {
        // As `apalis_redis::connect`, with the patient response timeout.
        let client = redis::Client::open(url).unwrap();
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_response_timeout(Some(PATIENCE))
            .set_connection_timeout(Some(PATIENCE));
        let conn = client
            .get_connection_manager_with_config(config)
            .await
            .unwrap();
        RedisStorage::new(conn).with_config(ApalisConfig::default().queue(QUEUE))
    }

    /// Workers (`WorkerBuilder` on `RedisStorage`, polled every `poll`)
    /// that record each job; apalis acks a job when its handler returns.
    pub async fn workers(
        url: &str,
        n: usize,
        poll: Duration,
        sink: Arc<Deliveries>,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        let mut handles = Vec::new();
        for i in 0..n {
            let backend = storage(url).await.poll_with_interval(poll);
            let sink = sink.clone();
            let worker = WorkerBuilder::new(format!("peers-worker-{i}"))
                .backend(backend)
                .build(move |job: String| {
                    let sink = sink.clone();
                    async move { sink.record(job.as_bytes()) }
                });
            handles.push(tokio::spawn(async move {
                let _ = worker.run().await;
            }));
        }
        handles
    }

    fn task_at(due_us: u64) -> apalis_core::task::Task<String> {
        // `run_at_time` is apalis' own call for "at this time"; it keeps
        // whole seconds (it truncates).
        TaskBuilder::new(payload(due_us))
            .run_at_time(UNIX_EPOCH + Duration::from_micros(due_us))
            .build()
    }

    pub async fn lateness(url: &str, scale: &Scale) -> Lateness {
        let mut producer = storage(url).await;
        let plan = plan(scale, lead(scale));
        for chunk in plan.chunks(BATCH) {
            let tasks: Vec<_> = chunk.iter().map(|&due| task_at(due)).collect();
            producer
                .push_all(futures_util::stream::iter(tasks))
                .await
                .unwrap();
        }
        check_scheduled_in_time("apalis-redis", &plan);
        let sink = Arc::new(Deliveries::default());
        let handles = workers(url, scale.workers, scale.poll, sink.clone()).await;
        observe_plan(&[url.to_owned()], &plan, &sink, handles).await
    }

    pub async fn schedule(url: &str, scale: &Scale) -> (f64, f64) {
        let mut storage = storage(url).await;
        let started = Instant::now();
        for _ in 0..scale.one_by_one {
            storage
                .push_task(TaskBuilder::new(payload(0)).run_after(HOUR).build())
                .await
                .unwrap();
        }
        let one = scale.one_by_one as f64 / started.elapsed().as_secs_f64();
        let started = Instant::now();
        fill(&mut storage, scale.memory_jobs).await;
        let many = scale.memory_jobs as f64 / started.elapsed().as_secs_f64();
        (one, many)
    }

    pub async fn fill(storage: &mut Storage, n: u64) {
        for start in (0..n).step_by(BATCH) {
            let end = (start + BATCH as u64).min(n);
            let tasks: Vec<_> = (start..end)
                .map(|_| TaskBuilder::new(payload(0)).run_after(HOUR).build())
                .collect();
            storage
                .push_all(futures_util::stream::iter(tasks))
                .await
                .unwrap();
        }
    }
}

// ---------------------------------------------------------------- main

/// Bytes per job of each of our queue's keys (`MEMORY USAGE`, every
/// element counted), to show where our memory goes.
async fn ours_memory_by_key(conn: &mut MultiplexedConnection) -> String {
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg("ttr:*")
        .query_async(conn)
        .await
        .unwrap();
    keys.sort();
    let mut jobs = 0u64;
    let mut parts = Vec::new();
    for key in &keys {
        let bytes: u64 = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(key)
            .arg("SAMPLES")
            .arg(0)
            .query_async(conn)
            .await
            .unwrap();
        if key.ends_with(":due") {
            jobs = redis::cmd("ZCARD")
                .arg(key)
                .query_async(conn)
                .await
                .unwrap();
        }
        parts.push((key.clone(), bytes));
    }
    parts
        .iter()
        .map(|(key, bytes)| format!("`{key}` {:.0}", *bytes as f64 / jobs.max(1) as f64))
        .collect::<Vec<_>>()
        .join(", ")
}

const PEERS: [&str; 3] = ["tiered-timer-jobs", "rsmq_async", "apalis-redis"];

/// One row of the main table: a cell per peer.
struct Row {
    what: String,
    cells: HashMap<&'static str, String>,
}

impl Row {
    fn new(what: impl Into<String>) -> Row {
        Row {
            what: what.into(),
            cells: HashMap::new(),
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let scale = Scale::from_args(Args::parse());
    let started = Instant::now();
    eprintln!("{scale:?}");
    let redis = support::Redis::start_own(&[]);
    let url = redis.url.clone();
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut admin = client
        .get_multiplexed_async_connection_with_config(&patient())
        .await
        .unwrap();
    let one = [url.clone()];
    let workers = scale.workers;
    let mut rows: Vec<Row> = Vec::new();

    if scale.runs("lateness") {
        // 1. Lateness, after a warm-up run of each peer (connections, script
        // caches, the runtime's threads) that is not counted.
        let warm_up = Scale {
            lateness_secs: 1,
            ..scale.clone()
        };
        for peer in PEERS {
            flush(&mut admin).await;
            eprintln!("warm-up: {peer}...");
            match peer {
                "tiered-timer-jobs" => ours::lateness(&url, &one, false, 1, &warm_up).await,
                "rsmq_async" => rsmq::lateness(&url, &warm_up).await,
                _ => apalis::lateness(&url, &warm_up).await,
            };
        }
        let mut row = Row::new(format!(
            "lateness p50 / p99 / max (ms), early deliveries; {} jobs/s for {} s, {workers} workers",
            scale.rate, scale.lateness_secs
        ));
        for peer in PEERS {
            flush(&mut admin).await;
            eprintln!("lateness: {peer}...");
            let l = match peer {
                "tiered-timer-jobs" => ours::lateness(&url, &one, false, 1, &scale).await,
                "rsmq_async" => rsmq::lateness(&url, &scale).await,
                _ => apalis::lateness(&url, &scale).await,
            };
            row.cells.insert(peer, l.cell());
        }
        rows.push(row);
    }

    if scale.runs("fleet") {
        // 5. Commands per job with 1, 4, 16 workers: the cost of a job
        // must not grow with the fleet.
        for &n in &scale.fleet {
            let fleet = Scale {
                workers: n,
                lateness_secs: scale.fleet_secs,
                ..scale.clone()
            };
            let mut row = Row::new(format!(
                "Redis commands per job, {n} worker(s); {} jobs/s for {} s",
                scale.rate, scale.fleet_secs
            ));
            for peer in PEERS {
                flush(&mut admin).await;
                eprintln!("fleet: {peer}, {n} worker(s)...");
                let l = match peer {
                    "tiered-timer-jobs" => ours::lateness(&url, &one, false, 1, &fleet).await,
                    "rsmq_async" => rsmq::lateness(&url, &fleet).await,
                    _ => apalis::lateness(&url, &fleet).await,
                };
                let mut cell = format!("{:.1}", l.commands_per_job);
                if l.delivered != l.expected {
                    cell.push_str(&format!(" ({} of {} delivered)", l.delivered, l.expected));
                }
                row.cells.insert(peer, cell);
            }
            rows.push(row);
        }
    }

    if scale.runs("idle") {
        // 2. Idle cost.
        flush(&mut admin).await;
        eprintln!("idle: a server with no client...");
        let window = Duration::from_secs(scale.idle_secs);
        let (_, base_cpu) = measure_window(&mut admin, window).await;
        let mut commands_row = Row::new(format!(
            "idle: Redis commands/s per worker; {} jobs an hour out, {workers} workers, {} s",
            scale.idle_jobs, scale.idle_secs
        ));
        let mut cpu_row = Row::new(format!(
            "idle: Redis CPU per worker (% of a core, less an idle server's {base_cpu:.2} %)"
        ));
        for peer in PEERS {
            flush(&mut admin).await;
            eprintln!("idle: {peer}...");
            let sink = Arc::new(Deliveries::default());
            let handles = match peer {
                "tiered-timer-jobs" => {
                    let queue = ours::connect(&url, "peers-ours", false, 1).await;
                    ours::fill(&queue, scale.idle_jobs).await;
                    ours::workers(&url, "peers-ours", false, 1, workers, sink.clone()).await
                }
                "rsmq_async" => {
                    let mut r = rsmq::create(&url).await;
                    rsmq::fill(&mut r, scale.idle_jobs).await;
                    rsmq::workers(&url, workers, scale.poll, sink.clone()).await
                }
                _ => {
                    let mut s = apalis::storage(&url).await;
                    apalis::fill(&mut s, scale.idle_jobs).await;
                    apalis::workers(&url, workers, scale.poll, sink.clone()).await
                }
            };
            // Past start-up (connections, script loads, worker registration).
            tokio::time::sleep(Duration::from_secs(1)).await;
            let (commands, cpu) = measure_window(&mut admin, window).await;
            for h in handles {
                h.abort();
            }
            assert_eq!(
                sink.count.load(Ordering::Relaxed),
                0,
                "{peer}: a job an hour out came out"
            );
            commands_row
                .cells
                .insert(peer, format!("{:.2}", commands / workers as f64));
            cpu_row.cells.insert(
                peer,
                format!("{:.3}", (cpu - base_cpu).max(0.0) / workers as f64),
            );
        }
        rows.push(commands_row);
        rows.push(cpu_row);
    }

    let mut memory_by_key = String::new();
    if scale.runs("schedule") {
        // 3. Schedule throughput and memory.
        let mut one_row = Row::new(format!(
            "schedule one by one, an hour out (jobs/s; {} sequential calls)",
            scale.one_by_one
        ));
        let mut many_row = Row::new(format!(
            "schedule batched, {BATCH} per call (jobs/s; {} jobs)",
            scale.memory_jobs
        ));
        let mut memory_row = Row::new(format!(
            "Redis memory per pending job (bytes; `used_memory` growth / {} jobs, {PAYLOAD_LEN}-byte payloads)",
            scale.one_by_one + scale.memory_jobs
        ));
        for peer in PEERS {
            flush(&mut admin).await;
            let before = info(&mut admin).await;
            eprintln!("schedule and memory: {peer}...");
            let (one, many) = match peer {
                "tiered-timer-jobs" => ours::schedule(&url, &scale).await,
                "rsmq_async" => rsmq::schedule(&url, &scale).await,
                _ => apalis::schedule(&url, &scale).await,
            };
            let after = info(&mut admin).await;
            if peer == "tiered-timer-jobs" {
                memory_by_key = ours_memory_by_key(&mut admin).await;
            }
            let per_job = (after.memory - before.memory) as f64
                / (scale.one_by_one + scale.memory_jobs) as f64;
            one_row.cells.insert(peer, format!("{one:.0}"));
            many_row.cells.insert(peer, format!("{many:.0}"));
            memory_row.cells.insert(peer, format!("{per_job:.0}"));
        }
        let batch_notes: HashMap<&str, &str> = [
            (
                "tiered-timer-jobs",
                " (`schedule_many`: one script per 1 000 jobs, a delay per job from one Redis now)",
            ),
            (
                "rsmq_async",
                " (`send_message_batch`: one script, one delay for the whole batch)",
            ),
            (
                "apalis-redis",
                " (`push_all`: one script per flush, a time per task)",
            ),
        ]
        .into();
        for (peer, note) in batch_notes {
            if let Some(cell) = many_row.cells.get_mut(peer) {
                cell.push_str(note);
            }
        }
        rows.push(one_row);
        rows.push(many_row);
        rows.push(memory_row);
        flush(&mut admin).await;
    }

    println!("Scale: {scale:?}\n");
    println!("| measure | {} |", PEERS.join(" | "));
    println!("|---|---|---|---|");
    for row in &rows {
        let cells: Vec<&str> = PEERS
            .iter()
            .map(|p| row.cells.get(p).map_or("n/a", String::as_str))
            .collect();
        println!("| {} | {} |", row.what, cells.join(" | "));
    }
    println!();
    if !memory_by_key.is_empty() {
        println!("Our memory per pending job by key (`MEMORY USAGE`): {memory_by_key}");
        println!();
    }

    if scale.runs("cluster") {
        // 4. Our queue: one node (one partition, then three) against a
        // 3-master cluster.
        let mut claims = Vec::new();
        let mut lateness = Vec::new();
        for partitions in [1, 3] {
            eprintln!("cluster: one node, {partitions} partition(s)...");
            claims.push(ours::claim_throughput(&url, false, partitions, &scale).await);
            flush(&mut admin).await;
            lateness.push(ours::lateness(&url, &one, false, partitions, &scale).await);
            flush(&mut admin).await;
        }
        drop(admin);
        drop(redis);
        eprintln!("cluster: three masters...");
        let cluster = support::Cluster::start(3);
        let nodes: Vec<String> = cluster.nodes.iter().map(|n| n.url.clone()).collect();
        claims.push(ours::claim_throughput(&cluster.url(), true, 3, &scale).await);
        lateness.push(ours::lateness(&cluster.url(), &nodes, true, 3, &scale).await);
        drop(cluster);
        println!(
            "| tiered-timer-jobs, {workers} workers | one node, `partitions(1)` | one node, `partitions(3)` | 3-master cluster, `partitions(3)` |"
        );
        println!("|---|---|---|---|");
        let claims: Vec<String> = claims.iter().map(|c| format!("{c:.0}")).collect();
        println!(
            "| claim + ack throughput (jobs/s; {} jobs due at once) | {} |",
            scale.claim_jobs,
            claims.join(" | ")
        );
        let lateness: Vec<String> = lateness.iter().map(Lateness::cell).collect();
        println!(
            "| lateness p50 / p99 / max (ms), early; {} jobs/s for {} s | {} |",
            scale.rate,
            scale.lateness_secs,
            lateness.join(" | ")
        );
    }

    println!();
    println!("(run took {:.0} s)", started.elapsed().as_secs_f64());
}
