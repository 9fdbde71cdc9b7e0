//! Faults: restarts of workers and of Redis, and Redis down.

mod support;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use support::{eventually, RedisServer};
use tiered_timer_jobs::{Error, JobId, Queue};

const WAIT: Duration = Duration::from_secs(20);

#[tokio::test]
async fn jobs_survive_a_restart_of_every_worker() {
    let server = RedisServer::start();
    let builder = Queue::builder(&server.url(), "restart").lease(Duration::from_millis(300));
    let first = builder.clone().connect().await.unwrap();
    let held = first
        .schedule(Duration::ZERO, b"held".to_vec())
        .await
        .unwrap();
    let later = first
        .schedule(Duration::from_millis(200), b"later".to_vec())
        .await
        .unwrap();
    let job = first.next().await.unwrap();
    assert_eq!(job.id(), &held);
    // Every worker goes away, holding a job.
    drop(first);
    std::mem::forget(job);

    let second = builder.connect().await.unwrap();
    let mut got = HashSet::new();
    for _ in 0..2 {
        let job = tokio::time::timeout(WAIT, second.next())
            .await
            .unwrap()
            .unwrap();
        got.insert(job.id().clone());
        job.ack().await.unwrap();
    }
    assert_eq!(got, HashSet::from([held, later]));
}

#[tokio::test]
async fn nothing_is_lost_when_redis_restarts_with_the_append_only_file() {
    let mut server = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let queue = Queue::builder(&server.url(), "aof")
        .lease(Duration::from_millis(500))
        .command_timeout(Duration::from_secs(2))
        .connect()
        .await
        .unwrap();
    let mut ids: HashSet<JobId> = HashSet::new();
    for i in 0..50u64 {
        ids.insert(
            queue
                .schedule(Duration::from_millis(i * 10), format!("{i}"))
                .await
                .unwrap(),
        );
    }
    // One job leased when Redis dies.
    let leased = tokio::time::timeout(WAIT, queue.next())
        .await
        .unwrap()
        .unwrap();
    let leased_id = leased.id().clone();
    std::mem::forget(leased);

    server.kill(); // SIGKILL: only what the AOF holds survives
    assert!(queue.pending().await.is_err(), "Redis is down");
    server.restart();

    // The same Queue reconnects by itself and delivers every job.
    eventually("the queue reconnects", WAIT, || async {
        queue.pending().await.is_ok()
    })
    .await;
    let mut delivered = HashSet::new();
    while delivered.len() < ids.len() {
        let job = tokio::time::timeout(WAIT, queue.next())
            .await
            .unwrap()
            .unwrap();
        if job.id() == &leased_id {
            assert_eq!(job.attempt(), 2, "the lease survived the restart");
        }
        assert!(delivered.insert(job.id().clone()), "delivered twice");
        job.ack().await.unwrap();
    }
    assert_eq!(delivered, ids);
    assert_eq!(queue.pending().await.unwrap(), 0);
}

#[tokio::test]
async fn calls_fail_within_the_command_timeout_while_redis_is_down_and_recover() {
    let mut server = RedisServer::start();
    let timeout = Duration::from_millis(500);
    let queue = Queue::builder(&server.url(), "down")
        .command_timeout(timeout)
        .connect()
        .await
        .unwrap();
    let id = queue
        .schedule(Duration::from_millis(300), b"x".to_vec())
        .await
        .unwrap();
    server.stop();

    // No hangs: every call returns an error. (The bound is generous; what
    // it checks is that the call returns, not how fast.)
    let started = Instant::now();
    assert!(queue.schedule(Duration::ZERO, b"y".to_vec()).await.is_err());
    assert!(queue.pending().await.is_err());
    assert!(queue.cancel(&id).await.is_err());
    assert!(queue.next().await.is_err());
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "calls hung while Redis was down"
    );

    // With a timeout that cannot be met, the error is a Timeout.
    let blocked = RedisServer::start();
    let slow = Queue::builder(&blocked.url(), "slow")
        .command_timeout(Duration::from_millis(300))
        .connect()
        .await
        .unwrap();
    blocked.freeze();
    match slow.pending().await {
        Err(Error::Timeout { after }) => assert_eq!(after, Duration::from_millis(300)),
        other => panic!("expected a Timeout, got {other:?}"),
    }
    assert!(slow.next().await.is_err());
    blocked.thaw();
    eventually("a thawed server answers", WAIT, || async {
        slow.pending().await.is_ok()
    })
    .await;

    server.restart();
    // Not persisted (appendonly no): the queue is empty, but works again.
    eventually("the same Queue recovers", WAIT, || async {
        queue.pending().await.is_ok()
    })
    .await;
    let id = queue.schedule(Duration::ZERO, b"z".to_vec()).await.unwrap();
    let job = tokio::time::timeout(WAIT, queue.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(job.id(), &id);
    job.ack().await.unwrap();
}
