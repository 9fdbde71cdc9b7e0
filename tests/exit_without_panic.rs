//! A program whose tasks loop on `timeout` and `sleep` while `main` returns
//! must exit without a panic message, as it does on `tokio::time`.
//!
//! The runtime drops its tasks while its workers may still be polling
//! others: the timer's driver task can be gone (shutting the timer down)
//! while a worker polls one of its sleeps. Such a sleep belongs to a task
//! that is about to be dropped, so it must stay pending, not panic.
//!
//! This runs the program a few hundred times in child processes (this very
//! binary, with the argument `child`) and counts the runs whose stderr
//! mentions a panic. It has its own `main` (`harness = false`): each child
//! must be a fresh process with a fresh runtime.

use std::future::Future;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Runs of the program (8 tasks): before the fix, 4 to 9 in 100
/// printed the panic.
const RUNS: usize = 300;
/// Runs of a busier variant: before the fix, about 60 in 100 panicked.
const BUSY_RUNS: usize = 100;
/// Children run at once.
const PARALLEL: usize = 4;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("child") => return child(8, false),
        Some("busy-child") => return child(8, true),
        _ => {}
    }
    // `cargo test -- <filter>` style arguments are ignored: there is one test.
    count_panics("child", RUNS);
    count_panics("busy-child", BUSY_RUNS);
    println!("exit_without_panic: {RUNS} + {BUSY_RUNS} runs, no panic at exit");
}

/// Runs this binary `runs` times with `mode`, `PARALLEL` at a time; panics
/// if any run failed or printed a panic.
fn count_panics(mode: &str, runs: usize) {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut panicked = Vec::new();
    let mut failed = Vec::new();
    let mut run = 0;
    while run < runs {
        let batch: Vec<_> = (run..(run + PARALLEL).min(runs))
            .map(|i| {
                let child = Command::new(&exe)
                    .arg(mode)
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("spawn a child run");
                (i, child)
            })
            .collect();
        for (i, child) in batch {
            let output = child.wait_with_output().expect("wait for a child run");
            let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
            if stderr.contains("panicked") {
                panicked.push((i, stderr));
            } else if !output.status.success() {
                failed.push((i, output.status, stderr));
            }
        }
        run += PARALLEL;
    }
    assert!(failed.is_empty(), "{mode}: child runs failed: {failed:?}");
    assert!(
        panicked.is_empty(),
        "{mode}: {} of {runs} runs printed a panic at exit; the first:\n{}",
        panicked.len(),
        panicked[0].1
    );
}

/// The program: `tasks` tasks loop on `timeout` and `sleep` on a 2-worker
/// runtime; `main` returns after 20 ms, while they run. With `busy`, each
/// task also polls many fresh sleeps within one poll of its own, which
/// widens the window in which a worker polls a sleep while the runtime
/// drops the timer's driver task.
fn child(tasks: u64, busy: bool) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("build a runtime");
    runtime.block_on(async {
        for task in 0..tasks {
            tokio::spawn(async move {
                let mut round = 0u64;
                loop {
                    round += 1;
                    let slow = tiered_timer::sleep(Duration::from_micros(50 * (task + round % 7)));
                    let _ = tiered_timer::timeout(Duration::from_micros(300), slow).await;
                    tiered_timer::sleep(Duration::from_micros(100)).await;
                    if busy {
                        poll_many_sleeps().await;
                    }
                    tokio::task::yield_now().await;
                }
            });
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    });
}

/// Polls 2 000 new one-second sleeps once each, within one poll.
async fn poll_many_sleeps() {
    tokio::task::unconstrained(std::future::poll_fn(|cx| {
        for _ in 0..2000 {
            let mut sleep = tiered_timer::sleep(Duration::from_secs(1));
            let _ = std::pin::Pin::new(&mut sleep).poll(cx);
        }
        std::task::Poll::Ready(())
    }))
    .await;
}
