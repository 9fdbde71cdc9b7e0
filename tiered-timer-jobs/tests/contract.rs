//! The delivery contract, written once and run against every backend:
//! each test body takes a [`Store`] (a real redis-server or Postgres
//! started by the test, or a fresh directory for the embedded store) and
//! the macro below runs it on each. The Redis key layout tests at the end are
//! Redis-only.

mod support;

use std::collections::HashSet;
use std::time::{Duration, SystemTime};

use support::backend::Store;
use support::{deliver_all, eventually};
use tiered_timer_jobs::{
    Attempt, Error, Fate, Job, JobId, JobState, Listing, Outcome, Queue, HISTORY_LEN,
};

const WAIT: Duration = Duration::from_secs(20);

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

async fn next(queue: &Queue) -> Job {
    tokio::time::timeout(WAIT, queue.next())
        .await
        .expect("a job within the wait")
        .unwrap()
}

/// Runs each contract test body against Redis, the embedded store and
/// Postgres (each in a build with its feature).
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        #[cfg(feature = "redis")]
        mod redis {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::Store::redis()).await
                }
            )*
        }
        #[cfg(feature = "embedded")]
        mod embedded {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::Store::embedded()).await
                }
            )*
        }
        #[cfg(feature = "postgres")]
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::Store::postgres()).await
                }
            )*
        }
    };
}

on_both_backends!(
    schedule_next_ack_removes_the_job,
    never_early_by_the_deciding_clock,
    each_job_is_claimed_by_exactly_one_worker,
    a_dropped_job_is_redelivered_after_its_lease,
    ack_after_the_lease_was_taken_over_fails_and_leaves_the_redelivery,
    ack_after_the_lease_ran_out_fails_even_before_redelivery,
    retry_after_redelivers_later_with_the_next_attempt,
    after_max_attempts_a_job_is_a_dead_letter_that_can_be_requeued,
    schedule_with_id_is_idempotent_while_pending_or_leased,
    cancel_only_a_pending_job,
    bad_input_is_a_typed_error_and_writes_nothing,
    a_lease_has_one_limit_for_the_queue_and_for_each_call,
    schedule_many_schedules_every_job,
    schedule_many_counts_every_delay_from_one_now,
    next_batch_claims_due_jobs_in_due_order,
    ack_many_acks_all_and_names_the_lost,
    batched_acks_are_applied_by_flush_and_name_the_lost,
    batched_acks_outlive_the_runtime_that_queued_them,
    batched_acks_from_many_tasks_all_land,
    release_hands_a_job_back_at_once_without_counting_the_attempt,
    extend_lease_and_keep_alive_hold_a_job_past_its_lease,
    fail_and_bury_record_why,
    close_fails_waiting_calls_and_shutdown_waits_for_jobs_out,
    operator_calls_see_and_change_every_state,
    handles_connected_separately_share_the_queue_and_its_wake_ups,
    dropped_next_calls_strand_nothing,
    a_job_keeps_its_last_attempts_with_who_held_them_and_how_each_ended,
    a_history_is_bounded_and_gone_with_its_job,
    throughput_and_lateness_are_the_stores_and_outlive_the_handle,
);

async fn schedule_next_ack_removes_the_job(store: Store) {
    let queue = store.queue(Duration::from_secs(30), 3).await;
    let id = queue
        .schedule(Duration::ZERO, b"order 42".to_vec())
        .await
        .unwrap();
    assert_eq!(queue.pending().await.unwrap(), 1);

    let job = next(&queue).await;
    assert_eq!(job.id(), &id);
    assert_eq!(job.payload(), b"order 42");
    assert_eq!(job.attempt(), 1);
    assert_eq!(queue.pending().await.unwrap(), 0);
    assert_eq!(queue.leased().await.unwrap(), 1);

    job.ack().await.unwrap();
    assert_eq!(queue.leased().await.unwrap(), 0);
    store.assert_empty(&queue, &[&id]).await;
    nothing_delivered_within(&queue, Duration::from_millis(300)).await;
}

async fn never_early_by_the_deciding_clock(store: Store) {
    let lease = Duration::from_secs(30);
    let queue = store.queue(lease, 3).await;
    let mut expected = Vec::new();
    for delay_ms in [0u64, 1, 7, 50, 120, 250, 400] {
        let before = store.now_ms().await;
        let id = queue
            .schedule(Duration::from_millis(delay_ms), format!("{delay_ms}"))
            .await
            .unwrap();
        expected.push((id, before + delay_ms));
    }
    for _ in 0..expected.len() {
        let job = next(&queue).await;
        let (_, earliest) = expected.iter().find(|(id, _)| id == job.id()).unwrap();
        let deadline = deadline_ms(&job);
        assert!(
            deadline >= *earliest,
            "deadline counts from the store's now"
        );
        // The lease's expiry is the store's now at the claim plus the lease.
        let expiry = store.lease_expiry_ms(&queue, job.id()).await.unwrap();
        let claimed_at = expiry - lease.as_millis() as u64;
        assert!(
            claimed_at >= deadline,
            "claimed at {claimed_at}, before its deadline {deadline}"
        );
        job.ack().await.unwrap();
    }
}

async fn each_job_is_claimed_by_exactly_one_worker(store: Store) {
    let producer = store.queue(Duration::from_secs(30), 3).await;
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
            store.queue(Duration::from_secs(30), 3).await
        });
    }
    let delivered = deliver_all(queues, ids.len(), WAIT).await;
    let unique: HashSet<JobId> = delivered.iter().cloned().collect();
    assert_eq!(unique.len(), delivered.len(), "a job was delivered twice");
    assert_eq!(unique, ids, "every job was delivered");
}

async fn a_dropped_job_is_redelivered_after_its_lease(store: Store) {
    let queue = store.queue(Duration::from_millis(300), 3).await;
    let id = queue.schedule(Duration::ZERO, b"x".to_vec()).await.unwrap();
    let first = next(&queue).await;
    assert_eq!(first.attempt(), 1);
    drop(first); // the worker "crashed"
    let second = next(&queue).await;
    assert_eq!(second.id(), &id);
    assert_eq!(second.attempt(), 2);
    assert_eq!(second.payload(), b"x");
    second.ack().await.unwrap();
    store.assert_empty(&queue, &[&id]).await;
}

async fn ack_after_the_lease_was_taken_over_fails_and_leaves_the_redelivery(store: Store) {
    let slow = store.queue(Duration::from_millis(300), 3).await;
    let other = store.queue(Duration::from_secs(30), 3).await;
    let id = slow.schedule(Duration::ZERO, b"x".to_vec()).await.unwrap();
    let stale = next(&slow).await;
    // `other` claims with its own 30 s lease once the 300 ms one runs out.
    let fresh = next(&other).await;
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

async fn ack_after_the_lease_ran_out_fails_even_before_redelivery(store: Store) {
    let queue = store.queue(Duration::from_millis(200), 3).await;
    let id = queue.schedule(Duration::ZERO, b"x".to_vec()).await.unwrap();
    let job = next(&queue).await;
    let expiry = store.lease_expiry_ms(&queue, &id).await.unwrap();
    eventually("the store's clock passes the lease", WAIT, || async {
        store.now_ms().await > expiry
    })
    .await;
    assert!(matches!(job.ack().await, Err(Error::LeaseExpired { .. })));
    // Still there, and delivered again.
    let again = next(&queue).await;
    assert_eq!(again.id(), &id);
    assert_eq!(again.attempt(), 2);
    again.ack().await.unwrap();
}

async fn retry_after_redelivers_later_with_the_next_attempt(store: Store) {
    let queue = store.queue(Duration::from_secs(30), 3).await;
    let id = queue.schedule(Duration::ZERO, b"x".to_vec()).await.unwrap();
    let job = next(&queue).await;
    let first_deadline = job.deadline();
    let before = store.now_ms().await;
    job.retry_after(Duration::from_millis(200)).await.unwrap();
    assert_eq!(queue.pending().await.unwrap(), 1);
    assert_eq!(queue.leased().await.unwrap(), 0);
    let again = next(&queue).await;
    assert_eq!(again.id(), &id);
    assert_eq!(again.attempt(), 2);
    assert!(again.deadline() > first_deadline);
    assert!(deadline_ms(&again) >= before + 200);
    again.ack().await.unwrap();
}

async fn after_max_attempts_a_job_is_a_dead_letter_that_can_be_requeued(store: Store) {
    let queue = store.queue(Duration::from_millis(200), 3).await;
    let dies_by_lease = queue
        .schedule_with_id("lease", Duration::ZERO, b"a".to_vec())
        .await
        .unwrap();
    for attempt in 1..=3 {
        let job = next(&queue).await;
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
        let job = next(&queue).await;
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
    let job = next(&queue).await;
    assert_eq!(job.id(), &dies_by_lease);
    assert_eq!(job.attempt(), 1, "a requeued job starts over");
    assert_eq!(job.payload(), b"a");
    job.ack().await.unwrap();
    assert_eq!(dead_ids(&queue).await, vec![dies_by_retry]);
}

async fn schedule_with_id_is_idempotent_while_pending_or_leased(store: Store) {
    let queue = store.queue(Duration::from_secs(30), 3).await;
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

    let job = next(&queue).await;
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
    let job = next(&queue).await;
    assert_eq!(job.payload(), b"fourth");
    job.ack().await.unwrap();
}

async fn cancel_only_a_pending_job(store: Store) {
    let queue = store.queue(Duration::from_secs(30), 3).await;
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

    let job = next(&queue).await;
    assert_eq!(job.id(), &b);
    assert!(
        !queue.cancel(&b).await.unwrap(),
        "a leased job cannot be cancelled"
    );
    job.ack().await.unwrap();
    nothing_delivered_within(&queue, Duration::from_millis(500)).await;
    store.assert_empty(&queue, &[&a, &b]).await;
}

async fn bad_input_is_a_typed_error_and_writes_nothing(store: Store) {
    let url = store.url();
    assert!(matches!(
        Queue::connect("not a url", "orders").await,
        Err(Error::InvalidUrl { .. })
    ));
    assert!(matches!(
        Queue::connect(&url, "").await,
        Err(Error::InvalidQueueName { .. })
    ));
    assert!(matches!(
        Queue::connect(&url, &"q".repeat(201)).await,
        Err(Error::InvalidQueueName { .. })
    ));
    assert!(matches!(
        Queue::connect(&url, "a{b}").await,
        Err(Error::InvalidQueueName { .. })
    ));
    for builder in [
        Queue::builder(&url, "q").lease(Duration::ZERO),
        Queue::builder(&url, "q").max_attempts(0),
        Queue::builder(&url, "q").partitions(0),
        Queue::builder(&url, "q").command_timeout(Duration::ZERO),
    ] {
        assert!(matches!(
            builder.connect().await,
            Err(Error::InvalidConfig { .. })
        ));
    }

    let queue = Queue::builder(&url, "orders")
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
    store.assert_empty(&queue, &[]).await;

    // A time far in the past is due at once, and binary payloads survive.
    let payload: Vec<u8> = (0..=255).collect::<Vec<u8>>()[..16].to_vec();
    let id = queue
        .schedule_at(
            SystemTime::UNIX_EPOCH + Duration::from_secs(1),
            payload.clone(),
        )
        .await
        .unwrap();
    let job = next(&queue).await;
    assert_eq!(job.id(), &id);
    assert_eq!(job.payload(), &payload[..]);
    job.ack().await.unwrap();
}

/// `Builder::lease` and `Job::extend_lease` take the same range, 1 ms to
/// 2^51 ms (a lease is added to the clock's now, and a leased job's score,
/// 2^52 + its expiry, must stay exact), and say so in the same words; a
/// call's argument is not called the queue's configuration.
async fn a_lease_has_one_limit_for_the_queue_and_for_each_call(store: Store) {
    let url = store.url();
    let longest = Duration::from_millis(1 << 51);
    let too_long = [longest + Duration::from_millis(1), Duration::MAX];
    let mut reasons = Vec::new();
    for lease in too_long {
        match Queue::builder(&url, "q").lease(lease).connect().await {
            Err(Error::InvalidConfig { reason }) => reasons.push(reason),
            other => panic!("lease({lease:?}): {other:?}"),
        }
    }
    // The longest lease is a lease like any other.
    let queue = Queue::builder(&url, "q")
        .lease(longest)
        .connect()
        .await
        .unwrap();
    queue.schedule(Duration::ZERO, b"x".to_vec()).await.unwrap();
    let job = next(&queue).await;
    job.extend_lease(longest).await.unwrap();
    for lease in too_long {
        match job.extend_lease(lease).await {
            Err(error @ Error::InvalidArgument { reason }) => {
                reasons.push(reason);
                assert!(
                    !error.to_string().contains("configuration"),
                    "a call's argument: {error}"
                );
            }
            other => panic!("extend_lease({lease:?}): {other:?}"),
        }
    }
    assert!(
        reasons
            .iter()
            .all(|r| *r == reasons[0] && r.contains("2^51 ms")),
        "{reasons:?}"
    );
    job.ack().await.unwrap();
}

async fn schedule_many_schedules_every_job(store: Store) {
    let queue = store.queue(Duration::from_secs(30), 3).await;
    let ids = queue
        .schedule_many((0..2500).map(|i| (Duration::from_millis(i % 50), format!("{i}"))))
        .await
        .unwrap();
    assert_eq!(ids.len(), 2500);
    assert_eq!(queue.pending().await.unwrap(), 2500);
    let mut seen = HashSet::new();
    while seen.len() < 2500 {
        let jobs = tokio::time::timeout(WAIT, queue.next_batch(100))
            .await
            .unwrap()
            .unwrap();
        for job in &jobs {
            assert!(seen.insert(job.id().clone()), "delivered twice");
        }
        assert!(queue.ack_many(jobs).await.unwrap().is_empty());
    }
    assert_eq!(seen, ids.into_iter().collect());
    // Over the limit: nothing is sent.
    let small = Queue::builder(&store.url(), "small")
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
    // With ids: only the new ones count.
    let new = small
        .schedule_many_with_ids([
            ("a", Duration::from_secs(60), b"1".to_vec()),
            ("b", Duration::from_secs(60), b"2".to_vec()),
        ])
        .await
        .unwrap();
    assert_eq!(new, 2);
    let new = small
        .schedule_many_with_ids([
            ("b", Duration::from_secs(60), b"2".to_vec()),
            ("c", Duration::from_secs(60), b"3".to_vec()),
        ])
        .await
        .unwrap();
    assert_eq!(new, 1, "b was waiting already");
    assert_eq!(small.pending().await.unwrap(), 3);
}

async fn schedule_many_counts_every_delay_from_one_now(store: Store) {
    let queue = store.queue(Duration::from_secs(30), 3).await;
    // Over several chunks (1 000 jobs each): equal delays, equal due times.
    let ids = queue
        .schedule_many((0..2100).map(|_| (Duration::from_secs(3600), b"x".to_vec())))
        .await
        .unwrap();
    let first = queue.job(&ids[0]).await.unwrap().unwrap().due;
    let last = queue.job(&ids[2099]).await.unwrap().unwrap().due;
    assert!(first.is_some());
    assert_eq!(first, last);
    let at = SystemTime::now() + Duration::from_secs(7200);
    let ids = queue.schedule_many_at([(at, b"y".to_vec())]).await.unwrap();
    let due = queue.job(&ids[0]).await.unwrap().unwrap().due.unwrap();
    assert!(due >= at && due < at + Duration::from_millis(1));
}

async fn next_batch_claims_due_jobs_in_due_order(store: Store) {
    let queue = store.queue(Duration::from_secs(30), 3).await;
    // Due 30, 10 and 20 s ago: claimed earliest first.
    let now = SystemTime::now();
    for (i, ago) in [30u64, 10, 20].into_iter().enumerate() {
        queue
            .schedule_many_at([(now - Duration::from_secs(ago), format!("j{i}"))])
            .await
            .unwrap();
    }
    queue
        .schedule_with_id("later", Duration::from_secs(3600), b"x".to_vec())
        .await
        .unwrap();
    let jobs = tokio::time::timeout(WAIT, queue.next_batch(10))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(jobs.len(), 3, "only the due ones");
    let payloads: Vec<&[u8]> = jobs.iter().map(|j| j.payload()).collect();
    assert_eq!(payloads, [&b"j0"[..], b"j2", b"j1"], "in due order");
    assert!(queue.ack_many(jobs).await.unwrap().is_empty());
    assert_eq!(queue.pending().await.unwrap(), 1);
}

async fn ack_many_acks_all_and_names_the_lost(store: Store) {
    let queue = store.queue(Duration::from_millis(300), 3).await;
    let other = store.queue(Duration::from_secs(30), 3).await;
    queue
        .schedule_many((0..5).map(|_| (Duration::ZERO, b"x".to_vec())))
        .await
        .unwrap();
    let jobs = tokio::time::timeout(WAIT, async {
        let mut jobs = Vec::new();
        while jobs.len() < 5 {
            jobs.extend(queue.next_batch(5 - jobs.len()).await.unwrap());
        }
        jobs
    })
    .await
    .unwrap();
    // Their leases run out and another worker takes them over.
    let mut taken = Vec::new();
    while taken.len() < 5 {
        taken.extend(
            tokio::time::timeout(WAIT, other.next_batch(5))
                .await
                .unwrap()
                .unwrap(),
        );
    }
    let lost = queue.ack_many(jobs).await.unwrap();
    assert_eq!(lost.len(), 5, "every stale ack is refused");
    assert_eq!(other.leased().await.unwrap(), 5, "and changed nothing");
    assert!(other.ack_many(taken).await.unwrap().is_empty());
    store.assert_empty(&other, &[]).await;
}

async fn batched_acks_are_applied_by_flush_and_name_the_lost(store: Store) {
    let queue = store.queue(Duration::from_secs(30), 3).await;
    let ids = queue
        .schedule_many((0..300).map(|_| (Duration::ZERO, b"x".to_vec())))
        .await
        .unwrap();
    // A worker that takes each job and acks it in the background, its
    // acks still in flight while it takes the next ones.
    let mut seen = HashSet::new();
    for _ in 0..300 {
        let job = next(&queue).await;
        assert!(
            seen.insert(job.id().clone()),
            "{} delivered twice",
            job.id()
        );
        job.ack_batched();
    }
    let lost = tokio::time::timeout(WAIT, queue.flush_acks())
        .await
        .unwrap();
    assert_eq!(lost.unwrap(), Vec::<JobId>::new());
    let ids: Vec<&JobId> = ids.iter().collect();
    store.assert_empty(&queue, &ids).await;

    // Stale acks: their leases ran out and another worker holds the jobs.
    let short = store.queue(Duration::from_millis(300), 3).await;
    let other = store.queue(Duration::from_secs(30), 3).await;
    let stale: HashSet<JobId> = short
        .schedule_many((0..3).map(|_| (Duration::ZERO, b"y".to_vec())))
        .await
        .unwrap()
        .into_iter()
        .collect();
    let jobs = [next(&short).await, next(&short).await, next(&short).await];
    let mut taken = Vec::new();
    while taken.len() < 3 {
        taken.push(next(&other).await);
    }
    for job in jobs {
        job.ack_batched();
    }
    let lost = tokio::time::timeout(WAIT, short.flush_acks())
        .await
        .unwrap();
    assert_eq!(lost.unwrap().into_iter().collect::<HashSet<_>>(), stale);
    assert_eq!(
        other.leased().await.unwrap(),
        3,
        "stale acks changed nothing"
    );
    // What was lost is reported once.
    assert_eq!(short.flush_acks().await.unwrap(), Vec::<JobId>::new());

    // shutdown waits for acks still queued; after it they are applied.
    for job in taken {
        job.ack_batched();
    }
    tokio::time::timeout(WAIT, other.shutdown()).await.unwrap();
    store.assert_empty(&other, &[]).await;
}

async fn batched_acks_outlive_the_runtime_that_queued_them(store: Store) {
    let queue = store.queue(Duration::from_secs(30), 3).await;
    let id = queue.schedule(Duration::ZERO, b"x".to_vec()).await.unwrap();
    let job = next(&queue).await;
    // Another runtime queues the ack and shuts down before its flush task
    // ran: the ack stays queued, and this runtime's flush sends it.
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move { job.ack_batched() });
        drop(runtime);
    })
    .join()
    .unwrap();
    let flushed = tokio::time::timeout(WAIT, queue.flush_acks())
        .await
        .expect("flush_acks does not hang");
    assert_eq!(flushed.unwrap(), Vec::<JobId>::new());
    store.assert_empty(&queue, &[&id]).await;
}

async fn batched_acks_from_many_tasks_all_land(store: Store) {
    // Eight workers on one handle queue acks while flushes start and end
    // under them: none is left behind when a flush ends as one is queued.
    let queue = store.queue(Duration::from_secs(30), 3).await;
    let ids = queue
        .schedule_many((0..400).map(|_| (Duration::ZERO, b"x".to_vec())))
        .await
        .unwrap();
    let workers: Vec<_> = (0..8)
        .map(|_| {
            let queue = queue.clone();
            tokio::spawn(async move {
                for _ in 0..50 {
                    let job = next(&queue).await;
                    job.ack_batched();
                    tokio::task::yield_now().await;
                }
            })
        })
        .collect();
    for worker in workers {
        tokio::time::timeout(WAIT, worker).await.unwrap().unwrap();
    }
    let lost = tokio::time::timeout(WAIT, queue.flush_acks())
        .await
        .unwrap();
    assert_eq!(lost.unwrap(), Vec::<JobId>::new());
    let ids: Vec<&JobId> = ids.iter().collect();
    store.assert_empty(&queue, &ids).await;
}

async fn release_hands_a_job_back_at_once_without_counting_the_attempt(store: Store) {
    let queue = store.queue(Duration::from_secs(30), 3).await;
    let id = queue.schedule(Duration::ZERO, b"x".to_vec()).await.unwrap();
    let job = next(&queue).await;
    let deadline = job.deadline();
    job.release().await.unwrap();
    let again = tokio::time::timeout(Duration::from_secs(2), queue.next())
        .await
        .expect("released jobs are due at once, not after the lease")
        .unwrap();
    assert_eq!(again.id(), &id);
    assert_eq!(again.attempt(), 1, "a release does not count");
    assert_eq!(again.deadline(), deadline);
    again.ack().await.unwrap();
}

async fn extend_lease_and_keep_alive_hold_a_job_past_its_lease(store: Store) {
    let lease = Duration::from_millis(400);
    let queue = store.queue(lease, 3).await;
    let other = store.queue(lease, 3).await;
    queue.schedule(Duration::ZERO, b"x".to_vec()).await.unwrap();
    let job = next(&queue).await;
    job.extend_lease(Duration::from_secs(2)).await.unwrap();
    nothing_delivered_within(&other, Duration::from_millis(800)).await;
    // keep_alive renews every third of a lease while the work runs.
    job.extend_lease(lease).await.unwrap();
    let worked = job.keep_alive(tokio::time::sleep(lease * 3)).await;
    assert!(worked.is_ok(), "{worked:?}");
    assert!(
        tokio::time::timeout(Duration::from_millis(100), other.next())
            .await
            .is_err(),
        "still held"
    );
    assert!(matches!(
        job.extend_lease(Duration::ZERO).await,
        Err(Error::InvalidArgument { .. })
    ));
    job.ack().await.unwrap();
}

async fn fail_and_bury_record_why(store: Store) {
    let queue = store.queue(Duration::from_secs(30), 2).await;
    let id = queue.schedule(Duration::ZERO, b"x".to_vec()).await.unwrap();
    let job = next(&queue).await;
    assert_eq!(
        job.retry_after_with_reason(Duration::ZERO, "flaky")
            .await
            .unwrap(),
        Fate::Retried
    );
    let info = queue.job(&id).await.unwrap().unwrap();
    assert_eq!(info.state, JobState::Waiting);
    assert_eq!(info.last_error.as_deref(), Some("flaky"));
    let job = next(&queue).await;
    assert_eq!(job.attempt(), 2);
    assert_eq!(job.fail("still broken").await.unwrap(), Fate::Dead);
    let dead = queue.dead_letters(10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].id, id);
    assert_eq!(dead[0].attempts, 2);
    assert_eq!(dead[0].payload_len, 1);
    assert_eq!(dead[0].last_error.as_deref(), Some("still broken"));

    let other = queue
        .schedule(Duration::ZERO, b"yy".to_vec())
        .await
        .unwrap();
    next(&queue).await.bury("bad payload").await.unwrap();
    let info = queue.job(&other).await.unwrap().unwrap();
    assert_eq!(info.state, JobState::Dead);
    assert_eq!(info.last_error.as_deref(), Some("bad payload"));
    assert_eq!(info.attempts, 1);
    assert_eq!(queue.purge_all().await.unwrap(), 2);
    store.assert_empty(&queue, &[&id, &other]).await;
}

async fn close_fails_waiting_calls_and_shutdown_waits_for_jobs_out(store: Store) {
    let queue = store.queue(Duration::from_secs(30), 3).await;
    let id = queue.schedule(Duration::ZERO, b"x".to_vec()).await.unwrap();
    let job = next(&queue).await;
    let waiting = tokio::spawn({
        let queue = queue.clone();
        async move { queue.next().await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    queue.close();
    assert!(queue.is_closed());
    let waited = tokio::time::timeout(WAIT, waiting).await.unwrap().unwrap();
    assert!(matches!(waited, Err(Error::Closed)), "{waited:?}");
    assert!(matches!(queue.next().await, Err(Error::Closed)));
    // shutdown waits for the job out; dropped after close, it is released.
    let shutdown = tokio::spawn({
        let queue = queue.clone();
        async move { queue.shutdown().await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!shutdown.is_finished(), "a job is still out");
    drop(job);
    tokio::time::timeout(WAIT, shutdown).await.unwrap().unwrap();
    let other = store.queue(Duration::from_secs(30), 3).await;
    let again = tokio::time::timeout(Duration::from_secs(2), other.next())
        .await
        .expect("released at once")
        .unwrap();
    assert_eq!((again.id(), again.attempt()), (&id, 1));
    again.ack().await.unwrap();
}

async fn operator_calls_see_and_change_every_state(store: Store) {
    let queue = store.queue(Duration::from_secs(30), 1).await;
    let later = queue
        .schedule_with_id("later", Duration::from_secs(3600), b"waiting".to_vec())
        .await
        .unwrap();
    let due = queue
        .schedule_with_id("due", Duration::ZERO, b"due".to_vec())
        .await
        .unwrap();
    // Due "now" by the store's clock: within a millisecond (never early).
    eventually("the job is due", WAIT, || async {
        queue.stats().await.unwrap().due_now == 1
    })
    .await;
    let stats = queue.stats().await.unwrap();
    assert_eq!(
        (stats.pending, stats.due_now, stats.leased, stats.dead),
        (2, 1, 0, 0)
    );
    assert!(stats.earliest_due.is_some());
    let page = queue.list(Listing::Waiting, 0, 10).await.unwrap();
    assert_eq!(page.total, 2);
    let listed: Vec<&str> = page.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(listed, ["due", "later"], "earliest first");
    assert_eq!(queue.list(Listing::Due, 0, 10).await.unwrap().total, 1);
    assert!(matches!(
        queue.list(Listing::Waiting, 0, 0).await,
        Err(Error::InvalidArgument { .. })
    ));

    let job = next(&queue).await;
    assert_eq!(job.id(), &due);
    let leased = queue.list(Listing::Leased, 0, 10).await.unwrap();
    assert_eq!(leased.jobs.len(), 1);
    assert_eq!(leased.jobs[0].payload_preview, b"due");
    let info = queue.job(&due).await.unwrap().unwrap();
    assert_eq!(info.state, JobState::Leased);
    assert!(info.lease_expiry.is_some());
    drop(job);

    assert!(queue.promote(&later).await.unwrap());
    assert!(!queue.promote(&JobId::from("nope")).await.unwrap());
    let job = next(&queue).await;
    assert_eq!(job.id(), &later, "promoted: due now");
    job.bury("no").await.unwrap();
    let dead = queue.list(Listing::Dead, 0, 10).await.unwrap();
    assert_eq!(dead.total, 1);
    assert_eq!(queue.requeue_all().await.unwrap(), 1);
    assert_eq!(queue.stats().await.unwrap().pending, 1);
    let job = next(&queue).await;
    job.bury("again").await.unwrap();
    assert!(queue.purge(&later).await.unwrap());
    assert!(!queue.purge(&later).await.unwrap());
    assert!(queue.lateness().await.unwrap().total() >= 1);
}

async fn handles_connected_separately_share_the_queue_and_its_wake_ups(store: Store) {
    let a = store.queue(Duration::from_secs(30), 3).await;
    let b = store.queue(Duration::from_secs(30), 3).await;
    let waiting = tokio::spawn(async move { b.next().await.map(|job| (job.id().clone(), b)) });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let id = a
        .schedule(Duration::from_millis(200), b"x".to_vec())
        .await
        .unwrap();
    let (got, b) = tokio::time::timeout(WAIT, waiting)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(got, id);
    assert_eq!(a.leased().await.unwrap(), 1);
    drop(b);
}

// A `next` given up on (a timeout around it) strands nothing: a job
// claimed for it goes to another call at once. 150 jobs due over a second,
// one worker that gives up on `next` after a random few milliseconds;
// every job is delivered once, long before the 30 s lease could bring back
// a stranded one.
async fn dropped_next_calls_strand_nothing(store: Store) {
    let queue = store.queue(Duration::from_secs(30), 3).await;
    let ids: HashSet<JobId> = queue
        .schedule_many((0..150u64).map(|i| (Duration::from_millis(i * 7), format!("{i}"))))
        .await
        .unwrap()
        .into_iter()
        .collect();
    let mut seen = HashSet::new();
    let mut n: u64 = 1;
    let deadline = tokio::time::Instant::now() + WAIT;
    while seen.len() < ids.len() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} of 150",
            seen.len()
        );
        n = n
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let patience = Duration::from_micros(200 + (n >> 33) % 3000);
        if let Ok(job) = tokio::time::timeout(patience, queue.next()).await {
            let job = job.unwrap();
            assert!(seen.insert(job.id().clone()), "{} twice", job.id());
            job.ack().await.unwrap();
        }
    }
    assert_eq!(seen, ids);
    eventually("nothing leased", WAIT, || async {
        queue.leased().await.unwrap() == 0
    })
    .await;
}

/// Redis only: the key layout behind the contract.
/// How each attempt of `id` ended, in its history: (number, outcome,
/// holder, error).
async fn attempts(queue: &Queue, id: &JobId) -> Vec<(u32, Outcome, String, Option<String>)> {
    let info = queue.job(id).await.unwrap().expect("the job is there");
    info.history
        .iter()
        .map(|a: &Attempt| {
            (
                a.number,
                a.outcome,
                a.holder.clone().unwrap_or_default(),
                a.error.clone(),
            )
        })
        .collect()
}

/// A job's page tells every attempt: who claimed it, when, how it ended
/// (failed with its reason, retried, released, its lease run out,
/// buried) and when, and who holds it now; a requeue keeps the history.
async fn a_job_keeps_its_last_attempts_with_who_held_them_and_how_each_ended(store: Store) {
    let url = store.url();
    let connect = |holder: Option<&'static str>| {
        let url = url.clone();
        async move {
            let mut builder = Queue::builder(&url, "orders")
                .lease(Duration::from_millis(400))
                .max_attempts(5);
            if let Some(holder) = holder {
                builder = builder.holder(holder);
            }
            builder.connect().await.unwrap()
        }
    };
    let a = connect(Some("worker-a")).await;
    let b = connect(Some("worker b: pod/7")).await;
    let before = store.now_ms().await;
    let id = a
        .schedule_with_id("order-710", Duration::ZERO, b"x".to_vec())
        .await
        .unwrap();
    let after = store.now_ms().await;
    let info = a.job(&id).await.unwrap().unwrap();
    let created = info.created.expect("the creation time is kept");
    let created = created
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert!(
        (before..=after).contains(&created),
        "{before} {created} {after}"
    );
    assert!(info.history.is_empty() && info.holder.is_none());

    // Running, held by its claimer.
    let job = next(&a).await;
    let info = a.job(&id).await.unwrap().unwrap();
    assert_eq!(info.holder.as_deref(), Some("worker-a"));
    assert_eq!(info.history.len(), 1);
    let running = &info.history[0];
    assert_eq!((running.number, running.outcome), (1, Outcome::Running));
    assert_eq!(running.ended, None);
    assert!(running.claimed >= info.created.unwrap());

    job.retry_after_with_reason(Duration::ZERO, "card declined")
        .await
        .unwrap();
    next(&b).await.retry_after(Duration::ZERO).await.unwrap();
    next(&a).await.release().await.unwrap();
    drop(next(&b).await); // its lease runs out
    let job = next(&a).await;
    assert_eq!(job.attempt(), 4);
    job.bury("bad payload").await.unwrap();

    let text = |s: &str| Some(s.to_owned());
    assert_eq!(
        attempts(&a, &id).await,
        [
            (1, Outcome::Failed, "worker-a".into(), text("card declined")),
            (2, Outcome::Retried, "worker b: pod/7".into(), None),
            (3, Outcome::Released, "worker-a".into(), None),
            (3, Outcome::LeaseExpired, "worker b: pod/7".into(), None),
            (4, Outcome::Buried, "worker-a".into(), text("bad payload")),
        ]
    );
    let info = a.job(&id).await.unwrap().unwrap();
    assert_eq!(info.holder, None, "a dead letter has no holder");
    for pair in info.history.windows(2) {
        let (ended, next_claim) = (pair[0].ended.unwrap(), pair[1].claimed);
        assert!(pair[0].claimed <= ended && ended <= next_claim, "{pair:?}");
    }
    assert_eq!(info.history[4].ended, info.died_at);

    // A requeue keeps the history; the attempts count from 1 again; the
    // default holder is this host and process.
    assert!(a.requeue(&id).await.unwrap());
    let c = connect(None).await;
    let job = next(&c).await;
    assert_eq!(job.attempt(), 1);
    let history = attempts(&c, &id).await;
    assert_eq!(history.len(), 6);
    let (number, outcome, holder, _) = &history[5];
    assert_eq!((*number, *outcome), (1, Outcome::Running));
    assert!(
        holder.ends_with(&format!(":{}", std::process::id())),
        "{holder}"
    );
    job.ack().await.unwrap();
    store.assert_empty(&a, &[&id]).await;
}

/// A job keeps its last HISTORY_LEN attempts, the running one included,
/// with at most ERROR_KEPT bytes of each error; its history is deleted
/// with it.
async fn a_history_is_bounded_and_gone_with_its_job(store: Store) {
    let queue = Queue::builder(&store.url(), "orders")
        .max_attempts(1000)
        .holder("w")
        .connect()
        .await
        .unwrap();
    let id = queue.schedule(Duration::ZERO, b"x".to_vec()).await.unwrap();
    let long = "e".repeat(3000);
    for _ in 0..20 {
        next(&queue)
            .await
            .retry_after_with_reason(Duration::ZERO, &long)
            .await
            .unwrap();
    }
    let history = queue.job(&id).await.unwrap().unwrap().history;
    assert_eq!(history.len(), HISTORY_LEN);
    let numbers: Vec<u32> = history.iter().map(|a| a.number).collect();
    assert_eq!(numbers, (5..=20).collect::<Vec<_>>());
    assert!(history
        .iter()
        .all(|a| a.error.as_ref().unwrap().len() == tiered_timer_jobs::ERROR_KEPT));
    let last_error = queue.job(&id).await.unwrap().unwrap().last_error;
    assert_eq!(last_error.map(|e| e.len()), Some(long.len()), "kept whole");
    let job = next(&queue).await;
    let history = queue.job(&id).await.unwrap().unwrap().history;
    assert_eq!(history.len(), HISTORY_LEN);
    assert_eq!(history[0].number, 6);
    assert_eq!(history[15].outcome, Outcome::Running);
    job.ack().await.unwrap();
    // A new job of that id starts with no history.
    queue
        .schedule_with_id(id.as_str(), Duration::from_secs(60), b"y".to_vec())
        .await
        .unwrap();
    let info = queue.job(&id).await.unwrap().unwrap();
    assert!(info.history.is_empty(), "{:?}", info.history);
    assert!(queue.cancel(&id).await.unwrap());
    store.assert_empty(&queue, &[&id]).await;
}

/// Processed (acked) and failed (failed, lease run out, buried) per
/// minute are counted by the store, and a new handle (on the embedded
/// store, a reopened store) reads the same counts, and the same lateness
/// histogram: a dashboard started later sees the minutes before it.
async fn throughput_and_lateness_are_the_stores_and_outlive_the_handle(store: Store) {
    let start = SystemTime::now() - Duration::from_secs(120);
    let queue = store.queue(Duration::from_millis(300), 2).await;
    for i in 0..10 {
        queue
            .schedule_with_id(format!("t{i}"), Duration::ZERO, b"x".to_vec())
            .await
            .unwrap();
    }
    for _ in 0..3 {
        next(&queue).await.ack().await.unwrap();
    }
    let jobs = queue.next_batch(2).await.unwrap();
    assert!(queue.ack_many(jobs).await.unwrap().is_empty());
    next(&queue).await.fail("boom").await.unwrap(); // failed, retried later
    next(&queue)
        .await
        .retry_after(Duration::from_secs(60))
        .await
        .unwrap(); // not a failure
    next(&queue).await.release().await.unwrap(); // not a failure
    next(&queue).await.bury("bad").await.unwrap(); // failed
    drop(next(&queue).await); // its lease runs out: failed when taken back
    let mut attempts = Vec::new();
    for _ in 0..2 {
        let job = next(&queue).await;
        attempts.push(job.attempt());
        job.ack().await.unwrap();
    }
    assert_eq!(attempts, [1, 2], "the dropped job came back");
    let counted = queue.throughput(start).await.unwrap();
    assert_eq!(
        (counted.processed(), counted.failed()),
        (7, 3),
        "{counted:?}"
    );
    assert!(counted.minutes.len() >= 3);
    let lateness = queue.lateness().await.unwrap();
    assert!(lateness.total() >= 8, "{lateness:?}");

    // Every handle gone (the embedded store closed), then a new one.
    drop(queue);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let again = store.queue(Duration::from_millis(300), 2).await;
    let reread = again.throughput(start).await.unwrap();
    assert_eq!((reread.processed(), reread.failed()), (7, 3), "{reread:?}");
    assert_eq!(again.lateness().await.unwrap(), lateness);
    // A `since` in the future reads the minute still counting.
    let later = again
        .throughput(SystemTime::now() + Duration::from_secs(3600))
        .await
        .unwrap();
    assert_eq!(later.minutes.len(), 1);
    let elapsed = later.store_time.duration_since(later.minutes[0].start);
    assert!(elapsed.unwrap() < Duration::from_secs(60));
}

#[cfg(feature = "redis")]
mod layout {
    use super::*;
    use support::RedisServer;

    /// `id`'s due time while waiting (Redis-only: its score).
    async fn score(server: &RedisServer, set: &str, id: &JobId) -> Option<u64> {
        match set {
            "due" => support::due_ms(&server.url(), "orders", id.as_str()).await,
            _ => support::lease_expiry_ms(&server.url(), "orders", id.as_str()).await,
        }
    }

    async fn stored(server: &RedisServer, id: &JobId) -> [bool; 3] {
        support::stored_fields(server, "orders", id.as_str())
    }

    // Memory per pending job: a waiting job is its due score, its payload
    // and its creation time; the attempt count, the deadline, the claim time
    // and the holder are written at the first delivery,
    // and the deadline a worker sees is the one scheduled, through a release
    // and a redelivery after a lost lease.
    #[tokio::test]
    async fn a_waiting_job_stores_only_its_payload_and_keeps_its_deadline() {
        let server = RedisServer::start();
        let queue = support::queue(&server, Duration::from_millis(300), 3).await;
        let due_at = SystemTime::now() + Duration::from_millis(150);
        let id = queue
            .schedule_at(due_at, b"order 7".to_vec())
            .await
            .unwrap();
        assert_eq!(stored(&server, &id).await, [true, false, false]);
        assert!(support::stored_created(&server, "orders", id.as_str()));
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
        assert!(!support::stored_created(&server, "orders", id.as_str()));
    }

    // The same layout after a retry (the attempt count stays: it is the
    // job's history) and after a requeue of a dead letter (a fresh start).
    #[tokio::test]
    async fn retried_and_requeued_jobs_keep_the_waiting_layout() {
        let server = RedisServer::start();
        let queue = support::queue(&server, Duration::from_secs(30), 3).await;
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
}
