//! What only the Postgres backend promises, against a real Postgres each
//! test starts (tests/support/postgres.rs): jobs written and acked in
//! the caller's transaction (rolled back, committed, killed in the
//! middle), no polling and no herd (counted in the server's statement
//! log), faults for real (the server restarted under load, a connection
//! frozen by a proxy), the database's clock against a client an hour
//! ahead (libfaketime), the schema created once and never by a look, and
//! a schema written by version 1 migrated with its jobs readable.
//! The delivery contract itself runs on Postgres in tests/contract.rs.

mod support;

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use support::postgres::PostgresServer;
use support::{eventually, TcpProxy};
use tiered_timer_jobs::{find_queues, Error, JobId, Queue};

const WAIT: Duration = Duration::from_secs(30);

/// The text every claim statement has, once (its first CTE).
const CLAIM: &str = "expired AS MATERIALIZED";

async fn queue(url: &str, lease: Duration) -> Queue {
    Queue::builder(url, "orders")
        .lease(lease)
        .connect()
        .await
        .expect("connect")
}

/// Starts a worker task that records every job it gets and acks it.
fn recording_worker(queue: Queue, seen: Arc<Mutex<Vec<JobId>>>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            match queue.next().await {
                Ok(job) => {
                    seen.lock().unwrap().push(job.id().clone());
                    let _ = job.ack().await;
                }
                // A claim that failed (the server restarting, a frozen
                // link) is the caller's to retry.
                Err(Error::Closed) => return,
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    })
}

/// Waits until the server's log shows the handle listening and claiming.
async fn until_waiting(server: &PostgresServer) {
    eventually("the worker listens and has claimed", WAIT, || {
        let log = server.log();
        async move { log.contains("LISTEN") && log.contains(CLAIM) }
    })
    .await;
    // Its first claim's reply is in: it sleeps now.
    tokio::time::sleep(Duration::from_millis(300)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_scheduled_in_a_rolled_back_transaction_never_existed_and_woke_nobody() {
    let server = PostgresServer::start_with(&["log_statement=all"]);
    let queue = queue(&server.url(), Duration::from_secs(30)).await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let worker = recording_worker(queue.clone(), seen.clone());
    until_waiting(&server).await;
    let pool = server.pool().await;

    let claims_before = server.statements_with(CLAIM);
    let mut tx = pool.begin().await.unwrap();
    let id = queue
        .within(&mut *tx)
        .schedule(Duration::ZERO, b"never".to_vec())
        .await
        .unwrap();
    // Not committed: nobody sees it, nobody is woken.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(queue.pending().await.unwrap(), 0);
    tx.rollback().await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(queue.job(&id).await.unwrap(), None, "the job never existed");
    assert!(seen.lock().unwrap().is_empty());
    assert_eq!(
        server.statements_with(CLAIM),
        claims_before,
        "a rolled-back job woke a worker"
    );

    // Committed: the waiting worker learns of it at the commit.
    let mut tx = pool.begin().await.unwrap();
    let id = queue
        .within(&mut *tx)
        .schedule_with_id("order-7", Duration::ZERO, b"kept".to_vec())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        seen.lock().unwrap().is_empty(),
        "delivered before its commit"
    );
    tx.commit().await.unwrap();
    eventually("delivered after the commit", WAIT, || {
        let n = seen.lock().unwrap().len();
        async move { n == 1 }
    })
    .await;
    assert_eq!(seen.lock().unwrap()[0], id);

    // A cancel in a transaction counts only if it commits.
    let later = queue
        .schedule(Duration::from_secs(3600), b"later".to_vec())
        .await
        .unwrap();
    let mut tx = pool.begin().await.unwrap();
    assert!(queue.within(&mut *tx).cancel(&later).await.unwrap());
    tx.rollback().await.unwrap();
    assert_eq!(queue.pending().await.unwrap(), 1);
    let mut conn = server.connect().await;
    assert!(queue.within(&mut conn).cancel(&later).await.unwrap());
    assert_eq!(queue.pending().await.unwrap(), 0);
    worker.abort();
}

async fn effects(server: &PostgresServer) -> i64 {
    server.number("SELECT count(*) FROM effects").await
}

async fn create_effects(server: &PostgresServer) {
    let mut conn = server.connect().await;
    sqlx::query("CREATE TABLE IF NOT EXISTS effects (job text PRIMARY KEY)")
        .execute(&mut conn)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ack_within_commits_the_effect_and_the_ack_together_or_neither() {
    let server = PostgresServer::start();
    create_effects(&server).await;
    let pool = server.pool().await;
    let lease = Duration::from_secs(1);
    let queue = queue(&server.url(), lease).await;
    let id = queue.schedule(Duration::ZERO, b"x".to_vec()).await.unwrap();

    // Rolled back: neither the effect nor the ack.
    let job = queue.next().await.unwrap();
    let mut tx = pool.begin().await.unwrap();
    sqlx::query("INSERT INTO effects VALUES ($1)")
        .bind(job.id().as_str())
        .execute(&mut *tx)
        .await
        .unwrap();
    job.ack_within(&mut *tx).await.unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(effects(&server).await, 0);
    assert_eq!(queue.leased().await.unwrap(), 1, "the job is still leased");

    // It comes back after its lease; this time both commit.
    let job = tokio::time::timeout(WAIT, queue.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!((job.id(), job.attempt()), (&id, 2));
    let mut tx = pool.begin().await.unwrap();
    sqlx::query("INSERT INTO effects VALUES ($1)")
        .bind(job.id().as_str())
        .execute(&mut *tx)
        .await
        .unwrap();
    job.ack_within(&mut *tx).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(effects(&server).await, 1);
    assert_eq!(queue.job(&id).await.unwrap(), None);

    // A lease taken over: the ack is refused, and the caller rolls back.
    let id = queue.schedule(Duration::ZERO, b"y".to_vec()).await.unwrap();
    let first = queue.next().await.unwrap();
    let other = Queue::builder(&server.url(), "orders")
        .lease(Duration::from_secs(30))
        .connect()
        .await
        .unwrap();
    let second = tokio::time::timeout(WAIT, other.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(second.id(), &id);
    let mut tx = pool.begin().await.unwrap();
    assert!(matches!(
        first.ack_within(&mut *tx).await,
        Err(Error::LeaseExpired { .. })
    ));
    tx.rollback().await.unwrap();
    assert_eq!(
        other.leased().await.unwrap(),
        1,
        "the new delivery holds it"
    );
    second.ack().await.unwrap();

    // On another backend, `within` says it is Postgres'.
    let dir = support::backend::TempDir::new("within");
    let embedded = Queue::connect(&format!("file://{}", dir.0.display()), "orders")
        .await
        .unwrap();
    let refused = embedded
        .within(&pool)
        .schedule(Duration::ZERO, b"z".to_vec())
        .await;
    assert!(
        matches!(
            refused,
            Err(Error::Unsupported {
                setting: "within",
                backend: "embedded"
            })
        ),
        "{refused:?}"
    );
}

// A worker process SIGKILLed between its `ack_within` and its commit: the
// server rolls the transaction back when the connection drops, so the
// effect is not there and the job comes back after its lease.
#[test]
fn a_worker_killed_inside_ack_within_leaves_neither_the_effect_nor_the_ack() {
    let server = PostgresServer::start();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let lease = Duration::from_secs(2);
    let (queue, id) = runtime.block_on(async {
        create_effects(&server).await;
        let queue = queue(&server.url(), lease).await;
        let id = queue.schedule(Duration::ZERO, b"x".to_vec()).await.unwrap();
        (queue, id)
    });
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "killed_worker", "--nocapture"])
        .env("TTR_TEST_POSTGRES_URL", server.url())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let mut acked = false;
    for line in stdout.lines() {
        if line.unwrap().contains("ACKED INSIDE THE TRANSACTION") {
            acked = true;
            break;
        }
    }
    assert!(acked, "the child never reached its ack");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    runtime.block_on(async {
        assert_eq!(effects(&server).await, 0, "the effect rolled back");
        let job = tokio::time::timeout(WAIT, queue.next())
            .await
            .unwrap()
            .unwrap();
        assert_eq!((job.id(), job.attempt()), (&id, 2));
        job.ack().await.unwrap();
    });
}

/// The child's part: claims, writes an effect and acks in one
/// transaction, says so, and waits to be killed before committing.
#[tokio::test]
#[ignore = "run by a_worker_killed_inside_ack_within_leaves_neither_the_effect_nor_the_ack"]
async fn killed_worker() {
    let url = std::env::var("TTR_TEST_POSTGRES_URL").expect("run by the kill test");
    let queue = queue(&url, Duration::from_secs(2)).await;
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    let job = queue.next().await.unwrap();
    let mut tx = pool.begin().await.unwrap();
    sqlx::query("INSERT INTO effects VALUES ($1)")
        .bind(job.id().as_str())
        .execute(&mut *tx)
        .await
        .unwrap();
    job.ack_within(&mut *tx).await.unwrap();
    println!("ACKED INSIDE THE TRANSACTION");
    tokio::time::sleep(Duration::from_secs(3600)).await;
    tx.commit().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_worker_sends_only_its_health_check_and_one_job_costs_one_claim() {
    let server = PostgresServer::start_with(&["log_statement=all"]);
    let health = Duration::from_secs(2);
    let queue = Queue::builder(&server.url(), "orders")
        .health_check(health)
        .connect()
        .await
        .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    // Eight workers on one handle, as a service runs them.
    let workers: Vec<_> = (0..8)
        .map(|_| recording_worker(queue.clone(), seen.clone()))
        .collect();
    until_waiting(&server).await;

    let (claims, checks) = (
        server.statements_with(CLAIM),
        server.statements_with("SELECT 1"),
    );
    let idle = Duration::from_secs(6);
    tokio::time::sleep(idle).await;
    let idle_claims = server.statements_with(CLAIM) - claims;
    let idle_checks = server.statements_with("SELECT 1") - checks;
    assert_eq!(idle_claims, 0, "an idle worker claimed");
    // One check every three quarters of health_check: 4 in 6 s.
    assert!(
        (1..=5).contains(&idle_checks),
        "{idle_checks} health checks in {idle:?}"
    );

    let claims = server.statements_with(CLAIM);
    queue
        .schedule(Duration::from_millis(200), b"one".to_vec())
        .await
        .unwrap();
    eventually("delivered", WAIT, || {
        let n = seen.lock().unwrap().len();
        async move { n == 1 }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let job_claims = server.statements_with(CLAIM) - claims;
    // One claim takes it (and, at most, one more if its notification came
    // while a claim was in flight); never one per waiting worker.
    assert!(
        (1..=2).contains(&job_claims),
        "{job_claims} claims for one job with 8 workers waiting"
    );
    for worker in workers {
        worker.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restarted_under_load_loses_nothing_and_workers_resume() {
    let mut server = PostgresServer::start();
    let url = server.url();
    let producer = queue(&url, Duration::from_secs(5)).await;
    let jobs: Vec<(Duration, Vec<u8>)> = (0..300u64)
        .map(|i| (Duration::from_millis(i * 10), i.to_string().into_bytes()))
        .collect();
    let ids: HashSet<JobId> = producer
        .schedule_many(jobs)
        .await
        .unwrap()
        .into_iter()
        .collect();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let seen = seen.clone();
            let url = url.clone();
            tokio::spawn(async move {
                let queue = Queue::builder(&url, "orders")
                    .lease(Duration::from_secs(5))
                    .command_timeout(Duration::from_secs(2))
                    .health_check(Duration::from_secs(1))
                    .connect()
                    .await
                    .unwrap();
                recording_worker(queue, seen).await.unwrap();
            })
        })
        .collect();
    eventually("some delivered", WAIT, || {
        let n = seen.lock().unwrap().len();
        async move { n >= 50 }
    })
    .await;
    server.stop();
    tokio::time::sleep(Duration::from_secs(1)).await;
    server.restart();
    eventually("every job delivered after the restart", WAIT * 2, || {
        let got: HashSet<JobId> = seen.lock().unwrap().iter().cloned().collect();
        let all = ids.is_subset(&got);
        async move { all }
    })
    .await;
    // Acked jobs are gone; one whose ack was cut by the restart may still
    // come back (at least once), and is acked then.
    eventually("the queue drains", WAIT, || {
        let producer = producer.clone();
        async move {
            let stats = producer.stats().await;
            stats.is_ok_and(|s| s.pending == 0 && s.leased == 0)
        }
    })
    .await;
    for worker in workers {
        worker.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_connection_is_noticed_within_the_health_check() {
    let server = PostgresServer::start_with(&["log_statement=all"]);
    let proxy = TcpProxy::start(server.port);
    let producer = queue(&server.url(), Duration::from_secs(30)).await;
    let health = Duration::from_secs(1);
    let through_proxy = format!("postgres://postgres@127.0.0.1:{}/postgres", proxy.port);
    let worker_queue = Queue::builder(&through_proxy, "orders")
        .health_check(health)
        .command_timeout(Duration::from_secs(2))
        .connect()
        .await
        .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let worker = recording_worker(worker_queue, seen.clone());
    until_waiting(&server).await;

    proxy.freeze();
    let frozen = Instant::now();
    let id = producer
        .schedule(Duration::from_secs(1), b"after the freeze".to_vec())
        .await
        .unwrap();
    eventually("delivered through a new connection", WAIT, || {
        let n = seen.lock().unwrap().len();
        async move { n >= 1 }
    })
    .await;
    assert_eq!(seen.lock().unwrap()[0], id);
    // Within health_check of the freeze the listener is replaced, and its
    // first claim takes the job; the margin is for a loaded machine and a
    // claim that first meets a frozen pooled connection (command timeout).
    let late = frozen.elapsed();
    assert!(
        late <= Duration::from_secs(1) + health + Duration::from_secs(6),
        "delivered {late:?} after the freeze"
    );
    proxy.thaw();
    worker.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_schema_is_created_once_by_handles_that_start_together_and_never_by_a_look() {
    let server = PostgresServer::start();
    let url = format!("{}?schema=shop_jobs", server.url());
    let schemas = "SELECT count(*) FROM pg_namespace WHERE nspname = 'shop_jobs'";

    // Looks write nothing: no schema, no queue.
    assert!(find_queues(&url, false, Duration::from_secs(5))
        .await
        .unwrap()
        .is_empty());
    let look = Queue::builder(&url, "orders")
        .register(false)
        .connect()
        .await;
    assert!(matches!(look, Err(Error::NoSuchQueue { .. })), "{look:?}");
    assert_eq!(server.number(schemas).await, 0, "a look created the schema");

    // Eight handles at once: one creates it, the others find it.
    let connects = (0..8).map(|i| {
        let url = url.clone();
        async move {
            Queue::connect(&url, &format!("queue-{}", i % 2))
                .await
                .map(|_| ())
        }
    });
    for connected in futures_util::future::join_all(connects).await {
        connected.unwrap();
    }
    assert_eq!(server.number(schemas).await, 1);
    // Each migration applied once (three: the jobs, recurrences, then
    // attempt histories and counts per minute).
    assert_eq!(
        server
            .number("SELECT count(*) FROM shop_jobs.schema_version")
            .await,
        3,
        "each migration applied once"
    );
    assert_eq!(
        server
            .number("SELECT count(DISTINCT version) FROM shop_jobs.schema_version")
            .await,
        3
    );
    let names: Vec<String> = find_queues(&url, false, Duration::from_secs(5))
        .await
        .unwrap()
        .into_iter()
        .map(|q| q.name)
        .collect();
    assert_eq!(names, ["queue-0", "queue-1"]);
    // The default schema was never touched.
    assert_eq!(
        server
            .number("SELECT count(*) FROM pg_namespace WHERE nspname = 'tiered_timer_jobs'")
            .await,
        0
    );
    // A schema that is no plain name is refused before anything is sent.
    let bad = Queue::connect(&format!("{}?schema=x;drop", server.url()), "orders").await;
    assert!(matches!(bad, Err(Error::InvalidUrl { .. })), "{bad:?}");
}

const LIBFAKETIME: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
    "/usr/local/lib/faketime/libfaketime.so.1",
];

// The producer and worker run in a child process (this binary again)
// whose clock libfaketime sets an hour ahead; Postgres runs on the true
// clock. Every job's due time counts from the database's clock, and none
// is claimed before it by that clock.
#[test]
fn a_client_an_hour_ahead_never_makes_a_job_early() {
    let faketime = LIBFAKETIME
        .iter()
        .find(|path| std::path::Path::new(path).exists())
        .unwrap_or_else(|| {
            panic!(
                "libfaketime not found (looked in {LIBFAKETIME:?}): this test shifts a client's \
                 clock with it. Install it with `apt-get install -y faketime`."
            )
        });
    let server = PostgresServer::start();
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "skewed_client", "--nocapture"])
        .env("LD_PRELOAD", faketime)
        .env("FAKETIME", "+1h")
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
        .env("TTR_TEST_POSTGRES_URL", server.url())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "skewed client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let skew: i64 = stdout
        .lines()
        .find_map(|line| line.strip_prefix("SKEW "))
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("no SKEW line in:\n{stdout}"));
    assert!(
        skew >= 3500,
        "libfaketime did not shift the clock:\n{stdout}"
    );
}

#[tokio::test]
#[ignore = "run by a_client_an_hour_ahead_never_makes_a_job_early in a child process"]
async fn skewed_client() {
    let url = std::env::var("TTR_TEST_POSTGRES_URL").expect("run by the skewed-clock test");
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    let db_now = || async {
        let row: (i64,) =
            sqlx::query_as("SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint")
                .fetch_one(&pool)
                .await
                .unwrap();
        row.0 as u64
    };
    let local = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    println!("SKEW {}", (local - db_now().await as i64) / 1000);
    let lease = Duration::from_secs(30);
    let queue = queue(&url, lease).await;
    let mut expected = Vec::new();
    for delay in [0u64, 200, 500] {
        let before = db_now().await;
        let id = queue
            .schedule(Duration::from_millis(delay), b"x".to_vec())
            .await
            .unwrap();
        expected.push((id, before + delay));
    }
    for _ in 0..expected.len() {
        let job = tokio::time::timeout(WAIT, queue.next())
            .await
            .unwrap()
            .unwrap();
        let (_, earliest) = expected.iter().find(|(id, _)| id == job.id()).unwrap();
        let deadline = job
            .deadline()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        assert!(
            deadline >= *earliest,
            "the delay counts from the database's now"
        );
        // Claimed at the lease's start, by the database's clock.
        let info = queue.job(job.id()).await.unwrap().unwrap();
        let expiry = info
            .lease_expiry
            .unwrap()
            .duration_since(UNIX_EPOCH)
            .unwrap();
        let claimed = expiry.as_millis() as u64 - lease.as_millis() as u64;
        assert!(
            claimed >= deadline,
            "claimed {claimed} before due {deadline}"
        );
        job.ack().await.unwrap();
    }
}

/// A schema at version 1 (before recurring jobs and attempt histories) is
/// brought to the latest version by the next handle that registers: its jobs kept, recurrences then
/// working; and a second handle changes nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_1_schema_is_migrated_with_its_jobs_kept() {
    let server = PostgresServer::start();
    let url = server.url();
    let queue = Queue::connect(&url, "orders").await.unwrap();
    queue
        .schedule_with_id("kept", Duration::from_secs(3600), "k")
        .await
        .unwrap();
    drop(queue);
    // Back to what version 1 created.
    let mut conn = server.connect().await;
    sqlx::raw_sql(
        "DROP TABLE tiered_timer_jobs.recurrences;
         DROP TABLE tiered_timer_jobs.throughput;
         DROP INDEX tiered_timer_jobs.jobs_chained;
         ALTER TABLE tiered_timer_jobs.jobs DROP COLUMN chain, DROP COLUMN created_ms,
           DROP COLUMN claimed_ms, DROP COLUMN holder, DROP COLUMN history;
         DELETE FROM tiered_timer_jobs.schema_version WHERE version >= 2;",
    )
    .execute(&mut conn)
    .await
    .unwrap();

    let queue = Queue::connect(&url, "orders").await.unwrap();
    let versions = "SELECT count(*) FROM tiered_timer_jobs.schema_version";
    assert_eq!(server.number(versions).await, 3);
    assert!(queue.job(&JobId::from("kept")).await.unwrap().is_some());
    let hourly = tiered_timer_jobs::Recurrence::every(Duration::from_secs(3600)).unwrap();
    assert!(queue.recur("hourly", hourly, "h").await.unwrap());
    assert_eq!(queue.pending().await.unwrap(), 2);
    Queue::connect(&url, "orders").await.unwrap();
    assert_eq!(server.number(versions).await, 3, "applied once");
}

/// The schema as version 1 of the crate created it (the text of its first
/// migration, `src/postgres/schema.rs`): a fixture of the old layout.
const VERSION_1: &str = "CREATE SCHEMA old_jobs;
    CREATE TABLE old_jobs.schema_version (version integer NOT NULL);
    INSERT INTO old_jobs.schema_version VALUES (1);
    CREATE TABLE old_jobs.jobs (
        queue text NOT NULL, id text NOT NULL, state smallint NOT NULL,
        at_ms bigint NOT NULL, deadline_ms bigint, attempts integer NOT NULL DEFAULT 0,
        token bigint, last_error text, payload bytea NOT NULL, PRIMARY KEY (queue, id));
    CREATE INDEX jobs_by_time ON old_jobs.jobs (queue, state, at_ms);
    CREATE TABLE old_jobs.queues (
        name text PRIMARY KEY, created_at timestamptz NOT NULL DEFAULT clock_timestamp());
    CREATE TABLE old_jobs.lateness (queue text NOT NULL, slot integer NOT NULL,
        bucket integer NOT NULL, count bigint NOT NULL, PRIMARY KEY (queue, slot, bucket));
    CREATE SEQUENCE old_jobs.tokens;
    INSERT INTO old_jobs.queues (name) VALUES ('orders');
    INSERT INTO old_jobs.lateness VALUES ('orders', 0, 0, 5);
    INSERT INTO old_jobs.jobs (queue, id, state, at_ms, deadline_ms, attempts, token, payload)
      VALUES ('orders', 'held', 1, 1, 1, 1, 7, 'x'), ('orders', 'waiting', 0, 1, NULL, 0, NULL, 'y');";

/// A schema written by version 1 (no history, holder, creation time or
/// counts per minute) is migrated by the first handle that registers
/// (once: a second connect applies nothing), its jobs read with nothing
/// recorded rather than failing, and they gain a history from then on;
/// its lateness counts are kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_1_schema_is_migrated_and_its_jobs_still_read() {
    let server = PostgresServer::start();
    let mut conn = server.connect().await;
    sqlx::raw_sql(VERSION_1).execute(&mut conn).await.unwrap();
    let url = format!("{}?schema=old_jobs", server.url());
    let queue = Queue::builder(&url, "orders")
        .lease(Duration::from_millis(200))
        .max_attempts(3)
        .holder("new-build")
        .connect()
        .await
        .unwrap();
    Queue::connect(&url, "orders").await.unwrap();
    assert_eq!(
        server
            .number("SELECT count(*) FROM old_jobs.schema_version")
            .await,
        3,
        "versions 2 and 3 applied once"
    );
    let held = queue.job(&JobId::from("held")).await.unwrap().unwrap();
    assert_eq!(held.attempts, 1);
    assert_eq!((held.created, held.holder.as_deref()), (None, None));
    assert!(held.history.is_empty(), "{:?}", held.history);
    assert_eq!(queue.lateness().await.unwrap().total(), 5);

    // Its lease ran out long ago: taken back (its attempt was not
    // recorded, so the history starts with this claim), then failed.
    let mut ids = Vec::new();
    for _ in 0..2 {
        let job = tokio::time::timeout(WAIT, queue.next())
            .await
            .unwrap()
            .unwrap();
        ids.push(job.id().as_str().to_owned());
        job.fail("boom").await.unwrap();
    }
    ids.sort();
    assert_eq!(ids, ["held", "waiting"]);
    for id in ["held", "waiting"] {
        let info = queue.job(&JobId::from(id)).await.unwrap().unwrap();
        let outcomes: Vec<String> = info.history.iter().map(|a| a.outcome.to_string()).collect();
        assert_eq!(outcomes, ["failed"], "{id}");
        assert_eq!(info.history[0].holder.as_deref(), Some("new-build"));
        assert_eq!(info.created, None, "{id} was scheduled by version 1");
    }
    let counted = queue
        .throughput(SystemTime::now() - Duration::from_secs(600))
        .await
        .unwrap();
    // The lease that ran out and the two failures.
    assert_eq!((counted.processed(), counted.failed()), (0, 3));
}
