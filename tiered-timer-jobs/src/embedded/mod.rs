//! The embedded backend: durable jobs in local files, no server.
//!
//! # Design
//!
//! The classic delay-message server's design (a delay log on disk, a
//! timing wheel in memory), on one host:
//!
//! * A store is a directory (`file:///var/lib/shop/jobs`), locked by one
//!   process at a time (`LOCK`); each queue in it is one append-only
//!   **delay log**, `<name>.log` (`format.rs`): every schedule, claim, ack,
//!   retry, failure, release, requeue and purge is a checksummed record.
//!   A change is durable before the call that made it returns: records go
//!   to disk in frames, one `pwrite` and one `fdatasync` for all the calls
//!   that came meanwhile (group commit, on a thread of the queue's own:
//!   `store.rs`). The exception is a claim, which hands its jobs out
//!   before its frame is synced: a crash then takes the worker with it,
//!   and the job is waiting again when the store reopens, that attempt
//!   not counted (see `store.rs`).
//! * In memory, an **index** per queue (`index.rs`): per job 48 bytes
//!   saying where its id and payload are in the log, its due time,
//!   attempts and state; the id table; and `tiered_timer`'s pure wheel
//!   (`tiered_timer::wheel_core`) of the jobs waiting for a later time
//!   and of the leases, in wall-clock milliseconds. Payloads stay on
//!   disk, read back (one positioned read) when a job is claimed.
//! * On open (`open.rs`), the log is replayed into a fresh index. Its end
//!   is told apart (`format.rs`): a **torn** last frame (a crash in the
//!   middle of a write: short, or with a sector-sized part of zeros) was
//!   never acknowledged and is cut off, with a warning; a **damaged** one
//!   (whole, failing its checksum: written, maybe acknowledged, damaged
//!   since) is never cut silently: the queue does not open
//!   (`Error::Corrupt`, naming `ttr repair`) until `repair` moves its
//!   bytes to `<queue>.log.quarantine-<offset>` beside the log, which
//!   `Stats::damaged_frames` then counts. Damage with whole frames after it
//!   is an error naming the file and the byte offset. When most of a log
//!   is garbage, compaction rewrites the live jobs to a new file and
//!   renames it into place.
//! * Nothing a power cut can do leaves a store that does not open or that
//!   lost an acknowledged change: the store's directory is synced into its
//!   parent when made, a log is created whole (its header written to a new
//!   file, synced, renamed into place, the directory synced), frames are
//!   synced before their calls return, a failed `fdatasync` makes the
//!   queue refuse every change until it is reopened (the kernel may have
//!   dropped the pages: PostgreSQL's lesson), and compaction syncs the new
//!   log and then the directory. Every file call goes through one seam
//!   (`fs.rs`), which the crate's tests record to build the states a power
//!   loss could leave and reopen each (`power_cut.rs`).
//! * A **read-only** handle (`follow.rs`, `Builder::read_only`, what `ttr`
//!   looks with) opens the log for reading only, without the lock, and
//!   creates and cuts nothing; before each look it reads what the log
//!   gained since (a compacted log again from its start). So a tool can
//!   look at a store a running service holds.
//! * One thread per open queue, the driver (`driver.rs`), sleeps (a
//!   timed wait on a condition variable, finer than a runtime's
//!   millisecond timer) until the next job comes due and wakes one
//!   waiting claim per due job.
//!
//! The operations (`ops.rs`) are those of the Redis scripts, one for one,
//! with the same answers, and `backend.rs` implements the backend contract
//! (`src/contract.rs`) on them: the `Queue` on either backend keeps one
//! contract. A queue's name is its log's file name (`names.rs`).

mod backend;
mod driver;
mod error;
mod follow;
mod format;
mod fs;
mod index;
mod names;
mod open;
mod ops;
mod store;

pub(crate) use backend::EmbeddedBackend;

#[cfg(test)]
mod bench;
#[cfg(test)]
mod power_cut;
#[cfg(test)]
mod tests;
