//! An embedded store whose log ends in damage (issue 33): a whole last
//! frame damaged after it was written is never cut silently. Opening
//! refuses, naming `ttr repair`; a read-only look writes nothing;
//! `repair` moves the bytes to a quarantine file, warns, and counts it.
//! A torn write (a crash in the middle of one) is still cut off, with a
//! warning. Through the public API, with a global `tracing` subscriber
//! that keeps every warning (this binary's own).

mod support;

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use support::backend::TempDir;
use tiered_timer_jobs::{Error, Queue};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// Every warning of this test binary, with its fields: a global
/// subscriber, so that it sees the store's own threads too.
#[derive(Clone, Default)]
struct Warnings(Arc<Mutex<Vec<HashMap<String, String>>>>);

struct Fields<'a>(&'a mut HashMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl Subscriber for Warnings {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        *metadata.level() <= Level::WARN
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = HashMap::new();
        event.record(&mut Fields(&mut fields));
        self.0.lock().unwrap().push(fields);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

/// The warnings about the file at `path` so far.
fn warnings_about(path: &Path) -> Vec<HashMap<String, String>> {
    static WARNINGS: OnceLock<Warnings> = OnceLock::new();
    let warnings = WARNINGS.get_or_init(|| {
        let warnings = Warnings::default();
        tracing::subscriber::set_global_default(warnings.clone()).unwrap();
        warnings
    });
    let path = path.display().to_string();
    warnings
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|fields| fields.get("path") == Some(&path))
        .cloned()
        .collect()
}

fn url(dir: &Path) -> String {
    format!("file://{}", dir.display())
}

/// A store with `n` waiting jobs, each scheduled alone (one frame each):
/// the log's path and where its last frame starts.
async fn store_of(dir: &TempDir, n: usize) -> (PathBuf, u64) {
    warnings_about(&dir.0); // the subscriber is in place before anything is logged
    let queue = Queue::connect(&url(&dir.0), "orders").await.unwrap();
    let log = std::fs::canonicalize(&dir.0).unwrap().join("orders.log");
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

#[tokio::test]
async fn repair_moves_a_damaged_last_frame_to_a_quarantine_file() {
    let dir = TempDir::new("damaged-repair");
    let (log, last) = store_of(&dir, 30).await;
    let rotten = rot_last_record(&log);
    let done = tiered_timer_jobs::repair(&url(&dir.0), "orders")
        .await
        .unwrap();
    let kept = done.quarantined.clone().expect("a frame set aside");
    assert_eq!(
        (done.log.as_path(), done.end, done.torn),
        (log.as_path(), last, 0)
    );
    assert_eq!(
        kept.path,
        log.with_file_name(format!("orders.log.quarantine-{last}"))
    );
    assert_eq!((kept.offset, kept.len), (last, rotten.len() as u64 - last));
    assert!(kept.reason.contains("checksum"), "{}", kept.reason);
    // The bytes are kept as they were, and cut off the log.
    assert_eq!(std::fs::read(&kept.path).unwrap(), &rotten[last as usize..]);
    assert_eq!(std::fs::read(&log).unwrap(), &rotten[..last as usize]);
    // A warning names the file, the offset and the length.
    let warned = warnings_about(&log);
    let warning = warned
        .iter()
        .find(|w| w["message"].contains("quarantine"))
        .unwrap_or_else(|| panic!("no warning about the quarantine: {warned:?}"));
    assert_eq!(warning["offset"], last.to_string());
    assert_eq!(warning["len"], kept.len.to_string());
    assert_eq!(warning["quarantine"], kept.path.display().to_string());
    // The queue opens again, and counts the damaged frame until the
    // quarantine file is deleted.
    let queue = Queue::connect(&url(&dir.0), "orders").await.unwrap();
    let stats = queue.stats().await.unwrap();
    assert_eq!((stats.pending, stats.damaged_frames), (29, 1));
    assert!(stats.to_string().ends_with("damaged frames 1"), "{stats}");
    drop(queue);
    wait_closed(&dir.0).await;
    let again = tiered_timer_jobs::repair(&url(&dir.0), "orders")
        .await
        .unwrap();
    assert_eq!((again.end, again.torn, again.quarantined), (last, 0, None));
    std::fs::remove_file(&kept.path).unwrap();
    let queue = Queue::connect(&url(&dir.0), "orders").await.unwrap();
    assert_eq!(queue.stats().await.unwrap().damaged_frames, 0);
}

#[tokio::test]
async fn repair_creates_nothing_and_is_for_embedded_stores_only() {
    let dir = TempDir::new("damaged-nothing");
    let missing = dir.0.join("no-store");
    match tiered_timer_jobs::repair(&url(&missing), "orders").await {
        Err(Error::Io { source, .. }) => {
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound)
        }
        other => panic!("{other:?}"),
    }
    assert!(!missing.exists(), "repair made the store's directory");
    assert!(matches!(
        tiered_timer_jobs::repair("redis://127.0.0.1:1/", "orders").await,
        Err(Error::InvalidUrl { .. })
    ));
    assert!(matches!(
        tiered_timer_jobs::repair(&url(&dir.0), "a/b").await,
        Err(Error::InvalidQueueName { .. })
    ));
}

#[tokio::test]
async fn a_torn_last_write_is_still_cut_off_with_a_warning() {
    let dir = TempDir::new("damaged-torn");
    let (log, last) = store_of(&dir, 3).await;
    let whole = std::fs::read(&log).unwrap();
    // The last frame cut short, as a crash in the middle of its write.
    let torn = &whole[..whole.len() - 5];
    std::fs::write(&log, torn).unwrap();
    let queue = Queue::connect(&url(&dir.0), "orders").await.unwrap();
    assert_eq!(queue.pending().await.unwrap(), 2);
    assert_eq!(std::fs::read(&log).unwrap(), &whole[..last as usize]);
    let warned = warnings_about(&log);
    let warning = warned
        .iter()
        .find(|w| w["message"].contains("torn write"))
        .unwrap_or_else(|| panic!("no warning about the torn write: {warned:?}"));
    assert_eq!(warning["offset"], last.to_string());
    assert_eq!(warning["len"], (torn.len() as u64 - last).to_string());
}

/// The case: a look (a read-only handle, as `ttr`'s) at a copy of
/// a store whose last record rotted writes nothing, not even a lock file,
/// lists what it can read, and counts the damaged frame.
#[tokio::test]
async fn a_look_at_a_damaged_store_writes_nothing_and_counts_the_damage() {
    let dir = TempDir::new("damaged-look");
    let (log, _) = store_of(&dir, 30).await;
    let rotten = rot_last_record(&log);
    // A copy of the log alone, as an operator would take it.
    let copy = TempDir::new("damaged-look-copy");
    std::fs::create_dir_all(&copy.0).unwrap();
    std::fs::write(copy.0.join("orders.log"), &rotten).unwrap();
    let look = Queue::builder(&url(&copy.0), "orders")
        .read_only(true)
        .connect()
        .await
        .unwrap();
    let page = look
        .list(tiered_timer_jobs::Listing::Waiting, 0, 100)
        .await
        .unwrap();
    assert_eq!((page.total, page.jobs.len()), (29, 29));
    let stats = look.stats().await.unwrap();
    assert_eq!((stats.pending, stats.damaged_frames), (29, 1));
    assert!(look.job(&"order-3".into()).await.unwrap().is_some());
    drop(look);
    let files: Vec<_> = std::fs::read_dir(&copy.0)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(files, ["orders.log"], "a look created files");
    assert_eq!(std::fs::read(copy.0.join("orders.log")).unwrap(), rotten);
}
