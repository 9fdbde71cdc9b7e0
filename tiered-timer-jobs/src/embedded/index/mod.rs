//! The in-memory index of one queue's jobs, rebuilt from the delay log on
//! open, and every change to it, one method per Redis script. This file
//! has the index's structures and how a job is filed in them; the calls
//! are grouped by who makes them: `schedule.rs` (producers),
//! `delivery.rs` (workers), `operator.rs` (operators) and `replay.rs`
//! (opening a store, compaction).
//!
//! Ground rules:
//!
//! * Plain data behind `&mut self`: no locks, no clock, no I/O but the
//!   reads of ids behind a [`ReadAt`] (a job's id and payload stay in the
//!   log; memory holds where they are). The caller (`store.rs`) holds the
//!   queue's lock around every call and passes "now" in.
//! * Every change goes through [`Index::put`], which files a job in the
//!   right structures for its [`View`], and is written twice: as records
//!   (`format.rs`) into the caller's [`Batch`], which become one frame of
//!   the log, and as the job's previous view on the batch's undo list, so
//!   that a batch whose write fails (a full disk) is taken back whole.
//! * Time is wall-clock milliseconds since the Unix epoch: due times are
//!   rounded up, "now" down, and a job is due when `due <= now` (never
//!   early by the host's clock, across restarts). The wheel
//!   (`tiered_timer::wheel_core`, ticks of 1 ms) holds the jobs waiting
//!   for a later time and the leases that have not run out; polling it
//!   moves what is due to the ordered `ready` and `expired` sets, which
//!   claims take from.
//! * Leases live only in memory: a store is open in one process at a
//!   time, so a lease found on open belonged to a dead process; it is
//!   replayed as one that ran out (its delivery counts, as when a worker
//!   dies on Redis), and the job goes to the next claim.
//!
//! * A job's attempts (`history.rs`): the running one is its lease's
//!   claim time and holder, the ended ones (at most
//!   [`HISTORY_LEN`](crate::HISTORY_LEN)) a list shared by the job's views,
//!   derived from the records as they are made or replayed; the counts per
//!   minute the same way.
//!
//! Memory per waiting job: a [`Slot`] (56 bytes), a wheel entry (24) and
//! about 9 bytes of the id table, besides nothing else; a job with ended
//! attempts has its list besides.

use std::collections::hash_map::RandomState;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::BuildHasher;
use std::io;
use std::sync::Arc;

use hashbrown::HashTable;
use tiered_timer::wheel_core::{Polled, Wheel};

pub(crate) use super::format::LATENESS_BUCKETS as LATENESS;
use super::format::{Record, FRAME_HEADER, LATENESS_BUCKETS, NEW_ID_AT};
pub(crate) use crate::contract::{Due, GaveUp};
use crate::data::clock::Clock;
use crate::data::lateness::LATENESS_BOUNDS_MS;
pub(crate) use recurring::{Listed, Recurring};

mod delivery;
mod history;
mod operator;
mod recur;
mod recurring;
mod replay;
mod schedule;
#[cfg(test)]
mod tests;

/// "No wheel entry" in [`Slot::timer`].
const NONE: u32 = u32::MAX;
/// The token of a lease found on open: nobody holds it.
const ORPHAN: u64 = 0;

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum State {
    /// The slot holds no job.
    Free,
    Waiting,
    Leased,
    Dead,
}

/// One job's place in memory: where its id and payload are in the log,
/// its due time, creation time, attempts and state. 56 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    /// The id's hash (the store's keyed hasher).
    hash: u64,
    /// Where the id starts in the log file; the payload follows it.
    pub(crate) data: u64,
    /// Waiting: when it is due. Leased and dead: the due time of its last
    /// delivery (the job's deadline).
    pub(crate) due: u64,
    /// When it was scheduled (ms; 0: not recorded, in a version 1 log).
    pub(crate) created: u64,
    pub(crate) gen: u32,
    pub(crate) attempts: u32,
    pub(crate) payload_len: u32,
    /// Its wheel entry (waiting for a later time, or leased and not run
    /// out), or [`NONE`].
    timer: u32,
    pub(crate) id_len: u16,
    pub(crate) state: State,
}

impl Slot {
    const FREE: Slot = Slot {
        hash: 0,
        data: 0,
        due: 0,
        created: 0,
        gen: 0,
        attempts: 0,
        payload_len: 0,
        timer: NONE,
        id_len: 0,
        state: State::Free,
    };

    /// Bytes of its `New` record in the log.
    fn record_len(&self) -> u64 {
        (NEW_ID_AT + usize::from(self.id_len)) as u64 + u64::from(self.payload_len)
    }
}

/// A lease: who holds it (a token, unique in the process) and until when;
/// and its attempt's claim time and holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lease {
    pub(crate) token: u64,
    pub(crate) expiry: u64,
    pub(crate) claimed: u64,
    /// `None`: not recorded (a version 1 log).
    pub(crate) holder: Option<Arc<str>>,
}

/// An ended attempt of a job (see `history.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ended {
    pub(crate) attempt: u32,
    pub(crate) claimed: u64,
    /// `None`: not recorded (a version 1 log).
    pub(crate) holder: Option<Arc<str>>,
    pub(crate) outcome: crate::data::history::Outcome,
    /// `None`: not recorded (a version 1 log).
    pub(crate) ended: Option<u64>,
    /// At most [`ERROR_KEPT`](crate::ERROR_KEPT) bytes.
    pub(crate) error: Option<Box<[u8]>>,
}

/// Everything about one job: its [`Slot`] and what only some jobs have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct View {
    pub(crate) slot: Slot,
    /// Leased only.
    pub(crate) lease: Option<Lease>,
    /// Dead only: when it died.
    pub(crate) died_at: Option<u64>,
    pub(crate) error: Option<Box<str>>,
    /// Its ended attempts, oldest first (`None`: none).
    pub(crate) history: Option<Arc<[Ended]>>,
}

/// Reads `len` bytes of the log at `offset` (the file, or a frame not yet
/// written).
pub(crate) trait ReadAt {
    fn read_at(&self, offset: u64, len: usize) -> io::Result<Vec<u8>>;
}

/// The clock of one call: wall-clock milliseconds since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Now {
    /// Rounded down: a job is due when `due <= floor`.
    pub(crate) floor: u64,
    /// Rounded up: delays count from here.
    pub(crate) ceil: u64,
}

impl Now {
    /// The store's clock's now (the system's wall clock unless a test
    /// gave a manual one).
    pub(crate) fn of(clock: &Clock) -> Now {
        let since = clock
            .now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let floor = since.as_millis() as u64;
        let ceil = floor + u64::from(since.subsec_nanos() % 1_000_000 != 0);
        Now { floor, ceil }
    }
}

/// One undo step: the view a slot had before a change, a lateness
/// sample or a count of a minute to take back, or what a recurrence was
/// before a change.
#[derive(Debug)]
pub(crate) enum Undo {
    Slot(u32, View),
    Lateness(usize),
    Recurring(Box<str>, Option<Recurring>),
    /// A job processed (`false`) or an attempt failed (`true`) in this
    /// minute.
    Tally(u64, bool),
}

/// A job a claim handed to its worker before the claim's frame was on
/// disk (see `store.rs`): kept leased if that frame fails to write.
#[derive(Debug)]
pub(crate) struct Handed {
    pub(crate) slot: u32,
    /// Its view as the claim left it.
    pub(crate) view: View,
    /// The lateness sample the claim took (not for a redelivery).
    pub(crate) lateness: Option<usize>,
}

/// The records and undo steps of the calls waiting for the next frame.
#[derive(Debug)]
pub(crate) struct Batch {
    /// The frame so far: room for its header, then its records.
    pub(crate) frame: Vec<u8>,
    pub(crate) undo: Vec<Undo>,
    /// The jobs its claims handed out at once.
    pub(crate) handed: Vec<Handed>,
    /// Where the frame will start in the file (see `store.rs`).
    pub(crate) base: u64,
}

impl Batch {
    /// An empty batch whose frame will start at `base`.
    pub(crate) fn new(base: u64) -> Batch {
        Batch {
            frame: vec![0; FRAME_HEADER],
            undo: Vec::new(),
            handed: Vec::new(),
            base,
        }
    }

    /// Whether no record was written.
    pub(crate) fn is_empty(&self) -> bool {
        self.frame.len() == FRAME_HEADER
    }

    /// Where the next record will start in the file.
    fn next_offset(&self) -> u64 {
        self.base + self.frame.len() as u64
    }

    /// The `len` bytes at file offset `at`, if this batch will write them.
    pub(crate) fn bytes_at(&self, at: u64, len: usize) -> Option<&[u8]> {
        let from = usize::try_from(at.checked_sub(self.base)?).ok()?;
        (from >= FRAME_HEADER).then(|| self.frame.get(from..from + len))?
    }
}

/// A job a claim took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Taken {
    pub(crate) slot: u32,
    pub(crate) gen: u32,
    pub(crate) token: u64,
    pub(crate) attempt: u32,
    /// Its due time (ms).
    pub(crate) deadline: u64,
    /// Taken back from a lease that ran out.
    pub(crate) redelivery: bool,
}

/// What a claim did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Claim {
    pub(crate) now: u64,
    pub(crate) jobs: Vec<Taken>,
    /// Jobs whose lease ran out on their last attempt: moved to the dead
    /// letters (slot, gen).
    pub(crate) buried: Vec<(u32, u32)>,
    /// Due jobs left behind.
    pub(crate) left: usize,
}

/// Which jobs a listing pages through (as `list_jobs.lua`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Which {
    Waiting,
    Due,
    Leased,
    Dead,
}

/// A row of a listing: the job, and its time in that listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Row {
    pub(crate) slot: u32,
    pub(crate) at: u64,
    pub(crate) view: View,
}

/// The index of one queue.
pub(crate) struct Index {
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Slot numbers, found by the id's hash (kept in the slot).
    by_id: HashTable<u32>,
    hasher: RandomState,
    /// Waiting jobs not yet due, by due time.
    wheel: Wheel<u32>,
    /// Leases that have not run out, by expiry.
    lease_wheel: Wheel<u32>,
    /// Set while the log is replayed: the free list is built at the end.
    replaying: bool,
    /// Waiting jobs that are due: (due, slot), earliest first.
    ready: BTreeSet<(u64, u32)>,
    /// Leased jobs whose lease ran out: (expiry, slot).
    expired: BTreeSet<(u64, u32)>,
    /// Dead letters: (died at, slot).
    dead: BTreeSet<(u64, u32)>,
    died_at: HashMap<u32, u64>,
    leases: HashMap<u32, Lease>,
    tokens: HashMap<u64, u32>,
    errors: HashMap<u32, Box<str>>,
    histories: HashMap<u32, Arc<[Ended]>>,
    lateness: [u64; LATENESS_BUCKETS],
    /// Jobs processed and attempts failed per minute (since the epoch),
    /// the last [`THROUGHPUT_MINUTES`](crate::THROUGHPUT_MINUTES).
    throughput: BTreeMap<u64, (u64, u64)>,
    /// The holder of the last claim replayed: claims of one holder share
    /// its name.
    last_holder: Option<Arc<str>>,
    waiting: u64,
    next_token: u64,
    /// Bytes of the log that live jobs need (their `New` records and a
    /// little for the rest), for compaction's garbage share.
    live_bytes: u64,
    /// Recurrences, by name (`recur.rs`).
    recurring: BTreeMap<Box<str>, Recurring>,
    /// The slots of recurrences' waiting occurrences, and whose.
    pending_slots: HashMap<u32, Box<str>>,
    /// The wall clock when the store was opened (ms): a job due by then
    /// may have been handed out by a process that died before its claim
    /// was on disk, so its claims wait for their frame (see `store.rs`).
    opened_at: u64,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("waiting", &self.waiting)
            .field("leased", &self.leases.len())
            .field("dead", &self.dead.len())
            .finish_non_exhaustive()
    }
}

/// Bytes counted per live job beyond its `New` record (a state record).
const STATE_BYTES: u64 = 32;

impl Index {
    /// An empty index whose wheel starts at `now` (ms).
    pub(crate) fn new(now: u64) -> Index {
        let mut wheel = Wheel::new(64);
        wheel.catch_up(now);
        let mut lease_wheel = Wheel::new(64);
        lease_wheel.catch_up(now);
        Index {
            lease_wheel,
            replaying: false,
            slots: Vec::new(),
            free: Vec::new(),
            by_id: HashTable::new(),
            hasher: RandomState::new(),
            wheel,
            ready: BTreeSet::new(),
            expired: BTreeSet::new(),
            dead: BTreeSet::new(),
            died_at: HashMap::new(),
            leases: HashMap::new(),
            tokens: HashMap::new(),
            errors: HashMap::new(),
            histories: HashMap::new(),
            lateness: [0; LATENESS_BUCKETS],
            throughput: BTreeMap::new(),
            last_holder: None,
            waiting: 0,
            next_token: ORPHAN + 1,
            live_bytes: 0,
            recurring: BTreeMap::new(),
            pending_slots: HashMap::new(),
            opened_at: now,
        }
    }

    fn hash(&self, id: &[u8]) -> u64 {
        self.hasher.hash_one(id)
    }

    /// The view of `slot` (a free one for a slot never used).
    pub(crate) fn view(&self, slot: u32) -> View {
        let Some(s) = self.slots.get(slot as usize) else {
            return View {
                slot: Slot::FREE,
                lease: None,
                died_at: None,
                error: None,
                history: None,
            };
        };
        View {
            slot: *s,
            lease: self.leases.get(&slot).cloned(),
            died_at: self.died_at.get(&slot).copied(),
            error: self.errors.get(&slot).cloned(),
            history: self.histories.get(&slot).cloned(),
        }
    }

    /// The slot of a job, if `slot` holds generation `gen`.
    pub(crate) fn slot(&self, slot: u32, gen: u32) -> Option<&Slot> {
        self.slots
            .get(slot as usize)
            .filter(|s| s.gen == gen && s.state != State::Free)
    }

    /// Makes `slot` hold `view`, filing it where its state says: the one
    /// place every change goes through.
    fn put(&mut self, slot: u32, view: View) {
        let i = slot as usize;
        if i >= self.slots.len() {
            self.slots.resize(i + 1, Slot::FREE);
        }
        self.unfile(slot);
        let old = self.slots[i];
        let mut new = view.slot;
        new.timer = NONE;
        // The id table and the free list follow the change of occupancy.
        match (old.state == State::Free, new.state == State::Free) {
            (true, false) => {
                // A new job takes the last free slot (`add`), and an undone
                // removal gives back the slot it freed last: both at the end.
                if !self.replaying {
                    if let Some(at) = self.free.iter().rposition(|&f| f == slot) {
                        self.free.swap_remove(at);
                    }
                }
                let hash = new.hash;
                let slots = &self.slots;
                self.by_id
                    .insert_unique(hash, slot, |&s| slots[s as usize].hash);
                self.live_bytes += new.record_len() + STATE_BYTES;
            }
            (false, true) => {
                let hash = old.hash;
                if let Ok(entry) = self.by_id.find_entry(hash, |&s| s == slot) {
                    entry.remove();
                }
                if !self.replaying {
                    self.free.push(slot);
                }
                self.live_bytes = self
                    .live_bytes
                    .saturating_sub(old.record_len() + STATE_BYTES);
            }
            _ => {}
        }
        self.slots[i] = new;
        match new.state {
            State::Free => {}
            State::Waiting => {
                self.waiting += 1;
                self.slots[i].timer = self.wheel.insert(new.due, slot) as u32;
            }
            State::Leased => {
                let lease = view.lease.expect("a leased job has a lease");
                if lease.token != ORPHAN {
                    self.tokens.insert(lease.token, slot);
                }
                self.slots[i].timer = self.lease_wheel.insert(lease.expiry, slot) as u32;
                self.leases.insert(slot, lease);
            }
            State::Dead => {
                let at = view.died_at.expect("a dead job has a time of death");
                self.died_at.insert(slot, at);
                self.dead.insert((at, slot));
            }
        }
        match view.error {
            Some(error) if new.state != State::Free => {
                self.errors.insert(slot, error);
            }
            _ => {
                self.errors.remove(&slot);
            }
        }
        match view.history {
            Some(history) if new.state != State::Free => {
                self.histories.insert(slot, history);
            }
            _ => {
                self.histories.remove(&slot);
            }
        }
    }

    /// Takes `slot` out of the wheel and the ordered sets (its slot,
    /// id-table entry and error stay).
    fn unfile(&mut self, slot: u32) {
        let Some(s) = self.slots.get(slot as usize).copied() else {
            return;
        };
        if s.timer != NONE {
            match s.state {
                State::Leased => self.lease_wheel.remove(s.timer as usize),
                _ => self.wheel.remove(s.timer as usize),
            };
            self.slots[slot as usize].timer = NONE;
        }
        match s.state {
            State::Free => {}
            State::Waiting => {
                self.waiting -= 1;
                self.ready.remove(&(s.due, slot));
            }
            State::Leased => {
                if let Some(lease) = self.leases.remove(&slot) {
                    self.tokens.remove(&lease.token);
                    self.expired.remove(&(lease.expiry, slot));
                }
            }
            State::Dead => {
                if let Some(at) = self.died_at.remove(&slot) {
                    self.dead.remove(&(at, slot));
                }
            }
        }
    }

    /// Changes `slot` to `view`, keeping its old view on the undo list.
    fn change(&mut self, batch: &mut Batch, slot: u32, view: View) {
        batch.undo.push(Undo::Slot(slot, self.view(slot)));
        self.put(slot, view);
    }

    /// When the index was made (the store opened), in ms.
    pub(crate) fn opened_at(&self) -> u64 {
        self.opened_at
    }

    /// Takes each handed-out job's present view if it is still under the
    /// lease it was handed out with (a lease extended since): call before
    /// [`undo`](Index::undo), then [`keep_handed`](Index::keep_handed).
    pub(crate) fn refresh_handed(&self, handed: &mut [Handed]) {
        for h in handed {
            let now = self.view(h.slot);
            let token = |v: &View| v.lease.as_ref().map(|l| l.token);
            if now.slot.state == State::Leased
                && now.slot.gen == h.view.slot.gen
                && token(&now) == token(&h.view)
            {
                h.view = now;
            }
        }
    }

    /// After a frame failed and its changes (and later ones) were taken
    /// back: leases that claims handed out before that frame was written
    /// stay, in memory, with their holders (a job whose `New` record was
    /// taken back too is gone: its holder's ack finds no lease). Nothing
    /// is logged for them: a crash makes them waiting again, as any claim
    /// whose frame was not on disk.
    pub(crate) fn keep_handed(&mut self, handed: Vec<Handed>) {
        for h in handed {
            let Some(&present) = self.slot(h.slot, h.view.slot.gen) else {
                continue;
            };
            let mut view = h.view;
            // Where its id and payload are now (compaction may have moved
            // them since the claim).
            view.slot.data = present.data;
            self.put(h.slot, view);
            if let Some(bucket) = h.lateness {
                self.lateness[bucket] += 1;
            }
        }
    }

    /// Takes back a batch's changes, newest first.
    pub(crate) fn undo(&mut self, undo: Vec<Undo>) {
        for step in undo.into_iter().rev() {
            match step {
                Undo::Slot(slot, view) => self.put(slot, view),
                Undo::Lateness(bucket) => {
                    self.lateness[bucket] = self.lateness[bucket].saturating_sub(1)
                }
                Undo::Recurring(name, old) => self.set_recurring(&name, old),
                Undo::Tally(minute, failed) => self.untally(minute, failed),
            }
        }
    }

    /// Moves what is due by `now` out of the wheel: waiting jobs to
    /// `ready`, leases that ran out to `expired`.
    pub(crate) fn advance(&mut self, now: u64) {
        loop {
            match self.wheel.poll_step(now) {
                Polled::Due(key) => {
                    let slot = self.wheel.remove(key);
                    let s = &mut self.slots[slot as usize];
                    debug_assert_eq!(s.state, State::Waiting);
                    s.timer = NONE;
                    self.ready.insert((s.due, slot));
                }
                Polled::Busy => {}
                Polled::Idle => break,
            }
        }
        loop {
            match self.lease_wheel.poll_step(now) {
                Polled::Due(key) => {
                    let slot = self.lease_wheel.remove(key);
                    debug_assert_eq!(self.slots[slot as usize].state, State::Leased);
                    self.slots[slot as usize].timer = NONE;
                    let expiry = self.leases[&slot].expiry;
                    self.expired.insert((expiry, slot));
                }
                Polled::Busy => {}
                Polled::Idle => break,
            }
        }
    }

    /// When the wheels may next have something due (ms): a job coming due
    /// or a lease running out (a coarse bucket's start may come first:
    /// polling then files its entries finer).
    pub(crate) fn next_expiration(&mut self) -> Option<u64> {
        match (
            self.wheel.next_expiration(),
            self.lease_wheel.next_expiration(),
        ) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// How many jobs a claim would find now (after [`advance`]).
    ///
    /// [`advance`]: Index::advance
    pub(crate) fn claimable(&self) -> usize {
        self.ready.len() + self.expired.len()
    }
}

/// The bucket of the lateness histogram for `ms` (the claim script's
/// `record_lateness`).
pub(crate) fn lateness_bucket(ms: u64) -> usize {
    LATENESS_BOUNDS_MS
        .iter()
        .position(|&bound| ms <= bound)
        .unwrap_or(LATENESS_BOUNDS_MS.len())
}
