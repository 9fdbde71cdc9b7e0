//! What a new user runs into first (issue 25, target 6): a handle built
//! with the wrong partition count, a Redis that is not there, a Redis that
//! does not answer. (`ttr`'s side: `ttr/tests/cli.rs`.)

mod support;

use std::time::{Duration, Instant};

use support::{closed_port, RedisServer, SilentServer};
use tiered_timer_jobs::{Error, Queue};

#[tokio::test]
async fn a_handle_with_another_partition_count_is_told_both_numbers() {
    let server = RedisServer::start();
    let queue = Queue::builder(&server.url(), "mail")
        .partitions(3)
        .connect()
        .await
        .unwrap();
    queue
        .schedule_many((0..7).map(|_| (Duration::from_secs(60), "x")))
        .await
        .unwrap();
    match Queue::builder(&server.url(), "mail").connect().await {
        Err(Error::PartitionMismatch {
            queue,
            recorded,
            configured,
        }) => {
            assert_eq!((queue.as_str(), recorded, configured), ("mail", 3, 1));
        }
        other => panic!("expected PartitionMismatch, got {other:?}"),
    }
    // The same count connects, and sees the jobs.
    let again = Queue::builder(&server.url(), "mail")
        .partitions(3)
        .connect()
        .await
        .unwrap();
    assert_eq!(again.pending().await.unwrap(), 7);
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
