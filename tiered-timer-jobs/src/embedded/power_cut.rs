//! Power cuts, not only SIGKILL: the states a power loss could leave,
//! built from a recording of everything the store did to its files, each
//! reopened and checked.
//!
//! A SIGKILL keeps the page cache; a power cut does not. It drops every
//! write not yet synced (or keeps some of it: the kernel may have written
//! it back), tears a write at sector granularity, may leave a file's new
//! length without its data (zeros), and forgets a create or rename whose
//! directory was not synced. So, as SQLite's crash-test VFS and RocksDB's
//! `FaultInjectionTestFS` do:
//!
//! 1. A workload runs on a real store with a [`Tap`] on its directory
//!    (`fs.rs`): the store's own file calls, recorded in order with their
//!    bytes, and notes of what each call returned (`schedule <id> <due>`
//!    before a schedule, `scheduled <id>` once it returned `Ok`; the same
//!    for acks and cancels). It creates the store from nothing, schedules
//!    from eight tasks at once and in chunks, cancels (garbage, so that
//!    compaction rewrites the log and renames it into place), claims and
//!    acks.
//! 2. [`Model`] replays the recording: per file, what is durable and the
//!    writes, cuts and syncs pending since; per directory, its durable
//!    names and the creates and renames pending since its last sync.
//! 3. At every point of the recording (after each file call) it builds
//!    crash states: only what was synced; everything (the page cache
//!    survived); and random mixes (each pending write kept, dropped or
//!    torn at 512-byte sectors, a length kept without its data, each
//!    pending create or rename kept or lost), writes each into a fresh
//!    directory and opens the store there (`ops::open`, the real open).
//! 4. Each must open, hold every job whose schedule returned `Ok` before
//!    that point unless its ack or cancel had begun, hold none whose ack or
//!    cancel returned `Ok`, and hold every job with the due time it was
//!    scheduled for (never early).
//!
//! A second recording makes one `fdatasync` of the log fail (`EIO`): the
//! calls of that group fail, every change after it fails (the queue
//! refuses changes until reopened: after a failed `fdatasync` the kernel
//! may have dropped the pages, and a later sync would succeed without
//! them), and its crash states are checked the same way.
//!
//! Deterministic: the workload's choices and the crash states come from a
//! seed (`TTR_POWER_SEED`, printed on failure; the recording itself
//! depends on how calls met in group commits). A failing state's
//! directory is kept, and its path printed, to be opened again.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::OsString;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::fs::tap::{Ino, Op, Tap};
use super::index::{Due, State, Which};
use super::ops;
use super::store::QueueLog;
use super::tests::TempDir;

/// A sector: the unit a power cut tears a write at.
const SECTOR: u64 = 512;
/// Distinct checks (crash state, calls returned by then) the plain
/// recording must yield at least, and the one with a failing sync.
const MIN_STATES: usize = 1_000;
const MIN_STATES_EIO: usize = 300;

/// A small random number generator (xorshift), for reproducible choices.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }

    fn coin(&mut self) -> bool {
        self.below(2) == 0
    }
}

/// A change to a file not yet synced.
#[derive(Debug, Clone)]
enum Pending {
    Write { at: u64, bytes: Vec<u8> },
    SetLen(u64),
}

/// A file: its durable bytes, and what came since its last sync.
#[derive(Debug, Clone, Default)]
struct FileModel {
    durable: Vec<u8>,
    pending: Vec<Pending>,
}

/// A name in a directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Entry {
    File(Ino),
    Dir,
}

/// A change to a directory's names not yet synced.
#[derive(Debug, Clone)]
enum EntryOp {
    Link(OsString, Entry),
    Rename(OsString, OsString),
}

#[derive(Debug, Clone, Default)]
struct DirModel {
    durable: BTreeMap<OsString, Entry>,
    pending: Vec<EntryOp>,
}

/// What a power cut at some point could leave, as far as POSIX promises.
#[derive(Debug)]
struct Model {
    root: PathBuf,
    files: HashMap<Ino, FileModel>,
    dirs: HashMap<PathBuf, DirModel>,
}

/// How a crash state treats what was not synced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    /// Only what was synced.
    Synced,
    /// Everything (the page cache and the directory entries survived).
    Everything,
    /// The metadata without the data: every name and every file's new
    /// length, but none of the bytes not synced (zeros in their place), as
    /// a journal of metadata only can leave it.
    Metadata,
    /// A random mix, from this seed.
    Mixed(u64),
}

fn split(path: &Path) -> (PathBuf, OsString) {
    let parent = path.parent().expect("a path under the root").to_owned();
    let name = path.file_name().expect("a file name").to_owned();
    (parent, name)
}

fn apply_entry(names: &mut BTreeMap<OsString, Entry>, op: &EntryOp) {
    match op {
        EntryOp::Link(name, entry) => {
            names.insert(name.clone(), *entry);
        }
        EntryOp::Rename(from, to) => {
            if let Some(entry) = names.remove(from) {
                names.insert(to.clone(), entry);
            }
        }
    }
}

fn write_at(bytes: &mut Vec<u8>, at: u64, data: &[u8]) {
    let (at, end) = (at as usize, at as usize + data.len());
    if bytes.len() < end {
        bytes.resize(end, 0);
    }
    bytes[at..end].copy_from_slice(data);
}

fn apply_pending(bytes: &mut Vec<u8>, change: &Pending) {
    match change {
        Pending::Write { at, bytes: data } => write_at(bytes, *at, data),
        Pending::SetLen(len) => bytes.resize(*len as usize, 0),
    }
}

/// A write torn at sector granularity: some sectors kept, the others lost
/// (zeros where the file grew, the old bytes elsewhere); the file's new
/// length kept or not (`size`).
fn apply_torn(bytes: &mut Vec<u8>, at: u64, data: &[u8], rng: &mut Rng, size: bool) {
    let end = at + data.len() as u64;
    let mut sector = at / SECTOR * SECTOR;
    while sector < end {
        let from = sector.max(at);
        let to = (sector + SECTOR).min(end);
        if rng.coin() {
            write_at(bytes, from, &data[(from - at) as usize..(to - at) as usize]);
        }
        sector += SECTOR;
    }
    if size && (bytes.len() as u64) < end {
        bytes.resize(end as usize, 0);
    }
}

impl Model {
    fn new(root: &Path) -> Model {
        let mut dirs = HashMap::new();
        dirs.insert(root.to_owned(), DirModel::default());
        Model {
            root: root.to_owned(),
            files: HashMap::new(),
            dirs,
        }
    }

    fn dir(&mut self, path: &Path) -> &mut DirModel {
        self.dirs.entry(path.to_owned()).or_default()
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Mkdir { path } => {
                self.dirs.insert(path.clone(), DirModel::default());
                let (parent, name) = split(path);
                self.dir(&parent)
                    .pending
                    .push(EntryOp::Link(name, Entry::Dir));
            }
            Op::Create { path, ino } => {
                self.files.insert(*ino, FileModel::default());
                let (parent, name) = split(path);
                self.dir(&parent)
                    .pending
                    .push(EntryOp::Link(name, Entry::File(*ino)));
            }
            Op::Write { ino, at, bytes } => {
                self.files
                    .entry(*ino)
                    .or_default()
                    .pending
                    .push(Pending::Write {
                        at: *at,
                        bytes: bytes.clone(),
                    });
            }
            Op::SetLen { ino, len } => {
                self.files
                    .entry(*ino)
                    .or_default()
                    .pending
                    .push(Pending::SetLen(*len));
            }
            Op::Sync { ino } => {
                let file = self.files.entry(*ino).or_default();
                for change in std::mem::take(&mut file.pending) {
                    apply_pending(&mut file.durable, &change);
                }
            }
            // In doubt: its changes stay pending (written back or lost).
            Op::SyncFailed { .. } | Op::Note(_) => {}
            Op::SyncDir { path } => {
                let dir = self.dir(path);
                for op in std::mem::take(&mut dir.pending) {
                    apply_entry(&mut dir.durable, &op);
                }
            }
            Op::Rename { from, to } => {
                let (parent, from) = split(from);
                let (_, to) = split(to);
                self.dir(&parent).pending.push(EntryOp::Rename(from, to));
            }
        }
    }

    /// A file's bytes in a crash state.
    fn file_bytes(&self, ino: Ino, variant: Variant, rng: &mut Rng) -> Vec<u8> {
        let Some(file) = self.files.get(&ino) else {
            return Vec::new();
        };
        let mut bytes = file.durable.clone();
        for change in &file.pending {
            match variant {
                Variant::Synced => {}
                Variant::Everything => apply_pending(&mut bytes, change),
                Variant::Metadata => match change {
                    Pending::Write { at, bytes: data } => {
                        let end = (*at as usize + data.len()).max(bytes.len());
                        bytes.resize(end, 0);
                    }
                    Pending::SetLen(_) => apply_pending(&mut bytes, change),
                },
                Variant::Mixed(_) => match (change, rng.below(8)) {
                    (_, 0..=2) => {} // lost
                    (Pending::Write { at, bytes: data }, 6..=7) => {
                        let size = rng.coin();
                        apply_torn(&mut bytes, *at, data, rng, size);
                    }
                    (change, _) => apply_pending(&mut bytes, change),
                },
            }
        }
        bytes
    }

    /// A directory's names in a crash state.
    fn names(&self, dir: &Path, variant: Variant, rng: &mut Rng) -> BTreeMap<OsString, Entry> {
        let Some(model) = self.dirs.get(dir) else {
            return BTreeMap::new();
        };
        let mut names = model.durable.clone();
        for op in &model.pending {
            let keep = match variant {
                Variant::Synced => false,
                Variant::Everything | Variant::Metadata => true,
                Variant::Mixed(_) => rng.coin(),
            };
            if keep {
                apply_entry(&mut names, op);
            }
        }
        names
    }

    /// Writes a crash state under `target` (in place of the root); returns
    /// a hash of it (to count distinct states).
    fn materialize(&self, variant: Variant, target: &Path) -> u64 {
        let mut rng = Rng::new(match variant {
            Variant::Mixed(seed) => seed,
            _ => 1,
        });
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        let mut files: HashMap<Ino, Vec<u8>> = HashMap::new();
        let mut stack = vec![self.root.clone()];
        while let Some(dir) = stack.pop() {
            let real = target.join(dir.strip_prefix(&self.root).unwrap());
            for (name, entry) in self.names(&dir, variant, &mut rng) {
                let path = real.join(&name);
                name.hash(&mut hasher);
                match entry {
                    Entry::Dir => {
                        std::fs::create_dir(&path).unwrap();
                        stack.push(dir.join(&name));
                    }
                    Entry::File(ino) => {
                        let bytes = files
                            .entry(ino)
                            .or_insert_with(|| self.file_bytes(ino, variant, &mut rng));
                        bytes.hash(&mut hasher);
                        std::fs::write(&path, &bytes).unwrap();
                    }
                }
            }
        }
        hasher.finish()
    }
}

/// What the calls had returned by some point of a recording.
#[derive(Debug, Default)]
struct Ledger {
    /// Every job a schedule was begun for, with its due time.
    due: HashMap<String, u64>,
    /// Schedules that returned `Ok`.
    scheduled: HashSet<String>,
    /// Jobs an ack or cancel was begun for (they may be gone).
    touched: HashSet<String>,
    /// Jobs an ack or cancel removed (returned `Ok(true)`).
    gone: HashSet<String>,
}

impl Ledger {
    fn note(&mut self, note: &str) {
        let mut words = note.split(' ');
        let (what, id) = (words.next().unwrap(), words.next().unwrap().to_owned());
        match what {
            "schedule" => {
                self.due.insert(id, words.next().unwrap().parse().unwrap());
            }
            "scheduled" => {
                self.scheduled.insert(id);
            }
            "ack" | "cancel" => {
                self.touched.insert(id);
            }
            "acked" | "cancelled" => {
                self.gone.insert(id);
            }
            other => panic!("unknown note {other:?}"),
        }
    }

    /// What is wrong with the jobs a reopened store holds (id: due time).
    fn check(&self, found: &HashMap<String, u64>) -> Result<(), String> {
        for id in &self.scheduled {
            if !self.touched.contains(id) && !found.contains_key(id) {
                return Err(format!("{id}: its schedule returned Ok, and it is gone"));
            }
        }
        for (id, due) in found {
            if self.gone.contains(id) {
                return Err(format!(
                    "{id}: its ack or cancel returned Ok, and it is back"
                ));
            }
            match self.due.get(id) {
                None => return Err(format!("{id}: never scheduled, and it is there")),
                Some(want) if want != due => {
                    return Err(format!("{id}: due at {due}, scheduled for {want}"))
                }
                Some(_) => {}
            }
        }
        Ok(())
    }
}

/// A directory for the test's stores: on a tmpfs if there is one (their
/// syncs cost nothing there; the recording, not the disk, decides what is
/// durable).
fn scratch(what: &str) -> TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        TempDir::new_in(shm, what)
    } else {
        TempDir::new(what)
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Waits (at most 5 s) until no process-local handle holds the store in
/// `dir`: its committer wrote its last frame and let the lock go.
async fn wait_closed(dir: &Path) {
    let lock = std::fs::File::open(dir.join("LOCK")).unwrap();
    for _ in 0..500 {
        if fs4::FileExt::try_lock(&lock).is_ok() {
            let _ = fs4::FileExt::unlock(&lock);
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the store in {} did not close", dir.display());
}

/// The workload under the tap: rounds of concurrent schedules, a chunk,
/// cancels, claims and acks. With `fail_sync`, that sync of the log fails
/// (`EIO`): from then on every change must fail. Returns the recording.
async fn record(seed: u64, rounds: usize, fail_sync: Option<u64>) -> (Vec<Op>, TempDir) {
    let dir = scratch("power-rec");
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let tap = Tap::start(&root);
    if let Some(n) = fail_sync {
        tap.fail_log_sync(n);
    }
    let store = root.join("store");
    let log = ops::open(&store, "orders")
        .await
        .expect("a new store opens");
    log.set_compact_min(8 << 10);
    let mut rng = Rng::new(seed);
    let failed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut n = 0u64;
    for _ in 0..rounds {
        let now = now_ms();
        let mut later = Vec::new();
        // Eight schedules at once: group commits of one to eight.
        let mut tasks = Vec::new();
        for _ in 0..8 {
            n += 1;
            let id = format!("j{n}");
            let due = if rng.coin() {
                now - 1_000 + rng.below(500)
            } else {
                later.push(id.clone());
                now + 3_600_000 + rng.below(1_000_000)
            };
            let (log, tap, failed) = (Arc::clone(&log), Arc::clone(&tap), Arc::clone(&failed));
            tasks.push(tokio::spawn(async move {
                tap.note(format!("schedule {id} {due}"));
                let before = failed.load(std::sync::atomic::Ordering::SeqCst);
                let result = log.schedule(&id, Due::At(due), id.as_bytes()).await;
                settle(
                    &tap,
                    &failed,
                    before,
                    result.map(|(new, _)| new),
                    &format!("scheduled {id}"),
                );
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        // A chunk: all or nothing.
        let chunk: Vec<(String, u64)> = (0..1 + rng.below(12))
            .map(|_| {
                n += 1;
                (format!("j{n}"), now + 60_000 + rng.below(60_000))
            })
            .collect();
        later.extend(chunk.iter().map(|(id, _)| id.clone()));
        for (id, due) in &chunk {
            tap.note(format!("schedule {id} {due}"));
        }
        let jobs: Vec<(&str, u64, &[u8])> = chunk
            .iter()
            .map(|(id, due)| (id.as_str(), *due, id.as_bytes()))
            .collect();
        let before = failed.load(std::sync::atomic::Ordering::SeqCst);
        let result = log.schedule_many(false, None, &jobs).await;
        let ok = settle(
            &tap,
            &failed,
            before,
            result.map(|(n, _)| n == jobs.len()),
            "",
        );
        if ok {
            for (id, _) in &chunk {
                tap.note(format!("scheduled {id}"));
            }
        }
        // Cancels at once: garbage for compaction.
        let mut tasks = Vec::new();
        for id in later.into_iter().filter(|_| rng.below(4) != 0) {
            let (log, tap, failed) = (Arc::clone(&log), Arc::clone(&tap), Arc::clone(&failed));
            tasks.push(tokio::spawn(async move {
                tap.note(format!("cancel {id}"));
                let before = failed.load(std::sync::atomic::Ordering::SeqCst);
                let result = log.cancel(&id).await;
                settle(&tap, &failed, before, result, &format!("cancelled {id}"));
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        // Claims, and acks one by one or together.
        let claim = log.claim(1 + rng.below(6) as usize, 60_000, 100).await;
        let jobs = match claim {
            Ok(claim) => {
                assert!(
                    !failed.load(std::sync::atomic::Ordering::SeqCst),
                    "a claim returned Ok after a failed fdatasync"
                );
                claim.jobs
            }
            Err(_) => {
                assert!(failed.load(std::sync::atomic::Ordering::SeqCst) || fail_sync.is_some());
                failed.store(true, std::sync::atomic::Ordering::SeqCst);
                Vec::new()
            }
        };
        let mut together = Vec::new();
        for job in &jobs {
            match rng.below(6) {
                0 => {}
                1 | 2 => {
                    tap.note(format!("ack {}", job.id));
                    let before = failed.load(std::sync::atomic::Ordering::SeqCst);
                    let result = log.ack(&job.id, job.token).await;
                    settle(&tap, &failed, before, result, &format!("acked {}", job.id));
                }
                _ => {
                    tap.note(format!("ack {}", job.id));
                    together.push((job.id.as_str(), job.token));
                }
            }
        }
        let before = failed.load(std::sync::atomic::Ordering::SeqCst);
        let result = log.ack_many(&together).await;
        if settle(
            &tap,
            &failed,
            before,
            result.map(|lost| lost.is_empty()),
            "",
        ) {
            for (id, _) in together {
                tap.note(format!("acked {id}"));
            }
        }
    }
    let path = log.path().to_owned();
    drop(log);
    wait_closed(&store).await;
    let ops = tap.stop();
    assert!(path.starts_with(&root));
    (ops, dir)
}

/// Notes `ok_note` if `result` is `Ok(true)`; returns whether it was. A
/// failure is only allowed with a failing sync, and every change made
/// after one was seen to fail (`before`: `failed` read before the call)
/// must fail (the queue refuses changes until reopened). A change made
/// before may still be `Ok` when it is settled after another's failure:
/// its frame was synced before the failing one.
fn settle(
    tap: &Tap,
    failed: &std::sync::atomic::AtomicBool,
    before: bool,
    result: Result<bool, super::error::StoreError>,
    ok_note: &str,
) -> bool {
    use std::sync::atomic::Ordering;
    match result {
        Ok(done) => {
            assert!(
                !before,
                "a change made after a failed fdatasync returned Ok ({ok_note})"
            );
            if done && !ok_note.is_empty() {
                tap.note(ok_note);
            }
            done
        }
        Err(error) => {
            let text = error.to_string();
            assert!(
                text.contains("syncing the job log") || text.contains("refuses changes"),
                "not the failed sync's error: {text}"
            );
            failed.store(true, Ordering::SeqCst);
            false
        }
    }
}

/// The jobs a store holds: id and due time (a leased job's deadline).
async fn jobs_of(log: &QueueLog) -> Result<HashMap<String, u64>, String> {
    let mut found = HashMap::new();
    for which in [Which::Waiting, Which::Leased, Which::Dead] {
        let (_, total, rows) = log
            .list(which, 0, 1 << 20, 0)
            .await
            .map_err(|e| format!("listing: {e}"))?;
        assert_eq!(total as usize, rows.len());
        for row in rows {
            let due = match row.state {
                State::Waiting => row.at_ms,
                _ => row.deadline_ms.expect("a leased or dead job's deadline"),
            };
            found.insert(row.id, due);
        }
    }
    Ok(found)
}

/// Opens the store in a crash state and checks it against the ledger.
async fn check_state(dir: &Path, ledger: &Ledger) -> Result<(), String> {
    let log = ops::open(&dir.join("store"), "orders")
        .await
        .map_err(|e| format!("the store does not open: {e}"))?;
    let found = jobs_of(&log).await;
    drop(log);
    ledger.check(&found?)
}

/// Builds the crash states of a recording and checks each; returns how
/// many distinct checks were made (a state, and the calls that had
/// returned by then).
async fn check_recording(ops: &[Op], root: &Path, seed: u64, mixes: u64) -> usize {
    let mut model = Model::new(root);
    let mut ledger = Ledger::default();
    // A state and the promises it is checked against: the same files
    // after more calls returned are another check.
    let mut seen: HashSet<(u64, usize)> = HashSet::new();
    let mut notes = 0;
    let scratch = scratch("power-state");
    let mut rng = Rng::new(seed ^ 0x5eed);
    for (point, op) in ops.iter().enumerate() {
        match op {
            Op::Note(note) => {
                ledger.note(note);
                notes += 1;
                continue;
            }
            op => model.apply(op),
        }
        let mut variants = vec![Variant::Synced, Variant::Everything, Variant::Metadata];
        variants.extend((0..mixes).map(|_| Variant::Mixed(rng.below(u64::MAX))));
        for variant in variants {
            let target = scratch.path().join(format!("{point}-{}", seen.len()));
            std::fs::create_dir(&target).unwrap();
            if !seen.insert((model.materialize(variant, &target), notes)) {
                std::fs::remove_dir_all(&target).unwrap();
                continue;
            }
            if let Err(why) = check_state(&target, &ledger).await {
                let kept = std::env::temp_dir().join(format!("ttr-power-cut-failed-{seed}"));
                let _ = std::fs::remove_dir_all(&kept);
                copy_dir(&target, &kept);
                let recent: Vec<String> = ops[point.saturating_sub(12)..=point]
                    .iter()
                    .map(describe)
                    .collect();
                panic!(
                    "seed {seed} (TTR_POWER_SEED={seed}): crash state after op {point} \
                     ({variant:?}): {why}\nthe state is kept in {}\nthe last ops:\n  {}",
                    kept.display(),
                    recent.join("\n  ")
                );
            }
            std::fs::remove_dir_all(&target).unwrap();
        }
    }
    seen.len()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// An op for a person (bytes as their length).
fn describe(op: &Op) -> String {
    match op {
        Op::Write { ino, at, bytes } => format!("write file {ino} at {at}: {} bytes", bytes.len()),
        other => format!("{other:?}"),
    }
}

fn seed() -> u64 {
    std::env::var("TTR_POWER_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x7e57_c0de_2026_1127)
}

fn mixes() -> u64 {
    std::env::var("TTR_POWER_MIXES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6)
}

/// Creation from nothing, group commits, cancels, claims, acks and a
/// compaction (rename and directory sync), cut by a power loss at every
/// point: every state opens and keeps what was promised.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_power_cut_state_opens_and_keeps_what_was_promised() {
    let seed = seed();
    let (ops, dir) = record(seed, 100, None).await;
    let renames = ops
        .iter()
        .filter(|op| matches!(op, Op::Rename { from, .. } if from.extension().is_some_and(|e| e == "compact")))
        .count();
    assert!(
        renames >= 1,
        "the workload compacted its log {renames} times"
    );
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let states = check_recording(&ops, &root, seed, mixes()).await;
    eprintln!(
        "seed {seed}: {} recorded ops, {renames} compaction(s), {states} distinct crash states checked",
        ops.len()
    );
    assert!(states >= MIN_STATES, "only {states} distinct crash states");
}

/// An `fdatasync` of the log fails (`EIO`) in the middle of the workload:
/// its group's calls fail, so does every change after it (nothing is
/// reported `Ok` on top of what may be lost), and every crash state of
/// the recording opens and keeps what was promised.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_fdatasync_fails_its_group_and_every_later_change() {
    let seed = seed() ^ 0xe10;
    let (ops, dir) = record(seed, 40, Some(150)).await;
    let failed_at = ops
        .iter()
        .position(|op| matches!(op, Op::SyncFailed { .. }))
        .expect("the 150th sync of the log failed");
    // A call that began after the failed sync's frame was written must
    // not have returned Ok (those that began before may be of an earlier
    // frame: the crash states check that each such Ok is on disk).
    let written = ops[..failed_at]
        .iter()
        .rposition(|op| matches!(op, Op::Write { .. }))
        .unwrap();
    let mut began: HashMap<String, usize> = HashMap::new();
    for (at, op) in ops.iter().enumerate() {
        let Op::Note(note) = op else { continue };
        let mut words = note.split(' ');
        let (what, id) = (words.next().unwrap(), words.next().unwrap().to_owned());
        match what {
            "schedule" | "ack" | "cancel" => {
                began.insert(id, at);
            }
            _ => assert!(
                began[&id] < written,
                "{note}: a call that began after the failed fdatasync's write returned Ok"
            ),
        }
    }
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let states = check_recording(&ops, &root, seed, mixes()).await;
    eprintln!(
        "seed {seed}: {} recorded ops, the sync failed at op {failed_at}, {states} distinct crash states checked",
        ops.len()
    );
    assert!(
        states >= MIN_STATES_EIO,
        "only {states} distinct crash states"
    );
}
