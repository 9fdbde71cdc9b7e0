//! Connection health (issue 25, targets 3 and 6): a link that stops
//! answering without a FIN or RST (a NAT or load balancer that dropped
//! the flow, a hung host), made by a TCP proxy the test runs and freezes.

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::{eventually, RedisServer, TcpProxy};
use tiered_timer_jobs::{JobId, Queue};

const WAIT: Duration = Duration::from_secs(30);

type Deliveries = Arc<Mutex<Vec<(JobId, Instant)>>>;

/// A worker through `url` that records (and acks) every delivery.
async fn worker(
    url: &str,
    health_check: Duration,
    command_timeout: Duration,
) -> (Deliveries, tokio::task::JoinHandle<()>) {
    let queue = Queue::builder(url, "orders")
        .health_check(health_check)
        .command_timeout(command_timeout)
        .connect()
        .await
        .unwrap();
    let seen: Deliveries = Arc::default();
    let record = seen.clone();
    let task = tokio::spawn(async move {
        loop {
            // Errors (a claim that timed out on the dead link) are the
            // caller's to retry.
            if let Ok(job) = queue.next().await {
                record
                    .lock()
                    .unwrap()
                    .push((job.id().clone(), Instant::now()));
                let _ = job.ack().await;
            }
        }
    });
    (seen, task)
}

/// Waits until exactly one client blocks on the wake-up baton.
async fn until_waiting(server: &RedisServer) {
    eventually("the worker waits", WAIT, || {
        let blocked = support::blocked_client(server);
        async move { blocked.is_some() }
    })
    .await;
}

// A job due 1 s after the link froze is delivered within health_check
// + 2 s (the wake-up connection's reply deadline notices the silence, a
// new connection goes through, Redis is read again). Before, nothing
// noticed: the job was not delivered while the link stayed frozen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_link_is_noticed_within_the_health_check() {
    let server = RedisServer::start();
    let proxy = TcpProxy::start(server.port);
    let producer = Queue::connect(&server.url(), "orders").await.unwrap();
    producer
        .schedule(Duration::from_secs(3600), "later")
        .await
        .unwrap();
    let health = Duration::from_secs(1);
    let (seen, task) = worker(&proxy.url(), health, Duration::from_secs(2)).await;
    until_waiting(&server).await;

    proxy.freeze();
    let frozen = Instant::now();
    let id = producer
        .schedule(Duration::from_secs(1), "after the freeze")
        .await
        .unwrap();
    eventually("delivered through a new connection", WAIT, || {
        let n = seen.lock().unwrap().len();
        async move { n >= 1 }
    })
    .await;
    let (got, at) = seen.lock().unwrap()[0].clone();
    assert_eq!(got, id);
    // The contract: within health_check + 2 s of its due time (1 s after
    // the freeze); 2 s more of margin for a loaded machine.
    let late = at - frozen;
    assert!(
        late <= Duration::from_secs(1) + health + Duration::from_secs(4),
        "delivered {late:?} after the freeze"
    );
    // The old connections' held bytes go through now; nothing is
    // delivered twice, and the queue goes on.
    proxy.thaw();
    let again = producer
        .schedule(Duration::from_millis(200), "after the thaw")
        .await
        .unwrap();
    eventually("the next job too", WAIT, || {
        let n = seen.lock().unwrap().len();
        async move { n >= 2 }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let ids: Vec<JobId> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|(id, _)| id.clone())
        .collect();
    assert_eq!(ids, vec![id, again]);
    task.abort();
}

// Jobs that come due while the link is frozen (for less than the health
// check) are delivered at once when it comes back: the baton that was
// popped on the frozen link carries its time on Redis' clock, so a late
// one fires at once. Before, the wake-up said "due in d ms" and was timed
// from its arrival: jobs due 1 s and 3 s into a 5 s freeze came 1 s and
// 3 s after it ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_due_during_a_short_freeze_come_at_once_when_it_ends() {
    let server = RedisServer::start();
    let proxy = TcpProxy::start(server.port);
    let producer = Queue::connect(&server.url(), "orders").await.unwrap();
    producer
        .schedule(Duration::from_secs(3600), "later")
        .await
        .unwrap();
    let (seen, task) = worker(
        &proxy.url(),
        Duration::from_secs(15),
        Duration::from_secs(10),
    )
    .await;
    until_waiting(&server).await;

    proxy.freeze();
    let one = producer
        .schedule(Duration::from_secs(1), "1 s")
        .await
        .unwrap();
    let three = producer
        .schedule(Duration::from_secs(3), "3 s")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        seen.lock().unwrap().is_empty(),
        "nothing gets through a frozen link"
    );
    proxy.thaw();
    let thawed = Instant::now();
    eventually("both delivered", WAIT, || {
        let n = seen.lock().unwrap().len();
        async move { n >= 2 }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let seen: HashMap<JobId, Instant> = seen.lock().unwrap().iter().cloned().collect();
    assert_eq!(seen.len(), 2, "each once");
    for id in [&one, &three] {
        let after = seen[id] - thawed;
        assert!(
            after < Duration::from_secs(1),
            "{id} came {after:?} after the thaw"
        );
    }
    task.abort();
}
