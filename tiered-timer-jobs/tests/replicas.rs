//! `replicas(n)` (issue 25, target 5) on a master with one replica: every
//! write waits for the replica (`WAIT`), and a write that did not reach it
//! is `Error::NotReplicated`; a claim that did not is handed back, not
//! delivered.

mod support;

use std::time::Duration;

use support::{eventually, RedisServer};
use tiered_timer_jobs::{Error, Queue};

const WAIT: Duration = Duration::from_secs(20);

#[tokio::test]
async fn writes_wait_for_the_replica_and_say_when_it_is_not_there() {
    let master = RedisServer::start();
    let replica = RedisServer::start_with(&[
        "--appendonly",
        "no",
        "--replicaof",
        "127.0.0.1",
        &master.port.to_string(),
    ]);
    eventually("the replica is in sync", WAIT, || {
        let info = replica.cli(&["INFO", "replication"]);
        async move { info.contains("master_link_status:up") }
    })
    .await;
    let queue = Queue::builder(&master.url(), "orders")
        .replicas(1)
        .replica_timeout(Duration::from_millis(300))
        .connect()
        .await
        .unwrap();
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
    // A claim that did not reach the replica is not handed out (a failover
    // could give the job to another worker): it is handed back.
    match tokio::time::timeout(WAIT, queue.next()).await.unwrap() {
        Err(Error::NotReplicated { .. }) => {}
        other => panic!("expected NotReplicated, got {other:?}"),
    }
    eventually("the job was handed back", WAIT, || async {
        queue.leased().await.unwrap() == 0
    })
    .await;
    assert_eq!(queue.pending().await.unwrap(), 1);
    replica.thaw();
    let job = tokio::time::timeout(WAIT, queue.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(job.attempt(), 1, "the handed-back claim did not count");
    job.ack().await.unwrap();
}
