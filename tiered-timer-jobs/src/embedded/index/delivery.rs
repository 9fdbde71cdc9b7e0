//! The calls of a delivery's life: claims, and what the worker holding a
//! job does with it (ack, retry, fail, extend, release), fenced by its
//! lease's token, and the moves they share (back to waiting, to the dead
//! letters).

use std::io;
use std::sync::Arc;

use super::super::format::Why;
use super::history::outcome_of_wait;
use super::{
    lateness_bucket, Batch, Claim, GaveUp, Index, Lease, Now, ReadAt, Record, State, Taken, Undo,
};
use crate::data::history::Outcome;

impl Index {
    /// Makes a job wait until `due` with `attempts` (retry, release,
    /// promote, requeue) at `now`, ending its attempt as `why` says if it
    /// was leased; `error`: its new last error, if it changes.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn wait(
        &mut self,
        batch: &mut Batch,
        slot: u32,
        now: u64,
        due: u64,
        attempts: u32,
        why: Why,
        error: Option<Option<Box<str>>>,
    ) {
        let mut view = self.view(slot);
        if let Some(error) = error {
            Record::Error {
                slot,
                gen: view.slot.gen,
                reason: error.as_deref().unwrap_or("").as_bytes(),
            }
            .encode(&mut batch.frame);
            view.error = error;
        }
        Record::Wait {
            slot,
            gen: view.slot.gen,
            due,
            attempts,
            at: now,
            why,
        }
        .encode(&mut batch.frame);
        if let Some(outcome) = outcome_of_wait(why) {
            let error = match why {
                Why::Failed => view.error.clone(),
                _ => None,
            };
            let error = error.as_deref().map(str::as_bytes);
            self.end_attempt(Some(batch), &mut view, outcome, Some(now), error);
        }
        view.slot.state = State::Waiting;
        view.slot.due = due;
        view.slot.attempts = attempts;
        view.lease = None;
        view.died_at = None;
        self.change(batch, slot, view);
    }

    /// Moves a job to the dead letters (`bury.lua`), with `reason` as its
    /// last error if given.
    fn bury(
        &mut self,
        batch: &mut Batch,
        slot: u32,
        now: u64,
        attempts: u32,
        reason: Option<String>,
    ) {
        let mut view = self.view(slot);
        if let Some(reason) = reason {
            Record::Error {
                slot,
                gen: view.slot.gen,
                reason: reason.as_bytes(),
            }
            .encode(&mut batch.frame);
            view.error = Some(reason.into_boxed_str());
        }
        Record::Dead {
            slot,
            gen: view.slot.gen,
            at: now,
            attempts,
        }
        .encode(&mut batch.frame);
        let error = view.error.clone();
        let error = error.as_deref().map(str::as_bytes);
        self.end_attempt(Some(batch), &mut view, Outcome::Buried, Some(now), error);
        view.slot.state = State::Dead;
        view.slot.attempts = attempts;
        view.lease = None;
        view.died_at = Some(now);
        self.change(batch, slot, view);
    }

    /// Why a job out of attempts died: `what`, and its last error if any.
    fn out_of_attempts(&self, slot: u32, what: String) -> String {
        match self.errors.get(&slot) {
            Some(last) => format!("{what} (last error: {last})"),
            None => what,
        }
    }

    /// Claims up to `n` jobs (`claim.lua`): leases that ran out first (a
    /// job on its last attempt goes to the dead letters instead), then the
    /// earliest due; each leased for `lease` ms with a fresh token. A
    /// recurrence's waiting occurrence moves its chain on as it is taken
    /// (`recur.rs`), in the same batch; one its policy skips is removed
    /// instead.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn claim(
        &mut self,
        batch: &mut Batch,
        log: &dyn ReadAt,
        now: u64,
        n: usize,
        lease: u64,
        max_attempts: u32,
        holder: &Arc<str>,
    ) -> io::Result<Claim> {
        self.advance(now);
        let mut claim = Claim {
            now,
            ..Claim::default()
        };
        while claim.jobs.len() < n {
            let Some(&(_, slot)) = self.expired.first() else {
                break;
            };
            let s = self.slots[slot as usize];
            if s.attempts >= max_attempts {
                let why = format!("lease expired after {} attempt(s)", s.attempts);
                let reason = self.out_of_attempts(slot, why);
                self.bury(batch, slot, now, s.attempts, Some(reason));
                claim.buried.push((slot, s.gen));
            } else {
                let taken = self.lease(batch, slot, now, lease, true, holder);
                claim.jobs.push(taken);
            }
        }
        while claim.jobs.len() < n {
            let Some(&(_, slot)) = self.ready.first() else {
                break;
            };
            if !self.occurrence_claimed(batch, log, slot, now)? {
                continue; // skipped (and removed): its next one is scheduled
            }
            let taken = self.lease(batch, slot, now, lease, false, holder);
            claim.jobs.push(taken);
        }
        // A next occurrence due already (a catch-up) is claimable at once.
        self.advance(now);
        claim.left = self.claimable();
        Ok(claim)
    }

    /// Leases one job to a new token for `holder` (a lease that ran out
    /// ends its attempt).
    fn lease(
        &mut self,
        batch: &mut Batch,
        slot: u32,
        now: u64,
        lease: u64,
        redelivery: bool,
        holder: &Arc<str>,
    ) -> Taken {
        let mut view = self.view(slot);
        let attempt = view.slot.attempts + 1;
        Record::Lease {
            slot,
            gen: view.slot.gen,
            attempts: attempt,
            at: now,
            redelivery,
            holder: holder.as_bytes(),
        }
        .encode(&mut batch.frame);
        self.end_attempt(
            Some(batch),
            &mut view,
            Outcome::LeaseExpired,
            Some(now),
            None,
        );
        if !redelivery {
            let bucket = lateness_bucket(now.saturating_sub(view.slot.due));
            self.lateness[bucket] += 1;
            batch.undo.push(Undo::Lateness(bucket));
        }
        let token = self.next_token;
        self.next_token += 1;
        view.slot.state = State::Leased;
        view.slot.attempts = attempt;
        view.lease = Some(Lease {
            token,
            expiry: now + lease,
            claimed: now,
            holder: Some(Arc::clone(holder)),
        });
        let (gen, deadline) = (view.slot.gen, view.slot.due);
        self.change(batch, slot, view);
        Taken {
            slot,
            gen,
            token,
            attempt,
            deadline,
            redelivery,
        }
    }

    /// The slot holding the lease `token`, if it is `id`'s (by hash: the
    /// token alone names one lease).
    fn held(&self, id: &[u8], token: u64) -> Option<u32> {
        let slot = *self.tokens.get(&token)?;
        (self.slots[slot as usize].hash == self.hash(id)).then_some(slot)
    }

    /// The slot holding a live lease `token` by `now` (`fence.lua`).
    fn fenced(&self, id: &[u8], token: u64, now: u64) -> Option<u32> {
        let slot = self.held(id, token)?;
        (self.leases[&slot].expiry > now).then_some(slot)
    }

    /// Acks a job (`ack.lua`): removes it if `token` still holds it, even
    /// if the lease ran out by now (the caller checks that itself), and
    /// counts it processed in `now`'s minute.
    pub(crate) fn ack(&mut self, batch: &mut Batch, now: u64, id: &[u8], token: u64) -> bool {
        let Some(slot) = self.held(id, token) else {
            return false;
        };
        let gen = self.slots[slot as usize].gen;
        Record::Acked { slot, gen, at: now }.encode(&mut batch.frame);
        self.free_slot(batch, slot);
        self.tally(Some(batch), now, false);
        true
    }

    /// Gives a held job back after `delay` ms, or buries it on its last
    /// attempt (`retry.lua`); a lease that ran out is [`GaveUp::Lost`].
    pub(crate) fn retry(
        &mut self,
        batch: &mut Batch,
        now: Now,
        id: &[u8],
        token: u64,
        delay: u64,
        max_attempts: u32,
    ) -> GaveUp {
        let Some(slot) = self.fenced(id, token, now.floor) else {
            return GaveUp::Lost;
        };
        let attempts = self.slots[slot as usize].attempts;
        if attempts >= max_attempts {
            let what = format!("retried on its last attempt ({attempts} of {max_attempts})");
            let reason = self.out_of_attempts(slot, what);
            self.bury(batch, slot, now.floor, attempts, Some(reason));
            return GaveUp::Buried;
        }
        self.wait(
            batch,
            slot,
            now.floor,
            now.ceil + delay,
            attempts,
            Why::Retried,
            None,
        );
        GaveUp::Rescheduled
    }

    /// A held job failed with `reason` (`fail.lua`): buried if `bury` or
    /// out of attempts, else rescheduled after `delay` ms.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn fail(
        &mut self,
        batch: &mut Batch,
        now: Now,
        id: &[u8],
        token: u64,
        bury: bool,
        delay: u64,
        max_attempts: u32,
        reason: &str,
    ) -> GaveUp {
        let Some(slot) = self.fenced(id, token, now.floor) else {
            return GaveUp::Lost;
        };
        let attempts = self.slots[slot as usize].attempts;
        if bury || attempts >= max_attempts {
            self.bury(batch, slot, now.floor, attempts, Some(reason.to_owned()));
            return GaveUp::Buried;
        }
        let reason = Some(Some(reason.into()));
        self.wait(
            batch,
            slot,
            now.floor,
            now.ceil + delay,
            attempts,
            Why::Failed,
            reason,
        );
        GaveUp::Rescheduled
    }

    /// Renews a lease to `lease` ms after now (`extend.lua`): the new
    /// expiry, or `None` if the lease was lost. Nothing is logged: leases
    /// do not outlive the process.
    pub(crate) fn extend(&mut self, now: u64, id: &[u8], token: u64, lease: u64) -> Option<u64> {
        let slot = self.fenced(id, token, now)?;
        let expiry = now + lease;
        let mut view = self.view(slot);
        if let Some(lease) = &mut view.lease {
            lease.expiry = expiry;
        }
        self.put(slot, view);
        Some(expiry)
    }

    /// Hands a held job back, due at its deadline or now, whichever is
    /// earlier, its attempt not counted (`release.lua`).
    pub(crate) fn release(&mut self, batch: &mut Batch, now: u64, id: &[u8], token: u64) -> bool {
        let Some(slot) = self.fenced(id, token, now) else {
            return false;
        };
        let s = self.slots[slot as usize];
        self.wait(
            batch,
            slot,
            now,
            s.due.min(now),
            s.attempts.saturating_sub(1),
            Why::Released,
            None,
        );
        true
    }
}
