//! What a new user runs into first (issue 25, target 6; issue 33): a
//! handle built without or with the wrong partition count, a misspelled
//! queue, a Redis that is not there, a Redis that does not answer.
//! (`ttr`'s side: `ttr/tests/cli.rs`.)

mod support;

use std::time::{Duration, Instant};

use support::{closed_port, HttpServer, RedisServer, SilentServer};
use tiered_timer_jobs::{Error, Queue};

/// Only the process that creates a queue says how it is partitioned:
/// every handle that asks for no count adopts the recorded one (looks
/// too), and one that asks for another is told both numbers.
#[tokio::test]
async fn a_handle_without_a_partition_count_adopts_the_recorded_one() {
    let server = RedisServer::start();
    let url = server.url();
    let queue = Queue::builder(&url, "mail")
        .partitions(3)
        .connect()
        .await
        .unwrap();
    queue
        .schedule_many((0..7).map(|_| (Duration::from_secs(60), "x")))
        .await
        .unwrap();
    for register in [true, false] {
        let adopted = Queue::builder(&url, "mail")
            .register(register)
            .connect()
            .await
            .unwrap_or_else(|e| panic!("register({register}): {e}"));
        let stats = adopted.stats().await.unwrap();
        assert_eq!((stats.partitions.len(), stats.pending), (3, 7));
        for asked in [1, 2] {
            match Queue::builder(&url, "mail")
                .register(register)
                .partitions(asked)
                .connect()
                .await
            {
                Err(Error::PartitionMismatch {
                    queue,
                    recorded,
                    configured,
                }) => {
                    assert_eq!((queue.as_str(), recorded, configured), ("mail", 3, asked));
                }
                other => panic!("expected PartitionMismatch, got {other:?}"),
            }
        }
    }
    // The same count connects, and sees the jobs.
    let again = Queue::builder(&url, "mail")
        .partitions(3)
        .connect()
        .await
        .unwrap();
    assert_eq!(again.pending().await.unwrap(), 7);
    assert_eq!(again.partitions(), 3);
}

/// A new queue records the count of its first connect, 1 if it asked for
/// none; of many first connects at once, all that connect agree with the
/// recorded count and the others are told it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_connects_at_once_agree_on_one_count() {
    let server = RedisServer::start();
    let url = server.url();
    let fresh = Queue::connect(&url, "fresh").await.unwrap();
    assert_eq!(fresh.partitions(), 1);
    assert_eq!(server.cli(&["HGET", "ttr:queues", "fresh"]).trim(), "1");

    for round in 0..20 {
        let name = format!("race{round}");
        let connects: Vec<_> = (0..6)
            .map(|i| {
                let (url, name) = (url.clone(), name.clone());
                tokio::spawn(async move {
                    let builder = Queue::builder(&url, &name);
                    let builder = if i % 2 == 0 {
                        builder.partitions(4)
                    } else {
                        builder
                    };
                    builder.connect().await.map(|q| q.partitions())
                })
            })
            .collect();
        let mut outcomes = Vec::new();
        for connect in connects {
            outcomes.push(connect.await.unwrap());
        }
        let recorded: u32 = server
            .cli(&["HGET", "ttr:queues", &name])
            .trim()
            .parse()
            .unwrap();
        assert!(recorded == 1 || recorded == 4, "{name}: {recorded}");
        for outcome in outcomes {
            match outcome {
                Ok(count) => assert_eq!(count, recorded, "{name}"),
                Err(Error::PartitionMismatch {
                    recorded: told,
                    configured: 4,
                    ..
                }) => assert_eq!((told, recorded), (1, 1), "{name}"),
                Err(other) => panic!("{name}: {other:?}"),
            }
        }
    }
}

/// A look (`register(false)`, as `ttr`'s) at a name that is no queue is
/// `NoSuchQueue`, and leaves nothing behind; a registered queue with no
/// jobs, and a queue known only by its keys, are there.
#[tokio::test]
async fn a_look_at_a_queue_that_does_not_exist_is_no_such_queue() {
    let server = RedisServer::start();
    let url = server.url();
    for partitions in [None, Some(1), Some(3)] {
        let mut builder = Queue::builder(&url, "ordres").register(false);
        if let Some(n) = partitions {
            builder = builder.partitions(n);
        }
        match builder.connect().await {
            Err(Error::NoSuchQueue { queue }) => assert_eq!(queue, "ordres"),
            other => panic!("{partitions:?}: expected NoSuchQueue, got {other:?}"),
        }
    }
    assert_eq!(server.cli(&["DBSIZE"]).trim(), "0", "nothing written");

    let empty = Queue::connect(&url, "empty").await.unwrap();
    drop(empty);
    let look = Queue::builder(&url, "empty")
        .register(false)
        .connect()
        .await
        .unwrap();
    assert_eq!(look.stats().await.unwrap().pending, 0);

    server.cli(&["ZADD", "ttr:{legacy}:timeline", "1", "a"]);
    let look = Queue::builder(&url, "legacy")
        .register(false)
        .connect()
        .await
        .unwrap();
    assert_eq!(look.pending().await.unwrap(), 1);
}

#[tokio::test]
async fn a_refused_connection_is_an_error_at_once_with_its_cause() {
    let url = format!("redis://127.0.0.1:{}/", closed_port());
    let started = Instant::now();
    let error = Queue::builder(&url, "orders")
        .command_timeout(Duration::from_secs(5))
        .connect()
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert!(
        matches!(&error, Error::Redis(e) if e.is_connection_refusal()),
        "{error:?}"
    );
    assert!(
        error.to_string().to_lowercase().contains("refused"),
        "{error}"
    );
    // Not the command timeout: the operating system said no.
    assert!(took < Duration::from_secs(2), "took {took:?}");
}

#[tokio::test]
async fn connecting_to_a_silent_redis_waits_the_whole_command_timeout() {
    let silent = SilentServer::start();
    let timeout = Duration::from_secs(3);
    let started = Instant::now();
    let error = Queue::builder(&silent.url(), "orders")
        .command_timeout(timeout)
        .connect()
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert!(
        matches!(error, Error::Timeout { after } if after == timeout),
        "{error:?}"
    );
    // redis-rs' own one-second connection timeout must not win; the
    // bounds are loose (a loaded machine), the point is 3 s, not 1 s.
    assert!(
        took >= Duration::from_millis(2500) && took < Duration::from_secs(10),
        "gave up after {took:?}"
    );
}

/// A URL that names a web server, or no store at all, says so in words:
/// not the `redis` crate's parse error, and with the schemes to use.
#[tokio::test]
async fn a_server_that_is_not_redis_and_a_url_that_is_no_store_are_named() {
    let http = HttpServer::start();
    let error = Queue::builder(&http.url(), "orders")
        .command_timeout(Duration::from_secs(5))
        .connect()
        .await
        .unwrap_err();
    assert!(matches!(error, Error::NotRedis(_)), "{error:?}");
    assert!(
        error
            .to_string()
            .contains("does not speak the Redis protocol"),
        "{error}"
    );
    let error = tiered_timer_jobs::find_queues(&http.url(), false, Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(matches!(error, Error::NotRedis(_)), "{error:?}");

    for (url, says) in [
        (
            "http://localhost/",
            "http:// is not a job store's scheme; use file:///",
        ),
        ("file://", "file:// needs the store's directory"),
    ] {
        let error = Queue::connect(url, "orders").await.unwrap_err();
        assert!(matches!(error, Error::InvalidUrl { .. }), "{error:?}");
        let text = error.to_string();
        assert!(text.contains(says), "{url}: {text}");
        assert!(!text.contains("Redis URL"), "{url}: {text}");
    }
}
