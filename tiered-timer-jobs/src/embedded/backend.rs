//! [`EmbeddedBackend`]: the backend contract (`src/contract.rs`) on the
//! embedded store, one queue's log (`store.rs`, `ops.rs`) per handle; and
//! the store-wide calls: its `file://` URLs, the queues in its directory,
//! repairing a log's end.
//!
//! Ground rules: the store's queue log owns every job's state; a handle
//! owns its closed flag and the wake-up of its own waiting claims when it
//! is closed. Every change is durable before the call returns (`ops.rs`),
//! but a claim, which may hand its jobs out first (`store.rs`). The
//! answers are the Redis backend's, one for one.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tiered_timer::Instant;
use tokio::sync::Notify;

use super::error::StoreError;
use super::index::{State, Which};
use super::names;
use super::ops::{self, ClaimOutcome, JobRow};
use super::store::QueueLog;
use crate::contract::{
    AckAndClaim, Backend, Claimed, Failure, GaveUp, Lease, LeaseToken, NewJob, NewRecurrence,
    Settings,
};
use crate::data::error::Error;
use crate::data::history::{history, Throughput};
use crate::data::id::JobId;
use crate::data::lateness::Lateness;
use crate::data::limits::{at_ms, CHUNK_BYTES, CHUNK_JOBS};
use crate::data::listing::{JobInfo, JobState, JobSummary, Listing, Page, QueueInfo, PREVIEW};
use crate::data::recurrence::{Missed, RecurrenceInfo};
use crate::data::repaired::{Quarantined, Repaired};
use crate::data::stats::{Counts, DeadLetter, Stats};
use crate::targets;

/// Jobs per batch of `requeue_all` / `purge_all`, and dead letters per
/// look of `dead_letters`.
const BATCH: usize = 1_000;

/// An embedded queue handle.
pub(crate) struct EmbeddedBackend {
    name: String,
    log: Arc<QueueLog>,
    /// Who this handle's claims are for (`Builder::holder`).
    holder: Arc<str>,
    lease_ms: u64,
    max_attempts: u32,
    /// Set by `close`: claims fail with [`Error::Closed`].
    closed: AtomicBool,
    /// Wakes this handle's waiting claims when it is closed.
    closing: Notify,
}

/// The directory of a `file://` URL: `file:///abs/dir`,
/// `file://localhost/abs/dir`, or `file://rel/dir` (relative to the
/// working directory).
fn dir_of(url: &str) -> Result<PathBuf, Error> {
    let invalid = || Error::InvalidUrl {
        reason: "file:// needs the store's directory after it, as in file:///var/lib/app/jobs"
            .to_owned(),
    };
    let rest = url.strip_prefix("file://").ok_or_else(invalid)?;
    if matches!(rest, "" | "localhost" | "localhost/") || rest.contains('\0') {
        return Err(invalid());
    }
    let rest = rest
        .strip_prefix("localhost")
        .filter(|r| r.starts_with('/'))
        .unwrap_or(rest);
    Ok(PathBuf::from(rest))
}

/// Fails with [`Error::NoSuchQueue`] unless the queue `name` has a log in
/// `dir` (for handles that look at a queue without creating it).
fn check_exists(dir: &Path, name: &str) -> Result<(), Error> {
    let path = names::log_path(dir, name);
    match std::fs::metadata(&path) {
        Ok(_) => Ok(()),
        Err(source) if source.kind() == std::io::ErrorKind::NotFound => Err(Error::NoSuchQueue {
            queue: name.to_owned(),
        }),
        Err(source) => Err(Error::Io {
            path,
            doing: "looking for the queue's log".to_owned(),
            source,
        }),
    }
}

/// The token of a lease this backend granted (a number; anything else
/// holds no lease: 0 is never a token).
fn number(token: &LeaseToken) -> u64 {
    match token {
        LeaseToken::Number(n) => *n,
        LeaseToken::Text(_) => 0,
    }
}

/// The job and token of a lease on this backend's one partition.
fn held(lease: Lease<'_>) -> (&str, u64) {
    debug_assert_eq!(lease.partition, 0, "an embedded queue has one partition");
    (lease.id.as_str(), number(lease.token))
}

impl Backend for EmbeddedBackend {
    fn check_url(url: &str) -> Result<(), Error> {
        dir_of(url).map(|_| ())
    }

    async fn open(settings: &Settings) -> Result<EmbeddedBackend, Error> {
        let dir = dir_of(&settings.url)?;
        let name = &settings.name;
        if !settings.register || settings.read_only {
            check_exists(&dir, name)?;
        }
        let log = if settings.read_only {
            ops::open_read_only(&dir, name, &settings.clock).await?
        } else {
            ops::open_with_clock(&dir, name, &settings.clock).await?
        };
        Ok(EmbeddedBackend {
            name: name.clone(),
            log,
            holder: Arc::from(settings.holder.as_str()),
            lease_ms: settings.lease_ms(),
            max_attempts: settings.max_attempts,
            closed: AtomicBool::new(false),
            closing: Notify::new(),
        })
    }

    /// The queues of the store: one log each, read without opening the
    /// store (so while another process holds it).
    async fn find_queues(
        url: &str,
        _cluster: bool,
        _timeout: Duration,
    ) -> Result<Vec<QueueInfo>, Error> {
        let dir = dir_of(url)?;
        let io = |source| Error::Io {
            path: dir.clone(),
            doing: "listing the queues of".to_owned(),
            source,
        };
        let mut found: Vec<QueueInfo> = Vec::new();
        for entry in std::fs::read_dir(&dir).map_err(io)? {
            let file = entry.map_err(io)?.file_name();
            let Some(name) = file.to_str().and_then(names::queue_of_log) else {
                continue;
            };
            found.push(QueueInfo {
                name,
                partitions: 1,
                registered: true,
            });
        }
        found.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(found)
    }

    async fn repair(url: &str, queue: &str) -> Result<Repaired, Error> {
        let dir = dir_of(url)?;
        let log = names::log_path(&dir, queue);
        if let Err(source) = std::fs::metadata(&log) {
            return Err(Error::Io {
                path: log,
                doing: "looking for the queue's log to repair".to_owned(),
                source,
            });
        }
        let (log, done) = ops::repair(&dir, queue).await?;
        Ok(Repaired {
            log,
            end: done.end,
            torn: done.torn,
            quarantined: done.quarantined.map(|(path, len, reason)| Quarantined {
                path,
                offset: done.end,
                len,
                reason: reason.to_owned(),
            }),
        })
    }

    fn partitions(&self) -> u32 {
        1
    }

    async fn schedule(&self, job: NewJob) -> Result<(), Error> {
        self.log
            .schedule(job.id.as_str(), job.due, &job.payload)
            .await?;
        Ok(())
    }

    /// In chunks as on Redis (each chunk all or nothing, one frame);
    /// delays count from the first chunk's now.
    async fn schedule_many(&self, jobs: Vec<NewJob>) -> Result<usize, Error> {
        let delays = jobs.first().is_some_and(|job| job.due.is_delay());
        let mut base = None;
        let mut written = 0;
        let mut rest = &jobs[..];
        while !rest.is_empty() {
            let (chunk, later) = rest.split_at(chunk_len(rest));
            let chunk: Vec<(&str, u64, &[u8])> = chunk
                .iter()
                .map(|job| (job.id.as_str(), job.due.ms(), job.payload.as_slice()))
                .collect();
            let (new, used) = self.log.schedule_many(delays, base, &chunk).await?;
            written += new;
            base.get_or_insert(used);
            rest = later;
        }
        Ok(written)
    }

    async fn cancel(&self, id: &JobId) -> Result<bool, Error> {
        Ok(self.log.cancel(id.as_str()).await?)
    }

    /// Claims as the Redis waker's claims do: a claim that finds nothing
    /// waits for the store's driver to say something came due, or for
    /// `close`.
    async fn claim(&self, max: usize) -> Result<Vec<Claimed>, Error> {
        if self.log.is_read_only() {
            // Nothing to claim with: refused before it waits.
            return Err(Error::ReadOnly {
                path: self.log.shared.path.clone(),
            });
        }
        loop {
            let closing = self.closing.notified();
            tokio::pin!(closing);
            closing.as_mut().enable();
            if self.closed.load(Ordering::SeqCst) {
                return Err(Error::Closed);
            }
            self.log.ensure_driver();
            let claimable = self.log.claimable();
            tokio::pin!(claimable);
            claimable.as_mut().enable();
            let sent = Instant::now();
            let outcome = self.claim_once(max).await?;
            for id in &outcome.buried {
                tracing::warn!(target: targets::JOB, queue = %self.name, job = %id, attempts = self.max_attempts, "job moved to the dead letters: its lease ran out on its last attempt");
                crate::metrics::dead_lettered(&self.name);
            }
            if !outcome.jobs.is_empty() {
                let lease = Duration::from_millis(self.lease_ms);
                return Ok(outcome
                    .jobs
                    .into_iter()
                    .map(|job| Claimed {
                        partition: 0,
                        id: JobId::from(job.id),
                        payload: job.payload,
                        deadline_ms: job.deadline_ms,
                        attempt: job.attempt,
                        token: LeaseToken::Number(job.token),
                        lease,
                        sent,
                        expired: job.redelivery,
                        claimed_ms: outcome.now_ms,
                    })
                    .collect());
            }
            tokio::select! {
                () = &mut claimable => {}
                () = &mut closing => return Err(Error::Closed),
            }
        }
    }

    /// Claims are in-process: nothing is ever claimed ahead.
    fn take_claimed(&self) -> Option<Claimed> {
        None
    }

    /// Jobs claimed for a caller that cannot take them are released at
    /// once (their attempt not counted).
    fn give_back(&self, jobs: Vec<Claimed>) {
        if jobs.is_empty() {
            return;
        }
        let log = Arc::clone(&self.log);
        release_later(
            log,
            jobs.into_iter()
                .map(|job| (job.id.into_string(), number(&job.token))),
        );
    }

    /// An ack, then no claim: the caller claims as `claim` does (both in
    /// this process, so nothing is saved by one call).
    async fn ack_and_claim(&self, lease: Lease<'_>) -> Result<AckAndClaim, Error> {
        Ok(AckAndClaim {
            acked: self.ack(lease).await?,
            replicated: Ok(()),
            jobs: Vec::new(),
        })
    }

    fn close(&self) -> Vec<Claimed> {
        self.closed.store(true, Ordering::SeqCst);
        self.closing.notify_waiters();
        Vec::new()
    }

    async fn ack(&self, lease: Lease<'_>) -> Result<bool, Error> {
        let (id, token) = held(lease);
        Ok(self.log.ack(id, token).await?)
    }

    /// All in one frame.
    async fn ack_many(
        &self,
        _partition: u32,
        leases: &[(JobId, LeaseToken)],
    ) -> Result<Vec<JobId>, Error> {
        let list: Vec<(&str, u64)> = leases
            .iter()
            .map(|(id, token)| (id.as_str(), number(token)))
            .collect();
        let lost = self.log.ack_many(&list).await?;
        Ok(lost.into_iter().map(JobId::from).collect())
    }

    async fn retry(&self, lease: Lease<'_>, delay_ms: u64) -> Result<GaveUp, Error> {
        let (id, token) = held(lease);
        Ok(self
            .log
            .retry(id, token, delay_ms, self.max_attempts)
            .await?)
    }

    async fn fail(
        &self,
        lease: Lease<'_>,
        failure: Failure,
        reason: &str,
    ) -> Result<GaveUp, Error> {
        let (bury, delay_ms) = match failure {
            Failure::Retry(delay_ms) => (false, delay_ms),
            Failure::Bury => (true, 0),
        };
        let (id, token) = held(lease);
        let done = self
            .log
            .fail(id, token, bury, delay_ms, self.max_attempts, reason)
            .await?;
        Ok(done)
    }

    /// In memory only: leases do not outlive the process.
    async fn extend(&self, lease: Lease<'_>, lease_ms: u64) -> Result<bool, Error> {
        let (id, token) = held(lease);
        Ok(self.log.extend(id, token, lease_ms).is_some())
    }

    async fn release(&self, lease: Lease<'_>) -> Result<bool, Error> {
        let (id, token) = held(lease);
        Ok(self.log.release(id, token).await?)
    }

    async fn pending(&self) -> Result<u64, Error> {
        self.follow().await?;
        Ok(self.log.pending())
    }

    async fn leased(&self) -> Result<u64, Error> {
        self.follow().await?;
        Ok(self.log.leased())
    }

    async fn stats(&self) -> Result<Stats, Error> {
        self.follow().await?;
        let counts = Counts {
            damaged_frames: self.log.damaged_frames(),
            ..self.log.stats()
        };
        Ok(Stats::total(vec![Stats::of_partition(0, counts)]))
    }

    async fn lateness(&self) -> Result<Lateness, Error> {
        self.follow().await?;
        Ok(Lateness::from_counts(self.log.lateness().to_vec()))
    }

    async fn throughput(&self, since_ms: u64) -> Result<Throughput, Error> {
        self.follow().await?;
        let (now, counts) = self.log.throughput(since_ms);
        Ok(Throughput::from_counts(now, since_ms, counts))
    }

    async fn dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>, Error> {
        self.follow().await?;
        let mut all = Vec::new();
        while all.len() < limit {
            let count = (limit - all.len()).min(BATCH);
            let (now, _, rows) = self.log.list(Which::Dead, all.len(), count, 0).await?;
            let got = rows.len();
            all.extend(rows.into_iter().map(|row| DeadLetter {
                id: JobId::from(row.id),
                partition: 0,
                died_at: at_ms(row.at_ms),
                dead_for: Duration::from_millis(now.saturating_sub(row.at_ms)),
                attempts: row.attempts,
                payload_len: row.payload_len,
                last_error: row.last_error,
            }));
            if got < count {
                break;
            }
        }
        Ok(all)
    }

    async fn requeue(&self, id: &JobId) -> Result<bool, Error> {
        Ok(self.log.requeue(id.as_str()).await?)
    }

    async fn requeue_all(&self) -> Result<u64, Error> {
        self.in_batches(|log| Box::pin(log.requeue_all(BATCH)))
            .await
    }

    async fn purge(&self, id: &JobId) -> Result<bool, Error> {
        Ok(self.log.purge(id.as_str()).await?)
    }

    async fn purge_all(&self) -> Result<u64, Error> {
        self.in_batches(|log| Box::pin(log.purge_all(BATCH))).await
    }

    async fn job(&self, id: &JobId) -> Result<Option<JobInfo>, Error> {
        self.follow().await?;
        let (now, row) = self.log.inspect(id.as_str()).await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let state = job_state(row.state);
        let (due, lease_expiry, died_at) = match state {
            JobState::Waiting => (Some(at_ms(row.at_ms)), None, None),
            JobState::Leased => (row.deadline_ms.map(at_ms), Some(at_ms(row.at_ms)), None),
            JobState::Dead => (row.deadline_ms.map(at_ms), None, Some(at_ms(row.at_ms))),
        };
        Ok(Some(JobInfo {
            id: id.clone(),
            partition: 0,
            state,
            redis_time: at_ms(now),
            due,
            lease_expiry,
            died_at,
            attempts: row.attempts,
            last_error: row.last_error,
            payload: row.payload,
            created: row.created_ms.map(at_ms),
            holder: row.running.as_ref().and_then(|r| r.holder.clone()),
            history: history(row.ended, row.running),
        }))
    }

    async fn list(&self, listing: Listing, offset: usize, limit: usize) -> Result<Page, Error> {
        let which = match listing {
            Listing::Waiting => Which::Waiting,
            Listing::Due => Which::Due,
            Listing::Leased => Which::Leased,
            Listing::Dead => Which::Dead,
        };
        self.follow().await?;
        let (now, total, rows) = self.log.list(which, offset, limit, PREVIEW).await?;
        let jobs = rows
            .into_iter()
            .map(|row: JobRow| JobSummary {
                id: JobId::from(row.id),
                partition: 0,
                state: listing.state(),
                at: at_ms(row.at_ms),
                attempts: row.attempts,
                payload_len: row.payload_len,
                payload_preview: row.payload,
                last_error: row.last_error,
            })
            .collect();
        Ok(Page {
            redis_time: at_ms(now),
            total,
            offset,
            jobs,
        })
    }

    async fn promote(&self, id: &JobId) -> Result<bool, Error> {
        Ok(self.log.promote(id.as_str()).await?)
    }

    async fn recur(&self, new: NewRecurrence) -> Result<bool, Error> {
        Ok(self
            .log
            .recur(&new.name, &new.recurrence, &new.payload)
            .await?)
    }

    async fn unrecur(&self, name: &str) -> Result<bool, Error> {
        Ok(self.log.unrecur(name).await?)
    }

    async fn pause_recurrence(&self, name: &str, paused: bool) -> Result<bool, Error> {
        Ok(self.log.pause_recurrence(name, paused).await?)
    }

    async fn recurrences(&self) -> Result<Vec<RecurrenceInfo>, Error> {
        self.follow().await?;
        let listed = self.log.recurrences().await?;
        Ok(listed
            .into_iter()
            .map(|l| {
                let r = l.recurring;
                RecurrenceInfo {
                    name: l.name,
                    spec: r.spec.into(),
                    time_zone: r.zone.into(),
                    missed: Missed::parse(&r.missed).unwrap_or_default(),
                    paused: r.paused,
                    next: r.pending.map(|p| at_ms(p.at)),
                    last: r.last.map(at_ms),
                    last_run: l.last_run,
                    last_error: l.last_error,
                }
            })
            .collect())
    }
}

impl EmbeddedBackend {
    /// Before a look: a read-only handle reads what the log gained since
    /// its last look (off the runtime); others have it all.
    async fn follow(&self) -> Result<(), Error> {
        if !self.log.is_read_only() {
            return Ok(());
        }
        let log = Arc::clone(&self.log);
        tokio::task::spawn_blocking(move || log.shared.catch_up())
            .await
            .map_err(|e| Error::Io {
                path: self.log.shared.path.clone(),
                doing: "following the job log".to_owned(),
                source: std::io::Error::other(e.to_string()),
            })??;
        Ok(())
    }

    /// A claim that outlives the call that asked for it: polled in place,
    /// and, if that call is dropped before the claim returns (one that
    /// hands its jobs out at once returns at its first poll), finished
    /// on a task of its own, which hands the jobs back (released at once,
    /// the attempt not counted), so that a cancelled `next` strands
    /// nothing. (The claim takes its jobs in memory at its first poll; its
    /// record's commit comes after.)
    async fn claim_once(&self, max: usize) -> Result<ClaimOutcome, Error> {
        let log = Arc::clone(&self.log);
        let (lease_ms, max_attempts) = (self.lease_ms, self.max_attempts);
        let holder = Arc::clone(&self.holder);
        let mut claim = FinishOnDrop {
            log: Arc::clone(&self.log),
            claim: Some(Box::pin(async move {
                log.claim_as(max, lease_ms, max_attempts, &holder).await
            })),
        };
        let outcome = std::future::poll_fn(|cx| {
            let pending = claim.claim.as_mut().expect("polled until ready");
            let outcome = std::task::ready!(pending.as_mut().poll(cx));
            claim.claim = None;
            std::task::Poll::Ready(outcome)
        })
        .await;
        Ok(outcome?)
    }

    /// Runs a batch operation until it does less than a batch (so other
    /// calls get the lock in between, as on Redis).
    async fn in_batches<F>(&self, batch: F) -> Result<u64, Error>
    where
        F: for<'a> Fn(&'a QueueLog) -> BatchFuture<'a>,
    {
        let mut total = 0;
        loop {
            let n = batch(&self.log).await?;
            total += n as u64;
            if n < BATCH {
                return Ok(total);
            }
        }
    }
}

/// How many of `jobs` go in the next chunk: at most [`CHUNK_JOBS`], and
/// closed once it holds [`CHUNK_BYTES`] of payload.
fn chunk_len(jobs: &[NewJob]) -> usize {
    let mut bytes = 0;
    let mut n = 0;
    for job in jobs {
        n += 1;
        bytes += job.payload.len();
        if n >= CHUNK_JOBS || bytes >= CHUNK_BYTES {
            break;
        }
    }
    n
}

/// Releases jobs claimed for nobody, from a task of its own (if there is
/// a runtime; else their leases run out).
fn release_later(log: Arc<QueueLog>, jobs: impl Iterator<Item = (String, u64)> + Send + 'static) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        for (id, token) in jobs {
            if let Err(error) = log.release(&id, token).await {
                tracing::warn!(target: targets::JOB, job = %id, %error, "could not hand back a job claimed for a dropped call; it comes back when its lease runs out");
            }
        }
    });
}

type ClaimFuture =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<ClaimOutcome, StoreError>> + Send>>;

/// A claim in flight; dropped before it finished, it finishes on a task of
/// its own and releases what it took.
struct FinishOnDrop {
    log: Arc<QueueLog>,
    claim: Option<ClaimFuture>,
}

impl Drop for FinishOnDrop {
    fn drop(&mut self) {
        let Some(claim) = self.claim.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return; // no runtime: the leases run out instead
        };
        let log = Arc::clone(&self.log);
        runtime.spawn(async move {
            let Ok(orphaned) = claim.await else {
                return;
            };
            release_later(
                log,
                orphaned.jobs.into_iter().map(|job| (job.id, job.token)),
            );
        });
    }
}

type BatchFuture<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<usize, StoreError>> + Send + 'a>>;

fn job_state(state: State) -> JobState {
    match state {
        State::Waiting => JobState::Waiting,
        State::Leased => JobState::Leased,
        State::Dead | State::Free => JobState::Dead,
    }
}
