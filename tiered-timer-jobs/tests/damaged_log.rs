//! An embedded store whose log ends in damage (issue 33): a whole last
//! frame damaged after it was written is never cut silently. Opening
//! refuses, naming `ttr repair`; a read-only look writes nothing;
//! `repair` moves the bytes to a quarantine file, warns, and counts it.
//! A torn write (a crash in the middle of one) is still cut off, with a
//! warning. Through the public API, with a global `tracing` subscriber
//! that keeps every warning (this binary's own).

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use support::backend::TempDir;
use tiered_timer_jobs::{Error, Queue};

fn url(dir: &Path) -> String {
    format!("file://{}", dir.display())
}

/// A store with `n` waiting jobs, each scheduled alone (one frame each):
/// the log's path and where its last frame starts.
async fn store_of(dir: &TempDir, n: usize) -> (PathBuf, u64) {
    let queue = Queue::connect(&url(&dir.0), "orders").await.unwrap();
    let log = dir.0.join("orders.log");
    let mut last = 0;
    for i in 0..n {
        last = std::fs::metadata(&log).unwrap().len();
        queue
            .schedule_with_id(format!("order-{i}"), Duration::from_secs(3600), "close it")
            .await
            .unwrap();
    }
    drop(queue);
    wait_closed(&dir.0).await;
    (log, last)
}

/// Waits until the store's lock is free (its last handle's committer is
/// done).
async fn wait_closed(dir: &Path) {
    for _ in 0..500 {
        if Queue::connect(&url(dir), "probe-lock").await.is_ok() {
            let _ = std::fs::remove_file(dir.join("probe-lock.log"));
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the store in {} did not close", dir.display());
}

/// Flips 4 bytes inside the last record of the log (bit rot).
fn rot_last_record(log: &Path) -> Vec<u8> {
    let mut bytes = std::fs::read(log).unwrap();
    let at = bytes.len() - 8;
    for b in &mut bytes[at..at + 4] {
        *b ^= 0x5a;
    }
    std::fs::write(log, &bytes).unwrap();
    bytes
}

#[tokio::test]
async fn a_damaged_last_frame_is_refused_and_left_as_it_is() {
    let dir = TempDir::new("damaged-refused");
    let (log, last) = store_of(&dir, 30).await;
    let rotten = rot_last_record(&log);
    match Queue::connect(&url(&dir.0), "orders").await {
        Err(error @ Error::Corrupt { offset, .. }) => {
            assert_eq!(offset, last, "the damaged frame's offset");
            let text = error.to_string();
            assert!(
                text.contains("orders.log") && text.contains("ttr repair orders"),
                "{text}"
            );
        }
        Err(other) => panic!("not Corrupt: {other}"),
        Ok(queue) => panic!(
            "opened, with {} jobs waiting of 30, the log cut to {} bytes",
            queue.pending().await.unwrap(),
            std::fs::metadata(&log).unwrap().len()
        ),
    }
    assert_eq!(std::fs::read(&log).unwrap(), rotten, "the log is untouched");
}
