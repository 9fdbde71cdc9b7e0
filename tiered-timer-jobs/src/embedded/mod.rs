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
//! * On open, the log is replayed into a fresh index; a torn last frame
//!   (a crash in the middle of a write) is detected by its checksum and
//!   cut off; any other damage is an error naming the file and the byte
//!   offset. When most of a log is garbage, compaction rewrites the live
//!   jobs to a new file and renames it into place.
//! * One thread per open queue, the driver (`driver.rs`), sleeps (a
//!   timed wait on a condition variable, finer than a runtime's
//!   millisecond timer) until the next job comes due and wakes one
//!   waiting claim per due job.
//!
//! The operations (`ops.rs`) are those of the Redis scripts, one for one,
//! with the same answers: the `Queue` on either backend keeps one
//! contract.

mod driver;
pub(crate) mod error;
pub(crate) mod follow;
pub(crate) mod format;
pub(crate) mod fs;
pub(crate) mod index;
pub(crate) mod open;
pub(crate) mod ops;
pub(crate) mod queue;
pub(crate) mod store;

#[cfg(test)]
mod bench;
#[cfg(test)]
mod power_cut;
#[cfg(test)]
mod tests;
