//! Connections to Redis: the command connection every call of a queue
//! shares, and the dedicated connections the waker (`src/redis/wake/`) blocks
//! on.
//!
//! Ground rules:
//!
//! * Every call is bounded by the command timeout, measured by
//!   `tiered-timer` around the whole call (connecting included). redis-rs'
//!   own response timeout is off on single-node connections: its 500 ms
//!   default would cut off slow calls and every blocking one.
//! * A single-node connection that times out or fails with an I/O error is
//!   dropped, and the next call opens a new one, once: there is no retry
//!   loop inside a call, so a refused connection is reported at once with
//!   its cause, and a silent one after the command timeout. (A cluster
//!   connection reconnects by itself, node by node; one that answers
//!   nothing at all for a whole command timeout is replaced, see
//!   [`Cluster::call`].)
//! * Every TCP connection has `TCP_NODELAY`, keepalive probes after
//!   `health_check` of silence and a `TCP_USER_TIMEOUT` of `health_check`:
//!   a second line behind the waker's own checks, for peers that vanish
//!   (a dead host answers no probe; a frozen proxy does, which is why the
//!   first line is a reply deadline on every blocking call).
//! * A connection that has received nothing for longer than
//!   `health_check` is pinged (with a reply deadline of at most
//!   `health_check`) before the next call uses it: a call sent into a link
//!   that silently died could be run by Redis much later, when no one
//!   listens for its reply.
//! * On a cluster, a redirect (`MOVED`, `ASK`) is the crate's to follow,
//!   never the caller's error: redis-rs follows them, and when its retries
//!   run out while a failover or a resharding moves the slot (bouncing
//!   between a replica that redirects and a master that is gone), the call
//!   is sent again after a short pause, until the command timeout. A
//!   redirected command did not run, so this is safe for every script.
//! * With [`replicas(n)`](crate::Builder::replicas), writes are followed by
//!   `WAIT n timeout` on connections of their own, one call at a time each
//!   (see [`crate::redis::replication`]): a `WAIT` blocks its connection in Redis,
//!   and nothing else waits behind it.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use redis::aio::MultiplexedConnection;
use redis::{Cmd, FromRedisValue, Script};

use super::cluster::{cluster_client, Cluster};
use super::node::{
    async_config, connection_info, node_client, redis_error, run_script, with_timeout, Clock,
    Limits, Single,
};
use super::replication::{Durability, Replication};
use crate::data::error::Error;

/// The command connection: one node, or a cluster, and the writes that
/// wait for replicas.
#[derive(Clone)]
pub(crate) struct Conn {
    link: Link,
    /// Writes that wait for replicas (`None` without
    /// [`replicas`](crate::Builder::replicas)).
    replication: Option<Arc<Replication>>,
}

/// Where the command connection goes.
#[derive(Clone)]
enum Link {
    Single(Arc<Single>),
    Cluster(Arc<Cluster>),
}

impl Conn {
    /// Connects to the Redis (or the cluster seed) at `url`: once, within
    /// the command timeout, reporting a refusal at once.
    pub(crate) async fn open(url: &str, cluster: bool, limits: Limits) -> Result<Conn, Error> {
        let info = connection_info(url, &limits)?;
        if cluster {
            let client =
                cluster_client(vec![info.clone()], &limits).map_err(|e| Error::InvalidUrl {
                    reason: e.to_string(),
                })?;
            let conn = with_timeout(limits.command_timeout, client.get_async_connection()).await?;
            let replication =
                (limits.replicas > 0).then(|| Arc::new(Replication::cluster(limits, info.clone())));
            let cluster = Arc::new(Cluster {
                conn: Arc::new(Mutex::new(conn)),
                seed: info,
                limits,
                last_reply: Clock::new(),
                known: Arc::new(Mutex::new(Vec::new())),
                replacing: Arc::new(AtomicBool::new(false)),
            });
            // The masters, for a replacement connection should the seed
            // be gone by then.
            cluster.slot_ranges().await?;
            Ok(Conn {
                link: Link::Cluster(cluster),
                replication,
            })
        } else {
            let client = redis::Client::open(info).map_err(|e| Error::InvalidUrl {
                reason: e.to_string(),
            })?;
            let replication = (limits.replicas > 0)
                .then(|| Arc::new(Replication::single(limits, client.clone())));
            let single = Arc::new(Single::new(client, limits));
            single.call(|_conn| async { Ok(()) }).await?;
            Ok(Conn {
                link: Link::Single(single),
                replication,
            })
        }
    }

    pub(crate) fn limits(&self) -> Limits {
        match &self.link {
            Link::Single(single) => single.limits,
            Link::Cluster(cluster) => cluster.limits,
        }
    }

    /// Whether every partition shares one Redis (and so one clock).
    pub(crate) fn is_single(&self) -> bool {
        matches!(self.link, Link::Single(_))
    }

    /// Runs a script on `keys` (the first decides the cluster slot),
    /// followed by `WAIT` as its `durability` and the queue's
    /// [`replicas`](crate::Builder::replicas) ask (see
    /// [`crate::redis::replication`]).
    ///
    /// # Errors
    ///
    /// As any call; [`Error::NotReplicated`] if a
    /// [`Durability::Required`] write reached fewer replicas than asked
    /// (the script ran on the master: see there).
    pub(crate) async fn eval<T: FromRedisValue>(
        &self,
        script: &Script,
        keys: &[String],
        args: Vec<Vec<u8>>,
        durability: Durability,
    ) -> Result<T, Error> {
        let (value, replicated) = self.eval_replicated(script, keys, args, durability).await?;
        replicated?;
        Ok(value)
    }

    /// As [`eval`](Conn::eval), but a write that reached too few replicas
    /// still returns the script's reply, with the verdict beside it: an
    /// ack made with a claim must hand back what it claimed. The verdict
    /// is an error only for a [`Durability::Required`] write.
    pub(crate) async fn eval_replicated<T: FromRedisValue>(
        &self,
        script: &Script,
        keys: &[String],
        args: Vec<Vec<u8>>,
        durability: Durability,
    ) -> Result<(T, Result<(), Error>), Error> {
        match self.replication() {
            Some(replication) if durability != Durability::Read => {
                replication
                    .write(self.cluster(), script, keys, args, durability)
                    .await
            }
            _ => Ok((self.eval_plain(script, keys, &args).await?, Ok(()))),
        }
    }

    /// Runs a script on the command connection, without `WAIT`.
    async fn eval_plain<T: FromRedisValue>(
        &self,
        script: &Script,
        keys: &[String],
        args: &[Vec<u8>],
    ) -> Result<T, Error> {
        let mut evalsha = redis::cmd("EVALSHA");
        evalsha.arg(script.get_hash()).arg(keys.len()).arg(keys);
        for a in args {
            evalsha.arg(a.as_slice());
        }
        match &self.link {
            Link::Single(single) => {
                single
                    .call(|mut conn| async move { run_script(&mut conn, script, &evalsha).await })
                    .await
            }
            Link::Cluster(cluster) => {
                cluster
                    .call(|mut conn| {
                        let evalsha = &evalsha;
                        async move { run_script(&mut conn, script, evalsha).await }
                    })
                    .await
            }
        }
    }

    /// The writes that wait for replicas, if the queue asks for any.
    fn replication(&self) -> Option<&Arc<Replication>> {
        self.replication.as_ref()
    }

    /// The cluster, if this is one (for the slot map).
    fn cluster(&self) -> Option<&Cluster> {
        match &self.link {
            Link::Single(_) => None,
            Link::Cluster(cluster) => Some(cluster),
        }
    }

    /// Runs one plain command within the command timeout.
    pub(crate) async fn query<T: FromRedisValue>(&self, cmd: &Cmd) -> Result<T, Error> {
        match &self.link {
            Link::Single(single) => {
                single
                    .call(|mut conn| async move { cmd.query_async(&mut conn).await })
                    .await
            }
            Link::Cluster(cluster) => {
                cluster
                    .call(|mut conn| async move { cmd.query_async(&mut conn).await })
                    .await
            }
        }
    }
}

impl Conn {
    /// Drops the single-node command connection, so that the next call
    /// opens a new one: for when the path to Redis is in doubt (a blocking
    /// connection to the same Redis stopped answering). A cluster
    /// connection manages its node connections itself.
    pub(crate) fn reset(&self) {
        if let Link::Single(single) = &self.link {
            let generation = single
                .current
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                .map(|(g, _)| *g);
            if let Some(generation) = generation {
                single.drop_connection(generation);
            }
        }
    }

    /// Opens a connection of its own for blocking calls on `key`: to the
    /// single Redis, or to the cluster master that holds `key`'s slot.
    /// redis-rs' response timeout is off on it: the caller bounds every
    /// call with a reply deadline of its own.
    pub(crate) async fn blocking_connection(
        &self,
        key: &str,
    ) -> Result<MultiplexedConnection, Error> {
        let limits = self.limits();
        let open = async {
            let client = match &self.link {
                Link::Single(single) => single.client.clone(),
                Link::Cluster(cluster) => {
                    let (host, port) = cluster.master_of(crate::redis::keys::slot_of(key)).await?;
                    node_client(&cluster.seed, host, port)
                        .map_err(|e| redis_error(e, limits.command_timeout))?
                }
            };
            client
                .get_multiplexed_async_connection_with_config(&async_config(&limits))
                .await
                .map_err(|e| redis_error(e, limits.command_timeout))
        };
        match tiered_timer::timeout(limits.command_timeout, open).await {
            Ok(result) => result,
            Err(_) => Err(Error::Timeout {
                after: limits.command_timeout,
            }),
        }
    }
}
