//! Clean shutdown (`Job::release`, `Queue::close`, `Queue::shutdown`)
//! against a real redis-server started by each test (see `support`).

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::{partitioned_cluster_queue, queue, RedisCluster, RedisServer};
use tiered_timer_jobs::{Error, JobId, Queue};

const WAIT: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_workers_jobs_go_to_another_worker_well_within_a_lease() {
    let server = RedisServer::start();
    let lease = Duration::from_secs(30);
    let stopping = queue(&server, lease, 3).await;
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(
            stopping
                .schedule(Duration::ZERO, format!("{i}"))
                .await
                .unwrap(),
        );
    }
    // The stopping worker holds all three, working on them (renewing) in
    // tasks of their own, and waits for more in a fourth.
    let mut tasks = Vec::new();
    for _ in 0..3 {
        let job = stopping.next().await.unwrap();
        tasks.push(tokio::spawn(async move {
            let _ = job.keep_alive(std::future::pending::<()>()).await;
        }));
    }
    let waiting = tokio::spawn({
        let stopping = stopping.clone();
        async move { stopping.next().await }
    });
    assert_eq!(stopping.leased().await.unwrap(), 3);

    // Another worker is waiting for jobs.
    let delivered = Arc::new(Mutex::new(Vec::<(JobId, u32)>::new()));
    let other = tokio::spawn({
        let queue = queue(&server, lease, 3).await;
        let delivered = delivered.clone();
        async move {
            loop {
                let job = queue.next().await.expect("next");
                delivered
                    .lock()
                    .unwrap()
                    .push((job.id().clone(), job.attempt()));
                job.ack().await.expect("ack");
            }
        }
    });

    // Stop: close, drop the work in hand, wait for the releases.
    let stop = tokio::time::Instant::now();
    stopping.close();
    let woken = tokio::time::timeout(WAIT, waiting).await.unwrap().unwrap();
    assert!(matches!(woken, Err(Error::Closed)), "got {woken:?}");
    for task in &tasks {
        task.abort();
    }
    tokio::time::timeout(WAIT, stopping.shutdown())
        .await
        .expect("shutdown waits only for the releases");
    assert!(matches!(stopping.next().await, Err(Error::Closed)));

    // A second (a thirtieth of the lease) is far more than a release
    // takes (a few round trips); a lost release takes the whole 30 s.
    let within = Duration::from_secs(1);
    loop {
        if delivered.lock().unwrap().len() == 3 {
            break;
        }
        assert!(
            stop.elapsed() < within,
            "after {:?} only {:?} of {ids:?} were redelivered",
            stop.elapsed(),
            delivered.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    eprintln!(
        "three released jobs redelivered {:?} after close",
        stop.elapsed()
    );
    let mut got = delivered.lock().unwrap().clone();
    got.sort();
    ids.sort();
    assert_eq!(
        got,
        ids.into_iter().map(|id| (id, 1)).collect::<Vec<_>>(),
        "each job once more, with the released delivery not counted"
    );
    other.abort();
}

#[tokio::test]
async fn release_hands_a_job_back_at_once_without_counting_the_attempt() {
    let server = RedisServer::start();
    // One attempt only: a counted release would bury the job.
    let queue = queue(&server, Duration::from_secs(30), 1).await;
    let id = queue.schedule(Duration::ZERO, "x").await.unwrap();
    let job = queue.next().await.unwrap();
    let deadline = job.deadline();
    job.release().await.unwrap();
    assert_eq!(queue.pending().await.unwrap(), 1);
    assert_eq!(queue.leased().await.unwrap(), 0);

    let again = tokio::time::timeout(Duration::from_secs(5), queue.next())
        .await
        .expect("due at once, not after the 30 s lease")
        .unwrap();
    assert_eq!(again.id(), &id);
    assert_eq!(again.attempt(), 1, "the release did not count");
    assert_eq!(again.deadline(), deadline, "it keeps its due time");
    assert!(queue.dead_letters(10).await.unwrap().is_empty());

    // A release after the lease was lost changes nothing.
    support::steal_lease(&server, "orders", id.as_str());
    match again.release().await {
        Err(Error::LeaseExpired { id: lost }) => assert_eq!(lost, id),
        other => panic!("expected LeaseExpired, got {other:?}"),
    }
    assert_eq!(queue.leased().await.unwrap(), 1);
    assert_eq!(queue.pending().await.unwrap(), 0);
}

#[tokio::test]
async fn a_released_job_wakes_a_waiting_worker() {
    let server = RedisServer::start();
    let lease = Duration::from_secs(30);
    let holder = queue(&server, lease, 3).await;
    let waiter = queue(&server, lease, 3).await;
    holder
        .schedule(Duration::from_secs(3600), "later")
        .await
        .unwrap();
    let id = holder.schedule(Duration::ZERO, "now").await.unwrap();
    let job = holder.next().await.unwrap();
    assert_eq!(job.id(), &id);
    // The waiter has read "next due in an hour, next expiry in 30 s" and
    // sleeps; the release's pub/sub message wakes it.
    let waiting = tokio::spawn(async move { waiter.next().await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiting.is_finished());
    job.release().await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("woken by the release, not after the lease")
        .unwrap()
        .unwrap();
    assert_eq!(got.id(), &id);
    assert_eq!(got.attempt(), 1);
}

#[tokio::test]
async fn a_closed_queue_hands_out_nothing_but_its_jobs_can_finish() {
    let server = RedisServer::start();
    let queue = queue(&server, Duration::from_secs(30), 3).await;
    queue.schedule(Duration::ZERO, "a").await.unwrap();
    let held = queue.next().await.unwrap();
    let b = queue.schedule(Duration::ZERO, "b").await.unwrap();

    let clone = queue.clone();
    assert!(!clone.is_closed());
    queue.close();
    queue.close(); // twice is fine
    assert!(clone.is_closed(), "clones share the flag");

    let before = server.commands_processed();
    assert!(matches!(clone.next().await, Err(Error::Closed)));
    assert_eq!(
        server.commands_processed() - before,
        1, // our own INFO
        "a closed queue's next sends nothing"
    );
    assert_eq!(queue.pending().await.unwrap(), 1, "b is left for others");

    // The job in hand can still be renewed and acked; scheduling works.
    held.extend_lease(Duration::from_secs(60)).await.unwrap();
    held.ack().await.unwrap();
    queue.schedule(Duration::ZERO, "c").await.unwrap();

    // Another process' queue is not closed.
    let other = Queue::connect(&server.url(), "orders").await.unwrap();
    let got = other.next().await.unwrap();
    assert_eq!(got.id(), &b);
    got.ack().await.unwrap();
}

#[tokio::test]
async fn shutdown_waits_for_jobs_in_hand_and_a_job_dropped_before_close_keeps_its_lease() {
    let server = RedisServer::start();
    let queue = queue(&server, Duration::from_secs(30), 3).await;
    queue.schedule(Duration::ZERO, "a").await.unwrap();
    queue.schedule(Duration::ZERO, "b").await.unwrap();
    let first = queue.next().await.unwrap();
    let second = queue.next().await.unwrap();

    // Dropped while the queue is open: a crash, left to its lease.
    drop(first);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(queue.leased().await.unwrap(), 2);

    let shutdown = tokio::spawn({
        let queue = queue.clone();
        async move { queue.shutdown().await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!shutdown.is_finished(), "a job is still in hand");
    second.ack().await.unwrap();
    tokio::time::timeout(WAIT, shutdown)
        .await
        .expect("shutdown returns once the last job is acked")
        .unwrap();
    assert_eq!(queue.leased().await.unwrap(), 1, "the crashed one waits");
    assert_eq!(queue.pending().await.unwrap(), 0);
}

/// The new scripts take the same keys as the others, so they run in one
/// slot per partition on a cluster too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_extend_and_close_work_on_a_partitioned_cluster_queue() {
    let cluster = RedisCluster::start(3);
    let stopping = partitioned_cluster_queue(&cluster).await;
    let other = partitioned_cluster_queue(&cluster).await;
    let mut ids = Vec::new();
    for i in 0..12 {
        ids.push(
            stopping
                .schedule(Duration::ZERO, format!("{i}"))
                .await
                .unwrap(),
        );
    }
    let mut held = Vec::new();
    for _ in 0..12 {
        let job = stopping.next().await.unwrap();
        job.extend_lease(Duration::from_secs(60)).await.unwrap();
        held.push(job);
    }
    stopping.close();
    drop(held); // released, one script per job on its partition's node
    tokio::time::timeout(WAIT, stopping.shutdown())
        .await
        .unwrap();
    let mut got = Vec::new();
    for _ in 0..12 {
        let job = tokio::time::timeout(Duration::from_secs(5), other.next())
            .await
            .expect("released, not left to the 60 s lease")
            .unwrap();
        assert_eq!(job.attempt(), 1);
        got.push(job.id().clone());
        job.ack().await.unwrap();
    }
    got.sort();
    ids.sort();
    assert_eq!(got, ids);
}
