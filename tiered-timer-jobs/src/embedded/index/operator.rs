//! The operator's calls: counts, listings and the lateness histogram, and
//! the changes an operator makes (promote, requeue, purge).

use std::collections::HashMap;
use std::io;

use super::super::format::Why;
use super::{Batch, Index, ReadAt, Row, State, View, Which, LATENESS_BUCKETS};
use crate::data::stats::Counts;

impl Index {
    /// Makes a waiting job due now (`promote.lua`): `false` if it is not
    /// waiting.
    pub(crate) fn promote(
        &mut self,
        batch: &mut Batch,
        log: &dyn ReadAt,
        now: u64,
        id: &[u8],
    ) -> io::Result<bool> {
        let Some(slot) = self.find(id, batch, log)? else {
            return Ok(false);
        };
        let s = self.slots[slot as usize];
        if s.state != State::Waiting {
            return Ok(false);
        }
        if s.due > now {
            self.wait(batch, slot, now, now, s.attempts, Why::Other, None);
        }
        Ok(true)
    }

    /// Moves a dead letter back to the waiting jobs, due now, attempts and
    /// last error reset (`requeue.lua`).
    pub(crate) fn requeue(
        &mut self,
        batch: &mut Batch,
        log: &dyn ReadAt,
        now: u64,
        id: &[u8],
    ) -> io::Result<bool> {
        match self.find(id, batch, log)? {
            Some(slot) if self.slots[slot as usize].state == State::Dead => {
                self.wait(batch, slot, now, now, 0, Why::Other, Some(None));
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Requeues up to `limit` dead letters, oldest deaths first.
    pub(crate) fn requeue_all(&mut self, batch: &mut Batch, now: u64, limit: usize) -> usize {
        let slots: Vec<u32> = self.dead.iter().take(limit).map(|&(_, s)| s).collect();
        for &slot in &slots {
            self.wait(batch, slot, now, now, 0, Why::Other, Some(None));
        }
        slots.len()
    }

    /// Deletes a dead letter (`purge.lua`).
    pub(crate) fn purge(
        &mut self,
        batch: &mut Batch,
        log: &dyn ReadAt,
        id: &[u8],
    ) -> io::Result<bool> {
        self.remove_if(batch, log, id, State::Dead)
    }

    /// Deletes up to `limit` dead letters, oldest deaths first.
    pub(crate) fn purge_all(&mut self, batch: &mut Batch, limit: usize) -> usize {
        let slots: Vec<u32> = self.dead.iter().take(limit).map(|&(_, s)| s).collect();
        for &slot in &slots {
            self.remove(batch, slot);
        }
        slots.len()
    }

    /// The numbers of `stats.lua`, at `now` (after moving what is due).
    pub(crate) fn numbers(&mut self, now: u64) -> Counts {
        self.advance(now);
        let earliest_due = match self.ready.first() {
            Some(&(due, _)) => Some(due),
            None => self.wheel.peek().map(|key| self.wheel.deadline(key)),
        };
        Counts {
            now_ms: now,
            pending: self.waiting,
            due_now: self.ready.len() as u64,
            earliest_due_ms: earliest_due,
            leased: self.leases.len() as u64,
            expired_leases: self.expired.len() as u64,
            earliest_lease_expiry_ms: self.leases.values().map(|l| l.expiry).min(),
            dead: self.dead.len() as u64,
            latest_death_ms: self.dead.last().map(|&(at, _)| at),
            damaged_frames: 0,
        }
    }

    /// How many jobs are waiting.
    pub(crate) fn pending(&self) -> u64 {
        self.waiting
    }

    /// How many jobs are leased (including leases that ran out and were
    /// not taken back yet).
    pub(crate) fn leased(&self) -> u64 {
        self.leases.len() as u64
    }

    /// The lateness histogram's counters.
    pub(crate) fn lateness(&self) -> [u64; LATENESS_BUCKETS] {
        self.lateness
    }

    /// A page of a listing at `now` (`list_jobs.lua`): the total in the
    /// listing and up to `count` rows from `offset`: waiting and due jobs
    /// by due time, leased ones by lease expiry, dead ones newest death
    /// first. Waiting jobs are found by a scan of all slots (for an
    /// operator's page, not for every call).
    pub(crate) fn list(
        &mut self,
        now: u64,
        which: Which,
        offset: usize,
        count: usize,
    ) -> (u64, Vec<Row>) {
        self.advance(now);
        let keys: Vec<(u64, u32)> = match which {
            Which::Due => self
                .ready
                .iter()
                .skip(offset)
                .take(count)
                .copied()
                .collect(),
            Which::Dead => self
                .dead
                .iter()
                .rev()
                .skip(offset)
                .take(count)
                .copied()
                .collect(),
            Which::Leased => {
                let mut all: Vec<(u64, u32)> =
                    self.leases.iter().map(|(&s, l)| (l.expiry, s)).collect();
                all.sort_unstable();
                all.into_iter().skip(offset).take(count).collect()
            }
            Which::Waiting => self
                .first_waiting(offset + count)
                .into_iter()
                .skip(offset)
                .collect(),
        };
        let total = match which {
            Which::Due => self.ready.len(),
            Which::Dead => self.dead.len(),
            Which::Leased => self.leases.len(),
            Which::Waiting => self.waiting as usize,
        } as u64;
        let rows = keys
            .into_iter()
            .map(|(at, slot)| Row {
                slot,
                at,
                view: self.view(slot),
            })
            .collect();
        (total, rows)
    }

    /// The `k` earliest waiting jobs, (due, slot), in order.
    fn first_waiting(&self, k: usize) -> Vec<(u64, u32)> {
        let mut best: std::collections::BinaryHeap<(u64, u32)> =
            std::collections::BinaryHeap::new();
        for (slot, s) in self.slots.iter().enumerate() {
            if s.state != State::Waiting {
                continue;
            }
            let key = (s.due, slot as u32);
            if best.len() < k {
                best.push(key);
            } else if best.peek().is_some_and(|&top| key < top) {
                best.pop();
                best.push(key);
            }
        }
        best.into_sorted_vec()
    }

    /// Live slots and their views (the model test's view of them).
    #[cfg(test)]
    pub(crate) fn live(&self) -> impl Iterator<Item = (u32, View)> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.state != State::Free)
            .map(|(slot, _)| (slot as u32, self.view(slot as u32)))
    }

    /// Up to `n` slots from `from` on, as `durable` says they were (else
    /// as they are), the live ones only; and where to go on, if anywhere.
    pub(crate) fn chunk(
        &self,
        from: usize,
        n: usize,
        durable: &HashMap<u32, View>,
    ) -> (Vec<(u32, View)>, Option<usize>) {
        let to = (from + n).min(self.slots.len());
        let live = (from..to)
            .filter_map(|i| {
                let slot = i as u32;
                let view = durable
                    .get(&slot)
                    .cloned()
                    .unwrap_or_else(|| self.view(slot));
                (view.slot.state != State::Free).then_some((slot, view))
            })
            .collect();
        (live, (to < self.slots.len()).then_some(to))
    }

    /// Bytes of the log that live jobs need.
    pub(crate) fn live_bytes(&self) -> u64 {
        self.live_bytes
    }
}
