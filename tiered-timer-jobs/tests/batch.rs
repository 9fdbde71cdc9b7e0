//! Batched scheduling (`schedule_many`, `schedule_many_at`,
//! `schedule_many_with_ids`) against a real redis-server: one "now" per
//! call, chunks written whole or not at all, one wake-up per chunk,
//! partitions, idempotent ids, never early.

mod support;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, SystemTime};

use support::{deliver_all, RedisServer};
use tiered_timer_jobs::{Error, JobId, Queue};

const WAIT: Duration = Duration::from_secs(20);
const HOUR: Duration = Duration::from_secs(3600);

async fn connect(server: &RedisServer, name: &str, partitions: u32) -> Queue {
    Queue::builder(&server.url(), name)
        .partitions(partitions)
        .connect()
        .await
        .expect("connect")
}

async fn conn(server: &RedisServer) -> redis::aio::MultiplexedConnection {
    let client = redis::Client::open(server.url()).unwrap();
    client.get_multiplexed_async_connection().await.unwrap()
}

/// Redis' clock in µs.
async fn redis_now_us(server: &RedisServer) -> u64 {
    let (secs, micros): (u64, u64) = redis::cmd("TIME")
        .query_async(&mut conn(server).await)
        .await
        .unwrap();
    secs * 1_000_000 + micros
}

/// Every waiting job's due score, by id, over all `partitions` tags of
/// queue `name`.
async fn due_scores(server: &RedisServer, name: &str, partitions: u32) -> HashMap<JobId, u64> {
    let mut conn = conn(server).await;
    let mut scores = HashMap::new();
    for p in 0..partitions {
        let tag = if partitions == 1 {
            format!("{{{name}}}")
        } else {
            format!("{{{name}#{p}}}")
        };
        let members: Vec<(String, u64)> = redis::cmd("ZRANGEBYSCORE")
            .arg(format!("ttr:{tag}:timeline"))
            .arg("-inf")
            .arg(format!("({}", support::LEASED))
            .arg("WITHSCORES")
            .query_async(&mut conn)
            .await
            .unwrap();
        scores.extend(members.into_iter().map(|(id, s)| (JobId::from(id), s)));
    }
    scores
}

/// How many `PUBLISH`es Redis has run, in scripts or not (`INFO
/// commandstats`).
/// How many wake-up batons wait in queue `orders`' marker set (each
/// wakes one worker; with no worker waiting, none is taken).
fn batons(server: &RedisServer) -> u64 {
    // Not counting the watch baton `w` (one per partition, moved on with
    // the chain head: see src/redis/wake/).
    server
        .cli(&["ZRANGE", "ttr:{orders}:marker", "0", "-1"])
        .lines()
        .filter(|member| !member.is_empty() && *member != "w")
        .count() as u64
}

// 2 500 jobs on one partition are three scripts; every delay counts from
// the first one's `TIME`, so equal delays give one due score and delay
// `i` ms gives that score plus `i`, between Redis' now before and after
// the call.
#[tokio::test]
async fn every_delay_of_a_call_counts_from_one_redis_now() {
    let server = RedisServer::start();
    let queue = connect(&server, "orders", 1).await;
    let before_us = redis_now_us(&server).await;
    let same = queue
        .schedule_many((0..2500).map(|_| (HOUR, "same")))
        .await
        .unwrap();
    let after_us = redis_now_us(&server).await;
    let scores = due_scores(&server, "orders", 1).await;
    let due: HashSet<u64> = same.iter().map(|id| scores[id]).collect();
    assert_eq!(due.len(), 1, "equal delays, one due time: {due:?}");
    let due = *due.iter().next().unwrap();
    let hour_ms = HOUR.as_millis() as u64;
    assert!(due >= before_us.div_ceil(1000) + hour_ms, "never early");
    assert!(due <= after_us.div_ceil(1000) + hour_ms);

    let stepped = queue
        .schedule_many((0..2500u64).map(|i| (HOUR + Duration::from_micros(1000 * i + 1), "")))
        .await
        .unwrap();
    let scores = due_scores(&server, "orders", 1).await;
    let base = scores[&stepped[0]] - hour_ms - 1; // delays round up
    for (i, id) in stepped.iter().enumerate() {
        assert_eq!(scores[id], base + hour_ms + i as u64 + 1, "job {i}");
    }
    assert_eq!(queue.pending().await.unwrap(), 5000);
}

// Three partitions on one Redis share its clock, so one call's "now" is
// the same in all of them too.
#[tokio::test]
async fn partitions_on_one_redis_share_the_call_s_now() {
    let server = RedisServer::start();
    let queue = connect(&server, "mail", 3).await;
    let ids = queue
        .schedule_many((0..3000).map(|_| (HOUR, "x")))
        .await
        .unwrap();
    let scores = due_scores(&server, "mail", 3).await;
    assert_eq!(scores.len(), 3000);
    let due: HashSet<u64> = ids.iter().map(|id| scores[id]).collect();
    assert_eq!(due.len(), 1, "{due:?}");
    for p in 0..3 {
        let n: u64 = server
            .cli(&["ZCARD", &format!("ttr:{{mail#{p}}}:timeline")])
            .trim()
            .parse()
            .unwrap();
        assert!(n > 800, "partition {p} has {n} of 3000");
    }
    // And every job is delivered once from the three partitions.
    let soon = queue
        .schedule_many_at((0..300).map(|i| (SystemTime::now(), format!("{i}"))))
        .await
        .unwrap();
    let workers = vec![connect(&server, "mail", 3).await, queue.clone()];
    let delivered = deliver_all(workers, soon.len(), WAIT).await;
    assert_eq!(delivered.len(), soon.len(), "each once");
    assert_eq!(
        delivered.into_iter().collect::<HashSet<_>>(),
        soon.into_iter().collect::<HashSet<_>>()
    );
}

// The input is checked in full before anything is sent; and a chunk that
// fails inside Redis fails before its first write.
#[tokio::test]
async fn a_bad_job_anywhere_in_a_call_writes_nothing() {
    let server = RedisServer::start();
    let queue = Queue::builder(&server.url(), "orders")
        .max_payload(8)
        .connect()
        .await
        .unwrap();
    let ok = || (HOUR, b"ok".to_vec());
    let mut jobs: Vec<_> = (0..2500).map(|_| ok()).collect();
    jobs[2100] = (HOUR, vec![0; 9]); // in the third chunk
    assert!(matches!(
        queue.schedule_many(jobs).await,
        Err(Error::PayloadTooLarge { len: 9, limit: 8 })
    ));
    let mut jobs: Vec<_> = (0..1500).map(|_| ok()).collect();
    jobs[1499] = (Duration::MAX, b"ok".to_vec());
    assert!(matches!(
        queue.schedule_many(jobs).await,
        Err(Error::InvalidDeadline)
    ));
    let mut times: Vec<_> = (0..1500).map(|_| (SystemTime::now(), "ok")).collect();
    times[1200].0 = SystemTime::UNIX_EPOCH - Duration::from_millis(1);
    assert!(matches!(
        queue.schedule_many_at(times).await,
        Err(Error::InvalidDeadline)
    ));
    let mut named: Vec<_> = (0..1500)
        .map(|i| (format!("job-{i}"), HOUR, "ok"))
        .collect();
    named[1400].0 = String::new();
    assert!(matches!(
        queue.schedule_many_with_ids(named).await,
        Err(Error::InvalidJobId { .. })
    ));
    assert_eq!(server.job_keys(), "0", "nothing was written");

    // A payload hash of the wrong type makes the script fail: before any
    // job of the chunk is in the due set.
    server.cli(&["SET", "ttr:{orders}:job", "not a hash"]);
    let failed = queue.schedule_many((0..500).map(|_| ok())).await;
    assert!(matches!(failed, Err(Error::Redis(_))), "{failed:?}");
    assert_eq!(
        queue.pending().await.unwrap(),
        0,
        "the chunk is all or nothing"
    );
    assert_eq!(server.job_keys(), "1");
}

// One wake-up baton per chunk at most, and only when the chunk brings a
// new earliest job. (Scheduled one script per job, the descending delays
// below would arm one per job.)
#[tokio::test]
async fn one_wake_up_per_chunk_and_only_for_a_new_earliest_job() {
    let server = RedisServer::start();
    let queue = connect(&server, "orders", 1).await;
    let descending = |n: u64| (0..n).map(move |i| (HOUR + Duration::from_millis(n - i), "x"));
    queue.schedule_many(descending(2500)).await.unwrap();
    assert_eq!(batons(&server), 3, "three chunks, three new earliest jobs");

    // Later than the earliest: nothing to announce.
    queue.schedule_many(descending(1000)).await.unwrap();
    queue
        .schedule_many_at([(SystemTime::now() + 2 * HOUR, "later")])
        .await
        .unwrap();
    assert_eq!(batons(&server), 3);

    // A waiting worker sleeps until the hour is up, unless a batch with an
    // earlier job wakes it.
    let worker = {
        let queue = queue.clone();
        tokio::spawn(async move { queue.next().await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut jobs: Vec<_> = (0..999).map(|_| (HOUR, "hour")).collect();
    jobs.push((Duration::from_millis(50), "soon"));
    let ids = queue.schedule_many(jobs).await.unwrap();
    let job = tokio::time::timeout(WAIT, worker)
        .await
        .expect("the batch woke the worker")
        .unwrap()
        .unwrap();
    assert_eq!(job.id(), &ids[999]);
    assert_eq!(job.payload(), b"soon");
    job.ack().await.unwrap();
}

// A chunk also closes at about 4 MiB of payload: ten jobs of 512 KiB are
// two scripts (eight, then two), so two batons for descending times.
#[tokio::test]
async fn big_payloads_make_smaller_chunks() {
    let server = RedisServer::start();
    let queue = connect(&server, "orders", 1).await;
    let big = vec![7u8; 512 * 1024];
    let ids = queue
        .schedule_many((0..10u64).map(|i| (HOUR + Duration::from_millis(10 - i), big.clone())))
        .await
        .unwrap();
    assert_eq!(batons(&server), 2);
    let scores = due_scores(&server, "orders", 1).await;
    let base = scores[&ids[0]] - 10;
    for (i, id) in ids.iter().enumerate() {
        assert_eq!(scores[id], base + 10 - i as u64, "one now for both chunks");
    }
}

#[tokio::test]
async fn schedule_many_with_ids_is_idempotent() {
    let server = RedisServer::start();
    let queue = connect(&server, "orders", 2).await;
    let first: Vec<_> = (0..1500)
        .map(|i| (format!("order-{i}"), HOUR, "first"))
        .collect();
    assert_eq!(
        queue.schedule_many_with_ids(first.clone()).await.unwrap(),
        1500
    );
    let scores = due_scores(&server, "orders", 2).await;
    // Again, with other delays and payloads, and with a repeat inside the
    // call: nothing new, nothing changed.
    let mut again: Vec<_> = (0..1500)
        .map(|i| (format!("order-{i}"), Duration::ZERO, "second"))
        .collect();
    again.push(("order-7".into(), Duration::ZERO, "third"));
    assert_eq!(queue.schedule_many_with_ids(again).await.unwrap(), 0);
    assert_eq!(due_scores(&server, "orders", 2).await, scores);
    assert_eq!(queue.pending().await.unwrap(), 1500);

    // A repeat inside one call: the first wins. A leased id is left alone;
    // a dead letter's id is scheduled afresh.
    let fresh = connect(&server, "fresh", 1).await;
    let new = fresh
        .schedule_many_with_ids([
            ("a", Duration::ZERO, "a1"),
            ("b", Duration::ZERO, "b1"),
            ("a", Duration::ZERO, "a2"),
        ])
        .await
        .unwrap();
    assert_eq!(new, 2);
    let held = fresh.next().await.unwrap();
    let other = fresh.next().await.unwrap();
    let (a, b) = if held.id().as_str() == "a" {
        (held, other)
    } else {
        (other, held)
    };
    assert_eq!(a.payload(), b"a1");
    b.bury("gone").await.unwrap();
    let new = fresh
        .schedule_many_with_ids([("a", Duration::ZERO, "a3"), ("b", Duration::ZERO, "b2")])
        .await
        .unwrap();
    assert_eq!(new, 1, "a is leased, b was dead");
    assert!(fresh.dead_letters(10).await.unwrap().is_empty());
    a.ack().await.unwrap();
    let b = tokio::time::timeout(WAIT, fresh.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (b.id().as_str(), b.payload(), b.attempt()),
        ("b", &b"b2"[..], 1)
    );
    b.ack().await.unwrap();
    // Nothing left of the jobs: the job hash holds only the partition's
    // wake-up state, if anything.
    let left = server.cli(&["HKEYS", "ttr:{fresh}:job"]);
    assert!(left.lines().all(|f| f.is_empty() || f == "m"), "{left}");
    assert_eq!(server.cli(&["EXISTS", "ttr:{fresh}:timeline"]).trim(), "0");
}

// Before Redis 6.2 there is no ZMSCORE: the script looks ids up one by
// one instead, with the same result.
#[tokio::test]
async fn ids_are_looked_up_without_zmscore_too() {
    let server =
        RedisServer::start_with(&["--appendonly", "no", "--rename-command", "ZMSCORE", ""]);
    assert!(server
        .cli(&["ZMSCORE", "k", "a"])
        .contains("unknown command"));
    let queue = connect(&server, "orders", 1).await;
    let jobs = |payload| (0..1200).map(move |i| (format!("order-{i}"), HOUR, payload));
    assert_eq!(
        queue.schedule_many_with_ids(jobs("first")).await.unwrap(),
        1200
    );
    let mut again: Vec<_> = jobs("second").collect();
    again.push(("order-new".into(), HOUR, "new"));
    assert_eq!(queue.schedule_many_with_ids(again).await.unwrap(), 1);
    assert_eq!(queue.pending().await.unwrap(), 1201);
    let payload = server.cli(&["HGET", "ttr:{orders}:job", "porder-5"]);
    assert_eq!(payload.trim(), "first");
}

// Exact due times in bulk: each job's deadline is its time rounded up to
// the millisecond, and no job is claimed before it by Redis' clock.
#[tokio::test]
async fn batched_jobs_are_never_early() {
    let server = RedisServer::start();
    let lease = Duration::from_secs(30);
    let queue = Queue::builder(&server.url(), "orders")
        .lease(lease)
        .connect()
        .await
        .unwrap();
    let start = SystemTime::now() + Duration::from_millis(200);
    let times: Vec<SystemTime> = (0..200u64)
        .map(|i| start + Duration::from_micros(i * 1_537))
        .collect();
    let ids = queue
        .schedule_many_at(times.iter().map(|&at| (at, "at")))
        .await
        .unwrap();
    let before_us = redis_now_us(&server).await;
    let delayed = queue
        .schedule_many((0..100u64).map(|i| (Duration::from_micros(i * 2_311), "after")))
        .await
        .unwrap();
    let mut expected: HashMap<JobId, u64> = HashMap::new();
    for (id, at) in ids.iter().zip(&times) {
        let ns = at
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        expected.insert(id.clone(), ns.div_ceil(1_000_000) as u64);
    }
    for _ in 0..ids.len() + delayed.len() {
        let job = tokio::time::timeout(WAIT, queue.next())
            .await
            .unwrap()
            .unwrap();
        let deadline_ms = job
            .deadline()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        match expected.get(job.id()) {
            Some(&ms) => assert_eq!(deadline_ms, ms, "the time asked for, rounded up"),
            None => {
                let i = delayed.iter().position(|id| id == job.id()).unwrap() as u64;
                let delay_ms = (i * 2_311).div_ceil(1000);
                assert!(deadline_ms >= before_us.div_ceil(1000) + delay_ms);
            }
        }
        let expiry = support::lease_expiry_ms(&server.url(), "orders", job.id().as_str())
            .await
            .expect("leased");
        let claimed_at = expiry - lease.as_millis() as u64;
        assert!(
            claimed_at >= deadline_ms,
            "claimed at {claimed_at}, before its deadline {deadline_ms}"
        );
        job.ack().await.unwrap();
    }
}

#[tokio::test]
async fn an_empty_batch_sends_nothing() {
    let server = RedisServer::start();
    let queue = connect(&server, "orders", 1).await;
    let before = server.commands_processed();
    let none: Vec<(Duration, Vec<u8>)> = Vec::new();
    assert!(queue.schedule_many(none).await.unwrap().is_empty());
    assert_eq!(
        queue
            .schedule_many_with_ids(Vec::<(String, Duration, String)>::new())
            .await
            .unwrap(),
        0
    );
    // Only this test's own INFO.
    assert_eq!(server.commands_processed() - before, 1);
}

/// How long one chunk's script holds Redis (`INFO commandstats`
/// `usec_per_call` of `EVALSHA`), filling 200 000 jobs an hour out in calls
/// of 1 000 with 32-byte payloads, by delay and by time. A measurement,
/// not a check: run with
/// `cargo test -p tiered-timer-jobs --test batch -- --ignored --nocapture`.
#[tokio::test]
#[ignore = "a measurement; prints the time per chunk script"]
async fn time_per_chunk_script() {
    let server = RedisServer::start();
    let evalsha = || {
        let info = server.cli(&["INFO", "commandstats"]);
        let line = info
            .lines()
            .find(|line| line.starts_with("cmdstat_evalsha:"))
            .expect("EVALSHA in commandstats")
            .to_owned();
        line
    };
    let queue = connect(&server, "delays", 1).await;
    queue.schedule_many([(HOUR, "load")]).await.unwrap();
    server.cli(&["CONFIG", "RESETSTAT"]);
    for _ in 0..200 {
        queue
            .schedule_many((0..1000).map(|_| (HOUR, [b'x'; 32].to_vec())))
            .await
            .unwrap();
    }
    println!("schedule_many, 200 chunks of 1 000 jobs: {}", evalsha());
    let queue = connect(&server, "times", 1).await;
    server.cli(&["CONFIG", "RESETSTAT"]);
    let at = SystemTime::now() + HOUR;
    for _ in 0..200 {
        queue
            .schedule_many_at((0..1000).map(|_| (at, [b'x'; 32].to_vec())))
            .await
            .unwrap();
    }
    println!("schedule_many_at, 200 chunks of 1 000 jobs: {}", evalsha());
}
