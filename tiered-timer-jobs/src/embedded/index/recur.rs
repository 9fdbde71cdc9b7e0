//! Recurrences in the index: each one's definition and where its chain
//! is, and the calls that register, replace, pause, resume and remove
//! them. The chain moves in [`Index::occurrence_claimed`], which a claim
//! calls before it leases a recurrence's waiting occurrence, in the same
//! batch: the next occurrence's `New` record and the recurrence's
//! `RecurState` go in the claim's frame (`format.rs`).
//!
//! Ground rules:
//!
//! * One occurrence waits per recurrence (none while paused): its slot is
//!   in `pending_slots`, so a claim knows it without reading ids.
//! * Every change goes through [`Index::set_recurring`], with the old value
//!   on the batch's undo list, so a frame that fails takes it back.
//! * The decision after a claim is [`Recurrence::advance`], the one every
//!   backend makes; times are the store clock's ms.

use std::io;

use super::recurring::{Listed, Pending, Recurring};
use super::{Batch, Index, Now, ReadAt, Record, State, Undo};
use crate::data::recurrence::{occurrence_id, LastRun, Recurrence};

impl Index {
    /// Sets (or, with `None`, removes) a recurrence, keeping the old value
    /// on the undo list.
    fn change_recurring(&mut self, batch: &mut Batch, name: &str, new: Option<Recurring>) {
        let old = self.recurring.get(name).cloned();
        batch.undo.push(Undo::Recurring(name.into(), old));
        self.set_recurring(name, new);
    }

    /// Sets a recurrence and its waiting slot: the one place both change.
    pub(super) fn set_recurring(&mut self, name: &str, new: Option<Recurring>) {
        if let Some(old) = self.recurring.remove(name) {
            if let Some(p) = old.pending {
                self.pending_slots.remove(&p.slot);
            }
        }
        if let Some(new) = new {
            if let Some(p) = new.pending {
                self.pending_slots.insert(p.slot, name.into());
            }
            self.recurring.insert(name.into(), new);
        }
    }

    /// Whether `slot` is a recurrence's waiting occurrence (which only
    /// the recurrence's own calls remove: `cancel` refuses it).
    pub(crate) fn is_pending_occurrence(&self, slot: u32) -> bool {
        self.pending_slots.contains_key(&slot)
    }

    /// Registers or replaces a recurrence (see `Queue::recur`): `true` if
    /// anything changed. The same definition again changes nothing,
    /// unless its chain lost its waiting occurrence (then it is
    /// scheduled again).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn recur(
        &mut self,
        batch: &mut Batch,
        log: &dyn ReadAt,
        now: Now,
        name: &str,
        recurrence: &Recurrence,
        payload: &[u8],
    ) -> io::Result<bool> {
        let spec = recurrence.spec();
        let zone = recurrence.time_zone_name();
        let missed = recurrence.missed_policy().to_string();
        let old = self.recurring.get(name).cloned();
        if let Some(old) = &old {
            let same = *old.spec == *spec
                && &*old.zone == zone
                && *old.missed == *missed
                && *old.payload == *payload;
            if same {
                if old.paused || self.pending_alive(old) {
                    return Ok(false);
                }
                let mut repaired = old.clone();
                self.schedule_next(batch, log, name, &mut repaired, now.floor)?;
                self.write_state(batch, name, &repaired);
                self.change_recurring(batch, name, Some(repaired));
                return Ok(true);
            }
        }
        if let Some(old) = &old {
            self.cancel_pending(batch, old);
        }
        let mut new = Recurring {
            version: old.as_ref().map_or(1, |o| o.version.wrapping_add(1)),
            spec: spec.into(),
            zone: zone.into(),
            missed: missed.into(),
            parsed: Some(recurrence.clone()),
            payload: payload.into(),
            // A new definition keeps an operator's pause.
            paused: old.as_ref().is_some_and(|o| o.paused),
            pending: None,
            last: old.as_ref().and_then(|o| o.last),
            run: 0,
        };
        self.write_define(batch, name, &new);
        if !new.paused {
            self.schedule_next(batch, log, name, &mut new, now.floor)?;
        }
        self.write_state(batch, name, &new);
        self.change_recurring(batch, name, Some(new));
        Ok(true)
    }

    /// Removes a recurrence and its waiting occurrence: `true` if there
    /// was one.
    pub(crate) fn unrecur(&mut self, batch: &mut Batch, name: &str) -> bool {
        let Some(old) = self.recurring.get(name).cloned() else {
            return false;
        };
        self.cancel_pending(batch, &old);
        Record::RecurRemove {
            name: name.as_bytes(),
        }
        .encode(&mut batch.frame);
        self.change_recurring(batch, name, None);
        true
    }

    /// Pauses or resumes a recurrence: `true` if there is one.
    pub(crate) fn pause_recurrence(
        &mut self,
        batch: &mut Batch,
        log: &dyn ReadAt,
        now: Now,
        name: &str,
        paused: bool,
    ) -> io::Result<bool> {
        let Some(old) = self.recurring.get(name).cloned() else {
            return Ok(false);
        };
        if old.paused == paused {
            return Ok(true);
        }
        let mut new = old.clone();
        new.paused = paused;
        new.run = 0;
        if paused {
            self.cancel_pending(batch, &old);
            new.pending = None;
        }
        self.write_define(batch, name, &new);
        if !paused {
            self.schedule_next(batch, log, name, &mut new, now.floor)?;
        }
        self.write_state(batch, name, &new);
        self.change_recurring(batch, name, Some(new));
        Ok(true)
    }

    /// A claim is about to take `slot` at `now`: if it is a recurrence's
    /// waiting occurrence, decides what follows ([`Recurrence::advance`])
    /// and schedules the next occurrence, in `batch`. Returns whether the
    /// claim delivers the job (`false`: it was skipped, and is gone).
    pub(crate) fn occurrence_claimed(
        &mut self,
        batch: &mut Batch,
        log: &dyn ReadAt,
        slot: u32,
        now: u64,
    ) -> io::Result<bool> {
        let Some(name) = self.pending_slots.get(&slot).cloned() else {
            return Ok(true);
        };
        let mut r = self.recurring[&name].clone();
        let at = r
            .pending
            .expect("a pending slot has a pending occurrence")
            .at;
        let (deliver, next, run) = match &r.parsed {
            Some(recurrence) => {
                let advance = recurrence.advance(at, now, r.run);
                (advance.deliver, advance.next, advance.run)
            }
            None => (true, None, 0),
        };
        r.pending = None;
        r.run = run;
        if deliver {
            r.last = Some(at);
        } else {
            self.remove(batch, slot);
        }
        if let Some(next) = next {
            self.schedule_at(batch, log, &name, &mut r, now, next)?;
        }
        self.write_state(batch, &name, &r);
        self.change_recurring(batch, &name, Some(r));
        Ok(deliver)
    }

    /// Every recurrence, by name, with its last occurrence's fate.
    pub(crate) fn list_recurrences(
        &self,
        batch: &Batch,
        log: &dyn ReadAt,
    ) -> io::Result<Vec<Listed>> {
        let mut all = Vec::with_capacity(self.recurring.len());
        for (name, r) in &self.recurring {
            let mut listed = Listed {
                name: name.to_string(),
                recurring: r.clone(),
                last_run: None,
                last_error: None,
            };
            if let Some(last) = r.last {
                let id = occurrence_id(name, last);
                listed.last_run = Some(LastRun::Done);
                if let Some(slot) = self.find(id.as_bytes(), batch, log)? {
                    let view = self.view(slot);
                    listed.last_run = match view.slot.state {
                        State::Leased => Some(LastRun::Running),
                        State::Waiting => Some(LastRun::Retrying),
                        State::Dead => Some(LastRun::Dead),
                        State::Free => Some(LastRun::Done),
                    };
                    listed.last_error = view.error.map(String::from);
                }
            }
            all.push(listed);
        }
        Ok(all)
    }

    /// Whether a recurrence's waiting occurrence is still there, waiting.
    fn pending_alive(&self, r: &Recurring) -> bool {
        r.pending.is_some_and(|p| {
            self.slot(p.slot, p.gen)
                .is_some_and(|s| s.state == State::Waiting)
        })
    }

    /// Cancels a recurrence's waiting occurrence, if it is still waiting.
    fn cancel_pending(&mut self, batch: &mut Batch, r: &Recurring) {
        if self.pending_alive(r) {
            let p = r.pending.expect("alive");
            self.remove(batch, p.slot);
        }
    }

    /// Schedules the first occurrence after `now` (none if there is none).
    fn schedule_next(
        &mut self,
        batch: &mut Batch,
        log: &dyn ReadAt,
        name: &str,
        r: &mut Recurring,
        now: u64,
    ) -> io::Result<()> {
        r.pending = None;
        let next = r.parsed.as_ref().and_then(|p| p.next_after_ms(now as i64));
        match next {
            Some(at) => self.schedule_at(batch, log, name, r, now, at),
            None => Ok(()),
        }
    }

    /// Makes the occurrence at `at` the one `r` waits for: a new job, or
    /// the waiting job of that id if there is one. (An occurrence of that
    /// id already leased or dead, left by an earlier definition, is not
    /// disturbed: a dead one is replaced, a leased one waited for no
    /// more, the next after it taken.)
    fn schedule_at(
        &mut self,
        batch: &mut Batch,
        log: &dyn ReadAt,
        name: &str,
        r: &mut Recurring,
        now: u64,
        mut at: u64,
    ) -> io::Result<()> {
        loop {
            let id = occurrence_id(name, at);
            match self.find(id.as_bytes(), batch, log)? {
                None => {}
                Some(slot) => match self.slots[slot as usize].state {
                    State::Dead => self.remove(batch, slot),
                    State::Waiting => {
                        let gen = self.slots[slot as usize].gen;
                        r.pending = Some(Pending { at, slot, gen });
                        return Ok(());
                    }
                    _ => {
                        match r.parsed.as_ref().and_then(|p| p.next_after_ms(at as i64)) {
                            Some(later) => at = later,
                            None => return Ok(()),
                        }
                        continue;
                    }
                },
            }
            let slot = self.add(batch, id.as_bytes(), now, at, &r.payload);
            let gen = self.slots[slot as usize].gen;
            r.pending = Some(Pending { at, slot, gen });
            return Ok(());
        }
    }

    fn write_define(&self, batch: &mut Batch, name: &str, r: &Recurring) {
        Record::RecurDefine {
            name: name.as_bytes(),
            version: r.version,
            paused: r.paused,
            spec: r.spec.as_bytes(),
            zone: r.zone.as_bytes(),
            missed: r.missed.as_bytes(),
            payload: &r.payload,
        }
        .encode(&mut batch.frame);
    }

    fn write_state(&self, batch: &mut Batch, name: &str, r: &Recurring) {
        state_record(name, r).encode(&mut batch.frame);
    }

    /// Applies a recurrence record (replay).
    pub(super) fn apply_recurrence(&mut self, record: &Record<'_>) -> Result<(), String> {
        let text = |bytes: &[u8], what: &str| {
            std::str::from_utf8(bytes)
                .map(Box::<str>::from)
                .map_err(|_| format!("a recurrence record's {what} is not UTF-8"))
        };
        match *record {
            Record::RecurDefine {
                name,
                version,
                paused,
                spec,
                zone,
                missed,
                payload,
            } => {
                let name = text(name, "name")?;
                let old = self.recurring.get(&*name).cloned();
                let (spec, zone, missed) = (
                    text(spec, "spec")?,
                    text(zone, "zone")?,
                    text(missed, "policy")?,
                );
                let parsed = Recurrence::parse_stored(&spec, &zone, &missed).ok();
                let new = Recurring {
                    version,
                    spec,
                    zone,
                    missed,
                    parsed,
                    payload: payload.into(),
                    paused,
                    pending: old.as_ref().and_then(|o| o.pending),
                    last: old.as_ref().and_then(|o| o.last),
                    run: old.as_ref().map_or(0, |o| o.run),
                };
                self.set_recurring(&name, Some(new));
            }
            Record::RecurState {
                name,
                pending,
                slot,
                gen,
                last,
                run,
            } => {
                let name = text(name, "name")?;
                let Some(mut r) = self.recurring.get(&*name).cloned() else {
                    return Err(format!(
                        "a state of recurrence {name:?}, which is not defined"
                    ));
                };
                r.pending = (pending != 0).then_some(Pending {
                    at: pending,
                    slot,
                    gen,
                });
                r.last = (last != 0).then_some(last);
                r.run = run;
                self.set_recurring(&name, Some(r));
            }
            Record::RecurRemove { name } => {
                let name = text(name, "name")?;
                self.set_recurring(&name, None);
            }
            _ => unreachable!("only recurrence records come here"),
        }
        Ok(())
    }

    /// At the end of a replay: a recurrence whose waiting occurrence is not
    /// there (a log cut short by a repair) waits for none; `Queue::recur`
    /// schedules one again.
    pub(super) fn check_recurrences(&mut self) {
        let dangling: Vec<Box<str>> = self
            .recurring
            .iter()
            .filter(|(_, r)| r.pending.is_some() && !self.pending_alive(r))
            .map(|(name, _)| name.clone())
            .collect();
        for name in dangling {
            let mut r = self.recurring[&name].clone();
            r.pending = None;
            self.set_recurring(&name, Some(r));
        }
    }

    /// The records that rebuild every recurrence as it is durably
    /// (compaction): `durable` holds the values the changes not yet
    /// written took back.
    pub(crate) fn rebuild_recurrences(
        &self,
        durable: &std::collections::HashMap<Box<str>, Option<Recurring>>,
        out: &mut Vec<u8>,
    ) {
        let mut names: Vec<&Box<str>> = self.recurring.keys().chain(durable.keys()).collect();
        names.sort();
        names.dedup();
        for name in names {
            let r = match durable.get(name) {
                Some(value) => value.as_ref(),
                None => self.recurring.get(name),
            };
            let Some(r) = r else { continue };
            Record::RecurDefine {
                name: name.as_bytes(),
                version: r.version,
                paused: r.paused,
                spec: r.spec.as_bytes(),
                zone: r.zone.as_bytes(),
                missed: r.missed.as_bytes(),
                payload: &r.payload,
            }
            .encode(out);
            state_record(name, r).encode(out);
        }
    }
}

/// A recurrence's `RecurState` record.
fn state_record<'a>(name: &'a str, r: &Recurring) -> Record<'a> {
    let (pending, slot, gen) = r.pending.map_or((0, 0, 0), |p| (p.at, p.slot, p.gen));
    Record::RecurState {
        name: name.as_bytes(),
        pending,
        slot,
        gen,
        last: r.last.unwrap_or(0),
        run: r.run,
    }
}
