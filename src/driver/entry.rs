//! An entry's key as sleeps and callbacks hold it, and the outcome of
//! filing one: the words the async layer and the driver's shared state
//! exchange. A leaf of the driver: it imports only the wheel's key.

use crate::wheel::Key;

/// An entry's key as sleeps and callbacks hold it: its shard and its key in
/// that shard's wheel, packed in one word.
pub(crate) type EntryKey = usize;

/// Low bits of an [`EntryKey`] that name the shard.
const SHARD_BITS: u32 = 6;
/// Most shards a timer has.
pub(crate) const MAX_SHARDS: usize = 1 << SHARD_BITS;

pub(crate) fn pack(shard: usize, key: Key) -> EntryKey {
    debug_assert!(shard < MAX_SHARDS);
    (key << SHARD_BITS) | shard
}

pub(crate) fn unpack(key: EntryKey) -> (usize, Key) {
    (key & (MAX_SHARDS - 1), key >> SHARD_BITS)
}

/// The outcome of asking the timer to file a sleep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Filing {
    /// Filed under `key`.
    Filed { key: EntryKey },
    /// Its deadline has already been reached.
    Elapsed,
    /// The timer has shut down.
    Shutdown,
}
