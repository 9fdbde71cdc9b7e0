//! The store's numbers against the targets, without the `Queue`
//! on top (`cargo test -p tiered-timer-jobs --features embedded --lib
//! --release embedded::bench -- --ignored --nocapture --test-threads=1`):
//! group-committed schedules from 64 tasks, chunks of 1 000, lateness at
//! 1 000 jobs/s, reopening 1 000 000 pending jobs and the memory they
//! take (in a child process of its own, so that its resident size counts
//! nothing else).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::index::Due;
use super::ops;
use super::tests::TempDir;

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

/// Resident memory of this process, bytes.
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split(' ').nth(1).unwrap().parse().unwrap();
    pages * 4096
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split(' ')
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: run it with --release --ignored --nocapture"]
async fn store_numbers() {
    let n_one: usize = env("TTR_BENCH_ONE", 200_000);
    let n_many: usize = env("TTR_BENCH_MANY", 1_000_000);
    let late_secs: u64 = env("TTR_BENCH_LATENESS_SECS", 10) as u64;
    eprintln!("load average before: {}", load());

    // 64 tasks, one schedule at a time each.
    let dir = TempDir::new("bench-one");
    let log = ops::open(dir.path(), "bench").await.unwrap();
    let start = Instant::now();
    let per_task = n_one / 64;
    let tasks: Vec<_> = (0..64)
        .map(|_| {
            let log = Arc::clone(&log);
            tokio::spawn(async move {
                let later = now_ms() + 3_600_000;
                for _ in 0..per_task {
                    let id = crate::data::id::random_id();
                    log.schedule(&id, Due::At(later), &[7u8; 32]).await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let one = (per_task * 64) as f64 / start.elapsed().as_secs_f64();
    let frames = frames_of(&log);
    eprintln!(
        "schedule one by one, 64 tasks: {one:.0} jobs/s ({} jobs, {frames} frames: {:.1} jobs per fsync)",
        per_task * 64,
        (per_task * 64) as f64 / frames as f64
    );
    drop(log);

    // Chunks of 1 000.
    let dir = TempDir::new("bench-many");
    let log = ops::open(dir.path(), "bench").await.unwrap();
    let ids: Vec<String> = (0..n_many).map(|_| crate::data::id::random_id()).collect();
    let start = Instant::now();
    for chunk in ids.chunks(1000) {
        let jobs: Vec<(&str, u64, &[u8])> = chunk
            .iter()
            .map(|id| (id.as_str(), 3_600_000, &[7u8; 32][..]))
            .collect();
        log.schedule_many(true, None, &jobs).await.unwrap();
    }
    let many = n_many as f64 / start.elapsed().as_secs_f64();
    eprintln!("schedule_many, 1 000 per call: {many:.0} jobs/s ({n_many} jobs)");
    let path = log.path().to_owned();
    drop(log);
    tokio::time::sleep(Duration::from_millis(100)).await;

    // Reopening them, in a child process (time and memory).
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "embedded::bench::reopen_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("TTR_BENCH_REOPEN", dir.path())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&child.stderr);
    let line = out
        .lines()
        .find(|l| l.starts_with("reopen"))
        .unwrap_or("reopen: the child failed");
    eprintln!(
        "{line} (log {} MB)",
        std::fs::metadata(&path).unwrap().len() >> 20
    );
    drop(dir);

    // Lateness at 1 000 jobs/s, 4 workers each claiming and acking one job
    // at a time: when the claim is in the worker's hands (durable), minus
    // the due time, by the wall clock.
    let dir = TempDir::new("bench-late");
    let log = ops::open(dir.path(), "bench").await.unwrap();
    let jobs = (late_secs * 1000) as usize;
    let t0 = now_ms() + 1000;
    let ids: Vec<(String, u64)> = (0..jobs)
        .map(|i| (crate::data::id::random_id(), t0 + i as u64))
        .collect();
    for chunk in ids.chunks(1000) {
        let batch: Vec<(&str, u64, &[u8])> = chunk
            .iter()
            .map(|(id, at)| (id.as_str(), *at, &[1u8; 32][..]))
            .collect();
        log.schedule_many(false, None, &batch).await.unwrap();
    }
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let log = Arc::clone(&log);
            tokio::spawn(async move {
                let mut late = Vec::new();
                let deadline = Instant::now() + Duration::from_secs(late_secs + 5);
                while Instant::now() < deadline {
                    let notified = log.claimable();
                    let claim = log.claim(1, 30_000, 3).await.unwrap();
                    let Some(job) = claim.jobs.into_iter().next() else {
                        let _ = tokio::time::timeout(Duration::from_millis(500), notified).await;
                        continue;
                    };
                    let lateness_us = now_us() as i64 - (job.deadline_ms * 1000) as i64;
                    late.push(lateness_us);
                    log.ack(&job.id, job.token).await.unwrap();
                }
                late
            })
        })
        .collect();
    let mut late = Vec::new();
    for worker in workers {
        late.extend(worker.await.unwrap());
    }
    late.sort_unstable();
    let q = |p: f64| late[((late.len() as f64 * p) as usize).min(late.len() - 1)] as f64 / 1000.0;
    let early = late.iter().filter(|&&l| l < 0).count();
    eprintln!(
        "lateness at 1 000 jobs/s for {late_secs} s, 4 workers: p50 {:.2} / p99 {:.2} / max {:.2} ms, {early} early ({} jobs)",
        q(0.5),
        q(0.99),
        *late.last().unwrap() as f64 / 1000.0,
        late.len()
    );
    eprintln!("load average after: {}", load());
}

/// The reopening half of [`store_numbers`], in a process of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a child process of `store_numbers`"]
async fn reopen_child() {
    let Ok(dir) = std::env::var("TTR_BENCH_REOPEN") else {
        return;
    };
    let before = rss();
    let start = Instant::now();
    let log = ops::open(std::path::Path::new(&dir), "bench")
        .await
        .unwrap();
    let took = start.elapsed();
    let pending = log.pending();
    let after = rss();
    eprintln!(
        "reopen: {pending} pending jobs in {:.2} s; resident memory {:.1} B per pending job (payloads on disk)",
        took.as_secs_f64(),
        (after - before) as f64 / pending as f64
    );
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// How many frames the log has (group commits that wrote something).
fn frames_of(log: &super::store::QueueLog) -> u64 {
    let file = super::fs::open(log.path(), super::fs::Mode::Create).unwrap();
    let len = file.len().unwrap();
    let mut frames = 0;
    super::format::scan(log.path(), &file, 0, len, |_, _| {
        frames += 1;
        Ok(())
    })
    .unwrap();
    frames
}
