//! Per-entry deadline words that a sleep can update without the timer lock.
//!
//! Every key of the wheel's slab has an `AtomicU64` here, in chunks that are
//! allocated (under the timer lock, before the key is handed out) and never
//! moved or freed while the timer lives, so a reader needs no lock. The word
//! holds the entry's *wanted* deadline, which may be later than the one it
//! is filed under: that is how a reset to a later deadline stays lock-free
//! (tokio does the same). When the driver takes the entry out of its bucket
//! it reads the word and either fires the entry or files it again.
//!
//! # Ground rules
//!
//! * Only the timer lock's holder stores `FIRED` or `SHUTDOWN`, or writes a
//!   word for a key it is handing out or re-filing.
//! * Without the lock, only the sleep that owns the key writes its word, and
//!   only with a compare-and-swap from one ordinary tick to a *later* one
//!   (see [`DeadlineTable::try_extend`]); a word that says `FIRED` or
//!   `SHUTDOWN`, or a move to an earlier tick, sends it to the locked path.
//! * So an entry is always filed at or before its word: the lock holder files
//!   it at the word's value, and without the lock the word only grows. The
//!   driver therefore always meets an entry no later than it is wanted.

use crate::sync::{AtomicU64, OnceLock, Ordering};
use crate::ticks::MAX_TICK;

/// The entry fired: its waker has been taken and woken.
pub(crate) const FIRED: u64 = u64::MAX;
/// The timer shut down before the entry fired.
pub(crate) const SHUTDOWN: u64 = u64::MAX - 1;

const FIRST_CHUNK: usize = 64;
/// Chunk `c` holds `FIRST_CHUNK << c` words: 40 chunks cover more keys than
/// any machine has memory for.
const CHUNKS: usize = 40;

/// What the driver should do with an entry that came out of its bucket.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Due {
    /// The entry's deadline has been reached; its word now says `FIRED`.
    Fire,
    /// The owner moved the deadline later, to this tick: file it again.
    Later(u64),
}

/// The deadline words, indexed by slab key.
#[derive(Debug)]
pub(crate) struct DeadlineTable {
    chunks: [OnceLock<Box<[AtomicU64]>>; CHUNKS],
}

impl DeadlineTable {
    pub(crate) fn new() -> DeadlineTable {
        DeadlineTable {
            chunks: std::array::from_fn(|_| OnceLock::new()),
        }
    }

    /// Makes sure `key` has a word, and stores `value` in it: for a key
    /// being handed out. Timer lock held.
    #[inline]
    pub(crate) fn init(&self, key: usize, value: u64) {
        let (chunk, index) = locate(key);
        let words = match self.chunks[chunk].get() {
            Some(words) => words,
            None => self.allocate(chunk),
        };
        words[index].store(value, Ordering::Release);
    }

    /// Allocates chunk `chunk` (the first key in it is being handed out).
    #[cold]
    fn allocate(&self, chunk: usize) -> &[AtomicU64] {
        self.chunks[chunk].get_or_init(|| {
            // Not an ordinary tick until the key's `init`.
            (0..FIRST_CHUNK << chunk)
                .map(|_| AtomicU64::new(FIRED))
                .collect()
        })
    }

    /// The word of `key`.
    ///
    /// # Panics
    ///
    /// If `init(key, _)` never ran: a bug in this crate.
    pub(crate) fn word(&self, key: usize) -> &AtomicU64 {
        let (chunk, index) = locate(key);
        &self.chunks[chunk]
            .get()
            .expect("deadline word used before init")[index]
    }

    /// Stores `value` for `key`. Timer lock held.
    pub(crate) fn set(&self, key: usize, value: u64) {
        self.word(key).store(value, Ordering::Release);
    }

    /// Reads the word of `key`.
    pub(crate) fn get(&self, key: usize) -> u64 {
        self.word(key).load(Ordering::Acquire)
    }

    /// The lock-free later reset: moves an unfired entry's wanted deadline
    /// to `tick`, if that is no earlier than the deadline it wants now.
    /// Returns `false`, changing nothing, if the entry has fired, the timer
    /// shut down, or `tick` is earlier, in which case the caller takes the
    /// lock. (Comparing with the wanted deadline, not the one the owner last
    /// filed, matters: the driver may have re-filed the entry at the wanted
    /// one since.)
    pub(crate) fn try_extend(&self, key: usize, tick: u64) -> bool {
        debug_assert!(tick <= MAX_TICK);
        let word = self.word(key);
        let mut current = word.load(Ordering::Acquire);
        loop {
            if current > MAX_TICK || tick < current {
                return false;
            }
            if tick == current {
                return true;
            }
            match word.compare_exchange_weak(current, tick, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return true,
                Err(actual) => current = actual,
            }
        }
    }

    /// Decides the fate of an entry that came out of its bucket at `now`.
    /// Timer lock held. Races only with the owner's `try_extend`: whichever
    /// compare-and-swap lands first wins, so a reset is never lost and an
    /// entry never fires twice.
    pub(crate) fn settle(&self, key: usize, now: u64) -> Due {
        let word = self.word(key);
        let mut current = word.load(Ordering::Acquire);
        loop {
            debug_assert!(
                current <= MAX_TICK,
                "a filed entry has an ordinary deadline"
            );
            if current > now {
                return Due::Later(current);
            }
            match word.compare_exchange_weak(current, FIRED, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Due::Fire,
                Err(actual) => current = actual,
            }
        }
    }
}

/// Chunk and index of `key`: chunk `c` starts at key `FIRST_CHUNK * (2^c - 1)`.
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
        assert_eq!(table.get(5), 20);
        assert_eq!(table.settle(5, 15), Due::Later(20));
        assert_eq!(table.settle(5, 20), Due::Fire);
        assert_eq!(table.get(5), FIRED);
        assert!(
            !table.try_extend(5, 30),
            "a fired entry needs the locked path"
        );
        table.set(5, SHUTDOWN);
        assert!(!table.try_extend(5, 30));
    }
}
