//! The operator's view: `Queue::stats`, jobs that fail with a reason, and
//! the dead letters (listing, requeue, purge), against a real
//! redis-server started by each test (see `support`).

mod support;

use std::time::{Duration, SystemTime};

use support::{eventually, queue, RedisServer};
use tiered_timer_jobs::{Error, Fate, Job, JobId, Queue};

const WAIT: Duration = Duration::from_secs(20);

fn at_ms(ms: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
}

fn ms_of(time: SystemTime) -> u64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

async fn next(queue: &Queue) -> Job {
    tokio::time::timeout(WAIT, queue.next())
        .await
        .expect("a job within 20 s")
        .expect("next")
}

/// The stored last error of `id` in queue `orders` (one partition).
fn stored_error(server: &RedisServer, id: &str) -> String {
    server
        .cli(&["HGET", "ttr:{orders}:job", &format!("e{id}")])
        .trim()
        .to_owned()
}

#[tokio::test]
async fn stats_read_counts_and_overdue_by_redis_clock() {
    let server = RedisServer::start();
    let queue = queue(&server, Duration::from_secs(30), 3).await;
    let empty = queue.stats().await.unwrap();
    assert_eq!((empty.pending, empty.leased, empty.dead), (0, 0, 0));
    assert_eq!(empty.earliest_due, None);
    assert_eq!(empty.overdue, Duration::ZERO);
    assert_eq!(empty.partitions.len(), 1);

    // A known schedule on Redis' clock: 90 s late, 30 s late, an hour out.
    let t0 = server.now_ms().await;
    queue.schedule_at(at_ms(t0 - 90_000), "a").await.unwrap();
    queue.schedule_at(at_ms(t0 - 30_000), "bb").await.unwrap();
    queue
        .schedule_at(at_ms(t0 + 3_600_000), "ccc")
        .await
        .unwrap();
    let stats = queue.stats().await.unwrap();
    let t1 = server.now_ms().await;
    assert_eq!(stats.pending, 3);
    assert_eq!(stats.due_now, 2);
    assert_eq!(stats.earliest_due, Some(at_ms(t0 - 90_000)));
    let now = ms_of(stats.redis_time);
    assert!((t0..=t1).contains(&now), "{t0} <= {now} <= {t1}");
    // Exactly Redis' now (in the script) minus the earliest due time.
    assert_eq!(stats.overdue, Duration::from_millis(now - (t0 - 90_000)));
    assert!(stats.overdue >= Duration::from_secs(90));
    assert_eq!(stats.next_due_in(), Some(Duration::ZERO));
    assert_eq!((stats.leased, stats.expired_leases, stats.dead), (0, 0, 0));
    assert_eq!(stats.earliest_lease_expiry, None);
    assert_eq!(stats.partitions[0].pending, 3);
    assert!(
        stats
            .to_string()
            .starts_with("pending 3 (2 due, most overdue 1m 3"),
        "{stats}"
    );

    // The most overdue job is claimed first; the next one is 30 s late.
    let before = server.now_ms().await;
    let job = next(&queue).await;
    let after = server.now_ms().await;
    assert_eq!(job.payload(), b"a");
    let stats = queue.stats().await.unwrap();
    assert_eq!((stats.pending, stats.due_now, stats.leased), (2, 1, 1));
    assert_eq!(stats.earliest_due, Some(at_ms(t0 - 30_000)));
    assert!(stats.overdue >= Duration::from_secs(30));
    assert!(stats.overdue < Duration::from_secs(90));
    let expiry = ms_of(stats.earliest_lease_expiry.unwrap());
    assert!(
        (before + 30_000..=after + 30_000).contains(&expiry),
        "lease expiry {expiry} is 30 s after the claim ({before}..{after})"
    );
    assert_eq!(stats.expired_leases, 0);
    job.ack().await.unwrap();
}

#[tokio::test]
async fn stats_count_leases_that_ran_out_until_reclaimed() {
    let server = RedisServer::start();
    let queue = queue(&server, Duration::from_millis(200), 3).await;
    queue.schedule(Duration::ZERO, "x").await.unwrap();
    let job = next(&queue).await;
    drop(job); // the worker "dies"
    eventually("the lease runs out", WAIT, || async {
        queue.stats().await.unwrap().expired_leases == 1
    })
    .await;
    let stats = queue.stats().await.unwrap();
    assert_eq!(
        (stats.pending, stats.leased, stats.expired_leases),
        (0, 1, 1)
    );
    assert!(stats.earliest_lease_expiry.unwrap() <= stats.redis_time);
    assert!(stats
        .to_string()
        .ends_with("leased 1 (1 lease(s) expired), dead 0"));

    let again = next(&queue).await;
    assert_eq!(again.attempt(), 2);
    let stats = queue.stats().await.unwrap();
    assert_eq!((stats.leased, stats.expired_leases), (1, 0));
    again.ack().await.unwrap();
}

#[tokio::test]
async fn stats_are_summed_over_partitions_and_given_per_partition() {
    let server = RedisServer::start();
    let queue = Queue::builder(&server.url(), "orders")
        .partitions(4)
        .connect()
        .await
        .unwrap();
    let t0 = server.now_ms().await;
    for i in 0..40 {
        queue
            .schedule_with_id(format!("later-{i}"), Duration::from_secs(3600), "x")
            .await
            .unwrap();
    }
    for late_s in [10, 20, 30, 40, 50, 70] {
        queue
            .schedule_at(at_ms(t0 - late_s * 1000), "y")
            .await
            .unwrap();
    }
    let stats = queue.stats().await.unwrap();
    assert_eq!(stats.partitions.len(), 4);
    assert_eq!(stats.pending, 46);
    assert_eq!(stats.due_now, 6);
    let mut sum = 0;
    let mut used = 0;
    for (p, part) in stats.partitions.iter().enumerate() {
        assert_eq!(part.partition, Some(p as u32));
        assert!(part.partitions.is_empty());
        let zcard: u64 = server
            .cli(&["ZCARD", &format!("ttr:{{orders#{p}}}:timeline")])
            .trim()
            .parse()
            .unwrap();
        assert_eq!(part.pending, zcard, "partition {p}");
        sum += part.pending;
        used += u32::from(part.pending > 0);
        assert!(part.overdue <= stats.overdue);
        assert!(part.redis_time <= stats.redis_time);
    }
    assert_eq!(sum, stats.pending);
    assert!(used >= 3, "ids spread over the partitions");
    assert_eq!(stats.earliest_due, Some(at_ms(t0 - 70_000)));
    assert!(stats.overdue >= Duration::from_secs(70));
    assert_eq!(
        stats.overdue,
        stats.partitions.iter().map(|p| p.overdue).max().unwrap()
    );
}

#[tokio::test]
async fn fail_retries_after_a_backoff_then_dies_with_the_reason() {
    let server = RedisServer::start();
    let queue = queue(&server, Duration::from_secs(30), 2).await;
    let id = queue
        .schedule_with_id("order-7", Duration::ZERO, "charge 7")
        .await
        .unwrap();
    let job = next(&queue).await;
    let before = server.now_ms().await;
    assert_eq!(job.fail("provider down").await.unwrap(), Fate::Retried);
    let after = server.now_ms().await;
    assert_eq!(stored_error(&server, "order-7"), "provider down");
    // Due again 1 s (the first backoff) after the failure, by Redis' clock.
    let due: u64 = server
        .cli(&["ZSCORE", "ttr:{orders}:timeline", "order-7"])
        .trim()
        .parse()
        .unwrap();
    assert!(
        (before + 1000..=after + 1001).contains(&due),
        "{before} + 1 s <= {due} <= {after} + 1 s"
    );
    let stats = queue.stats().await.unwrap();
    assert_eq!((stats.pending, stats.due_now, stats.leased), (1, 0, 0));

    let job = next(&queue).await;
    assert_eq!(job.attempt(), 2);
    let before = server.now_ms().await;
    assert_eq!(job.fail("provider still down").await.unwrap(), Fate::Dead);
    let after = server.now_ms().await;

    let dead = queue.dead_letters(10).await.unwrap();
    assert_eq!(dead.len(), 1);
    let dead = &dead[0];
    assert_eq!(dead.id, id);
    assert_eq!(dead.partition, 0);
    assert_eq!(dead.attempts, 2);
    assert_eq!(dead.payload_len, 8);
    assert_eq!(dead.last_error.as_deref(), Some("provider still down"));
    assert!((before..=after).contains(&ms_of(dead.died_at)));
    let stats = queue.stats().await.unwrap();
    assert_eq!((stats.pending, stats.leased, stats.dead), (0, 0, 1));
    assert_eq!(stats.latest_death, Some(dead.died_at));
}

#[tokio::test]
async fn a_job_that_failed_and_then_succeeded_or_was_cancelled_leaves_nothing_behind() {
    let server = RedisServer::start();
    let queue = queue(&server, Duration::from_secs(30), 5).await;
    queue
        .schedule_with_id("flaky", Duration::ZERO, "x")
        .await
        .unwrap();
    let job = next(&queue).await;
    job.retry_after_with_reason(Duration::ZERO, "flaked")
        .await
        .unwrap();
    assert_eq!(stored_error(&server, "flaky"), "flaked");
    next(&queue).await.ack().await.unwrap();
    assert_eq!(server.job_keys(), "0", "ack forgets the error");

    queue
        .schedule_with_id("doomed", Duration::ZERO, "x")
        .await
        .unwrap();
    next(&queue).await.fail("flaked").await.unwrap(); // back in 1 s
    assert!(queue.cancel(&JobId::from("doomed")).await.unwrap());
    assert_eq!(server.job_keys(), "0", "cancel forgets the error");
}

#[tokio::test]
async fn jobs_that_die_without_a_word_say_why() {
    let server = RedisServer::start();
    let queue = queue(&server, Duration::from_millis(200), 2).await;

    // A reason given on attempt 1, then the lease runs out on attempt 2.
    queue
        .schedule_with_id("by-lease", Duration::ZERO, "a")
        .await
        .unwrap();
    let job = next(&queue).await;
    let fate = job
        .retry_after_with_reason(Duration::ZERO, "rate limited")
        .await
        .unwrap();
    assert_eq!(fate, Fate::Retried);
    let job = next(&queue).await;
    assert_eq!(job.attempt(), 2);
    drop(job);
    eventually("the job is buried", WAIT, || async {
        // A claim round buries it once its last lease has run out.
        let _ = tokio::time::timeout(Duration::from_millis(50), queue.next()).await;
        queue.stats().await.unwrap().dead == 1
    })
    .await;

    // Plain retry_after on the last attempt.
    queue
        .schedule_with_id("by-retry", Duration::ZERO, "b")
        .await
        .unwrap();
    for _ in 0..2 {
        next(&queue)
            .await
            .retry_after(Duration::ZERO)
            .await
            .unwrap();
    }

    let mut dead = queue.dead_letters(10).await.unwrap();
    dead.sort_by(|a, b| a.id.cmp(&b.id));
    let reasons: Vec<_> = dead
        .iter()
        .map(|d| (d.id.as_str(), d.attempts, d.last_error.as_deref().unwrap()))
        .collect();
    assert_eq!(
        reasons,
        vec![
            (
                "by-lease",
                2,
                "lease expired after 2 attempt(s) (last error: rate limited)"
            ),
            ("by-retry", 2, "retried on its last attempt (2 of 2)"),
        ]
    );
}

#[tokio::test]
async fn bury_is_dead_at_once_whatever_attempts_are_left() {
    let server = RedisServer::start();
    let queue = queue(&server, Duration::from_secs(30), 10).await;
    queue
        .schedule_with_id("bad", Duration::ZERO, vec![0xff; 3])
        .await
        .unwrap();
    let job = next(&queue).await;
    job.bury("payload is not UTF-8").await.unwrap();
    let dead = queue.dead_letters(10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].attempts, 1);
    assert_eq!(dead[0].payload_len, 3);
    assert_eq!(dead[0].last_error.as_deref(), Some("payload is not UTF-8"));
    let stats = queue.stats().await.unwrap();
    assert_eq!((stats.pending, stats.leased, stats.dead), (0, 0, 1));

    // A long reason is cut to 4 KiB, not refused.
    queue
        .schedule_with_id("chatty", Duration::ZERO, "x")
        .await
        .unwrap();
    let job = next(&queue).await;
    job.bury("é".repeat(10_000)).await.unwrap();
    let dead = queue.dead_letters(1).await.unwrap();
    let error = dead[0].last_error.as_deref().unwrap();
    assert_eq!(dead[0].id.as_str(), "chatty");
    assert!(error.len() <= 4096 && error.len() > 4000, "{}", error.len());
    assert!(error.ends_with('…'));
}

#[tokio::test]
async fn a_stale_delivery_cannot_fail_or_bury_the_job() {
    let server = RedisServer::start();
    let queue = queue(&server, Duration::from_millis(200), 5).await;
    let a = queue
        .schedule_with_id("a", Duration::ZERO, "a")
        .await
        .unwrap();

    // The lease ran out (by Redis' clock) but nobody reclaimed it yet.
    let stale = next(&queue).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    match stale.fail("too late").await {
        Err(Error::LeaseExpired { id }) => assert_eq!(id, a),
        other => panic!("expected LeaseExpired, got {other:?}"),
    }
    assert_eq!(stored_error(&server, "a"), "", "no reason recorded");

    // Redelivered: the first delivery is stale, the second holds it.
    let first = next(&queue).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let second = next(&queue).await;
    assert_eq!(second.id(), &a);
    match first.bury("stale bury").await {
        Err(Error::LeaseExpired { .. }) => {}
        other => panic!("expected LeaseExpired, got {other:?}"),
    }
    let stats = queue.stats().await.unwrap();
    assert_eq!((stats.leased, stats.dead), (1, 0), "still held, not dead");
    assert!(queue.dead_letters(10).await.unwrap().is_empty());
    assert_eq!(stored_error(&server, "a"), "");
    second.ack().await.unwrap();
    assert_eq!(server.job_keys(), "0", "ack leaves nothing behind");
}

/// Buries `ids` one by one (a few ms apart, so their deaths are ordered),
/// each with the reason "broke <id>".
async fn bury_all(queue: &Queue, ids: &[&str]) {
    for id in ids {
        queue
            .schedule_with_id(*id, Duration::ZERO, format!("payload of {id}"))
            .await
            .unwrap();
        let job = next(queue).await;
        assert_eq!(job.id().as_str(), *id);
        job.bury(format!("broke {id}")).await.unwrap();
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
}

#[tokio::test]
async fn dead_letters_are_listed_newest_first_requeued_and_purged() {
    let server = RedisServer::start();
    let queue = queue(&server, Duration::from_secs(30), 3).await;
    bury_all(&queue, &["d1", "d2", "d3", "d4"]).await;

    let listed: Vec<_> = queue
        .dead_letters(3)
        .await
        .unwrap()
        .into_iter()
        .map(|d| (d.id.into_string(), d.last_error.unwrap()))
        .collect();
    assert_eq!(
        listed,
        vec![
            ("d4".to_owned(), "broke d4".to_owned()),
            ("d3".to_owned(), "broke d3".to_owned()),
            ("d2".to_owned(), "broke d2".to_owned()),
        ]
    );
    assert!(queue.dead_letters(0).await.unwrap().is_empty());

    // Requeue one: due now, attempts and last error reset.
    assert!(queue.requeue(&JobId::from("d2")).await.unwrap());
    assert!(
        !queue.requeue(&JobId::from("d2")).await.unwrap(),
        "not dead now"
    );
    assert_eq!(stored_error(&server, "d2"), "");
    let stats = queue.stats().await.unwrap();
    assert_eq!((stats.pending, stats.due_now, stats.dead), (1, 1, 3));
    let job = next(&queue).await;
    assert_eq!((job.id().as_str(), job.attempt()), ("d2", 1));
    assert_eq!(job.payload(), b"payload of d2");
    // Neither a leased nor a waiting job is purged or requeued.
    assert!(!queue.purge(&JobId::from("d2")).await.unwrap());
    assert!(!queue.requeue(&JobId::from("nope")).await.unwrap());
    job.ack().await.unwrap();

    // Purge one: everything about it is gone.
    assert!(queue.purge(&JobId::from("d1")).await.unwrap());
    assert!(!queue.purge(&JobId::from("d1")).await.unwrap());
    assert_eq!(
        server.cli(&["HEXISTS", "ttr:{orders}:job", "pd1"]).trim(),
        "0"
    );
    assert_eq!(stored_error(&server, "d1"), "");

    // Requeue all, deliver them, then nothing is left.
    assert_eq!(queue.requeue_all().await.unwrap(), 2);
    assert_eq!(queue.requeue_all().await.unwrap(), 0);
    for _ in 0..2 {
        next(&queue).await.ack().await.unwrap();
    }
    bury_all(&queue, &["e1", "e2"]).await;
    assert_eq!(queue.purge_all().await.unwrap(), 2);
    assert_eq!(queue.purge_all().await.unwrap(), 0);
    assert_eq!(server.job_keys(), "0", "nothing left behind");

    assert!(matches!(
        queue.requeue(&JobId::from("")).await,
        Err(Error::InvalidJobId { .. })
    ));
    assert!(matches!(
        queue.purge(&JobId::from("x".repeat(513))).await,
        Err(Error::InvalidJobId { .. })
    ));
}

#[tokio::test]
async fn requeue_all_and_purge_all_go_through_every_batch_and_partition() {
    let server = RedisServer::start();
    let queue = Queue::builder(&server.url(), "orders")
        .partitions(2)
        .connect()
        .await
        .unwrap();
    // More than one batch (500) of dead letters.
    let n = 1_100;
    queue
        .schedule_many((0..n).map(|_| (Duration::ZERO, "x")))
        .await
        .unwrap();
    for _ in 0..n {
        next(&queue).await.bury("mass failure").await.unwrap();
    }
    let stats = queue.stats().await.unwrap();
    assert_eq!(stats.dead, n as u64);
    assert!(stats.partitions.iter().all(|p| p.dead > 500), "{stats:?}");
    // Listed in pages of 500: all of them, or the newest 700 of them.
    let all = queue.dead_letters(usize::MAX).await.unwrap();
    assert_eq!(all.len(), n);
    let ids: std::collections::HashSet<_> = all.iter().map(|d| d.id.clone()).collect();
    assert_eq!(ids.len(), n, "no dead letter listed twice");
    let newest = queue.dead_letters(700).await.unwrap();
    assert_eq!(newest.len(), 700);
    assert!(newest.windows(2).all(|w| w[0].died_at >= w[1].died_at));
    assert_eq!(newest[699].died_at, all[699].died_at);

    assert_eq!(queue.requeue_all().await.unwrap(), n as u64);
    let stats = queue.stats().await.unwrap();
    assert_eq!((stats.pending, stats.dead), (n as u64, 0));

    for _ in 0..n {
        next(&queue).await.bury("again").await.unwrap();
    }
    assert_eq!(queue.purge_all().await.unwrap(), n as u64);
    assert_eq!(server.job_keys(), "0");
}
