//! `ttr` on a machine whose clock is an hour off (libfaketime shifts the
//! `ttr` process, not redis-server): it reports by Redis' clock. Without
//! libfaketime the test fails, saying how to install it.

#[path = "../../tiered-timer-jobs/tests/support/mod.rs"]
mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, UNIX_EPOCH};

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

/// `ttr` on a machine whose clock is an hour off reports lateness and
/// times by Redis' clock: every duration it prints is worked out by Redis.
#[tokio::test]
async fn ttr_reports_by_redis_clock_on_a_skewed_machine() {
    let server = RedisServer::start();
    let url = server.url();
    let queue = Queue::connect(&url, "skewed").await.unwrap();
    let t0 = redis_now_ms(&url).await;
    let due = UNIX_EPOCH + Duration::from_millis(t0 - 200_000); // 3m 20s late
    queue.schedule_at(due, "late").await.unwrap();
    queue.schedule_at(due, "buried").await.unwrap();
    let job = queue.next().await.unwrap();
    job.bury("broken").await.unwrap();
    for shift in ["+1h", "-1h"] {
        let ttr = |args: &[&str]| {
            let output = Command::new(env!("CARGO_BIN_EXE_ttr"))
                .args(["--url", &url])
                .args(args)
                .env("LD_PRELOAD", libfaketime())
                .env("FAKETIME", shift)
                .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
                .output()
                .expect("run ttr");
            assert!(output.status.success(), "{output:?}");
            String::from_utf8_lossy(&output.stdout).into_owned()
        };
        let stats = ttr(&["stats", "skewed"]);
        assert!(
            stats.contains("1 due now, the oldest 3m 2"),
            "{shift}:\n{stats}"
        );
        assert!(stats.contains("latest died "), "{shift}:\n{stats}");
        assert!(!stats.contains("1h"), "{shift}:\n{stats}");
        let dead = ttr(&["dead", "skewed"]);
        let row = dead.lines().nth(1).unwrap();
        assert!(row.ends_with("broken"), "{shift}:\n{dead}");
        assert!(
            !row.contains("1h") && !row.contains("59m"),
            "{shift}:\n{dead}"
        );
    }
}
