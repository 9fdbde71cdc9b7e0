//! One Redis node: [`Single`], a multiplexed command connection replaced
//! when it fails, the settings every connection of a queue obeys
//! ([`Limits`]), and the helpers every call uses (timeouts, scripts that
//! Redis forgot, error replies). The command connection of a queue is
//! `conn.rs`'s; a cluster's is `cluster.rs`'s; the connections of writes
//! that wait for replicas are `replication.rs`'s, all built on these.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::io::tcp::{socket2::TcpKeepalive, TcpSettings};
use redis::{
    AsyncConnectionConfig, Cmd, ConnectionAddr, ConnectionInfo, ErrorKind, FromRedisValue,
    IntoConnectionInfo, Script, ServerErrorKind, Value,
};
use tokio::time::Instant;

use crate::data::error::Error;
use crate::targets;

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

/// A single Redis, through one multiplexed connection that is replaced
/// when it fails (see the ground rules).
pub(crate) struct Single {
    pub(super) client: redis::Client,
    config: AsyncConnectionConfig,
    pub(super) limits: Limits,
    /// The connection in use and its generation (so that a call that saw
    /// an old connection fail does not drop a newer one).
    pub(super) current: Mutex<Option<(u64, MultiplexedConnection)>>,
    generation: AtomicU64,
    /// Held while a new connection is opened, so that concurrent calls
    /// open one, not one each.
    connecting: tokio::sync::Mutex<()>,
    /// When a reply last arrived (see [`Clock`]).
    last_reply: Clock,
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
pub(super) fn tcp_settings(health_check: Duration) -> TcpSettings {
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
pub(super) fn connection_info(url: &str, limits: &Limits) -> Result<ConnectionInfo, Error> {
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
pub(super) fn async_config(limits: &Limits) -> AsyncConnectionConfig {
    AsyncConnectionConfig::new()
        .set_connection_timeout(Some(limits.command_timeout))
        .set_response_timeout(None)
}

impl Single {
    /// A single Redis reached through `client`, not connected yet: the
    /// first call connects.
    pub(crate) fn new(client: redis::Client, limits: Limits) -> Single {
        Single {
            client,
            config: async_config(&limits),
            limits,
            current: Mutex::new(None),
            generation: AtomicU64::new(0),
            connecting: tokio::sync::Mutex::new(()),
            last_reply: Clock::new(),
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
            tracing::info!(target: targets::REDIS,
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
    pub(super) fn drop_connection(&self, generation: u64) {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if matches!(&*current, Some((g, _)) if *g == generation) {
            *current = None;
        }
    }
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
pub(super) fn node_info(seed: &ConnectionInfo, host: String, port: u16) -> ConnectionInfo {
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
pub(super) fn lost_connection(error: &redis::RedisError) -> bool {
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

pub(super) fn unexpected(what: &str) -> Error {
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
