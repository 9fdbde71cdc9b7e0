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

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::io::tcp::{socket2::TcpKeepalive, TcpSettings};
use redis::{
    AsyncConnectionConfig, Cmd, ConnectionAddr, ConnectionInfo, ErrorKind, FromRedisValue,
    IntoConnectionInfo, Script, ServerErrorKind, Value,
};
use tokio::time::Instant;

use crate::data::error::Error;
use crate::redis::replication::{Durability, Replication};

/// The timing and durability settings every connection of a queue obeys.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// The most any call may take, connecting included.
    pub(crate) command_timeout: Duration,
    /// How long a connection may stay silent before it is checked.
    pub(crate) health_check: Duration,
    /// `WAIT` for this many replicas after each write (0: no `WAIT`).
    pub(crate) replicas: u32,
    /// The `WAIT` timeout.
    pub(crate) replica_timeout: Duration,
}

/// The command connection: one node, or a cluster.
#[derive(Clone)]
pub(crate) enum Conn {
    Single(Arc<Single>),
    Cluster(Arc<Cluster>),
}

/// A single Redis, through one multiplexed connection that is replaced
/// when it fails (see the ground rules).
pub(crate) struct Single {
    client: redis::Client,
    config: AsyncConnectionConfig,
    limits: Limits,
    /// The connection in use and its generation (so that a call that saw
    /// an old connection fail does not drop a newer one).
    current: Mutex<Option<(u64, MultiplexedConnection)>>,
    generation: AtomicU64,
    /// Held while a new connection is opened, so that concurrent calls
    /// open one, not one each.
    connecting: tokio::sync::Mutex<()>,
    /// When a reply last arrived (see [`Clock`]).
    last_reply: Clock,
    /// Writes that wait for replicas (`None` without
    /// [`replicas`](crate::Builder::replicas), and on the connections of
    /// [`Replication`] itself).
    replication: Option<Arc<Replication>>,
}

/// A Redis Cluster, through redis-rs' cluster connection, and what is
/// needed to open connections to one node (for the waker).
pub(crate) struct Cluster {
    /// redis-rs' cluster connection, replaced when it stops answering
    /// altogether (see [`Cluster::call`]).
    conn: Arc<Mutex<ClusterConnection>>,
    /// The seed's connection settings, with its address replaced by a
    /// node's for the waker's connections.
    seed: ConnectionInfo,
    limits: Limits,
    /// Writes that wait for replicas (`None` without
    /// [`replicas`](crate::Builder::replicas)).
    replication: Option<Arc<Replication>>,
    /// When the cluster connection last answered anything (a reply or an
    /// error reply).
    last_reply: Clock,
    /// The masters `CLUSTER SLOTS` last named: with the seed, where a
    /// replacement connection starts (the seed may be the node that died).
    known: Arc<Mutex<Vec<(String, u16)>>>,
    /// Set while a replacement connection is being opened.
    replacing: Arc<AtomicBool>,
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

/// The first pause before a call that met a redirect (or a master that
/// refused it) is sent again; it doubles up to [`MAX_BACKOFF`].
pub(crate) const FIRST_BACKOFF: Duration = Duration::from_millis(20);
/// The longest pause between two tries of one call.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_millis(500);

/// An instant kept in an atomic, for "when did this connection last
/// hear from Redis".
pub(crate) struct Clock {
    base: Instant,
    micros: AtomicU64,
}

impl Clock {
    pub(crate) fn new() -> Clock {
        Clock {
            base: Instant::now(),
            micros: AtomicU64::new(0),
        }
    }

    pub(crate) fn touch(&self) {
        let micros = self.base.elapsed().as_micros() as u64;
        self.micros.fetch_max(micros, Ordering::Relaxed);
    }

    pub(crate) fn since(&self) -> Duration {
        let last = Duration::from_micros(self.micros.load(Ordering::Relaxed));
        self.base.elapsed().saturating_sub(last)
    }
}

/// TCP settings for every connection: no Nagle delay, keepalive probes
/// after `health_check` of silence (three, a third of it apart), and
/// unacknowledged data given up on after `health_check`.
fn tcp_settings(health_check: Duration) -> TcpSettings {
    let interval = (health_check / 3).max(Duration::from_secs(1));
    let keepalive = TcpKeepalive::new()
        .with_time(health_check.max(Duration::from_secs(1)))
        .with_interval(interval);
    #[cfg(any(target_os = "linux", target_os = "android", target_os = "fuchsia"))]
    let keepalive = keepalive.with_retries(3);
    let settings = TcpSettings::default()
        .set_nodelay(true)
        .set_keepalive(keepalive);
    #[cfg(any(target_os = "linux", target_os = "android", target_os = "fuchsia"))]
    let settings = settings.set_user_timeout(health_check.max(Duration::from_secs(1)));
    settings
}

/// The URL's connection settings with our TCP settings.
fn connection_info(url: &str, limits: &Limits) -> Result<ConnectionInfo, Error> {
    let info = url.into_connection_info().map_err(|e| Error::InvalidUrl {
        reason: e.to_string(),
    })?;
    if let ConnectionAddr::TcpTls { .. } = info.addr() {
        // Let redis-rs reject TLS itself if its TLS features are off.
        if !info.addr().is_supported() {
            return Err(Error::InvalidUrl {
                reason: "TLS (rediss://) needs a TLS feature of the redis crate".to_owned(),
            });
        }
    }
    Ok(info.set_tcp_settings(tcp_settings(limits.health_check)))
}

/// Settings for a connection of ours: connect within the command timeout;
/// no response timeout of redis-rs' own (we time every call ourselves).
fn async_config(limits: &Limits) -> AsyncConnectionConfig {
    AsyncConnectionConfig::new()
        .set_connection_timeout(Some(limits.command_timeout))
        .set_response_timeout(None)
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
                replication,
                last_reply: Clock::new(),
                known: Arc::new(Mutex::new(Vec::new())),
                replacing: Arc::new(AtomicBool::new(false)),
            });
            // The masters, for a replacement connection should the seed
            // be gone by then.
            cluster.slot_ranges().await?;
            Ok(Conn::Cluster(cluster))
        } else {
            let client = redis::Client::open(info).map_err(|e| Error::InvalidUrl {
                reason: e.to_string(),
            })?;
            let replication = (limits.replicas > 0)
                .then(|| Arc::new(Replication::single(limits, client.clone())));
            let single = Arc::new(Single::new(client, limits, replication));
            single.call(|_conn| async { Ok(()) }).await?;
            Ok(Conn::Single(single))
        }
    }

    pub(crate) fn limits(&self) -> Limits {
        match self {
            Conn::Single(single) => single.limits,
            Conn::Cluster(cluster) => cluster.limits,
        }
    }

    /// Whether every partition shares one Redis (and so one clock).
    pub(crate) fn is_single(&self) -> bool {
        matches!(self, Conn::Single(_))
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
                    .write(self, script, keys, args, durability)
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
        match self {
            Conn::Single(single) => {
                single
                    .call(|mut conn| async move { run_script(&mut conn, script, &evalsha).await })
                    .await
            }
            Conn::Cluster(cluster) => {
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
        match self {
            Conn::Single(single) => single.replication.as_ref(),
            Conn::Cluster(cluster) => cluster.replication.as_ref(),
        }
    }

    /// Which master serves each slot, by `CLUSTER SLOTS` (`None` on a
    /// single Redis).
    pub(crate) async fn slot_ranges(&self) -> Option<Result<Vec<SlotRange>, Error>> {
        match self {
            Conn::Single(_) => None,
            Conn::Cluster(cluster) => Some(cluster.slot_ranges().await),
        }
    }

    /// Remembers the masters of a slot map read elsewhere (see
    /// [`Cluster::known`]).
    pub(crate) fn learn_masters(&self, slots: &[SlotRange]) {
        if let Conn::Cluster(cluster) = self {
            cluster.learn_masters(slots);
        }
    }

    /// Runs one plain command within the command timeout.
    pub(crate) async fn query<T: FromRedisValue>(&self, cmd: &Cmd) -> Result<T, Error> {
        match self {
            Conn::Single(single) => {
                single
                    .call(|mut conn| async move { cmd.query_async(&mut conn).await })
                    .await
            }
            Conn::Cluster(cluster) => {
                cluster
                    .call(|mut conn| async move { cmd.query_async(&mut conn).await })
                    .await
            }
        }
    }
}

impl Single {
    /// A single Redis reached through `client`, not connected yet: the
    /// first call connects.
    pub(crate) fn new(
        client: redis::Client,
        limits: Limits,
        replication: Option<Arc<Replication>>,
    ) -> Single {
        Single {
            client,
            config: async_config(&limits),
            limits,
            current: Mutex::new(None),
            generation: AtomicU64::new(0),
            connecting: tokio::sync::Mutex::new(()),
            last_reply: Clock::new(),
            replication,
        }
    }

    /// Runs `call` on the current connection (opening one if there is
    /// none), within the command timeout; drops the connection if the
    /// call timed out or failed for lack of it.
    pub(crate) async fn call<T, F, Fut>(&self, call: F) -> Result<T, Error>
    where
        F: FnOnce(MultiplexedConnection) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        let timeout = self.limits.command_timeout;
        let mut used = None;
        let attempt = async {
            let (generation, conn) = self.connection().await?;
            used = Some(generation);
            match call(conn).await {
                Ok(value) => {
                    self.last_reply.touch();
                    Ok(value)
                }
                Err(error) => {
                    if lost_connection(&error) {
                        self.drop_connection(generation);
                    } else {
                        self.last_reply.touch(); // an error reply is a reply
                    }
                    Err(redis_error(error, timeout))
                }
            }
        };
        match tiered_timer::timeout(timeout, attempt).await {
            Ok(result) => result,
            Err(_) => {
                if let Some(generation) = used {
                    self.drop_connection(generation);
                }
                Err(Error::Timeout { after: timeout })
            }
        }
    }

    /// The connection to use: the current one, checked with a PING first
    /// if it has been silent for longer than `health_check`; or a new one.
    async fn connection(&self) -> Result<(u64, MultiplexedConnection), Error> {
        let current = self
            .current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some((generation, mut conn)) = current {
            if self.last_reply.since() <= self.limits.health_check {
                return Ok((generation, conn));
            }
            let deadline = self.limits.health_check.min(self.limits.command_timeout);
            let ping = redis::cmd("PING");
            if let Ok(Ok(())) =
                tiered_timer::timeout(deadline, ping.query_async::<()>(&mut conn)).await
            {
                self.last_reply.touch();
                return Ok((generation, conn));
            }
            tracing::info!(
                silent = ?self.last_reply.since(),
                "the command connection did not answer a health check; reconnecting"
            );
            self.drop_connection(generation);
        }
        let _one_at_a_time = self.connecting.lock().await;
        if let Some(current) = self
            .current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
        {
            return Ok(current);
        }
        let conn = self
            .client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await
            .map_err(|e| redis_error(e, self.limits.command_timeout))?;
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = Some((generation, conn.clone()));
        self.last_reply.touch();
        Ok((generation, conn))
    }

    /// Forgets connection `generation` (if it is still the current one):
    /// the next call opens a new one.
    fn drop_connection(&self, generation: u64) {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if matches!(&*current, Some((g, _)) if *g == generation) {
            *current = None;
        }
    }
}

impl Conn {
    /// Drops the single-node command connection, so that the next call
    /// opens a new one: for when the path to Redis is in doubt (a blocking
    /// connection to the same Redis stopped answering). A cluster
    /// connection manages its node connections itself.
    pub(crate) fn reset(&self) {
        if let Conn::Single(single) = self {
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
            let client = match self {
                Conn::Single(single) => single.client.clone(),
                Conn::Cluster(cluster) => {
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
    async fn call<T, F, Fut>(&self, mut call: F) -> Result<T, Error>
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
            tracing::debug!(%error, retry_in = ?backoff, "a cluster redirect outlasted redis-rs' retries; sending the call again");
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
        tracing::warn!(silent = ?self.last_reply.since(), "the cluster connection answered nothing for a whole command timeout; opening a new one");
        runtime.spawn(async move {
            let opened = match cluster_client(nodes, &limits) {
                Ok(client) => with_timeout(limits.command_timeout, client.get_async_connection()).await,
                Err(error) => Err(Error::Redis(error)),
            };
            match opened {
                Ok(conn) => {
                    *slot.lock().unwrap_or_else(|e| e.into_inner()) = conn;
                    tracing::info!("the cluster connection was replaced");
                }
                Err(error) => {
                    tracing::warn!(%error, "could not open a new cluster connection; trying again after the next timeout")
                }
            }
            replacing.store(false, Ordering::Release);
        });
    }

    /// The address of the master that serves `slot`.
    async fn master_of(&self, slot: u16) -> Result<(String, u16), Error> {
        self.slot_ranges()
            .await?
            .into_iter()
            .find(|range| (range.start..=range.end).contains(&slot))
            .map(|range| (range.host, range.port))
            .ok_or_else(|| no_master(slot))
    }

    /// Which master serves which slots, by `CLUSTER SLOTS` asked of any
    /// master.
    async fn slot_ranges(&self) -> Result<Vec<SlotRange>, Error> {
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

/// A client for the cluster node at `host:port`, with the seed's settings
/// (credentials, TLS, TCP settings).
pub(crate) fn node_client(
    seed: &ConnectionInfo,
    host: String,
    port: u16,
) -> redis::RedisResult<redis::Client> {
    redis::Client::open(node_info(seed, host, port))
}

/// The seed's connection settings with the address `host:port`.
fn node_info(seed: &ConnectionInfo, host: String, port: u16) -> ConnectionInfo {
    let mut addr = seed.addr().clone();
    match &mut addr {
        ConnectionAddr::Tcp(h, p) => {
            *h = host;
            *p = port;
        }
        ConnectionAddr::TcpTls {
            host: h, port: p, ..
        } => {
            *h = host;
            *p = port;
        }
        _ => {}
    }
    seed.clone().set_addr(addr)
}

/// A redis-rs cluster client that starts from `nodes`, with our timeouts.
fn cluster_client(
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

/// Runs a prepared `EVALSHA` of `script`, loading the script and trying
/// once more if Redis does not know it (`NOSCRIPT`: a restart, a flush,
/// a new node).
pub(crate) async fn run_script<T: FromRedisValue, C: redis::aio::ConnectionLike + Send>(
    conn: &mut C,
    script: &Script,
    evalsha: &Cmd,
) -> redis::RedisResult<T> {
    match evalsha.query_async(conn).await {
        Err(error) if error.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
            script.prepare_invoke().load_async(conn).await?;
            evalsha.query_async(conn).await
        }
        result => result,
    }
}

/// One reply of a pipeline as `T` (an error reply is an error).
pub(crate) fn from_value<T: FromRedisValue>(value: Option<Value>) -> Result<T, Error> {
    let value = match value.unwrap_or(Value::Nil) {
        Value::ServerError(error) => return Err(Error::Redis(error.into())),
        value => value,
    };
    redis::from_redis_value(value).map_err(|e| Error::Redis(e.into()))
}

/// Whether a pipeline's first reply is a `NOSCRIPT` error.
pub(crate) fn is_noscript(values: &[Value]) -> bool {
    matches!(values.first(), Some(Value::ServerError(error))
        if redis::RedisError::from(error.clone()).kind() == ErrorKind::Server(ServerErrorKind::NoScript))
}

/// Whether an error means the connection is gone or in doubt (so the
/// next call should open a new one), as opposed to an error reply.
fn lost_connection(error: &redis::RedisError) -> bool {
    error.is_io_error()
        || error.is_connection_dropped()
        || error.is_timeout()
        || error.is_unrecoverable_error()
}

/// Our error for a redis-rs error: its own timeouts are ours.
pub(crate) fn redis_error(error: redis::RedisError, timeout: Duration) -> Error {
    if error.is_timeout() {
        Error::Timeout { after: timeout }
    } else {
        Error::Redis(error)
    }
}

fn unexpected(what: &str) -> Error {
    Error::Redis(redis::RedisError::from((
        ErrorKind::UnexpectedReturnType,
        "unexpected reply",
        what.to_owned(),
    )))
}

/// Runs a Redis call within `timeout`. A timeout is [`Error::Timeout`]
/// whether our timer or the `redis` crate's response timeout noticed it
/// first.
pub(crate) async fn with_timeout<T>(
    timeout: Duration,
    future: impl std::future::Future<Output = redis::RedisResult<T>>,
) -> Result<T, Error> {
    match tiered_timer::timeout(timeout, future).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(redis_error(error, timeout)),
        Err(_) => Err(Error::Timeout { after: timeout }),
    }
}
