//! The store's operations on one queue, one per Redis script (see
//! `src/redis/lua/`), with the same answers: what the queue's `Queue` and `Job`
//! methods call on the embedded backend.
//!
//! Each change is one call of [`QueueLog::change`]: decided and applied to
//! the index under the queue's lock, durable (in a group commit) before it
//! returns. Ids and payloads come back from the log after the commit. A
//! claim is the exception: it hands its jobs out at once, before its
//! frame is on disk (see [`hand_out_now`]).

use std::sync::Arc;

use super::error::StoreError;
use super::index::{
    lateness_bucket, Claim, Due, GaveUp, Handed, Index, Listed, State, Which, LATENESS,
};
use super::store::{QueueLog, Read, ReadReq};
use crate::data::clock::Clock;
use crate::data::history::{first_minute, StoredAttempt};
use crate::data::recurrence::Recurrence;
use crate::data::stats::Counts;

/// A job a claim took, read back from the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Claimed {
    pub(crate) id: String,
    pub(crate) payload: Vec<u8>,
    pub(crate) token: u64,
    pub(crate) attempt: u32,
    /// Its due time (ms since the epoch).
    pub(crate) deadline_ms: u64,
    /// Taken back from a lease that ran out.
    pub(crate) redelivery: bool,
}

/// What a claim did (`claim.lua`'s reply, without the wake-up chain).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClaimOutcome {
    /// The wall clock's now at the claim (ms).
    pub(crate) now_ms: u64,
    pub(crate) jobs: Vec<Claimed>,
    /// Jobs whose lease ran out on their last attempt, now dead.
    pub(crate) buried: Vec<String>,
    /// Claimable jobs left behind.
    pub(crate) left: usize,
}

/// One job as the operator sees it (`inspect_job.lua`, `list_jobs.lua`,
/// `dead_list.lua`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JobRow {
    pub(crate) id: String,
    pub(crate) state: State,
    /// Due time (waiting), lease expiry (leased) or time of death (dead).
    pub(crate) at_ms: u64,
    pub(crate) attempts: u32,
    /// The due time of its last delivery (leased and dead jobs).
    pub(crate) deadline_ms: Option<u64>,
    pub(crate) payload_len: u64,
    /// The payload, or its first bytes in a listing.
    pub(crate) payload: Vec<u8>,
    pub(crate) last_error: Option<String>,
    /// When it was scheduled (ms), if recorded.
    pub(crate) created_ms: Option<u64>,
    /// Its ended attempts, oldest first.
    pub(crate) ended: Vec<StoredAttempt>,
    /// Its running attempt (leased jobs).
    pub(crate) running: Option<StoredAttempt>,
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

impl QueueLog {
    /// `schedule.lua`: `(true, due)` if written, `(false, due or lease
    /// expiry)` if the id was waiting or leased (nothing written).
    pub(crate) async fn schedule(
        &self,
        id: &str,
        due: Due,
        payload: &[u8],
    ) -> Result<(bool, u64), StoreError> {
        let (done, _) = self
            .change(false, |index, batch, log, now| {
                Ok((
                    index.schedule(batch, log, now, id.as_bytes(), due, payload)?,
                    Vec::new(),
                ))
            })
            .await?;
        Ok(done)
    }

    /// `schedule_many.lua`: a chunk, all or nothing (one frame); delays
    /// (`delays`) count from `base` or the call's now. Returns how many
    /// were new and the base used.
    pub(crate) async fn schedule_many(
        &self,
        delays: bool,
        base: Option<u64>,
        jobs: &[(&str, u64, &[u8])],
    ) -> Result<(usize, u64), StoreError> {
        let jobs: Vec<(&[u8], u64, &[u8])> = jobs
            .iter()
            .map(|&(id, value, payload)| (id.as_bytes(), value, payload))
            .collect();
        let (done, _) = self
            .change(false, |index, batch, log, now| {
                Ok((
                    index.schedule_many(batch, log, now, delays, base, &jobs)?,
                    Vec::new(),
                ))
            })
            .await?;
        Ok(done)
    }

    /// `cancel.lua`: `true` if the job was waiting and is now gone.
    pub(crate) async fn cancel(&self, id: &str) -> Result<bool, StoreError> {
        let (done, _) = self
            .change(false, |index, batch, log, _| {
                Ok((index.cancel(batch, log, id.as_bytes())?, Vec::new()))
            })
            .await?;
        Ok(done)
    }

    /// `claim.lua`: up to `n` jobs, leases that ran out first, each leased
    /// for `lease_ms` with its own token; handed out before the claim's
    /// frame is on disk, or after it for jobs due when the store opened
    /// (see [`hand_out_now`]).
    pub(crate) async fn claim_as(
        &self,
        n: usize,
        lease_ms: u64,
        max_attempts: u32,
        holder: &Arc<str>,
    ) -> Result<ClaimOutcome, StoreError> {
        let (claim, reads) = self
            .change(true, |index, batch, log, now| {
                let claim =
                    index.claim(batch, log, now.floor, n, lease_ms, max_attempts, holder)?;
                if hand_out_now(index, &claim) {
                    for t in &claim.jobs {
                        batch.handed.push(Handed {
                            slot: t.slot,
                            view: index.view(t.slot),
                            lateness: (!t.redelivery)
                                .then(|| lateness_bucket(claim.now.saturating_sub(t.deadline))),
                        });
                    }
                }
                let mut reqs: Vec<ReadReq> = claim
                    .jobs
                    .iter()
                    .map(|t| ReadReq {
                        slot: t.slot,
                        gen: t.gen,
                        payload: usize::MAX,
                    })
                    .collect();
                reqs.extend(claim.buried.iter().map(|&(slot, gen)| ReadReq {
                    slot,
                    gen,
                    payload: 0,
                }));
                Ok((claim, reqs))
            })
            .await?;
        if claim.left > 0 {
            // Pass a wake-up on for what this claim left behind.
            self.shared.claimable.notify_one();
        }
        let mut reads = reads.into_iter();
        let jobs = claim
            .jobs
            .iter()
            .map(|t| {
                let Read { id, payload } = reads.next().unwrap_or_default();
                Claimed {
                    id: text(id),
                    payload,
                    token: t.token,
                    attempt: t.attempt,
                    deadline_ms: t.deadline,
                    redelivery: t.redelivery,
                }
            })
            .collect();
        let buried = reads.map(|r| text(r.id)).collect();
        Ok(ClaimOutcome {
            now_ms: claim.now,
            jobs,
            buried,
            left: claim.left,
        })
    }

    /// [`claim_as`](QueueLog::claim_as) for the holder `test` (the
    /// store's own tests).
    #[cfg(test)]
    pub(crate) async fn claim(
        &self,
        n: usize,
        lease_ms: u64,
        max_attempts: u32,
    ) -> Result<ClaimOutcome, StoreError> {
        self.claim_as(n, lease_ms, max_attempts, &Arc::from("test"))
            .await
    }

    /// Waits until a claim may find something (see `driver.rs`): a future
    /// to create *before* a claim that finds nothing, and await after it.
    pub(crate) fn claimable(&self) -> tokio::sync::futures::Notified<'_> {
        self.shared.claimable.notified()
    }

    /// `ack.lua`: `true` if `token` still held the job (now gone).
    pub(crate) async fn ack(&self, id: &str, token: u64) -> Result<bool, StoreError> {
        let (done, _) = self
            .change(false, |index, batch, _, now| {
                Ok((
                    index.ack(batch, now.floor, id.as_bytes(), token),
                    Vec::new(),
                ))
            })
            .await?;
        Ok(done)
    }

    /// `ack_many.lua`: acks all in one frame; returns the ids whose lease
    /// was lost (nothing changed for them).
    pub(crate) async fn ack_many(&self, jobs: &[(&str, u64)]) -> Result<Vec<String>, StoreError> {
        let (lost, _) = self
            .change(false, |index, batch, _, now| {
                let lost = jobs
                    .iter()
                    .filter(|&&(id, token)| !index.ack(batch, now.floor, id.as_bytes(), token))
                    .map(|&(id, _)| id.to_owned())
                    .collect();
                Ok((lost, Vec::new()))
            })
            .await?;
        Ok(lost)
    }

    /// `retry.lua`.
    pub(crate) async fn retry(
        &self,
        id: &str,
        token: u64,
        delay_ms: u64,
        max_attempts: u32,
    ) -> Result<GaveUp, StoreError> {
        let (done, _) = self
            .change(false, |index, batch, _, now| {
                Ok((
                    index.retry(batch, now, id.as_bytes(), token, delay_ms, max_attempts),
                    Vec::new(),
                ))
            })
            .await?;
        Ok(done)
    }

    /// `fail.lua` (`bury`: the `b` action).
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn fail(
        &self,
        id: &str,
        token: u64,
        bury: bool,
        delay_ms: u64,
        max_attempts: u32,
        reason: &str,
    ) -> Result<GaveUp, StoreError> {
        let (done, _) = self
            .change(false, |index, batch, _, now| {
                let done = index.fail(
                    batch,
                    now,
                    id.as_bytes(),
                    token,
                    bury,
                    delay_ms,
                    max_attempts,
                    reason,
                );
                Ok((done, Vec::new()))
            })
            .await?;
        Ok(done)
    }

    /// `extend.lua`: the new expiry (ms), or `None` if the lease was lost.
    /// In memory only: leases do not outlive the process.
    pub(crate) fn extend(&self, id: &str, token: u64, lease_ms: u64) -> Option<u64> {
        self.look(|index, now| index.extend(now.floor, id.as_bytes(), token, lease_ms))
    }

    /// `release.lua`.
    pub(crate) async fn release(&self, id: &str, token: u64) -> Result<bool, StoreError> {
        let (done, _) = self
            .change(false, |index, batch, _, now| {
                Ok((
                    index.release(batch, now.floor, id.as_bytes(), token),
                    Vec::new(),
                ))
            })
            .await?;
        Ok(done)
    }

    /// `stats.lua`.
    pub(crate) fn stats(&self) -> Counts {
        self.look(|index, now| index.numbers(now.floor))
    }

    /// Damaged frames of the log (see `Stats::damaged_frames`): the
    /// quarantine files beside it, and a damaged last frame a read-only
    /// handle left where it is.
    pub(crate) fn damaged_frames(&self) -> u64 {
        let state = self.shared.lock();
        let tail = state.follow.as_ref().is_some_and(|f| f.damaged_tail());
        state.quarantined + u64::from(tail)
    }

    /// How many jobs are waiting.
    pub(crate) fn pending(&self) -> u64 {
        self.look(|index, _| index.pending())
    }

    /// How many jobs are leased.
    pub(crate) fn leased(&self) -> u64 {
        self.look(|index, _| index.leased())
    }

    /// The lateness histogram (the claim script's `record_lateness`).
    pub(crate) fn lateness(&self) -> [u64; LATENESS] {
        self.look(|index, _| index.lateness())
    }

    /// `read_throughput.lua`: the wall clock's now, and the counts per
    /// minute (minute, processed, failed) from the minute holding
    /// `since_ms` (or the oldest kept).
    pub(crate) fn throughput(&self, since_ms: u64) -> (u64, Vec<(u64, u64, u64)>) {
        self.look(|index, now| {
            let first = first_minute(now.floor, since_ms);
            (now.floor, index.throughput_from(first))
        })
    }

    /// `requeue.lua`.
    pub(crate) async fn requeue(&self, id: &str) -> Result<bool, StoreError> {
        let (done, _) = self
            .change(false, |index, batch, log, now| {
                Ok((
                    index.requeue(batch, log, now.floor, id.as_bytes())?,
                    Vec::new(),
                ))
            })
            .await?;
        Ok(done)
    }

    /// `requeue_all.lua`: up to `limit`, oldest deaths first.
    pub(crate) async fn requeue_all(&self, limit: usize) -> Result<usize, StoreError> {
        let (done, _) = self
            .change(false, |index, batch, _, now| {
                Ok((index.requeue_all(batch, now.floor, limit), Vec::new()))
            })
            .await?;
        Ok(done)
    }

    /// `purge.lua`.
    pub(crate) async fn purge(&self, id: &str) -> Result<bool, StoreError> {
        let (done, _) = self
            .change(false, |index, batch, log, _| {
                Ok((index.purge(batch, log, id.as_bytes())?, Vec::new()))
            })
            .await?;
        Ok(done)
    }

    /// `purge_all.lua`: up to `limit`, oldest deaths first.
    pub(crate) async fn purge_all(&self, limit: usize) -> Result<usize, StoreError> {
        let (done, _) = self
            .change(false, |index, batch, _, _| {
                Ok((index.purge_all(batch, limit), Vec::new()))
            })
            .await?;
        Ok(done)
    }

    /// `promote.lua`.
    pub(crate) async fn promote(&self, id: &str) -> Result<bool, StoreError> {
        let (done, _) = self
            .change(false, |index, batch, log, now| {
                Ok((
                    index.promote(batch, log, now.floor, id.as_bytes())?,
                    Vec::new(),
                ))
            })
            .await?;
        Ok(done)
    }

    /// Registers or replaces a recurrence (`recur.lua`): `true` if
    /// anything changed.
    pub(crate) async fn recur(
        &self,
        name: &str,
        recurrence: &Recurrence,
        payload: &[u8],
    ) -> Result<bool, StoreError> {
        let (done, _) = self
            .change(false, |index, batch, log, now| {
                let done = index.recur(batch, log, now, name, recurrence, payload)?;
                Ok((done, Vec::new()))
            })
            .await?;
        Ok(done)
    }

    /// Removes a recurrence and its waiting occurrence.
    pub(crate) async fn unrecur(&self, name: &str) -> Result<bool, StoreError> {
        let (done, _) = self
            .change(false, |index, batch, _, _| {
                Ok((index.unrecur(batch, name), Vec::new()))
            })
            .await?;
        Ok(done)
    }

    /// Pauses or resumes a recurrence.
    pub(crate) async fn pause_recurrence(
        &self,
        name: &str,
        paused: bool,
    ) -> Result<bool, StoreError> {
        let (done, _) = self
            .change(false, |index, batch, log, now| {
                let done = index.pause_recurrence(batch, log, now, name, paused)?;
                Ok((done, Vec::new()))
            })
            .await?;
        Ok(done)
    }

    /// Every recurrence, with its last occurrence's fate.
    pub(crate) async fn recurrences(&self) -> Result<Vec<Listed>, StoreError> {
        let (listed, _) = self
            .change(false, |index, batch, log, _| {
                Ok((index.list_recurrences(batch, log)?, Vec::new()))
            })
            .await?;
        Ok(listed)
    }

    /// `inspect_job.lua`: the wall clock's now, and the job if it is
    /// waiting, leased or dead.
    pub(crate) async fn inspect(&self, id: &str) -> Result<(u64, Option<JobRow>), StoreError> {
        let ((now, found), reads) = self
            .change(false, |index, batch, log, now| {
                index.advance(now.floor);
                let Some(slot) = index.find(id.as_bytes(), batch, log)? else {
                    return Ok(((now.floor, None), Vec::new()));
                };
                let view = index.view(slot);
                let req = ReadReq {
                    slot,
                    gen: view.slot.gen,
                    payload: usize::MAX,
                };
                Ok(((now.floor, Some(view)), vec![req]))
            })
            .await?;
        let row = found
            .zip(reads.into_iter().next())
            .map(|(view, read)| row(&view, read, None));
        Ok((now, row))
    }

    /// `list_jobs.lua` (and `dead_list.lua` for [`Which::Dead`]): the wall
    /// clock's now, the total in the listing, and up to `count` rows from
    /// `offset`, each with up to `preview` bytes of payload.
    pub(crate) async fn list(
        &self,
        which: Which,
        offset: usize,
        count: usize,
        preview: usize,
    ) -> Result<(u64, u64, Vec<JobRow>), StoreError> {
        let ((now, total, rows), reads) = self
            .change(false, |index, _, _, now| {
                let (total, rows) = index.list(now.floor, which, offset, count);
                let reqs = rows
                    .iter()
                    .map(|r| ReadReq {
                        slot: r.slot,
                        gen: r.view.slot.gen,
                        payload: preview,
                    })
                    .collect();
                Ok(((now.floor, total, rows), reqs))
            })
            .await?;
        let rows = rows
            .into_iter()
            .zip(reads)
            .map(|(r, read)| row(&r.view, read, Some(r.at)))
            .collect();
        Ok((now, total, rows))
    }
}

/// Whether a claim hands its jobs out as soon as its record is in the
/// batch, before the frame is written and synced (else it waits for its
/// frame, as every other change does).
///
/// Safe because the store is one process' (its lock): a worker handed a
/// job dies with the process, so a crash before the frame is on disk
/// leaves no holder behind, only the job waiting again (never lost), and
/// everything that job's holder does next (ack, retry, release) is logged
/// after the claim, so an ack on disk implies its claim is. What such a
/// crash costs is the attempt: it is not counted.
///
/// So that a job whose work kills the process at once cannot be handed
/// out for ever uncounted, a job due when this process opened the store
/// (which a dead process may have handed out: a job left waiting, or a
/// lease found on open) is handed out only once its claim is on disk:
/// each crash after the first then counts, and `max_attempts` ends it.
/// A claim that buries jobs waits too (nothing to hurry).
fn hand_out_now(index: &Index, claim: &Claim) -> bool {
    !claim.jobs.is_empty()
        && claim.buried.is_empty()
        && claim.jobs.iter().all(|t| t.deadline > index.opened_at())
}

/// A row from a job's view and what was read of it.
fn row(view: &super::index::View, read: Read, at: Option<u64>) -> JobRow {
    let s = &view.slot;
    let (score, deadline) = match s.state {
        State::Waiting => (s.due, None),
        State::Leased => (view.lease.as_ref().map_or(0, |l| l.expiry), Some(s.due)),
        State::Dead | State::Free => (view.died_at.unwrap_or(0), Some(s.due)),
    };
    let (ended, running) = view.attempts();
    JobRow {
        id: text(read.id),
        state: s.state,
        at_ms: at.unwrap_or(score),
        attempts: s.attempts,
        deadline_ms: deadline,
        payload_len: u64::from(s.payload_len),
        payload: read.payload,
        last_error: view.error.as_deref().map(str::to_owned),
        created_ms: (s.created != 0).then_some(s.created),
        ended,
        running,
    }
}

/// Opens a read-only handle on queue `name` of the store in `dir`, off
/// the runtime (`follow.rs`).
///
/// # Errors
///
/// As [`follow::open`](super::follow::open).
pub(crate) async fn open_read_only(
    dir: &std::path::Path,
    name: &str,
    clock: &Clock,
) -> Result<Arc<QueueLog>, StoreError> {
    let (dir, name, clock) = (dir.to_owned(), name.to_owned(), clock.clone());
    tokio::task::spawn_blocking(move || super::follow::open(&dir, &name, clock))
        .await
        .map_err(|e| StoreError::Failed {
            path: std::path::PathBuf::new(),
            reason: format!("opening the store panicked: {e}"),
        })?
}

/// Repairs the end of queue `name`'s log in the store in `dir` (see
/// `open.rs`), off the runtime: the log's path and what was done.
///
/// # Errors
///
/// As [`Store::open`](super::store::Store::open) and
/// [`Store::repair`](super::store::Store::repair).
pub(crate) async fn repair(
    dir: &std::path::Path,
    name: &str,
) -> Result<(std::path::PathBuf, super::open::LogRepair), StoreError> {
    let (dir, name) = (dir.to_owned(), name.to_owned());
    tokio::task::spawn_blocking(move || {
        let store = super::store::Store::open(&dir, &Clock::system())?;
        let path = store.log_path(&name);
        Ok((path, store.repair(&name)?))
    })
    .await
    .map_err(|e| StoreError::Failed {
        path: std::path::PathBuf::new(),
        reason: format!("repairing the store panicked: {e}"),
    })?
}

/// Opens the queue `name` of the store in `dir` (creating both if
/// needed), replaying its log off the runtime, and starts its driver.
///
/// # Errors
///
/// As [`Store::open`](super::store::Store::open) and
/// [`Store::queue`](super::store::Store::queue).
#[cfg(test)]
pub(crate) async fn open(dir: &std::path::Path, name: &str) -> Result<Arc<QueueLog>, StoreError> {
    open_with_clock(dir, name, &Clock::system()).await
}

/// As [`open`], with the store's clock.
///
/// # Errors
///
/// As [`open`]; [`StoreError::OtherClock`] if this process has the store
/// open with another clock.
pub(crate) async fn open_with_clock(
    dir: &std::path::Path,
    name: &str,
    clock: &Clock,
) -> Result<Arc<QueueLog>, StoreError> {
    let (dir, name, clock) = (dir.to_owned(), name.to_owned(), clock.clone());
    let log = tokio::task::spawn_blocking(move || {
        let store = super::store::Store::open(&dir, &clock)?;
        store.queue(&name)
    })
    .await
    .map_err(|e| StoreError::Failed {
        path: std::path::PathBuf::new(),
        reason: format!("opening the store panicked: {e}"),
    })??;
    log.ensure_driver();
    Ok(log)
}
