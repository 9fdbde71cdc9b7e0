//! A worker killed while it holds the wake-up baton (between its
//! `BZPOPMIN` and its claim) costs seconds, never the queue: the contract's
//! "a dead node or a silent connection costs seconds" (issue 25).
//!
//! The killed worker is a child process that pops the baton exactly as a
//! worker does (`redis-cli BZPOPMIN`) and is then SIGKILLed: the baton is
//! gone with it, as with a worker killed at that moment.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::{eventually, RedisServer};
use tiered_timer_jobs::{JobId, Queue};
use tokio::time::Instant;

/// How late past its due time the job may run: the watch baton's 2 s,
/// plus margins for a loaded machine (the contract's bound: a few
/// seconds; before the watch it was about 10 s, up to 50 s on an idle
/// queue).
const BOUND: Duration = Duration::from_secs(5);

fn blocked(server: &RedisServer) -> usize {
    server
        .cli(&["CLIENT", "LIST"])
        .lines()
        .filter(|l| l.contains("cmd=bzpopmin"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_baton_lost_with_a_killed_worker_costs_seconds() {
    let server = RedisServer::start();
    let port = server
        .url()
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .unwrap()
        .to_owned();
    let producer = Queue::builder(&server.url(), "lost")
        .connect()
        .await
        .unwrap();

    // The worker to be killed blocks first, so Redis hands it the first
    // baton (blocked clients are served in the order they blocked).
    let mut doomed = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "redis-cli -p {port} BZPOPMIN 'ttr:{{lost}}:marker' 0; exec sleep 600"
        ))
        .stdout(Stdio::piped())
        .spawn()
        .expect("run redis-cli");
    eventually("the doomed worker waits", Duration::from_secs(10), || {
        let n = blocked(&server);
        async move { n == 1 }
    })
    .await;

    // A healthy worker, its own queue, waits too.
    let worker = Queue::builder(&server.url(), "lost")
        .connect()
        .await
        .unwrap();
    let delivered: Arc<Mutex<Vec<(JobId, Instant)>>> = Arc::default();
    let log = delivered.clone();
    let task = tokio::spawn(async move {
        loop {
            let job = worker.next().await.expect("next");
            log.lock().unwrap().push((job.id().clone(), Instant::now()));
            job.ack().await.expect("ack");
        }
    });
    eventually("both workers wait", Duration::from_secs(10), || {
        let n = blocked(&server);
        async move { n == 2 }
    })
    .await;

    let scheduled = Instant::now();
    let delay = Duration::from_secs(1);
    let id = producer.schedule(delay, "job").await.unwrap();

    // The doomed worker got the job's baton (its member is its time, not
    // the watch `w`), and dies with it.
    let mut popped = BufReader::new(doomed.stdout.take().unwrap()).lines();
    let key = popped.next().unwrap().unwrap();
    let member = popped.next().unwrap().unwrap();
    assert_eq!(key, "ttr:{lost}:marker");
    assert!(
        member.parse::<u64>().is_ok(),
        "popped {member:?}, not the job's baton"
    );
    doomed.kill().unwrap();
    doomed.wait().unwrap();

    eventually("the job is delivered", Duration::from_secs(30), || {
        let n = delivered.lock().unwrap().len();
        async move { n >= 1 }
    })
    .await;
    let (got, at) = delivered.lock().unwrap()[0].clone();
    assert_eq!(got, id);
    let late = at.duration_since(scheduled).saturating_sub(delay);
    assert!(late <= BOUND, "delivered {late:?} after its due time");

    // Once, and the chain goes on: a later job still wakes the worker.
    let next = producer
        .schedule(Duration::from_millis(300), "next")
        .await
        .unwrap();
    eventually("the next job is delivered", Duration::from_secs(10), || {
        let n = delivered.lock().unwrap().len();
        async move { n >= 2 }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let ids: Vec<JobId> = delivered
        .lock()
        .unwrap()
        .iter()
        .map(|(id, _)| id.clone())
        .collect();
    assert_eq!(ids, vec![id, next]);
    task.abort();
}
