//! The in-memory index of one queue's jobs, rebuilt from the delay log on
//! open, and every change to it, one method per Redis script.
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
//! Memory per waiting job: a [`Slot`] (48 bytes), a wheel entry (24) and
//! about 9 bytes of the id table, besides nothing else.

use std::collections::hash_map::RandomState;
use std::collections::{BTreeSet, HashMap};
use std::hash::BuildHasher;
use std::io;

use hashbrown::HashTable;
use tiered_timer::wheel_core::{Polled, Wheel};

pub(crate) use super::format::LATENESS_BUCKETS as LATENESS;
use super::format::{Record, FRAME_HEADER, LATENESS_BUCKETS, NEW_ID_AT};
use crate::keys::LATENESS_BOUNDS_MS;

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
/// its due time, attempts and state. 48 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    /// The id's hash (the store's keyed hasher).
    hash: u64,
    /// Where the id starts in the log file; the payload follows it.
    pub(crate) data: u64,
    /// Waiting: when it is due. Leased and dead: the due time of its last
    /// delivery (the job's deadline).
    pub(crate) due: u64,
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

/// A lease: who holds it (a token, unique in the process) and until when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Lease {
    pub(crate) token: u64,
    pub(crate) expiry: u64,
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
}

/// Reads `len` bytes of the log at `offset` (the file, or a frame not yet
/// written).
pub(crate) trait ReadAt {
    fn read_at(&self, offset: u64, len: usize) -> io::Result<Vec<u8>>;
}

/// How a job's due time is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Due {
    /// Milliseconds after "now" rounded up.
    After(u64),
    /// Milliseconds since the epoch.
    At(u64),
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
    /// The system clock's now.
    pub(crate) fn wall() -> Now {
        let since = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let floor = since.as_millis() as u64;
        let ceil = floor + u64::from(since.subsec_nanos() % 1_000_000 != 0);
        Now { floor, ceil }
    }
}

/// One undo step: the view a slot had before a change, or a lateness
/// sample to take back.
#[derive(Debug)]
pub(crate) enum Undo {
    Slot(u32, View),
    Lateness(usize),
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

/// What became of a job a worker gave up on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GaveUp {
    /// The lease was not this delivery's any more: nothing changed.
    Lost,
    Rescheduled,
    Buried,
}

/// One partition's numbers, as `stats.lua` returns them (-1: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Numbers {
    pub(crate) now: i64,
    pub(crate) pending: i64,
    pub(crate) due_now: i64,
    pub(crate) earliest_due: i64,
    pub(crate) leased: i64,
    pub(crate) expired_leases: i64,
    pub(crate) earliest_expiry: i64,
    pub(crate) dead: i64,
    pub(crate) latest_death: i64,
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
    lateness: [u64; LATENESS_BUCKETS],
    waiting: u64,
    next_token: u64,
    /// Bytes of the log that live jobs need (their `New` records and a
    /// little for the rest), for compaction's garbage share.
    live_bytes: u64,
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
            lateness: [0; LATENESS_BUCKETS],
            waiting: 0,
            next_token: ORPHAN + 1,
            live_bytes: 0,
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
            };
        };
        View {
            slot: *s,
            lease: self.leases.get(&slot).copied(),
            died_at: self.died_at.get(&slot).copied(),
            error: self.errors.get(&slot).cloned(),
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
                self.leases.insert(slot, lease);
                if lease.token != ORPHAN {
                    self.tokens.insert(lease.token, slot);
                }
                self.slots[i].timer = self.lease_wheel.insert(lease.expiry, slot) as u32;
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
            let token = |v: &View| v.lease.map(|l| l.token);
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
                    let lease = self.leases[&slot];
                    self.expired.insert((lease.expiry, slot));
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
    }

    /// How many jobs a claim would find now (after [`advance`]).
    ///
    /// [`advance`]: Index::advance
    pub(crate) fn claimable(&self) -> usize {
        self.ready.len() + self.expired.len()
    }

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
        self.add(batch, id, due, payload);
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
    /// the log.
    fn new_waiting(&self, id: &[u8], data: u64, due: u64, gen: u32, payload_len: usize) -> View {
        View {
            slot: Slot {
                hash: self.hash(id),
                data,
                due,
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
        }
    }

    /// A new waiting job, in a free slot.
    fn add(&mut self, batch: &mut Batch, id: &[u8], due: u64, payload: &[u8]) {
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
        }
        .encode(&mut batch.frame);
        let view = self.new_waiting(id, data, due, gen, payload.len());
        self.change(batch, slot, view);
    }

    /// Removes a job for good (ack, cancel, purge).
    fn remove(&mut self, batch: &mut Batch, slot: u32) {
        let mut view = self.view(slot);
        Record::Remove {
            slot,
            gen: view.slot.gen,
        }
        .encode(&mut batch.frame);
        view.slot.state = State::Free;
        view.lease = None;
        view.died_at = None;
        view.error = None;
        self.change(batch, slot, view);
    }

    /// Makes a job wait until `due` with `attempts` (retry, release,
    /// promote, requeue); `error`: its new last error, if it changes.
    fn wait(
        &mut self,
        batch: &mut Batch,
        slot: u32,
        due: u64,
        attempts: u32,
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
        }
        .encode(&mut batch.frame);
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

    /// Cancels a waiting job (`cancel.lua`): `true` if it was waiting.
    pub(crate) fn cancel(
        &mut self,
        batch: &mut Batch,
        log: &dyn ReadAt,
        id: &[u8],
    ) -> io::Result<bool> {
        match self.find(id, batch, log)? {
            Some(slot) if self.slots[slot as usize].state == State::Waiting => {
                self.remove(batch, slot);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Claims up to `n` jobs (`claim.lua`): leases that ran out first (a
    /// job on its last attempt goes to the dead letters instead), then the
    /// earliest due; each leased for `lease` ms with a fresh token.
    pub(crate) fn claim(
        &mut self,
        batch: &mut Batch,
        now: u64,
        n: usize,
        lease: u64,
        max_attempts: u32,
    ) -> Claim {
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
                let taken = self.lease(batch, slot, now, lease, true);
                claim.jobs.push(taken);
            }
        }
        while claim.jobs.len() < n {
            let Some(&(_, slot)) = self.ready.first() else {
                break;
            };
            let taken = self.lease(batch, slot, now, lease, false);
            claim.jobs.push(taken);
        }
        claim.left = self.claimable();
        claim
    }

    /// Leases one job to a new token.
    fn lease(
        &mut self,
        batch: &mut Batch,
        slot: u32,
        now: u64,
        lease: u64,
        redelivery: bool,
    ) -> Taken {
        let mut view = self.view(slot);
        let attempt = view.slot.attempts + 1;
        Record::Lease {
            slot,
            gen: view.slot.gen,
            attempts: attempt,
            at: now,
            redelivery,
        }
        .encode(&mut batch.frame);
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
    /// if the lease ran out by now (the caller checks that itself).
    pub(crate) fn ack(&mut self, batch: &mut Batch, id: &[u8], token: u64) -> bool {
        match self.held(id, token) {
            Some(slot) => {
                self.remove(batch, slot);
                true
            }
            None => false,
        }
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
        self.wait(batch, slot, now.ceil + delay, attempts, None);
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
        self.wait(batch, slot, now.ceil + delay, attempts, reason);
        GaveUp::Rescheduled
    }

    /// Renews a lease to `lease` ms after now (`extend.lua`): the new
    /// expiry, or `None` if the lease was lost. Nothing is logged: leases
    /// do not outlive the process.
    pub(crate) fn extend(&mut self, now: u64, id: &[u8], token: u64, lease: u64) -> Option<u64> {
        let slot = self.fenced(id, token, now)?;
        let expiry = now + lease;
        let mut view = self.view(slot);
        view.lease = Some(Lease { token, expiry });
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
            s.due.min(now),
            s.attempts.saturating_sub(1),
            None,
        );
        true
    }

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
            self.wait(batch, slot, now, s.attempts, None);
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
                self.wait(batch, slot, now, 0, Some(None));
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Requeues up to `limit` dead letters, oldest deaths first.
    pub(crate) fn requeue_all(&mut self, batch: &mut Batch, now: u64, limit: usize) -> usize {
        let slots: Vec<u32> = self.dead.iter().take(limit).map(|&(_, s)| s).collect();
        for &slot in &slots {
            self.wait(batch, slot, now, 0, Some(None));
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
        match self.find(id, batch, log)? {
            Some(slot) if self.slots[slot as usize].state == State::Dead => {
                self.remove(batch, slot);
                Ok(true)
            }
            _ => Ok(false),
        }
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
    pub(crate) fn numbers(&mut self, now: u64) -> Numbers {
        self.advance(now);
        let earliest_due = match self.ready.first() {
            Some(&(due, _)) => due as i64,
            None => self
                .wheel
                .peek()
                .map_or(-1, |key| self.wheel.deadline(key) as i64),
        };
        let earliest_expiry = self.leases.values().map(|l| l.expiry).min();
        Numbers {
            now: now as i64,
            pending: self.waiting as i64,
            due_now: self.ready.len() as i64,
            earliest_due,
            leased: self.leases.len() as i64,
            expired_leases: self.expired.len() as i64,
            earliest_expiry: earliest_expiry.map_or(-1, |e| e as i64),
            dead: self.dead.len() as i64,
            latest_death: self.dead.last().map_or(-1, |&(at, _)| at as i64),
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
            } => {
                if self.view(slot).slot.state != State::Free {
                    return Err(format!("a new job in slot {slot}, which is taken"));
                }
                let view = self.new_waiting(id, data, due, gen, payload.len());
                self.put(slot, view);
            }
            Record::Wait {
                slot,
                gen,
                due,
                attempts,
            } => {
                let mut view = check(self, slot, gen)?;
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
            } => {
                let mut view = check(self, slot, gen)?;
                if !redelivery {
                    self.lateness[lateness_bucket(at.saturating_sub(view.slot.due))] += 1;
                }
                view.slot.state = State::Leased;
                view.slot.attempts = attempts;
                // A lease found on open belonged to a process that is gone:
                // it ran out (see the module docs).
                view.lease = Some(Lease {
                    token: ORPHAN,
                    expiry: at,
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
                let mut view = check(self, slot, gen)?;
                view.slot.state = State::Free;
                view.lease = None;
                view.died_at = None;
                view.error = None;
                self.put(slot, view);
            }
            Record::Lateness { counts } => {
                for (mine, theirs) in self.lateness.iter_mut().zip(counts) {
                    *mine += theirs;
                }
            }
        }
        Ok(())
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
        match s.state {
            State::Free => {}
            State::Waiting => {
                if s.attempts > 0 {
                    Record::Wait {
                        slot,
                        gen: s.gen,
                        due: s.due,
                        attempts: s.attempts,
                    }
                    .encode(out);
                }
            }
            State::Leased => Record::Lease {
                slot,
                gen: s.gen,
                attempts: s.attempts,
                at: view.lease.map_or(0, |l| l.expiry),
                redelivery: true,
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

/// The bucket of the lateness histogram for `ms` (the claim script's
/// `record_lateness`).
pub(crate) fn lateness_bucket(ms: u64) -> usize {
    LATENESS_BOUNDS_MS
        .iter()
        .position(|&bound| ms <= bound)
        .unwrap_or(LATENESS_BOUNDS_MS.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log in memory: frames appended as a committer would.
    #[derive(Default)]
    struct MemLog(Vec<u8>);

    impl ReadAt for MemLog {
        fn read_at(&self, offset: u64, len: usize) -> io::Result<Vec<u8>> {
            let from = offset as usize;
            self.0
                .get(from..from + len)
                .map(<[u8]>::to_vec)
                .ok_or_else(|| io::Error::other("past the end"))
        }
    }

    impl MemLog {
        fn new() -> MemLog {
            MemLog(super::super::format::file_header().to_vec())
        }

        /// Writes a batch as a frame; returns the next batch.
        fn commit(&mut self, mut batch: Batch) -> Batch {
            if !batch.is_empty() {
                let header = super::super::format::frame_header(&batch.frame[FRAME_HEADER..]);
                batch.frame[..FRAME_HEADER].copy_from_slice(&header);
                assert_eq!(batch.base as usize, self.0.len());
                self.0.extend_from_slice(&batch.frame);
            }
            Batch::new(self.0.len() as u64)
        }

        /// A fresh index from the frames (as `store::replay` does).
        fn replay(&self, now: u64) -> Index {
            let mut index = Index::new(now);
            index.begin_replay();
            let mut at = super::super::format::FILE_HEADER;
            while at < self.0.len() {
                let len = u32::from_le_bytes(self.0[at + 4..at + 8].try_into().unwrap()) as usize;
                let body = &self.0[at + FRAME_HEADER..at + FRAME_HEADER + len];
                let mut records = super::super::format::Records::new(body);
                loop {
                    let offset = (at + FRAME_HEADER + records.position()) as u64;
                    let Some(record) = records.next_record() else {
                        break;
                    };
                    index
                        .apply(&record.unwrap(), offset + NEW_ID_AT as u64)
                        .unwrap();
                }
                at += FRAME_HEADER + len;
            }
            index.end_replay();
            index
        }
    }

    /// Everything observable, leases as a replay sees them (a dead
    /// process' lease: no holder, ran out when it was taken).
    fn dump(
        index: &mut Index,
        replayed: bool,
    ) -> (Vec<(u32, View)>, [u64; LATENESS_BUCKETS], u64, usize) {
        let mut live: Vec<(u32, View)> = index.live().collect();
        for (_, view) in &mut live {
            view.slot.timer = 0;
            view.slot.hash = 0;
            if let Some(lease) = &mut view.lease {
                if !replayed {
                    lease.token = ORPHAN;
                }
                lease.expiry = 0;
            }
        }
        (live, index.lateness, index.waiting, index.dead.len())
    }

    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    /// One random operation, like a caller's.
    fn random_op(
        index: &mut Index,
        batch: &mut Batch,
        log: &MemLog,
        rng: &mut Rng,
        now: u64,
        held: &mut Vec<(Vec<u8>, u64)>,
    ) {
        let id = format!("j{}", rng.below(60)).into_bytes();
        let clock = Now {
            floor: now,
            ceil: now,
        };
        match rng.below(12) {
            0..=2 => {
                let due = now + rng.below(50);
                index
                    .schedule(batch, log, clock, &id, Due::At(due), &id)
                    .unwrap();
            }
            3 => {
                let jobs: Vec<(Vec<u8>, u64)> = (0..rng.below(5))
                    .map(|_| (format!("j{}", rng.below(60)).into_bytes(), rng.below(20)))
                    .collect();
                let chunk: Vec<(&[u8], u64, &[u8])> = jobs
                    .iter()
                    .map(|(id, d)| (id.as_slice(), *d, id.as_slice()))
                    .collect();
                index
                    .schedule_many(batch, log, clock, true, None, &chunk)
                    .unwrap();
            }
            4 => {
                let claim =
                    index.claim(batch, now, 1 + rng.below(3) as usize, 1 + rng.below(40), 3);
                for t in claim.jobs {
                    let s = index.slots[t.slot as usize];
                    let id = log
                        .read_at(s.data, s.id_len.into())
                        .ok()
                        .or_else(|| batch.bytes_at(s.data, s.id_len.into()).map(<[u8]>::to_vec))
                        .unwrap();
                    held.push((id, t.token));
                }
            }
            5 if !held.is_empty() => {
                let (id, token) = held.swap_remove(rng.below(held.len() as u64) as usize);
                index.ack(batch, &id, token);
            }
            6 if !held.is_empty() => {
                let (id, token) = held.swap_remove(rng.below(held.len() as u64) as usize);
                index.retry(batch, clock, &id, token, rng.below(10), 3);
            }
            7 if !held.is_empty() => {
                let (id, token) = held.swap_remove(rng.below(held.len() as u64) as usize);
                index.fail(
                    batch,
                    clock,
                    &id,
                    token,
                    rng.below(2) == 0,
                    rng.below(10),
                    3,
                    "reason",
                );
            }
            8 if !held.is_empty() => {
                let (id, token) = held.swap_remove(rng.below(held.len() as u64) as usize);
                index.release(batch, now, &id, token);
            }
            9 => {
                index.cancel(batch, log, &id).unwrap();
            }
            10 => match rng.below(4) {
                0 => drop(index.promote(batch, log, now, &id).unwrap()),
                1 => drop(index.requeue(batch, log, now, &id).unwrap()),
                2 => drop(index.purge(batch, log, &id).unwrap()),
                _ => drop(index.requeue_all(batch, now, 2)),
            },
            _ => {
                if let Some((id, token)) = held.first() {
                    index.extend(now, id, *token, 1 + rng.below(40));
                }
            }
        }
    }

    /// Replaying the log gives the index that wrote it (leases as a dead
    /// process leaves them), after any run of operations; and a batch
    /// taken back leaves the index as it was before the batch.
    #[test]
    fn replay_rebuilds_and_undo_takes_back() {
        for seed in 1..40u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let start = 1_700_000_000_000;
            let mut index = Index::new(start);
            let mut log = MemLog::new();
            let mut batch = Batch::new(log.0.len() as u64);
            let mut held = Vec::new();
            let mut now = start;
            for round in 0..60 {
                now += rng.below(15);
                index.advance(now);
                let before = dump(&mut index, false);
                let held_before = held.clone();
                for _ in 0..1 + rng.below(8) {
                    random_op(&mut index, &mut batch, &log, &mut rng, now, &mut held);
                }
                if rng.below(4) == 0 {
                    // A failed write: everything taken back.
                    index.undo(std::mem::take(&mut batch.undo));
                    batch = Batch::new(log.0.len() as u64);
                    held = held_before;
                    // Leases renewed in the batch are not logged, nor undone:
                    // compare without expiries (dump drops them).
                    assert_eq!(
                        dump(&mut index, false),
                        before,
                        "seed {seed} round {round}: undo"
                    );
                } else {
                    batch = log.commit(batch);
                }
                let mut replayed = log.replay(now);
                assert_eq!(
                    dump(&mut replayed, true),
                    dump(&mut index, false),
                    "seed {seed} round {round}: replay"
                );
            }
        }
    }
}
