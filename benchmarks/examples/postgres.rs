//! The Postgres backend against issue 36's targets and against the Rust
//! Postgres job queues a user would pick instead, `sqlxmq` 0.6 and
//! `underway` 0.2, each against a Postgres server of its own started
//! here (`benchmarks/src/pg_support.rs`: Debian's `postgresql`,
//! `fsync=off` for every queue alike). Prints one markdown table.
//!
//! ```sh
//! cargo run --release -p tiered-timer-benchmarks --example postgres                  # about 10 min
//! cargo run --release -p tiered-timer-benchmarks --example postgres -- --only claim  # one workload
//! cargo run --release -p tiered-timer-benchmarks --example postgres -- --help
//! ```
//!
//! Workloads (`--only`, comma-separated; all by default):
//!
//! 1. **idle**: `--idle-workers` (4) waiting workers, each on a queue
//!    handle of its own (as separate processes have), 1 000 jobs an hour
//!    out, for `--idle-secs` (60): statements the server ran
//!    (`log_statement=all`), per worker per second. The peers' runners
//!    wait the same way, with their defaults.
//! 2. **lateness** (ours): `--rate` (1 000) jobs/s for `--lateness-secs`
//!    (10), all scheduled ahead with `schedule_many_at`, 4 workers
//!    (`next` + `ack`); lateness is when a worker got the job minus its
//!    due time, by this host's clock, which is also the server's (it runs
//!    here): a negative one is an early delivery by the deciding clock.
//! 3. **claim**: `--claim-jobs` (50 000) jobs due at once, then claimed
//!    and acked by `--workers` (4) workers: ours `next_batch(64)` +
//!    `ack_many`, each worker its own handle; sqlxmq: 4 runners, each
//!    keeping 32 to 64 jobs in flight (`set_concurrency(32, 64)`, its
//!    batched poll), keep-alive off; underway: 4 workers, each with 64
//!    tasks in flight (`set_concurrency_limit(64)`). Jobs/s from the first
//!    claim to the last ack.
//! 4. **size**: `--size-jobs` (1 000 000) jobs through the queue with at
//!    most `--backlog` (10 000) waiting at once (a producer schedules
//!    1 000 at a time, due at once, as the workers of 3 drain them): the
//!    queue's tables and indexes (`pg_total_relation_size` of every table
//!    in its schema) after the last ack, and again after a plain `VACUUM`
//!    (what autovacuum does; `VACUUM FULL` would hide bloat).
//!
//! 32-byte payloads throughout.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use sqlx::postgres::PgPoolOptions;
use sqlx::{PgPool, Postgres as Pg, Transaction};
use tiered_timer_benchmarks::machine;
use tiered_timer_benchmarks::pg_support::Postgres;
use tiered_timer_benchmarks::stats::quantile;
use tiered_timer_jobs::Queue;

/// Every payload is this long, for every queue.
const PAYLOAD_LEN: usize = 32;
/// Jobs per claim (ours) and per batched call.
const CLAIM_BATCH: usize = 64;
const SCHEDULE_BATCH: usize = 1_000;
/// The queue every run uses.
const QUEUE: &str = "bench";

/// `tiered-timer-jobs` on Postgres against sqlxmq and underway.
#[derive(Parser, Debug)]
#[command(name = "postgres")]
struct Args {
    /// The workloads to run, comma-separated: idle, lateness, claim, size.
    #[arg(long, env = "PG_ONLY")]
    only: Option<String>,
    /// The queues to run, comma-separated: ours, sqlxmq, underway.
    #[arg(
        long,
        env = "PG_QUEUES",
        value_delimiter = ',',
        default_value = "ours,sqlxmq,underway"
    )]
    queues: Vec<String>,
    /// Workers of the lateness, claim and size runs.
    #[arg(long, env = "PG_WORKERS", default_value_t = 4)]
    workers: usize,
    /// Waiting workers of the idle run.
    #[arg(long, env = "PG_IDLE_WORKERS", default_value_t = 4)]
    idle_workers: usize,
    /// Length of the idle window, s.
    #[arg(long, env = "PG_IDLE_SECS", default_value_t = 60)]
    idle_secs: u64,
    /// Jobs per second of the lateness run.
    #[arg(long, env = "PG_RATE", default_value_t = 1_000)]
    rate: u64,
    /// Length of the lateness run, s.
    #[arg(long, env = "PG_LATENESS_SECS", default_value_t = 10)]
    lateness_secs: u64,
    /// Jobs due at once for the claim throughput.
    #[arg(long, env = "PG_CLAIM_JOBS", default_value_t = 50_000)]
    claim_jobs: u64,
    /// Jobs through the queue before its size is measured.
    #[arg(long, env = "PG_SIZE_JOBS", default_value_t = 1_000_000)]
    size_jobs: u64,
    /// Jobs through underway before its size is measured: it claims a
    /// few hundred a second here, so 1 000 000 would take an hour.
    #[arg(long, env = "PG_UNDERWAY_SIZE_JOBS", default_value_t = 100_000)]
    underway_size_jobs: u64,
    /// Server settings of the size run, `name=value`, repeatable
    /// (`--size-setting autovacuum_naptime=5s`).
    #[arg(long, env = "PG_SIZE_SETTINGS", value_delimiter = ',')]
    size_setting: Vec<String>,
    /// Most jobs waiting at once during the size run.
    #[arg(long, env = "PG_BACKLOG", default_value_t = 10_000)]
    backlog: u64,
}

impl Args {
    fn runs(&self, part: &str) -> bool {
        self.only
            .as_deref()
            .is_none_or(|only| only.split(',').any(|p| p.trim() == part))
    }
}

/// The queues measured.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Ours,
    Sqlxmq,
    Underway,
}

impl Kind {
    fn parse(name: &str) -> Kind {
        match name.trim() {
            "ours" => Kind::Ours,
            "sqlxmq" => Kind::Sqlxmq,
            "underway" => Kind::Underway,
            other => panic!("no queue named {other:?}: ours, sqlxmq or underway"),
        }
    }

    fn label(self) -> &'static str {
        match self {
            Kind::Ours => "tiered-timer-jobs",
            Kind::Sqlxmq => "sqlxmq 0.6",
            Kind::Underway => "underway 0.2",
        }
    }

    /// The schemas its tables are in.
    fn schema(self) -> &'static str {
        match self {
            Kind::Ours => "tiered_timer_jobs",
            Kind::Sqlxmq => "public",
            Kind::Underway => "underway",
        }
    }
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

/// A payload of [`PAYLOAD_LEN`] bytes: the due time in µs since the epoch,
/// zero-padded (0 where nobody measures lateness).
fn payload(due_us: u64) -> String {
    format!("{due_us:0width$}", width = PAYLOAD_LEN)
}

/// What the workers of one run did: jobs acked, and their lateness.
#[derive(Default)]
struct Sink {
    acked: AtomicU64,
    lateness_us: Mutex<Vec<i64>>,
}

impl Sink {
    fn done(&self, n: u64) {
        self.acked.fetch_add(n, Ordering::Relaxed);
    }

    fn acked(&self) -> u64 {
        self.acked.load(Ordering::Relaxed)
    }

    /// Waits until `total` are acked; panics after `limit`.
    async fn wait_for(&self, total: u64, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.acked() < total {
            assert!(
                Instant::now() < deadline,
                "only {} of {total} acked within {limit:?}",
                self.acked()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

async fn pool(server: &Postgres, size: u32) -> PgPool {
    PgPoolOptions::new()
        .max_connections(size)
        .connect(&server.url())
        .await
        .expect("connect to the benchmark's Postgres")
}

// ---------------------------------------------------------------- ours

async fn ours(server: &Postgres) -> Queue {
    Queue::builder(&server.url(), QUEUE)
        .connect()
        .await
        .expect("our queue")
}

/// Our workers: `next_batch` + `ack_many`, each on a handle of its own.
async fn our_workers(server: &Postgres, workers: usize, sink: &Arc<Sink>) -> Vec<Worker> {
    let mut spawned = Vec::new();
    for _ in 0..workers {
        let queue = ours(server).await;
        let sink = sink.clone();
        spawned.push(Worker::Task(tokio::spawn(async move {
            loop {
                let jobs = queue.next_batch(CLAIM_BATCH).await.expect("claim");
                let n = jobs.len() as u64;
                queue.ack_many(jobs).await.expect("ack");
                sink.done(n);
            }
        })));
    }
    spawned
}

// ---------------------------------------------------------------- sqlxmq

/// sqlxmq's tables and functions: its own migration files, which its
/// README says to copy into the application's migrations, read from
/// cargo's copy of the crate's sources (not vendored here).
async fn sqlxmq_migrate(pool: &PgPool) {
    let home = std::env::var("CARGO_HOME")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| {
            std::path::PathBuf::from(std::env::var("HOME").unwrap()).join(".cargo")
        });
    let dir = std::fs::read_dir(home.join("registry/src"))
        .expect("cargo's registry sources")
        .flatten()
        .map(|index| index.path().join("sqlxmq-0.6.0/migrations"))
        .find(|dir| dir.exists())
        .expect("sqlxmq 0.6.0's sources in cargo's registry (cargo fetch)");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".up.sql"))
        .collect();
    files.sort();
    for file in files {
        let sql = std::fs::read_to_string(&file).unwrap();
        sqlx::raw_sql(&sql)
            .execute(pool)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    }
}

async fn sqlxmq_workers(pool: &PgPool, workers: usize, sink: &Arc<Sink>) -> Vec<Worker> {
    let mut spawned = Vec::new();
    for _ in 0..workers {
        let sink = sink.clone();
        let handle = sqlxmq::JobRunnerOptions::new(pool, move |mut job| {
            let sink = sink.clone();
            tokio::spawn(async move {
                job.complete().await.expect("complete");
                sink.done(1);
            });
        })
        .set_concurrency(32, 64)
        .set_keep_alive(false)
        .run()
        .await
        .expect("sqlxmq runner");
        spawned.push(Worker::Sqlxmq(handle));
    }
    spawned
}

async fn sqlxmq_schedule(pool: &PgPool, n: u64, delay: Duration) {
    let mut tasks = tokio::task::JoinSet::new();
    let next = Arc::new(AtomicU64::new(0));
    for _ in 0..16 {
        let pool = pool.clone();
        let next = next.clone();
        tasks.spawn(async move {
            while next.fetch_add(1, Ordering::Relaxed) < n {
                let body = payload(0);
                sqlxmq::JobBuilder::new("bench")
                    .set_raw_bytes(body.as_bytes())
                    .set_delay(delay)
                    .spawn(&pool)
                    .await
                    .expect("sqlxmq spawn");
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
}

// ---------------------------------------------------------------- underway

/// underway's task: counts itself done.
struct Counted(Arc<Sink>);

impl underway::Task for Counted {
    type Input = String;
    type Output = ();

    async fn execute(
        &self,
        _tx: Transaction<'_, Pg>,
        _input: String,
    ) -> underway::task::Result<()> {
        self.0.done(1);
        Ok(())
    }
}

async fn underway_queue(pool: &PgPool) -> Arc<underway::Queue<Counted>> {
    Arc::new(
        underway::Queue::builder()
            .name(QUEUE)
            .pool(pool.clone())
            .build()
            .await
            .expect("underway queue"),
    )
}

/// underway's tasks in flight per worker: `UNDERWAY_CONCURRENCY`, else
/// its default (the cores).
fn underway_concurrency() -> usize {
    std::env::var("UNDERWAY_CONCURRENCY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(machine::cores)
}

async fn underway_workers(pool: &PgPool, workers: usize, sink: &Arc<Sink>) -> Vec<Worker> {
    let queue = underway_queue(pool).await;
    let mut spawned = Vec::new();
    for _ in 0..workers {
        let mut worker = underway::Worker::new(queue.clone(), Counted(sink.clone()));
        worker.set_concurrency_limit(underway_concurrency());
        spawned.push(Worker::Task(tokio::spawn(async move {
            worker.run().await.expect("underway worker");
        })));
    }
    spawned
}

async fn underway_schedule(
    queue: &underway::Queue<Counted>,
    pool: &PgPool,
    n: u64,
    delay: Option<Duration>,
) {
    let task = Counted(Arc::new(Sink::default()));
    let mut left = n;
    while left > 0 {
        let chunk = left.min(SCHEDULE_BATCH as u64);
        match delay {
            None => {
                let inputs: Vec<String> = (0..chunk).map(|_| payload(0)).collect();
                queue
                    .enqueue_multi(pool, &task, &inputs)
                    .await
                    .expect("underway enqueue");
            }
            Some(delay) => {
                for _ in 0..chunk {
                    let span = jiff::Span::new().milliseconds(delay.as_millis() as i64);
                    queue
                        .enqueue_after(pool, &task, &payload(0), span)
                        .await
                        .expect("underway enqueue");
                }
            }
        }
        left -= chunk;
    }
}

// ---------------------------------------------------------------- any queue

/// A running worker of any queue, stopped on drop.
enum Worker {
    Task(tokio::task::JoinHandle<()>),
    #[allow(dead_code)] // held for its Drop, which stops the runner
    Sqlxmq(sqlxmq::JobRunnerHandle),
}

impl Drop for Worker {
    fn drop(&mut self) {
        if let Worker::Task(task) = self {
            task.abort();
        }
    }
}

/// A server for one queue's run, its schema created (ours by its first
/// connect, the peers' by their migrations).
async fn server_for(kind: Kind, settings: &[&str]) -> (Postgres, PgPool) {
    let server = Postgres::start(settings);
    let pool = pool(&server, 40).await;
    match kind {
        Kind::Ours => drop(ours(&server).await),
        Kind::Sqlxmq => sqlxmq_migrate(&pool).await,
        Kind::Underway => underway::run_migrations(&pool)
            .await
            .expect("underway migrations"),
    }
    (server, pool)
}

async fn workers(
    kind: Kind,
    server: &Postgres,
    pool: &PgPool,
    n: usize,
    sink: &Arc<Sink>,
) -> Vec<Worker> {
    match kind {
        Kind::Ours => our_workers(server, n, sink).await,
        Kind::Sqlxmq => sqlxmq_workers(pool, n, sink).await,
        Kind::Underway => underway_workers(pool, n, sink).await,
    }
}

/// What schedules a run's jobs: one handle for the whole run.
enum Producer {
    Ours(Queue),
    Sqlxmq(PgPool),
    Underway(Arc<underway::Queue<Counted>>, PgPool),
}

impl Producer {
    async fn new(kind: Kind, server: &Postgres, pool: &PgPool) -> Producer {
        match kind {
            Kind::Ours => Producer::Ours(ours(server).await),
            Kind::Sqlxmq => Producer::Sqlxmq(pool.clone()),
            Kind::Underway => Producer::Underway(underway_queue(pool).await, pool.clone()),
        }
    }

    /// Schedules `n` jobs due at once (or after `delay`), 1 000 per call
    /// where the queue has a batched call (sqlxmq has none: 16 tasks
    /// spawn one each).
    async fn schedule(&self, n: u64, delay: Duration) {
        match self {
            Producer::Ours(queue) => {
                let mut left = n;
                while left > 0 {
                    let chunk = left.min(SCHEDULE_BATCH as u64);
                    queue
                        .schedule_many((0..chunk).map(|_| (delay, payload(0))))
                        .await
                        .expect("schedule");
                    left -= chunk;
                }
            }
            Producer::Sqlxmq(pool) => sqlxmq_schedule(pool, n, delay).await,
            Producer::Underway(queue, pool) => {
                underway_schedule(queue, pool, n, (!delay.is_zero()).then_some(delay)).await
            }
        }
    }
}

// ---------------------------------------------------------------- workloads

/// Statements per waiting worker per second.
async fn idle(kind: Kind, args: &Args) -> f64 {
    let (server, pool) = server_for(kind, &["log_statement=all"]).await;
    Producer::new(kind, &server, &pool)
        .await
        .schedule(1_000, Duration::from_secs(3600))
        .await;
    let sink = Arc::new(Sink::default());
    let running = workers(kind, &server, &pool, args.idle_workers, &sink).await;
    // Let every worker settle into its wait.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = server.statements();
    tokio::time::sleep(Duration::from_secs(args.idle_secs)).await;
    let after = server.statements();
    drop(running);
    (after - before) as f64 / args.idle_secs as f64 / args.idle_workers as f64
}

/// Ours: lateness p50, p99, max (ms) and how many were early.
async fn lateness(args: &Args) -> (f64, f64, f64, usize, u64) {
    let (server, _pool) = server_for(Kind::Ours, &[]).await;
    let sink = Arc::new(Sink::default());
    let mut running = Vec::new();
    for _ in 0..args.workers {
        let queue = ours(&server).await;
        let sink = sink.clone();
        running.push(Worker::Task(tokio::spawn(async move {
            loop {
                let job = queue.next().await.expect("claim");
                let at = now_us() as i64;
                let due: i64 = std::str::from_utf8(job.payload()).unwrap().parse().unwrap();
                sink.lateness_us.lock().unwrap().push(at - due);
                job.ack().await.expect("ack");
                sink.done(1);
            }
        })));
    }
    let total = args.rate * args.lateness_secs;
    let lead = Duration::from_secs(3);
    let t0 = now_us() + lead.as_micros() as u64;
    let queue = ours(&server).await;
    let dues: Vec<u64> = (0..total).map(|i| t0 + i * 1_000_000 / args.rate).collect();
    for chunk in dues.chunks(SCHEDULE_BATCH) {
        queue
            .schedule_many_at(
                chunk
                    .iter()
                    .map(|&us| (UNIX_EPOCH + Duration::from_micros(us), payload(us))),
            )
            .await
            .expect("schedule");
    }
    assert!(now_us() < t0, "scheduling overran the first due time");
    sink.wait_for(total, lead + Duration::from_secs(args.lateness_secs + 30))
        .await;
    drop(running);
    let mut l = sink.lateness_us.lock().unwrap().clone();
    l.sort_unstable();
    let ms = |q: f64| quantile(&l, q).map_or(f64::NAN, |us| us as f64 / 1000.0);
    let early = l.iter().filter(|&&x| x < 0).count();
    (ms(0.5), ms(0.99), ms(1.0), early, total)
}

/// Claim + ack, jobs/s.
async fn claim(kind: Kind, args: &Args) -> f64 {
    let (server, pool) = server_for(kind, &[]).await;
    Producer::new(kind, &server, &pool)
        .await
        .schedule(args.claim_jobs, Duration::ZERO)
        .await;
    let sink = Arc::new(Sink::default());
    let started = Instant::now();
    let running = workers(kind, &server, &pool, args.workers, &sink).await;
    sink.wait_for(args.claim_jobs, Duration::from_secs(600))
        .await;
    let secs = started.elapsed().as_secs_f64();
    drop(running);
    args.claim_jobs as f64 / secs
}

/// Tables and indexes of a queue's schema: (total, of which indexes),
/// bytes.
async fn size(pool: &PgPool, schema: &str) -> (i64, i64) {
    sqlx::query_as(
        "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint,
                coalesce(sum(pg_indexes_size(c.oid)), 0)::bigint
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE c.relkind = 'r' AND n.nspname = $1",
    )
    .bind(schema)
    .fetch_one(pool)
    .await
    .expect("sizes")
}

/// Adds a row to the table, and shows it at once on stderr (a long run
/// shows what it has).
fn push(results: &mut Vec<(String, Vec<String>)>, row: (String, Vec<String>)) {
    eprintln!("  {}: {}", row.0, row.1.join(" | "));
    results.push(row);
}

/// What a size run found: sizes after the last ack and after `VACUUM`,
/// live rows left, autovacuum runs, and the run's jobs/s.
struct Sizes {
    after: (i64, i64),
    vacuumed: (i64, i64),
    rows: i64,
    autovacuums: i64,
    rate: f64,
}

/// Jobs through `kind`'s size run.
fn size_jobs(kind: Kind, args: &Args) -> u64 {
    match kind {
        Kind::Underway => args.underway_size_jobs.min(args.size_jobs),
        _ => args.size_jobs,
    }
}

async fn size_run(kind: Kind, args: &Args) -> Sizes {
    let total = size_jobs(kind, args);
    let settings: Vec<&str> = args.size_setting.iter().map(String::as_str).collect();
    let (server, pool) = server_for(kind, &settings).await;
    let sink = Arc::new(Sink::default());
    let started = Instant::now();
    let running = workers(kind, &server, &pool, args.workers, &sink).await;
    let producer = Producer::new(kind, &server, &pool).await;
    let mut scheduled = 0;
    while scheduled < total {
        if scheduled - sink.acked() + SCHEDULE_BATCH as u64 > args.backlog {
            tokio::time::sleep(Duration::from_millis(2)).await;
            continue;
        }
        let chunk = (total - scheduled).min(SCHEDULE_BATCH as u64);
        producer.schedule(chunk, Duration::ZERO).await;
        scheduled += chunk;
    }
    sink.wait_for(total, Duration::from_secs(3600)).await;
    let rate = total as f64 / started.elapsed().as_secs_f64();
    drop(running);
    let after = size(&pool, kind.schema()).await;
    let (rows, autovacuums): (i64, i64) = sqlx::query_as(
        "SELECT coalesce(sum(n_live_tup), 0)::bigint, coalesce(sum(autovacuum_count), 0)::bigint
         FROM pg_stat_user_tables WHERE schemaname = $1",
    )
    .bind(kind.schema())
    .fetch_one(&pool)
    .await
    .expect("table stats");
    sqlx::raw_sql("VACUUM")
        .execute(&pool)
        .await
        .expect("vacuum");
    let vacuumed = size(&pool, kind.schema()).await;
    Sizes {
        after,
        vacuumed,
        rows,
        autovacuums,
        rate,
    }
}

fn mib(bytes: i64) -> String {
    format!("{:.1}", bytes as f64 / (1024.0 * 1024.0))
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let kinds: Vec<Kind> = args.queues.iter().map(|q| Kind::parse(q)).collect();
    let load_before = machine::load_average();
    let mut results: Vec<(String, Vec<String>)> = Vec::new();
    if args.runs("idle") {
        let mut row = Vec::new();
        for &kind in &kinds {
            eprintln!("idle: {}", kind.label());
            row.push(format!("{:.3}", idle(kind, &args).await));
        }
        push(
            &mut results,
            (
                format!(
                    "idle: statements/s per waiting worker ({} workers, {} s; target ≤ 0.1)",
                    args.idle_workers, args.idle_secs
                ),
                row,
            ),
        );
    }
    if args.runs("lateness") {
        eprintln!("lateness: {}", Kind::Ours.label());
        let (p50, p99, max, early, total) = lateness(&args).await;
        let row = kinds
            .iter()
            .map(|&k| match k {
                Kind::Ours => {
                    format!("{p50:.2} / {p99:.2} / {max:.2}; **{early} early** of {total}")
                }
                _ => "not run".into(),
            })
            .collect();
        push(&mut results, (
            format!(
                "lateness p50 / p99 / max (ms), {} jobs/s for {} s, {} workers (target p99 ≤ 10, 0 early)",
                args.rate, args.lateness_secs, args.workers
            ),
            row,
        ));
    }
    if args.runs("claim") {
        let mut row = Vec::new();
        for &kind in &kinds {
            eprintln!("claim: {}", kind.label());
            row.push(format!("{:.0}", claim(kind, &args).await));
        }
        push(
            &mut results,
            (
                format!(
                "claim + ack, jobs/s: {} due at once, {} workers (target ≥ 2x the fastest peer)",
                args.claim_jobs, args.workers
            ),
                row,
            ),
        );
    }
    if args.runs("size") {
        let mut after = Vec::new();
        let mut vacuumed = Vec::new();
        let mut rates = Vec::new();
        for &kind in &kinds {
            eprintln!("size: {}", kind.label());
            let s = size_run(kind, &args).await;
            let jobs = size_jobs(kind, &args);
            let note = if jobs == args.size_jobs {
                String::new()
            } else {
                format!(" (after {jobs} jobs)")
            };
            after.push(format!(
                "{}{note} ({} of it indexes); {} rows left, {} autovacuums",
                mib(s.after.0),
                mib(s.after.1),
                s.rows,
                s.autovacuums
            ));
            vacuumed.push(format!("{} ({})", mib(s.vacuumed.0), mib(s.vacuumed.1)));
            rates.push(format!("{:.0}", s.rate));
        }
        let mut what = format!(
            "{} jobs through, at most {} waiting",
            args.size_jobs, args.backlog
        );
        if !args.size_setting.is_empty() {
            what.push_str(&format!(", server {}", args.size_setting.join(" ")));
        }
        push(
            &mut results,
            (format!("tables + indexes, MiB, after {what}"), after),
        );
        push(
            &mut results,
            ("the same after a plain `VACUUM`".into(), vacuumed),
        );
        push(
            &mut results,
            (format!("jobs/s of that run ({what})"), rates),
        );
    }
    let header: Vec<&str> = kinds.iter().map(|k| k.label()).collect();
    println!("| measure | {} |", header.join(" | "));
    println!("|---|{}", "---|".repeat(kinds.len()));
    for (name, row) in &results {
        println!("| {name} | {} |", row.join(" | "));
    }
    println!();
    println!(
        "{}, {}; load average before {load_before}, after {}",
        machine::describe(),
        machine::utc_date(),
        machine::load_average()
    );
}
