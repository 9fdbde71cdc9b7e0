//! A job's attempts and the queue's counts per minute, as the index keeps
//! them: derived from the same changes that claim a job and end its
//! attempts (live, and again when the log is replayed), so that they cost
//! no record of their own, and rebuilt by compaction from its `History`
//! and `Throughput` records.
//!
//! The running attempt is the job's [`Lease`](super::Lease) (claim time,
//! holder); an attempt ends when the job waits again (retried, failed,
//! released), dies (buried), is claimed again while leased (its lease ran
//! out) or is acked (gone, with its history). The bounds and the rule for
//! "failed" are those of `src/data/history.rs`, as on Redis.

use std::sync::Arc;

use super::super::format::{self, EndedEntry, Record, Why};
use super::{Batch, Ended, Index, Undo, View};
use crate::data::history::{kept_error, Outcome, StoredAttempt, HISTORY_LEN, THROUGHPUT_MINUTES};

/// An outcome's code in a `History` record.
fn code(outcome: Outcome) -> u8 {
    match outcome {
        Outcome::Running => 0,
        Outcome::Retried => 1,
        Outcome::Failed => 2,
        Outcome::Released => 3,
        Outcome::LeaseExpired => 4,
        Outcome::Buried => 5,
    }
}

/// The outcome of a code in a `History` record.
fn outcome_of(code: u8) -> Result<Outcome, String> {
    Ok(match code {
        1 => Outcome::Retried,
        2 => Outcome::Failed,
        3 => Outcome::Released,
        4 => Outcome::LeaseExpired,
        5 => Outcome::Buried,
        other => {
            return Err(format!(
                "an attempt's outcome code {other} is not one of 1 to 5"
            ))
        }
    })
}

/// What ended an attempt when its job waits again.
pub(crate) fn outcome_of_wait(why: Why) -> Option<Outcome> {
    match why {
        Why::Other => None,
        Why::Retried => Some(Outcome::Retried),
        Why::Failed => Some(Outcome::Failed),
        Why::Released => Some(Outcome::Released),
    }
}

/// The minute (since the epoch) of a time in ms.
fn minute_of(ms: u64) -> u64 {
    ms / 60_000
}

impl Index {
    /// Ends `view`'s running attempt (if it has one) with `outcome` at
    /// `at` (`None`: not recorded) and `error`, in its history (the oldest
    /// dropped beyond [`HISTORY_LEN`]), and counts a failure in `at`'s
    /// minute (in `batch`'s undo list, if live).
    pub(super) fn end_attempt(
        &mut self,
        batch: Option<&mut Batch>,
        view: &mut View,
        outcome: Outcome,
        at: Option<u64>,
        error: Option<&[u8]>,
    ) {
        let Some(lease) = view.lease.take() else {
            return;
        };
        let ended = Ended {
            attempt: view.slot.attempts,
            claimed: lease.claimed,
            holder: lease.holder,
            outcome,
            ended: at,
            error: error.map(|e| kept_error(e).into()),
        };
        let old = view.history.as_deref().unwrap_or_default();
        let keep = old.len().min(HISTORY_LEN - 1);
        let history: Vec<Ended> = old[old.len() - keep..]
            .iter()
            .cloned()
            .chain([ended])
            .collect();
        view.history = Some(history.into());
        if let (true, Some(at)) = (outcome.is_failure(), at) {
            self.tally(batch, at, true);
        }
    }

    /// Counts a job processed (or, `failed`, an attempt failed) in `at`'s
    /// minute, dropping the minutes older than the last
    /// [`THROUGHPUT_MINUTES`].
    pub(super) fn tally(&mut self, batch: Option<&mut Batch>, at: u64, failed: bool) {
        let minute = minute_of(at);
        let counts = self.throughput.entry(minute).or_default();
        if failed {
            counts.1 += 1;
        } else {
            counts.0 += 1;
        }
        if let Some(batch) = batch {
            batch.undo.push(Undo::Tally(minute, failed));
        }
        self.forget_minutes_before(minute);
    }

    /// Drops the counts of the minutes too old to keep, as of `minute`.
    fn forget_minutes_before(&mut self, minute: u64) {
        let oldest = (minute + 1).saturating_sub(THROUGHPUT_MINUTES);
        while self
            .throughput
            .first_key_value()
            .is_some_and(|(&m, _)| m < oldest)
        {
            self.throughput.pop_first();
        }
    }

    /// Takes back one count (a batch that failed to write).
    pub(super) fn untally(&mut self, minute: u64, failed: bool) {
        if let Some(counts) = self.throughput.get_mut(&minute) {
            let n = if failed { &mut counts.1 } else { &mut counts.0 };
            *n = n.saturating_sub(1);
            if *counts == (0, 0) {
                self.throughput.remove(&minute);
            }
        }
    }

    /// The counts per minute from minute `first` on: (minute, processed,
    /// failed).
    pub(crate) fn throughput_from(&self, first: u64) -> Vec<(u64, u64, u64)> {
        self.throughput
            .range(first..)
            .map(|(&m, &(p, f))| (m, p, f))
            .collect()
    }

    /// Every minute's counts, less what `undo` would take back (what is
    /// durable, for compaction).
    pub(crate) fn durable_throughput(&self, undo: &[Undo]) -> Vec<(u64, u64, u64)> {
        let mut counts = self.throughput.clone();
        for step in undo {
            if let Undo::Tally(minute, failed) = *step {
                if let Some(c) = counts.get_mut(&minute) {
                    let n = if failed { &mut c.1 } else { &mut c.0 };
                    *n = n.saturating_sub(1);
                }
            }
        }
        counts
            .into_iter()
            .filter(|&(_, c)| c != (0, 0))
            .map(|(m, (p, f))| (m, p, f))
            .collect()
    }

    /// Adds counts read from the log (a `Throughput` record).
    pub(super) fn add_throughput(&mut self, minutes: &[u8]) -> Result<(), String> {
        let mut last = None;
        for (minute, processed, failed) in format::decode_throughput(minutes)? {
            let counts = self.throughput.entry(minute).or_default();
            counts.0 += processed;
            counts.1 += failed;
            last = last.max(Some(minute));
        }
        if let Some(minute) = last {
            self.forget_minutes_before(minute);
        }
        Ok(())
    }

    /// A holder's name read from the log (`None`: empty, not recorded),
    /// shared with the last one read if it is the same.
    pub(super) fn holder_of(&mut self, bytes: &[u8]) -> Option<Arc<str>> {
        if bytes.is_empty() {
            return None;
        }
        if let Some(last) = &self.last_holder {
            if last.as_bytes() == bytes {
                return Some(Arc::clone(last));
            }
        }
        let holder: Arc<str> = String::from_utf8_lossy(bytes).into();
        self.last_holder = Some(Arc::clone(&holder));
        Some(holder)
    }

    /// A job's ended attempts from a `History` record.
    pub(super) fn history_of_record(&mut self, body: &[u8]) -> Result<Arc<[Ended]>, String> {
        let entries = format::decode_history(body)?;
        let mut all = Vec::with_capacity(entries.len());
        for e in entries {
            all.push(Ended {
                attempt: e.attempt,
                claimed: e.claimed,
                holder: self.holder_of(e.holder),
                outcome: outcome_of(e.outcome)?,
                ended: (e.ended != 0).then_some(e.ended),
                error: e.error.map(Into::into),
            });
        }
        Ok(all.into())
    }
}

/// The `History` record of a job's ended attempts (compaction), if it has
/// any.
pub(crate) fn history_record(slot: u32, view: &View, out: &mut Vec<u8>) {
    let Some(history) = view.history.as_deref().filter(|h| !h.is_empty()) else {
        return;
    };
    let body = format::encode_history(history.iter().map(|e| EndedEntry {
        attempt: e.attempt,
        claimed: e.claimed,
        ended: e.ended.unwrap_or(0),
        outcome: code(e.outcome),
        holder: e.holder.as_deref().map_or(&[][..], str::as_bytes),
        error: e.error.as_deref(),
    }));
    Record::History {
        slot,
        gen: view.slot.gen,
        attempts: &body,
    }
    .encode(out);
}

impl View {
    /// The job's attempts as the operator sees them: the ended ones, and
    /// the running one (leased jobs).
    pub(crate) fn attempts(&self) -> (Vec<StoredAttempt>, Option<StoredAttempt>) {
        attempts_of(self)
    }
}

fn attempts_of(view: &View) -> (Vec<StoredAttempt>, Option<StoredAttempt>) {
    let ended = view
        .history
        .as_deref()
        .unwrap_or_default()
        .iter()
        .map(|e| StoredAttempt {
            number: e.attempt,
            claimed_ms: e.claimed,
            holder: e.holder.as_deref().map(str::to_owned),
            outcome: e.outcome,
            ended_ms: e.ended,
            error: e.error.as_deref().map(<[u8]>::to_vec),
        })
        .collect();
    let running = view.lease.as_ref().map(|lease| StoredAttempt {
        number: view.slot.attempts,
        claimed_ms: lease.claimed,
        holder: lease.holder.as_deref().map(str::to_owned),
        outcome: Outcome::Running,
        ended_ms: None,
        error: None,
    });
    (ended, running)
}
