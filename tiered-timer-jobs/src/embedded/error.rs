//! What can go wrong in the embedded store, with the file (and, for a
//! damaged log, the byte offset) it happened at.

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::data::error::Error;

/// An error of the embedded store.
#[derive(Debug)]
pub(crate) enum StoreError {
    /// The file system is full (`ENOSPC`, or a quota: `EDQUOT`). Nothing
    /// of the failed write is left in the log (it was cut back to its last
    /// complete frame), and the calls in it changed nothing; calls succeed
    /// again once there is room.
    NoSpace { path: PathBuf, source: io::Error },
    /// Another process has the store open (its directory's lock file is
    /// locked).
    Locked { path: PathBuf },
    /// A change on a read-only handle (`follow.rs`): nothing was changed.
    ReadOnly { path: PathBuf },
    /// The store is open in this process with another clock
    /// (`Builder::clock`): one store, one clock.
    OtherClock { path: PathBuf },
    /// The log is damaged, not torn (see `format.rs`): a frame whose
    /// checksum does not match with whole frames after it, a whole last
    /// frame damaged after it was written, or a record that makes no
    /// sense. Nothing is dropped silently: the queue does not open until
    /// the file is repaired (`open::repair_log`) or moved away.
    Corrupt {
        path: PathBuf,
        offset: u64,
        reason: String,
    },
    /// Any other I/O error, with what the store was doing.
    Io {
        path: PathBuf,
        doing: &'static str,
        source: io::Error,
    },
    /// A write or fsync failed in a way that leaves the file's state in
    /// doubt (after a failed fsync the kernel may have dropped the
    /// unwritten pages): the store refuses every change from then on, so
    /// that it never acknowledges what may not be on disk. Reopen it (drop
    /// every handle, then connect again) to replay what is.
    Failed { path: PathBuf, reason: String },
}

impl StoreError {
    /// An I/O error while `doing` something to `path`: [`NoSpace`] for a
    /// full disk or quota, else [`Io`].
    ///
    /// [`NoSpace`]: StoreError::NoSpace
    /// [`Io`]: StoreError::Io
    pub(crate) fn io(
        path: impl Into<PathBuf>,
        doing: &'static str,
        source: io::Error,
    ) -> StoreError {
        // ENOSPC is 28 and EDQUOT 122 on Linux; `StorageFull` covers the
        // first where std maps it.
        let full = source.kind() == io::ErrorKind::StorageFull
            || matches!(source.raw_os_error(), Some(28) | Some(122));
        if full {
            StoreError::NoSpace {
                path: path.into(),
                source,
            }
        } else {
            StoreError::Io {
                path: path.into(),
                doing,
                source,
            }
        }
    }

    pub(crate) fn corrupt(
        path: impl Into<PathBuf>,
        offset: u64,
        reason: impl Into<String>,
    ) -> StoreError {
        StoreError::Corrupt {
            path: path.into(),
            offset,
            reason: reason.into(),
        }
    }

    /// A copy for every caller of a failed group commit (`io::Error` is
    /// not `Clone`: the copies keep its kind, code and message).
    pub(crate) fn duplicate(&self) -> StoreError {
        let copy = |e: &io::Error| match e.raw_os_error() {
            Some(code) => io::Error::from_raw_os_error(code),
            None => io::Error::new(e.kind(), e.to_string()),
        };
        match self {
            StoreError::NoSpace { path, source } => StoreError::NoSpace {
                path: path.clone(),
                source: copy(source),
            },
            StoreError::Locked { path } => StoreError::Locked { path: path.clone() },
            StoreError::ReadOnly { path } => StoreError::ReadOnly { path: path.clone() },
            StoreError::OtherClock { path } => StoreError::OtherClock { path: path.clone() },
            StoreError::Corrupt {
                path,
                offset,
                reason,
            } => StoreError::Corrupt {
                path: path.clone(),
                offset: *offset,
                reason: reason.clone(),
            },
            StoreError::Io {
                path,
                doing,
                source,
            } => StoreError::Io {
                path: path.clone(),
                doing,
                source: copy(source),
            },
            StoreError::Failed { path, reason } => StoreError::Failed {
                path: path.clone(),
                reason: reason.clone(),
            },
        }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::NoSpace { path, source } => write!(
                f,
                "no space left for the job store at {}: {source} (nothing was written)",
                path.display()
            ),
            StoreError::Locked { path } => write!(
                f,
                "the job store at {} is open in another process (its lock file is locked)",
                path.display()
            ),
            StoreError::ReadOnly { path } => write!(
                f,
                "the job log {} is open read-only here: nothing was changed",
                path.display()
            ),
            StoreError::OtherClock { path } => write!(
                f,
                "the job store at {} is open in this process with another clock",
                path.display()
            ),
            StoreError::Corrupt {
                path,
                offset,
                reason,
            } => write!(
                f,
                "the job log {} is damaged at byte {offset}: {reason}",
                path.display()
            ),
            StoreError::Io {
                path,
                doing,
                source,
            } => write!(f, "{doing} {}: {source}", path.display()),
            StoreError::Failed { path, reason } => write!(
                f,
                "the job store at {} refuses changes after a failed write: {reason}; \
                 reopen it to replay what is on disk",
                path.display()
            ),
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::NoSpace { source, .. } | StoreError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<StoreError> for Error {
    fn from(error: StoreError) -> Error {
        match error {
            StoreError::NoSpace { path, .. } => Error::DiskFull { path },
            StoreError::Locked { path } => Error::Locked { path },
            StoreError::ReadOnly { path } => Error::ReadOnly { path },
            StoreError::OtherClock { .. } => Error::InvalidConfig {
                reason: "the store is open in this process with another clock: every handle on \
                         a store gives the same Builder::clock",
            },
            StoreError::Corrupt {
                path,
                offset,
                reason,
            } => Error::Corrupt {
                path,
                offset,
                reason,
            },
            StoreError::Io {
                path,
                doing,
                source,
            } => Error::Io {
                path,
                doing: doing.to_owned(),
                source,
            },
            StoreError::Failed { path, reason } => Error::Io {
                path,
                doing: "the store refuses changes after a failed write; reopen it".to_owned(),
                source: std::io::Error::other(reason),
            },
        }
    }
}
