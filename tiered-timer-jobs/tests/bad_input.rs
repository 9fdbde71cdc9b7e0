//! One answer to one bad input, whichever the backend: every public call
//! of the crate is fed the same bad input on a real redis-server and on an
//! embedded store, and must give the same error there (the same variant
//! with the same fields, compared by their `Debug`), writing nothing.
//! Input is checked once, above the backends (`src/api/`), so a call
//! cannot check on one backend and forget on the other.
//!
//! The second test is about what one backend has and the other lacks (the
//! backend's capabilities): each such setting or call is
//! [`Error::Unsupported`], naming the setting and the backend.

mod support;

use std::fmt::Debug;
use std::time::{Duration, SystemTime};

use support::backend::Store;
use tiered_timer_jobs::{find_queues, repair, Error, JobId, JobState, Listing, Queue};

/// What each call answered, by call: an error's `Debug` (its variant and
/// fields), or what an `Ok` said that does not depend on the store (not
/// times or paths).
#[derive(Default)]
struct Answers(Vec<(String, String)>);

impl Answers {
    fn record<T: Debug>(&mut self, call: impl Into<String>, answer: Result<T, Error>) {
        let answer = match answer {
            Ok(value) => format!("Ok({value:?})"),
            Err(error) => format!("Err({error:?})"),
        };
        self.0.push((call.into(), answer));
    }

    fn answer(&self, call: &str) -> &str {
        let found = self.0.iter().find(|(c, _)| c == call);
        &found.unwrap_or_else(|| panic!("no call {call}")).1
    }
}

const LONGEST_SPAN: Duration = Duration::from_millis(1 << 51);
const LATEST: Duration = Duration::from_millis(1 << 52);

/// Every bad input, on one store. The queue `orders` takes payloads of at
/// most 16 bytes.
async fn answers(store: &Store) -> Answers {
    let url = store.url();
    let mut out = Answers::default();

    // Queue names: the same rule on both backends.
    let long_name = "q".repeat(201);
    for name in [
        "",
        long_name.as_str(),
        "a{b",
        "a}b",
        "a#1",
        "a b",
        "a\tb",
        "a\u{7}b",
        // An embedded queue's name is a file's name: the same rule on
        // Redis, so a queue can move between backends.
        "billing/invoices",
        ".",
        "..",
    ] {
        let connected = Queue::connect(&url, name)
            .await
            .map(|q| q.name().to_owned());
        out.record(format!("connect({name:?})"), connected);
    }

    // Settings out of range.
    let builders = [
        ("lease(0)", Queue::builder(&url, "q").lease(Duration::ZERO)),
        (
            "lease(2^51 ms + 1 ms)",
            Queue::builder(&url, "q").lease(LONGEST_SPAN + Duration::from_millis(1)),
        ),
        ("lease(MAX)", Queue::builder(&url, "q").lease(Duration::MAX)),
        ("max_attempts(0)", Queue::builder(&url, "q").max_attempts(0)),
        ("partitions(0)", Queue::builder(&url, "q").partitions(0)),
        (
            "partitions(1025)",
            Queue::builder(&url, "q").partitions(1025),
        ),
        (
            "command_timeout(0)",
            Queue::builder(&url, "q").command_timeout(Duration::ZERO),
        ),
        (
            "health_check(99 ms)",
            Queue::builder(&url, "q").health_check(Duration::from_millis(99)),
        ),
        (
            "replicas(1).replica_timeout(0)",
            Queue::builder(&url, "q")
                .replicas(1)
                .replica_timeout(Duration::ZERO),
        ),
        ("prefetch(1001)", Queue::builder(&url, "q").prefetch(1001)),
        ("holder(\"\")", Queue::builder(&url, "q").holder("")),
        (
            "holder(129 bytes)",
            Queue::builder(&url, "q").holder("h".repeat(129)),
        ),
        (
            "holder(\"a\\nb\")",
            Queue::builder(&url, "q").holder("a\nb"),
        ),
        (
            "register(false) of a queue that does not exist",
            Queue::builder(&url, "nowhere").register(false),
        ),
    ];
    for (call, builder) in builders {
        out.record(call, builder.connect().await.map(|_| ()));
    }

    let queue = Queue::builder(&url, "orders")
        .max_payload(16)
        .lease(Duration::from_secs(3600))
        .connect()
        .await
        .expect("connect");
    let empty = JobId::from("");
    let too_long = JobId::from("j".repeat(513));
    let big = vec![0u8; 17];

    // Scheduling: one job, then batches with one bad job among good ones
    // (nothing of the batch may be written).
    out.record(
        "schedule(0, 17 bytes)",
        queue.schedule(Duration::ZERO, big.clone()).await,
    );
    out.record(
        "schedule(2^51 ms + 1 ms)",
        queue
            .schedule(LONGEST_SPAN + Duration::from_millis(1), "x")
            .await,
    );
    out.record("schedule(MAX)", queue.schedule(Duration::MAX, "x").await);
    out.record(
        "schedule_at(before the epoch)",
        queue
            .schedule_at(SystemTime::UNIX_EPOCH - Duration::from_secs(1), "x")
            .await,
    );
    out.record(
        "schedule_at(2^52 ms + 1 ms)",
        queue
            .schedule_at(
                SystemTime::UNIX_EPOCH + LATEST + Duration::from_millis(1),
                "x",
            )
            .await,
    );
    out.record(
        "schedule_with_id(\"\")",
        queue.schedule_with_id(&empty, Duration::ZERO, "x").await,
    );
    out.record(
        "schedule_with_id(513 bytes)",
        queue.schedule_with_id(&too_long, Duration::ZERO, "x").await,
    );
    out.record(
        "schedule_with_id(good id, 17 bytes)",
        queue
            .schedule_with_id("good", Duration::ZERO, big.clone())
            .await,
    );
    out.record(
        "schedule_many(good, 17 bytes)",
        queue
            .schedule_many([(Duration::ZERO, vec![1u8]), (Duration::ZERO, big.clone())])
            .await
            .map(|ids| ids.len()),
    );
    out.record(
        "schedule_many(good, MAX)",
        queue
            .schedule_many([(Duration::ZERO, "x"), (Duration::MAX, "x")])
            .await
            .map(|ids| ids.len()),
    );
    out.record(
        "schedule_many_at(good, before the epoch)",
        queue
            .schedule_many_at([
                (SystemTime::now(), "x"),
                (SystemTime::UNIX_EPOCH - Duration::from_millis(1), "x"),
            ])
            .await
            .map(|ids| ids.len()),
    );
    out.record(
        "schedule_many_with_ids(good, \"\")",
        queue
            .schedule_many_with_ids([("good", Duration::ZERO, "x"), ("", Duration::ZERO, "x")])
            .await,
    );
    out.record(
        "schedule_many_with_ids(good, 513 bytes)",
        queue
            .schedule_many_with_ids([
                ("good".to_owned(), Duration::ZERO, "x"),
                (too_long.to_string(), Duration::ZERO, "x"),
            ])
            .await,
    );

    // Calls that take an id.
    for (what, id) in [("\"\"", &empty), ("513 bytes", &too_long)] {
        out.record(format!("cancel({what})"), queue.cancel(id).await);
        out.record(format!("job({what})"), queue.job(id).await);
        out.record(format!("promote({what})"), queue.promote(id).await);
        out.record(format!("requeue({what})"), queue.requeue(id).await);
        out.record(format!("purge({what})"), queue.purge(id).await);
    }

    // Pages.
    for (call, listing, offset, limit) in [
        ("list(waiting, 0, 0)", Listing::Waiting, 0, 0),
        ("list(due, 0, 1001)", Listing::Due, 0, 1001),
        ("list(dead, MAX, 10)", Listing::Dead, usize::MAX, 10),
    ] {
        let page = queue.list(listing, offset, limit).await;
        out.record(call, page.map(|p| (p.total, p.jobs.len())));
    }
    out.record(
        "dead_letters(0)",
        queue.dead_letters(0).await.map(|d| d.len()),
    );

    // None of it wrote anything.
    let stats = queue.stats().await.expect("stats");
    out.record(
        "after: pending, leased, dead",
        Ok::<_, Error>((stats.pending, stats.leased, stats.dead)),
    );

    // A delivered job's calls: each bad argument is refused before
    // anything is sent, so the job stays leased as it was.
    for call in [
        "extend_lease(0)",
        "extend_lease(2^51 ms + 1 ms)",
        "retry_after(MAX)",
        "retry_after(2^51 ms + 1 ms)",
        "retry_after_with_reason(MAX)",
    ] {
        let id = queue
            .schedule_with_id(call, Duration::ZERO, "x")
            .await
            .expect("schedule");
        let job = tokio::time::timeout(Duration::from_secs(20), queue.next())
            .await
            .expect("a job within 20 s")
            .expect("next");
        assert_eq!(job.id(), &id);
        let answer = match call {
            "extend_lease(0)" => job.extend_lease(Duration::ZERO).await,
            "extend_lease(2^51 ms + 1 ms)" => {
                job.extend_lease(LONGEST_SPAN + Duration::from_millis(1))
                    .await
            }
            "retry_after(MAX)" => job.retry_after(Duration::MAX).await,
            "retry_after(2^51 ms + 1 ms)" => {
                job.retry_after(LONGEST_SPAN + Duration::from_millis(1))
                    .await
            }
            _ => job
                .retry_after_with_reason(Duration::MAX, "x")
                .await
                .map(|_| ()),
        };
        out.record(call, answer);
        let info = queue.job(&id).await.expect("job").expect("still there");
        out.record(
            format!("{call}: then the job is"),
            Ok::<_, Error>((info.state, info.attempts)),
        );
    }

    // The crate's free functions.
    out.record(
        "find_queues(timeout 0)",
        find_queues(&url, false, Duration::ZERO).await.map(|_| ()),
    );
    for name in ["", "a{b"] {
        out.record(
            format!("repair({name:?})"),
            repair(&url, name).await.map(|_| ()),
        );
    }
    out
}

/// Every public call, the same bad input, the same error on both backends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_public_call_gives_both_backends_answer_to_bad_input() {
    let (redis, embedded) = (Store::redis(), Store::embedded());
    let on_redis = answers(&redis).await;
    let on_embedded = answers(&embedded).await;

    let differ: Vec<String> = on_redis
        .0
        .iter()
        .zip(&on_embedded.0)
        .filter(|((_, a), (_, b))| a != b)
        .map(|((call, a), (_, b))| format!("{call}:\n    redis:    {a}\n    embedded: {b}"))
        .collect();
    assert!(
        differ.is_empty(),
        "{} call(s) answer differently:\n{}",
        differ.len(),
        differ.join("\n")
    );

    // And the answer is the right one (one backend is enough: they agree).
    let expected = [
        ("connect(\"\")", "Err(InvalidQueueName {"),
        ("connect(\"a{b\")", "Err(InvalidQueueName {"),
        ("connect(\"a\\u{7}b\")", "Err(InvalidQueueName {"),
        ("connect(\"billing/invoices\")", "Err(InvalidQueueName {"),
        ("connect(\".\")", "Err(InvalidQueueName {"),
        ("connect(\"..\")", "Err(InvalidQueueName {"),
        ("lease(0)", "Err(InvalidConfig {"),
        ("lease(MAX)", "Err(InvalidConfig {"),
        ("partitions(1025)", "Err(InvalidConfig {"),
        ("health_check(99 ms)", "Err(InvalidConfig {"),
        ("replicas(1).replica_timeout(0)", "Err(InvalidConfig {"),
        ("prefetch(1001)", "Err(InvalidConfig {"),
        ("holder(\"\")", "Err(InvalidConfig {"),
        ("holder(129 bytes)", "Err(InvalidConfig {"),
        ("holder(\"a\\nb\")", "Err(InvalidConfig {"),
        (
            "register(false) of a queue that does not exist",
            "Err(NoSuchQueue { queue: \"nowhere\" })",
        ),
        (
            "schedule(0, 17 bytes)",
            "Err(PayloadTooLarge { len: 17, limit: 16 })",
        ),
        ("schedule(2^51 ms + 1 ms)", "Err(InvalidDeadline)"),
        ("schedule_at(2^52 ms + 1 ms)", "Err(InvalidDeadline)"),
        (
            "schedule_with_id(\"\")",
            "Err(InvalidJobId { reason: \"it is empty\" })",
        ),
        ("schedule_with_id(513 bytes)", "Err(InvalidJobId {"),
        ("schedule_many(good, 17 bytes)", "Err(PayloadTooLarge {"),
        ("schedule_many_with_ids(good, \"\")", "Err(InvalidJobId {"),
        (
            "cancel(\"\")",
            "Err(InvalidJobId { reason: \"it is empty\" })",
        ),
        ("cancel(513 bytes)", "Err(InvalidJobId {"),
        ("job(\"\")", "Err(InvalidJobId {"),
        ("promote(513 bytes)", "Err(InvalidJobId {"),
        ("requeue(\"\")", "Err(InvalidJobId {"),
        ("purge(513 bytes)", "Err(InvalidJobId {"),
        ("list(waiting, 0, 0)", "Err(InvalidArgument {"),
        ("list(due, 0, 1001)", "Err(InvalidArgument {"),
        ("list(dead, MAX, 10)", "Ok((0, 0))"),
        ("dead_letters(0)", "Ok(0)"),
        ("after: pending, leased, dead", "Ok((0, 0, 0))"),
        ("extend_lease(0)", "Err(InvalidArgument {"),
        ("extend_lease(2^51 ms + 1 ms)", "Err(InvalidArgument {"),
        ("retry_after(MAX)", "Err(InvalidDeadline)"),
        ("retry_after_with_reason(MAX)", "Err(InvalidDeadline)"),
        ("retry_after(MAX): then the job is", "Ok((Leased, 1))"),
        ("find_queues(timeout 0)", "Err(InvalidArgument {"),
        ("repair(\"\")", "Err(InvalidQueueName {"),
        ("repair(\"a{b\")", "Err(InvalidQueueName {"),
    ];
    for (call, starts) in expected {
        let answer = on_redis.answer(call);
        assert!(
            answer.starts_with(starts),
            "{call}: {answer}, not {starts}..."
        );
    }
    assert_eq!(on_redis.0.len(), on_embedded.0.len());
    let _ = JobState::Leased; // (the state the jobs above are left in)
}

/// Postgres gives every bad input the same answer as the others.
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_gives_every_public_call_the_same_answer_to_bad_input() {
    let (redis, postgres) = (Store::redis(), Store::postgres());
    let on_redis = answers(&redis).await;
    let on_postgres = answers(&postgres).await;
    let differ: Vec<String> = on_redis
        .0
        .iter()
        .zip(&on_postgres.0)
        .filter(|((_, a), (_, b))| a != b)
        .map(|((call, a), (_, b))| format!("{call}:\n    redis:    {a}\n    postgres: {b}"))
        .collect();
    assert!(
        differ.is_empty(),
        "{} call(s) answer differently:\n{}",
        differ.len(),
        differ.join("\n")
    );
    assert_eq!(on_redis.0.len(), on_postgres.0.len());

    // What Postgres lacks, it says so, in the same words.
    let url = postgres.url();
    let on = |name: &str| Queue::builder(&url, name);
    for (answer, expected) in [
        (
            on("q").partitions(2).connect().await.map(|_| ()),
            "partitions is not a setting of the postgres backend",
        ),
        (
            on("q").cluster().connect().await.map(|_| ()),
            "cluster is not a setting of the postgres backend",
        ),
        (
            on("q").replicas(1).connect().await.map(|_| ()),
            "replicas is not a setting of the postgres backend",
        ),
        (
            on("q").read_only(true).connect().await.map(|_| ()),
            "read_only is not a setting of the postgres backend",
        ),
    ] {
        match answer {
            Err(error @ Error::Unsupported { .. }) => assert_eq!(error.to_string(), expected),
            other => panic!("{expected}: {other:?}"),
        }
    }
    match repair(&url, "q").await {
        Err(Error::InvalidUrl { reason }) => assert!(
            reason.contains("repair is for stores that keep a log (file:// URLs)"),
            "{reason}"
        ),
        other => panic!("{other:?}"),
    }
}

/// A setting one backend has and the other lacks is
/// [`Error::Unsupported`], naming the setting and the backend, from one
/// place: the same words for every such setting (and `cluster` is refused
/// the same way by `find_queues` on a `file://` store, where it used to be
/// ignored). A call one backend lacks (`repair`, on Redis) says that its
/// URL is not one for that call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_backend_lacks_is_unsupported_and_says_so() {
    let (redis, embedded) = (Store::redis(), Store::embedded());
    let (redis, embedded) = (redis.url(), embedded.url());
    let unsupported = |answer: Result<(), Error>| match answer {
        Err(error @ Error::Unsupported { .. }) => error.to_string(),
        other => format!("{other:?}"),
    };
    let on = |url: &str, name: &str| Queue::builder(url, name);
    let cases = [
        (
            unsupported(on(&embedded, "q").partitions(2).connect().await.map(|_| ())),
            "partitions is not a setting of the embedded backend",
        ),
        (
            unsupported(on(&embedded, "q").cluster().connect().await.map(|_| ())),
            "cluster is not a setting of the embedded backend",
        ),
        (
            unsupported(on(&embedded, "q").replicas(1).connect().await.map(|_| ())),
            "replicas is not a setting of the embedded backend",
        ),
        (
            unsupported(on(&redis, "q").read_only(true).connect().await.map(|_| ())),
            "read_only is not a setting of the redis backend",
        ),
        (
            unsupported(
                find_queues(&embedded, true, Duration::from_secs(5))
                    .await
                    .map(|_| ()),
            ),
            "cluster is not a setting of the embedded backend",
        ),
    ];
    for (answer, expected) in cases {
        assert_eq!(answer, expected);
    }
    match repair(&redis, "q").await {
        Err(Error::InvalidUrl { reason }) => assert!(
            reason.contains("repair is for stores that keep a log (file:// URLs)"),
            "{reason}"
        ),
        other => panic!("{other:?}"),
    }
}
