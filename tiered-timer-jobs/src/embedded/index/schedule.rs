//! The producer's calls: scheduling (one job or many, idempotent by id)
//! and cancelling, and how a job enters and leaves the index.

use std::io;

use super::{Batch, Due, Index, Now, ReadAt, Record, Slot, State, View, NEW_ID_AT, NONE};

impl Index {
    /// The slot of the waiting, leased or dead job `id`. Ids are compared
    /// in full: a hash that matches is confirmed by reading the id (from
    /// `batch` if it is not written yet, else through `log`).
    pub(crate) fn find(
        &self,
        id: &[u8],
        batch: &Batch,
        log: &dyn ReadAt,
    ) -> io::Result<Option<u32>> {
        let hash = self.hash(id);
        for &slot in self.by_id.iter_hash(hash) {
            let s = &self.slots[slot as usize];
            if s.hash != hash || usize::from(s.id_len) != id.len() {
                continue;
            }
            let same = match batch.bytes_at(s.data, id.len()) {
                Some(bytes) => bytes == id,
                None => log.read_at(s.data, id.len())? == id,
            };
            if same {
                return Ok(Some(slot));
            }
        }
        Ok(None)
    }

    /// Schedules a job unless its id is waiting or leased
    /// (`schedule.lua`): `(true, due)` if written, `(false, due or lease
    /// expiry)` if the id was there. A dead letter of that id is replaced.
    pub(crate) fn schedule(
        &mut self,
        batch: &mut Batch,
        log: &dyn ReadAt,
        now: Now,
        id: &[u8],
        due: Due,
        payload: &[u8],
    ) -> io::Result<(bool, u64)> {
        if let Some(slot) = self.find(id, batch, log)? {
            let view = self.view(slot);
            match view.slot.state {
                State::Waiting => return Ok((false, view.slot.due)),
                State::Leased => {
                    let expiry = view.lease.map_or(0, |l| l.expiry);
                    return Ok((false, expiry));
                }
                State::Dead => self.remove(batch, slot),
                State::Free => unreachable!("the id table holds live jobs only"),
            }
        }
        let due = match due {
            Due::After(ms) => now.ceil + ms,
            Due::At(ms) => ms,
        };
        self.add(batch, id, now.floor, due, payload);
        Ok((true, due))
    }

    /// Schedules a chunk (`schedule_many.lua`): each job as
    /// [`schedule`](Index::schedule), delays counted from `base` (or
    /// `now.ceil`); an id already there, or earlier in the chunk, is left
    /// alone. Returns how many were new and the base used.
    pub(crate) fn schedule_many(
        &mut self,
        batch: &mut Batch,
        log: &dyn ReadAt,
        now: Now,
        delays: bool,
        base: Option<u64>,
        jobs: &[(&[u8], u64, &[u8])],
    ) -> io::Result<(usize, u64)> {
        let base = base.unwrap_or(now.ceil);
        let mut written = 0;
        for &(id, value, payload) in jobs {
            let due = if delays {
                Due::At(base + value)
            } else {
                Due::At(value)
            };
            if self.schedule(batch, log, now, id, due, payload)?.0 {
                written += 1;
            }
        }
        Ok((written, base))
    }

    /// The view of a job just scheduled (or replayed from its `New`
    /// record): waiting, never delivered, its id and payload at `data` in
    /// the log, created at `created` (0: not recorded).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new_waiting(
        &self,
        id: &[u8],
        data: u64,
        created: u64,
        due: u64,
        gen: u32,
        payload_len: usize,
    ) -> View {
        View {
            slot: Slot {
                hash: self.hash(id),
                data,
                due,
                created,
                gen,
                attempts: 0,
                payload_len: payload_len as u32,
                timer: NONE,
                id_len: id.len() as u16,
                state: State::Waiting,
            },
            lease: None,
            died_at: None,
            error: None,
            history: None,
        }
    }

    /// A new waiting job, in a free slot, created at `now`; returns the
    /// slot.
    pub(super) fn add(
        &mut self,
        batch: &mut Batch,
        id: &[u8],
        now: u64,
        due: u64,
        payload: &[u8],
    ) -> u32 {
        let slot = match self.free.last() {
            Some(&slot) => slot,
            None => self.slots.len() as u32,
        };
        let gen = self
            .slots
            .get(slot as usize)
            .map_or(0, |s| s.gen)
            .wrapping_add(1);
        let data = batch.next_offset() + NEW_ID_AT as u64;
        Record::New {
            slot,
            gen,
            due,
            id,
            payload,
            created: now,
        }
        .encode(&mut batch.frame);
        let view = self.new_waiting(id, data, now, due, gen, payload.len());
        self.change(batch, slot, view);
        slot
    }

    /// Removes a job for good (cancel, purge; an ack is
    /// [`ack`](Index::ack)).
    pub(super) fn remove(&mut self, batch: &mut Batch, slot: u32) {
        Record::Remove {
            slot,
            gen: self.slots[slot as usize].gen,
        }
        .encode(&mut batch.frame);
        self.free_slot(batch, slot);
    }

    /// Empties a job's slot: the job is gone, its history with it.
    pub(super) fn free_slot(&mut self, batch: &mut Batch, slot: u32) {
        let mut view = self.view(slot);
        view.slot.state = State::Free;
        view.lease = None;
        view.died_at = None;
        view.error = None;
        view.history = None;
        self.change(batch, slot, view);
    }

    /// Cancels a waiting job (`cancel.lua`): `true` if it was waiting.
    /// A recurrence's waiting occurrence is not cancelled (its chain would
    /// stop): pause or remove the recurrence instead.
    pub(crate) fn cancel(
        &mut self,
        batch: &mut Batch,
        log: &dyn ReadAt,
        id: &[u8],
    ) -> io::Result<bool> {
        match self.find(id, batch, log)? {
            Some(slot) if self.is_pending_occurrence(slot) => Ok(false),
            _ => self.remove_if(batch, log, id, State::Waiting),
        }
    }

    /// Removes job `id` for good if it is in `state`: `true` if it was.
    pub(super) fn remove_if(
        &mut self,
        batch: &mut Batch,
        log: &dyn ReadAt,
        id: &[u8],
        state: State,
    ) -> io::Result<bool> {
        match self.find(id, batch, log)? {
            Some(slot) if self.slots[slot as usize].state == state => {
                self.remove(batch, slot);
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}
