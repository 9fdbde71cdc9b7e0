//! `tracing` events, caught by a small capturing subscriber, against a
//! real redis-server started by the test (see `support`).

mod support;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::{eventually, RedisServer};
use tiered_timer_jobs::Queue;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// One event as seen by the subscriber.
#[derive(Debug, Clone)]
struct Seen {
    level: Level,
    target: String,
    fields: HashMap<String, String>,
}

impl Seen {
    fn message(&self) -> &str {
        self.fields.get("message").map_or("", String::as_str)
    }
}

/// Records every event; spans are accepted and ignored.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<Seen>>>);

struct Fields<'a>(&'a mut HashMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = HashMap::new();
        event.record(&mut Fields(&mut fields));
        self.0.lock().unwrap().push(Seen {
            level: *event.metadata().level(),
            target: event.metadata().target().to_owned(),
            fields,
        });
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

impl Capture {
    /// The events whose message contains `text`.
    fn find(&self, text: &str) -> Vec<Seen> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|seen| seen.message().contains(text))
            .cloned()
            .collect()
    }
}

// One thread (the default test runtime), so the thread's default
// subscriber sees the queue's tasks too.
#[tokio::test]
async fn redelivery_dead_letters_and_the_rest_are_traced() {
    let capture = Capture::default();
    let _guard = tracing::subscriber::set_default(capture.clone());
    let server = RedisServer::start();
    let queue = Queue::builder(&server.url(), "traced")
        .lease(Duration::from_millis(150))
        .max_attempts(2)
        .connect()
        .await
        .unwrap();

    // Claimed and acked.
    let done = queue
        .schedule_with_id("done", Duration::ZERO, "x")
        .await
        .unwrap();
    queue.next().await.unwrap().ack().await.unwrap();

    // Claimed, dropped (lease lost), redelivered, dropped, buried.
    let doomed = queue
        .schedule_with_id("doomed", Duration::ZERO, "x")
        .await
        .unwrap();
    drop(queue.next().await.unwrap());
    let second = queue.next().await.unwrap();
    assert_eq!((second.id(), second.attempt()), (&doomed, 2));
    drop(second);
    eventually("the job is buried", Duration::from_secs(20), || async {
        let _ = tokio::time::timeout(Duration::from_millis(50), queue.next()).await;
        !queue.dead_letters(1).await.unwrap().is_empty()
    })
    .await;

    // Released, then renewed.
    let kept = queue
        .schedule_with_id("kept", Duration::ZERO, "x")
        .await
        .unwrap();
    queue.next().await.unwrap().release().await.unwrap();
    let job = queue.next().await.unwrap();
    job.extend_lease(Duration::from_secs(5)).await.unwrap();
    job.ack().await.unwrap();

    let field = |seen: &Seen, name: &str| seen.fields.get(name).cloned().unwrap_or_default();
    let redelivered = capture.find("redelivered");
    assert_eq!(redelivered.len(), 1, "{redelivered:?}");
    let event = &redelivered[0];
    assert_eq!(event.level, Level::WARN);
    assert!(
        event.target.starts_with("tiered_timer_jobs"),
        "{}",
        event.target
    );
    assert_eq!(field(event, "queue"), "traced");
    assert_eq!(field(event, "job"), doomed.as_str());
    assert_eq!(field(event, "attempt"), "2");

    let dead = capture.find("dead letters");
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0].level, Level::WARN);
    assert_eq!(field(&dead[0], "job"), doomed.as_str());
    assert_eq!(field(&dead[0], "queue"), "traced");

    let claimed = capture.find("claimed");
    assert!(claimed.iter().all(|seen| seen.level == Level::DEBUG));
    for id in [&done, &doomed, &kept] {
        assert!(
            claimed.iter().any(|seen| field(seen, "job") == id.as_str()),
            "no claim event for {id}"
        );
    }
    let acked = capture.find("acked");
    assert_eq!(acked.len(), 2, "{acked:?}");
    let released = capture.find("released");
    assert_eq!(released.len(), 1, "{released:?}");
    assert_eq!(field(&released[0], "job"), kept.as_str());
    assert_eq!(capture.find("lease extended").len(), 1);
    assert_eq!(capture.find("wake-up connection established").len(), 1);
}

#[tokio::test]
async fn a_lost_wake_up_connection_is_traced_as_a_reconnect() {
    let capture = Capture::default();
    let _guard = tracing::subscriber::set_default(capture.clone());
    let server = RedisServer::start();
    let queue = Queue::connect(&server.url(), "traced").await.unwrap();
    let waiting = {
        let queue = queue.clone();
        tokio::spawn(async move { queue.next().await })
    };
    eventually("connected", Duration::from_secs(20), || {
        let n = capture.find("wake-up connection established").len();
        async move { n == 1 }
    })
    .await;
    support::eventually("blocked", Duration::from_secs(20), || {
        let id = support::blocked_client(&server);
        async move { id.is_some() }
    })
    .await;
    let id = support::blocked_client(&server).unwrap();
    server.cli(&["CLIENT", "KILL", "ID", &id]);
    eventually("lost and re-established", Duration::from_secs(20), || {
        let (lost, back) = (
            capture.find("wake-up connection lost").len(),
            capture.find("re-established").len(),
        );
        async move { lost == 1 && back == 1 }
    })
    .await;
    assert_eq!(
        capture.find("wake-up connection lost")[0].level,
        Level::WARN
    );
    assert_eq!(
        capture.find("re-established")[0]
            .fields
            .get("queue")
            .map(String::as_str),
        Some("traced")
    );
    waiting.abort();
    drop(queue);
}

// `fail` and `bury` (the operator's view) finish a job like `ack`: they
// are traced with their reason, and a queue closed meanwhile does not try
// to release the job when it is dropped at the end of the call.
#[tokio::test]
async fn failures_are_traced_and_not_released_after_close() {
    let capture = Capture::default();
    let _guard = tracing::subscriber::set_default(capture.clone());
    let server = RedisServer::start();
    let queue = Queue::builder(&server.url(), "failing")
        .max_attempts(5)
        .connect()
        .await
        .unwrap();
    let retried = queue
        .schedule_with_id("retried", Duration::ZERO, "x")
        .await
        .unwrap();
    let buried = queue
        .schedule_with_id("buried", Duration::ZERO, "x")
        .await
        .unwrap();
    let first = queue.next().await.unwrap();
    let second = queue.next().await.unwrap();
    queue.close();
    let (to_fail, to_bury) = if first.id() == &retried {
        (first, second)
    } else {
        (second, first)
    };
    to_fail.fail("provider said 503").await.unwrap();
    to_bury.bury("payload does not parse").await.unwrap();
    // A release spawned by a wrong drop would run on this runtime; give it
    // time to show up before looking.
    tokio::time::sleep(Duration::from_millis(200)).await;

    let field = |seen: &Seen, name: &str| seen.fields.get(name).cloned().unwrap_or_default();
    let failed = capture.find("failed; retried");
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(field(&failed[0], "job"), retried.as_str());
    assert_eq!(field(&failed[0], "reason"), "provider said 503");
    let dead = capture.find("dead letters");
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0].level, Level::WARN);
    assert_eq!(field(&dead[0], "job"), buried.as_str());
    assert_eq!(field(&dead[0], "reason"), "payload does not parse");
    assert!(
        capture.find("released").is_empty() && capture.find("after close").is_empty(),
        "a finished job was handed back on drop"
    );
}

// A retry on the last attempt buries the job: traced as a dead letter,
// not as a retry.
#[tokio::test]
async fn a_retry_on_the_last_attempt_is_traced_as_a_dead_letter_only() {
    let capture = Capture::default();
    let _guard = tracing::subscriber::set_default(capture.clone());
    let server = RedisServer::start();
    let queue = Queue::builder(&server.url(), "last")
        .max_attempts(1)
        .connect()
        .await
        .unwrap();
    queue.schedule(Duration::ZERO, "x").await.unwrap();
    queue
        .next()
        .await
        .unwrap()
        .retry_after(Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(queue.dead_letters(10).await.unwrap().len(), 1);
    assert_eq!(capture.find("dead letters").len(), 1);
    assert!(
        capture.find("job retried").is_empty(),
        "{:?}",
        capture.find("job retried")
    );
}

/// The targets events are emitted under, as the crate docs list them:
/// pinned in `src/targets.rs`, so that moving code between modules does
/// not change what an application filters on.
const TARGETS: [&str; 5] = [
    "tiered_timer_jobs::job",
    "tiered_timer_jobs::queue",
    "tiered_timer_jobs::wake",
    "tiered_timer_jobs::redis",
    "tiered_timer_jobs::embedded",
];

/// Every event of a busy queue's life (claims, acks alone and many at a
/// time, a failure and a retry on the last attempt, a lease run out on
/// the last attempt, close), on Redis and on an embedded store, carries
/// one of the documented targets,
/// and each kind of event the one of its subject: a job's events
/// `::job`, a handle's `::queue`, the waker's `::wake`.
#[tokio::test]
async fn every_event_carries_a_documented_target() {
    let capture = Capture::default();
    let _guard = tracing::subscriber::set_default(capture.clone());
    let server = RedisServer::start();
    let queue = Queue::builder(&server.url(), "targets")
        .lease(Duration::from_millis(300))
        .max_attempts(1)
        .connect()
        .await
        .unwrap();
    life_of_a_queue(&queue).await;
    #[cfg(feature = "embedded")]
    {
        let dir = support::backend::Store::embedded();
        let queue = Queue::builder(&dir.url(), "targets")
            .lease(Duration::from_millis(300))
            .max_attempts(1)
            .connect()
            .await
            .unwrap();
        life_of_a_queue(&queue).await;
    }

    let seen = capture.0.lock().unwrap().clone();
    assert!(!seen.is_empty());
    let stray: Vec<&Seen> = seen
        .iter()
        .filter(|event| !TARGETS.contains(&event.target.as_str()))
        .collect();
    assert!(
        stray.is_empty(),
        "events off the documented targets: {stray:#?}"
    );
    for (message, target) in [
        ("job claimed", "tiered_timer_jobs::job"),
        ("job acked", "tiered_timer_jobs::job"),
        ("dead letters: it failed", "tiered_timer_jobs::job"),
        ("retried on its last attempt", "tiered_timer_jobs::job"),
        // The lease that ran out on the last attempt, buried by a claim.
        ("moved to the dead letters: its", "tiered_timer_jobs::job"),
        ("queue closed", "tiered_timer_jobs::queue"),
        ("wake-up connection established", "tiered_timer_jobs::wake"),
    ] {
        let found = capture.find(message);
        assert!(!found.is_empty(), "no event {message:?}");
        for event in found {
            assert_eq!(event.target, target, "{message}");
        }
    }
}

/// Claims, acks (one, and many), a failure and a retry on the last
/// attempt (each buries its job), a lease that runs out on the last
/// attempt, and close.
async fn life_of_a_queue(queue: &Queue) {
    queue
        .schedule_many((0..5).map(|_| (Duration::ZERO, "x")))
        .await
        .unwrap();
    let next = || async { queue.next().await.unwrap() };
    next().await.ack().await.unwrap();
    let (a, b) = (next().await, next().await);
    assert!(queue.ack_many([a, b]).await.unwrap().is_empty());
    next()
        .await
        .retry_after_with_reason(Duration::ZERO, "again")
        .await
        .unwrap();
    next().await.retry_after(Duration::ZERO).await.unwrap();
    // Dropped on its last attempt: its lease runs out, and the claim
    // that finds it buries it.
    queue
        .schedule_with_id("dropped", Duration::ZERO, "x")
        .await
        .unwrap();
    drop(next().await);
    eventually(
        "the dropped job is buried",
        Duration::from_secs(20),
        || async {
            let _ = tokio::time::timeout(Duration::from_millis(50), queue.next()).await;
            queue.dead_letters(10).await.unwrap().len() == 3
        },
    )
    .await;
    queue.close();
}
