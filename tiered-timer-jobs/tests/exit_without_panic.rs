//! A producer that connects, schedules one job and returns from `main`
//! must exit without a panic message.
//!
//! The queue's wake-up subscriber is a task that waits on `tiered-timer`
//! (a `timeout` around its subscribe); when `main` returns, the runtime may
//! drop the timer's driver task while a worker still polls the subscriber.
//! Before the fix, 5 of 40 such runs printed "this sleep's timer has shut
//! down".
//!
//! This runs the producer 100 times in child processes (this very binary,
//! with the arguments `child <url>`), against one real redis-server, and
//! fails if any run printed a panic. Its own `main` (`harness = false`):
//! each child must be a fresh process with a fresh runtime.

mod support;

use std::process::{Command, Stdio};
use std::time::Duration;

use support::RedisServer;

/// Producer runs.
const RUNS: usize = 100;
/// Children run at once.
const PARALLEL: usize = 4;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("child") {
        return producer(&args[2]);
    }
    let server = RedisServer::start();
    let url = server.url();
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut panicked = Vec::new();
    let mut failed = Vec::new();
    for first in (0..RUNS).step_by(PARALLEL) {
        let batch: Vec<_> = (first..(first + PARALLEL).min(RUNS))
            .map(|i| {
                let child = Command::new(&exe)
                    .args(["child", &url])
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("spawn a producer run");
                (i, child)
            })
            .collect();
        for (i, child) in batch {
            let output = child.wait_with_output().expect("wait for a producer run");
            let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
            if stderr.contains("panicked") {
                panicked.push((i, stderr));
            } else if !output.status.success() {
                failed.push((i, output.status, stderr));
            }
        }
    }
    assert!(failed.is_empty(), "producer runs failed: {failed:?}");
    assert!(
        panicked.is_empty(),
        "{} of {RUNS} producer runs printed a panic at exit; the first:\n{}",
        panicked.len(),
        panicked[0].1
    );
    println!("exit_without_panic: {RUNS} producer runs, no panic at exit");
}

/// The producer: connect, schedule one job, return from `main`.
fn producer(url: &str) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("build a runtime");
    runtime.block_on(async {
        let queue = tiered_timer_jobs::Queue::connect(url, "exit-test")
            .await
            .expect("connect");
        queue
            .schedule(Duration::from_secs(3600), b"one job".to_vec())
            .await
            .expect("schedule");
    });
}
