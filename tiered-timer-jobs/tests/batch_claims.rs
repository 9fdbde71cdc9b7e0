//! Batches (issue 25, target 2): many jobs per claim, an ack and the next
//! claim in one round trip, prefetching; and that none of it strands a
//! job.

mod support;

use std::collections::HashSet;
use std::time::Duration;

use support::RedisServer;
use tiered_timer_jobs::{Error, JobId, Queue};

const WAIT: Duration = Duration::from_secs(20);

/// Redis' count of `EVALSHA` calls (`INFO commandstats`).
fn scripts_run(server: &RedisServer) -> u64 {
    let info = server.cli(&["INFO", "commandstats"]);
    info.lines()
        .find_map(|line| line.strip_prefix("cmdstat_evalsha:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Every script used once, so that no `NOSCRIPT` retry is counted.
async fn warm_up(queue: &Queue) {
    queue.schedule(Duration::ZERO, "warm-up").await.unwrap();
    let job = queue.next().await.unwrap();
    let next = queue.schedule(Duration::ZERO, "warm-up 2").await.unwrap();
    let job = tokio::time::timeout(WAIT, job.ack_and_next())
        .await
        .unwrap();
    let job = job.unwrap();
    assert_eq!(job.id(), &next);
    job.ack().await.unwrap();
}

#[tokio::test]
async fn next_batch_claims_many_in_one_script_each_with_its_own_lease() {
    let server = RedisServer::start();
    let queue = Queue::builder(&server.url(), "orders")
        .lease(Duration::from_secs(30))
        .connect()
        .await
        .unwrap();
    warm_up(&queue).await;
    let ids: HashSet<JobId> = queue
        .schedule_many((0..10).map(|i| (Duration::ZERO, format!("{i}"))))
        .await
        .unwrap()
        .into_iter()
        .collect();
    let before = scripts_run(&server);
    let first = tokio::time::timeout(WAIT, queue.next_batch(4))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.len(), 4);
    assert_eq!(scripts_run(&server) - before, 1, "one claim for four jobs");
    let rest = queue.next_batch(100).await.unwrap();
    assert_eq!(rest.len(), 6, "the other six, fewer than asked");
    let mut seen = HashSet::new();
    for job in first.iter().chain(&rest) {
        assert_eq!(job.attempt(), 1);
        assert!(seen.insert(job.id().clone()), "{} twice", job.id());
    }
    assert_eq!(seen, ids);
    assert_eq!(queue.leased().await.unwrap(), 10);
    // Each has its own token: one ack does not ack another, and a stale
    // one fails alone.
    let mut all: Vec<_> = first.into_iter().chain(rest).collect();
    let last = all.pop().unwrap();
    for job in all {
        job.ack().await.unwrap();
    }
    assert_eq!(queue.leased().await.unwrap(), 1);
    last.ack().await.unwrap();
    assert_eq!(server.job_keys(), "0");
}

#[tokio::test]
async fn ack_and_next_is_one_round_trip_per_job() {
    let server = RedisServer::start();
    let queue = Queue::connect(&server.url(), "orders").await.unwrap();
    warm_up(&queue).await;
    let ids: Vec<JobId> = queue
        .schedule_many((0..10).map(|i| (Duration::ZERO, format!("{i}"))))
        .await
        .unwrap();
    let before = scripts_run(&server);
    let mut job = queue.next().await.unwrap();
    let mut seen = vec![job.id().clone()];
    for _ in 1..10 {
        job = tokio::time::timeout(WAIT, job.ack_and_next())
            .await
            .unwrap()
            .unwrap();
        seen.push(job.id().clone());
    }
    job.ack().await.unwrap();
    // One claim, nine ack-and-claims, one ack; and one more claim at
    // most, for the last job (an ack-and-claim without the partition's
    // baton leaves a lone due job to the baton's holder). Next and ack
    // would be twenty.
    let scripts = scripts_run(&server) - before;
    assert!(
        (11..=12).contains(&scripts),
        "{scripts} scripts for ten jobs"
    );
    let seen: HashSet<JobId> = seen.into_iter().collect();
    assert_eq!(seen, ids.into_iter().collect());
    assert_eq!(queue.pending().await.unwrap(), 0);
    assert_eq!(queue.leased().await.unwrap(), 0);
}

#[tokio::test]
async fn ack_and_next_with_a_lost_lease_claims_nothing() {
    let server = RedisServer::start();
    let queue = Queue::builder(&server.url(), "orders")
        .lease(Duration::from_millis(200))
        .connect()
        .await
        .unwrap();
    let id = queue.schedule(Duration::ZERO, "x").await.unwrap();
    queue.schedule(Duration::ZERO, "y").await.unwrap();
    let job = queue.next().await.unwrap();
    let lost = job.id().clone();
    tokio::time::sleep(Duration::from_millis(300)).await;
    match job.ack_and_next().await {
        Err(Error::LeaseExpired { id }) => assert_eq!(id, lost),
        other => panic!("expected LeaseExpired, got {other:?}"),
    }
    // Both come (back) to the next calls.
    let mut got = HashSet::new();
    for _ in 0..2 {
        let job = tokio::time::timeout(WAIT, queue.next())
            .await
            .unwrap()
            .unwrap();
        got.insert(job.id().clone());
        job.ack().await.unwrap();
    }
    assert!(got.contains(&id));
}

#[tokio::test]
async fn prefetch_takes_jobs_ahead_and_hands_them_out_without_a_round_trip() {
    let server = RedisServer::start();
    let queue = Queue::builder(&server.url(), "orders")
        .prefetch(10)
        .connect()
        .await
        .unwrap();
    warm_up(&queue).await;
    let ids: HashSet<JobId> = queue
        .schedule_many((0..33).map(|i| (Duration::ZERO, format!("{i}"))))
        .await
        .unwrap()
        .into_iter()
        .collect();
    let before = scripts_run(&server);
    let mut seen = HashSet::new();
    for _ in 0..33 {
        let job = tokio::time::timeout(WAIT, queue.next())
            .await
            .unwrap()
            .unwrap();
        assert!(seen.insert(job.id().clone()));
        job.ack().await.unwrap();
    }
    assert_eq!(seen, ids);
    // 33 acks and three claims of 11.
    assert_eq!(scripts_run(&server) - before, 36);
}

#[tokio::test]
async fn a_prefetched_job_nobody_takes_is_released_within_half_its_lease() {
    let server = RedisServer::start();
    let lease = Duration::from_millis(600);
    let greedy = Queue::builder(&server.url(), "orders")
        .lease(lease)
        .prefetch(5)
        .connect()
        .await
        .unwrap();
    greedy
        .schedule_many((0..6).map(|i| (Duration::ZERO, format!("{i}"))))
        .await
        .unwrap();
    let first = greedy.next().await.unwrap();
    assert_eq!(greedy.leased().await.unwrap(), 6, "five more prefetched");
    // Nobody calls `greedy.next()` again: after half the lease the five go
    // back, due at once and not counted as an attempt.
    let other = Queue::builder(&server.url(), "orders")
        .lease(Duration::from_secs(30))
        .connect()
        .await
        .unwrap();
    for _ in 0..5 {
        let job = tokio::time::timeout(WAIT, other.next())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            job.attempt(),
            1,
            "released, not redelivered after its lease"
        );
        job.ack().await.unwrap();
    }
    first.ack().await.unwrap();
    assert_eq!(other.pending().await.unwrap(), 0);
}

#[tokio::test]
async fn close_releases_prefetched_jobs() {
    let server = RedisServer::start();
    let queue = Queue::builder(&server.url(), "orders")
        .prefetch(5)
        .connect()
        .await
        .unwrap();
    queue
        .schedule_many((0..6).map(|i| (Duration::ZERO, format!("{i}"))))
        .await
        .unwrap();
    let job = queue.next().await.unwrap();
    assert_eq!(queue.leased().await.unwrap(), 6);
    queue.close();
    job.ack().await.unwrap();
    queue.shutdown().await; // waits for the releases
    assert_eq!(queue.leased().await.unwrap(), 0);
    assert_eq!(queue.pending().await.unwrap(), 5);
}

#[tokio::test]
async fn ack_many_acks_a_batch_in_one_script_and_names_the_lost() {
    let server = RedisServer::start();
    let queue = Queue::connect(&server.url(), "orders").await.unwrap();
    warm_up(&queue).await;
    queue
        .schedule_many((0..10).map(|i| (Duration::ZERO, format!("{i}"))))
        .await
        .unwrap();
    let jobs = tokio::time::timeout(WAIT, queue.next_batch(10))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(jobs.len(), 10);
    // Another delivery took one of them over.
    let taken = jobs[3].id().clone();
    support::steal_lease(&server, "orders", taken.as_str());
    let before = scripts_run(&server);
    let lost = queue.ack_many(jobs).await.unwrap();
    // The ack-many script, and the first use of it (NOSCRIPT) at most.
    assert!(scripts_run(&server) - before <= 2);
    assert_eq!(lost, vec![taken]);
    assert_eq!(
        queue.leased().await.unwrap(),
        1,
        "only the stolen one is left"
    );
    assert_eq!(queue.pending().await.unwrap(), 0);
}
