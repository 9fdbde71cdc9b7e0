//! Per-entry deadline words that a sleep can update without the timer lock.
//!
//! Every key of the wheel's slab has two words here, in chunks that are
//! allocated (under the timer lock, before the key is handed out) and never
//! moved or freed while the timer lives, so a reader needs no lock:
//!
//! * `wanted` (`AtomicU64`): the tick the entry's owner wants it to fire
//!   at. It may be later than the tick the entry is filed under: that is how
//!   a reset to a later deadline stays lock-free (tokio does the same). When
//!   the driver takes the entry out of its bucket it reads `wanted` and
//!   either fires the entry or files it again.
//! * `status` (`AtomicU8`): filed (waiting in the wheel), fired, or shut
//!   down.
//!
//! Plus one word per table, `fired_through`: a tick the clock has reached,
//! at least every tick the driver fired an entry at.
//!
//! Two words per entry rather than one so that neither side needs a
//! read-modify-write operation: each word has one writer at a time, and a
//! plain store is all either makes. (A compare-and-swap, which one word
//! shared by both sides would need, is a locked instruction: on some
//! machines it costs more than the rest of a reset together.)
//!
//! # Ground rules
//!
//! * `status` and `fired_through` are only written with the timer lock held
//!   (`fired_through` only upwards, and before the statuses of the entries
//!   fired at it).
//! * `wanted` is only written by the entry's owner: with the lock, when it
//!   registers or re-files its entry, or without it, by
//!   [`DeadlineTable::try_extend`], which only ever moves it *later*, and
//!   only while `status` says filed. (A callback's owner is the lock
//!   holder: nobody writes a callback's words without the lock.) So the
//!   owner always reads back its own latest value.
//! * The lock holder files an entry at its `wanted` tick, and without the
//!   lock `wanted` only grows: an entry is always filed at or before its
//!   `wanted` tick, and the driver meets it no later than it is wanted.
//! * The driver fires an entry whose `wanted` it read at or before `now`.
//!   The owner may have moved `wanted` later meanwhile (its store and the
//!   driver's read race): then the entry fired for a deadline it no longer
//!   has. So a fired entry counts as done only if its owner's `wanted` is at
//!   or before `fired_through` ([`DeadlineTable::is_done`]), a tick the
//!   clock has reached; otherwise its owner files it again, with the lock,
//!   when it next polls (the fire woke its waker, so it will). That keeps a
//!   sleep from completing early, and its reset from being lost.
//! * `status` is read without the lock only by the entry's owner, to decide
//!   whether its waker is still registered and its entry filed.

use crate::sync::{AtomicU64, AtomicU8, OnceLock, Ordering};
use crate::ticks::MAX_TICK;

/// `status`: not handed out yet (chunks start so).
const UNUSED: u8 = 0;
/// `status`: the entry waits in the wheel (or in its due list).
const FILED: u8 = 1;
/// `status`: the driver fired the entry.
const FIRED: u8 = 2;
/// `status`: the timer shut down before the entry fired.
const SHUTDOWN: u8 = 3;

const FIRST_CHUNK: usize = 64;
/// Chunk `c` holds `FIRST_CHUNK << c` keys: 40 chunks cover more keys than
/// any machine has memory for.
const CHUNKS: usize = 40;

/// What the driver should do with an entry that came out of its bucket.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Due {
    /// The entry's deadline has been reached; its status now says so.
    Fire,
    /// The owner moved the deadline later, to this tick: file it again.
    Later(u64),
}

/// An entry's `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    /// Waiting in the wheel: it will fire, at its `wanted` tick or earlier
    /// (and then be judged by [`DeadlineTable::is_done`]).
    Filed,
    /// The driver fired it.
    Fired,
    /// The timer shut down before it fired.
    Shutdown,
}

/// The words of `FIRST_CHUNK << c` keys.
#[derive(Debug)]
struct Chunk {
    wanted: Box<[AtomicU64]>,
    status: Box<[AtomicU8]>,
}

/// The deadline words, indexed by slab key.
#[derive(Debug)]
pub(crate) struct DeadlineTable {
    chunks: [OnceLock<Chunk>; CHUNKS],
    /// A tick the clock has reached, at least every tick an entry was
    /// fired at: the latest `now` of a driver turn that fired one. Only the
    /// lock holder writes it, and only upwards.
    fired_through: AtomicU64,
}

impl DeadlineTable {
    pub(crate) fn new() -> DeadlineTable {
        DeadlineTable {
            chunks: std::array::from_fn(|_| OnceLock::new()),
            fired_through: AtomicU64::new(0),
        }
    }

    /// Makes sure `key` has its words, and files it at `tick`: for a key
    /// being handed out. Timer lock held.
    #[inline]
    pub(crate) fn init(&self, key: usize, tick: u64) {
        let (chunk, index) = locate(key);
        let chunk = match self.chunks[chunk].get() {
            Some(words) => words,
            None => self.allocate(chunk),
        };
        chunk.wanted[index].store(tick, Ordering::Release);
        chunk.status[index].store(FILED, Ordering::Release);
    }

    /// Allocates chunk `chunk` (the first key in it is being handed out).
    #[cold]
    fn allocate(&self, chunk: usize) -> &Chunk {
        self.chunks[chunk].get_or_init(|| {
            // Every key's words are written by its `init` before use.
            let len = FIRST_CHUNK << chunk;
            Chunk {
                wanted: (0..len).map(|_| AtomicU64::new(0)).collect(),
                status: (0..len).map(|_| AtomicU8::new(UNUSED)).collect(),
            }
        })
    }

    /// The chunk of `key`, and `key`'s index in it.
    ///
    /// # Panics
    ///
    /// If `init(key, _)` never ran: a bug in this crate.
    #[inline]
    fn chunk(&self, key: usize) -> (&Chunk, usize) {
        let (chunk, index) = locate(key);
        let chunk = self.chunks[chunk]
            .get()
            .expect("deadline word used before init");
        (chunk, index)
    }

    fn wanted_word(&self, key: usize) -> &AtomicU64 {
        let (chunk, index) = self.chunk(key);
        &chunk.wanted[index]
    }

    #[inline]
    fn status_word(&self, key: usize) -> &AtomicU8 {
        let (chunk, index) = self.chunk(key);
        &chunk.status[index]
    }

    /// Files `key` again at `tick` (its owner re-files it). Timer lock held.
    pub(crate) fn file(&self, key: usize, tick: u64) {
        debug_assert!(tick <= MAX_TICK);
        let (chunk, index) = self.chunk(key);
        chunk.wanted[index].store(tick, Ordering::Release);
        chunk.status[index].store(FILED, Ordering::Release);
    }

    /// Records that `key`, unfiled, is done at `tick`: its owner asked for
    /// a deadline the clock has reached. Timer lock held.
    pub(crate) fn complete(&self, key: usize, tick: u64) {
        debug_assert!(tick <= MAX_TICK);
        self.fired_through(tick);
        let (chunk, index) = self.chunk(key);
        chunk.wanted[index].store(tick, Ordering::Release);
        chunk.status[index].store(FIRED, Ordering::Release);
    }

    /// Raises [`fired_through`](Self::fired_through) to `now`, a tick the
    /// clock has reached. Timer lock held (so a load and a store suffice).
    fn fired_through(&self, now: u64) {
        if self.fired_through.load(Ordering::Relaxed) < now {
            self.fired_through.store(now, Ordering::Release);
        }
    }

    /// Marks a key that has not fired as shut down. Timer lock held.
    pub(crate) fn shut_down(&self, key: usize) {
        let status = self.status_word(key);
        if status.load(Ordering::Acquire) == FILED {
            status.store(SHUTDOWN, Ordering::Release);
        }
    }

    /// Marks `key` as shut down, whatever its status: its owner reset it
    /// after the timer shut down. Timer lock held.
    pub(crate) fn mark_shutdown(&self, key: usize) {
        self.status_word(key).store(SHUTDOWN, Ordering::Release);
    }

    /// The status of `key`.
    #[inline]
    pub(crate) fn status(&self, key: usize) -> Status {
        match self.status_word(key).load(Ordering::Acquire) {
            FILED => Status::Filed,
            FIRED => Status::Fired,
            SHUTDOWN => Status::Shutdown,
            _ => unreachable!("deadline word used before init"),
        }
    }

    /// The tick `key`'s owner wants. Read by the owner (its own latest
    /// store) or under the lock.
    pub(crate) fn wanted(&self, key: usize) -> u64 {
        self.wanted_word(key).load(Ordering::Acquire)
    }

    /// Whether `key` fired and is done for the tick its owner wants: the
    /// clock had reached that tick when it fired (or since). Otherwise it
    /// fired for a deadline its owner has since moved later. Read by the
    /// owner (or under the lock).
    pub(crate) fn is_done(&self, key: usize) -> bool {
        let (chunk, index) = self.chunk(key);
        // `fired_through` was raised before the status was stored: reading
        // `FIRED` (acquire) makes the value of that turn, or a later one,
        // visible.
        chunk.status[index].load(Ordering::Acquire) == FIRED
            && chunk.wanted[index].load(Ordering::Relaxed)
                <= self.fired_through.load(Ordering::Acquire)
    }

    /// The lock-free later reset, by the owner of a filed entry: moves its
    /// wanted tick to `tick`, if that is no earlier than the one it wants
    /// now. Returns `false`, changing nothing, if the entry is not filed
    /// (it fired, or the timer shut down) or `tick` is earlier, in which
    /// case the caller takes the lock. Loads and a store: no
    /// read-modify-write (see the module's ground rules for the race with
    /// the driver this leaves, and how a poll settles it).
    #[inline]
    pub(crate) fn try_extend(&self, key: usize, tick: u64) -> bool {
        debug_assert!(tick <= MAX_TICK);
        let (chunk, index) = self.chunk(key);
        let wanted = &chunk.wanted[index];
        // The owner's own latest store: no ordering needed to read it.
        let current = wanted.load(Ordering::Relaxed);
        if tick < current || chunk.status[index].load(Ordering::Acquire) != FILED {
            return false;
        }
        if tick != current {
            wanted.store(tick, Ordering::Release);
        }
        true
    }

    /// Decides the fate of an entry that came out of its bucket at `now`.
    /// Timer lock held.
    #[inline]
    pub(crate) fn settle(&self, key: usize, now: u64) -> Due {
        debug_assert!(now <= MAX_TICK);
        let (chunk, index) = self.chunk(key);
        debug_assert_eq!(chunk.status[index].load(Ordering::Relaxed), FILED);
        let wanted = chunk.wanted[index].load(Ordering::Acquire);
        if wanted > now {
            return Due::Later(wanted);
        }
        self.fired_through(now);
        chunk.status[index].store(FIRED, Ordering::Release);
        Due::Fire
    }
}

/// Chunk and index of `key`: chunk `c` starts at key `FIRST_CHUNK * (2^c - 1)`.
#[inline]
fn locate(key: usize) -> (usize, usize) {
    let biased = key + FIRST_CHUNK;
    let chunk =
        (usize::BITS - 1 - biased.leading_zeros()) as usize - FIRST_CHUNK.trailing_zeros() as usize;
    (chunk, biased - (FIRST_CHUNK << chunk))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_map_to_distinct_words() {
        let mut seen = std::collections::HashSet::new();
        for key in 0..10_000 {
            let (chunk, index) = locate(key);
            assert!(index < FIRST_CHUNK << chunk);
            assert!(seen.insert((chunk, index)));
        }
        assert_eq!(locate(0), (0, 0));
        assert_eq!(locate(63), (0, 63));
        assert_eq!(locate(64), (1, 0));
        assert_eq!(locate(191), (1, 127));
        assert_eq!(locate(192), (2, 0));
    }

    #[test]
    fn extend_and_settle() {
        let table = DeadlineTable::new();
        table.init(5, 10);
        assert!(table.try_extend(5, 20));
        assert!(
            !table.try_extend(5, 15),
            "earlier than wanted needs the lock"
        );
        assert_eq!(table.wanted(5), 20);
        assert_eq!(table.settle(5, 15), Due::Later(20));
        assert_eq!(table.settle(5, 20), Due::Fire);
        assert_eq!(table.status(5), Status::Fired);
        assert!(table.is_done(5));
        assert!(
            !table.try_extend(5, 30),
            "a fired entry needs the locked path"
        );
        table.file(5, 30);
        assert!(!table.is_done(5));
        table.shut_down(5);
        assert_eq!(table.status(5), Status::Shutdown);
        assert!(!table.try_extend(5, 40));
    }

    /// The race the ground rules allow: the owner's later reset lands after
    /// the driver read the old tick and fired. The entry is then not done
    /// for what its owner wants, until the clock reaches that.
    #[test]
    fn a_fire_for_a_superseded_tick_is_not_done() {
        let table = DeadlineTable::new();
        table.init(3, 10);
        // The driver reads 10 and fires at 12; the owner's store of 30 is
        // ordered after the read but checked `status` before the fire.
        assert_eq!(table.settle(3, 12), Due::Fire);
        table.wanted_word(3).store(30, Ordering::Release);
        assert_eq!(table.status(3), Status::Fired);
        assert!(!table.is_done(3));
        // Filed again, it fires for 30 only at 30.
        table.file(3, 30);
        assert_eq!(table.settle(3, 29), Due::Later(30));
        assert_eq!(table.settle(3, 30), Due::Fire);
        assert!(table.is_done(3));
    }

    /// `is_done` compares with the latest turn that fired anything: an
    /// entry fired at 12 whose owner now wants 20 is done once any entry
    /// fired at 20 or later (the clock has reached 20).
    #[test]
    fn a_later_turn_makes_a_superseded_fire_done() {
        let table = DeadlineTable::new();
        table.init(0, 10);
        table.init(1, 25);
        assert_eq!(table.settle(0, 12), Due::Fire);
        table.wanted_word(0).store(20, Ordering::Release);
        assert!(!table.is_done(0));
        assert_eq!(table.settle(1, 25), Due::Fire);
        assert!(table.is_done(0));
    }

    #[test]
    fn a_shut_down_timer_keeps_what_fired() {
        let table = DeadlineTable::new();
        table.init(0, 5);
        table.init(1, 5);
        assert_eq!(table.settle(0, 5), Due::Fire);
        table.shut_down(0);
        table.shut_down(1);
        assert_eq!(table.status(0), Status::Fired);
        assert_eq!(table.status(1), Status::Shutdown);
        table.complete(1, 4);
        assert!(table.is_done(1));
    }
}
