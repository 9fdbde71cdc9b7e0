//! What [`repair`](crate::repair) did to an embedded queue's log.

use std::path::PathBuf;

/// What [`repair`](crate::repair) did to a queue's log.
///
/// # Examples
///
/// ```no_run
/// # async fn demo() -> Result<(), tiered_timer_jobs::Error> {
/// let done = tiered_timer_jobs::repair("file:///var/lib/shop/jobs", "orders").await?;
/// if let Some(kept) = &done.quarantined {
///     eprintln!("{} bytes set aside in {}", kept.len, kept.path.display());
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Repaired {
    /// The queue's log.
    pub log: PathBuf,
    /// Where its last whole frame ends: the log's length now.
    pub end: u64,
    /// Bytes of a torn last write (a crash in the middle of it, never
    /// acknowledged) that were cut off; 0 if none.
    pub torn: u64,
    /// The damaged last frame set aside, if there was one.
    pub quarantined: Option<Quarantined>,
}

/// A damaged last frame that [`repair`](crate::repair) moved out of a log.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Quarantined {
    /// The quarantine file beside the log, `<queue>.log.quarantine-<offset>`:
    /// the frame's bytes as they were.
    pub path: PathBuf,
    /// Where they started in the log.
    pub offset: u64,
    /// How many bytes.
    pub len: u64,
    /// What was wrong with them.
    pub reason: String,
}
