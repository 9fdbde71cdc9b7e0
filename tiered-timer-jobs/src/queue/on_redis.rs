//! The Redis side of [`Queue`] and its shared state: the calls that are
//! one script or one read on Redis, and the helpers every Redis call uses.
//! The embedded store's counterparts are in `src/embedded/queue.rs`.

use super::*;
use crate::data::limits::{CHUNK_JOBS, MAX_PARTITIONS};
use crate::redis::replication::Durability;

impl Queue {
    /// One queue handle's, one partition's acks on Redis: the ids refused.
    #[cfg(feature = "redis")]
    pub(super) async fn ack_many_redis(
        inner: &Inner,
        partition: u32,
        list: &[(JobId, String)],
    ) -> Result<Vec<JobId>, Error> {
        let mut lost = Vec::new();
        let keys = &inner.redis().partitions[partition as usize];
        for chunk in list.chunks(CHUNK_JOBS) {
            let mut args = Vec::with_capacity(2 * chunk.len());
            for (id, token) in chunk {
                args.push(arg(id.as_str()));
                args.push(arg(token));
            }
            let refused: Vec<String> = inner.eval(&scripts::ACK_MANY_SCRIPT, keys, args).await?;
            for (id, _) in chunk {
                if !refused.iter().any(|r| r == id.as_str()) {
                    tracing::debug!(queue = %inner.name, job = %id, "job acked");
                }
            }
            lost.extend(refused.into_iter().map(JobId::from));
        }
        Ok(lost)
    }

    #[cfg(feature = "redis")]
    pub(super) async fn cancel_redis(&self, id: &JobId) -> Result<bool, Error> {
        let keys = self.inner.keys_of(id);
        let removed: i64 = self
            .inner
            .eval(&scripts::CANCEL_SCRIPT, keys, vec![arg(id.as_str())])
            .await?;
        Ok(removed == 1)
    }

    #[cfg(feature = "redis")]
    pub(super) async fn pending_redis(&self) -> Result<u64, Error> {
        self.count_timeline("-inf", format!("({LEASED}")).await
    }

    #[cfg(feature = "redis")]
    pub(super) async fn leased_redis(&self) -> Result<u64, Error> {
        self.count_timeline(LEASED.to_string(), "+inf").await
    }

    /// The jobs scored from `min` to `max` in every partition's timeline
    /// (`ZCOUNT` syntax): waiting jobs below `LEASED`, leased ones above.
    #[cfg(feature = "redis")]
    async fn count_timeline(
        &self,
        min: impl AsRef<str>,
        max: impl AsRef<str>,
    ) -> Result<u64, Error> {
        let mut total = 0;
        for keys in &self.inner.redis().partitions {
            let n: u64 = self
                .inner
                .query(
                    redis::cmd("ZCOUNT")
                        .arg(keys.timeline())
                        .arg(min.as_ref())
                        .arg(max.as_ref()),
                )
                .await?;
            total += n;
        }
        Ok(total)
    }
}

impl Inner {
    #[cfg(feature = "redis")]
    pub(super) async fn retry_redis(
        &self,
        partition: u32,
        id: &JobId,
        token: &str,
        delay: u64,
    ) -> Result<i64, Error> {
        let keys = &self.redis().partitions[partition as usize];
        let done: i64 = self
            .eval(
                &scripts::RETRY_SCRIPT,
                keys,
                vec![
                    arg(id.as_str()),
                    arg(token),
                    arg(&delay.to_string()),
                    arg(&self.max_attempts.to_string()),
                ],
            )
            .await?;
        Ok(done)
    }

    /// Runs a script on a partition's keys, within the command timeout;
    /// a write is followed by `WAIT` if the queue asks for replicas, as
    /// the script's [durability](scripts::durability) says.
    #[cfg(feature = "redis")]
    pub(crate) async fn eval<T: FromRedisValue>(
        &self,
        script: &Script,
        keys: &Keys,
        args: Vec<Vec<u8>>,
    ) -> Result<T, Error> {
        self.redis()
            .conn
            .eval(script, &keys.ordered, args, scripts::durability(script))
            .await
    }

    /// Runs one plain command within the command timeout.
    #[cfg(feature = "redis")]
    pub(crate) async fn query<T: FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T, Error> {
        self.redis().conn.query(cmd).await
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
#[cfg(feature = "redis")]
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
#[cfg(feature = "redis")]
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

#[cfg(feature = "redis")]
pub(crate) fn parse<T: FromRedisValue>(value: Option<Value>) -> Result<T, Error> {
    let value = value.unwrap_or(Value::Nil);
    redis::from_redis_value(value).map_err(|e| Error::Redis(e.into()))
}

#[cfg(feature = "redis")]
pub(crate) fn arg(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}
