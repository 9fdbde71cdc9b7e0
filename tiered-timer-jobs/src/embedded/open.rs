//! Opening a queue's log: creating it so that a power cut cannot leave a
//! log that never opens, replaying it into an index, and repairing a log
//! whose last frame is damaged.
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
//! * The end of a log (`format.rs`): a torn write is cut off on open, with
//!   a warning; a damaged last frame makes open fail until an operator
//!   repairs it ([`repair_log`], `ttr repair`), which moves its bytes to
//!   `<queue>.log.quarantine-<offset>` beside the log (synced, and the
//!   directory synced, before the log is cut: a crash in the middle leaves
//!   both, and repairing again writes the same file), warns, and counts it
//!   in the queue's stats from then on (`damaged_frames`), as RocksDB's
//!   and LevelDB's recovery keeps what it cannot read. Deleting the file
//!   (once its jobs are accounted for) takes it out of the count.

use std::io;
use std::path::{Path, PathBuf};

use super::error::StoreError;
use super::format::{self, Tail, FILE_HEADER};
use super::fs::{self as seam, LogFile, Mode};
use super::index::{Index, Now};
use crate::targets;

/// Opens and replays the log at `path` (creating it if needed): the file,
/// its durable end, the index.
pub(crate) fn replay(path: &Path, now: Now) -> Result<(LogFile, u64, Index), StoreError> {
    let file = open_or_start(path)?;
    let len = file
        .len()
        .map_err(|e| StoreError::io(path, "reading the job log's length", e))?;
    let mut index = Index::new(now.floor);
    index.begin_replay();
    let scanned = apply_log(path, &file, 0, len, &mut index)?;
    index.end_replay();
    match scanned.tail {
        Tail::Clean => {}
        Tail::Torn { len } => cut_torn_write(path, &file, scanned.end, len)?,
        Tail::Damaged { len, reason } => return Err(damaged_tail(path, scanned.end, len, reason)),
    }
    upgrade_header(path, &file)?;
    index.advance(now.floor);
    Ok((file, scanned.end, index))
}

/// Rewrites the header of a log of an older format version to this
/// version's, before anything of this version is appended (see
/// `format.rs`, "Versions"): one write inside the first sector, synced, so
/// a power cut leaves the old header or the new one.
fn upgrade_header(path: &Path, file: &LogFile) -> Result<(), StoreError> {
    let upgrading = |e| StoreError::io(path, "upgrading the job log's format version", e);
    if format::version_of(file).map_err(upgrading)? == format::VERSION {
        return Ok(());
    }
    tracing::info!(target: targets::EMBEDDED, path = %path.display(), from = format::version_of(file).unwrap_or(0), to = format::VERSION, "upgrading the job log's format version");
    file.write_all_at(&format::file_header(), 0)
        .and_then(|()| file.sync_data())
        .map_err(upgrading)
}

/// Applies the records of the whole frames of the log at `path` (open as
/// `file`, `len` bytes long) from byte `from` (0: its header first) to
/// `index`; how the log ended. The caller brackets a replay with
/// `begin_replay` and `end_replay`.
///
/// # Errors
///
/// As [`format::scan`]; [`StoreError::Corrupt`] for a record that makes
/// no sense (the frames before it are applied).
pub(crate) fn apply_log(
    path: &Path,
    file: &LogFile,
    from: u64,
    len: u64,
    index: &mut Index,
) -> Result<format::Scanned, StoreError> {
    format::scan(path, file, from, len, |at, body| {
        apply_frame(path, index, at, body)
    })
}

/// Applies the records of one frame (its body at `at` in the file).
pub(crate) fn apply_frame(
    path: &Path,
    index: &mut Index,
    at: u64,
    body: &[u8],
) -> Result<(), StoreError> {
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
}

/// Cuts a torn last write (`len` bytes from `end`) off the log: it was
/// never acknowledged (see `format.rs`).
pub(crate) fn cut_torn_write(
    path: &Path,
    file: &LogFile,
    end: u64,
    len: u64,
) -> Result<(), StoreError> {
    tracing::warn!(target: targets::EMBEDDED,
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
    let queue = super::names::queue_of(path);
    tracing::warn!(target: targets::EMBEDDED, path = %path.display(), offset = end, len, reason, "the job log ends in a damaged frame; it is left as it is");
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

/// What [`repair_log`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LogRepair {
    /// Where the log's last whole frame ends: its length now.
    pub(crate) end: u64,
    /// Bytes of a torn last write cut off (0: none).
    pub(crate) torn: u64,
    /// A damaged last frame set aside: the quarantine file, how many bytes,
    /// and what was wrong.
    pub(crate) quarantined: Option<(PathBuf, u64, &'static str)>,
}

/// Repairs the end of the log at `path` (whose store this process holds,
/// and whose queue it does not have open): cuts a torn write off, or moves
/// a damaged last frame to a quarantine file. Damage followed by whole
/// frames is not repaired (an error, as on open).
pub(crate) fn repair_log(path: &Path) -> Result<LogRepair, StoreError> {
    let file = seam::open(path, Mode::Write)
        .map_err(|e| StoreError::io(path, "opening the job log", e))?;
    if never_started(&file).map_err(|e| StoreError::io(path, "reading the job log", e))? {
        // Its creation never finished: the next open starts it.
        return Ok(LogRepair {
            end: 0,
            torn: 0,
            quarantined: None,
        });
    }
    let len = file
        .len()
        .map_err(|e| StoreError::io(path, "reading the job log's length", e))?;
    let scanned = format::scan(path, &file, 0, len, |_, _| Ok(()))?;
    let mut repair = LogRepair {
        end: scanned.end,
        torn: 0,
        quarantined: None,
    };
    match scanned.tail {
        Tail::Clean => {}
        Tail::Torn { len } => {
            cut_torn_write(path, &file, scanned.end, len)?;
            repair.torn = len;
        }
        Tail::Damaged { len, reason } => {
            let kept = quarantine(path, &file, scanned.end, len, reason)?;
            repair.quarantined = Some((kept, len, reason));
        }
    }
    Ok(repair)
}

/// Moves the `len` bytes from `end` to a quarantine file beside the log,
/// durably, then cuts them off the log.
fn quarantine(
    path: &Path,
    file: &LogFile,
    end: u64,
    len: u64,
    reason: &str,
) -> Result<PathBuf, StoreError> {
    let kept = quarantine_path(path, end);
    let mut bytes = vec![0u8; len as usize];
    file.read_exact_at(&mut bytes, end)
        .map_err(|e| StoreError::io(path, "reading the damaged end of the job log", e))?;
    let writing = |e| StoreError::io(&kept, "writing the quarantine file", e);
    let out = seam::open(&kept, Mode::Truncate).map_err(writing)?;
    out.write_all_at(&bytes, 0)
        .and_then(|()| out.sync_all())
        .map_err(writing)?;
    drop(out);
    sync_dir(&kept)?;
    file.set_len(end)
        .and_then(|()| file.sync_all())
        .map_err(|e| StoreError::io(path, "cutting the damaged end off the job log", e))?;
    tracing::warn!(target: targets::EMBEDDED,
        path = %path.display(),
        offset = end,
        len,
        quarantine = %kept.display(),
        reason,
        "moved the damaged last frame of a job log to a quarantine file"
    );
    Ok(kept)
}

/// Where the damaged bytes from `offset` of the log at `path` are kept.
fn quarantine_path(path: &Path, offset: u64) -> PathBuf {
    super::names::beside(path, &format!(".quarantine-{offset}"))
}

/// How many quarantine files lie beside the log at `path`.
pub(crate) fn quarantined(path: &Path) -> u64 {
    let mut prefix = path.file_name().unwrap_or_default().to_owned();
    prefix.push(".quarantine-");
    let prefix = prefix.to_string_lossy().into_owned();
    let Ok(entries) = std::fs::read_dir(seam::parent(path)) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .count() as u64
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
pub(crate) fn never_started(file: &LogFile) -> io::Result<bool> {
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
    let new = super::names::beside(path, ".new");
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
