//! [`repair`]: the operator's way out when an embedded queue's log ends in
//! a damaged frame (see [`Error::Corrupt`]).

use crate::data::error::Error;
#[cfg(feature = "embedded")]
use crate::data::repaired::Quarantined;
use crate::data::repaired::Repaired;

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
/// [`Error::InvalidUrl`] for a URL that is not `file://`;
/// [`Error::InvalidQueueName`]; [`Error::Locked`]; [`Error::Corrupt`];
/// [`Error::Io`].
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
    #[cfg(feature = "embedded")]
    {
        if !url.starts_with("file://") {
            return Err(Error::InvalidUrl {
                reason: format!("{url}: repair is for embedded stores (file:// URLs)"),
            });
        }
        crate::data::id::check_queue_name(queue)?;
        crate::embedded::queue::check_file_name(queue)?;
        let dir = crate::embedded::queue::dir_of(url)?;
        let log = dir.join(format!("{queue}.log"));
        if let Err(source) = std::fs::metadata(&log) {
            return Err(Error::Io {
                path: log,
                doing: "looking for the queue's log to repair".to_owned(),
                source,
            });
        }
        let done = crate::embedded::ops::repair(&dir, queue).await?;
        Ok(Repaired {
            log: done.0,
            end: done.1.end,
            torn: done.1.torn,
            quarantined: done.1.quarantined.map(|(path, len, reason)| Quarantined {
                path,
                offset: done.1.end,
                len,
                reason: reason.to_owned(),
            }),
        })
    }
    #[cfg(not(feature = "embedded"))]
    Err(Error::InvalidUrl {
        reason: format!("{url}: repair needs the crate's `embedded` feature ({queue})"),
    })
}
