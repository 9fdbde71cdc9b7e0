//! The registry of queues, and finding every queue on a Redis.
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

use std::collections::BTreeMap;
use std::time::Duration;

use super::conn::Conn;
use super::keys::{Keys, QUEUES};
use super::replication::Durability;
use super::reply::arg;
use super::scripts;
use crate::data::checks::check_queue_name;
use crate::data::error::Error;
use crate::data::limits::MAX_PARTITIONS;
use crate::data::listing::QueueInfo;

/// [`find_queues`](crate::find_queues) on a Redis.
pub(super) async fn find_queues(
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

/// The queue's partition count: recorded in the registry ([`QUEUES`]) by
/// its first connect (if `register`), adopted by a handle that `asked`
/// none, checked against one that asked for a count.
///
/// With `register`, the registry is read and written by one script, so
/// of two first connects one records its count and the other sees it.
/// Without, nothing is written, and a queue that is neither registered
/// nor has keys of its own is [`Error::NoSuchQueue`].
pub(super) async fn resolve_partitions(
    conn: &Conn,
    name: &str,
    asked: Option<u32>,
    register: bool,
) -> Result<u32, Error> {
    let recorded: Option<u32> = if register {
        let count = asked.unwrap_or(1);
        let recorded: u32 = conn
            .eval(
                &scripts::RECORD_PARTITIONS_SCRIPT,
                &[QUEUES.to_owned()],
                vec![arg(name), arg(&count.to_string())],
                Durability::Read,
            )
            .await?;
        Some(recorded)
    } else {
        conn.query(redis::cmd("HGET").arg(QUEUES).arg(name)).await?
    };
    match (recorded, asked) {
        (Some(recorded), _) if !(1..=MAX_PARTITIONS).contains(&recorded) => {
            Err(Error::Redis(redis::RedisError::from((
                redis::ErrorKind::UnexpectedReturnType,
                "the registry ttr:queues records an impossible partition count",
                format!("{name}: {recorded}"),
            ))))
        }
        (Some(recorded), Some(asked)) if recorded != asked => Err(Error::PartitionMismatch {
            queue: name.to_owned(),
            recorded,
            configured: asked,
        }),
        (Some(recorded), _) => Ok(recorded),
        (None, asked) => {
            let count = asked.unwrap_or(1);
            if has_keys(conn, name, count).await? {
                Ok(count)
            } else {
                Err(Error::NoSuchQueue {
                    queue: name.to_owned(),
                })
            }
        }
    }
}

/// Whether any key of the queue's `count` partitions exists (one `EXISTS`
/// per partition: a partition's keys share a slot).
async fn has_keys(conn: &Conn, name: &str, count: u32) -> Result<bool, Error> {
    for partition in 0..count {
        let keys = Keys::new(name, partition, count);
        let found: u64 = conn
            .query(redis::cmd("EXISTS").arg(&keys.ordered[..]))
            .await?;
        if found > 0 {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Records queue `name`'s partition count in the registry unless one is
/// recorded (`HSETNX`: a count recorded by the queue's first connect
/// stays).
pub(super) async fn register(conn: &Conn, name: &str, partitions: u32) -> Result<(), Error> {
    let cmd = redis::cmd("HSETNX")
        .arg(QUEUES)
        .arg(name)
        .arg(partitions)
        .to_owned();
    conn.query::<()>(&cmd).await
}

#[cfg(test)]
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
