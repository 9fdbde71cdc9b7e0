//! What `ttr` does on embedded stores (`file://`) only: its looks open a
//! queue read-only, and `ttr repair` sets a damaged end of a log aside.
//!
//! A look (`queues`, `stats`, `job`, `pending`, `due`, `leased`, `dead`,
//! the dashboard's pages) opens the queue with
//! [`Builder::read_only`](tiered_timer_jobs::Builder::read_only): no lock
//! (so it works while the service that owns the store runs), and nothing
//! written or created. If the log has damaged frames, the look says so on
//! stderr, pointing to `ttr repair`. Changes (`requeue`, `purge`,
//! `cancel`, `promote`, the dashboard's actions) open the store as its
//! owner does, so they need the service stopped.

use serde_json::json;
use tiered_timer_jobs::{Queue, Repaired};

use crate::commands::Output;
use crate::text::safe;
use crate::{failure, Failure, RedisArgs};

/// Whether `url` is an embedded store's.
pub(crate) fn is_embedded(url: &str) -> bool {
    url.starts_with("file://")
}

/// Connects to queue `name` to look at it: read-only on an embedded
/// store (warning on stderr about damaged frames), as [`connect_with`]
/// elsewhere.
///
/// [`connect_with`]: crate::connect_with
pub(crate) async fn look_at(
    redis: &RedisArgs,
    name: &str,
    partitions: Option<u32>,
) -> Result<Queue, Failure> {
    if !is_embedded(&redis.url) {
        return crate::connect_with(redis, name, partitions).await;
    }
    let mut builder = Queue::builder(&redis.url, name).read_only(true);
    if let Some(partitions) = partitions {
        builder = builder.partitions(partitions);
    }
    let queue = builder
        .connect()
        .await
        .map_err(|e| failure(&redis.url, e))?;
    let stats = queue.stats().await.map_err(|e| failure(&redis.url, e))?;
    if stats.damaged_frames > 0 {
        eprintln!(
            "ttr: warning: the log of {name} has {} damaged frame(s): a damaged end it \
             could not read, or quarantine files beside it; run `ttr repair {name}` \
             (with its service stopped) and look at what it reports",
            stats.damaged_frames,
            name = safe(name)
        );
    }
    Ok(queue)
}

/// `ttr repair QUEUE`: cuts a torn end off an embedded queue's log, or
/// moves a damaged last frame to a quarantine file beside it.
pub(crate) async fn repair(redis: &RedisArgs, queue: &str, out: Output) -> Result<(), Failure> {
    if !is_embedded(&redis.url) {
        return Err(Failure::Usage(
            "repair is for embedded stores (--url file:///...): a Redis has no log to repair"
                .to_owned(),
        ));
    }
    let done = tiered_timer_jobs::repair(&redis.url, queue)
        .await
        .map_err(|e| failure(&redis.url, e))?;
    out.print(|| repair_text(queue, &done), || repair_json(queue, &done));
    Ok(())
}

fn repair_text(queue: &str, done: &Repaired) -> String {
    let queue = safe(queue);
    let log = safe(&done.log.display().to_string());
    if let Some(kept) = &done.quarantined {
        return format!(
            "{queue}: the log {log} ended in a damaged frame ({} bytes from byte {}: {}).\n\
             Moved them to {} and cut the log to {} bytes; the queue opens again.\n\
             What that frame held is lost to the queue: jobs it scheduled are missing, \
             jobs it acked or cancelled may come back. Look at the file before deleting it \
             (until then `ttr stats {queue}` warns about it).\n",
            kept.len,
            kept.offset,
            kept.reason,
            safe(&kept.path.display().to_string()),
            done.end
        );
    }
    if done.torn > 0 {
        return format!(
            "{queue}: cut a torn write ({} bytes, a crash in the middle of it, never \
             acknowledged) off the end of {log}; it is {} bytes now\n",
            done.torn, done.end
        );
    }
    format!(
        "{queue}: nothing to repair ({log} ends with a whole frame at byte {})\n",
        done.end
    )
}

fn repair_json(queue: &str, done: &Repaired) -> serde_json::Value {
    json!({
        "queue": queue,
        "log": done.log.display().to_string(),
        "end": done.end,
        "torn": done.torn,
        "quarantined": done.quarantined.as_ref().map(|kept| json!({
            "path": kept.path.display().to_string(),
            "offset": kept.offset,
            "len": kept.len,
            "reason": kept.reason,
        })),
    })
}
