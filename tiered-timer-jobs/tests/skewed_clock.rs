//! Never early by Redis' clock, with a client whose clock is an hour off:
//! the producer and worker run in a child process (this test binary run
//! again) under libfaketime, while redis-server runs on the true clock.
//! Without libfaketime the test fails, saying how to install it.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use support::{redis_now_ms, RedisServer};
use tiered_timer_jobs::Queue;

const LIBFAKETIME: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
    "/usr/local/lib/faketime/libfaketime.so.1",
];

fn libfaketime() -> &'static str {
    LIBFAKETIME
        .iter()
        .find(|path| Path::new(path).exists())
        .unwrap_or_else(|| {
            panic!(
                "libfaketime not found (looked in {LIBFAKETIME:?}): this test shifts a client's \
                 clock with it. Install it with `apt-get install -y faketime`."
            )
        })
}

/// Runs `skewed_client` in a child process with its clock shifted.
fn run_skewed(server: &RedisServer, shift: &str) -> String {
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "skewed_client",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("LD_PRELOAD", libfaketime())
        .env("FAKETIME", shift)
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
        .env("TTR_SKEWED_REDIS_URL", server.url())
        .output()
        .expect("run the skewed client");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "skewed client ({shift}) failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// The measured skew, in seconds, that the child printed.
fn skew_of(stdout: &str) -> i64 {
    stdout
        .lines()
        .find_map(|line| line.split_once("SKEW "))
        .and_then(|(_, s)| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("no SKEW line in:\n{stdout}"))
}

#[test]
fn a_client_an_hour_ahead_or_behind_never_makes_a_job_early() {
    let server = RedisServer::start();
    let ahead = run_skewed(&server, "+1h");
    assert!(
        skew_of(&ahead) >= 3500,
        "libfaketime did not shift the clock:\n{ahead}"
    );
    let behind = run_skewed(&server, "-1h");
    assert!(
        skew_of(&behind) <= -3500,
        "libfaketime did not shift the clock:\n{behind}"
    );
}

/// The child's part: producer and worker on a shifted clock. Run only by
/// the test above.
#[tokio::test]
#[ignore = "run by a_client_an_hour_ahead_or_behind_never_makes_a_job_early in a child process"]
async fn skewed_client() {
    let url = std::env::var("TTR_SKEWED_REDIS_URL").expect("run by the skewed-clock test");
    let local_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let redis_ms = redis_now_ms(&url).await as i64;
    println!("SKEW {}", (local_ms - redis_ms) / 1000);

    let lease = Duration::from_secs(30);
    let queue = Queue::builder(&url, "skewed")
        .lease(lease)
        .connect()
        .await
        .unwrap();
    let delays = [0u64, 200, 500];
    let mut expected = Vec::new();
    for delay in delays {
        let before = redis_now_ms(&url).await;
        let id = queue
            .schedule(Duration::from_millis(delay), b"x".to_vec())
            .await
            .unwrap();
        expected.push((id, before + delay));
    }
    for _ in &delays {
        let job = tokio::time::timeout(Duration::from_secs(20), queue.next())
            .await
            .expect("delivered")
            .unwrap();
        let (_, earliest) = expected.iter().find(|(id, _)| id == job.id()).unwrap();
        let expiry = support::lease_expiry_ms(&url, "skewed", job.id().as_str())
            .await
            .expect("leased");
        let claimed_at = expiry - lease.as_millis() as u64;
        println!(
            "job {} due >= {earliest}, claimed at {claimed_at} (Redis ms)",
            job.id()
        );
        assert!(
            claimed_at >= *earliest,
            "claimed before it was due by Redis' clock"
        );
        job.ack().await.unwrap();
    }
}
