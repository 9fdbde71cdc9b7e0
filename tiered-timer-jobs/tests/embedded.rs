//! The embedded backend's own rules, through the public API (its crash,
//! full-disk and corruption tests are in `src/embedded/tests.rs`): one
//! process per store, Redis-only settings refused, `file://` URLs, jobs
//! kept across a reopen.

mod support;

use std::process::Command;
use std::time::Duration;

use support::backend::TempDir;
use tiered_timer_jobs::{Error, Queue};

fn url(dir: &TempDir) -> String {
    format!("file://{}", dir.0.display())
}

/// Run in a child process by `a_second_process_gets_the_lock_error`.
#[tokio::test]
async fn child_opens_the_store() {
    let Ok(url) = std::env::var("TTJ_CHILD_URL") else {
        return; // only in the child
    };
    match Queue::connect(&url, "orders").await {
        Err(Error::Locked { path }) => println!("LOCKED {}", path.display()),
        Err(other) => println!("ERROR {other}"),
        Ok(_) => println!("OPENED"),
    }
}

#[tokio::test]
async fn a_second_process_gets_the_lock_error() {
    let dir = TempDir::new("lock");
    let queue = Queue::connect(&url(&dir), "orders").await.unwrap();
    let child = |url: String| {
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "child_opens_the_store", "--nocapture"])
            .env("TTJ_CHILD_URL", url)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let seen = child(url(&dir));
    assert!(seen.contains("LOCKED"), "the second process got: {seen}");
    // A second handle in this process shares the store instead.
    let other = Queue::connect(&url(&dir), "orders").await.unwrap();
    let id = queue.schedule(Duration::ZERO, b"x".to_vec()).await.unwrap();
    assert_eq!(other.next().await.unwrap().id(), &id);
    drop((queue, other));
    // Once every handle is gone the lock is free.
    let mut seen = String::new();
    for _ in 0..50 {
        seen = child(url(&dir));
        if seen.contains("OPENED") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(seen.contains("OPENED"), "after close: {seen}");
}

#[tokio::test]
async fn redis_only_settings_are_refused_where_they_would_change_meaning() {
    let dir = TempDir::new("settings");
    let url = url(&dir);
    for (builder, setting) in [
        (Queue::builder(&url, "q").partitions(4), "partitions"),
        (Queue::builder(&url, "q").cluster(), "cluster"),
        (Queue::builder(&url, "q").replicas(1), "replicas"),
    ] {
        match builder.connect().await {
            Err(Error::Unsupported {
                setting: s,
                backend: "embedded",
            }) => assert_eq!(s, setting),
            other => panic!("{setting}: expected Unsupported, got {other:?}"),
        }
    }
    // Looking (`register(false)`, as `ttr` does) creates no queue.
    match Queue::builder(&url, "q").register(false).connect().await {
        Err(Error::NoSuchQueue { queue }) => assert_eq!(queue, "q"),
        other => panic!("expected NoSuchQueue, got {other:?}"),
    }
    assert!(
        tiered_timer_jobs::find_queues(&url, false, Duration::from_secs(1))
            .await
            .map_or(true, |found| found.is_empty())
    );
    // Those that change nothing here are accepted.
    Queue::builder(&url, "q")
        .partitions(1)
        .prefetch(10)
        .health_check(Duration::from_secs(1))
        .command_timeout(Duration::from_secs(1))
        .connect()
        .await
        .unwrap();
    Queue::builder(&url, "q")
        .register(false)
        .connect()
        .await
        .unwrap();
}

#[tokio::test]
async fn file_urls_and_queue_names_are_checked() {
    for bad in ["file://", "redis-or-file:///x"] {
        assert!(
            matches!(
                Queue::connect(bad, "q").await,
                Err(Error::InvalidUrl { .. })
            ),
            "{bad}"
        );
    }
    let dir = TempDir::new("names");
    for bad in ["a/b", "..", "."] {
        assert!(
            matches!(
                Queue::connect(&url(&dir), bad).await,
                Err(Error::InvalidQueueName { .. })
            ),
            "{bad}"
        );
    }
    // file://localhost/abs is the same directory as file:///abs.
    let local = format!("file://localhost{}", dir.0.display());
    let a = Queue::connect(&local, "q").await.unwrap();
    let b = Queue::connect(&url(&dir), "q").await.unwrap();
    a.schedule(Duration::from_secs(60), b"x".to_vec())
        .await
        .unwrap();
    assert_eq!(b.pending().await.unwrap(), 1);
}

#[tokio::test]
async fn jobs_outlive_every_handle() {
    let dir = TempDir::new("reopen");
    let queue = Queue::builder(&url(&dir), "orders")
        .lease(Duration::from_secs(60))
        .connect()
        .await
        .unwrap();
    let kept = queue
        .schedule_with_id("kept", Duration::from_millis(50), b"k".to_vec())
        .await
        .unwrap();
    let acked = queue
        .schedule_with_id("acked", Duration::ZERO, b"a".to_vec())
        .await
        .unwrap();
    let job = queue.next().await.unwrap();
    assert_eq!(job.id(), &acked);
    job.ack().await.unwrap();
    let leased = queue
        .schedule_with_id("leased", Duration::ZERO, b"l".to_vec())
        .await
        .unwrap();
    let job = queue.next().await.unwrap();
    assert_eq!(job.id(), &leased);
    // Every handle gone with a job held (as when its process dies): the
    // store closes.
    drop((job, queue));
    tokio::time::sleep(Duration::from_millis(100)).await;

    let queue = Queue::connect(&url(&dir), "orders").await.unwrap();
    let mut seen = Vec::new();
    for _ in 0..2 {
        let job = tokio::time::timeout(Duration::from_secs(10), queue.next())
            .await
            .unwrap()
            .unwrap();
        seen.push((job.id().clone(), job.attempt()));
        job.ack().await.unwrap();
    }
    seen.sort();
    // Leases do not outlive the store's opening: the held job is due
    // again at once on reopen, its attempt counted.
    assert_eq!(seen, [(kept, 1), (leased, 2)]);
    assert_eq!(queue.stats().await.unwrap().pending, 0);
}

/// A read-only handle (`ttr`'s looks) takes no lock and writes nothing:
/// it looks at a store this (or another) process holds, sees what is
/// written after it opened, and every change through it is refused.
#[tokio::test]
async fn a_read_only_handle_looks_while_the_store_is_held_and_changes_nothing() {
    let dir = TempDir::new("read-only");
    let service = Queue::builder(&url(&dir), "orders")
        .lease(Duration::from_secs(60))
        .connect()
        .await
        .unwrap();
    for i in 0..10 {
        service
            .schedule_with_id(format!("later-{i}"), Duration::from_secs(3600), "x")
            .await
            .unwrap();
    }
    let look = Queue::builder(&url(&dir), "orders")
        .read_only(true)
        .connect()
        .await
        .unwrap();
    assert_eq!(look.pending().await.unwrap(), 10);
    // What the service writes next is seen by the next look.
    service
        .schedule_with_id("now", Duration::ZERO, "due")
        .await
        .unwrap();
    let job = service.next().await.unwrap();
    service.cancel(&"later-0".into()).await.unwrap();
    let stats = look.stats().await.unwrap();
    assert_eq!((stats.pending, stats.leased, stats.dead), (9, 1, 0));
    let seen = look.job(job.id()).await.unwrap().expect("the leased job");
    assert_eq!(seen.payload, b"due");
    job.ack().await.unwrap();
    assert_eq!(look.leased().await.unwrap(), 0);
    // Changes are refused, and change nothing.
    let log = dir.0.join("orders.log");
    let before = std::fs::read(&log).unwrap();
    let refused = [
        look.schedule(Duration::ZERO, "y").await.map(|_| ()),
        look.cancel(&"later-1".into()).await.map(|_| ()),
        look.promote(&"later-2".into()).await.map(|_| ()),
        look.next().await.map(|_| ()),
    ];
    for outcome in refused {
        assert!(
            matches!(outcome, Err(Error::ReadOnly { .. })),
            "{outcome:?}"
        );
    }
    assert_eq!(std::fs::read(&log).unwrap(), before);
    assert_eq!(service.pending().await.unwrap(), 9);
    assert_eq!(look.pending().await.unwrap(), 9);
}

/// A look creates nothing: not a store's directory, not a queue's log.
#[tokio::test]
async fn a_read_only_handle_creates_nothing() {
    let dir = TempDir::new("read-only-nothing");
    std::fs::create_dir_all(&dir.0).unwrap();
    let missing = dir.0.join("no-store");
    for (url, what) in [
        (format!("file://{}", missing.display()), "store"),
        (url(&dir), "queue"),
    ] {
        match Queue::builder(&url, "orders")
            .read_only(true)
            .connect()
            .await
        {
            Err(Error::NoSuchQueue { queue }) => assert_eq!(queue, "orders", "{what}"),
            other => panic!("{what}: {other:?}"),
        }
    }
    assert!(!missing.exists());
    assert_eq!(std::fs::read_dir(&dir.0).unwrap().count(), 0);
    // Redis has no read-only handles.
    assert!(matches!(
        Queue::builder("redis://127.0.0.1:1/", "orders")
            .read_only(true)
            .connect()
            .await,
        Err(Error::Unsupported {
            setting: "read_only",
            backend: "redis"
        })
    ));
}

/// A log written by format version 1 (the version before attempt
/// histories; see `tests/fixtures/version-1/`) opens with the same jobs as
/// that version read, and the histories it recorded (claims and deaths
/// with their times, no holders); a look changes nothing; opening it to
/// write upgrades its header before anything of version 2 is appended,
/// and it opens again after.
#[tokio::test]
async fn a_version_1_log_opens_with_what_it_recorded() {
    use tiered_timer_jobs::{JobId, JobState, Outcome};
    let dir = TempDir::new("version-1");
    std::fs::create_dir_all(&dir.0).unwrap();
    let log = dir.0.join("orders.log");
    let fixture = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/version-1/orders.log"),
    )
    .unwrap();
    assert_eq!(&fixture[8..12], &1u32.to_le_bytes(), "a version 1 log");
    std::fs::write(&log, &fixture).unwrap();

    // A look: what version 1 read, and nothing written.
    let look = Queue::builder(&url(&dir), "orders")
        .read_only(true)
        .connect()
        .await
        .unwrap();
    let stats = look.stats().await.unwrap();
    assert_eq!((stats.pending, stats.leased, stats.dead), (31, 1, 2));
    drop(look);
    assert_eq!(
        std::fs::read(&log).unwrap(),
        fixture,
        "a look writes nothing"
    );

    let queue = Queue::connect(&url(&dir), "orders").await.unwrap();
    let stats = queue.stats().await.unwrap();
    assert_eq!((stats.pending, stats.leased, stats.dead), (31, 1, 2));
    assert_eq!(&std::fs::read(&log).unwrap()[8..12], &2u32.to_le_bytes());
    for id in ["order-63", "order-71"] {
        let dead = queue.job(&JobId::from(id)).await.unwrap().unwrap();
        assert_eq!(dead.state, JobState::Dead);
        assert_eq!(dead.created, None, "version 1 did not record it");
        let last = dead.history.last().expect("its claim was recorded");
        assert_eq!((last.number, last.outcome), (1, Outcome::Buried));
        assert_eq!(last.ended, dead.died_at);
        assert_eq!(last.holder, None);
        assert!(last.error.as_deref().unwrap().starts_with("card declined"));
    }
    let held = queue.job(&JobId::from("order-91")).await.unwrap().unwrap();
    assert_eq!((held.state, held.attempts), (JobState::Leased, 2));
    let running = held.history.last().unwrap();
    assert_eq!((running.number, running.outcome), (2, Outcome::Running));
    assert_eq!(held.history.len(), 2, "{:?}", held.history);

    // Version 2 records after version 1's, and a reopen reads both.
    let job = queue.next().await.unwrap();
    let (id, attempt) = (job.id().clone(), job.attempt());
    job.ack().await.unwrap();
    drop(queue);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let queue = Queue::connect(&url(&dir), "orders").await.unwrap();
    assert_eq!(queue.job(&id).await.unwrap(), None);
    let stats = queue.stats().await.unwrap();
    assert_eq!(stats.dead, 2);
    assert_eq!(
        stats.pending + stats.leased,
        31,
        "one of 32 acked (attempt {attempt})"
    );
    let since = std::time::SystemTime::now() - Duration::from_secs(600);
    assert_eq!(queue.throughput(since).await.unwrap().processed(), 1);
}
