//! The calls on a store rather than on one queue: [`find_queues`] lists
//! a store's queues (for `ttr` and its dashboard), [`repair`] mends the
//! end of an embedded queue's log. Both go to the backend the URL's
//! scheme names, after the checks every backend shares.

use std::time::Duration;

use crate::backends::AnyBackend;
use crate::data::checks::check_queue_name;
use crate::data::error::Error;
use crate::data::listing::QueueInfo;
use crate::data::repaired::Repaired;

/// Every queue on the Redis at `url` (a node of a Redis Cluster if
/// `cluster`), by name: those in the registry that a queue's first
/// connect writes, and, on a single Redis, those found by scanning for the
/// queues' keys. For a `file://` store, the queues with a log in its
/// directory (read without opening the store, so while another process
/// holds it; open each with [`Builder::read_only`](crate::Builder::read_only)
/// to look at it the same way; `cluster` and `timeout` do not apply).
///
/// # Errors
///
/// [`Error::InvalidUrl`]; [`Error::InvalidArgument`] for a zero
/// `timeout`; [`Error::Unsupported`] for `cluster` on a `file://` store;
/// [`Error::Timeout`] (each command waits at most `timeout`) or
/// [`Error::Redis`]; [`Error::Io`] if a store's directory cannot be read.
///
/// # Examples
///
/// ```no_run
/// # async fn demo() -> Result<(), tiered_timer_jobs::Error> {
/// use std::time::Duration;
/// let queues =
///     tiered_timer_jobs::find_queues("redis://127.0.0.1:6379/", false, Duration::from_secs(5))
///         .await?;
/// for q in queues {
///     println!("{} ({} partitions)", q.name, q.partitions);
/// }
/// # Ok(())
/// # }
/// ```
pub async fn find_queues(
    url: &str,
    cluster: bool,
    timeout: Duration,
) -> Result<Vec<QueueInfo>, Error> {
    if timeout.is_zero() {
        return Err(Error::InvalidArgument {
            reason: "the timeout must not be zero",
        });
    }
    AnyBackend::find_queues(url, cluster, timeout).await
}

/// Repairs the end of queue `queue`'s log in the embedded store at `url`
/// (`file:///...`), so that the queue opens again: a torn last write is
/// cut off (as opening does), and a damaged last frame (one that was
/// written whole, maybe acknowledged, and damaged since: bit rot, a bad
/// disk, an editor) is moved to a quarantine file beside the log, with a
/// `warn` event naming the file, offset and length. The queue's
/// [`Stats::damaged_frames`](crate::Stats::damaged_frames) counts such
/// files until they are deleted.
///
/// What the frame held (schedules, acks, anything) is lost to the queue:
/// jobs it scheduled are missing, jobs it acked come back. Look at the
/// quarantine file before deleting it. Damage followed by whole frames is
/// not repaired here ([`Error::Corrupt`] again): restore the store from a
/// copy. A log with nothing to repair is left as it is.
///
/// It takes the store's lock like any connect (a store another process
/// holds is [`Error::Locked`]: stop its service first), and creates
/// nothing: a store or queue that does not exist is [`Error::Io`] with
/// [`NotFound`](std::io::ErrorKind::NotFound).
///
/// # Errors
///
/// [`Error::InvalidUrl`]; [`Error::InvalidQueueName`];
/// [`Error::Unsupported`] for a store that keeps no log (Redis);
/// [`Error::Locked`]; [`Error::Corrupt`]; [`Error::Io`].
///
/// # Examples
///
/// ```no_run
/// use tiered_timer_jobs::{Error, Queue};
///
/// # async fn demo() -> Result<(), Error> {
/// let url = "file:///var/lib/shop/jobs";
/// let queue = match Queue::connect(url, "orders").await {
///     Err(Error::Corrupt { .. }) => {
///         // This service prefers running to waiting for an operator.
///         tiered_timer_jobs::repair(url, "orders").await?;
///         Queue::connect(url, "orders").await?
///     }
///     other => other?,
/// };
/// # Ok(())
/// # }
/// ```
pub async fn repair(url: &str, queue: &str) -> Result<Repaired, Error> {
    check_queue_name(queue)?;
    AnyBackend::repair(url, queue).await
}
