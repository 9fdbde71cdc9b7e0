//! The `Queue` and `Job` calls on the embedded store: what
//! `Backend::Embedded` does for each public method, with the Redis
//! backend's answers (`src/queue.rs` dispatches here first).
//!
//! Ground rules: the store's queue log (`store.rs`) owns every job's
//! state; a handle owns its `closed` flag (in `Inner`, as on Redis) and
//! the wake-up of its own waiting calls when it is closed. Every change
//! is durable before the call returns (`ops.rs`), but a claim, which may
//! hand its jobs out first (`store.rs`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tiered_timer::Instant;

use tokio::sync::Notify;

use super::error::StoreError;
use super::index::{Due, GaveUp, State, Which};
use super::ops::{self, ClaimOutcome, JobRow};
use super::store::QueueLog;
use crate::data::error::Error;
use crate::data::id::check_job_id;
use crate::data::id::JobId;
use crate::data::lateness::Lateness;
use crate::data::limits::{CHUNK_BYTES, CHUNK_JOBS};
use crate::data::listing::{JobInfo, JobState, JobSummary, Listing, Page, MAX_PAGE, PREVIEW};
use crate::data::stats::{Counts, DeadLetter, Stats};
use crate::job::Claimed;
use crate::queue::Inner;

/// An embedded queue handle's own state.
pub(crate) struct Local {
    pub(crate) log: Arc<QueueLog>,
    /// Wakes this handle's waiting calls when it is closed.
    pub(crate) closing: Notify,
}

/// The directory of a `file://` URL: `file:///abs/dir`,
/// `file://localhost/abs/dir`, or `file://rel/dir` (relative to the
/// working directory).
pub(crate) fn dir_of(url: &str) -> Result<PathBuf, Error> {
    let rest = url
        .strip_prefix("file://")
        .ok_or_else(|| Error::InvalidUrl {
            reason: format!("{url:?} is not a file:// URL"),
        })?;
    let rest = rest
        .strip_prefix("localhost")
        .filter(|r| r.starts_with('/'))
        .unwrap_or(rest);
    if rest.is_empty() || rest.contains('\0') {
        return Err(Error::InvalidUrl {
            reason: "a file:// URL needs a directory: file:///var/lib/app/jobs".to_owned(),
        });
    }
    Ok(PathBuf::from(rest))
}

/// A queue name is also a file name in the store's directory.
pub(crate) fn check_file_name(name: &str) -> Result<(), Error> {
    if name.contains('/') || name == "." || name == ".." {
        return Err(Error::InvalidQueueName {
            name: name.chars().take(64).collect(),
            reason: "an embedded queue's name is a file name: no '/', not '.' or '..'",
        });
    }
    Ok(())
}

/// Fails with `NotFound` unless the queue `name` has a log in `dir` (for
/// handles that look at a queue without creating it).
pub(crate) fn check_exists(dir: &Path, name: &str) -> Result<(), Error> {
    let path = dir.join(format!("{name}.log"));
    match std::fs::metadata(&path) {
        Ok(_) => Ok(()),
        Err(source) => Err(Error::Io {
            path,
            doing: "looking for the queue's log".to_owned(),
            source,
        }),
    }
}

/// Opens a read-only handle on queue `name` in the store in `dir`
/// (`follow.rs`): creates nothing, takes no lock.
pub(crate) async fn open_read_only(dir: &Path, name: &str) -> Result<Local, Error> {
    let log = ops::open_read_only(dir, name).await?;
    Ok(Local {
        log,
        closing: Notify::new(),
    })
}

/// Opens (creating them if needed) the store in `dir` and its queue
/// `name`.
pub(crate) async fn open(dir: &Path, name: &str) -> Result<Local, Error> {
    let log = ops::open(dir, name).await?;
    Ok(Local {
        log,
        closing: Notify::new(),
    })
}

fn when(ms: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
}

fn token_of(token: &str) -> u64 {
    // A token this backend handed out is a decimal u64; anything else
    // holds no lease (0 is never a token).
    token.parse().unwrap_or(0)
}

impl Local {
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

    /// One job (as `Queue::schedule*`): `value` is a delay (`delay`) or a
    /// due time, in ms.
    pub(crate) async fn schedule(
        &self,
        id: &JobId,
        delay: bool,
        value: u64,
        payload: &[u8],
    ) -> Result<(), Error> {
        let due = if delay {
            Due::After(value)
        } else {
            Due::At(value)
        };
        self.log.schedule(id.as_str(), due, payload).await?;
        Ok(())
    }

    /// Checked jobs, in chunks as on Redis (each chunk all or nothing, one
    /// frame); delays count from the first chunk's now. Returns how many
    /// were new.
    pub(crate) async fn schedule_chunks(
        &self,
        jobs: &[(JobId, u64, Vec<u8>)],
        delays: bool,
    ) -> Result<usize, Error> {
        let mut base = None;
        let mut written = 0;
        let mut rest = jobs;
        while !rest.is_empty() {
            let mut bytes = 0;
            let mut n = 0;
            for (_, _, payload) in rest {
                n += 1;
                bytes += payload.len();
                if n >= CHUNK_JOBS || bytes >= CHUNK_BYTES {
                    break;
                }
            }
            let (chunk, later) = rest.split_at(n);
            let chunk: Vec<(&str, u64, &[u8])> = chunk
                .iter()
                .map(|(id, value, payload)| (id.as_str(), *value, payload.as_slice()))
                .collect();
            let (new, used) = self.log.schedule_many(delays, base, &chunk).await?;
            written += new;
            base.get_or_insert(used);
            rest = later;
        }
        Ok(written)
    }

    pub(crate) async fn cancel(&self, id: &JobId) -> Result<bool, Error> {
        Ok(self.log.cancel(id.as_str()).await?)
    }

    /// Waits until at least one job is due and claims up to `max` (as the
    /// Redis waker's claims): a claim that finds nothing waits for the
    /// store's driver to say something came due, or for `close`.
    pub(crate) async fn wait(&self, inner: &Inner, max: usize) -> Result<Vec<Claimed>, Error> {
        if self.log.is_read_only() {
            // Nothing to claim with: refused before it waits.
            return Err(Error::ReadOnly {
                path: self.log.shared.path.clone(),
            });
        }
        let lease_ms = crate::data::limits::millis_up(inner.lease());
        loop {
            let closing = self.closing.notified();
            tokio::pin!(closing);
            closing.as_mut().enable();
            if inner.is_closed() {
                return Err(Error::Closed);
            }
            self.log.ensure_driver();
            let claimable = self.log.claimable();
            tokio::pin!(claimable);
            claimable.as_mut().enable();
            let sent = Instant::now();
            let outcome = self.claim(max, lease_ms, inner.max_attempts).await?;
            for id in &outcome.buried {
                tracing::warn!(queue = inner.name(), job = %id, attempts = inner.max_attempts, "job moved to the dead letters: its lease ran out on its last attempt");
                crate::metrics::dead_lettered(inner.name());
            }
            if !outcome.jobs.is_empty() {
                let lease = Duration::from_millis(lease_ms);
                return Ok(outcome
                    .jobs
                    .into_iter()
                    .map(|job| Claimed {
                        partition: 0,
                        id: JobId::from(job.id),
                        payload: job.payload,
                        deadline_ms: job.deadline_ms,
                        attempt: job.attempt,
                        token: job.token.to_string(),
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

    /// A claim that outlives the call that asked for it: polled in place,
    /// and, if that call is dropped before the claim returns (one that
    /// hands its jobs out at once returns at its first poll), finished
    /// on a task of its own, which hands the jobs back (released at once,
    /// the attempt not counted), so that a cancelled `next` strands
    /// nothing. (The claim takes its jobs in memory at its first poll; its
    /// record's commit comes after.)
    async fn claim(
        &self,
        max: usize,
        lease_ms: u64,
        max_attempts: u32,
    ) -> Result<ClaimOutcome, Error> {
        let log = Arc::clone(&self.log);
        let mut claim = FinishOnDrop {
            log: Arc::clone(&self.log),
            claim: Some(Box::pin(async move {
                log.claim(max, lease_ms, max_attempts).await
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

    pub(crate) async fn ack(&self, id: &JobId, token: &str) -> Result<bool, Error> {
        Ok(self.log.ack(id.as_str(), token_of(token)).await?)
    }

    /// Acks all in one frame; the ids whose lease was lost.
    pub(crate) async fn ack_many(&self, jobs: &[(JobId, String)]) -> Result<Vec<JobId>, Error> {
        let mut lost = Vec::new();
        for chunk in jobs.chunks(CHUNK_JOBS) {
            let list: Vec<(&str, u64)> = chunk
                .iter()
                .map(|(id, token)| (id.as_str(), token_of(token)))
                .collect();
            lost.extend(self.log.ack_many(&list).await?.into_iter().map(JobId::from));
        }
        Ok(lost)
    }

    /// As the retry script: 1 rescheduled, 2 buried, 0 lease lost.
    pub(crate) async fn retry(
        &self,
        id: &JobId,
        token: &str,
        delay_ms: u64,
        max_attempts: u32,
    ) -> Result<i64, Error> {
        let done = self
            .log
            .retry(id.as_str(), token_of(token), delay_ms, max_attempts)
            .await?;
        Ok(outcome(done))
    }

    /// As the fail script: 1 rescheduled, 2 buried, 0 lease lost.
    pub(crate) async fn fail(
        &self,
        id: &JobId,
        token: &str,
        bury: bool,
        delay_ms: u64,
        max_attempts: u32,
        reason: &str,
    ) -> Result<i64, Error> {
        let done = self
            .log
            .fail(
                id.as_str(),
                token_of(token),
                bury,
                delay_ms,
                max_attempts,
                reason,
            )
            .await?;
        Ok(outcome(done))
    }

    pub(crate) fn extend(&self, id: &JobId, token: &str, lease_ms: u64) -> bool {
        self.log
            .extend(id.as_str(), token_of(token), lease_ms)
            .is_some()
    }

    pub(crate) async fn release(&self, id: &JobId, token: &str) -> Result<bool, Error> {
        Ok(self.log.release(id.as_str(), token_of(token)).await?)
    }

    pub(crate) async fn pending(&self) -> Result<u64, Error> {
        self.follow().await?;
        Ok(self.log.pending())
    }

    pub(crate) async fn leased(&self) -> Result<u64, Error> {
        self.follow().await?;
        Ok(self.log.leased())
    }

    pub(crate) async fn stats(&self) -> Result<Stats, Error> {
        self.follow().await?;
        let counts = Counts {
            damaged_frames: self.log.damaged_frames(),
            ..self.log.stats()
        };
        Ok(Stats::total(vec![Stats::of_partition(0, counts)]))
    }

    pub(crate) async fn dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>, Error> {
        self.follow().await?;
        let mut all = Vec::new();
        while all.len() < limit {
            let count = (limit - all.len()).min(MAX_PAGE);
            let (now, _, rows) = self.log.list(Which::Dead, all.len(), count, 0).await?;
            let got = rows.len();
            all.extend(rows.into_iter().map(|row| DeadLetter {
                id: JobId::from(row.id),
                partition: 0,
                died_at: when(row.at_ms),
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

    pub(crate) async fn requeue(&self, id: &JobId) -> Result<bool, Error> {
        check_job_id(id.as_str())?;
        Ok(self.log.requeue(id.as_str()).await?)
    }

    pub(crate) async fn requeue_all(&self) -> Result<u64, Error> {
        self.in_batches(|log| Box::pin(log.requeue_all(BATCH)))
            .await
    }

    pub(crate) async fn purge(&self, id: &JobId) -> Result<bool, Error> {
        check_job_id(id.as_str())?;
        Ok(self.log.purge(id.as_str()).await?)
    }

    pub(crate) async fn purge_all(&self) -> Result<u64, Error> {
        self.in_batches(|log| Box::pin(log.purge_all(BATCH))).await
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

    pub(crate) async fn promote(&self, id: &JobId) -> Result<bool, Error> {
        check_job_id(id.as_str())?;
        Ok(self.log.promote(id.as_str()).await?)
    }

    pub(crate) async fn job(&self, id: &JobId) -> Result<Option<JobInfo>, Error> {
        check_job_id(id.as_str())?;
        self.follow().await?;
        let (now, row) = self.log.inspect(id.as_str()).await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let state = job_state(row.state);
        let (due, lease_expiry, died_at) = match state {
            JobState::Waiting => (Some(when(row.at_ms)), None, None),
            JobState::Leased => (row.deadline_ms.map(when), Some(when(row.at_ms)), None),
            JobState::Dead => (row.deadline_ms.map(when), None, Some(when(row.at_ms))),
        };
        Ok(Some(JobInfo {
            id: id.clone(),
            partition: 0,
            state,
            redis_time: when(now),
            due,
            lease_expiry,
            died_at,
            attempts: row.attempts,
            last_error: row.last_error,
            payload: row.payload,
        }))
    }

    pub(crate) async fn list(
        &self,
        listing: Listing,
        offset: usize,
        limit: usize,
    ) -> Result<Page, Error> {
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
                at: when(row.at_ms),
                attempts: row.attempts,
                payload_len: row.payload_len,
                payload_preview: row.payload,
                last_error: row.last_error,
            })
            .collect();
        Ok(Page {
            redis_time: when(now),
            total,
            offset,
            jobs,
        })
    }

    pub(crate) async fn lateness(&self) -> Result<Lateness, Error> {
        self.follow().await?;
        Ok(Lateness::from_counts(self.log.lateness().to_vec()))
    }
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
            for job in orphaned.jobs {
                if let Err(error) = log.release(&job.id, job.token).await {
                    tracing::warn!(job = %job.id, %error, "could not hand back a job claimed for a dropped call; it comes back when its lease runs out");
                }
            }
        });
    }
}

/// Jobs per batch of `requeue_all` / `purge_all`.
const BATCH: usize = 1_000;

type BatchFuture<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<usize, StoreError>> + Send + 'a>>;

fn outcome(done: GaveUp) -> i64 {
    match done {
        GaveUp::Lost => 0,
        GaveUp::Rescheduled => 1,
        GaveUp::Buried => 2,
    }
}

fn job_state(state: State) -> JobState {
    match state {
        State::Waiting => JobState::Waiting,
        State::Leased => JobState::Leased,
        State::Dead | State::Free => JobState::Dead,
    }
}
