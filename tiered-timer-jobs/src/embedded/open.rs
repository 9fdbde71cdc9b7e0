//! Opening a queue's log: creating it so that a power cut cannot leave a
//! log that never opens, and replaying it into an index.
//!
//! Ground rules:
//!
//! * A store's directory is made, and its parent synced, before anything
//!   goes in it; a log is created whole or not at all: its header is
//!   written to `<queue>.log.new`, synced, renamed to `<queue>.log`, and
//!   the directory synced. A power cut in the middle leaves no log (the
//!   next open creates it) or a whole one, never a log of zeros (a length
//!   that reached the disk without its data), which would not open.
//! * A log of less than a header, or of a header of zeros and nothing
//!   else, was left by a creation that never finished (by an older
//!   version, which wrote the header in place): nothing was ever written
//!   to it, so it is created again.

use std::io;
use std::path::Path;

use super::error::StoreError;
use super::format::{self, Tail, FILE_HEADER};
use super::fs::{self as seam, LogFile, Mode};
use super::index::{Index, Now};

/// Opens and replays the log at `path` (creating it if needed): the file,
/// its durable end, the index.
pub(crate) fn replay(path: &Path, now: Now) -> Result<(LogFile, u64, Index), StoreError> {
    let file = open_or_start(path)?;
    let len = file
        .len()
        .map_err(|e| StoreError::io(path, "reading the job log's length", e))?;
    let mut index = Index::new(now.floor);
    index.begin_replay();
    let scanned = format::scan(path, &file, 0, len, |at, body| {
        let mut records = format::Records::new(body);
        loop {
            let offset = at + records.position() as u64;
            let Some(record) = records.next_record() else {
                return Ok(());
            };
            let record = record.map_err(|reason| StoreError::corrupt(path, offset, reason))?;
            let data = offset + format::NEW_ID_AT as u64;
            index
                .apply(&record, data)
                .map_err(|reason| StoreError::corrupt(path, offset, reason))?;
        }
    })?;
    index.end_replay();
    match scanned.tail {
        Tail::Clean => {}
        Tail::Torn { len } => cut_torn_write(path, &file, scanned.end, len)?,
        Tail::Damaged { len, reason } => return Err(damaged_tail(path, scanned.end, len, reason)),
    }
    index.advance(now.floor);
    Ok((file, scanned.end, index))
}

/// Cuts a torn last write (`len` bytes from `end`) off the log: it was
/// never acknowledged (see `format.rs`).
pub(crate) fn cut_torn_write(
    path: &Path,
    file: &LogFile,
    end: u64,
    len: u64,
) -> Result<(), StoreError> {
    tracing::warn!(
        path = %path.display(),
        offset = end,
        len,
        "cutting a torn write (a crash in the middle of it; never acknowledged) off the end of the job log"
    );
    file.set_len(end)
        .and_then(|()| file.sync_all())
        .map_err(|e| StoreError::io(path, "cutting a torn write off the job log", e))
}

/// The error for a log whose last frame is whole but damaged: the store
/// does not open until an operator decides (`ttr repair` sets it aside).
fn damaged_tail(path: &Path, end: u64, len: u64, reason: &str) -> StoreError {
    let queue = queue_of(path);
    tracing::warn!(path = %path.display(), offset = end, len, reason, "the job log ends in a damaged frame; it is left as it is");
    StoreError::corrupt(
        path,
        end,
        format!(
            "{reason} ({len} bytes to the end of the file); nothing was cut: \
             `ttr repair {queue}` (or tiered_timer_jobs::repair) moves them to a quarantine \
             file beside the log"
        ),
    )
}

/// The queue a log is of (its file name without `.log`).
pub(crate) fn queue_of(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Opens the log at `path`, first creating it (whole) if there is none,
/// or only the remains of a creation that never finished.
fn open_or_start(path: &Path) -> Result<LogFile, StoreError> {
    let opening = |e| StoreError::io(path, "opening the job log", e);
    match seam::open(path, Mode::Write) {
        Ok(file) if !never_started(&file).map_err(opening)? => return Ok(file),
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(opening(e)),
    }
    start_log(path)?;
    seam::open(path, Mode::Write).map_err(opening)
}

/// Whether `file` is what a creation that never finished left: less than
/// a header, or a header of zeros and nothing after it.
fn never_started(file: &LogFile) -> io::Result<bool> {
    let len = file.len()?;
    if len < FILE_HEADER as u64 {
        return Ok(true);
    }
    if len > FILE_HEADER as u64 {
        return Ok(false);
    }
    let mut header = [0u8; FILE_HEADER];
    file.read_exact_at(&mut header, 0)?;
    Ok(header.iter().all(|&b| b == 0))
}

/// Creates the log at `path` with its header, whole or not at all: the
/// header goes to a new file, synced, renamed over `path`, and the
/// directory is synced.
fn start_log(path: &Path) -> Result<(), StoreError> {
    let new = path.with_extension("log.new");
    let starting = |e| StoreError::io(&new, "starting the job log", e);
    let file = seam::open(&new, Mode::Truncate).map_err(starting)?;
    file.write_all_at(&format::file_header(), 0)
        .and_then(|()| file.sync_all())
        .map_err(starting)?;
    drop(file);
    seam::rename(&new, path).map_err(starting)?;
    sync_dir(path)
}

/// Syncs the directory holding `path` (a new or renamed file's entry).
pub(crate) fn sync_dir(path: &Path) -> Result<(), StoreError> {
    let dir = seam::parent(path);
    seam::sync_dir(dir).map_err(|e| StoreError::io(dir, "syncing the directory", e))
}

/// Makes `dir` and its missing parents, each durable (its parent synced)
/// before anything is put in it: a power cut could otherwise forget the
/// store's directory, and with it every job confirmed since.
pub(crate) fn create_dir_all(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let parent = dir.parent().filter(|p| !p.as_os_str().is_empty());
    if let Some(parent) = parent {
        create_dir_all(parent)?;
    }
    match seam::create_dir(dir) {
        Ok(()) => seam::sync_dir(parent.unwrap_or(Path::new("."))),
        // Made meanwhile by another process, which syncs it.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        Err(e) => Err(e),
    }
}
