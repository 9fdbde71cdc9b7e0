//! The pure timing-wheel core: levels, buckets, the bucket queue and
//! reinsertion.
//!
//! # Design
//!
//! This is the hierarchical timing wheel of Varghese and Lauck ("Hashed and
//! Hierarchical Timing Wheels: Data Structures for the Efficient
//! Implementation of a Timer Facility", SOSP 1987) in the shape Kafka's
//! `SystemTimer` gave it:
//!
//! * Time is an integer number of **ticks** (`u64`). The core never reads a
//!   clock; the caller converts instants to ticks and passes "now" in.
//! * Level 0 has `wheel_size` buckets of one tick. Level `n` has buckets as
//!   wide as the whole of level `n - 1`. Levels are created lazily, the first
//!   time a deadline lies beyond the levels that exist; the top one always
//!   covers every `u64` deadline, so the range is unbounded.
//! * Each bucket is an intrusive list over one [`Slab`] of entries, so a timer
//!   joins, leaves or moves between buckets in O(1) with no allocation of its
//!   own.
//! * A bucket is due at its **start**. Non-empty buckets sit in the
//!   [`BucketQueue`](queue::BucketQueue), a min-heap keyed by that start and
//!   pushed only when a bucket's expiration changes (Kafka's trick), so the
//!   caller can sleep until the next due bucket instead of ticking through
//!   empty slots.
//! * When a bucket comes due, the wheel's time advances to its start and the
//!   bucket is drained: each entry is **reinserted** from scratch. An entry
//!   whose deadline has been reached moves to the due list; any other lands
//!   in a finer bucket (it is always finer: see [`Level::covers`]). Draining
//!   goes [`CASCADE_STEP`] entries at a time, so that the owner can let go
//!   of its lock between steps even when a million entries share a bucket.
//!
//! # The never-early rule
//!
//! An entry is handed out by [`Wheel::poll_step`]`(now)` only once
//! `deadline <= now`. Kafka fires a whole bucket at its start, which is up to
//! one tick early for the entries further into it; here a coarse bucket is
//! only ever a reason to reinsert, and the decision to fire compares the
//! entry's own deadline. The async layer rounds deadlines *up* to a tick and
//! "now" *down*, which makes the rule hold for real instants too.
//!
//! # Ground rules
//!
//! The core is plain data behind `&mut self`: no locks, no atomics, no clock,
//! no async. Whoever owns the `Wheel` (the timer's mutex, in this crate)
//! decides when time moves, by calling [`Wheel::poll_step`] (or
//! [`Wheel::catch_up`] when nothing is due).

mod level;
mod list;
mod queue;

#[cfg(any(test, fuzzing))]
pub(crate) mod fuzz;
#[cfg(test)]
mod tests;

use std::num::NonZeroU32;

use slab::Slab;

use self::level::Level;
pub(crate) use self::list::MAX_ENTRIES;
use self::list::{Links, List};
use self::queue::{BucketId, BucketQueue};

/// The largest `wheel_size` a timer accepts: each level allocates this many
/// buckets. (Here, not with the builder that checks it, so that
/// `BuildError`'s message can name it without importing the timer.)
pub(crate) const MAX_WHEEL_SIZE: usize = 1 << 20;

/// Slab capacity kept when the wheel empties; beyond it the slab is freed.
const SHRINK_ABOVE: usize = 1024;

/// Identifies an entry in the wheel; stable until the entry is removed.
pub(crate) type Key = usize;

/// One timer: its payload, its deadline in ticks, and where it is filed.
#[derive(Debug)]
pub(crate) struct Entry<T> {
    value: T,
    deadline: u64,
    links: Links,
    /// A [`Place`], packed in 32 bits ([`Place::pack`]): every timer
    /// carries one. Never zero, which gives the slab's vacant/occupied
    /// tag a niche: a slab slot is no wider than the entry.
    place: NonZeroU32,
}

/// Which list holds an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// In no list: handed out by `poll`, or taken out with `unfile`.
    Unfiled,
    /// Found due, waiting to be handed out by `poll`.
    Due,
    /// Waiting in a bucket.
    Bucket(BucketId),
}

impl Place {
    const UNFILED: NonZeroU32 = NonZeroU32::MAX;
    const DUE: NonZeroU32 = match NonZeroU32::new(u32::MAX - 1) {
        Some(due) => due,
        None => panic!("u32::MAX - 1 is not zero"),
    };
    /// Bits of a packed bucket id that hold the slot (a wheel has at most
    /// 2^20 slots; above them, the level, at most 64).
    const SLOT_BITS: u32 = 20;

    /// Packs a place in a non-zero word: a bucket id plus one (at most
    /// `64 << 20`), or one of the two top values.
    fn pack(self) -> NonZeroU32 {
        match self {
            Place::Unfiled => Place::UNFILED,
            Place::Due => Place::DUE,
            Place::Bucket(id) => {
                debug_assert!(id.slot < 1 << Place::SLOT_BITS);
                let id = (u32::from(id.level) << Place::SLOT_BITS) | id.slot;
                NonZeroU32::MIN.saturating_add(id)
            }
        }
    }

    fn unpack(packed: NonZeroU32) -> Place {
        match packed {
            Place::UNFILED => Place::Unfiled,
            Place::DUE => Place::Due,
            packed => {
                let id = packed.get() - 1;
                Place::Bucket(BucketId {
                    level: (id >> Place::SLOT_BITS) as u8,
                    slot: id & ((1 << Place::SLOT_BITS) - 1),
                })
            }
        }
    }
}

/// A hierarchical timing wheel holding values of type `T`.
#[derive(Debug)]
pub(crate) struct Wheel<T> {
    entries: Slab<Entry<T>>,
    levels: Vec<Level>,
    queue: BucketQueue,
    due: List,
    /// The wheel's current time in ticks: the start of the last bucket
    /// flushed, or the last `now` passed to `poll`, whichever is later.
    elapsed: u64,
    wheel_size: u64,
    /// Entries moved from a coarse bucket into a finer one, ever.
    cascaded: u64,
    /// By `floor(log2(deadline - elapsed))`, the finest level that may
    /// cover a deadline that far away (see [`lowest_level_for`]); all zero
    /// unless the wheel size is a power of two.
    ///
    /// [`lowest_level_for`]: Wheel::lowest_level_for
    lowest_by_log: [u8; 64],
    /// The coarse bucket being emptied into finer ones, a few entries per
    /// [`poll_step`](Wheel::poll_step), so that a bucket of a million
    /// entries never holds its caller (and its caller's lock) for long. Its
    /// entries stay in its list meanwhile, so removing or resetting one
    /// works as for any filed entry; no new entry can land in it (anything
    /// due within its span is filed in a finer level, as time is at its
    /// start).
    draining: Option<BucketId>,
}

/// [`Wheel::lowest_by_log`] for a wheel of `wheel_size` slots: entry `k`
/// is `k / log2(wheel_size)` for a power of two, else 0.
fn lowest_levels_by_log(wheel_size: u64) -> [u8; 64] {
    let bits = wheel_size
        .is_power_of_two()
        .then(|| wheel_size.trailing_zeros());
    std::array::from_fn(|log| match bits {
        // `log < 64` and `bits >= 1`: fits a `u8`.
        Some(bits) => (log as u32 / bits) as u8,
        None => 0,
    })
}

/// What one [`Wheel::poll_step`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Polled {
    /// Hands out this entry, now due.
    Due(Key),
    /// Moved up to [`CASCADE_STEP`] entries of a coarse bucket into finer
    /// ones, none due yet: call again (the caller may pause in between).
    Busy,
    /// Nothing more is due by `now`; the wheel's time has moved to `now`.
    Idle,
}

/// Most entries of a coarse bucket moved per [`Wheel::poll_step`]. Small
/// under test, so that the property tests interleave operations with
/// partly emptied buckets.
#[cfg(not(any(test, fuzzing)))]
pub(crate) const CASCADE_STEP: usize = 32;
#[cfg(any(test, fuzzing))]
pub(crate) const CASCADE_STEP: usize = 3;

impl<T> Wheel<T> {
    /// Creates an empty wheel whose time starts at tick 0.
    ///
    /// # Panics
    ///
    /// If `wheel_size < 2` (the builder checks this with a friendlier
    /// message first).
    pub(crate) fn new(wheel_size: usize) -> Wheel<T> {
        assert!(wheel_size >= 2, "a wheel needs at least 2 slots");
        let wheel_size = wheel_size as u64;
        Wheel {
            entries: Slab::new(),
            levels: vec![Level::new(0, wheel_size).expect("level 0 always fits")],
            queue: BucketQueue::default(),
            due: List::new(),
            elapsed: 0,
            wheel_size,
            cascaded: 0,
            lowest_by_log: lowest_levels_by_log(wheel_size),
            draining: None,
        }
    }

    /// The wheel's current time, in ticks.
    pub(crate) fn elapsed(&self) -> u64 {
        self.elapsed
    }

    /// How many entries have been reinserted from a coarse bucket into a
    /// finer one (not counting those that became due).
    pub(crate) fn cascaded(&self) -> u64 {
        self.cascaded
    }

    /// How many entries the wheel holds, filed or not.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// How many entries the wheel can hold without reallocating its slab.
    pub(crate) fn capacity(&self) -> usize {
        self.entries.capacity()
    }

    /// Makes room for at least `additional` more entries (see
    /// [`Slab::reserve`]).
    pub(crate) fn reserve(&mut self, additional: usize) {
        self.entries.reserve(additional);
    }

    /// Returns unused memory: the slab's vacant slots past its highest
    /// entry, and the bucket queue's spare room. No entry moves, so every
    /// key stays valid; later insertions reuse the lowest free slots first.
    pub(crate) fn shrink_to_fit(&mut self) {
        if self.entries.is_empty() {
            self.release();
        } else {
            self.entries.shrink_to_fit();
            self.queue.shrink_to_fit();
        }
    }

    /// Frees everything an empty wheel holds beyond a fresh one's: the
    /// slab, the bucket queue (whose items can only name emptied buckets)
    /// and the overflow levels. The wheel's time stays.
    fn release(&mut self) {
        debug_assert!(self.entries.is_empty());
        self.entries = Slab::new();
        self.queue = BucketQueue::default();
        self.due = List::new();
        self.draining = None;
        self.levels.truncate(1);
        for bucket in self.levels[0].buckets.iter_mut() {
            bucket.list = List::new();
            bucket.expiration = None;
        }
    }

    /// The value of entry `key`, if there is one.
    pub(crate) fn get(&self, key: Key) -> Option<&T> {
        self.entries.get(key).map(|entry| &entry.value)
    }

    /// How many levels exist (they are created lazily).
    #[cfg(test)]
    pub(crate) fn level_count(&self) -> usize {
        self.levels.len()
    }

    /// Adds an entry due at `deadline` and files it.
    ///
    /// Returns its key and the tick at which it will next come out of the
    /// bucket queue (its bucket's start, or the current time if it is already
    /// due), so the caller can tell whether its sleep must be shortened.
    ///
    /// # Panics
    ///
    /// If the wheel already holds [`MAX_ENTRIES`](list::MAX_ENTRIES) - 1
    /// entries (hundreds of gigabytes of timers).
    #[inline(always)]
    #[track_caller]
    pub(crate) fn insert(&mut self, deadline: u64, value: T) -> (Key, u64) {
        self.check_room();
        // Linked before it is in the slab, so the new entry is written
        // once, whole, instead of looked up again for each field filing sets.
        let key = self.entries.vacant_key();
        let (links, place, due_at) = self.link(key, deadline);
        let inserted = self.entries.insert(Entry {
            value,
            deadline,
            links,
            place,
        });
        debug_assert_eq!(inserted, key, "the slab fills its vacant key first");
        (key, due_at)
    }

    /// Adds an entry due at `deadline` without filing it: it will not come
    /// due until it is reset (for an entry its owner files later).
    ///
    /// # Panics
    ///
    /// If the wheel already holds [`MAX_ENTRIES`](list::MAX_ENTRIES) - 1
    /// entries (hundreds of gigabytes of timers).
    #[cfg(any(test, fuzzing))]
    #[track_caller]
    pub(crate) fn insert_unfiled(&mut self, deadline: u64, value: T) -> Key {
        self.check_room();
        self.entries.insert(Entry {
            value,
            deadline,
            links: Links::UNLINKED,
            place: Place::UNFILED,
        })
    }

    /// Panics if the wheel cannot take one more entry (its links are 32 bits).
    #[inline]
    #[track_caller]
    fn check_room(&self) {
        assert!(
            self.entries.len() < list::MAX_ENTRIES - 1,
            "tiered-timer: more than {} timers in one shard",
            list::MAX_ENTRIES - 1
        );
    }

    /// The key the next insertion will get.
    pub(crate) fn vacant_key(&self) -> Key {
        self.entries.vacant_key()
    }

    /// Moves an entry to a new deadline (earlier or later), filing it again
    /// if it had been handed out or unfiled. Returns as [`Wheel::insert`].
    ///
    /// # Panics
    ///
    /// If `key` is not in the wheel.
    pub(crate) fn reset(&mut self, key: Key, deadline: u64) -> u64 {
        self.unfile(key);
        self.entries[key].deadline = deadline;
        self.file(key)
    }

    /// Takes an entry out of its bucket without removing it: it stays in the
    /// wheel, keeps its key, and will not come due until it is reset.
    /// Returns whether it was filed (in a bucket or found due).
    #[inline]
    pub(crate) fn unfile(&mut self, key: Key) -> bool {
        match Place::unpack(self.entries[key].place) {
            Place::Unfiled => return false,
            Place::Due => self.due.unlink(&mut self.entries, key),
            Place::Bucket(id) => {
                // An emptied bucket stays in the queue; it is dropped when it
                // reaches the head (see `next_expiration`).
                let bucket = &mut self.levels[id.level as usize].buckets[id.slot as usize];
                bucket.list.unlink(&mut self.entries, key);
            }
        }
        self.entries[key].place = Place::UNFILED;
        true
    }

    /// Removes an entry in O(1) and returns its value.
    ///
    /// # Panics
    ///
    /// If `key` is not in the wheel.
    #[inline]
    pub(crate) fn remove(&mut self, key: Key) -> T {
        self.remove_filed(key).0
    }

    /// As [`remove`](Self::remove), also saying whether the entry was
    /// filed (not handed out by a poll, nor unfiled).
    #[inline(always)]
    #[track_caller]
    pub(crate) fn remove_filed(&mut self, key: Key) -> (T, bool) {
        // Out of the slab first: its list only needs its neighbours
        // rewritten, so the entry is looked up once.
        let entry = self.entries.remove(key);
        let filed = match Place::unpack(entry.place) {
            Place::Unfiled => false,
            Place::Due => {
                self.due
                    .unlink_neighbours(&mut self.entries, key, entry.links);
                true
            }
            Place::Bucket(id) => {
                // As in `unfile`: an emptied bucket stays in the queue.
                let bucket = &mut self.levels[id.level as usize].buckets[id.slot as usize];
                bucket
                    .list
                    .unlink_neighbours(&mut self.entries, key, entry.links);
                true
            }
        };
        let value = entry.value;
        if self.entries.is_empty() && self.entries.capacity() > SHRINK_ABOVE {
            // A burst is over: give its memory back. (While entries remain,
            // freed slots are reused, so a steady load does not grow.)
            self.release();
        }
        (value, filed)
    }

    /// The value of entry `key`.
    pub(crate) fn get_mut(&mut self, key: Key) -> &mut T {
        &mut self.entries[key].value
    }

    /// The deadline of entry `key`, in ticks.
    pub(crate) fn deadline(&self, key: Key) -> u64 {
        self.entries[key].deadline
    }

    /// Whether entry `key` is waiting to come due.
    #[cfg(test)]
    pub(crate) fn is_filed(&self, key: Key) -> bool {
        self.entries[key].place != Place::UNFILED
    }

    /// All entries, filed or not, with their keys.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (Key, &mut T)> {
        self.entries
            .iter_mut()
            .map(|(key, entry)| (key, &mut entry.value))
    }

    /// Takes every entry out of its bucket (for shutdown): afterwards nothing
    /// comes due, while every key stays valid until removed.
    pub(crate) fn unfile_all(&mut self) {
        for level in &mut self.levels {
            for bucket in level.buckets.iter_mut() {
                bucket.list = List::new();
                bucket.expiration = None;
            }
        }
        self.due = List::new();
        self.queue = BucketQueue::default();
        self.draining = None;
        for (_, entry) in self.entries.iter_mut() {
            entry.links = Links::UNLINKED;
            entry.place = Place::UNFILED;
        }
    }

    /// The tick at which the next entry may come due: the earliest non-empty
    /// bucket's start, or the current time if entries are already due.
    /// `None` when nothing is filed.
    ///
    /// Buckets emptied by removals are discarded here, when they reach the
    /// head, so the caller never sleeps for them.
    pub(crate) fn next_expiration(&mut self) -> Option<u64> {
        if let Some(id) = self.draining {
            // Removals may have emptied it.
            if self.bucket_mut(id).list.is_empty() {
                self.draining = None;
            } else {
                return Some(self.elapsed);
            }
        }
        if !self.due.is_empty() {
            return Some(self.elapsed);
        }
        while let Some((expiration, id)) = self.queue.peek() {
            let bucket = self.bucket_mut(id);
            if bucket.expiration == Some(expiration) && !bucket.list.is_empty() {
                return Some(expiration);
            }
            self.discard_head(expiration, id);
        }
        None
    }

    /// An entry with the earliest deadline: the first already due if any,
    /// else a filed entry whose deadline no other beats (among equal
    /// deadlines, which one is unspecified). `None` when nothing is filed.
    ///
    /// Walks the non-empty buckets in order of their start until the
    /// start passes the best deadline found: for occasional use.
    pub(crate) fn peek(&self) -> Option<Key> {
        if let Some(key) = self.due.front() {
            return Some(key);
        }
        // Buckets of different levels may overlap (each level's rotation
        // slides with the wheel's time, as in Kafka's), so the earliest
        // deadline is in some bucket that starts no later than it.
        let mut buckets: Vec<(u64, BucketId)> = self
            .levels
            .iter()
            .enumerate()
            .flat_map(|(level, wheel)| {
                wheel
                    .buckets
                    .iter()
                    .enumerate()
                    .filter_map(move |(slot, bucket)| {
                        let expiration = bucket.expiration?;
                        let id = BucketId {
                            level: level as u8,
                            slot: slot as u32,
                        };
                        (!bucket.list.is_empty()).then_some((expiration, id))
                    })
            })
            .chain(self.draining.map(|id| (self.elapsed, id)))
            .collect();
        buckets.sort_unstable();
        let mut best: Option<(u64, Key)> = None;
        for (start, id) in buckets {
            if best.is_some_and(|(earliest, _)| start > earliest) {
                break;
            }
            let bucket = &self.levels[id.level as usize].buckets[id.slot as usize];
            for key in bucket.list.iter(&self.entries) {
                let deadline = self.entries[key].deadline;
                if best.is_none_or(|(earliest, _)| deadline < earliest) {
                    best = Some((deadline, key));
                }
            }
        }
        best.map(|(_, key)| key)
    }

    /// Hands out the next entry whose deadline is at or before `now`, in
    /// deadline order (entries due at the same tick come out in the order
    /// they were filed). Returns `None` once nothing more is due, and then
    /// advances the wheel's time to `now`.
    ///
    /// A returned entry stays in the wheel, unfiled: the caller removes it,
    /// resets it, or leaves it for its owner to remove.
    #[cfg(any(test, fuzzing))]
    pub(crate) fn poll(&mut self, now: u64) -> Option<Key> {
        loop {
            match self.poll_step(now) {
                Polled::Due(key) => return Some(key),
                Polled::Busy => {}
                Polled::Idle => return None,
            }
        }
    }

    /// One bounded step of polling: hands out the next due
    /// entry, or moves at most [`CASCADE_STEP`] entries of a coarse bucket
    /// that came due into finer buckets, or reports that nothing more is due
    /// by `now` (and moves the wheel's time to `now`).
    pub(crate) fn poll_step(&mut self, now: u64) -> Polled {
        loop {
            if let Some(key) = self.due.pop_front(&mut self.entries) {
                self.entries[key].place = Place::UNFILED;
                return Polled::Due(key);
            }
            if let Some(id) = self.draining {
                if id.level == 0 {
                    // A finest bucket spans one tick, so all of it is due
                    // now: hand its entries out straight from its list
                    // rather than moving each to the due list first.
                    let bucket = &mut self.levels[0].buckets[id.slot as usize];
                    if let Some(key) = bucket.list.pop_front(&mut self.entries) {
                        self.entries[key].place = Place::UNFILED;
                        return Polled::Due(key);
                    }
                    self.draining = None;
                    continue;
                }
                self.drain(id);
                if self.due.is_empty() && self.draining.is_some() {
                    return Polled::Busy;
                }
                continue;
            }
            match self.queue.peek() {
                Some((expiration, id)) if expiration <= now => {
                    self.queue.pop();
                    self.start_draining(expiration, id);
                }
                _ => {
                    // Every bucket due by `now` has been emptied, so moving
                    // time forward cannot strand an entry in a slot that a
                    // later rotation will reuse.
                    self.elapsed = self.elapsed.max(now);
                    return Polled::Idle;
                }
            }
        }
    }

    /// Lets entries due by `now` in buckets that came due go ahead of the
    /// rest of a bucket that is partly drained: moves up to `limit` of them
    /// to the front of what [`poll_step`](Self::poll_step) hands out next
    /// (behind entries already found due), looking at no more than `limit`
    /// entries. If the bucket partly drained is a finest one, its last
    /// `limit / 4` entries (its latest filings) are looked at first.
    /// Only entries whose value `may_overtake` accepts move; the others
    /// keep their place, so among themselves they still come out in
    /// deadline order. Returns how many moved.
    ///
    /// For a caller that drains in batches, between them: without it, an
    /// entry due a tick after a bucket of a million waits until that whole
    /// bucket has been handed out, batch after batch. Never early (only
    /// entries whose deadline is at or before `now` move), never lost or
    /// twice (each moves from one list to another); but deadline order then
    /// holds across batches only among the entries that may not overtake,
    /// so a caller that promises it for every entry (the delay queue) does
    /// not call this. A no-op unless a bucket is partly drained. Of a
    /// coarse bucket it looks at the first entries only, and goes no
    /// further: the rest waits for the bucket's turn.
    pub(crate) fn overtake(
        &mut self,
        now: u64,
        limit: usize,
        may_overtake: impl Fn(&T) -> bool,
    ) -> usize {
        let (mut moved, mut looked) = (0, 0);
        if let Some(id) = self.draining.filter(|id| id.level == 0) {
            // A finest bucket is all due: its latest filings (a registration
            // made after a coarse bucket was moved into it, say) get a share
            // of each batch too, rather than waiting behind all of it.
            let list = &mut self.levels[0].buckets[id.slot as usize].list;
            let mut cursor = list.back();
            while let Some(key) = cursor.filter(|_| looked < limit / 4) {
                looked += 1;
                cursor = list.prev(&self.entries, key);
                if may_overtake(&self.entries[key].value) {
                    list.unlink(&mut self.entries, key);
                    self.due.push_back(&mut self.entries, key);
                    self.entries[key].place = Place::DUE;
                    moved += 1;
                }
            }
        }
        while looked < limit && self.draining.is_some() {
            let Some((expiration, id)) = self.queue.peek() else {
                break;
            };
            if expiration > now {
                break;
            }
            // No slot is reused meanwhile: the wheel's time stays at or
            // before this bucket's start, so its level cannot yet cover the
            // slot's next rotation.
            let bucket = &mut self.levels[id.level as usize].buckets[id.slot as usize];
            if bucket.expiration != Some(expiration) {
                self.discard_head(expiration, id);
                continue;
            }
            let mut cursor = bucket.list.front();
            while let Some(key) = cursor.filter(|_| looked < limit) {
                looked += 1;
                cursor = bucket.list.next(&self.entries, key);
                let entry = &self.entries[key];
                if entry.deadline <= now && may_overtake(&entry.value) {
                    bucket.list.unlink(&mut self.entries, key);
                    self.due.push_back(&mut self.entries, key);
                    self.entries[key].place = Place::DUE;
                    moved += 1;
                }
            }
            if !bucket.list.is_empty() {
                break;
            }
            // Emptied: off the queue; filing into it again queues it.
            self.discard_head(expiration, id);
        }
        moved
    }

    /// Moves the wheel's time forward to `now` if nothing is due by then,
    /// as [`poll_step`](Self::poll_step) would, without handing anything out. Returns
    /// whether it did.
    ///
    /// The wheel's time otherwise moves only when something comes due, so
    /// after an idle stretch it lags the clock: deadlines filed then land in
    /// coarse buckets that already started, and passed deadlines are not
    /// recognised as passed. A caller that has read the clock anyway uses
    /// this to bring the wheel up to date.
    pub(crate) fn catch_up(&mut self, now: u64) -> bool {
        match self.next_expiration() {
            Some(next) if next <= now => false,
            _ => {
                self.elapsed = self.elapsed.max(now);
                true
            }
        }
    }

    /// Takes the bucket popped from the queue: advances time to its start;
    /// its entries are then reinserted by [`drain`](Wheel::drain), each
    /// either becoming due or going to a finer bucket.
    fn start_draining(&mut self, expiration: u64, id: BucketId) {
        let bucket = self.bucket_mut(id);
        if bucket.expiration != Some(expiration) {
            // A stale queue item; the bucket was already dealt with.
            return;
        }
        bucket.expiration = None;
        debug_assert!(expiration >= self.elapsed, "buckets come due in order");
        self.elapsed = self.elapsed.max(expiration);
        self.draining = Some(id);
    }

    /// Reinserts up to [`CASCADE_STEP`] entries of the bucket being drained.
    fn drain(&mut self, id: BucketId) {
        for _ in 0..CASCADE_STEP {
            let level = &mut self.levels[id.level as usize];
            let Some(key) = level.buckets[id.slot as usize]
                .list
                .pop_front(&mut self.entries)
            else {
                break;
            };
            self.entries[key].place = Place::UNFILED;
            self.file(key);
            if self.entries[key].place != Place::DUE {
                self.cascaded += 1;
            }
        }
        if self.bucket_mut(id).list.is_empty() {
            self.draining = None;
        }
    }

    /// Drops the queue's head, which names an empty or stale bucket.
    fn discard_head(&mut self, expiration: u64, id: BucketId) {
        self.queue.pop();
        let bucket = self.bucket_mut(id);
        if bucket.expiration == Some(expiration) {
            bucket.expiration = None;
        }
    }

    /// Files an unfiled entry by its deadline. Returns when it will come out
    /// of the queue: its bucket's start, or `elapsed` if it is already due.
    #[inline]
    fn file(&mut self, key: Key) -> u64 {
        let deadline = self.entries[key].deadline;
        debug_assert_eq!(self.entries[key].place, Place::UNFILED);
        let (links, place, due_at) = self.link(key, deadline);
        let entry = &mut self.entries[key];
        entry.links = links;
        entry.place = place;
        due_at
    }

    /// Appends `key`, due at `deadline`, to the list it belongs in (the due
    /// list, or its bucket, queuing the bucket if it was not), writing
    /// nothing of `key`'s own: returns the links and the packed place the
    /// entry must carry, and when it will come out of the queue (as
    /// [`file`](Self::file)). `key` may be one about to be inserted.
    #[inline(always)]
    fn link(&mut self, key: Key, deadline: u64) -> (Links, NonZeroU32, u64) {
        if deadline <= self.elapsed {
            let links = self.due.link_back(&mut self.entries, key);
            return (links, Place::DUE, self.elapsed);
        }
        let level = self.level_for(deadline);
        let wheel = &mut self.levels[level];
        let slot = wheel.slot_of(deadline);
        let start = wheel.bucket_start(deadline);
        let id = BucketId {
            level: level as u8,
            slot: slot as u32,
        };
        debug_assert_ne!(
            self.draining,
            Some(id),
            "filed into the bucket being drained"
        );
        let bucket = &mut wheel.buckets[slot];
        let links = bucket.list.link_back(&mut self.entries, key);
        if bucket.expiration != Some(start) {
            // The slot's previous rotation started before `elapsed`, so it
            // has been flushed (and its expiration cleared) already.
            debug_assert!(bucket.expiration.is_none(), "slot reused before flush");
            bucket.expiration = Some(start);
            self.queue.push(start, id);
        }
        (links, Place::Bucket(id).pack(), start)
    }

    /// The finest level whose current rotation covers `deadline`, creating
    /// overflow levels as needed.
    #[inline(always)]
    fn level_for(&mut self, deadline: u64) -> usize {
        let mut index = self.lowest_level_for(deadline);
        while let Some(level) = self.levels.get(index) {
            if level.covers(self.elapsed, deadline) {
                return index;
            }
            index += 1;
        }
        self.add_level_for(deadline)
    }

    /// Creates overflow levels until one covers `deadline` (none that
    /// exists does); returns its index. Out of line: rare, and it keeps
    /// the filing path short.
    #[inline(never)]
    fn add_level_for(&mut self, deadline: u64) -> usize {
        loop {
            let index = self.levels.len();
            let level = Level::new(index as u32, self.wheel_size)
                .expect("the level below covers every u64 deadline");
            let covers = level.covers(self.elapsed, deadline);
            self.levels.push(level);
            if covers {
                return index;
            }
        }
    }

    /// A level no finer than the one that covers `deadline` (which is after
    /// `elapsed`), found without a search when the wheel size is a power of
    /// two: level `n` spans `wheel_size^(n + 1)` ticks from a start at or
    /// before `elapsed`, so it cannot cover a deadline `2^k` or more ticks
    /// away unless `wheel_size^(n + 1) > 2^k`. Saves the registration path a
    /// walk up from level 0, and a table saves it the division.
    #[inline]
    fn lowest_level_for(&self, deadline: u64) -> usize {
        debug_assert!(deadline > self.elapsed);
        // `| 1`: a distance of 0 (never asked for) reads level 0, no panic.
        let log = ((deadline - self.elapsed) | 1).ilog2();
        usize::from(self.lowest_by_log[log as usize])
    }

    fn bucket_mut(&mut self, id: BucketId) -> &mut level::Bucket {
        &mut self.levels[id.level as usize].buckets[id.slot as usize]
    }
}
