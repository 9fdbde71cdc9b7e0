//! No polling: a waiting worker blocks on the wake-up baton and sleeps
//! until its time, and is woken for earlier jobs; a lost wake-up
//! connection costs one re-read.

mod support;

use std::time::Duration;

use support::RedisServer;
use tiered_timer_jobs::Queue;

const WAIT: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_workers_send_almost_no_commands() {
    let server = RedisServer::start();
    let queue = Queue::connect(&server.url(), "idle").await.unwrap();
    let hour = Duration::from_secs(3600);
    queue
        .schedule_many((0..2000).map(|i| (hour + Duration::from_millis(i), b"later".to_vec())))
        .await
        .unwrap();

    // Two waiting workers: one on this queue, one on its own connection.
    let other = Queue::connect(&server.url(), "idle").await.unwrap();
    let workers =
        [queue.clone(), other.clone()].map(|q| tokio::spawn(async move { q.next().await }));

    // Let both make their first claim round and fall asleep: wait until
    // 300 ms pass with no command but our own INFO.
    let settle = tokio::time::Instant::now() + WAIT;
    loop {
        let a = server.commands_processed();
        tokio::time::sleep(Duration::from_millis(300)).await;
        if server.commands_processed() - a <= 1 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < settle,
            "the workers never went quiet"
        );
    }
    let before = server.commands_processed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = server.commands_processed();
    // One INFO of ours between the readings; allow a couple more.
    let by_workers = after - before - 1;
    assert!(
        by_workers <= 2,
        "two idle workers sent {by_workers} commands in 2 s (a 100 ms poller sends 40)"
    );
    for worker in &workers {
        assert!(!worker.is_finished());
    }

    // Woken by pub/sub: a job due in 100 ms is delivered although both
    // workers were sleeping for an hour.
    let soon = queue
        .schedule(Duration::from_millis(100), b"soon".to_vec())
        .await
        .unwrap();
    let mut delivered = None;
    tokio::time::timeout(WAIT, async {
        loop {
            for worker in &workers {
                if worker.is_finished() {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("a waiting worker was woken for the earlier job");
    for worker in workers {
        if worker.is_finished() {
            delivered = Some(worker.await.unwrap().unwrap());
        } else {
            worker.abort();
        }
    }
    let job = delivered.unwrap();
    assert_eq!(job.id(), &soon);
    job.ack().await.unwrap();
}

#[tokio::test]
async fn a_lost_wake_up_connection_costs_one_reread() {
    let server = RedisServer::start();
    let queue = Queue::connect(&server.url(), "lost").await.unwrap();
    queue
        .schedule(Duration::from_secs(3600), b"later".to_vec())
        .await
        .unwrap();
    let worker = {
        let queue = queue.clone();
        tokio::spawn(async move { queue.next().await })
    };
    support::eventually("the worker blocks on its baton", WAIT, || {
        let blocked = support::blocked_client(&server);
        async move { blocked.is_some() }
    })
    .await;
    // Cut the wake-up connection and schedule while it is down: the
    // worker holds a baton for an hour from now and is woken by nothing
    // but its re-read after reconnecting.
    let id = support::blocked_client(&server).unwrap();
    let killed = server.cli(&["CLIENT", "KILL", "ID", &id]);
    assert_eq!(killed.trim(), "1");
    let soon = queue
        .schedule(Duration::ZERO, b"soon".to_vec())
        .await
        .unwrap();
    let job = tokio::time::timeout(WAIT, worker)
        .await
        .expect("the worker re-read after the connection came back")
        .unwrap()
        .unwrap();
    assert_eq!(job.id(), &soon);
    job.ack().await.unwrap();
}

#[tokio::test]
async fn a_waiting_worker_wakes_for_a_lease_that_runs_out() {
    let server = RedisServer::start();
    let queue = Queue::builder(&server.url(), "lease")
        .lease(Duration::from_millis(300))
        .connect()
        .await
        .unwrap();
    let id = queue.schedule(Duration::ZERO, b"x".to_vec()).await.unwrap();
    let held = queue.next().await.unwrap();
    // Nothing else is due: the only wake-up is the lease's expiry, which
    // no message announces.
    let job = tokio::time::timeout(WAIT, queue.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(job.id(), &id);
    assert_eq!(job.attempt(), 2);
    drop(held);
    job.ack().await.unwrap();
}

/// A handle whose worker is busy (or gone) never claims jobs nobody asked
/// for: due jobs left alone stay waiting, however long. (The watch baton
/// its waker holds checks the chain; it used to claim with it and keep
/// the jobs leased in a buffer, so `stats` showed them leased by nobody.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handle_that_does_not_ask_claims_nothing() {
    let server = RedisServer::start();
    let queue = Queue::connect(&server.url(), "unasked").await.unwrap();
    for _ in 0..2 {
        queue
            .schedule(Duration::ZERO, b"first".to_vec())
            .await
            .unwrap();
        let job = queue.next().await.unwrap();
        job.bury("done with").await.unwrap();
    }
    queue
        .schedule(Duration::ZERO, b"held".to_vec())
        .await
        .unwrap();
    let held = queue.next().await.unwrap();
    // Due now, and nobody calls `next` again.
    for _ in 0..2 {
        queue
            .schedule(Duration::ZERO, b"left".to_vec())
            .await
            .unwrap();
    }
    for _ in 0..8 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let stats = queue.stats().await.unwrap();
        assert_eq!(
            (stats.pending, stats.leased),
            (2, 1),
            "due jobs claimed although no `next` asked for them"
        );
    }
    held.ack().await.unwrap();
}
