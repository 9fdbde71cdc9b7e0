//! Recurring jobs, on both backends (a redis-server the test starts, and
//! an embedded store in a fresh directory): one job per occurrence from
//! eight handles registering the same recurrence, none early, none twice;
//! the missed-occurrence policies after a gap; replace, remove, pause and
//! resume; bad specs and zones; a process SIGKILLed while it holds an
//! occurrence. And simulated time on the embedded store: a month of a
//! daily recurrence across the March change, in milliseconds.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use support::backend::{Store, TempDir};
use tiered_timer_jobs::{
    Clock, Error, Job, JobId, LastRun, Missed, Queue, Recurrence, RecurrenceInfo,
};

const WAIT: Duration = Duration::from_secs(30);

fn ms(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn every_second() -> Recurrence {
    Recurrence::every(Duration::from_secs(1)).unwrap()
}

async fn next(queue: &Queue) -> Job {
    tokio::time::timeout(WAIT, queue.next())
        .await
        .expect("a job within the wait")
        .unwrap()
}

async fn only(queue: &Queue) -> RecurrenceInfo {
    let mut all = queue.recurrences().await.unwrap();
    assert_eq!(all.len(), 1, "{all:?}");
    all.pop().unwrap()
}

/// Runs each test body against Redis, the embedded store and (with the
/// `postgres` feature) Postgres.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod redis {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::Store::redis()).await
                }
            )*
        }
        mod embedded {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::Store::embedded()).await
                }
            )*
        }
        #[cfg(feature = "postgres")]
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::Store::postgres()).await
                }
            )*
        }
    };
}

on_both_backends!(
    eight_handles_registering_one_recurrence_get_one_job_per_occurrence,
    after_a_gap_each_policy_delivers_what_it_says,
    recur_replaces_and_unrecur_removes_the_waiting_occurrence,
    pause_and_resume,
    bad_specs_zones_and_names_are_errors_that_write_nothing,
    an_occurrence_keeps_a_history_like_any_job,
);

/// Eight handles (on Redis: eight connections, as eight processes would
/// have) register the same `every(1 s)` recurrence and work for about
/// ten seconds: each occurrence is one job, delivered once, never before
/// its time by the deciding clock, and none is missing.
async fn eight_handles_registering_one_recurrence_get_one_job_per_occurrence(store: Store) {
    let mut handles = Vec::new();
    for _ in 0..8 {
        handles.push(store.queue(Duration::from_secs(30), 3).await);
    }
    // Every handle registers, as every process of a fleet does at start-up.
    let registered = futures_join_all(handles.iter().map(|q| {
        let q = q.clone();
        async move {
            q.recur(
                "tick",
                every_second().missed(Missed::RunAll { max: 100 }),
                "t",
            )
            .await
            .unwrap()
        }
    }))
    .await;
    assert_eq!(registered.iter().filter(|&&changed| changed).count(), 1);

    let seen: Arc<Mutex<Vec<(JobId, u64, u64)>>> = Arc::default();
    let mut workers = Vec::new();
    for queue in &handles {
        let (queue, seen) = (queue.clone(), Arc::clone(&seen));
        let url_now = store_clock(&store);
        workers.push(tokio::spawn(async move {
            loop {
                let job = queue.next().await.unwrap();
                let now = url_now.now_ms().await;
                seen.lock()
                    .unwrap()
                    .push((job.id().clone(), ms(job.occurrence().unwrap()), now));
                job.ack().await.unwrap();
            }
        }));
    }
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) || seen.lock().unwrap().len() < 10 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(start.elapsed() < WAIT, "{:?}", seen.lock().unwrap());
    }
    for worker in workers {
        worker.abort();
    }
    let seen = seen.lock().unwrap().clone();
    let occurrences: BTreeSet<u64> = seen.iter().map(|&(_, at, _)| at).collect();
    assert_eq!(
        occurrences.len(),
        seen.len(),
        "an occurrence twice: {seen:?}"
    );
    for (id, at, now) in &seen {
        assert!(now >= at, "{id} delivered at {now}, before its time {at}");
        assert_eq!(id.as_str(), format!("tick@{}", iso(*at)));
    }
    let (first, last) = (*occurrences.first().unwrap(), *occurrences.last().unwrap());
    assert_eq!(
        occurrences.len() as u64,
        (last - first) / 1000 + 1,
        "one job per second from the first to the last: {occurrences:?}"
    );
    assert!(occurrences.len() >= 10, "{occurrences:?}");
}

/// No worker for five seconds, then one: `Skip` delivers none of the
/// missed occurrences, `RunOnce` one, `RunAll { max: 3 }` three (the
/// oldest), and each goes on at its next occurrence.
async fn after_a_gap_each_policy_delivers_what_it_says(store: Store) {
    let queue = store.queue(Duration::from_secs(30), 3).await;
    let clock = store_clock(&store);
    let registered = clock.now_ms().await;
    for (name, missed) in [
        ("skip", Missed::Skip),
        ("once", Missed::RunOnce),
        ("all", Missed::RunAll { max: 3 }),
    ] {
        queue
            .recur(name, every_second().missed(missed), name)
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(5_500)).await;
    let resumed = clock.now_ms().await;
    // Claim until every recurrence is back on time (an occurrence after
    // the gap).
    let mut got: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    while ["skip", "once", "all"].iter().any(|n| {
        !got.get(*n)
            .is_some_and(|v| v.iter().any(|&at| at > resumed))
    }) {
        let job = next(&queue).await;
        assert_eq!(job.payload(), job.recurrence().unwrap().as_bytes());
        got.entry(job.recurrence().unwrap().to_owned())
            .or_default()
            .push(ms(job.occurrence().unwrap()));
        job.ack().await.unwrap();
    }
    let missed = |name: &str| -> Vec<u64> {
        got[name]
            .iter()
            .copied()
            .filter(|&at| at <= resumed)
            .collect()
    };
    let first = (registered / 1000 + 1) * 1000;
    assert_eq!(missed("skip"), Vec::<u64>::new(), "{got:?}");
    assert_eq!(missed("once"), vec![first], "{got:?}");
    assert_eq!(
        missed("all"),
        vec![first, first + 1000, first + 2000],
        "{got:?}"
    );
}

/// `recur` with the same definition changes nothing; with another payload
/// or spec it replaces the waiting occurrence at once; `unrecur` removes
/// it; the waiting occurrence cannot be cancelled on its own.
async fn recur_replaces_and_unrecur_removes_the_waiting_occurrence(store: Store) {
    let queue = store.queue(Duration::from_secs(30), 3).await;
    let hourly = Recurrence::cron("0 0 * * * *").unwrap();
    assert!(queue.recur("report", hourly.clone(), "v1").await.unwrap());
    assert!(!queue.recur("report", hourly.clone(), "v1").await.unwrap());
    let info = only(&queue).await;
    assert_eq!(
        (info.spec.as_str(), info.time_zone.as_str()),
        ("0 0 * * * *", "UTC")
    );
    let first = info.next.unwrap();
    let id = JobId::from(format!("report@{}", iso(ms(first))));
    assert_eq!(queue.job(&id).await.unwrap().unwrap().payload, b"v1");
    assert_eq!(queue.pending().await.unwrap(), 1);
    // The chain's occurrence is not cancelled alone.
    assert!(!queue.cancel(&id).await.unwrap());

    // Another payload: the same occurrence, with the new payload.
    assert!(queue.recur("report", hourly.clone(), "v2").await.unwrap());
    assert_eq!(queue.job(&id).await.unwrap().unwrap().payload, b"v2");
    assert_eq!(queue.pending().await.unwrap(), 1);

    // Another spec: the old occurrence is gone before `recur` returns.
    let daily = Recurrence::cron("0 15 3 * * *")
        .unwrap()
        .time_zone("Europe/Berlin")
        .unwrap();
    assert!(queue.recur("report", daily.clone(), "v2").await.unwrap());
    assert_eq!(queue.job(&id).await.unwrap(), None);
    let info = only(&queue).await;
    assert_eq!(info.time_zone, "Europe/Berlin");
    assert_eq!(
        info.next,
        daily.next_after(
            SystemTime::UNIX_EPOCH + Duration::from_millis(store_clock(&store).now_ms().await)
        )
    );
    assert_eq!(queue.pending().await.unwrap(), 1);

    assert!(queue.unrecur("report").await.unwrap());
    assert!(!queue.unrecur("report").await.unwrap());
    assert!(queue.recurrences().await.unwrap().is_empty());
    assert_eq!(queue.pending().await.unwrap(), 0);
}

/// A paused recurrence has no waiting occurrence; resumed, it waits for
/// its next one after now. Its last run is reported from its job.
async fn pause_and_resume(store: Store) {
    let queue = store.queue(Duration::from_secs(30), 3).await;
    assert!(!queue.pause_recurrence("tick").await.unwrap());
    queue.recur("tick", every_second(), "t").await.unwrap();
    let job = next(&queue).await;
    let info = only(&queue).await;
    assert_eq!(info.last, job.occurrence());
    assert_eq!(info.last_run, Some(LastRun::Running));
    job.fail("no printer").await.unwrap();
    let info = only(&queue).await;
    assert_eq!(info.last_run, Some(LastRun::Retrying));
    assert_eq!(info.last_error.as_deref(), Some("no printer"));

    assert!(queue.pause_recurrence("tick").await.unwrap());
    let info = only(&queue).await;
    assert!(info.paused);
    assert_eq!(info.next, None);
    // Registering it again (a restart) keeps the operator's pause.
    assert!(!queue.recur("tick", every_second(), "t").await.unwrap());
    assert!(only(&queue).await.paused);
    assert!(queue.resume_recurrence("tick").await.unwrap());
    let info = only(&queue).await;
    assert!(!info.paused);
    assert!(info.next.unwrap() > info.last.unwrap());
}

/// An occurrence is an ordinary job to an operator too: created by the
/// store, held by the handle that claimed it, its attempts kept (the
/// claim of an occurrence is its own statement on Postgres, which once
/// recorded neither).
async fn an_occurrence_keeps_a_history_like_any_job(store: Store) {
    let queue = store.queue(Duration::from_secs(30), 3).await;
    queue.recur("tick", every_second(), "t").await.unwrap();
    let job = next(&queue).await;
    let id = job.id().clone();
    let held = queue.job(&id).await.unwrap().expect("the occurrence");
    assert!(held.created.is_some(), "{held:?}");
    assert!(held.holder.is_some(), "{held:?}");
    job.fail("no printer").await.unwrap();
    let info = queue
        .job(&id)
        .await
        .unwrap()
        .expect("the occurrence, retried");
    assert_eq!(info.history.len(), 1, "{info:?}");
    let attempt = &info.history[0];
    assert_eq!(attempt.outcome.to_string(), "failed");
    assert_eq!(attempt.holder, held.holder);
    assert_eq!(attempt.error.as_deref(), Some("no printer"));
}

/// Bad specs and zones are typed errors when the recurrence is built;
/// bad names and policies when it is registered; nothing is written.
async fn bad_specs_zones_and_names_are_errors_that_write_nothing(store: Store) {
    let queue = store.queue(Duration::from_secs(30), 3).await;
    for spec in ["", "0 0 25 * * *", "* * * *", "0 0 0 30 2 *", "@often"] {
        assert!(
            matches!(Recurrence::cron(spec), Err(Error::InvalidRecurrence { .. })),
            "{spec:?}"
        );
    }
    assert!(matches!(
        Recurrence::every(Duration::from_millis(500)),
        Err(Error::InvalidRecurrence { .. })
    ));
    assert!(matches!(
        every_second().time_zone("Europe/Atlantis"),
        Err(Error::InvalidTimeZone { .. })
    ));
    for (name, missed) in [
        ("", Missed::RunOnce),
        ("x\ny", Missed::RunOnce),
        ("ok", Missed::RunAll { max: 0 }),
        ("ok", Missed::RunAll { max: 10_001 }),
    ] {
        let error = queue
            .recur(name, every_second().missed(missed), "p")
            .await
            .unwrap_err();
        assert!(matches!(error, Error::InvalidRecurrence { .. }), "{error}");
    }
    let too_long = "n".repeat(257);
    assert!(matches!(
        queue.recur(&too_long, every_second(), "p").await,
        Err(Error::InvalidRecurrence { .. })
    ));
    assert!(matches!(
        queue
            .recur("big", every_second(), vec![0u8; 600 * 1024])
            .await,
        Err(Error::PayloadTooLarge { .. })
    ));
    // Occurrences' ids are the recurrences' own.
    assert!(matches!(
        queue
            .schedule_with_id("x@2026-03-29T01:00:00Z", Duration::ZERO, "p")
            .await,
        Err(Error::InvalidJobId { .. })
    ));
    assert!(queue.recurrences().await.unwrap().is_empty());
    assert_eq!(queue.pending().await.unwrap(), 0);
}

/// The deciding clock of a store, usable from a task.
#[derive(Clone)]
enum StoreClock {
    Redis(String),
    Host,
    Postgres(String),
}

impl StoreClock {
    async fn now_ms(&self) -> u64 {
        match self {
            StoreClock::Redis(url) => support::redis_now_ms(url).await,
            StoreClock::Host => ms(SystemTime::now()),
            StoreClock::Postgres(url) => {
                use sqlx::{Connection, Row};
                let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
                let now = "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint";
                let row = sqlx::query(now).fetch_one(&mut conn).await.unwrap();
                row.get::<i64, _>(0) as u64
            }
        }
    }
}

fn store_clock(store: &Store) -> StoreClock {
    match store {
        Store::Redis(server) => StoreClock::Redis(server.url()),
        Store::Embedded(_) => StoreClock::Host,
        Store::Postgres(server) => StoreClock::Postgres(server.url()),
    }
}

/// An occurrence id's time part.
fn iso(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    let frac = ms % 1000;
    let whole = format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    );
    if frac == 0 {
        format!("{whole}Z")
    } else {
        format!("{whole}.{frac:03}Z")
    }
}

/// Days since 1970-01-01 as a civil date (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Runs the futures as tasks, at once; their outputs in order.
async fn futures_join_all<F>(futures: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let tasks: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::new();
    for task in tasks {
        out.push(task.await.unwrap());
    }
    out
}

// Simulated time (the embedded store, `Builder::clock`).

/// An RFC 3339 UTC time.
fn at(text: &str) -> SystemTime {
    let (date, time) = text.trim_end_matches('Z').split_once('T').unwrap();
    let d: Vec<i64> = date.split('-').map(|p| p.parse().unwrap()).collect();
    let t: Vec<u64> = time.split(':').map(|p| p.parse().unwrap()).collect();
    // Days from civil (Howard Hinnant's algorithm).
    let (y, m) = if d[1] <= 2 {
        (d[0] - 1, d[1] + 9)
    } else {
        (d[0], d[1] - 3)
    };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + d[2] - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = (era * 146_097 + doe - 719_468) as u64;
    SystemTime::UNIX_EPOCH + Duration::from_secs(days * 86_400 + t[0] * 3600 + t[1] * 60 + t[2])
}

/// 31 days of `0 30 2 * * *` in Europe/Berlin across the March change
/// (2026-03-29: 02:30 does not exist, so 03:00 CEST), on a manual clock:
/// exactly 31 jobs, each at its instant and not a millisecond before, in
/// milliseconds of real time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_month_of_a_daily_recurrence_in_simulated_time() {
    let dir = TempDir::new("recur-month");
    let clock = Clock::manual(at("2026-03-15T12:00:00Z"));
    let queue = Queue::builder(&format!("file://{}", dir.0.display()), "reports")
        .clock(clock.clone())
        .connect()
        .await
        .unwrap();
    let real = Instant::now();
    let nightly = Recurrence::cron("0 30 2 * * *")
        .unwrap()
        .time_zone("Europe/Berlin")
        .unwrap();
    queue.recur("nightly", nightly, "report").await.unwrap();
    let mut delivered = Vec::new();
    for _ in 0..31 {
        let due = only(&queue).await.next.unwrap();
        // A millisecond before: nothing is due.
        clock.set(due - Duration::from_millis(1));
        assert_eq!(queue.stats().await.unwrap().due_now, 0);
        clock.set(due);
        let job = next(&queue).await;
        assert_eq!(job.occurrence(), Some(due));
        assert_eq!(job.deadline(), due);
        delivered.push(ms(due));
        job.ack().await.unwrap();
    }
    let took = real.elapsed();
    let expected: Vec<u64> = (16..=28)
        .map(|d| ms(at(&format!("2026-03-{d}T01:30:00Z")))) // 02:30 CET
        .chain([ms(at("2026-03-29T01:00:00Z"))]) // the gap: 03:00 CEST
        .chain((30..=31).map(|d| ms(at(&format!("2026-03-{d}T00:30:00Z"))))) // 02:30 CEST
        .chain((1..=15).map(|d| ms(at(&format!("2026-04-{d:02}T00:30:00Z")))))
        .collect();
    assert_eq!(delivered, expected);
    println!("31 simulated days took {took:?} of real time");
    assert_eq!(queue.stats().await.unwrap().pending, 1, "the 32nd waits");
}

/// A manual clock moves everything a store decides: a job scheduled three
/// days ahead, and a lease that runs out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_clock_moves_due_times_and_leases() {
    let dir = TempDir::new("recur-clock");
    let start = at("2026-06-01T00:00:00Z");
    let clock = Clock::manual(start);
    let url = format!("file://{}", dir.0.display());
    let queue = Queue::builder(&url, "mail")
        .clock(clock.clone())
        .lease(Duration::from_secs(30))
        .connect()
        .await
        .unwrap();
    let id = queue
        .schedule(Duration::from_secs(3 * 86_400), "reminder")
        .await
        .unwrap();
    assert_eq!(
        queue.job(&id).await.unwrap().unwrap().due,
        Some(start + Duration::from_secs(3 * 86_400))
    );
    clock.advance(Duration::from_secs(3 * 86_400) - Duration::from_millis(1));
    assert_eq!(queue.stats().await.unwrap().due_now, 0);
    clock.advance(Duration::from_millis(1));
    let job = next(&queue).await;
    assert_eq!(job.id(), &id);
    // The lease runs out on the clock: delivered again, attempt 2.
    clock.advance(Duration::from_secs(31));
    let again = next(&queue).await;
    assert_eq!((again.id(), again.attempt()), (&id, 2));
    drop(job);
    // Every handle on a store gives the same clock.
    let other = Queue::builder(&url, "mail").connect().await;
    assert!(
        matches!(other, Err(Error::InvalidConfig { .. })),
        "{other:?}"
    );
    // And Redis decides by its own clock.
    let redis = Queue::builder("redis://127.0.0.1:1/", "mail")
        .clock(clock)
        .connect()
        .await;
    assert!(matches!(
        redis,
        Err(Error::Unsupported {
            setting: "clock",
            backend: "redis"
        })
    ));
}

// A process SIGKILLed while it holds an occurrence.

/// Run in a child process by the SIGKILL tests: claims one occurrence of
/// `tick` and waits to be killed with it.
#[tokio::test]
async fn child_holds_an_occurrence() {
    let Ok(url) = std::env::var("TTJ_CHILD_URL") else {
        return; // only in the child
    };
    let queue = Queue::builder(&url, "orders")
        .lease(Duration::from_secs(3))
        .connect()
        .await
        .unwrap();
    queue.recur("tick", every_second(), "t").await.unwrap();
    let job = queue.next().await.unwrap();
    println!("HELD {}", job.id());
    tokio::time::sleep(Duration::from_secs(600)).await;
}

/// Starts the child, waits until it holds an occurrence, and kills it:
/// the id it held.
fn kill_a_holder(url: &str) -> String {
    use std::io::BufRead;
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_holds_an_occurrence", "--nocapture"])
        .env("TTJ_CHILD_URL", url)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let held = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|line| line.strip_prefix("HELD ").map(str::to_owned))
        .expect("the child held an occurrence");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    held
}

/// Redis: the chain goes on without the killed process (the next
/// occurrence was scheduled by its claim), and the occurrence it held
/// comes back when its lease runs out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_a_killed_holder_does_not_break_the_chain() {
    the_chain_outlives_a_killed_holder(Store::redis()).await
}

/// Postgres: as on Redis (the claim's transaction committed the next
/// occurrence with the lease).
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_killed_holder_does_not_break_the_chain() {
    the_chain_outlives_a_killed_holder(Store::postgres()).await
}

async fn the_chain_outlives_a_killed_holder(store: Store) {
    let held = kill_a_holder(&store.url());
    let queue = store.queue(Duration::from_secs(3), 3).await;
    let mut after = BTreeSet::new();
    let mut redelivered = false;
    while !redelivered || after.len() < 3 {
        let job = next(&queue).await;
        if job.id().as_str() == held {
            assert_eq!(job.attempt(), 2);
            redelivered = true;
        } else {
            assert!(
                job.id().as_str() > held.as_str(),
                "{} after {held}",
                job.id()
            );
            assert!(after.insert(job.id().clone()), "{} twice", job.id());
        }
        job.ack().await.unwrap();
    }
}

/// The embedded store: the store reopens after the kill; the occurrence
/// held is due again, and the chain goes on after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_a_killed_holder_does_not_break_the_chain() {
    let store = Store::embedded();
    let held = kill_a_holder(&store.url());
    let queue = store.queue(Duration::from_secs(3), 3).await;
    let first = next(&queue).await;
    let mut ids = vec![first.id().as_str().to_owned()];
    first.ack().await.unwrap();
    for _ in 0..2 {
        let job = next(&queue).await;
        ids.push(job.id().as_str().to_owned());
        job.ack().await.unwrap();
    }
    // The held occurrence (its claim reached the log, or not: then it was
    // waiting still) comes first, then the chain's next ones.
    assert_eq!(ids[0], held, "{ids:?}");
    assert!(ids[1] > ids[0] && ids[2] > ids[1], "{ids:?}");
}

// The cost of a recurrence against plain scheduled jobs (BENCHMARKS.md):
// counts, not timings. Run by hand:
// cargo test -p tiered-timer-jobs --all-features --test recur cost -- --ignored --nocapture

/// How many occurrences (and plain jobs) each cost is averaged over.
const COST_JOBS: u64 = 10;

/// Plain jobs one second apart, each claimed and acked: what the store
/// did per job, by `measure` before and after.
async fn plain_jobs(queue: &Queue, first_ms: u64) {
    for i in 0..COST_JOBS {
        let at = SystemTime::UNIX_EPOCH + Duration::from_millis(first_ms + i * 1000);
        queue.schedule_at(at, "p").await.unwrap();
    }
    for _ in 0..COST_JOBS {
        next(queue).await.ack().await.unwrap();
    }
}

/// The same number of occurrences of an `every(1 s)` recurrence.
async fn occurrences(queue: &Queue) {
    queue.recur("tick", every_second(), "p").await.unwrap();
    for _ in 0..COST_JOBS {
        next(queue).await.ack().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement for BENCHMARKS.md, run by hand"]
async fn cost_of_an_occurrence_against_a_plain_job() {
    // Redis: commands per job (`total_commands_processed`, script
    // commands included, as in herd.rs).
    let store = Store::redis();
    let Store::Redis(server) = &store else {
        unreachable!()
    };
    let plain = store.queue_named("plain", Duration::from_secs(30), 3).await;
    let recurring = store
        .queue_named("recurring", Duration::from_secs(30), 3)
        .await;
    let before = server.commands_processed();
    plain_jobs(&plain, server.now_ms().await + 1000).await;
    let plain_cost = server.commands_processed() - before;
    let before = server.commands_processed();
    occurrences(&recurring).await;
    let recur_cost = server.commands_processed() - before;
    println!(
        "redis: {:.1} commands per plain job, {:.1} per occurrence",
        plain_cost as f64 / COST_JOBS as f64,
        recur_cost as f64 / COST_JOBS as f64
    );

    // Embedded: bytes appended to the log per job, on a manual clock.
    let dir = TempDir::new("recur-cost");
    let clock = Clock::manual(at("2026-06-01T00:00:00Z"));
    let url = format!("file://{}", dir.0.display());
    let log_bytes = |name: &str| {
        std::fs::read_dir(&dir.0)
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with(name))
            .map(|e| e.metadata().unwrap().len())
            .sum::<u64>()
    };
    for name in ["plain", "recurring"] {
        let queue = Queue::builder(&url, name)
            .clock(clock.clone())
            .connect()
            .await
            .unwrap();
        let before = log_bytes(name);
        let start = clock.now();
        if name == "plain" {
            for i in 0..COST_JOBS {
                queue
                    .schedule_at(start + Duration::from_secs(i + 1), "p")
                    .await
                    .unwrap();
            }
        } else {
            queue.recur("tick", every_second(), "p").await.unwrap();
        }
        for _ in 0..COST_JOBS {
            clock.advance(Duration::from_secs(1));
            next(&queue).await.ack().await.unwrap();
        }
        println!(
            "embedded: {:.1} log bytes per {}",
            (log_bytes(name) - before) as f64 / COST_JOBS as f64,
            if name == "plain" {
                "plain job"
            } else {
                "occurrence"
            }
        );
    }

    #[cfg(feature = "postgres")]
    {
        // Postgres: statements per job, counted in the server's log.
        let server = support::postgres::PostgresServer::start_with(&["log_statement=all"]);
        let store_url = server.url();
        let queue_of = |name: &'static str| {
            let url = store_url.clone();
            async move { Queue::connect(&url, name).await.unwrap() }
        };
        let plain = queue_of("plain").await;
        let recurring = queue_of("recurring").await;
        let statements = || {
            server
                .log()
                .lines()
                .filter(|l| l.contains("LOG:  execute") || l.contains("LOG:  statement:"))
                .count()
        };
        let before = statements();
        plain_jobs(&plain, server.now_ms().await + 1000).await;
        let plain_cost = statements() - before;
        let before = statements();
        occurrences(&recurring).await;
        let recur_cost = statements() - before;
        println!(
            "postgres: {:.1} statements per plain job, {:.1} per occurrence",
            plain_cost as f64 / COST_JOBS as f64,
            recur_cost as f64 / COST_JOBS as f64
        );
    }
}
