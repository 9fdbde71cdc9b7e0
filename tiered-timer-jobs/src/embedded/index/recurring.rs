//! What the index keeps of a recurrence ([`Recurring`]) and what a
//! listing returns ([`Listed`]): plain values, apart from the calls that
//! change them (`recur.rs`), so that the index's root can hold them
//! without importing those calls.

use crate::data::recurrence::{LastRun, Recurrence};

/// A recurrence, as the index keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Recurring {
    pub(crate) version: u32,
    /// The stored texts (what a listing shows, and what compaction
    /// writes back).
    pub(crate) spec: Box<str>,
    pub(crate) zone: Box<str>,
    pub(crate) missed: Box<str>,
    /// The texts read back (`None` if this build cannot, e.g. a zone the
    /// system no longer has: its chain then stops after the occurrence
    /// waiting, which is still delivered).
    pub(crate) parsed: Option<Recurrence>,
    pub(crate) payload: Box<[u8]>,
    pub(crate) paused: bool,
    pub(crate) pending: Option<Pending>,
    /// The last occurrence delivered (ms).
    pub(crate) last: Option<u64>,
    /// Missed occurrences delivered in a row (see `Missed::RunAll`).
    pub(crate) run: u32,
}

/// The occurrence a recurrence waits for: its time, and the job's slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pending {
    pub(crate) at: u64,
    pub(crate) slot: u32,
    pub(crate) gen: u32,
}

/// A recurrence as listed: its name, what the index keeps, and what
/// became of its last occurrence's job (with its last error).
#[derive(Debug, Clone)]
pub(crate) struct Listed {
    pub(crate) name: String,
    pub(crate) recurring: Recurring,
    pub(crate) last_run: Option<LastRun>,
    pub(crate) last_error: Option<String>,
}
