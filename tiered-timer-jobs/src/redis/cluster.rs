//! A Redis Cluster: [`Cluster`], redis-rs' cluster connection replaced
//! when it answers nothing, redirects followed inside the crate, and the
//! slot map (`CLUSTER SLOTS`) that says which master holds a partition.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{ConnectionAddr, ConnectionInfo, ErrorKind, ServerErrorKind, Value};
use tokio::time::Instant;

use super::node::{
    node_info, redis_error, tcp_settings, unexpected, with_timeout, Clock, Limits, FIRST_BACKOFF,
    MAX_BACKOFF,
};
use crate::data::error::Error;
use crate::targets;

/// A Redis Cluster, through redis-rs' cluster connection, and what is
/// needed to open connections to one node (for the waker).
pub(crate) struct Cluster {
    /// redis-rs' cluster connection, replaced when it stops answering
    /// altogether (see [`Cluster::call`]).
    pub(super) conn: Arc<Mutex<ClusterConnection>>,
    /// The seed's connection settings, with its address replaced by a
    /// node's for the waker's connections.
    pub(super) seed: ConnectionInfo,
    pub(super) limits: Limits,
    /// When the cluster connection last answered anything (a reply or an
    /// error reply).
    pub(super) last_reply: Clock,
    /// The masters `CLUSTER SLOTS` last named: with the seed, where a
    /// replacement connection starts (the seed may be the node that died).
    pub(super) known: Arc<Mutex<Vec<(String, u16)>>>,
    /// Set while a replacement connection is being opened.
    pub(super) replacing: Arc<AtomicBool>,
}

/// A range of cluster slots and the address of the master that serves
/// it, as `CLUSTER SLOTS` says.
#[derive(Debug, Clone)]
pub(crate) struct SlotRange {
    pub(crate) start: u16,
    pub(crate) end: u16,
    pub(crate) host: String,
    pub(crate) port: u16,
}

impl Cluster {
    /// Runs `call` on the cluster connection within the command timeout.
    ///
    /// redis-rs follows redirects itself, but gives up after its retries,
    /// which a failover spends in milliseconds: while the map is stale it
    /// sends a dead master's slots to its replica, which redirects them to
    /// the dead master, which refuses the connection, and again. Such a
    /// redirect is no error of the caller's: the call did not run, and is
    /// sent again after a pause (doubling from [`FIRST_BACKOFF`] up to
    /// [`MAX_BACKOFF`]) until the command timeout, when it is
    /// [`Error::Timeout`].
    ///
    /// A connection that answers nothing at all for a whole command
    /// timeout is replaced (see [`Cluster::replace`]).
    pub(super) async fn call<T, F, Fut>(&self, mut call: F) -> Result<T, Error>
    where
        F: FnMut(ClusterConnection) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        let timeout = self.limits.command_timeout;
        let deadline = Instant::now() + timeout;
        let mut backoff = FIRST_BACKOFF;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let conn = self.conn.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let error = match tiered_timer::timeout(left, call(conn)).await {
                Ok(Ok(value)) => {
                    self.last_reply.touch();
                    return Ok(value);
                }
                Ok(Err(error)) => error,
                Err(_) => {
                    self.replace_if_silent();
                    return Err(Error::Timeout { after: timeout });
                }
            };
            if matches!(error.kind(), ErrorKind::Server(_)) {
                self.last_reply.touch(); // an error reply is a reply
            }
            if !is_redirect(&error) {
                if error.is_timeout() {
                    self.replace_if_silent();
                }
                return Err(redis_error(error, timeout));
            }
            if Instant::now() + backoff >= deadline {
                return Err(Error::Timeout { after: timeout });
            }
            tracing::debug!(target: targets::REDIS, %error, retry_in = ?backoff, "a cluster redirect outlasted redis-rs' retries; sending the call again");
            tiered_timer::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// Replaces the cluster connection if it has answered nothing for a
    /// whole command timeout, in a task of its own.
    ///
    /// redis-rs' cluster connection can stop answering for good: a slot
    /// map refresh (after a failover) that waits for the lock on its
    /// connections while a node's repair, which it does not poll meanwhile,
    /// holds a place in that lock's queue. Every call then times out, on
    /// every slot. (Seen in `tests/failover.rs`: one handle of five stayed
    /// so for minutes after a failover.) The new connection starts from the
    /// masters last seen and the seed, so a dead seed does not stop it.
    fn replace_if_silent(&self) {
        if self.last_reply.since() < self.limits.command_timeout
            || self.replacing.swap(true, Ordering::AcqRel)
        {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.replacing.store(false, Ordering::Release);
            return;
        };
        let mut nodes: Vec<ConnectionInfo> = self
            .known
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(host, port)| node_info(&self.seed, host.clone(), *port))
            .collect();
        nodes.push(self.seed.clone());
        let (slot, replacing, limits) = (
            Arc::clone(&self.conn),
            Arc::clone(&self.replacing),
            self.limits,
        );
        tracing::warn!(target: targets::REDIS, silent = ?self.last_reply.since(), "the cluster connection answered nothing for a whole command timeout; opening a new one");
        runtime.spawn(async move {
            let opened = match cluster_client(nodes, &limits) {
                Ok(client) => with_timeout(limits.command_timeout, client.get_async_connection()).await,
                Err(error) => Err(Error::Redis(error)),
            };
            match opened {
                Ok(conn) => {
                    *slot.lock().unwrap_or_else(|e| e.into_inner()) = conn;
                    tracing::info!(target: targets::REDIS, "the cluster connection was replaced");
                }
                Err(error) => {
                    tracing::warn!(target: targets::REDIS, %error, "could not open a new cluster connection; trying again after the next timeout")
                }
            }
            replacing.store(false, Ordering::Release);
        });
    }

    /// The address of the master that serves `slot`.
    pub(super) async fn master_of(&self, slot: u16) -> Result<(String, u16), Error> {
        self.slot_ranges()
            .await?
            .into_iter()
            .find(|range| (range.start..=range.end).contains(&slot))
            .map(|range| (range.host, range.port))
            .ok_or_else(|| no_master(slot))
    }

    /// Which master serves which slots, by `CLUSTER SLOTS` asked of any
    /// master.
    pub(crate) async fn slot_ranges(&self) -> Result<Vec<SlotRange>, Error> {
        let reply: Value = self
            .call(|mut conn| async move {
                let mut cmd = redis::cmd("CLUSTER");
                cmd.arg("SLOTS");
                conn.route_command(
                    cmd,
                    RoutingInfo::SingleNode(SingleNodeRoutingInfo::RandomPrimary),
                )
                .await
            })
            .await?;
        let seed_host = match self.seed.addr() {
            ConnectionAddr::Tcp(h, _) | ConnectionAddr::TcpTls { host: h, .. } => h.clone(),
            _ => String::new(),
        };
        let slots = parse_slots(reply, &seed_host)?;
        self.learn_masters(&slots);
        Ok(slots)
    }

    /// Remembers the masters of `slots` (see [`Cluster::known`]).
    pub(crate) fn learn_masters(&self, slots: &[SlotRange]) {
        let mut masters: Vec<(String, u16)> = slots
            .iter()
            .map(|range| (range.host.clone(), range.port))
            .collect();
        masters.sort();
        masters.dedup();
        if !masters.is_empty() {
            *self.known.lock().unwrap_or_else(|e| e.into_inner()) = masters;
        }
    }
}

/// `CLUSTER SLOTS`' reply as ranges and their masters; an empty host
/// (the node asked) is `asked`.
pub(crate) fn parse_slots(reply: Value, asked: &str) -> Result<Vec<SlotRange>, Error> {
    let Value::Array(ranges) = reply else {
        return Err(unexpected("CLUSTER SLOTS"));
    };
    let mut slots = Vec::with_capacity(ranges.len());
    for range in ranges {
        let Value::Array(fields) = range else {
            continue;
        };
        let (Some(Value::Int(start)), Some(Value::Int(end)), Some(Value::Array(master))) =
            (fields.first(), fields.get(1), fields.get(2))
        else {
            continue;
        };
        let host = match master.first() {
            Some(Value::BulkString(bytes)) => String::from_utf8_lossy(bytes).into_owned(),
            Some(Value::SimpleString(text)) => text.clone(),
            _ => String::new(),
        };
        let Some(Value::Int(port)) = master.get(1) else {
            return Err(unexpected("CLUSTER SLOTS"));
        };
        // An empty host means "the node you asked".
        let host = if host.is_empty() {
            asked.to_owned()
        } else {
            host
        };
        let unexpected_slots = || unexpected("CLUSTER SLOTS");
        slots.push(SlotRange {
            start: u16::try_from(*start).map_err(|_| unexpected_slots())?,
            end: u16::try_from(*end).map_err(|_| unexpected_slots())?,
            host,
            port: u16::try_from(*port).map_err(|_| unexpected_slots())?,
        });
    }
    Ok(slots)
}

/// The error for a slot no master serves (the cluster is down there).
pub(crate) fn no_master(slot: u16) -> Error {
    Error::Redis(redis::RedisError::from((
        ErrorKind::Server(ServerErrorKind::ClusterDown),
        "no master serves the slot",
        slot.to_string(),
    )))
}

/// A redis-rs cluster client that starts from `nodes`, with our timeouts.
pub(super) fn cluster_client(
    nodes: Vec<ConnectionInfo>,
    limits: &Limits,
) -> redis::RedisResult<redis::cluster::ClusterClient> {
    redis::cluster::ClusterClient::builder(nodes)
        .connection_timeout(limits.command_timeout)
        .response_timeout(limits.command_timeout)
        .overall_response_timeout(Some(limits.command_timeout))
        // redis-rs waits at least 1.28 s between retries by default;
        // a failover's MOVED or refused connection should cost less.
        .min_retry_wait(20)
        .max_retry_wait(500)
        .retries(8)
        .tcp_settings(tcp_settings(limits.health_check))
        .build()
}

/// Whether a cluster call failed only because its slot is elsewhere
/// (`MOVED`, `ASK`, or `READONLY` from a master demoted to a replica): it
/// did not run, and may be sent again.
pub(crate) fn is_redirect(error: &redis::RedisError) -> bool {
    matches!(
        error.kind(),
        ErrorKind::Server(
            ServerErrorKind::Moved | ServerErrorKind::Ask | ServerErrorKind::ReadOnly
        )
    )
}
