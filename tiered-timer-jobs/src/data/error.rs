//! The crate's error type.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use super::id::JobId;

/// What went wrong in a call on a [`Queue`](crate::Queue) or a
/// [`Job`](crate::Job).
///
/// On any error, nothing was written: on Redis every change is one Lua
/// script, which Redis runs entirely or not at all (after a
/// [`Error::Timeout`] or a lost connection the script may still have run;
/// see there); in the embedded store every change is one record frame,
/// on disk whole or not at all.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The URL could not be parsed, names a scheme that is neither an
    /// embedded store's (`file://`) nor a Redis', or is `file://` without
    /// a directory. The reason lists the accepted schemes.
    InvalidUrl {
        /// What is wrong with it (the URL itself is not repeated: it may
        /// hold a password).
        reason: String,
    },
    /// The queue name is empty, longer than 200 bytes, contains `{`, `}`,
    /// `#`, `/`, whitespace or a control character, or is `.` or `..`
    /// (one rule for every backend).
    InvalidQueueName {
        /// The name (its first 64 characters).
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The job id is empty or longer than 512 bytes.
    InvalidJobId {
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A setting of the [`Builder`](crate::Builder) is out of range (a
    /// zero or too-long lease, zero attempts, zero partitions...).
    InvalidConfig {
        /// Which setting, and why.
        reason: &'static str,
    },
    /// An argument of one call is out of range: a zero or too-long lease
    /// passed to [`Job::extend_lease`](crate::Job::extend_lease) (the same
    /// limit, and the same reason, as
    /// [`Builder::lease`](crate::Builder::lease)'s), or a page that
    /// [`Queue::list`](crate::Queue::list) cannot serve. The queue's
    /// settings are fine.
    InvalidArgument {
        /// Which argument, and why.
        reason: &'static str,
    },
    /// The payload is larger than the queue's limit
    /// ([`Builder::max_payload`](crate::Builder::max_payload), 512 KiB by
    /// default).
    PayloadTooLarge {
        /// The payload's length in bytes.
        len: usize,
        /// The limit in bytes.
        limit: usize,
    },
    /// The due time cannot be represented: before the Unix epoch, or more
    /// than about 142 000 years away (2^52 ms, the range in which Redis'
    /// sorted-set scores are exact).
    InvalidDeadline,
    /// The job's lease ran out (by Redis' clock) before this call, so the
    /// job is, or will be, delivered again; nothing was changed. Work done
    /// under the lost lease may be repeated by the next delivery: make
    /// jobs idempotent, or lengthen the lease.
    LeaseExpired {
        /// The job.
        id: JobId,
    },
    /// The queue was closed ([`Queue::close`](crate::Queue::close)): it
    /// hands out no more jobs. Jobs already delivered can still be acked,
    /// retried, extended and released.
    Closed,
    /// The server (Redis, Postgres) did not answer within the queue's command timeout
    /// ([`Builder::command_timeout`](crate::Builder::command_timeout)).
    /// The command may or may not have run; every command of this crate is
    /// safe to repeat (scheduling with an explicit id is idempotent).
    Timeout {
        /// The timeout that ran out.
        after: Duration,
    },
    /// Redis returned an error, or the connection failed (a refused
    /// connection is reported at once, with the operating system's
    /// reason).
    #[cfg(feature = "redis")]
    Redis(redis::RedisError),
    /// Something answered at the URL's address, but not in the Redis
    /// protocol: another server listens on that port (an HTTP server, a
    /// TLS port given a `redis://` URL...). The `redis` crate's parse error
    /// is the [source](std::error::Error::source).
    #[cfg(feature = "redis")]
    NotRedis(redis::RedisError),
    /// Postgres returned an error, or the connection failed (a refused
    /// connection is reported at once, with the operating system's
    /// reason); sqlx's error is the [source](std::error::Error::source).
    /// A schema written by a newer version of this crate is one too (its
    /// version is named).
    #[cfg(feature = "postgres")]
    Postgres(sqlx::Error),
    /// The queue's partition count, recorded in Redis at its first
    /// connect, is not the one this handle asked for with
    /// [`Builder::partitions`](crate::Builder::partitions): its jobs are
    /// under other hash tags, and this handle would see none of them. (A
    /// handle that asks for no count adopts the recorded one.)
    PartitionMismatch {
        /// The queue.
        queue: String,
        /// The count recorded in Redis.
        recorded: u32,
        /// The count this handle was built with.
        configured: u32,
    },
    /// A handle built with [`Builder::register(false)`](crate::Builder::register)
    /// (a look, as `ttr`'s) found no queue of that name: not in the
    /// registry and no keys on Redis, no log in a `file://` store. Nothing
    /// was created.
    NoSuchQueue {
        /// The name asked for.
        queue: String,
    },
    /// A write the caller is promised (a schedule, an ack, a retry, a
    /// cancel...) ran on the master, but fewer replicas than
    /// [`Builder::replicas`](crate::Builder::replicas) asks for have it:
    /// `WAIT` counted fewer within the replica timeout, or the master was
    /// known to have fewer online and the write did not wait (`within`
    /// zero). The write is done as far as the master is concerned; a
    /// failover before it reaches a replica may lose it (a schedule may
    /// vanish, an ack may come back as a redelivery). Only that call says
    /// so: claims go on without replicas (a lost claim only means a
    /// redelivery), so the queue keeps delivering.
    NotReplicated {
        /// How many replicas acknowledged the write (or were online).
        replicas: u32,
        /// How many were asked for.
        wanted: u32,
        /// How long `WAIT` waited (zero: the master was known to be
        /// short of replicas, and the write did not wait).
        within: Duration,
    },
    /// A setting that only one backend has was given for the other, where
    /// it would change what the queue promises: for example
    /// [`Builder::partitions`](crate::Builder::partitions) or
    /// [`Builder::replicas`](crate::Builder::replicas) on a `file://`
    /// store, [`Builder::read_only`](crate::Builder::read_only) on Redis.
    /// Nothing was opened or changed.
    Unsupported {
        /// The setting (`"partitions"`, `"cluster"`, `"replicas"`,
        /// `"read_only"`).
        setting: &'static str,
        /// The backend that has no such setting: `"embedded"` or `"redis"`.
        backend: &'static str,
    },
    /// The embedded store's directory is open in another process (its
    /// `LOCK` file is locked): one process at a time owns a store.
    Locked {
        /// The store's directory.
        path: PathBuf,
    },
    /// A call that would change the queue, on a handle opened with
    /// [`Builder::read_only`](crate::Builder::read_only): nothing was
    /// changed.
    ReadOnly {
        /// The queue's log.
        path: PathBuf,
    },
    /// The file system of the embedded store is full (or a quota is
    /// reached). Nothing of the failed call was written, and it changed
    /// nothing; calls succeed again once there is room.
    DiskFull {
        /// The file that could not grow.
        path: PathBuf,
    },
    /// A job log of the embedded store is damaged: a frame whose checksum
    /// does not match with whole frames after it, a record that makes no
    /// sense, or a whole last frame damaged after it was written (bit rot,
    /// a bad disk, an editor), which [`repair`](crate::repair) (`ttr
    /// repair`) moves to a quarantine file. A torn last write (a crash in
    /// the middle of it, never acknowledged) is not damage: opening cuts it
    /// off, with a warning. The queue does not open until the file is
    /// repaired, restored or moved away: nothing is dropped silently.
    Corrupt {
        /// The log.
        path: PathBuf,
        /// Where the damage starts, in bytes from the start of the file.
        offset: u64,
        /// What is wrong there.
        reason: String,
    },
    /// Any other I/O error of the embedded store, with what it was doing.
    /// After a failed write or `fdatasync` the store refuses every change
    /// until it is reopened (drop every handle, connect again), so that it
    /// never acknowledges what may not be on disk.
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What the store was doing.
        doing: String,
        /// The operating system's error.
        source: std::io::Error,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidUrl { reason } => write!(f, "invalid URL: {reason}"),
            Error::InvalidQueueName { name, reason } => {
                write!(f, "invalid queue name {name:?}: {reason}")
            }
            Error::InvalidJobId { reason } => write!(f, "invalid job id: {reason}"),
            Error::InvalidConfig { reason } => write!(f, "invalid queue configuration: {reason}"),
            Error::InvalidArgument { reason } => write!(f, "invalid argument: {reason}"),
            Error::PayloadTooLarge { len, limit } => {
                write!(
                    f,
                    "payload of {len} bytes is over the limit of {limit} bytes"
                )
            }
            Error::InvalidDeadline => f.write_str(
                "due time cannot be represented (before 1970 or more than 2^52 ms from the epoch)",
            ),
            Error::LeaseExpired { id } => write!(
                f,
                "the lease on job {id} ran out before this call; the job is delivered again"
            ),
            Error::Closed => f.write_str("the queue is closed and hands out no more jobs"),
            Error::Timeout { after } => {
                write!(
                    f,
                    "the server did not answer within the command timeout of {after:?}"
                )
            }
            #[cfg(feature = "redis")]
            Error::Redis(error) => write!(f, "Redis error: {error}"),
            #[cfg(feature = "redis")]
            Error::NotRedis(_) => f.write_str(
                "the server does not speak the Redis protocol: is another server (HTTP?) on that \
                 port, or does it want TLS (rediss://)?",
            ),
            #[cfg(feature = "postgres")]
            Error::Postgres(error) => write!(f, "Postgres error: {error}"),
            Error::PartitionMismatch {
                queue,
                recorded,
                configured,
            } => write!(
                f,
                "queue {queue} has {recorded} partition(s) (recorded in Redis at its first connect), \
                 but this handle asked for {configured}: use partitions({recorded}), or leave \
                 partitions unset to adopt the recorded count"
            ),
            Error::NoSuchQueue { queue } => write!(
                f,
                "no queue named {queue} exists (a handle built with register(false) opens only \
                 an existing queue)"
            ),
            Error::NotReplicated {
                replicas,
                wanted,
                within,
            } if within.is_zero() => write!(
                f,
                "the master has {replicas} of {wanted} replica(s) online: \
                 the write is on the master, but a failover may lose it"
            ),
            Error::NotReplicated {
                replicas,
                wanted,
                within,
            } => write!(
                f,
                "the write reached {replicas} of {wanted} replica(s) within {within:?}: \
                 it is on the master, but a failover may lose it"
            ),
            Error::Unsupported { setting, backend } => {
                write!(f, "{setting} is not a setting of the {backend} backend")
            }
            Error::Locked { path } => write!(
                f,
                "the job store at {} is open in another process (its LOCK file is locked)",
                path.display()
            ),
            Error::ReadOnly { path } => write!(
                f,
                "the queue's log {} is open read-only here (a look): nothing was changed",
                path.display()
            ),
            Error::DiskFull { path } => write!(
                f,
                "no space left for the job store at {} (nothing was written)",
                path.display()
            ),
            Error::Corrupt {
                path,
                offset,
                reason,
            } => write!(
                f,
                "the job log {} is damaged at byte {offset}: {reason}",
                path.display()
            ),
            Error::Io {
                path,
                doing,
                source,
            } => write!(f, "{doing} {}: {source}", path.display()),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            #[cfg(feature = "redis")]
            Error::Redis(error) | Error::NotRedis(error) => Some(error),
            #[cfg(feature = "postgres")]
            Error::Postgres(error) => Some(error),
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
