//! Replay and compaction: the log's records applied to an index on open,
//! and a live job's records rebuilt for a compacted log.

use super::super::format::Why;
use super::history::{history_record, outcome_of_wait};
use super::{lateness_bucket, Index, Lease, Record, Slot, State, View, ORPHAN};
use crate::data::history::Outcome;

impl Index {
    /// Starts a replay: records name slots in any order, so the free list
    /// waits for [`end_replay`](Index::end_replay).
    pub(crate) fn begin_replay(&mut self) {
        self.replaying = true;
    }

    /// Ends a replay: every slot not holding a job is free.
    pub(crate) fn end_replay(&mut self) {
        self.replaying = false;
        self.free = (0..self.slots.len() as u32)
            .rev()
            .filter(|&s| self.slots[s as usize].state == State::Free)
            .collect();
        self.check_recurrences();
    }

    /// Moves every live slot's data offset with `map` (compaction).
    pub(crate) fn move_data(&mut self, mut map: impl FnMut(u32, &Slot) -> u64) {
        for (slot, s) in self.slots.iter_mut().enumerate() {
            if s.state != State::Free {
                s.data = map(slot as u32, s);
            }
        }
    }

    /// Applies one record of the log (replay). `data`: where the record's
    /// id starts in the file, for a `New` record.
    pub(crate) fn apply(&mut self, record: &Record<'_>, data: u64) -> Result<(), String> {
        let check = |index: &Index, slot: u32, gen: u32| -> Result<View, String> {
            let view = index.view(slot);
            if view.slot.state == State::Free || view.slot.gen != gen {
                return Err(format!(
                    "a record names job slot {slot} generation {gen}, which holds no such job"
                ));
            }
            Ok(view)
        };
        match *record {
            Record::New {
                slot,
                gen,
                due,
                id,
                payload,
                created,
            } => {
                if self.view(slot).slot.state != State::Free {
                    return Err(format!("a new job in slot {slot}, which is taken"));
                }
                let view = self.new_waiting(id, data, created, due, gen, payload.len());
                self.put(slot, view);
            }
            Record::Wait {
                slot,
                gen,
                due,
                attempts,
                at,
                why,
            } => {
                let mut view = check(self, slot, gen)?;
                // A version 1 record does not say what ended the attempt,
                // nor when: a release counted the attempt off.
                let why = match why {
                    Why::Other if view.lease.is_some() && attempts < view.slot.attempts => {
                        Why::Released
                    }
                    Why::Other if view.lease.is_some() => Why::Retried,
                    why => why,
                };
                if let Some(outcome) = outcome_of_wait(why) {
                    let error = match why {
                        Why::Failed => view.error.clone(),
                        _ => None,
                    };
                    let error = error.as_deref().map(str::as_bytes);
                    let at = (at != 0).then_some(at);
                    self.end_attempt(None, &mut view, outcome, at, error);
                }
                view.slot.state = State::Waiting;
                view.slot.due = due;
                view.slot.attempts = attempts;
                view.lease = None;
                view.died_at = None;
                self.put(slot, view);
            }
            Record::Lease {
                slot,
                gen,
                attempts,
                at,
                redelivery,
                holder,
            } => {
                let mut view = check(self, slot, gen)?;
                if !redelivery {
                    self.lateness[lateness_bucket(at.saturating_sub(view.slot.due))] += 1;
                }
                // Claimed again while leased: that lease ran out.
                self.end_attempt(None, &mut view, Outcome::LeaseExpired, Some(at), None);
                view.slot.state = State::Leased;
                view.slot.attempts = attempts;
                // A lease found on open belonged to a process that is gone:
                // it ran out (see the module docs).
                view.lease = Some(Lease {
                    token: ORPHAN,
                    expiry: at,
                    claimed: at,
                    holder: self.holder_of(holder),
                });
                view.died_at = None;
                self.put(slot, view);
            }
            Record::Dead {
                slot,
                gen,
                at,
                attempts,
            } => {
                let mut view = check(self, slot, gen)?;
                let error = view.error.clone();
                let error = error.as_deref().map(str::as_bytes);
                self.end_attempt(None, &mut view, Outcome::Buried, Some(at), error);
                view.slot.state = State::Dead;
                view.slot.attempts = attempts;
                view.lease = None;
                view.died_at = Some(at);
                self.put(slot, view);
            }
            Record::Error { slot, gen, reason } => {
                let mut view = check(self, slot, gen)?;
                view.error = (!reason.is_empty()).then(|| {
                    String::from_utf8_lossy(reason)
                        .into_owned()
                        .into_boxed_str()
                });
                self.put(slot, view);
            }
            Record::Remove { slot, gen } => {
                let view = check(self, slot, gen)?;
                self.put_free(slot, view);
            }
            Record::Acked { slot, gen, at } => {
                let view = check(self, slot, gen)?;
                self.put_free(slot, view);
                self.tally(None, at, false);
            }
            Record::Lateness { counts } => {
                for (mine, theirs) in self.lateness.iter_mut().zip(counts) {
                    *mine += theirs;
                }
            }
            Record::RecurDefine { .. } | Record::RecurState { .. } | Record::RecurRemove { .. } => {
                self.apply_recurrence(record)?;
            }
            Record::History {
                slot,
                gen,
                attempts,
            } => {
                let mut view = check(self, slot, gen)?;
                view.history = Some(self.history_of_record(attempts)?);
                self.put(slot, view);
            }
            Record::Throughput { minutes } => self.add_throughput(minutes)?,
        }
        Ok(())
    }

    /// Empties a slot (replay).
    fn put_free(&mut self, slot: u32, mut view: View) {
        view.slot.state = State::Free;
        view.lease = None;
        view.died_at = None;
        view.error = None;
        view.history = None;
        self.put(slot, view);
    }

    /// The records that rebuild `view` of `slot` (compaction), its id and
    /// payload given; the `New` record's id lands at `data`.
    pub(crate) fn rebuild(slot: u32, view: &View, id: &[u8], payload: &[u8], out: &mut Vec<u8>) {
        let s = &view.slot;
        Record::New {
            slot,
            gen: s.gen,
            due: s.due,
            id,
            payload,
            created: s.created,
        }
        .encode(out);
        if let Some(error) = &view.error {
            Record::Error {
                slot,
                gen: s.gen,
                reason: error.as_bytes(),
            }
            .encode(out);
        }
        history_record(slot, view, out);
        match s.state {
            State::Free => {}
            State::Waiting => {
                if s.attempts > 0 {
                    Record::Wait {
                        slot,
                        gen: s.gen,
                        due: s.due,
                        attempts: s.attempts,
                        at: 0,
                        why: Why::Other,
                    }
                    .encode(out);
                }
            }
            // Claimed at its claim time (a reopen finds the lease run out
            // then, as it would without compaction), not counted again in
            // the lateness histogram.
            State::Leased => Record::Lease {
                slot,
                gen: s.gen,
                attempts: s.attempts,
                at: view.lease.as_ref().map_or(0, |l| l.claimed),
                redelivery: true,
                holder: view
                    .lease
                    .as_ref()
                    .and_then(|l| l.holder.as_deref())
                    .map_or(&[][..], str::as_bytes),
            }
            .encode(out),
            State::Dead => Record::Dead {
                slot,
                gen: s.gen,
                at: view.died_at.unwrap_or(0),
                attempts: s.attempts,
            }
            .encode(out),
        }
    }

    /// The id and payload extent of a live slot: (data offset, id length,
    /// payload length).
    pub(crate) fn extent(&self, slot: u32, gen: u32) -> Option<(u64, usize, usize)> {
        let s = self.slot(slot, gen)?;
        Some((s.data, usize::from(s.id_len), s.payload_len as usize))
    }
}
