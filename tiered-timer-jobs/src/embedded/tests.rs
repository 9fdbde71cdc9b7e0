//! The store's own tests: each operation against the Redis scripts'
//! answers, reopening (replay), torn and damaged logs, compaction, a full
//! disk, and SIGKILL of a child process in the middle of bursts.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::error::StoreError;
use super::index::{Due, GaveUp, State, Which};
use super::ops::{self, Claimed};
use super::store::QueueLog;

/// A directory removed when dropped.
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    pub(crate) fn new(what: &str) -> TempDir {
        TempDir::new_in(&std::env::temp_dir(), what)
    }

    /// A new directory in `parent`.
    pub(crate) fn new_in(parent: &Path, what: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let path = parent.join(format!(
            "ttr-embedded-{what}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const LEASE: u64 = 30_000;

async fn open(dir: &TempDir) -> Arc<QueueLog> {
    ops::open(dir.path(), "orders").await.unwrap()
}

/// Drops the handle and waits until the store is closed (its committer
/// done), so that the next open replays the file.
fn close(log: Arc<QueueLog>) {
    drop(log);
}

/// Claims one job if one is due now.
async fn claim_one(log: &QueueLog) -> Option<Claimed> {
    claim(log, LEASE, 3).await
}

async fn claim(log: &QueueLog, lease: u64, max_attempts: u32) -> Option<Claimed> {
    let mut claim = log.claim(1, lease, max_attempts).await.unwrap();
    claim.jobs.pop()
}

/// Waits (at most 5 s) until a job is due, and claims it: a job due "now"
/// is due at the next millisecond (rounded up, never early).
async fn next(log: &QueueLog) -> Claimed {
    next_with(log, LEASE, 3).await
}

async fn next_with(log: &QueueLog, lease: u64, max_attempts: u32) -> Claimed {
    let wait = async {
        loop {
            let notified = log.claimable();
            if let Some(job) = claim(log, lease, max_attempts).await {
                return job;
            }
            notified.await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), wait)
        .await
        .expect("a job comes due within 5 s")
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[tokio::test]
async fn schedule_claim_ack() {
    let dir = TempDir::new("basic");
    let log = open(&dir).await;
    let (new, due) = log
        .schedule("order-42", Due::After(0), b"close it")
        .await
        .unwrap();
    assert!(new);
    assert!(due >= now_ms() - 5 && due <= now_ms() + 1);
    assert_eq!(log.pending(), 1);
    let job = next(&log).await;
    assert_eq!(job.id, "order-42");
    assert_eq!(job.payload, b"close it");
    assert_eq!(
        (job.attempt, job.redelivery, job.deadline_ms),
        (1, false, due)
    );
    assert_eq!((log.pending(), log.leased()), (0, 1));
    assert!(claim_one(&log).await.is_none(), "held: not delivered twice");
    assert!(log.ack("order-42", job.token).await.unwrap());
    assert!(!log.ack("order-42", job.token).await.unwrap(), "acked once");
    assert_eq!((log.pending(), log.leased()), (0, 0));
}

#[tokio::test]
async fn ids_are_idempotent_and_dead_letters_replaced() {
    let dir = TempDir::new("ids");
    let log = open(&dir).await;
    let at = now_ms() + 60_000;
    assert_eq!(
        log.schedule("a", Due::At(at), b"1").await.unwrap(),
        (true, at)
    );
    assert_eq!(
        log.schedule("a", Due::At(at + 5), b"2").await.unwrap(),
        (false, at)
    );
    assert_eq!(log.pending(), 1);
    // Leased: the answer is the lease expiry, nothing written.
    log.schedule("b", Due::After(0), b"x").await.unwrap();
    let job = next(&log).await;
    let (new, expiry) = log.schedule("b", Due::After(0), b"y").await.unwrap();
    assert!(!new);
    assert!(expiry >= job.deadline_ms + LEASE);
    // Dead: replaced by a new job of that id, attempts and error gone.
    assert_eq!(
        log.fail("b", job.token, true, 0, 3, "bad payload")
            .await
            .unwrap(),
        GaveUp::Buried
    );
    assert_eq!(log.stats().dead, 1);
    assert!(log.schedule("b", Due::After(0), b"z").await.unwrap().0);
    let (_, row) = log.inspect("b").await.unwrap();
    let row = row.unwrap();
    assert_eq!(
        (row.state, row.attempts, row.payload.as_slice()),
        (State::Waiting, 0, &b"z"[..])
    );
    assert_eq!(row.last_error, None);
    assert_eq!(log.stats().dead, 0);
    // A chunk: repeats inside it and ids already there are left alone.
    let jobs: Vec<(&str, u64, &[u8])> = vec![
        ("c", 10, b"c"),
        ("a", 10, b"a"),
        ("c", 20, b"c2"),
        ("d", 0, b"d"),
    ];
    let (written, base) = log.schedule_many(true, None, &jobs).await.unwrap();
    assert_eq!(written, 2);
    let (_, c) = log.inspect("c").await.unwrap();
    assert_eq!(c.unwrap().at_ms, base + 10, "the first of the chunk wins");
}

#[tokio::test]
async fn never_early_and_in_due_order() {
    let dir = TempDir::new("order");
    let log = open(&dir).await;
    let start = now_ms();
    log.schedule("late", Due::At(start + 300), b"")
        .await
        .unwrap();
    log.schedule("early", Due::At(start + 150), b"")
        .await
        .unwrap();
    log.schedule("past", Due::At(start - 1000), b"")
        .await
        .unwrap();
    let first = claim_one(&log).await.unwrap();
    assert_eq!(first.id, "past");
    assert!(claim_one(&log).await.is_none(), "nothing else is due yet");
    let mut got = Vec::new();
    while got.len() < 2 {
        let notified = log.claimable();
        if let Some(job) = claim_one(&log).await {
            assert!(
                now_ms() >= job.deadline_ms,
                "early: {} < {}",
                now_ms(),
                job.deadline_ms
            );
            got.push(job.id);
            continue;
        }
        tokio::time::timeout(Duration::from_secs(5), notified)
            .await
            .expect("the driver wakes a waiting claim");
    }
    assert_eq!(got, ["early", "late"]);
}

#[tokio::test]
async fn leases_run_out_and_are_fenced() {
    let dir = TempDir::new("lease");
    let log = open(&dir).await;
    log.schedule("j", Due::After(0), b"p").await.unwrap();
    let first = next_with(&log, 50, 3).await;
    tokio::time::sleep(Duration::from_millis(80)).await;
    // Ran out, not reclaimed: the holder's ack still works on Redis too
    // (the token is current), but retry, extend and release are fenced by
    // the expiry.
    assert_eq!(log.stats().expired_leases, 1);
    assert_eq!(
        log.retry("j", first.token, 0, 3).await.unwrap(),
        GaveUp::Lost
    );
    assert_eq!(log.extend("j", first.token, 1000), None);
    assert!(!log.release("j", first.token).await.unwrap());
    let second = next_with(&log, 50, 3).await;
    assert_eq!((second.attempt, second.redelivery), (2, true));
    assert_eq!(second.deadline_ms, first.deadline_ms);
    assert!(
        !log.ack("j", first.token).await.unwrap(),
        "the old holder's ack is refused"
    );
    // Renewed in time, it stays held.
    assert!(log.extend("j", second.token, 5_000).is_some());
    tokio::time::sleep(Duration::from_millis(80)).await;
    assert!(log.claim(1, 50, 3).await.unwrap().jobs.is_empty());
    // Released: due at once, the attempt not counted.
    assert!(log.release("j", second.token).await.unwrap());
    let third = next(&log).await;
    assert_eq!(third.attempt, 2);
    // Out of attempts: the expired lease goes to the dead letters.
    let third = {
        assert!(log.release("j", third.token).await.unwrap());
        next_with(&log, 20, 2).await
    };
    assert_eq!(third.attempt, 2);
    tokio::time::sleep(Duration::from_millis(40)).await;
    let claim = log.claim(1, 20, 2).await.unwrap();
    assert!(claim.jobs.is_empty());
    assert_eq!(claim.buried, ["j"]);
    let (_, dead) = log.inspect("j").await.unwrap();
    let dead = dead.unwrap();
    assert_eq!(dead.state, State::Dead);
    assert_eq!(
        dead.last_error.as_deref(),
        Some("lease expired after 2 attempt(s)")
    );
}

#[tokio::test]
async fn failures_retry_then_die_with_reasons() {
    let dir = TempDir::new("fail");
    let log = open(&dir).await;
    log.schedule("j", Due::After(0), b"p").await.unwrap();
    let job = next(&log).await;
    assert_eq!(
        log.fail("j", job.token, false, 0, 2, "timeout")
            .await
            .unwrap(),
        GaveUp::Rescheduled
    );
    let job = next(&log).await;
    assert_eq!(job.attempt, 2);
    assert_eq!(
        log.retry("j", job.token, 0, 2).await.unwrap(),
        GaveUp::Buried
    );
    let (_, rows) = (0, log.list(Which::Dead, 0, 10, 64).await.unwrap().2);
    assert_eq!(rows.len(), 1);
    assert_eq!(
        rows[0].last_error.as_deref(),
        Some("retried on its last attempt (2 of 2) (last error: timeout)")
    );
    assert_eq!(rows[0].attempts, 2);
    // Requeued: due now, attempts and error reset.
    assert!(log.requeue("j").await.unwrap());
    assert!(!log.requeue("j").await.unwrap());
    let job = next(&log).await;
    assert_eq!(job.attempt, 1);
    assert_eq!(
        log.fail("j", job.token, true, 0, 9, "gone").await.unwrap(),
        GaveUp::Buried
    );
    assert!(log.purge("j").await.unwrap());
    assert!(log.inspect("j").await.unwrap().1.is_none());
}

#[tokio::test]
async fn cancel_promote_and_bulk_dead_letters() {
    let dir = TempDir::new("ops");
    let log = open(&dir).await;
    let later = now_ms() + 3_600_000;
    for i in 0..5 {
        log.schedule(&format!("j{i}"), Due::At(later + i), b"")
            .await
            .unwrap();
    }
    assert!(log.cancel("j0").await.unwrap());
    assert!(!log.cancel("j0").await.unwrap());
    assert!(log.promote("j1").await.unwrap());
    assert!(!log.promote("nope").await.unwrap());
    let job = next(&log).await;
    assert_eq!(job.id, "j1");
    assert!(
        !log.cancel("j1").await.unwrap(),
        "a leased job cannot be cancelled"
    );
    let stats = log.stats();
    assert_eq!((stats.pending, stats.due_now, stats.leased), (3, 0, 1));
    assert_eq!(stats.earliest_due_ms, Some(later + 2));
    let (_, total, rows) = log.list(Which::Waiting, 1, 10, 0).await.unwrap();
    assert_eq!(total, 3);
    let ids: Vec<&str> = rows.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["j3", "j4"]);
    for id in ["j2", "j3", "j4"] {
        log.promote(id).await.unwrap();
    }
    for _ in 0..3 {
        let job = next(&log).await;
        log.fail(&job.id, job.token, true, 0, 3, "x").await.unwrap();
    }
    assert_eq!(log.requeue_all(2).await.unwrap(), 2);
    assert_eq!(log.purge_all(10).await.unwrap(), 1);
    assert_eq!(log.stats().dead, 0);
    assert_eq!(log.pending(), 2);
}

#[tokio::test]
async fn reopening_replays_everything() {
    let dir = TempDir::new("replay");
    let later = now_ms() + 3_600_000;
    {
        let log = open(&dir).await;
        for i in 0..100 {
            log.schedule(
                &format!("w{i}"),
                Due::At(later + i),
                format!("payload {i}").as_bytes(),
            )
            .await
            .unwrap();
        }
        log.schedule("held", Due::After(0), b"h").await.unwrap();
        log.schedule("dead", Due::After(0), b"d").await.unwrap();
        log.schedule("acked", Due::After(0), b"a").await.unwrap();
        log.cancel("w0").await.unwrap();
        let mut jobs = Vec::new();
        while jobs.len() < 3 {
            jobs.push(next_with(&log, LEASE, 5).await);
        }
        for job in jobs {
            match job.id.as_str() {
                "held" => {}
                "dead" => {
                    log.fail("dead", job.token, true, 0, 5, "no such customer")
                        .await
                        .unwrap();
                }
                _ => assert!(log.ack(&job.id, job.token).await.unwrap()),
            }
        }
        close(log);
    }
    let log = open(&dir).await;
    let stats = log.stats();
    assert_eq!(stats.pending, 99);
    assert_eq!(stats.dead, 1);
    assert_eq!(stats.earliest_due_ms, Some(later + 1));
    // The lease of the process before ran out with it: redelivered at once,
    // its delivery counted.
    assert_eq!((stats.leased, stats.expired_leases), (1, 1));
    let job = claim_one(&log)
        .await
        .expect("a lease of a dead process ran out");
    assert_eq!(
        (job.id.as_str(), job.attempt, job.redelivery),
        ("held", 2, true)
    );
    assert_eq!(job.payload, b"h");
    let (_, dead) = log.inspect("dead").await.unwrap();
    assert_eq!(
        dead.unwrap().last_error.as_deref(),
        Some("no such customer")
    );
    assert!(log.inspect("acked").await.unwrap().1.is_none());
    let (_, w5) = log.inspect("w5").await.unwrap();
    let w5 = w5.unwrap();
    assert_eq!((w5.at_ms, w5.payload), (later + 5, b"payload 5".to_vec()));
    // Lateness of the first delivery was replayed too.
    assert_eq!(log.lateness().iter().sum::<u64>(), 3);
}

/// A claim hands its job out before its record is on disk, unless the
/// job was due when the store opened (a dead process may have handed it
/// out uncounted): then only once the claim is on disk. So a job whose
/// work kills the process at once is counted each time and dies after
/// `max_attempts`, never loops. Each "crash" here is a copy of the log's
/// synced part taken as the claim returns: what a power cut (or a SIGKILL
/// before the committer's write) at that instant leaves.
#[tokio::test]
async fn a_job_that_kills_the_process_at_once_runs_out_of_attempts() {
    let mut dir = TempDir::new("poison");
    {
        let log = open(&dir).await;
        log.schedule("poison", Due::After(0), b"p").await.unwrap();
        close(log);
    }
    tokio::time::sleep(Duration::from_millis(5)).await;
    for attempt in 1..=3 {
        let log = open(&dir).await;
        let job = next_with(&log, LEASE, 3).await;
        assert_eq!((job.id.as_str(), job.attempt), ("poison", attempt));
        let synced = log.durable_end() as usize;
        let crashed = TempDir::new("poison");
        let bytes = std::fs::read(log.path()).unwrap();
        std::fs::write(crashed.path().join("orders.log"), &bytes[..synced]).unwrap();
        close(log);
        dir = crashed;
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let log = open(&dir).await;
    let claim = log.claim(1, LEASE, 3).await.unwrap();
    assert!(claim.jobs.is_empty(), "handed out a fourth time");
    assert_eq!(claim.buried, ["poison"], "out of attempts, dead");
}

#[tokio::test]
async fn a_torn_last_write_is_cut_off() {
    let dir = TempDir::new("torn");
    let path;
    {
        let log = open(&dir).await;
        log.schedule("kept", Due::After(0), b"k").await.unwrap();
        path = log.path().to_owned();
        close(log);
    }
    let len_before = std::fs::metadata(&path).unwrap().len();
    // A frame cut short: a whole one written elsewhere, half of it here.
    let frame = {
        // The second frame of a store like this one: slot 1.
        let other = TempDir::new("torn-src");
        let log = open(&other).await;
        log.schedule("pad", Due::After(0), b"k").await.unwrap();
        let first = std::fs::metadata(log.path()).unwrap().len() as usize;
        log.schedule("lost", Due::After(0), b"l").await.unwrap();
        let bytes = std::fs::read(log.path()).unwrap();
        close(log);
        bytes[first..].to_vec()
    };
    for cut in [1, 10, 16, 20, frame.len() - 1] {
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.truncate(len_before as usize);
        bytes.extend_from_slice(&frame[..cut]);
        std::fs::write(&path, &bytes).unwrap();
        let log = open(&dir).await;
        assert_eq!(log.pending(), 1, "cut at {cut}");
        assert!(log.inspect("lost").await.unwrap().1.is_none());
        close(log);
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            len_before,
            "cut off at {cut}"
        );
    }
    // Whole, the frame is read.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(&frame);
    std::fs::write(&path, &bytes).unwrap();
    let log = open(&dir).await;
    assert_eq!(log.pending(), 2);
}

#[tokio::test]
async fn damage_that_is_not_a_torn_write_is_an_error_with_the_offset() {
    let dir = TempDir::new("corrupt");
    let path;
    {
        let log = open(&dir).await;
        for i in 0..3 {
            log.schedule(&format!("j{i}"), Due::After(0), b"payload")
                .await
                .unwrap();
        }
        path = log.path().to_owned();
        close(log);
    }
    let good = std::fs::read(&path).unwrap();
    let first_frame = super::format::FILE_HEADER as u64;
    // A byte of the first frame's body, and a byte of its header: frames
    // follow, so neither is a torn last write.
    for (at, expect_at) in [
        (first_frame + 20, first_frame),
        (first_frame + 5, first_frame),
    ] {
        let mut bad = good.clone();
        bad[at as usize] ^= 0xff;
        std::fs::write(&path, &bad).unwrap();
        match ops::open(dir.path(), "orders").await {
            Err(StoreError::Corrupt {
                path: p, offset, ..
            }) => {
                assert_eq!(p, std::fs::canonicalize(&path).unwrap());
                assert_eq!(offset, expect_at, "damage at byte {at}");
            }
            other => panic!("damage at byte {at} gave {other:?}"),
        }
        // Nothing was cut: the file is as it was found.
        assert_eq!(std::fs::read(&path).unwrap(), bad);
    }
    let message = {
        let mut bad = good.clone();
        bad[first_frame as usize + 20] ^= 0xff;
        std::fs::write(&path, &bad).unwrap();
        ops::open(dir.path(), "orders")
            .await
            .unwrap_err()
            .to_string()
    };
    assert!(
        message.contains("orders.log") && message.contains("byte 16"),
        "{message}"
    );
    std::fs::write(&path, &good).unwrap();
    assert_eq!(open(&dir).await.pending(), 3);
}

#[tokio::test]
async fn the_store_is_locked_while_open() {
    let dir = TempDir::new("lock");
    let log = open(&dir).await;
    // Another open file description of the lock file (as another process
    // would have) cannot take it.
    let other = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.path().join("LOCK"))
        .unwrap();
    assert!(matches!(
        fs4::FileExt::try_lock(&other),
        Err(fs4::TryLockError::WouldBlock)
    ));
    // The same process shares the open store.
    let again = open(&dir).await;
    assert!(Arc::ptr_eq(&log, &again));
    drop((log, again));
    // Closed: the lock is free again (once the committer ended).
    let mut free = false;
    for _ in 0..100 {
        if fs4::FileExt::try_lock(&other).is_ok() {
            free = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(free, "the lock is released when the store closes");
}

#[tokio::test]
async fn compaction_keeps_the_live_jobs_and_shrinks_the_log() {
    let dir = TempDir::new("compact");
    let later = now_ms() + 3_600_000;
    let log = open(&dir).await;
    log.set_compact_min(64 << 10);
    let payload = vec![7u8; 200];
    // Garbage: scheduled and cancelled; live: every tenth kept.
    for round in 0..20 {
        let jobs: Vec<(String, u64, Vec<u8>)> = (0..100)
            .map(|i| (format!("r{round}-{i}"), later + i, payload.clone()))
            .collect();
        let chunk: Vec<(&str, u64, &[u8])> = jobs
            .iter()
            .map(|(id, at, p)| (id.as_str(), *at, p.as_slice()))
            .collect();
        log.schedule_many(false, None, &chunk).await.unwrap();
        for i in 0..100 {
            if i % 10 != 0 {
                assert!(log.cancel(&format!("r{round}-{i}")).await.unwrap());
            }
        }
    }
    // A dead letter with a reason, and a held job, survive it too.
    log.schedule("dead", Due::After(0), b"d").await.unwrap();
    let job = next(&log).await;
    log.fail("dead", job.token, true, 0, 3, "why")
        .await
        .unwrap();
    log.schedule("held", Due::After(0), b"h").await.unwrap();
    let held = next(&log).await;
    // The committer looks at the log's size after each frame (after the
    // frame's callers have their answer).
    log.schedule("last", Due::At(later), b"").await.unwrap();
    let mut len = u64::MAX;
    for _ in 0..500 {
        len = std::fs::metadata(log.path()).unwrap().len();
        if len < 100_000 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(len < 100_000, "compacted to {len} bytes");
    assert_eq!(log.pending(), 201);
    // Offsets moved: payloads and ids read from the new file.
    let (_, row) = log.inspect("r7-30").await.unwrap();
    assert_eq!(row.unwrap().payload, payload);
    assert!(log.ack("held", held.token).await.unwrap());
    close(log);
    let log = open(&dir).await;
    assert_eq!(log.pending(), 201);
    let (_, dead) = log.inspect("dead").await.unwrap();
    let dead = dead.unwrap();
    assert_eq!(dead.last_error.as_deref(), Some("why"));
    // Its history and the counts per minute were kept by compaction.
    assert_eq!(dead.ended.len(), 1);
    let buried = &dead.ended[0];
    assert_eq!(buried.outcome, crate::data::history::Outcome::Buried);
    assert_eq!(buried.holder.as_deref(), Some("test"));
    assert_eq!(buried.error.as_deref(), Some(&b"why"[..]));
    let (_, minutes) = log.throughput(0);
    let totals = minutes
        .iter()
        .fold((0, 0), |(p, f), &(_, mp, mf)| (p + mp, f + mf));
    assert_eq!(totals, (1, 1), "the held job's ack, the dead job's burial");
    assert!(log.inspect("held").await.unwrap().1.is_none());
    assert_eq!(
        log.inspect("r19-90").await.unwrap().1.unwrap().payload,
        payload
    );
}

/// A read-only handle follows the log a writer in this process owns:
/// frames appended since its last look, and, once compaction renamed a
/// new log into place, that new log read from its start (ids and payloads
/// at their new offsets).
#[tokio::test]
async fn a_read_only_handle_follows_appends_and_compaction() {
    let dir = TempDir::new("follow");
    let later = now_ms() + 3_600_000;
    let log = open(&dir).await;
    log.set_compact_min(32 << 10);
    let look = ops::open_read_only(dir.path(), "orders", &crate::Clock::system())
        .await
        .unwrap();
    assert!(look.is_read_only());
    let follow = |look: &Arc<QueueLog>| {
        let look = Arc::clone(look);
        async move {
            tokio::task::spawn_blocking(move || look.shared.catch_up())
                .await
                .unwrap()
                .unwrap()
        }
    };
    let payload = vec![3u8; 300];
    for round in 0..12 {
        let jobs: Vec<(String, u64)> = (0..50)
            .map(|i| (format!("r{round}-{i}"), later + i))
            .collect();
        let chunk: Vec<(&str, u64, &[u8])> = jobs
            .iter()
            .map(|(id, at)| (id.as_str(), *at, payload.as_slice()))
            .collect();
        log.schedule_many(false, None, &chunk).await.unwrap();
        for (id, _) in jobs.iter().filter(|(id, _)| !id.ends_with('0')) {
            assert!(log.cancel(id).await.unwrap());
        }
        follow(&look).await;
        assert_eq!(look.pending(), log.pending(), "round {round}");
    }
    // The committer compacts after a frame once the log is mostly garbage,
    // so it may last have compacted in any round; cancelling all but the
    // last round's jobs makes the log mostly garbage whatever the rounds
    // left, and the cancels' frames trigger a compaction.
    for round in 0..11 {
        for i in (0..50).step_by(10) {
            assert!(log.cancel(&format!("r{round}-{i}")).await.unwrap());
        }
    }
    follow(&look).await;
    assert_eq!(look.pending(), log.pending());
    let path = log.path().to_owned();
    let mut len = u64::MAX;
    for _ in 0..500 {
        len = std::fs::metadata(&path).unwrap().len();
        if len < 32 << 10 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(len < 32 << 10, "not compacted: {len} bytes");
    log.schedule("after", Due::At(later), b"a").await.unwrap();
    follow(&look).await;
    assert_eq!(look.pending(), log.pending());
    let (_, row) = look.inspect("r11-40").await.unwrap();
    assert_eq!(row.unwrap().payload, payload);
    let (_, row) = look.inspect("after").await.unwrap();
    assert_eq!(row.unwrap().payload, b"a");
    assert!(matches!(
        look.schedule("no", Due::After(0), b"").await,
        Err(StoreError::ReadOnly { .. })
    ));
}

/// A log whose creation never finished (16 zero bytes, as an older
/// version could leave after a power cut) is an empty queue to a look, as
/// to an open, and the look sees the log once it is created.
#[tokio::test]
async fn a_read_only_handle_reads_a_log_whose_creation_never_finished_as_empty() {
    let dir = TempDir::new("follow-unstarted");
    std::fs::write(dir.path().join("orders.log"), [0u8; 16]).unwrap();
    let look = ops::open_read_only(dir.path(), "orders", &crate::Clock::system())
        .await
        .unwrap();
    let catch_up = |look: &Arc<QueueLog>| {
        let look = Arc::clone(look);
        async move {
            tokio::task::spawn_blocking(move || look.shared.catch_up())
                .await
                .unwrap()
        }
    };
    catch_up(&look).await.expect("an empty queue, not damage");
    assert_eq!(look.pending(), 0);
    let log = open(&dir).await;
    log.schedule("first", Due::After(60_000), b"f")
        .await
        .unwrap();
    catch_up(&look).await.unwrap();
    assert_eq!(look.pending(), 1);
}

/// The crash test's child: opens the store in `TTR_CRASH_CHILD`'s
/// directory and works until it is killed: bursts of schedules (one by
/// one from 16 tasks at once, and in chunks), claims and acks, writing
/// each intent and each answer to a ledger (plain appends: a SIGKILL
/// leaves the page cache alone) for the parent to check.
#[test]
#[ignore = "a child process of `sigkill_in_bursts_loses_nothing_and_repeats_nothing`"]
fn crash_child() {
    let Ok(spec) = std::env::var("TTR_CRASH_CHILD") else {
        return;
    };
    let (dir, round) = spec.split_once(';').expect("dir;round");
    let dir = PathBuf::from(dir);
    let round: u64 = round.parse().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let ledger = Arc::new(std::sync::Mutex::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.join("ledger.txt"))
                .unwrap(),
        ));
        // Each line ends with " ;": a kill can cut a write that crosses a
        // page in the middle (a fatal signal stops it between pages), and
        // the parent skips such a torn line.
        let note = move |line: String| {
            use std::io::Write;
            let line = format!("{} ;\n", line.trim_end_matches('\n'));
            ledger.lock().unwrap().write_all(line.as_bytes()).unwrap();
        };
        let log = match ops::open(&dir, "crash").await {
            Ok(log) => log,
            Err(e) => {
                note(format!("\nE open failed: {e}\n"));
                std::process::exit(3);
            }
        };
        // On a line of its own, whatever the last child's last write left.
        note(format!("\nO {round}\n"));
        println!("\nttr-crash-child-open");
        let mut seed = round.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut rand = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut n = 0u64;
        loop {
            // 16 schedules at once, one by one (one group commit or two).
            let mut tasks = Vec::new();
            for _ in 0..16 {
                n += 1;
                let id = format!("{round}-{n}");
                let at = now_ms() + rand(100);
                note(format!("s {id}\n"));
                let (log, note) = (Arc::clone(&log), note.clone());
                tasks.push(tokio::spawn(async move {
                    let (new, due) = log.schedule(&id, Due::At(at), id.as_bytes()).await.unwrap();
                    assert!(new && due == at);
                    note(format!("S {id} {due}\n"));
                }));
            }
            for task in tasks {
                task.await.unwrap();
            }
            // A chunk, all or nothing.
            let ids: Vec<(String, u64)> = (0..1 + rand(40))
                .map(|_| {
                    n += 1;
                    (format!("{round}-{n}"), rand(100))
                })
                .collect();
            for (id, _) in &ids {
                note(format!("s {id}\n"));
            }
            let chunk: Vec<(&str, u64, &[u8])> = ids
                .iter()
                .map(|(id, d)| (id.as_str(), *d, id.as_bytes()))
                .collect();
            let (written, base) = log.schedule_many(true, None, &chunk).await.unwrap();
            assert_eq!(written, ids.len());
            for (id, delay) in &ids {
                note(format!("S {id} {}\n", base + delay));
            }
            // Claims and acks: some one by one, some together.
            let claim = log
                .claim(1 + rand(30) as usize, 30_000, 1000)
                .await
                .unwrap();
            let mut together = Vec::new();
            for job in &claim.jobs {
                assert!(claim.now_ms >= job.deadline_ms, "claimed early");
                assert_eq!(job.payload, job.id.as_bytes());
                note(format!(
                    "D {} {} {} {}\n",
                    job.id, job.attempt, claim.now_ms, job.deadline_ms
                ));
                match rand(3) {
                    0 => {}
                    1 => {
                        note(format!("a {}\n", job.id));
                        assert!(log.ack(&job.id, job.token).await.unwrap());
                        note(format!("A {}\n", job.id));
                    }
                    _ => {
                        note(format!("a {}\n", job.id));
                        together.push((job.id.as_str(), job.token));
                    }
                }
            }
            let lost = log.ack_many(&together).await.unwrap();
            assert!(lost.is_empty());
            for (id, _) in together {
                note(format!("A {id}\n"));
            }
        }
    });
}

/// SIGKILL at random points of bursts of schedules, claims and acks, 200
/// times, each time reopening the store in a new process: it opens every
/// time, no job is delivered early, no job is delivered after its ack
/// returned, and in the end every schedule that returned `Ok` is
/// delivered exactly once more unless its ack returned before a kill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_in_bursts_loses_nothing_and_repeats_nothing() {
    use std::collections::{HashMap, HashSet};

    let rounds: u64 = std::env::var("TTR_CRASH_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(200);
    let dir = TempDir::new("crash");
    let exe = std::env::current_exe().unwrap();
    let mut seed = 0x1234_5678_9abc_def1u64;
    let mut opened = 0;
    for round in 0..rounds {
        let mut child = tokio::process::Command::new(&exe)
            .args([
                "embedded::tests::crash_child",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(
                "TTR_CRASH_CHILD",
                format!("{};{round}", dir.path().display()),
            )
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        if round % 8 == 7 {
            // Now and then at any point, opening (replay, cutting a torn
            // write) included.
            tokio::time::sleep(Duration::from_millis(seed % 60)).await;
        } else {
            // Mostly in the middle of the bursts: once it says it opened.
            use tokio::io::AsyncBufReadExt;
            let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
            let opened = tokio::time::timeout(Duration::from_secs(20), async {
                while let Some(line) = lines.next_line().await.unwrap() {
                    if line == "ttr-crash-child-open" {
                        return true;
                    }
                }
                false
            })
            .await;
            if opened != Ok(true) {
                let _ = child.start_kill();
                let output = child.wait_with_output().await.unwrap();
                panic!(
                    "round {round}: the child did not open the store: {}",
                    String::from_utf8_lossy(&output.stderr)
                );
            }
            tokio::time::sleep(Duration::from_millis(seed % 50)).await;
        }
        if let Ok(Some(status)) = child.try_wait() {
            let output = child.wait_with_output().await.unwrap();
            panic!(
                "round {round}: the child ended by itself ({status}): {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        child.kill().await.unwrap(); // SIGKILL, and wait
    }
    let ledger = std::fs::read_to_string(dir.path().join("ledger.txt")).unwrap();
    // Only whole lines: the last may be cut by a kill.
    let whole = &ledger[..ledger.rfind('\n').map_or(0, |i| i + 1)];
    let mut due: HashMap<&str, u64> = HashMap::new();
    let mut maybe_scheduled: HashSet<&str> = HashSet::new();
    let mut acked: HashSet<&str> = HashSet::new();
    let mut maybe_acked: HashSet<&str> = HashSet::new();
    let mut round = 0u64;
    let mut delivered_in: HashMap<&str, u64> = HashMap::new();
    let mut attempts: HashMap<&str, u32> = HashMap::new();
    let mut redelivered: HashSet<&str> = HashSet::new();
    let mut torn = 0;
    for line in whole.lines() {
        // A line a kill cut short (what it said is unknown: the ids it
        // names are checked less, never more).
        let Some(line) = line.trim_start_matches('\n').strip_suffix(" ;") else {
            torn += usize::from(!line.is_empty());
            continue;
        };
        let fields: Vec<&str> = line.split(' ').collect();
        match fields[0] {
            "O" => {
                opened += 1;
                round = fields[1].parse().unwrap();
            }
            "E" => panic!("a child could not open the store: {line}"),
            "s" => {
                maybe_scheduled.insert(fields[1]);
            }
            "S" => {
                due.insert(fields[1], fields[2].parse().unwrap());
            }
            "a" => {
                maybe_acked.insert(fields[1]);
            }
            "A" => {
                acked.insert(fields[1]);
            }
            "D" => {
                let id = fields[1];
                assert!(!acked.contains(id), "{id} delivered after its ack returned");
                // A lease (30 s) outlives a child: never twice in one.
                assert!(
                    delivered_in.insert(id, round) != Some(round),
                    "{id} delivered twice in one process"
                );
                // Attempts: a first delivery may be uncounted (handed out
                // before its claim was on disk, then a kill), never a
                // later one (due before its process opened the store).
                let attempt: u32 = fields[2].parse().unwrap();
                let before = attempts.insert(id, attempt);
                if let Some(before) = before {
                    let counted = redelivered.contains(id);
                    assert!(
                        attempt > before || (attempt == before && !counted),
                        "{id}: attempt {attempt} after {before}"
                    );
                    redelivered.insert(id);
                }
                let (now, deadline): (u64, u64) =
                    (fields[3].parse().unwrap(), fields[4].parse().unwrap());
                assert!(now >= deadline, "{id} delivered early");
                if let Some(&at) = due.get(id) {
                    assert_eq!(deadline, at, "{id}'s deadline is its due time");
                }
                assert!(maybe_scheduled.contains(id), "{id} was never scheduled");
            }
            other => panic!("unknown ledger line {other:?}"),
        }
    }
    assert!(
        opened >= rounds * 7 / 8,
        "only {opened} of {rounds} children opened the store"
    );
    // Drain what is left: everything due within 100 ms of its schedule.
    let log = ops::open(dir.path(), "crash")
        .await
        .expect("the store opens after the last kill");
    tokio::time::sleep(Duration::from_millis(150)).await;
    let mut drained: HashMap<String, u32> = HashMap::new();
    loop {
        let claim = log.claim(1000, 30_000, 1000).await.unwrap();
        if claim.jobs.is_empty() {
            break;
        }
        let mut acks = Vec::new();
        for job in &claim.jobs {
            assert!(
                claim.now_ms >= job.deadline_ms,
                "{} delivered early",
                job.id
            );
            *drained.entry(job.id.clone()).or_default() += 1;
            acks.push((job.id.as_str(), job.token));
        }
        assert!(log.ack_many(&acks).await.unwrap().is_empty());
    }
    assert_eq!(log.stats().pending, 0);
    let mut must = 0;
    for &id in due.keys() {
        if acked.contains(id) {
            assert!(
                !drained.contains_key(id),
                "{id} delivered again after its ack returned"
            );
        } else if !maybe_acked.contains(id) {
            must += 1;
            assert_eq!(
                drained.get(id),
                Some(&1),
                "{id} was scheduled (Ok) and never acked: lost"
            );
        }
    }
    for (id, &times) in &drained {
        assert_eq!(times, 1, "{id} delivered {times} times in the drain");
        assert!(
            maybe_scheduled.contains(id.as_str()),
            "{id} was never scheduled"
        );
    }
    assert!(must > 1000, "the test checked only {must} jobs");
    eprintln!(
        "{rounds} kills, {opened} opens, {torn} ledger lines cut; {} schedules returned Ok, {} acks; {} delivered in the end ({must} had to be), {} more than once",
        due.len(),
        acked.len(),
        drained.len(),
        redelivered.len()
    );
}

/// A small tmpfs mounted for a test, unmounted when dropped.
struct Tmpfs(TempDir);

/// A tmpfs' allocation unit.
const PAGE: u64 = 4096;

/// Writes `path` until the disk is full.
fn fill_disk(path: &std::path::Path) {
    use std::io::Write;
    let mut file = std::fs::File::create(path).unwrap();
    while file.write_all(&[1u8; PAGE as usize]).is_ok() {}
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (as `mount -o size=` reads it). The CI
    /// runs as root; elsewhere this fails saying so (it never skips).
    fn mount(size: &str) -> Tmpfs {
        let dir = TempDir::new("tmpfs");
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status();
        match status {
            Ok(status) if status.success() => Tmpfs(dir),
            other => panic!(
                "this test mounts a small tmpfs to fill it, which needs root \
                 (run it as root, as the CI does): mount gave {other:?}"
            ),
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.0.path())
            .status();
    }
}

/// A full disk: calls fail with `NoSpace`, nothing of their frame is
/// left in the file, the memory agrees with the file (reopened), and
/// calls succeed again once there is room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_is_a_typed_error_with_nothing_half_written() {
    let fs = Tmpfs::mount("1m");
    let store = fs.0.path().join("store");
    // Room to give back later.
    let ballast = fs.0.path().join("ballast");
    std::fs::write(&ballast, vec![1u8; 256 << 10]).unwrap();
    let log = ops::open(&store, "orders").await.unwrap();
    let payload = vec![9u8; 3000];
    // 16 producers until each has had a `NoSpace`.
    let mut tasks = Vec::new();
    for t in 0..16 {
        let (log, payload) = (Arc::clone(&log), payload.clone());
        tasks.push(tokio::spawn(async move {
            let (mut ok, mut failed) = (Vec::new(), Vec::new());
            for i in 0.. {
                let id = format!("{t}-{i}");
                match log.schedule(&id, Due::After(60_000), &payload).await {
                    Ok((true, _)) => ok.push(id),
                    Ok(other) => panic!("{id}: {other:?}"),
                    Err(StoreError::NoSpace { .. }) => {
                        failed.push(id);
                        break;
                    }
                    Err(e) => panic!("{id}: not a typed full disk: {e}"),
                }
            }
            (ok, failed)
        }));
    }
    let (mut ok, mut failed) = (Vec::new(), Vec::new());
    for task in tasks {
        let (o, f) = task.await.unwrap();
        ok.extend(o);
        failed.extend(f);
    }
    assert!(ok.len() > 100, "only {} schedules fit", ok.len());
    assert_eq!(
        log.pending(),
        ok.len() as u64,
        "failed calls were taken back in memory"
    );
    // One by one until one does not fit either.
    let message = loop {
        let id = format!("single-{}", ok.len());
        match log.schedule(&id, Due::After(60_000), &payload).await {
            Ok(_) => ok.push(id),
            Err(e) => {
                assert!(matches!(e, StoreError::NoSpace { .. }), "{e}");
                failed.push(id);
                break e.to_string();
            }
        }
    };
    assert!(message.contains("no space left"), "{message}");
    assert_eq!(log.pending(), ok.len() as u64);
    // The file ends with its last whole frame: reopened, it holds exactly
    // the jobs whose schedule returned Ok.
    let path = log.path().to_owned();
    let len = std::fs::metadata(&path).unwrap().len();
    drop(log);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let log = ops::open(&store, "orders").await.unwrap();
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        len,
        "no torn frame to cut"
    );
    assert_eq!(log.pending(), ok.len() as u64);
    for id in ok.iter().step_by(7) {
        assert!(
            log.inspect(id).await.unwrap().1.is_some(),
            "{id} returned Ok and is there"
        );
    }
    for id in &failed {
        assert!(
            log.inspect(id).await.unwrap().1.is_none(),
            "{id} failed and is not there"
        );
    }
    // Room again: calls succeed.
    std::fs::remove_file(&ballast).unwrap();
    assert!(
        log.schedule("after", Due::After(0), &payload)
            .await
            .unwrap()
            .0
    );
    assert_eq!(log.pending(), ok.len() as u64 + 1);
    drop(log);
    tokio::time::sleep(Duration::from_millis(50)).await;
}

/// A claim hands its jobs out before their frame is written: when that
/// frame fails (a full disk), the jobs stay with their holders (not
/// claimable again, their acks work once there is room), while the rest of
/// the frame is taken back as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_handed_out_stay_held_when_their_frame_fails() {
    let fs = Tmpfs::mount("1m");
    let store = fs.0.path().join("store");
    let ballast = fs.0.path().join("ballast");
    std::fs::write(&ballast, vec![1u8; 256 << 10]).unwrap();
    let log = ops::open(&store, "orders").await.unwrap();
    for i in 0..20 {
        log.schedule(&format!("due-{i}"), Due::After(5), b"work")
            .await
            .unwrap();
    }
    // Fill the disk: big frames, then small ones, until none fits (what is
    // left is less than a small frame, less than 20 claims' records).
    let mut kept = 20u64;
    for size in [3000, 100] {
        for i in 0.. {
            let id = format!("fill-{size}-{i}");
            match log
                .schedule(&id, Due::After(60_000), &vec![7u8; size])
                .await
            {
                Ok(_) => kept += 1,
                Err(StoreError::NoSpace { .. }) => break,
                Err(e) => panic!("{id}: {e}"),
            }
        }
    }
    // What is left may still be most of the log's last page (tmpfs gives
    // pages): room for an ack's small frame, by chance of where the last
    // frame ended. Pad the log to the end of a page with the ballast's
    // room, then fill the disk again: now no frame fits at all.
    let log_file = store.join("orders.log");
    let left = (PAGE - std::fs::metadata(&log_file).unwrap().len() % PAGE) % PAGE;
    if left > 0 {
        std::fs::remove_file(&ballast).unwrap();
        // A `New` frame is 47 bytes besides its id ("pad") and payload.
        let pad = left + PAGE - 47 - 3;
        log.schedule("pad", Due::After(60_000), &vec![7u8; pad as usize])
            .await
            .unwrap();
        kept += 1;
        assert_eq!(std::fs::metadata(&log_file).unwrap().len() % PAGE, 0);
        fill_disk(&ballast);
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    let claim = log.claim(20, LEASE, 3).await.expect("handed out at once");
    assert_eq!(claim.jobs.len(), 20);
    assert!(claim.jobs.iter().all(|j| j.payload == b"work"));
    // The ack waits for the claim's frame, which does not fit.
    let first = &claim.jobs[0];
    let refused = log.ack(&first.id, first.token).await;
    assert!(
        matches!(refused, Err(StoreError::NoSpace { .. })),
        "{refused:?}"
    );
    assert_eq!(log.leased(), 20, "the jobs stay with their holders");
    let again = log.claim(20, LEASE, 3).await.unwrap();
    assert!(again.jobs.is_empty(), "handed out twice: {:?}", again.jobs);
    // Room again: the holders' acks work.
    std::fs::remove_file(&ballast).unwrap();
    let acks: Vec<(&str, u64)> = claim
        .jobs
        .iter()
        .map(|j| (j.id.as_str(), j.token))
        .collect();
    assert!(log.ack_many(&acks).await.unwrap().is_empty(), "leases kept");
    assert_eq!((log.pending(), log.leased()), (kept - 20, 0));
    drop(log);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let log = ops::open(&store, "orders").await.unwrap();
    assert_eq!((log.pending(), log.leased()), (kept - 20, 0));
    drop(log);
    tokio::time::sleep(Duration::from_millis(50)).await;
}
