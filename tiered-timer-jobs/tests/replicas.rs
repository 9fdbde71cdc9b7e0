//! `replicas(n)` on a master with one replica (issue 25, target 5; issue
//! 33, part 2): what the caller was promised (a schedule, an ack) waits for
//! the replica and says when it did not reach it (`Error::NotReplicated`,
//! for that call only); claims go on without it (a lost claim only means
//! a redelivery); writes that wait do not queue behind each other's
//! `WAIT`; and a master that lost its replica says so at once, and waits
//! again once the replica is back.

mod support;

use std::time::Duration;

use support::{eventually, RedisServer};
use tiered_timer_jobs::{Error, Queue};

const WAIT: Duration = Duration::from_secs(20);

/// A master and its replica, in sync.
fn master_and_replica() -> (RedisServer, RedisServer) {
    let master = RedisServer::start();
    let replica = RedisServer::start_with(&[
        "--appendonly",
        "no",
        "--replicaof",
        "127.0.0.1",
        &master.port.to_string(),
    ]);
    (master, replica)
}

/// Waits until the replica is in sync, as both sides see it.
async fn in_sync(master: &RedisServer, replica: &RedisServer) {
    eventually("the replica is in sync", WAIT, || {
        let ours = replica.cli(&["INFO", "replication"]);
        let theirs = master.cli(&["INFO", "replication"]);
        async move { ours.contains("master_link_status:up") && theirs.contains("state=online") }
    })
    .await;
}

async fn queue(master: &RedisServer) -> Queue {
    Queue::builder(&master.url(), "orders")
        .replicas(1)
        .replica_timeout(Duration::from_millis(300))
        .connect()
        .await
        .unwrap()
}

#[tokio::test]
async fn writes_wait_for_the_replica_and_say_when_it_is_not_there() {
    let (master, replica) = master_and_replica();
    in_sync(&master, &replica).await;
    let queue = queue(&master).await;
    let id = queue.schedule(Duration::ZERO, "x").await.unwrap();
    // It is on the replica by the time schedule returns.
    let on_replica = replica.cli(&["ZSCORE", "ttr:{orders}:timeline", id.as_str()]);
    assert!(!on_replica.trim().is_empty(), "not on the replica");
    let job = tokio::time::timeout(WAIT, queue.next())
        .await
        .unwrap()
        .unwrap();
    job.ack().await.unwrap();
    let gone = replica.cli(&["ZSCORE", "ttr:{orders}:timeline", id.as_str()]);
    assert!(gone.trim().is_empty(), "the ack is on the replica too");

    // The replica stops answering: writes happen on the master, and say
    // they did not reach it.
    replica.freeze();
    match queue.schedule(Duration::ZERO, "y").await {
        Err(Error::NotReplicated {
            replicas, wanted, ..
        }) => assert_eq!((replicas, wanted), (0, 1)),
        other => panic!("expected NotReplicated, got {other:?}"),
    }
    assert_eq!(queue.pending().await.unwrap(), 1, "written on the master");
    // A claim goes on without the replica (losing it in a failover would
    // only mean a redelivery); it used to be handed back, and the job with
    // it, for as long as the replica was away.
    let job = tokio::time::timeout(WAIT, queue.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(job.attempt(), 1);
    // The ack is the caller's to know about: done on the master, not on
    // the replica.
    match job.ack().await {
        Err(Error::NotReplicated { .. }) => {}
        other => panic!("expected NotReplicated, got {other:?}"),
    }
    assert_eq!(queue.pending().await.unwrap(), 0);
    assert_eq!(queue.leased().await.unwrap(), 0, "acked on the master");
    replica.thaw();
}

/// `WAIT` blocks its connection in Redis: forty writes at once used to
/// queue behind each other's 300 ms on one connection (12 s in all), so
/// those past the command timeout (5 s) failed with `Timeout` instead of
/// saying they were not replicated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_that_wait_do_not_queue_behind_each_other() {
    let (master, replica) = master_and_replica();
    in_sync(&master, &replica).await;
    let queue = queue(&master).await;
    queue.schedule(Duration::ZERO, "warm up").await.unwrap();
    replica.freeze();
    let calls: Vec<_> = (0..40)
        .map(|i| {
            let queue = queue.clone();
            tokio::spawn(async move {
                queue
                    .schedule_with_id(format!("job-{i}"), Duration::from_secs(60), "x")
                    .await
            })
        })
        .collect();
    let mut outcomes = Vec::new();
    for call in calls {
        outcomes.push(match call.await.unwrap() {
            Err(Error::NotReplicated { .. }) => "NotReplicated".to_owned(),
            other => format!("{other:?}"),
        });
    }
    replica.thaw();
    let other: Vec<&String> = outcomes.iter().filter(|o| *o != "NotReplicated").collect();
    assert!(
        other.is_empty(),
        "{} of 40 writes did not say NotReplicated: {other:?}",
        other.len()
    );
    assert_eq!(
        queue.pending().await.unwrap(),
        41,
        "all written on the master"
    );
}

/// A master whose replica is gone (after a failover, the promoted replica
/// has none left) says so at once, delivers on, and waits for the replica
/// again once it is back.
#[tokio::test]
async fn a_master_without_its_replica_says_so_at_once_and_delivers_on() {
    let (master, mut replica) = master_and_replica();
    in_sync(&master, &replica).await;
    let queue = queue(&master).await;
    queue.schedule(Duration::ZERO, "warm up").await.unwrap();
    let job = tokio::time::timeout(WAIT, queue.next())
        .await
        .unwrap()
        .unwrap();
    job.ack().await.unwrap();
    replica.stop();
    eventually("the master knows its replica is gone", WAIT, || {
        let info = master.cli(&["INFO", "replication"]);
        async move { info.contains("connected_slaves:0") }
    })
    .await;

    // The first write finds out (its WAIT counts no replica); the next
    // ones are told at once, without waiting.
    for (i, waited) in [(0, true), (1, false), (2, false)] {
        match queue
            .schedule_with_id(format!("job-{i}"), Duration::ZERO, "x")
            .await
        {
            Err(Error::NotReplicated {
                replicas, within, ..
            }) => {
                assert_eq!(replicas, 0);
                assert_eq!(!within.is_zero(), waited, "job-{i}: within {within:?}");
            }
            other => panic!("expected NotReplicated, got {other:?}"),
        }
    }
    // Claims go on: every job is delivered.
    for _ in 0..3 {
        let job = tokio::time::timeout(WAIT, queue.next())
            .await
            .unwrap()
            .unwrap();
        assert!(matches!(job.ack().await, Err(Error::NotReplicated { .. })));
    }
    assert_eq!(queue.pending().await.unwrap(), 0);
    assert_eq!(queue.leased().await.unwrap(), 0);

    // The replica is back: writes wait for it again.
    replica.restart();
    in_sync(&master, &replica).await;
    let mut n = 3;
    eventually("a schedule reaches the replica again", WAIT, || {
        n += 1;
        let queue = queue.clone();
        async move {
            queue
                .schedule_with_id(format!("job-{n}"), Duration::from_secs(60), "x")
                .await
                .is_ok()
        }
    })
    .await;
}
