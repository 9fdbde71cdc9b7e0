//! The operator's reads and actions on single jobs: `Queue::job`,
//! `Queue::list`, `Queue::promote`, `find_queues` and `Queue::lateness`,
//! against a real redis-server.

mod support;

use std::time::{Duration, SystemTime};

use support::RedisServer;
use tiered_timer_jobs::{find_queues, JobId, JobState, Listing, Queue};

const WAIT: Duration = Duration::from_secs(20);

fn at_ms(ms: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
}

#[tokio::test]
async fn a_job_is_seen_in_every_state() {
    let server = RedisServer::start();
    let queue = Queue::builder(&server.url(), "orders")
        .max_attempts(5)
        .connect()
        .await
        .unwrap();
    let t0 = server.now_ms().await;
    let id = JobId::from("order-1");
    assert_eq!(queue.job(&id).await.unwrap(), None);
    queue
        .schedule_with_id(id.clone(), Duration::from_secs(3600), vec![0xff, b'a'])
        .await
        .unwrap();
    let waiting = queue.job(&id).await.unwrap().unwrap();
    assert_eq!(waiting.state, JobState::Waiting);
    assert_eq!(waiting.attempts, 0);
    assert_eq!(waiting.payload, vec![0xff, b'a']);
    let due = waiting.due.unwrap();
    assert!(due >= at_ms(t0 + 3_600_000) && due < at_ms(t0 + 3_660_000));
    assert_eq!((waiting.lease_expiry, waiting.died_at), (None, None));

    assert!(queue.promote(&id).await.unwrap());
    let job = tokio::time::timeout(WAIT, queue.next())
        .await
        .unwrap()
        .unwrap();
    let leased = queue.job(&id).await.unwrap().unwrap();
    assert_eq!(leased.state, JobState::Leased);
    assert_eq!(leased.attempts, 1);
    assert_eq!(leased.due, Some(job.deadline()));
    let expiry = leased.lease_expiry.unwrap();
    assert!(expiry > leased.redis_time && expiry <= leased.redis_time + job.lease());
    assert!(
        !queue.promote(&id).await.unwrap(),
        "a leased job is not promoted"
    );

    job.bury("card <declined>").await.unwrap();
    let dead = queue.job(&id).await.unwrap().unwrap();
    assert_eq!(dead.state, JobState::Dead);
    assert_eq!(dead.last_error.as_deref(), Some("card <declined>"));
    assert!(dead.died_at.unwrap() <= dead.redis_time);
    assert_eq!(dead.attempts, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promote_wakes_a_sleeping_worker_and_keeps_an_overdue_place() {
    let server = RedisServer::start();
    let queue = Queue::connect(&server.url(), "orders").await.unwrap();
    let late = queue
        .schedule(Duration::from_secs(3600), "late")
        .await
        .unwrap();
    let worker = tokio::spawn({
        let queue = queue.clone();
        async move { queue.next().await.map(|job| job.id().clone()) }
    });
    tokio::time::sleep(Duration::from_millis(300)).await; // the worker sleeps for an hour
    assert!(queue.promote(&late).await.unwrap());
    let claimed = tokio::time::timeout(Duration::from_secs(5), worker)
        .await
        .expect("woken by the promote, not after an hour")
        .unwrap()
        .unwrap();
    assert_eq!(claimed, late);

    // An overdue job keeps its (earlier) due time.
    let t0 = server.now_ms().await;
    let overdue = queue.schedule_at(at_ms(t0 - 60_000), "x").await.unwrap();
    assert!(queue.promote(&overdue).await.unwrap());
    assert_eq!(
        queue.job(&overdue).await.unwrap().unwrap().due,
        Some(at_ms(t0 - 60_000))
    );
    assert!(!queue.promote(&JobId::from("unknown")).await.unwrap());
}

#[tokio::test]
async fn pages_are_ordered_and_merged_over_partitions() {
    let server = RedisServer::start();
    let queue = Queue::builder(&server.url(), "mail")
        .partitions(3)
        .connect()
        .await
        .unwrap();
    let t0 = server.now_ms().await;
    // 30 jobs due one second apart, the first 10 in the past.
    queue
        .schedule_many_at((0..30u64).map(|i| (at_ms(t0 - 10_000 + i * 1000), format!("{i:02}"))))
        .await
        .unwrap();
    let page = queue.list(Listing::Waiting, 5, 10).await.unwrap();
    assert_eq!(page.total, 30);
    let previews: Vec<String> = page
        .jobs
        .iter()
        .map(|j| String::from_utf8(j.payload_preview.clone()).unwrap())
        .collect();
    let expected: Vec<String> = (5..15).map(|i| format!("{i:02}")).collect();
    assert_eq!(previews, expected);
    let due = queue.list(Listing::Due, 0, 100).await.unwrap();
    assert!((10..=12).contains(&due.total), "{}", due.total);
    assert_eq!(due.jobs.len() as u64, due.total);
    assert!(due.jobs.windows(2).all(|w| w[0].at <= w[1].at));

    // Claim three; bury two: listed by expiry, and newest death first.
    let mut jobs = Vec::new();
    for _ in 0..3 {
        jobs.push(
            tokio::time::timeout(WAIT, queue.next())
                .await
                .unwrap()
                .unwrap(),
        );
    }
    let leased = queue.list(Listing::Leased, 0, 10).await.unwrap();
    assert_eq!(leased.total, 3);
    assert!(leased
        .jobs
        .iter()
        .all(|j| j.state == JobState::Leased && j.attempts == 1));
    let third = jobs.pop().unwrap();
    let second = jobs.pop().unwrap();
    second.bury("first to die").await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    third.bury("second to die").await.unwrap();
    let dead = queue.list(Listing::Dead, 0, 10).await.unwrap();
    let errors: Vec<_> = dead
        .jobs
        .iter()
        .map(|j| j.last_error.clone().unwrap())
        .collect();
    assert_eq!(errors, ["second to die", "first to die"]);

    assert!(queue.list(Listing::Waiting, 0, 0).await.is_err());
    assert!(queue.list(Listing::Waiting, 9_990, 20).await.is_err());
}

#[tokio::test]
async fn queues_are_found_with_their_partitions() {
    let server = RedisServer::start();
    let url = server.url();
    let orders = Queue::connect(&url, "orders").await.unwrap();
    orders.schedule(Duration::from_secs(60), "x").await.unwrap();
    let mail = Queue::builder(&url, "mail")
        .partitions(8)
        .connect()
        .await
        .unwrap();
    mail.schedule_with_id("one", Duration::from_secs(60), "x")
        .await
        .unwrap();
    // A queue whose keys exist but that no producer registered (an older
    // producer): found by its keys, partitions from its highest tag.
    server.cli(&["ZADD", "ttr:{legacy#2}:due", "1", "a"]);
    // A look by an operator's tool (which does not register) at a name
    // that is no queue fails, and registers nothing.
    assert!(matches!(
        Queue::builder(&url, "typo").register(false).connect().await,
        Err(tiered_timer_jobs::Error::NoSuchQueue { .. })
    ));

    let found = find_queues(&url, false, Duration::from_secs(5))
        .await
        .unwrap();
    let summary: Vec<(String, u32, bool)> = found
        .iter()
        .map(|q| (q.name.clone(), q.partitions, q.registered))
        .collect();
    assert_eq!(
        summary,
        [
            ("legacy".to_owned(), 3, false),
            ("mail".to_owned(), 8, true),
            ("orders".to_owned(), 1, true),
        ]
    );
}

#[tokio::test]
async fn lateness_sums_the_partitions_histograms() {
    let server = RedisServer::start();
    let queue = Queue::builder(&server.url(), "orders")
        .partitions(2)
        .connect()
        .await
        .unwrap();
    assert_eq!(queue.lateness().await.unwrap().total(), 0);
    // What the claim script records: u32 counters by bucket.
    server.cli(&[
        "BITFIELD",
        "ttr:{orders#0}:lateness",
        "INCRBY",
        "u32",
        "#0",
        "3",
    ]);
    server.cli(&[
        "BITFIELD",
        "ttr:{orders#1}:lateness",
        "INCRBY",
        "u32",
        "#0",
        "1",
    ]);
    server.cli(&[
        "BITFIELD",
        "ttr:{orders#1}:lateness",
        "INCRBY",
        "u32",
        "#10",
        "4",
    ]);
    let lateness = queue.lateness().await.unwrap();
    assert_eq!(lateness.total(), 8);
    let buckets = lateness.buckets();
    assert_eq!(buckets[0], (Some(Duration::ZERO), 4));
    assert_eq!(buckets[10], (Some(Duration::from_secs(1)), 4));
    assert_eq!(lateness.quantile(0.5), Some(Duration::ZERO));
    assert_eq!(lateness.quantile(0.9), Some(Duration::from_secs(1)));
}

/// Claims count in the lateness histogram, one per job taken from the
/// waiting jobs, in the bucket of its lateness by Redis' clock: claims of
/// one job and of several.
#[tokio::test]
async fn claims_record_their_lateness() {
    let server = RedisServer::start();
    let queue = Queue::connect(&server.url(), "orders").await.unwrap();
    let t0 = server.now_ms().await;
    // Due 3 s and 40 s before the claims: the 5 s and 1 min buckets.
    queue.schedule_at(at_ms(t0 - 40_000), "a").await.unwrap();
    queue.schedule_at(at_ms(t0 - 3_000), "b").await.unwrap();
    queue
        .schedule(Duration::from_secs(3600), "later")
        .await
        .unwrap();
    for _ in 0..2 {
        let job = tokio::time::timeout(WAIT, queue.next())
            .await
            .unwrap()
            .unwrap();
        job.ack().await.unwrap();
    }
    let lateness = queue.lateness().await.unwrap();
    assert_eq!(lateness.total(), 2);
    let buckets = lateness.buckets();
    assert_eq!(buckets[12], (Some(Duration::from_secs(5)), 1));
    assert_eq!(buckets[15], (Some(Duration::from_secs(60)), 1));

    // A claim of several jobs counts each (one BITFIELD for the batch).
    let t1 = server.now_ms().await;
    for due in [t1 - 3_000, t1 - 3_000, t1 - 40_000] {
        queue.schedule_at(at_ms(due), "c").await.unwrap();
    }
    let mut got = 0;
    while got < 3 {
        let jobs = tokio::time::timeout(WAIT, queue.next_batch(3))
            .await
            .unwrap()
            .unwrap();
        got += jobs.len();
        assert!(queue.ack_many(jobs).await.unwrap().is_empty());
    }
    let buckets = queue.lateness().await.unwrap().buckets();
    assert_eq!(buckets[12], (Some(Duration::from_secs(5)), 3));
    assert_eq!(buckets[15], (Some(Duration::from_secs(60)), 2));
}
