//! Read-only handles ([`Builder::read_only`](crate::Builder::read_only)):
//! looking at a queue without changing anything, while another process
//! may hold its store.
//!
//! Ground rules:
//!
//! * Nothing is written or created: the log is opened for reading only
//!   (no directory, lock file or log is created; a missing log is
//!   `NotFound`), and the store's lock is not taken, so a service can hold
//!   the store, or start, while an operator looks.
//! * The log is replayed into an index of the handle's own, as a reopen
//!   would (leases are not logged, only claims: a lease found counts as
//!   run out at its claim), but its end is left as it is: a torn write, or
//!   a frame the service is writing at that moment, is not read yet; a
//!   damaged last frame is not read either, and counts in
//!   `Stats::damaged_frames`.
//! * Before each look the handle follows the log ([`Shared::catch_up`]):
//!   it reads the frames appended since. A log replaced (compaction renamed
//!   a new one over it: another inode) or shorter than what was read (a
//!   failed frame cut off) is read again from the start. Bad bytes with
//!   whole frames after them may be a frame the service finished writing
//!   while the look read past it: they are read again once before they
//!   are called damage.
//! * Changes are refused ([`StoreError::ReadOnly`]), taken back in the
//!   index if a call got as far as deciding them (`store.rs`); claims are
//!   refused before they wait (`backend.rs`), so `next` never waits on a
//!   handle that cannot take a job. With no committer thread, reads of ids
//!   and payloads, and following the log, run on the blocking pool.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;

use super::error::StoreError;
use super::format::{self, Scanned, Tail};
use super::fs::{self as seam, LogFile, Mode};
use super::index::{Batch, Index, Now};
use super::open::{apply_frame, never_started, quarantined};
use super::store::{Follow, QueueLog, Shared};
use crate::data::clock::Clock;

/// Opens a read-only handle on queue `name`'s log in the store in `dir`.
/// Blocking: call it off the runtime.
///
/// # Errors
///
/// [`StoreError::Io`] (`NotFound` for a queue or store that does not
/// exist); [`StoreError::Corrupt`] for damage other than at the log's end.
pub(crate) fn open(dir: &Path, name: &str, clock: Clock) -> Result<Arc<QueueLog>, StoreError> {
    let path = super::names::log_path(dir, name);
    let (file, end, index, follow) = read_from_start(&path, &clock)?;
    Ok(QueueLog::read_only(
        name,
        Shared::new(path, file, end, index, Some(follow), clock),
    ))
}

/// Reads the log at `path` from its start into a new index.
fn read_from_start(
    path: &Path,
    clock: &Clock,
) -> Result<(LogFile, u64, Index, Follow), StoreError> {
    let file = seam::open(path, Mode::Read)
        .map_err(|e| StoreError::io(path, "opening the job log to look at it", e))?;
    let read_err = |e| StoreError::io(path, "reading the job log", e);
    let identity = file.identity().map_err(read_err)?;
    let mut index = Index::new(Now::of(clock).floor);
    let mut scanned = Scanned {
        end: 0,
        tail: Tail::Clean,
    };
    // A log whose creation has not finished has nothing to read yet.
    if !never_started(&file).map_err(read_err)? {
        let len = file.len().map_err(read_err)?;
        index.begin_replay();
        let read = read_whole_frames(path, &file, 0, len, &mut index);
        index.end_replay();
        scanned = read?;
    }
    let follow = Follow {
        identity,
        damaged_tail: matches!(scanned.tail, Tail::Damaged { .. }),
        stale: false,
    };
    Ok((file, scanned.end, index, follow))
}

/// Applies the whole frames from `from` to `len`; bad bytes with whole
/// frames after them are read again once (see the module docs).
fn read_whole_frames(
    path: &Path,
    file: &LogFile,
    from: u64,
    len: u64,
    index: &mut Index,
) -> Result<Scanned, StoreError> {
    let mut reached = from;
    for attempt in 0..2 {
        let mut record_error = false;
        let scanned = format::scan(path, file, reached, len, |at, body| {
            let applied = apply_frame(path, index, at, body);
            record_error = applied.is_err();
            if applied.is_ok() {
                reached = at + body.len() as u64;
            }
            applied
        });
        match scanned {
            Err(StoreError::Corrupt { .. }) if attempt == 0 && !record_error => {
                // Read again from the frame that looked damaged.
                continue;
            }
            other => return other,
        }
    }
    unreachable!("the loop returns on its second attempt")
}

impl Shared {
    /// A read-only handle's look at the log: reads what it gained since
    /// the last look (see the module docs). Does nothing for a handle of
    /// the process that owns the store. Blocking: call it off the runtime.
    ///
    /// # Errors
    ///
    /// [`StoreError::Io`]; [`StoreError::Corrupt`] for damage other than
    /// at the log's end (the next look reads it all again).
    pub(crate) fn catch_up(&self) -> Result<(), StoreError> {
        let mut guard = self.lock();
        let state = &mut *guard;
        let Some(follow) = &mut state.follow else {
            return Ok(());
        };
        let meta = match std::fs::metadata(&self.path) {
            Ok(meta) => meta,
            // Gone (an operator moved it away): keep what was read.
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(StoreError::io(&self.path, "looking at the job log", e)),
        };
        // Read it all (again) if nothing was read yet (a log whose
        // creation had not finished), or if what was read is in doubt.
        if state.end == 0
            || follow.stale
            || (meta.dev(), meta.ino()) != follow.identity
            || meta.len() < state.end
        {
            follow.stale = true;
            let (file, end, index, follow) = read_from_start(&self.path, &self.clock)?;
            state.file = Arc::new(file);
            state.end = end;
            state.index = index;
            state.batch = Batch::new(end);
            state.quarantined = quarantined(&self.path);
            state.follow = Some(follow);
            return Ok(());
        }
        if meta.len() == state.end {
            return Ok(());
        }
        state.index.begin_replay();
        let read = read_whole_frames(
            &self.path,
            &state.file,
            state.end,
            meta.len(),
            &mut state.index,
        );
        state.index.end_replay();
        match read {
            Ok(scanned) => {
                state.end = scanned.end;
                state.batch = Batch::new(scanned.end);
                follow.damaged_tail = matches!(scanned.tail, Tail::Damaged { .. });
                Ok(())
            }
            Err(error) => {
                follow.stale = true;
                Err(error)
            }
        }
    }
}
