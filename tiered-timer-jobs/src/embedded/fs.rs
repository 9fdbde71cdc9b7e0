//! The store's one way to the file system: every directory it makes, file
//! it opens or creates, write, `fdatasync`, `fsync`, cut, rename and read
//! goes through here.
//!
//! Ground rules:
//!
//! * In a normal build these are the `std` calls and nothing else:
//!   [`LogFile`] is a newtype of [`File`] whose methods are `#[inline]`
//!   forwards, so the seam costs nothing.
//! * In the crate's own test build, a [`tap::Tap`] registered for a
//!   directory records every change under it, in order and with its bytes
//!   (reads are not recorded), and can make a sync fail as a failing disk
//!   does (`EIO`). The power-cut test (`power_cut.rs`) builds from that
//!   record the states a power loss could leave, as SQLite's crash-test
//!   VFS and RocksDB's `FaultInjectionTestFS` do. There is no second code
//!   path: the store under test makes the same calls as in production,
//!   and the tap only watches them.
//! * What is durable when (POSIX, and what the store relies on): a file's
//!   bytes and length once it is synced (`sync_data` or `sync_all`); a new
//!   file's or directory's name, or a rename, once the directory holding
//!   it is synced ([`sync_dir`]). Anything else may be lost, torn at
//!   sector granularity, or (a length without its data) read back as
//!   zeros after a power cut.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;

/// How [`open`] opens a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Reading only; the file must exist.
    Read,
    /// Reading and writing; the file must exist.
    Write,
    /// Reading and writing; created empty if missing, else kept as it is.
    Create,
    /// Reading and writing, created or cut to nothing.
    Truncate,
}

/// A file of the store, opened through [`open`].
#[derive(Debug)]
pub(crate) struct LogFile {
    file: File,
    /// The recorder watching this file, and its name for the file (test
    /// builds only).
    #[cfg(test)]
    tap: Option<(std::sync::Arc<tap::Tap>, tap::Ino)>,
}

/// Opens `path` as `mode` says.
pub(crate) fn open(path: &Path, mode: Mode) -> io::Result<LogFile> {
    let mut options = OpenOptions::new();
    options.read(true);
    match mode {
        Mode::Read => {}
        Mode::Write => {
            options.write(true);
        }
        Mode::Create => {
            options.write(true).create(true).truncate(false);
        }
        Mode::Truncate => {
            options.write(true).create(true).truncate(true);
        }
    }
    let file = options.open(path)?;
    Ok(LogFile {
        file,
        #[cfg(test)]
        tap: tap::opened(path, mode),
    })
}

/// Makes the directory `dir`, whose parent exists.
pub(crate) fn create_dir(dir: &Path) -> io::Result<()> {
    fs::create_dir(dir)?;
    #[cfg(test)]
    tap::record_path(dir, |path| tap::Op::Mkdir { path });
    Ok(())
}

/// Renames `from` to `to` (in one directory), replacing `to`.
pub(crate) fn rename(from: &Path, to: &Path) -> io::Result<()> {
    fs::rename(from, to)?;
    #[cfg(test)]
    tap::renamed(from, to);
    Ok(())
}

/// Syncs the directory `dir`: the names created, renamed or removed in it
/// are durable once this returns.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()?;
    #[cfg(test)]
    tap::record_path(dir, |path| tap::Op::SyncDir { path });
    Ok(())
}

impl LogFile {
    /// Writes all of `bytes` at `offset`.
    #[inline]
    pub(crate) fn write_all_at(&self, bytes: &[u8], offset: u64) -> io::Result<()> {
        self.file.write_all_at(bytes, offset)?;
        #[cfg(test)]
        self.record(|ino| tap::Op::Write {
            ino,
            at: offset,
            bytes: bytes.to_vec(),
        });
        Ok(())
    }

    /// Reads up to `bytes.len()` bytes at `offset`; how many it read.
    #[inline]
    pub(crate) fn read_at(&self, bytes: &mut [u8], offset: u64) -> io::Result<usize> {
        self.file.read_at(bytes, offset)
    }

    /// Reads exactly `bytes.len()` bytes at `offset`.
    #[inline]
    pub(crate) fn read_exact_at(&self, bytes: &mut [u8], offset: u64) -> io::Result<()> {
        self.file.read_exact_at(bytes, offset)
    }

    /// Cuts or extends the file to `len` bytes.
    #[inline]
    pub(crate) fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)?;
        #[cfg(test)]
        self.record(|ino| tap::Op::SetLen { ino, len });
        Ok(())
    }

    /// `fdatasync`: the file's bytes and length are durable once it
    /// returns `Ok`. After an error they may or may not be, and a later
    /// sync may succeed without writing them (the kernel may have dropped
    /// them): the caller must treat the file as in doubt.
    #[inline]
    pub(crate) fn sync_data(&self) -> io::Result<()> {
        #[cfg(test)]
        self.fault()?;
        self.file.sync_data()?;
        #[cfg(test)]
        self.record(|ino| tap::Op::Sync { ino });
        Ok(())
    }

    /// `fsync`: as [`sync_data`](LogFile::sync_data), and the file's
    /// metadata (not its name: see [`sync_dir`]).
    #[inline]
    pub(crate) fn sync_all(&self) -> io::Result<()> {
        #[cfg(test)]
        self.fault()?;
        self.file.sync_all()?;
        #[cfg(test)]
        self.record(|ino| tap::Op::Sync { ino });
        Ok(())
    }

    /// The file's length.
    #[inline]
    pub(crate) fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    /// The file's identity (device, inode): another one at the same path
    /// means the file was replaced (compaction renames a new log over the
    /// old one).
    #[inline]
    pub(crate) fn identity(&self) -> io::Result<(u64, u64)> {
        let meta = self.file.metadata()?;
        Ok((meta.dev(), meta.ino()))
    }

    /// The open file, for an advisory lock.
    #[inline]
    pub(crate) fn as_file(&self) -> &File {
        &self.file
    }

    #[cfg(test)]
    fn record(&self, op: impl FnOnce(tap::Ino) -> tap::Op) {
        if let Some((tap, ino)) = &self.tap {
            tap.record(op(*ino));
        }
    }

    /// A sync failure the tap asks for (recorded: the file is in doubt).
    #[cfg(test)]
    fn fault(&self) -> io::Result<()> {
        match &self.tap {
            Some((tap, ino)) if tap.sync_fails(*ino) => {
                tap.record(tap::Op::SyncFailed { ino: *ino });
                Err(io::Error::from_raw_os_error(5)) // EIO
            }
            _ => Ok(()),
        }
    }
}

/// The path of a directory's entry: where a file's name lives (its
/// parent directory).
pub(crate) fn parent(path: &Path) -> &Path {
    path.parent().unwrap_or(Path::new("."))
}

/// The recorder of the crate's test build: what the store did to the files
/// under a directory, for the power-cut test to build crash states from.
#[cfg(test)]
pub(crate) mod tap {
    use std::collections::HashMap;
    use std::path::{Path, PathBuf};
    use std::sync::{Arc, LazyLock, Mutex};

    use super::Mode;

    /// A file's number in a recording (as an inode number: it follows the
    /// file through renames).
    pub(crate) type Ino = u64;

    /// One change to the files under a tap's directory, or a note of the
    /// test's (what a call returned), in the order they happened.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) enum Op {
        Mkdir {
            path: PathBuf,
        },
        Create {
            path: PathBuf,
            ino: Ino,
        },
        Write {
            ino: Ino,
            at: u64,
            bytes: Vec<u8>,
        },
        SetLen {
            ino: Ino,
            len: u64,
        },
        Sync {
            ino: Ino,
        },
        /// A sync that failed (`EIO`): what it should have made durable
        /// is in doubt.
        SyncFailed {
            ino: Ino,
        },
        SyncDir {
            path: PathBuf,
        },
        Rename {
            from: PathBuf,
            to: PathBuf,
        },
        Note(String),
    }

    /// A recording of everything under one directory.
    #[derive(Debug)]
    pub(crate) struct Tap {
        root: PathBuf,
        inner: Mutex<Inner>,
    }

    #[derive(Debug, Default)]
    struct Inner {
        ops: Vec<Op>,
        /// The files by their present name.
        names: HashMap<PathBuf, Ino>,
        next: Ino,
        /// Syncs of files named `*.log` so far, and which of them fail.
        log_syncs: u64,
        failing: Vec<u64>,
        files: HashMap<Ino, PathBuf>,
    }

    static TAPS: LazyLock<Mutex<Vec<Arc<Tap>>>> = LazyLock::new(|| Mutex::new(Vec::new()));

    impl Tap {
        /// Starts recording under `root` (a directory, empty, resolved:
        /// no symbolic links), until [`stop`](Tap::stop).
        pub(crate) fn start(root: &Path) -> Arc<Tap> {
            let tap = Arc::new(Tap {
                root: root.to_owned(),
                inner: Mutex::new(Inner::default()),
            });
            TAPS.lock().unwrap().push(Arc::clone(&tap));
            tap
        }

        /// Stops recording; returns what was recorded.
        pub(crate) fn stop(self: &Arc<Tap>) -> Vec<Op> {
            TAPS.lock().unwrap().retain(|t| !Arc::ptr_eq(t, self));
            std::mem::take(&mut self.lock().ops)
        }

        /// Makes the `n`th sync of a `*.log` file (counting from 1) fail
        /// with `EIO`.
        pub(crate) fn fail_log_sync(&self, n: u64) {
            self.lock().failing.push(n);
        }

        /// Adds a note to the recording (what a call returned).
        pub(crate) fn note(&self, note: impl Into<String>) {
            self.record(Op::Note(note.into()));
        }

        pub(crate) fn record(&self, op: Op) {
            self.lock().ops.push(op);
        }

        /// Whether this sync of file `ino` is to fail.
        pub(crate) fn sync_fails(&self, ino: Ino) -> bool {
            let mut inner = self.lock();
            let is_log = inner
                .files
                .get(&ino)
                .is_some_and(|p| p.extension().is_some_and(|e| e == "log"));
            if !is_log {
                return false;
            }
            inner.log_syncs += 1;
            let n = inner.log_syncs;
            inner.failing.contains(&n)
        }

        fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
            self.inner.lock().unwrap_or_else(|e| e.into_inner())
        }
    }

    fn find(path: &Path) -> Option<Arc<Tap>> {
        let taps = TAPS.lock().unwrap();
        taps.iter().find(|t| path.starts_with(&t.root)).cloned()
    }

    /// A file opened under a tap: its number (a new one if it was created).
    pub(super) fn opened(path: &Path, mode: Mode) -> Option<(Arc<Tap>, Ino)> {
        let tap = find(path)?;
        let ino = {
            let mut inner = tap.lock();
            let known = inner.names.get(path).copied();
            let ino = known.unwrap_or_else(|| {
                inner.next += 1;
                inner.next
            });
            if known.is_none() && mode != Mode::Read {
                inner.names.insert(path.to_owned(), ino);
                inner.files.insert(ino, path.to_owned());
                inner.ops.push(Op::Create {
                    path: path.to_owned(),
                    ino,
                });
            }
            if mode == Mode::Truncate {
                inner.ops.push(Op::SetLen { ino, len: 0 });
            }
            ino
        };
        Some((tap, ino))
    }

    pub(super) fn record_path(path: &Path, op: impl FnOnce(PathBuf) -> Op) {
        if let Some(tap) = find(path) {
            tap.record(op(path.to_owned()));
        }
    }

    pub(super) fn renamed(from: &Path, to: &Path) {
        let Some(tap) = find(from) else {
            return;
        };
        let mut inner = tap.lock();
        if let Some(ino) = inner.names.remove(from) {
            inner.names.insert(to.to_owned(), ino);
            inner.files.insert(ino, to.to_owned());
        }
        inner.ops.push(Op::Rename {
            from: from.to_owned(),
            to: to.to_owned(),
        });
    }
}
