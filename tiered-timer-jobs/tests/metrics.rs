//! The `metrics` feature: a recorder installed by the test sees exactly
//! the claims, acks, retries, failures, dead letters, lost leases and
//! renewals that the test caused against a real redis-server, and one
//! lateness sample per claim from the waiting jobs.

mod support;

use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use metrics_util::CompositeKey;

/// One snapshot (taking one resets the recorder's counters).
type Snapshot = Vec<(
    CompositeKey,
    Option<metrics::Unit>,
    Option<metrics::SharedString>,
    DebugValue,
)>;
use support::RedisServer;
use tiered_timer_jobs::{Error, Fate, Job, Queue};

const WAIT: Duration = Duration::from_secs(20);

async fn next(queue: &Queue) -> Job {
    tokio::time::timeout(WAIT, queue.next())
        .await
        .expect("a job within 20 s")
        .expect("next")
}

/// The counter `name` of queue `queue`, 0 if never reported.
fn counter(snapshot: &Snapshot, name: &str, queue: &str) -> u64 {
    values(snapshot, name, queue)
        .into_iter()
        .map(|value| match value {
            DebugValue::Counter(n) => *n,
            other => panic!("{name} is not a counter: {other:?}"),
        })
        .sum()
}

/// The samples of histogram `name` of queue `queue`, in seconds.
fn samples(snapshot: &Snapshot, name: &str, queue: &str) -> Vec<f64> {
    values(snapshot, name, queue)
        .into_iter()
        .flat_map(|value| match value {
            DebugValue::Histogram(samples) => samples.iter().map(|s| s.into_inner()),
            other => panic!("{name} is not a histogram: {other:?}"),
        })
        .collect()
}

fn values<'a>(snapshot: &'a Snapshot, name: &str, queue: &str) -> Vec<&'a DebugValue> {
    snapshot
        .iter()
        .filter(|(key, _, _, _)| {
            let key = key.key();
            key.name() == name
                && key
                    .labels()
                    .any(|label| label.key() == "queue" && label.value() == queue)
        })
        .map(|(_, _, _, value)| value)
        .collect()
}

/// The recorder of this test binary (a process has one), and a lock that
/// makes its tests take turns: a snapshot resets every counter.
async fn recorder() -> (
    &'static metrics_util::debugging::Snapshotter,
    tokio::sync::MutexGuard<'static, ()>,
) {
    static RECORDER: OnceLock<metrics_util::debugging::Snapshotter> = OnceLock::new();
    static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let snapshotter = RECORDER.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder
            .install()
            .expect("the only recorder of this test binary");
        snapshotter
    });
    let turn = TURN.lock().await;
    // What an earlier test left is not this one's.
    let _ = snapshotter.snapshot();
    (snapshotter, turn)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_and_lateness_match_what_happened() {
    let (snapshotter, _turn) = recorder().await;

    let server = RedisServer::start();
    let queue = Queue::builder(&server.url(), "metered")
        .lease(Duration::from_secs(2))
        .max_attempts(2)
        .connect()
        .await
        .unwrap();
    // Five jobs due 5 s ago and earlier, in a known order.
    let t0 = server.now_ms().await;
    for i in 1..=5u64 {
        let due = SystemTime::UNIX_EPOCH + Duration::from_millis(t0 - 10_000 + i * 1000);
        queue.schedule_at(due, format!("j{i}")).await.unwrap();
    }
    let name = |job: &Job| String::from_utf8(job.payload().to_vec()).unwrap();

    let j1 = next(&queue).await;
    assert_eq!(name(&j1), "j1");
    j1.ack().await.unwrap();
    let j2 = next(&queue).await;
    assert_eq!(name(&j2), "j2");
    j2.retry_after(Duration::ZERO).await.unwrap();
    let j3 = next(&queue).await;
    assert_eq!(name(&j3), "j3");
    assert_eq!(j3.fail("boom").await.unwrap(), Fate::Retried); // back in 1 s
    let j4 = next(&queue).await;
    assert_eq!(name(&j4), "j4");
    j4.bury("bad payload").await.unwrap();
    let j5 = next(&queue).await;
    assert_eq!(name(&j5), "j5");
    j5.extend_lease(Duration::from_millis(200)).await.unwrap(); // shortened
    tokio::time::sleep(Duration::from_millis(400)).await;
    let lost = j5.ack().await;
    assert!(matches!(lost, Err(Error::LeaseExpired { .. })), "{lost:?}");

    // j5 again (its lease ran out: a redelivery), j2 (retried), then j3
    // after its backoff, each on its second and last attempt.
    for expected in ["j5", "j2"] {
        let job = next(&queue).await;
        assert_eq!((name(&job), job.attempt()), (expected.to_owned(), 2));
        job.ack().await.unwrap();
    }
    let j3 = next(&queue).await;
    assert_eq!((name(&j3), j3.attempt()), ("j3".to_owned(), 2));
    drop(j3); // its last lease runs out: the next claim buries it
    let nothing = tokio::time::timeout(Duration::from_secs(4), queue.next()).await;
    assert!(nothing.is_err(), "nothing left to deliver");
    let stats = queue.stats().await.unwrap();
    assert_eq!((stats.pending, stats.leased, stats.dead), (0, 0, 2));
    // Acks of many at once count too: two by ack_many, one in the
    // background.
    queue
        .schedule_many((0..3).map(|_| (Duration::ZERO, "k")))
        .await
        .unwrap();
    let (k1, k2, k3) = (next(&queue).await, next(&queue).await, next(&queue).await);
    assert!(queue.ack_many([k1, k2]).await.unwrap().is_empty());
    k3.ack_batched();
    assert!(queue.flush_acks().await.unwrap().is_empty());

    let snapshot: Snapshot = snapshotter.snapshot().into_vec();
    let count = |name| counter(&snapshot, name, "metered");
    assert_eq!(count("ttr_jobs_claimed_total"), 11);
    assert_eq!(count("ttr_jobs_acked_total"), 6);
    assert_eq!(count("ttr_jobs_retried_total"), 2);
    assert_eq!(count("ttr_jobs_failed_total"), 2);
    assert_eq!(count("ttr_jobs_dead_lettered_total"), 2);
    assert_eq!(count("ttr_leases_lost_total"), 1);
    assert_eq!(count("ttr_lease_renewals_total"), 1);
    // One sample per claim from the waiting jobs (not j5's redelivery).
    // j1 and j4 were due 9 s and 6 s before the test began, j5 5 s.
    let lateness = samples(&snapshot, "ttr_claim_lateness_seconds", "metered");
    assert_eq!(lateness.len(), 10, "{lateness:?}");
    assert!(
        lateness[0] >= 9.0 && lateness[0] < 9.0 + 20.0,
        "{lateness:?}"
    );
    assert!(lateness[4] >= 5.0, "{lateness:?}");
    assert!(lateness.iter().all(|&s| s >= 0.0), "{lateness:?}");
    // Another queue's name sees none of it.
    assert_eq!(counter(&snapshot, "ttr_jobs_claimed_total", "other"), 0);
}

/// `Job::ack_and_next` acks as `Job::ack` does, and says so the same way:
/// each ack made with a claim is counted once, whether the claim found a
/// job or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_made_with_the_next_claim_are_counted() {
    let (snapshotter, _turn) = recorder().await;
    let server = RedisServer::start();
    let queue = Queue::builder(&server.url(), "chained")
        .connect()
        .await
        .unwrap();
    queue
        .schedule_many((0..3).map(|_| (Duration::ZERO, "k")))
        .await
        .unwrap();
    let mut job = next(&queue).await;
    for _ in 0..2 {
        job = tokio::time::timeout(WAIT, job.ack_and_next())
            .await
            .expect("the next job within 20 s")
            .unwrap();
    }
    // The last one: no job is left to claim with it.
    let nothing = tokio::time::timeout(Duration::from_millis(500), job.ack_and_next()).await;
    assert!(nothing.is_err(), "nothing left to deliver");
    assert_eq!(queue.stats().await.unwrap().leased, 0);

    let snapshot: Snapshot = snapshotter.snapshot().into_vec();
    let count = |name| counter(&snapshot, name, "chained");
    assert_eq!(count("ttr_jobs_claimed_total"), 3);
    assert_eq!(count("ttr_jobs_acked_total"), 3);
}
