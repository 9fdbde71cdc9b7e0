//! The delivery contract, against a real redis-server started by each
//! test (see `support`).

mod support;

use std::collections::HashSet;
use std::time::{Duration, SystemTime};

use support::{deliver_all, eventually, RedisServer};
use tiered_timer_jobs::{Error, Job, JobId, Queue};

const WAIT: Duration = Duration::from_secs(20);

async fn queue(server: &RedisServer, lease: Duration) -> Queue {
    support::queue(server, lease, 3).await
}

/// `id`'s due time (`"due"`, while waiting) or lease expiry (`"leased"`).
async fn score(server: &RedisServer, set: &str, id: &JobId) -> Option<u64> {
    match set {
        "due" => support::due_ms(&server.url(), "orders", id.as_str()).await,
        _ => support::lease_expiry_ms(&server.url(), "orders", id.as_str()).await,
    }
}

/// A job's deadline in ms since the epoch (the unit of the due scores).
fn deadline_ms(job: &Job) -> u64 {
    job.deadline()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// The ids of up to ten dead letters, newest death first.
async fn dead_ids(queue: &Queue) -> Vec<JobId> {
    let dead = queue.dead_letters(10).await.unwrap();
    dead.into_iter().map(|d| d.id).collect()
}

async fn nothing_delivered_within(queue: &Queue, within: Duration) {
    if let Ok(job) = tokio::time::timeout(within, queue.next()).await {
        panic!("unexpected delivery: {:?}", job);
    }
}

#[tokio::test]
async fn schedule_next_ack_removes_the_job() {
    let server = RedisServer::start();
    let queue = queue(&server, Duration::from_secs(30)).await;
    let id = queue
        .schedule(Duration::ZERO, b"order 42".to_vec())
        .await
        .unwrap();
    assert_eq!(queue.pending().await.unwrap(), 1);

    let job = tokio::time::timeout(WAIT, queue.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(job.id(), &id);
    assert_eq!(job.payload(), b"order 42");
    assert_eq!(job.attempt(), 1);
    assert_eq!(queue.pending().await.unwrap(), 0);
    assert_eq!(queue.leased().await.unwrap(), 1);

    job.ack().await.unwrap();
    assert_eq!(queue.leased().await.unwrap(), 0);
    assert_eq!(server.job_keys(), "0", "ack leaves nothing behind");
    nothing_delivered_within(&queue, Duration::from_millis(300)).await;
}

#[tokio::test]
async fn never_early_by_redis_clock() {
    let server = RedisServer::start();
    let lease = Duration::from_secs(30);
    let queue = queue(&server, lease).await;
    let mut expected = Vec::new();
    for delay_ms in [0u64, 1, 7, 50, 120, 250, 400] {
        let before = server.now_ms().await;
        let id = queue
            .schedule(Duration::from_millis(delay_ms), format!("{delay_ms}"))
            .await
            .unwrap();
        expected.push((id, before + delay_ms));
    }
    for _ in 0..expected.len() {
        let job = tokio::time::timeout(WAIT, queue.next())
            .await
            .unwrap()
            .unwrap();
        let (_, earliest) = expected.iter().find(|(id, _)| id == job.id()).unwrap();
        let deadline = deadline_ms(&job);
        assert!(deadline >= *earliest, "deadline counts from Redis' now");
        // The lease's expiry is Redis' now at the claim plus the lease.
        let expiry = score(&server, "leased", job.id()).await.unwrap();
        let claimed_at = expiry - lease.as_millis() as u64;
        assert!(
            claimed_at >= deadline,
            "claimed at {claimed_at}, before its deadline {deadline}"
        );
        job.ack().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_job_is_claimed_by_exactly_one_worker() {
    let server = RedisServer::start();
    let producer = queue(&server, Duration::from_secs(30)).await;
    let mut ids = HashSet::new();
    for i in 0..200 {
        ids.insert(
            producer
                .schedule(Duration::ZERO, format!("{i}"))
                .await
                .unwrap(),
        );
    }
    // Eight workers: four clones of one queue, four separate connections.
    let mut queues = Vec::new();
    for w in 0..8 {
        queues.push(if w % 2 == 0 {
            producer.clone()
        } else {
            queue(&server, Duration::from_secs(30)).await
        });
    }
    let delivered = deliver_all(queues, ids.len(), WAIT).await;
    let unique: HashSet<JobId> = delivered.iter().cloned().collect();
    assert_eq!(unique.len(), delivered.len(), "a job was delivered twice");
    assert_eq!(unique, ids, "every job was delivered");
}

#[tokio::test]
async fn a_dropped_job_is_redelivered_after_its_lease() {
    let server = RedisServer::start();
    let queue = queue(&server, Duration::from_millis(300)).await;
    let id = queue.schedule(Duration::ZERO, b"x".to_vec()).await.unwrap();
    let first = queue.next().await.unwrap();
    assert_eq!(first.attempt(), 1);
    drop(first); // the worker "crashed"
    let second = tokio::time::timeout(WAIT, queue.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(second.id(), &id);
    assert_eq!(second.attempt(), 2);
    assert_eq!(second.payload(), b"x");
    second.ack().await.unwrap();
    assert_eq!(server.job_keys(), "0");
}

#[tokio::test]
async fn ack_after_the_lease_was_taken_over_fails_and_leaves_the_redelivery() {
    let server = RedisServer::start();
    let slow = queue(&server, Duration::from_millis(300)).await;
    let other = queue(&server, Duration::from_secs(30)).await;
    let id = slow.schedule(Duration::ZERO, b"x".to_vec()).await.unwrap();
    let stale = slow.next().await.unwrap();
    // `other` claims with its own 30 s lease once the 300 ms one runs out.
    let fresh = tokio::time::timeout(WAIT, other.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(fresh.id(), &id);
    assert_eq!(fresh.attempt(), 2);

    match stale.ack().await {
        Err(Error::LeaseExpired { id: lost }) => assert_eq!(lost, id),
        other => panic!("expected LeaseExpired, got {other:?}"),
    }
    assert_eq!(
        other.leased().await.unwrap(),
        1,
        "the redelivered job is untouched"
    );
    fresh.ack().await.unwrap();
    assert_eq!(other.leased().await.unwrap(), 0);
}

#[tokio::test]
async fn ack_after_the_lease_ran_out_fails_even_before_redelivery() {
    let server = RedisServer::start();
    let queue = queue(&server, Duration::from_millis(200)).await;
    let id = queue.schedule(Duration::ZERO, b"x".to_vec()).await.unwrap();
    let job = queue.next().await.unwrap();
    let expiry = score(&server, "leased", &id).await.unwrap();
    eventually("Redis' clock passes the lease", WAIT, || async {
        server.now_ms().await > expiry
    })
    .await;
    assert!(matches!(job.ack().await, Err(Error::LeaseExpired { .. })));
    // Still there, and delivered again.
    let again = tokio::time::timeout(WAIT, queue.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.id(), &id);
    assert_eq!(again.attempt(), 2);
    again.ack().await.unwrap();
}

#[tokio::test]
async fn retry_after_redelivers_later_with_the_next_attempt() {
    let server = RedisServer::start();
    let queue = queue(&server, Duration::from_secs(30)).await;
    let id = queue.schedule(Duration::ZERO, b"x".to_vec()).await.unwrap();
    let job = queue.next().await.unwrap();
    let first_deadline = job.deadline();
    let before = server.now_ms().await;
    job.retry_after(Duration::from_millis(200)).await.unwrap();
    assert_eq!(queue.pending().await.unwrap(), 1);
    assert_eq!(queue.leased().await.unwrap(), 0);
    let again = tokio::time::timeout(WAIT, queue.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.id(), &id);
    assert_eq!(again.attempt(), 2);
    assert!(again.deadline() > first_deadline);
    assert!(deadline_ms(&again) >= before + 200);
    again.ack().await.unwrap();
}

#[tokio::test]
async fn after_max_attempts_a_job_is_a_dead_letter_that_can_be_requeued() {
    let server = RedisServer::start();
    let queue = queue(&server, Duration::from_millis(200)).await; // max_attempts 3
    let dies_by_lease = queue
        .schedule_with_id("lease", Duration::ZERO, b"a".to_vec())
        .await
        .unwrap();
    for attempt in 1..=3 {
        let job = tokio::time::timeout(WAIT, queue.next())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(job.id(), &dies_by_lease);
        assert_eq!(job.attempt(), attempt);
        drop(job);
    }
    eventually("the job is buried", WAIT, || async {
        // A claim round buries it once its third lease has run out.
        let _ = tokio::time::timeout(Duration::from_millis(50), queue.next()).await;
        dead_ids(&queue).await == vec![dies_by_lease.clone()]
    })
    .await;
    assert_eq!(queue.pending().await.unwrap(), 0);
    assert_eq!(queue.leased().await.unwrap(), 0);
    assert!(
        !queue.cancel(&dies_by_lease).await.unwrap(),
        "a dead letter is not pending"
    );

    // Retried on its last attempt: buried at once.
    let dies_by_retry = queue
        .schedule_with_id("retry", Duration::ZERO, b"b".to_vec())
        .await
        .unwrap();
    for attempt in 1..=3 {
        let job = tokio::time::timeout(WAIT, queue.next())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(job.id(), &dies_by_retry);
        assert_eq!(job.attempt(), attempt);
        job.retry_after(Duration::ZERO).await.unwrap();
    }
    let mut dead = dead_ids(&queue).await;
    dead.sort();
    assert_eq!(dead, vec![dies_by_lease.clone(), dies_by_retry.clone()]);
    assert_eq!(queue.dead_letters(1).await.unwrap().len(), 1);

    assert!(queue.requeue(&dies_by_lease).await.unwrap());
    assert!(
        !queue.requeue(&dies_by_lease).await.unwrap(),
        "no longer dead"
    );
    let job = tokio::time::timeout(WAIT, queue.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(job.id(), &dies_by_lease);
    assert_eq!(job.attempt(), 1, "a requeued job starts over");
    assert_eq!(job.payload(), b"a");
    job.ack().await.unwrap();
    assert_eq!(dead_ids(&queue).await, vec![dies_by_retry]);
}

#[tokio::test]
async fn schedule_with_id_is_idempotent_while_pending_or_leased() {
    let server = RedisServer::start();
    let queue = queue(&server, Duration::from_secs(30)).await;
    let id = queue
        .schedule_with_id("order-42", Duration::from_millis(100), b"first".to_vec())
        .await
        .unwrap();
    assert_eq!(id.as_str(), "order-42");
    let again = queue
        .schedule_with_id("order-42", Duration::from_secs(3600), b"second".to_vec())
        .await
        .unwrap();
    assert_eq!(again, id);
    assert_eq!(queue.pending().await.unwrap(), 1);

    let job = tokio::time::timeout(WAIT, queue.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(job.payload(), b"first", "the retry changed nothing");
    // While leased, too.
    queue
        .schedule_with_id("order-42", Duration::ZERO, b"third".to_vec())
        .await
        .unwrap();
    assert_eq!(queue.pending().await.unwrap(), 0);
    assert_eq!(queue.leased().await.unwrap(), 1);
    job.ack().await.unwrap();
    // Once done, the id can be used again.
    queue
        .schedule_with_id("order-42", Duration::ZERO, b"fourth".to_vec())
        .await
        .unwrap();
    let job = tokio::time::timeout(WAIT, queue.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(job.payload(), b"fourth");
    job.ack().await.unwrap();
}

#[tokio::test]
async fn cancel_only_a_pending_job() {
    let server = RedisServer::start();
    let queue = queue(&server, Duration::from_secs(30)).await;
    let a = queue
        .schedule(Duration::from_millis(200), b"a".to_vec())
        .await
        .unwrap();
    let b = queue.schedule(Duration::ZERO, b"b".to_vec()).await.unwrap();
    assert_eq!(queue.pending().await.unwrap(), 2);
    assert!(queue.cancel(&a).await.unwrap());
    assert!(!queue.cancel(&a).await.unwrap(), "already cancelled");
    assert!(!queue.cancel(&JobId::from("unknown")).await.unwrap());
    assert_eq!(queue.pending().await.unwrap(), 1);

    let job = queue.next().await.unwrap();
    assert_eq!(job.id(), &b);
    assert!(
        !queue.cancel(&b).await.unwrap(),
        "a leased job cannot be cancelled"
    );
    job.ack().await.unwrap();
    nothing_delivered_within(&queue, Duration::from_millis(500)).await;
    assert_eq!(server.job_keys(), "0");
}

#[tokio::test]
async fn bad_input_is_a_typed_error_and_writes_nothing() {
    let server = RedisServer::start();
    assert!(matches!(
        Queue::connect("not a url", "orders").await,
        Err(Error::InvalidUrl { .. })
    ));
    assert!(matches!(
        Queue::connect(&server.url(), "").await,
        Err(Error::InvalidQueueName { .. })
    ));
    assert!(matches!(
        Queue::connect(&server.url(), &"q".repeat(201)).await,
        Err(Error::InvalidQueueName { .. })
    ));
    assert!(matches!(
        Queue::connect(&server.url(), "a{b}").await,
        Err(Error::InvalidQueueName { .. })
    ));
    for builder in [
        Queue::builder(&server.url(), "q").lease(Duration::ZERO),
        Queue::builder(&server.url(), "q").max_attempts(0),
        Queue::builder(&server.url(), "q").partitions(0),
        Queue::builder(&server.url(), "q").command_timeout(Duration::ZERO),
    ] {
        assert!(matches!(
            builder.connect().await,
            Err(Error::InvalidConfig { .. })
        ));
    }

    let queue = Queue::builder(&server.url(), "orders")
        .max_payload(16)
        .connect()
        .await
        .unwrap();
    assert!(matches!(
        queue.schedule(Duration::ZERO, vec![0u8; 17]).await,
        Err(Error::PayloadTooLarge { len: 17, limit: 16 })
    ));
    assert!(matches!(
        queue.schedule(Duration::MAX, b"x".to_vec()).await,
        Err(Error::InvalidDeadline)
    ));
    assert!(matches!(
        queue
            .schedule_at(
                SystemTime::UNIX_EPOCH - Duration::from_secs(1),
                b"x".to_vec()
            )
            .await,
        Err(Error::InvalidDeadline)
    ));
    assert!(matches!(
        queue
            .schedule_at(
                SystemTime::UNIX_EPOCH + Duration::from_secs(1 << 50),
                b"x".to_vec()
            )
            .await,
        Err(Error::InvalidDeadline)
    ));
    assert!(matches!(
        queue
            .schedule_with_id("", Duration::ZERO, b"x".to_vec())
            .await,
        Err(Error::InvalidJobId { .. })
    ));
    assert_eq!(server.job_keys(), "0", "nothing was written");

    // A time far in the past is due at once, and binary payloads survive.
    let payload: Vec<u8> = (0..=255).collect::<Vec<u8>>()[..16].to_vec();
    let id = queue
        .schedule_at(
            SystemTime::UNIX_EPOCH + Duration::from_secs(1),
            payload.clone(),
        )
        .await
        .unwrap();
    let job = tokio::time::timeout(WAIT, queue.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(job.id(), &id);
    assert_eq!(job.payload(), &payload[..]);
    job.ack().await.unwrap();
}

#[tokio::test]
async fn schedule_many_schedules_every_job() {
    let server = RedisServer::start();
    let queue = queue(&server, Duration::from_secs(30)).await;
    let ids = queue
        .schedule_many((0..500).map(|i| (Duration::from_millis(i % 50), format!("{i}"))))
        .await
        .unwrap();
    assert_eq!(ids.len(), 500);
    assert_eq!(queue.pending().await.unwrap(), 500);
    let mut seen = HashSet::new();
    for _ in 0..500 {
        let job = tokio::time::timeout(WAIT, queue.next())
            .await
            .unwrap()
            .unwrap();
        seen.insert(job.id().clone());
        job.ack().await.unwrap();
    }
    assert_eq!(seen, ids.into_iter().collect());
    // Over the limit: nothing is sent.
    let small = Queue::builder(&server.url(), "small")
        .max_payload(4)
        .connect()
        .await
        .unwrap();
    assert!(small
        .schedule_many([
            (Duration::ZERO, b"ok".to_vec()),
            (Duration::ZERO, b"too long".to_vec())
        ])
        .await
        .is_err());
    assert_eq!(small.pending().await.unwrap(), 0);
}

/// The fields the queue's job hash holds for `id`: payload, attempt,
/// deadline.
async fn stored(server: &RedisServer, id: &JobId) -> [bool; 3] {
    support::stored_fields(server, "orders", id.as_str())
}

// Memory per pending job: a waiting job is its due score and its payload;
// the attempt count and the deadline are written at the first delivery,
// and the deadline a worker sees is the one scheduled, through a release
// and a redelivery after a lost lease.
#[tokio::test]
async fn a_waiting_job_stores_only_its_payload_and_keeps_its_deadline() {
    let server = RedisServer::start();
    let queue = queue(&server, Duration::from_millis(300)).await;
    let due_at = SystemTime::now() + Duration::from_millis(150);
    let id = queue
        .schedule_at(due_at, b"order 7".to_vec())
        .await
        .unwrap();
    assert_eq!(stored(&server, &id).await, [true, false, false]);
    let scheduled = score(&server, "due", &id).await.unwrap();

    let job = queue.next().await.unwrap();
    assert_eq!((job.id(), job.attempt()), (&id, 1));
    assert_eq!(deadline_ms(&job), scheduled);
    assert_eq!(stored(&server, &id).await, [true, true, true]);

    job.release().await.unwrap();
    assert_eq!(score(&server, "due", &id).await, Some(scheduled)); // the front
    assert_eq!(stored(&server, &id).await, [true, false, false]);
    let job = queue.next().await.unwrap();
    assert_eq!((job.attempt(), deadline_ms(&job)), (1, scheduled));
    drop(job); // the lease runs out: redelivered
    let job = queue.next().await.unwrap();
    assert_eq!((job.attempt(), deadline_ms(&job)), (2, scheduled));
    job.ack().await.unwrap();
    assert_eq!(stored(&server, &id).await, [false, false, false]);
}

// The same layout after a retry (the attempt count stays: it is the
// job's history) and after a requeue of a dead letter (a fresh start).
#[tokio::test]
async fn retried_and_requeued_jobs_keep_the_waiting_layout() {
    let server = RedisServer::start();
    let queue = queue(&server, Duration::from_secs(30)).await;
    let id = queue
        .schedule(Duration::ZERO, b"order 8".to_vec())
        .await
        .unwrap();
    let job = queue.next().await.unwrap();
    job.retry_after(Duration::from_millis(50)).await.unwrap();
    assert_eq!(stored(&server, &id).await, [true, true, false]);
    let retried_due = score(&server, "due", &id).await.unwrap();
    let job = queue.next().await.unwrap();
    assert_eq!((job.attempt(), deadline_ms(&job)), (2, retried_due));
    job.bury("bad payload").await.unwrap();
    assert!(queue.requeue(&id).await.unwrap());
    assert_eq!(stored(&server, &id).await, [true, false, false]);
    let job = queue.next().await.unwrap();
    assert_eq!(job.attempt(), 1);
    job.ack().await.unwrap();
    assert_eq!(stored(&server, &id).await, [false, false, false]);
}
