//! A store directory, its queues' logs, and the group commit that makes
//! every change durable before the call that made it returns.
//!
//! Ground rules:
//!
//! * One [`Store`] per directory per process: a process-wide registry
//!   (keyed by the canonical path) hands every `connect` to the same
//!   directory the same store, and through it the same [`QueueLog`] per
//!   queue name, so that every handle shares one index, one log and one
//!   set of wake-ups. The store holds an exclusive lock on `LOCK` in the
//!   directory from open to its last drop: a second process gets
//!   [`StoreError::Locked`] at once.
//! * A queue's state (index, the batch being gathered, the file) is
//!   behind one `std::sync::Mutex`, held for in-memory work only: the
//!   index's changes, and reads of a few id bytes to confirm a match of
//!   ids (from the page cache). Nothing awaits with it held, and nothing
//!   is woken with it held.
//! * A call changes the index and appends its records to the batch under
//!   the lock, then waits (a oneshot) for the **committer**, one thread
//!   per queue, which takes the whole batch, writes it as one frame
//!   (one `pwrite`) and `fdatasync`s it: concurrent callers share one
//!   write and one sync (group commit). Only then do they return `Ok`.
//!   A call that wrote nothing still waits for the frames before it, so
//!   an answer never rests on a change that is not on disk.
//! * The one exception, a claim, hands its jobs out as soon as its
//!   records are in the batch (`ops.rs`, `hand_out_now`): the worker gets
//!   the job without waiting for the `fdatasync`, which is most of a
//!   job's lateness. The store is one process' (its lock), so a crash
//!   before that frame is on disk takes the worker with it: no second
//!   holder can exist, and on reopen the job is waiting again (never
//!   lost). Whatever the holder does next (ack, retry, release) is a
//!   change that waits for its own frame, which comes after the claim's:
//!   an ack that returned implies a claim on disk. Such a crash costs the
//!   attempt (not counted); a job due when the store opened is handed
//!   out only once its claim is on disk, so that a job that kills the
//!   process at once still reaches `max_attempts`. Its payload is read
//!   at once: from the batch or the frame being written (under the
//!   lock), or from the file below its durable end (after).
//! * A frame that fails to write (a full disk) is cut off the file, and
//!   its changes, with those of every call that came after it, are taken
//!   back in memory (the index's undo lists): those calls fail, nothing
//!   is half-written, and later calls succeed once there is room. Jobs
//!   that claims in those frames had already handed out stay leased to
//!   their holders (`Index::keep_handed`), in memory only, so that none
//!   is handed out twice. A
//!   failed `fdatasync`, or a failed cut, leaves the file in doubt: the
//!   queue then refuses every change ([`StoreError::Failed`]) until it is
//!   reopened.
//! * Compaction runs on the committer thread between frames, when the
//!   log holds more than twice what the live jobs need: it writes the
//!   live jobs' records to a new file, syncs it, renames it over the log
//!   and syncs the directory, then moves the index's data offsets to the
//!   new file. Calls go on meanwhile; their frames wait.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Condvar, LazyLock, Mutex, MutexGuard, Weak};
use std::thread::JoinHandle;

use tokio::sync::{oneshot, Notify};

use super::error::StoreError;
use super::format::{self, Record, FRAME_HEADER};
use super::fs::{self as seam, LogFile, Mode};
use super::index::{Batch, Index, Now, ReadAt, Undo, View};
use super::open::{create_dir_all, quarantined, repair_log, replay, sync_dir, LogRepair};
use crate::data::clock::Clock;
use crate::targets;

/// Compaction waits until the log is at least this long.
const COMPACT_MIN_BYTES: u64 = 64 << 20;
/// Slots gathered per lock hold when compaction copies the live jobs.
const COMPACT_CHUNK: usize = 16_384;
/// Frames compaction writes are about this long.
const COMPACT_FRAME: usize = 1 << 20;

/// The open stores of this process, by canonical directory.
static STORES: LazyLock<Mutex<HashMap<PathBuf, Weak<Store>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// A store directory, locked for this process.
pub(crate) struct Store {
    dir: PathBuf,
    /// The clock every queue of the store decides by.
    clock: Clock,
    /// Locked exclusively while the store is open.
    _lock: LogFile,
    queues: Mutex<HashMap<String, Opened>>,
}

/// A queue's log as the store knows it.
struct Opened {
    log: Weak<QueueLog>,
    /// The committer of a log whose handles are all gone, which may still
    /// be writing its last frame: joined before the log is opened again.
    committer: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Opens (creating it if needed) the store in `dir`, or returns this
    /// process' open one. Blocking: call it off the runtime.
    ///
    /// # Errors
    ///
    /// [`StoreError::Locked`] if another process has it open;
    /// [`StoreError::OtherClock`] if this process has it open with another
    /// clock; [`StoreError::Io`] if the directory cannot be created or
    /// locked.
    pub(crate) fn open(dir: &Path, clock: &Clock) -> Result<Arc<Store>, StoreError> {
        create_dir_all(dir)
            .map_err(|e| StoreError::io(dir, "creating the job store's directory", e))?;
        let dir = fs::canonicalize(dir)
            .map_err(|e| StoreError::io(dir, "resolving the job store's directory", e))?;
        let mut stores = STORES.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(store) = stores.get(&dir).and_then(Weak::upgrade) {
            if !store.clock.same(clock) {
                return Err(StoreError::OtherClock { path: dir });
            }
            return Ok(store);
        }
        let lock_path = dir.join("LOCK");
        let lock = seam::open(&lock_path, Mode::Create)
            .map_err(|e| StoreError::io(&lock_path, "opening the lock file", e))?;
        // Fully qualified: std's own `File::try_lock` (Rust 1.89) would
        // shadow the trait's method on newer compilers.
        match fs4::FileExt::try_lock(lock.as_file()) {
            Ok(()) => {}
            Err(fs4::TryLockError::WouldBlock) => return Err(StoreError::Locked { path: dir }),
            Err(fs4::TryLockError::Error(e)) => {
                return Err(StoreError::io(&lock_path, "locking", e))
            }
        }
        let store = Arc::new(Store {
            dir: dir.clone(),
            clock: clock.clone(),
            _lock: lock,
            queues: Mutex::new(HashMap::new()),
        });
        stores.retain(|_, weak| weak.strong_count() > 0);
        stores.insert(dir, Arc::downgrade(&store));
        Ok(store)
    }

    /// The log of queue `name` (a valid queue name: no `/`), opened and
    /// replayed on first use. Blocking: call it off the runtime.
    ///
    /// # Errors
    ///
    /// [`StoreError::Corrupt`] if the log is damaged (other than a torn
    /// last write, which is cut off); [`StoreError::Io`].
    pub(crate) fn queue(self: &Arc<Store>, name: &str) -> Result<Arc<QueueLog>, StoreError> {
        let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        let opened = queues.entry(name.to_owned()).or_insert(Opened {
            log: Weak::new(),
            committer: None,
        });
        if let Some(log) = opened.log.upgrade() {
            return Ok(log);
        }
        if let Some(committer) = opened.committer.take() {
            let _ = committer.join();
        }
        let (log, committer) = QueueLog::open(self, name)?;
        opened.log = Arc::downgrade(&log);
        opened.committer = Some(committer);
        Ok(log)
    }

    /// Repairs the end of queue `name`'s log (see `open.rs`), unless this
    /// process has the queue open (then its log opened, and has nothing to
    /// repair). Blocking: call it off the runtime.
    ///
    /// # Errors
    ///
    /// [`StoreError::Corrupt`] for damage followed by whole frames;
    /// [`StoreError::Io`].
    pub(crate) fn repair(&self, name: &str) -> Result<LogRepair, StoreError> {
        let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(opened) = queues.get_mut(name) {
            if let Some(log) = opened.log.upgrade() {
                return Ok(LogRepair {
                    end: log.shared.lock().end,
                    torn: 0,
                    quarantined: None,
                });
            }
            if let Some(committer) = opened.committer.take() {
                let _ = committer.join();
            }
        }
        repair_log(&self.log_path(name))
    }

    /// The path of queue `name`'s log.
    pub(crate) fn log_path(&self, name: &str) -> PathBuf {
        super::names::log_path(&self.dir, name)
    }
}

/// What a call waits for: its frame on disk, then the ids and payloads it
/// asked to read.
struct Waiter {
    tx: oneshot::Sender<Result<Vec<Read>, StoreError>>,
    reads: Vec<ReadReq>,
}

/// A read a call asks for once its frame is on disk: a job's id, and its
/// payload if `payload`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadReq {
    pub(crate) slot: u32,
    pub(crate) gen: u32,
    /// How many bytes of the payload, at most (0: none).
    pub(crate) payload: usize,
}

/// What a [`ReadReq`] read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Read {
    pub(crate) id: Vec<u8>,
    pub(crate) payload: Vec<u8>,
}

/// The frame being written.
struct InFlight {
    base: u64,
    frame: Arc<Vec<u8>>,
}

/// How a read-only handle follows its log.
#[derive(Debug)]
pub(crate) struct Follow {
    /// The file read (device, inode): another one at the path means the
    /// log was replaced.
    pub(crate) identity: (u64, u64),
    /// Whether the log ended in a damaged frame at the last look.
    pub(crate) damaged_tail: bool,
    /// A look failed part way: the index is in doubt, read it all again.
    pub(crate) stale: bool,
}

impl Follow {
    /// Whether the log ended in a damaged frame at the last look.
    pub(crate) fn damaged_tail(&self) -> bool {
        self.damaged_tail
    }
}

/// A queue's state, behind its lock.
pub(crate) struct State {
    pub(crate) index: Index,
    /// The changes waiting for the next frame.
    pub(crate) batch: Batch,
    waiters: Vec<Waiter>,
    in_flight: Option<InFlight>,
    /// Where the last frame on disk ends.
    pub(crate) end: u64,
    pub(crate) file: Arc<LogFile>,
    failed: Option<StoreError>,
    closing: bool,
    /// Compaction waits until the log is at least this long.
    compact_min: u64,
    /// After a failed compaction, the next waits until the log is this
    /// long.
    compact_retry: u64,
    /// When the driver wakes next (ms; `u64::MAX`: it sleeps until told).
    pub(crate) driver_at: u64,
    /// Quarantine files beside the log when it was opened (`open.rs`).
    pub(crate) quarantined: u64,
    /// How a read-only handle follows the log (`None`: this process owns
    /// it).
    pub(crate) follow: Option<Follow>,
}

/// Reads the log for the index: the file up to its durable end, or the
/// frame being written.
struct LogReader<'a> {
    file: &'a LogFile,
    end: u64,
    in_flight: Option<&'a InFlight>,
}

impl ReadAt for LogReader<'_> {
    fn read_at(&self, offset: u64, len: usize) -> io::Result<Vec<u8>> {
        if let Some(flight) = self.in_flight {
            if offset >= flight.base {
                let from = (offset - flight.base) as usize;
                if let Some(bytes) = flight.frame.get(from..from + len) {
                    return Ok(bytes.to_vec());
                }
            }
        }
        if offset + len as u64 > self.end {
            return Err(io::Error::other("a read past the end of the job log"));
        }
        let mut bytes = vec![0; len];
        self.file.read_exact_at(&mut bytes, offset)?;
        Ok(bytes)
    }
}

/// What the queue's lock, its committer and its waiting calls share.
pub(crate) struct Shared {
    pub(crate) path: PathBuf,
    state: Mutex<State>,
    /// Wakes the committer.
    work: Condvar,
    /// Jobs may have become claimable: wakes waiting claims.
    pub(crate) claimable: Notify,
    /// Something may now be due sooner than the driver sleeps for (the
    /// driver waits on it with the lock: see `driver.rs`).
    pub(crate) sooner: Condvar,
    /// Whether the driver thread was started (see
    /// [`QueueLog::ensure_driver`]).
    pub(crate) driver: AtomicBool,
    /// The clock every "now" of the queue is read from.
    pub(crate) clock: Clock,
}

/// One queue's log in a store, shared by every handle on the queue in
/// this process.
pub(crate) struct QueueLog {
    /// The store it is in (`None`: a read-only handle, which holds no
    /// store: see `follow.rs`).
    store: Option<Arc<Store>>,
    name: String,
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for QueueLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueLog")
            .field("name", &self.name)
            .field("path", &self.shared.path)
            .field("read_only", &self.store.is_none())
            .finish_non_exhaustive()
    }
}

impl Drop for QueueLog {
    fn drop(&mut self) {
        // The committer writes what is left, then ends; the store's entry
        // keeps its handle, so that a reopen waits for it.
        self.shared.lock().closing = true;
        self.shared.work.notify_all();
        self.shared.sooner.notify_one();
    }
}

/// The outcome of a change: its value, and what it asked to read.
pub(crate) type Changed<T> = (T, Vec<ReadReq>);

/// What a change waits for once it let go of the lock: its frame (and
/// the reads the committer does after it), or, on a read-only handle, its
/// reads alone.
enum Next<T> {
    Wait(oneshot::Receiver<Result<Vec<Read>, StoreError>>, T),
    Read(T, Arc<LogFile>, Vec<Option<(u64, usize, usize)>>),
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl State {
    /// Whether the last handle was dropped.
    pub(crate) fn closing(&self) -> bool {
        self.closing
    }
}

impl Shared {
    /// The shared state of the log at `path`, open as `file`, replayed into
    /// `index` up to `end`; `follow` for a read-only handle.
    pub(crate) fn new(
        path: PathBuf,
        file: LogFile,
        end: u64,
        index: Index,
        follow: Option<Follow>,
        clock: Clock,
    ) -> Shared {
        Shared {
            state: Mutex::new(State {
                index,
                batch: Batch::new(end),
                waiters: Vec::new(),
                in_flight: None,
                end,
                file: Arc::new(file),
                failed: None,
                closing: false,
                compact_min: COMPACT_MIN_BYTES,
                compact_retry: 0,
                driver_at: 0,
                quarantined: quarantined(&path),
                follow,
            }),
            path,
            work: Condvar::new(),
            claimable: Notify::new(),
            sooner: Condvar::new(),
            driver: AtomicBool::new(false),
            clock,
        }
    }
}

impl QueueLog {
    /// Opens `dir/<name>.log` (creating it), replays it, and starts its
    /// committer.
    fn open(store: &Arc<Store>, name: &str) -> Result<(Arc<QueueLog>, JoinHandle<()>), StoreError> {
        let path = store.log_path(name);
        let (file, end, index) = replay(&path, Now::of(&store.clock))?;
        let shared = Arc::new(Shared::new(
            path.clone(),
            file,
            end,
            index,
            None,
            store.clock.clone(),
        ));
        let committer = {
            let shared = Arc::clone(&shared);
            let store = Arc::clone(store);
            std::thread::Builder::new()
                .name(format!("ttr-log-{name}"))
                .spawn(move || {
                    commit_loop(&shared);
                    drop(store); // the directory stays locked until here
                })
                .map_err(|e| StoreError::io(&path, "starting the log's committer thread", e))?
        };
        let log = Arc::new(QueueLog {
            store: Some(Arc::clone(store)),
            name: name.to_owned(),
            shared,
        });
        Ok((log, committer))
    }

    /// A read-only handle on the log `shared` describes (`follow.rs`).
    pub(crate) fn read_only(name: &str, shared: Shared) -> Arc<QueueLog> {
        Arc::new(QueueLog {
            store: None,
            name: name.to_owned(),
            shared: Arc::new(shared),
        })
    }

    /// Whether this handle only looks (see `follow.rs`).
    pub(crate) fn is_read_only(&self) -> bool {
        self.store.is_none()
    }

    /// The log file's path.
    #[cfg(test)]
    pub(crate) fn path(&self) -> &Path {
        &self.shared.path
    }

    /// Where the log's synced part ends: what a power cut now would leave
    /// (tests).
    #[cfg(test)]
    pub(crate) fn durable_end(&self) -> u64 {
        self.shared.lock().end
    }

    /// Lowers the log length at which compaction is considered (tests).
    #[cfg(test)]
    pub(crate) fn set_compact_min(&self, bytes: u64) {
        self.shared.lock().compact_min = bytes;
    }

    /// Runs `change` on the index under the lock, with the batch to write
    /// its records into, then waits until they are on disk (and until
    /// every frame before them is) and reads what it asked for.
    ///
    /// # Errors
    ///
    /// `change`'s error (nothing written); [`StoreError::NoSpace`] or
    /// another [`StoreError`] if the frame could not be written (then the
    /// change was taken back); [`StoreError::Failed`] if the queue
    /// refuses changes.
    ///
    /// With `quick`, a change that wrote nothing and reads nothing returns
    /// at once (a claim that found nothing rests on nothing unwritten).
    pub(crate) async fn change<T>(
        &self,
        quick: bool,
        change: impl FnOnce(&mut Index, &mut Batch, &dyn ReadAt, Now) -> io::Result<Changed<T>>,
    ) -> Result<(T, Vec<Read>), StoreError> {
        let next = {
            let mut guard = self.shared.lock();
            let state = &mut *guard;
            if let Some(failed) = &state.failed {
                return Err(failed.duplicate());
            }
            let reader = LogReader {
                file: &state.file,
                end: state.end,
                in_flight: state.in_flight.as_ref(),
            };
            let undo_before = state.batch.undo.len();
            let frame_before = state.batch.frame.len();
            let handed_before = state.batch.handed.len();
            let now = Now::of(&self.shared.clock);
            let outcome = change(&mut state.index, &mut state.batch, &reader, now);
            let (value, reads) = match outcome {
                Ok(done) => done,
                Err(e) => {
                    // Take back whatever the change did before it failed.
                    let undo = state.batch.undo.split_off(undo_before);
                    state.index.undo(undo);
                    state.batch.frame.truncate(frame_before);
                    return Err(StoreError::io(&self.shared.path, "reading the job log", e));
                }
            };
            if state.follow.is_some() {
                let plan = plan_reads_after_commit(&state.index, &reads);
                let refused = refuse_changes(state, undo_before, frame_before, handed_before);
                if let Some(error) = refused.map(|()| StoreError::ReadOnly {
                    path: self.shared.path.clone(),
                }) {
                    return Err(error);
                }
                let file = Arc::clone(&state.file);
                drop(guard);
                Next::Read(value, file, plan)
            } else {
                // Something due sooner than the driver wakes: wake it.
                let sooner = state
                    .index
                    .next_expiration()
                    .is_some_and(|next| next < state.driver_at);
                let wrote = state.batch.frame.len() > frame_before;
                if state.batch.handed.len() > handed_before {
                    // A claim that hands its jobs out now, its records in the
                    // batch (see the module docs): read them and go.
                    let places = plan_reads(state, &reads);
                    let file = Arc::clone(&state.file);
                    drop(guard);
                    self.shared.work.notify_one();
                    if sooner {
                        self.shared.sooner.notify_one();
                    }
                    let reads = places
                        .into_iter()
                        .map(|place| match place {
                            Place::Here(read) => Ok(read),
                            Place::File(place) => read_one(&file, place),
                        })
                        .collect::<io::Result<Vec<Read>>>()
                        .map_err(|e| StoreError::io(&self.shared.path, "reading the job log", e))?;
                    return Ok((value, reads));
                }
                let idle =
                    state.batch.is_empty() && state.in_flight.is_none() && state.waiters.is_empty();
                if reads.is_empty() && (idle || (quick && !wrote)) {
                    drop(guard);
                    if sooner {
                        self.shared.sooner.notify_one();
                    }
                    return Ok((value, Vec::new()));
                }
                let (tx, rx) = oneshot::channel();
                state.waiters.push(Waiter { tx, reads });
                drop(guard);
                self.shared.work.notify_one();
                if sooner {
                    self.shared.sooner.notify_one();
                }
                Next::Wait(rx, value)
            }
        };
        let (rx, value) = match next {
            Next::Wait(rx, value) => (rx, value),
            Next::Read(value, file, plan) => {
                let reads = read_off_the_runtime(&self.shared.path, file, plan).await?;
                return Ok((value, reads));
            }
        };
        match rx.await {
            Ok(Ok(reads)) => Ok((value, reads)),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(StoreError::Failed {
                path: self.shared.path.clone(),
                reason: "the log's committer thread stopped".to_owned(),
            }),
        }
    }

    /// Runs `look` on the index under the lock (reads only).
    pub(crate) fn look<T>(&self, look: impl FnOnce(&mut Index, Now) -> T) -> T {
        let mut state = self.shared.lock();
        look(&mut state.index, Now::of(&self.shared.clock))
    }
}

/// The committer: one frame per round, until the queue closes.
fn commit_loop(shared: &Shared) {
    loop {
        let mut state = shared.lock();
        while state.waiters.is_empty() && state.batch.is_empty() {
            if state.closing {
                return;
            }
            state = shared.work.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        let base = state.batch.base;
        let mut batch = std::mem::replace(&mut state.batch, Batch::new(base));
        let waiters = std::mem::take(&mut state.waiters);
        let file = Arc::clone(&state.file);
        let written = if batch.is_empty() {
            None
        } else {
            let header = format::frame_header(&batch.frame[FRAME_HEADER..]);
            batch.frame[..FRAME_HEADER].copy_from_slice(&header);
            let frame = Arc::new(std::mem::take(&mut batch.frame));
            state.batch.base = base + frame.len() as u64;
            state.in_flight = Some(InFlight {
                base,
                frame: Arc::clone(&frame),
            });
            Some(frame)
        };
        drop(state);

        // Write and sync outside the lock: calls go on gathering the next
        // batch meanwhile.
        let outcome = match &written {
            None => Ok(()),
            Some(frame) => file
                .write_all_at(frame, base)
                .map_err(|e| {
                    (
                        StoreError::io(&shared.path, "writing the job log", e),
                        false,
                    )
                })
                .and_then(|()| {
                    file.sync_data()
                        .map_err(|e| (StoreError::io(&shared.path, "syncing the job log", e), true))
                }),
        };

        let mut state = shared.lock();
        state.in_flight = None;
        let mut done: Vec<(Waiter, Result<Vec<Read>, StoreError>)> = Vec::new();
        match outcome {
            Ok(()) => {
                if let Some(frame) = &written {
                    state.end = base + frame.len() as u64;
                }
                // Where to read what the calls asked for (the index may
                // change after the lock is released; the file may not, below
                // its end).
                let plans: Vec<Vec<Option<(u64, usize, usize)>>> = waiters
                    .iter()
                    .map(|w| plan_reads_after_commit(&state.index, &w.reads))
                    .collect();
                let file = Arc::clone(&state.file);
                drop(state);
                for (waiter, plan) in waiters.into_iter().zip(plans) {
                    let reads = read_all(&file, &plan)
                        .map_err(|e| StoreError::io(&shared.path, "reading the job log", e));
                    done.push((waiter, reads));
                }
            }
            Err((error, in_doubt)) => {
                // This frame and every change after it are taken back.
                let end = state.end;
                let later = std::mem::replace(&mut state.batch, Batch::new(end));
                let later_waiters = std::mem::take(&mut state.waiters);
                // Jobs already handed out stay with their holders.
                let mut handed = std::mem::take(&mut batch.handed);
                handed.extend(later.handed);
                state.index.refresh_handed(&mut handed);
                state.index.undo(later.undo);
                state.index.undo(std::mem::take(&mut batch.undo));
                state.index.keep_handed(handed);
                let cut = file.set_len(end).and_then(|()| file.sync_all());
                if in_doubt || cut.is_err() {
                    state.failed = Some(StoreError::Failed {
                        path: shared.path.clone(),
                        reason: error.to_string(),
                    });
                }
                drop(state);
                for waiter in waiters.into_iter().chain(later_waiters) {
                    done.push((waiter, Err(error.duplicate())));
                }
            }
        }
        // Wake the calls with no lock held.
        for (waiter, result) in done {
            let _ = waiter.tx.send(result);
        }
        maybe_compact(shared);
    }
}

/// Where to read what a call asked for once its frame is on disk (the
/// index may change after the lock is released; the file may not, below
/// its end).
fn plan_reads_after_commit(index: &Index, reads: &[ReadReq]) -> Vec<Option<(u64, usize, usize)>> {
    reads
        .iter()
        .map(|r| {
            let (data, id_len, payload_len) = index.extent(r.slot, r.gen)?;
            Some((data, id_len, payload_len.min(r.payload)))
        })
        .collect()
}

/// On a read-only handle: takes back what a change did, if it wrote
/// anything (`Some`: the change is refused).
fn refuse_changes(
    state: &mut State,
    undo_before: usize,
    frame_before: usize,
    handed_before: usize,
) -> Option<()> {
    if state.batch.frame.len() == frame_before && state.batch.handed.len() == handed_before {
        return None;
    }
    let undo = state.batch.undo.split_off(undo_before);
    state.index.undo(undo);
    state.batch.frame.truncate(frame_before);
    state.batch.handed.truncate(handed_before);
    Some(())
}

/// Reads at planned places on the blocking pool (a read-only handle has
/// no committer thread to read for it).
async fn read_off_the_runtime(
    path: &Path,
    file: Arc<LogFile>,
    plan: Vec<Option<(u64, usize, usize)>>,
) -> Result<Vec<Read>, StoreError> {
    tokio::task::spawn_blocking(move || read_all(&file, &plan))
        .await
        .map_err(|e| StoreError::Failed {
            path: path.to_owned(),
            reason: format!("reading the job log panicked: {e}"),
        })?
        .map_err(|e| StoreError::io(path, "reading the job log", e))
}

/// Reads ids and payloads at planned places.
fn read_all(file: &LogFile, plan: &[Option<(u64, usize, usize)>]) -> io::Result<Vec<Read>> {
    plan.iter()
        .map(|place| match *place {
            Some(place) => read_one(file, place),
            None => Ok(Read::default()),
        })
        .collect()
}

/// Reads one job's id and the first `payload_len` bytes of its payload,
/// at `data` in `file`.
fn read_one(file: &LogFile, (data, id_len, payload_len): (u64, usize, usize)) -> io::Result<Read> {
    let mut bytes = vec![0; id_len + payload_len];
    file.read_exact_at(&mut bytes, data)?;
    let payload = bytes.split_off(id_len);
    Ok(Read { id: bytes, payload })
}

/// Where a read for a job handed out before its frame is written finds
/// its bytes.
enum Place {
    /// In a frame not yet on disk (the batch, or the frame being
    /// written): copied under the lock.
    Here(Read),
    /// In the file below its durable end (immutable there: a failed frame
    /// is cut above it, and compaction writes a new file): read after the
    /// lock is released.
    File((u64, usize, usize)),
}

/// Plans the reads of a claim that hands its jobs out at once.
fn plan_reads(state: &State, reads: &[ReadReq]) -> Vec<Place> {
    reads
        .iter()
        .map(|r| {
            let Some((data, id_len, payload_len)) = state.index.extent(r.slot, r.gen) else {
                return Place::Here(Read::default());
            };
            let payload_len = payload_len.min(r.payload);
            let len = id_len + payload_len;
            let in_flight = state.in_flight.as_ref().and_then(|flight| {
                let from = usize::try_from(data.checked_sub(flight.base)?).ok()?;
                flight.frame.get(from..from + len)
            });
            match state.batch.bytes_at(data, len).or(in_flight) {
                Some(bytes) => {
                    let (id, payload) = bytes.split_at(id_len);
                    Place::Here(Read {
                        id: id.to_vec(),
                        payload: payload.to_vec(),
                    })
                }
                None => Place::File((data, id_len, payload_len)),
            }
        })
        .collect()
}

/// Compacts the log if it is long and mostly garbage. On failure the old
/// log stays (compaction is retried when the log has grown by half).
fn maybe_compact(shared: &Shared) {
    let (end, live, min) = {
        let state = shared.lock();
        if state.failed.is_some() {
            return; // a queue that refuses changes writes nothing more
        }
        let min = state.compact_min.max(state.compact_retry);
        (state.end, state.index.live_bytes(), min)
    };
    if end < min || end < 2 * live {
        return;
    }
    if let Err(error) = compact(shared, end) {
        tracing::warn!(target: targets::EMBEDDED, path = %shared.path.display(), %error, "job log compaction failed; the log is left as it was");
        let mut state = shared.lock();
        state.compact_retry = state.end + state.end / 2;
    }
}

/// Writes the live jobs (as of the durable end `end`: changes waiting for
/// a frame are read through their undo steps) to a new file, and puts it
/// in place of the log.
fn compact(shared: &Shared, end: u64) -> Result<(), StoreError> {
    let new_path = &super::names::beside(&shared.path, ".compact");
    let io = |doing: &'static str| move |e: io::Error| StoreError::io(new_path, doing, e);
    let out = seam::open(new_path, Mode::Truncate).map_err(io("creating the compacted job log"))?;
    out.write_all_at(&format::file_header(), 0)
        .map_err(io("writing the compacted job log"))?;
    let mut written = format::FILE_HEADER as u64;
    let mut frame: Vec<u8> = Vec::with_capacity(COMPACT_FRAME + 4096);
    // New data offsets, by slot.
    let mut moved: HashMap<u32, u64> = HashMap::new();
    // One frame per write (no sync until the end: the file is not the log
    // until it is renamed over it).
    let flush = |frame: &mut Vec<u8>, written: &mut u64| -> io::Result<()> {
        if frame.is_empty() {
            return Ok(());
        }
        out.write_all_at(&format::frame_header(frame), *written)?;
        out.write_all_at(frame, *written + FRAME_HEADER as u64)?;
        *written += (FRAME_HEADER + frame.len()) as u64;
        frame.clear();
        Ok(())
    };
    let old_file = {
        let state = shared.lock();
        let mut lateness = state.index.lateness();
        // Recurrences as they are durably: a change not yet written is
        // taken back by the first undo step that names it.
        let mut recurring = HashMap::new();
        for step in &state.batch.undo {
            match step {
                Undo::Lateness(bucket) => {
                    lateness[*bucket] = lateness[*bucket].saturating_sub(1);
                }
                Undo::Recurring(name, old) => {
                    recurring.entry(name.clone()).or_insert_with(|| old.clone());
                }
                Undo::Slot(..) | Undo::Tally(..) => {}
            }
        }
        Record::Lateness { counts: lateness }.encode(&mut frame);
        // The counts per minute as they are durably (`durable_throughput`
        // takes back the tallies not yet written).
        let throughput = state.index.durable_throughput(&state.batch.undo);
        let minutes = format::encode_throughput(throughput);
        Record::Throughput { minutes: &minutes }.encode(&mut frame);
        state.index.rebuild_recurrences(&recurring, &mut frame);
        Arc::clone(&state.file)
    };
    let mut from = 0usize;
    loop {
        // A chunk of durable views: the live ones, with the changes not yet
        // written taken back.
        let (chunk, more) = {
            let state = shared.lock();
            let mut durable: HashMap<u32, View> = HashMap::new();
            for step in &state.batch.undo {
                if let Undo::Slot(slot, view) = step {
                    durable.entry(*slot).or_insert_with(|| view.clone());
                }
            }
            state.index.chunk(from, COMPACT_CHUNK, &durable)
        };
        for (slot, view) in chunk {
            let s = &view.slot;
            let mut bytes = vec![0; usize::from(s.id_len) + s.payload_len as usize];
            old_file.read_exact_at(&mut bytes, s.data).map_err(|e| {
                StoreError::io(&shared.path, "reading the job log to compact it", e)
            })?;
            let (id, payload) = bytes.split_at(usize::from(s.id_len));
            let data = written + (FRAME_HEADER + frame.len() + format::NEW_ID_AT) as u64;
            moved.insert(slot, data);
            Index::rebuild(slot, &view, id, payload, &mut frame);
            if frame.len() >= COMPACT_FRAME {
                flush(&mut frame, &mut written).map_err(io("writing the compacted job log"))?;
            }
        }
        match more {
            Some(next) => from = next,
            None => break,
        }
    }
    flush(&mut frame, &mut written).map_err(io("writing the compacted job log"))?;
    out.sync_all()
        .map_err(io("syncing the compacted job log"))?;
    seam::rename(new_path, &shared.path).map_err(io("renaming the compacted job log"))?;
    sync_dir(&shared.path)?;

    // The new file is the log: move every data offset to it.
    let mut state = shared.lock();
    debug_assert_eq!(state.end, end, "no frame is written during compaction");
    let shift = |data: u64| written + (data - end);
    state.index.move_data(|slot, s| {
        if s.data < end {
            moved[&slot]
        } else {
            shift(s.data)
        }
    });
    for step in &mut state.batch.undo {
        if let Undo::Slot(slot, view) = step {
            if view.slot.state != super::index::State::Free {
                view.slot.data = if view.slot.data < end {
                    moved.get(slot).copied().unwrap_or(view.slot.data)
                } else {
                    shift(view.slot.data)
                };
            }
        }
    }
    state.batch.base = written;
    state.end = written;
    state.file = Arc::new(out);
    state.compact_retry = 0;
    Ok(())
}
