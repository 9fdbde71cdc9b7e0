//! Finding every queue on a Redis: [`find_queues`], for `ttr` and its
//! dashboard, and the registry that makes partition counts known.
//!
//! Ground rules:
//!
//! * The registry ([`QUEUES`], a hash of name → partition count) is
//!   written by a queue's first connect (and every handle is checked
//!   against it: [`Error::PartitionMismatch`]), except by handles built
//!   with [`Builder::register(false)`](crate::Builder::register), as
//!   operators' tools are: they write it at their first successful
//!   schedule, if ever (`HSETNX`, best effort), so that looking at a name
//!   does not make a queue appear.
//! * On a single Redis the keys are also scanned (`SCAN MATCH ttr:{*`, in
//!   steps, never `KEYS`), which finds queues that no producer of this
//!   version registered; their partition count is then the highest
//!   partition seen plus one.
//! * On a cluster only the registry is read (a scan would have to visit
//!   every node).

#[cfg(feature = "redis")]
use std::collections::BTreeMap;
use std::time::Duration;

use crate::data::error::Error;
#[cfg(feature = "redis")]
use crate::data::id::check_queue_name;
#[cfg(feature = "redis")]
use crate::data::limits::MAX_PARTITIONS;
use crate::data::listing::QueueInfo;
#[cfg(feature = "redis")]
use crate::queue::Inner;
#[cfg(feature = "redis")]
use crate::redis::keys::QUEUES;

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
/// [`Error::InvalidUrl`]; [`Error::Timeout`] (each command waits at most
/// `timeout`) or [`Error::Redis`]; [`Error::Io`] if a store's directory
/// cannot be read.
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
    crate::queue::check_url(url)?;
    if url.starts_with("file://") {
        return local_queues(url);
    }
    redis_queues(url, cluster, timeout).await
}

#[cfg(not(feature = "redis"))]
async fn redis_queues(
    url: &str,
    _cluster: bool,
    _timeout: Duration,
) -> Result<Vec<QueueInfo>, Error> {
    Err(Error::InvalidUrl {
        reason: format!("{url}: only file:// URLs without the crate's `redis` feature"),
    })
}

/// [`find_queues`] on a Redis.
#[cfg(feature = "redis")]
async fn redis_queues(
    url: &str,
    cluster: bool,
    timeout: Duration,
) -> Result<Vec<QueueInfo>, Error> {
    let invalid = |e: redis::RedisError| Error::InvalidUrl {
        reason: e.to_string(),
    };
    let mut found: BTreeMap<String, QueueInfo> = BTreeMap::new();
    if cluster {
        let client = redis::cluster::ClusterClient::builder(vec![url])
            .connection_timeout(timeout)
            .response_timeout(timeout)
            .build()
            .map_err(invalid)?;
        let mut conn = within(timeout, client.get_async_connection()).await?;
        let registry: Vec<(String, u32)> = within(
            timeout,
            redis::cmd("HGETALL").arg(QUEUES).query_async(&mut conn),
        )
        .await?;
        add_registered(&mut found, registry);
    } else {
        let client = redis::Client::open(url).map_err(invalid)?;
        // Our timeout for connecting too (redis-rs' own is 1 s), and no
        // response timeout of redis-rs' (500 ms): `within` bounds each call.
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(None);
        let mut conn = within(
            timeout,
            client.get_multiplexed_async_connection_with_config(&config),
        )
        .await?;
        let registry: Vec<(String, u32)> = within(
            timeout,
            redis::cmd("HGETALL").arg(QUEUES).query_async(&mut conn),
        )
        .await?;
        let mut cursor: u64 = 0;
        loop {
            let (next, keys): (u64, Vec<String>) = within(
                timeout,
                redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg("ttr:{*")
                    .arg("COUNT")
                    .arg(1000)
                    .query_async(&mut conn),
            )
            .await?;
            for key in keys {
                if let Some((name, partition)) = tag_of(&key) {
                    let partitions = partition.map_or(1, |p| p + 1);
                    let entry = found.entry(name.to_owned()).or_insert(QueueInfo {
                        name: name.to_owned(),
                        partitions,
                        registered: false,
                    });
                    entry.partitions = entry.partitions.max(partitions);
                }
            }
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
        add_registered(&mut found, registry);
    }
    Ok(found.into_values().collect())
}

/// Registered counts win over counts guessed from keys.
#[cfg(feature = "redis")]
fn add_registered(found: &mut BTreeMap<String, QueueInfo>, registry: Vec<(String, u32)>) {
    for (name, partitions) in registry {
        if check_queue_name(&name).is_err() || !(1..=MAX_PARTITIONS).contains(&partitions) {
            continue;
        }
        found.insert(
            name.clone(),
            QueueInfo {
                name,
                partitions,
                registered: true,
            },
        );
    }
}

/// The queue name and partition (`None`: a queue of one partition) of a
/// queue's key, `ttr:{name}:what` or `ttr:{name#p}:what`.
#[cfg(feature = "redis")]
fn tag_of(key: &str) -> Option<(&str, Option<u32>)> {
    let rest = key.strip_prefix("ttr:{")?;
    let (tag, what) = rest.split_once('}')?;
    what.strip_prefix(':')?;
    let (name, partition) = match tag.split_once('#') {
        Some((name, p)) => (name, Some(p.parse::<u32>().ok().filter(|&p| p < 1024)?)),
        None => (tag, None),
    };
    check_queue_name(name).ok()?;
    Some((name, partition))
}

#[cfg(feature = "redis")]
async fn within<T>(
    timeout: Duration,
    future: impl std::future::Future<Output = redis::RedisResult<T>>,
) -> Result<T, Error> {
    match tiered_timer::timeout(timeout, future).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) if error.is_timeout() => Err(Error::Timeout { after: timeout }),
        Ok(Err(error)) => Err(Error::from(error)),
        Err(_) => Err(Error::Timeout { after: timeout }),
    }
}

/// The queues of a `file://` store: one `<name>.log` each.
fn local_queues(url: &str) -> Result<Vec<QueueInfo>, Error> {
    #[cfg(feature = "embedded")]
    {
        let dir = crate::embedded::queue::dir_of(url)?;
        let io = |source| Error::Io {
            path: dir.clone(),
            doing: "listing the queues of".to_owned(),
            source,
        };
        let mut found: Vec<QueueInfo> = Vec::new();
        for entry in std::fs::read_dir(&dir).map_err(io)? {
            let name = entry.map_err(io)?.file_name();
            let Some(name) = name.to_str().and_then(|n| n.strip_suffix(".log")) else {
                continue;
            };
            found.push(QueueInfo {
                name: name.to_owned(),
                partitions: 1,
                registered: true,
            });
        }
        found.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(found)
    }
    #[cfg(not(feature = "embedded"))]
    Err(Error::InvalidUrl {
        reason: format!("{url}: file:// URLs need the crate's `embedded` feature"),
    })
}

#[cfg(feature = "redis")]
impl Inner {
    /// Writes this queue's partition count to the registry, once per
    /// handle; a failure is only traced (the next schedule tries again).
    pub(crate) async fn register(&self) {
        if self
            .redis()
            .registered
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            return;
        }
        let partitions = self.redis().partitions.len();
        // HSETNX: a count recorded by the queue's first connect stays.
        let cmd = redis::cmd("HSETNX")
            .arg(QUEUES)
            .arg(self.name())
            .arg(partitions)
            .to_owned();
        match self.query::<()>(&cmd).await {
            Ok(()) => self
                .redis()
                .registered
                .store(true, std::sync::atomic::Ordering::Relaxed),
            Err(error) => {
                tracing::debug!(queue = %self.name(), %error, "could not register the queue in ttr:queues")
            }
        }
    }
}

#[cfg(all(test, feature = "redis"))]
mod tests {
    use super::*;

    #[test]
    fn tags_are_read_from_keys() {
        assert_eq!(tag_of("ttr:{orders}:due"), Some(("orders", None)));
        assert_eq!(tag_of("ttr:{mail#3}:dead"), Some(("mail", Some(3))));
        assert_eq!(tag_of("ttr:{mail#x}:dead"), None);
        assert_eq!(tag_of("ttr:{mail#5000}:dead"), None);
        assert_eq!(tag_of("ttr:queues"), None);
        assert_eq!(tag_of("ttr:{}:due"), None);
        assert_eq!(tag_of("ttr:{a b}:due"), None);
        assert_eq!(tag_of("other:{orders}:due"), None);
    }
}
