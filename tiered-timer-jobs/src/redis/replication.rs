//! Writes that wait for replicas ([`Builder::replicas`](crate::Builder::replicas)):
//! which writes wait, on which connections, and what happens on a master
//! that has fewer replicas than asked for (after a failover, its replica
//! took over and has none left).
//!
//! # What waits
//!
//! * [`Durability::Required`]: what a caller is promised survives a
//!   failover: a schedule, an ack, a retry or a failure, a cancel, an
//!   operator's change. `WAIT n` follows it; fewer than `n` replicas is
//!   [`Error::NotReplicated`] for that call only (the write is on the
//!   master).
//! * [`Durability::BestEffort`]: claims, lease renewals, releases. Losing
//!   one in a failover costs a redelivery (a claim, a renewal: the job is
//!   due again as if the lease had run out) or a delay (a release: the job
//!   comes back when its lease runs out), never a job and never an early
//!   delivery. It waits while the master's replicas keep up, so that a
//!   failover does not hand a job a worker holds to another; it never
//!   fails for want of replicas, and does not wait at all while the
//!   master is short of replicas or they lag.
//! * [`Durability::Read`]: never waits.
//!
//! # Connections of their own
//!
//! `WAIT` blocks its connection in Redis until the replicas acknowledge or
//! the timeout passes, and whatever is pipelined behind it waits too. On
//! the shared command connection, each write queued behind a `WAIT` on a
//! master without replicas waited its full timeout after the one before:
//! after a failover to a replica that had none left, claims timed out one
//! after the other, their jobs stayed leased by nobody, came back after
//! each lease into the same jam, and went to the dead letters out of
//! attempts, never delivered (issue 33). So a write that waits runs on a
//! connection of its own for the time of the call: up to [`PER_MASTER`]
//! per master, opened when calls need them and kept. Every other call
//! stays on the shared connection, never behind a `WAIT`.
//!
//! # A master short of replicas
//!
//! A master this handle has not written to yet (a replica just promoted,
//! say) is first asked how many replicas it has online (`INFO
//! replication`), and so is one whose `WAIT` counted fewer than asked, on
//! the same connection. Fewer than `n` online: for [`RECHECK`], writes run
//! without `WAIT` (still on the master's own connections), required ones
//! [`Error::NotReplicated`] at once (a replica that comes back resyncs
//! first, which takes longer than a `WAIT` would); then one call asks the
//! master again. Enough replicas online, just behind: required writes go
//! on waiting, best-effort ones do not, for [`RECHECK`]. On a cluster
//! every write of a queue that asks for replicas goes over these
//! connections, none over redis-rs' cluster connection, whose state after
//! a failover does not then delay them.
//!
//! # Redirects
//!
//! On a cluster, the slot's master is found in a map read with `CLUSTER
//! SLOTS` and kept until a redirect says it changed: `MOVED` sends the
//! call to the new master (and the map is read again when next needed),
//! `ASK` sends it once with `ASKING` first; a master that refuses the
//! connection, or a cluster that is down, is tried again after a pause
//! until the command timeout. Such calls did not run, so sending them
//! again is safe.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{ConnectionInfo, ErrorKind, FromRedisValue, Script, ServerErrorKind, Value};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::cluster::{no_master, parse_slots, Cluster, SlotRange};
use super::node::{
    from_value, is_noscript, node_client, redis_error, Limits, Single, FIRST_BACKOFF, MAX_BACKOFF,
};
use crate::data::error::Error;
use crate::targets;

/// How much a write's survival of a failover matters (see the module
/// docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Durability {
    /// Changes nothing: no `WAIT`.
    Read,
    /// Its loss costs a redelivery or a delay: `WAIT` while the replicas
    /// keep up, never an error.
    BestEffort,
    /// Promised to the caller: `WAIT`, and [`Error::NotReplicated`] if it
    /// reached too few replicas.
    Required,
}

/// The most connections a master gets for writes that wait, each used by
/// one call at a time; more calls wait for one.
const PER_MASTER: usize = 8;
/// How long a master found short of replicas (or with replicas that lag)
/// is taken to be so before it is asked again.
pub(crate) const RECHECK: Duration = Duration::from_secs(1);

/// The masters a queue handle writes to with `WAIT`, and how to find them.
pub(crate) struct Replication {
    limits: Limits,
    nodes: Nodes,
    /// By address (`host:port`; `""` for the single Redis).
    masters: Mutex<HashMap<String, Arc<Master>>>,
}

/// How to reach the masters.
enum Nodes {
    /// One Redis.
    Single(redis::Client),
    /// A cluster: the seed's settings, for a client per master, and which
    /// master serves which slots (`None`: read it again when needed).
    Cluster {
        seed: ConnectionInfo,
        slots: Mutex<Option<Arc<Vec<SlotRange>>>>,
        /// Held while the map is read, so that concurrent calls read it
        /// once.
        reading: tokio::sync::Mutex<()>,
        /// Connections that read the map, by node address.
        readers: Mutex<HashMap<String, Arc<Single>>>,
    },
}

/// One master: its connections for writes that wait, and what its
/// replicas allow.
struct Master {
    client: redis::Client,
    limits: Limits,
    /// A cluster's master: a refused connection or a cluster that is down
    /// may be a failover under way, and is tried again (a single Redis
    /// reports a refusal at once).
    cluster: bool,
    /// Connections not in use.
    idle: Mutex<Vec<Arc<Single>>>,
    /// One per connection in use (so at most [`PER_MASTER`]).
    permits: Arc<Semaphore>,
    /// The scripts (by hash) this handle loaded on the master.
    scripts: Mutex<std::collections::HashSet<String>>,
    health: Mutex<Health>,
}

/// What a master's replicas allow, as last seen.
#[derive(Debug, Clone, Copy)]
enum Health {
    /// Not known yet: the first calls ask the master.
    Unknown,
    /// The last `WAIT` counted enough replicas, or enough are online.
    Healthy,
    /// Fewer than asked for are online (`online`): writes do not wait;
    /// one call asks again after `until`.
    Short { online: u32, until: Instant },
    /// Enough are online, but the last `WAIT` counted fewer: best-effort
    /// writes do not wait until `until`.
    Lagging { until: Instant },
}

/// Where a call is sent next.
#[derive(Debug, Clone)]
enum Target {
    /// The master of the slot, by the map.
    Slot,
    /// The node a `MOVED` named.
    Moved(String),
    /// The node an `ASK` named, once, after `ASKING`.
    Ask(String),
}

/// What one try of a write got.
enum Tried {
    /// The script's reply and how many replicas acknowledged it (and, if
    /// too few, how many the master has online).
    Done {
        value: Value,
        acked: u32,
        online: Option<u32>,
    },
    /// The call did not run: send it to this target after this pause.
    Again { target: Target, pause: bool },
}

impl Replication {
    /// For the single Redis that `client` reaches.
    pub(crate) fn single(limits: Limits, client: redis::Client) -> Replication {
        Replication {
            limits,
            nodes: Nodes::Single(client),
            masters: Mutex::new(HashMap::new()),
        }
    }

    /// For the cluster whose seed node is `seed`.
    pub(crate) fn cluster(limits: Limits, seed: ConnectionInfo) -> Replication {
        Replication {
            limits,
            nodes: Nodes::Cluster {
                seed,
                slots: Mutex::new(None),
                reading: tokio::sync::Mutex::new(()),
                readers: Mutex::new(HashMap::new()),
            },
            masters: Mutex::new(HashMap::new()),
        }
    }

    /// Runs a write script on `keys` (the first decides the cluster slot)
    /// with `WAIT` as `durability` and the master's replicas allow;
    /// returns its reply and the verdict (an error only for a required
    /// write that reached too few replicas).
    pub(crate) async fn write<T: FromRedisValue>(
        &self,
        cluster: Option<&Cluster>,
        script: &Script,
        keys: &[String],
        args: Vec<Vec<u8>>,
        durability: Durability,
    ) -> Result<(T, Result<(), Error>), Error> {
        let timeout = self.limits.command_timeout;
        let deadline = Instant::now() + timeout;
        let slot = crate::redis::keys::slot_of(&keys[0]);
        let mut target = Target::Slot;
        let mut backoff = FIRST_BACKOFF;
        loop {
            let master = self.master(cluster, slot, &target).await?;
            let mut member = master.checkout(deadline, timeout).await?;
            if master.claim_check() {
                let left = deadline.saturating_duration_since(Instant::now());
                tiered_timer::timeout(left, member.check())
                    .await
                    .map_err(|_| Error::Timeout { after: timeout })?;
            }
            // `Some(online)`: run without WAIT (`online` replicas if the
            // master is short of them).
            let skip = master.skip(durability);
            let asking = matches!(target, Target::Ask(_));
            let left = deadline.saturating_duration_since(Instant::now());
            let run = member.run(script, keys, &args, asking, skip.is_none());
            let tried = match tiered_timer::timeout(left, run).await {
                Err(_) => return Err(Error::Timeout { after: timeout }),
                Ok(tried) => tried?,
            };
            drop(member);
            match tried {
                Tried::Done {
                    value,
                    acked,
                    online,
                } => {
                    let verdict = match skip {
                        Some(online) => self.verdict(durability, online, None),
                        None => {
                            master.learn(acked, online);
                            self.verdict(durability, None, Some(acked))
                        }
                    };
                    let value: T = from_value(Some(value))?;
                    return Ok((value, verdict));
                }
                Tried::Again {
                    target: next,
                    pause,
                } => {
                    if !matches!(next, Target::Ask(_)) {
                        self.forget_slots();
                    }
                    target = next;
                    if pause {
                        if Instant::now() + backoff >= deadline {
                            return Err(Error::Timeout { after: timeout });
                        }
                        tiered_timer::sleep(backoff).await;
                        backoff = (backoff * 2).min(MAX_BACKOFF);
                    }
                }
            }
        }
    }

    /// The verdict on a write: an error only for a required write whose
    /// master is known short of replicas (`online`, no `WAIT` sent) or
    /// whose `WAIT` counted too few (`acked`).
    fn verdict(
        &self,
        durability: Durability,
        online: Option<u32>,
        acked: Option<u32>,
    ) -> Result<(), Error> {
        let wanted = self.limits.replicas;
        let (replicas, within) = match (online, acked) {
            (Some(online), _) => (online, Duration::ZERO),
            (None, Some(acked)) if acked < wanted => (acked, self.limits.replica_timeout),
            _ => return Ok(()),
        };
        if durability == Durability::Required {
            Err(Error::NotReplicated {
                replicas,
                wanted,
                within,
            })
        } else {
            Ok(())
        }
    }

    /// The master to send a write on `slot` to.
    async fn master(
        &self,
        cluster: Option<&Cluster>,
        slot: u16,
        target: &Target,
    ) -> Result<Arc<Master>, Error> {
        let (name, client) = match (&self.nodes, target) {
            (Nodes::Single(client), _) => (String::new(), Some(client.clone())),
            (Nodes::Cluster { .. }, Target::Moved(address) | Target::Ask(address)) => {
                (address.clone(), None)
            }
            (Nodes::Cluster { .. }, Target::Slot) => {
                let slots = self.slots(cluster).await?;
                let range = slots
                    .iter()
                    .find(|range| (range.start..=range.end).contains(&slot))
                    .ok_or_else(|| no_master(slot))?;
                (format!("{}:{}", range.host, range.port), None)
            }
        };
        if let Some(master) = self.lock_masters().get(&name) {
            return Ok(Arc::clone(master));
        }
        let client = match (client, &self.nodes) {
            (Some(client), _) => client,
            (None, Nodes::Cluster { seed, .. }) => {
                let (host, port) = split_address(&name).ok_or_else(|| {
                    Error::Redis(redis::RedisError::from((
                        ErrorKind::UnexpectedReturnType,
                        "unexpected node address",
                        name.clone(),
                    )))
                })?;
                node_client(seed, host, port)
                    .map_err(|e| redis_error(e, self.limits.command_timeout))?
            }
            (None, Nodes::Single(client)) => client.clone(),
        };
        let cluster = matches!(self.nodes, Nodes::Cluster { .. });
        let master = Arc::new(Master::new(client, self.limits, cluster));
        Ok(Arc::clone(
            self.lock_masters().entry(name).or_insert(master),
        ))
    }

    /// The cluster's slot map, read if there is none.
    async fn slots(&self, cluster: Option<&Cluster>) -> Result<Arc<Vec<SlotRange>>, Error> {
        let Nodes::Cluster { slots, reading, .. } = &self.nodes else {
            return Ok(Arc::new(Vec::new()));
        };
        if let Some(map) = lock(slots).clone() {
            return Ok(map);
        }
        let _one_at_a_time = reading.lock().await;
        if let Some(map) = lock(slots).clone() {
            return Ok(map);
        }
        let ranges = self.read_slots(cluster).await?;
        if let Some(cluster) = cluster {
            cluster.learn_masters(&ranges);
        }
        let map = Arc::new(ranges);
        // Masters no longer in the map close their connections.
        let current: std::collections::HashSet<String> = map
            .iter()
            .map(|range| format!("{}:{}", range.host, range.port))
            .collect();
        self.lock_masters().retain(|name, _| current.contains(name));
        if let Nodes::Cluster { readers, .. } = &self.nodes {
            lock(readers).retain(|name, _| current.contains(name));
        }
        *lock(slots) = Some(Arc::clone(&map));
        Ok(map)
    }

    /// Reads `CLUSTER SLOTS` over a connection of this handle's own to a
    /// node it knows (the masters it writes to, then the seed), so that a
    /// failover's map does not depend on the shared cluster connection's
    /// state; failing all, through the shared connection.
    async fn read_slots(&self, cluster: Option<&Cluster>) -> Result<Vec<SlotRange>, Error> {
        let Nodes::Cluster { seed, readers, .. } = &self.nodes else {
            return Ok(Vec::new());
        };
        let mut candidates: Vec<String> = self.lock_masters().keys().cloned().collect();
        if let redis::ConnectionAddr::Tcp(host, port)
        | redis::ConnectionAddr::TcpTls { host, port, .. } = seed.addr()
        {
            candidates.push(format!("{host}:{port}"));
        }
        for name in candidates {
            let Some((host, port)) = split_address(&name) else {
                continue;
            };
            let reader = {
                let mut readers = lock(readers);
                match readers.get(&name) {
                    Some(reader) => Arc::clone(reader),
                    None => {
                        let Ok(client) = node_client(seed, host.clone(), port) else {
                            continue;
                        };
                        let reader = Arc::new(Single::new(client, self.limits));
                        readers.insert(name.clone(), Arc::clone(&reader));
                        reader
                    }
                }
            };
            let reply = reader
                .call(|mut c| async move {
                    redis::cmd("CLUSTER")
                        .arg("SLOTS")
                        .query_async::<Value>(&mut c)
                        .await
                })
                .await;
            if let Ok(reply) = reply {
                if let Ok(ranges) = parse_slots(reply, &host) {
                    if !ranges.is_empty() {
                        return Ok(ranges);
                    }
                }
            }
        }
        match cluster {
            Some(cluster) => cluster.slot_ranges().await,
            None => Ok(Vec::new()),
        }
    }

    /// Drops the slot map: the next call reads it again.
    fn forget_slots(&self) {
        if let Nodes::Cluster { slots, .. } = &self.nodes {
            *lock(slots) = None;
        }
    }

    fn lock_masters(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Master>>> {
        lock(&self.masters)
    }
}

impl std::fmt::Debug for Replication {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replication")
            .field("replicas", &self.limits.replicas)
            .finish_non_exhaustive()
    }
}

impl Master {
    fn new(client: redis::Client, limits: Limits, cluster: bool) -> Master {
        Master {
            client,
            limits,
            cluster,
            idle: Mutex::new(Vec::new()),
            permits: Arc::new(Semaphore::new(PER_MASTER)),
            scripts: Mutex::new(std::collections::HashSet::new()),
            health: Mutex::new(Health::Unknown),
        }
    }

    /// Whether this call is to ask the master how many replicas it has
    /// online first: while that is unknown, every call that gets here; of
    /// the calls that find a short master's time up, one (the others go on
    /// as if it were still short meanwhile).
    fn claim_check(&self) -> bool {
        let mut health = lock(&self.health);
        let now = Instant::now();
        match *health {
            Health::Unknown => true,
            Health::Short { online, until } if until <= now => {
                *health = Health::Short {
                    online,
                    until: now + RECHECK,
                };
                true
            }
            _ => false,
        }
    }

    /// Whether a write of `durability` goes without `WAIT` now:
    /// `Some(online)` if so (with the replicas online if the master is
    /// short of them), `None` if it waits.
    fn skip(&self, durability: Durability) -> Option<Option<u32>> {
        match *lock(&self.health) {
            Health::Unknown | Health::Healthy => None,
            Health::Short { online, .. } => Some(Some(online)),
            Health::Lagging { until }
                if Instant::now() < until && durability != Durability::Required =>
            {
                Some(None)
            }
            Health::Lagging { .. } => None,
        }
    }

    /// Takes what the master said of its replicas online (`None`: it did
    /// not say, or is no master; one not known yet is then taken as
    /// healthy, and `WAIT` tells).
    fn checked(&self, online: Option<u32>) {
        let wanted = self.limits.replicas;
        let mut health = lock(&self.health);
        let next = match (online, *health) {
            (Some(online), _) if online >= wanted => Health::Healthy,
            (Some(online), _) => Health::Short {
                online,
                until: Instant::now() + RECHECK,
            },
            (None, Health::Unknown) => Health::Healthy,
            (None, current) => current,
        };
        trace_change(*health, next, wanted);
        *health = next;
    }

    /// Takes what a `WAIT` counted (and, if too few, how many replicas
    /// the master said it has online).
    fn learn(&self, acked: u32, online: Option<u32>) {
        let wanted = self.limits.replicas;
        let now = Instant::now();
        let next = match online {
            _ if acked >= wanted => Health::Healthy,
            Some(online) if online < wanted => Health::Short {
                online,
                until: now + RECHECK,
            },
            // Enough online, or the master did not say: they lag.
            _ => Health::Lagging {
                until: now + RECHECK,
            },
        };
        let mut health = lock(&self.health);
        trace_change(*health, next, wanted);
        *health = next;
    }

    /// Whether this handle loaded `script` on the master.
    fn knows(&self, script: &Script) -> bool {
        lock(&self.scripts).contains(script.get_hash())
    }

    /// `script` is loaded on the master.
    fn loaded(&self, script: &Script) {
        lock(&self.scripts).insert(script.get_hash().to_owned());
    }

    /// A connection of this master's, for one call: an idle one, or a new
    /// one if fewer than [`PER_MASTER`] are in use; else waits for one, up
    /// to `deadline`.
    async fn checkout(
        self: &Arc<Self>,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<Member, Error> {
        let left = deadline.saturating_duration_since(Instant::now());
        let permit = tiered_timer::timeout(left, Arc::clone(&self.permits).acquire_owned())
            .await
            .map_err(|_| Error::Timeout { after: timeout })?
            .expect("the semaphore is never closed");
        let single = lock(&self.idle)
            .pop()
            .unwrap_or_else(|| Arc::new(Single::new(self.client.clone(), self.limits)));
        Ok(Member {
            single,
            master: Arc::clone(self),
            busy: false,
            _permit: permit,
        })
    }
}

/// One of a master's connections, out for one call. Back to the idle ones
/// when dropped; closed instead if a call on it was dropped midway (a
/// `WAIT` may still block it).
struct Member {
    single: Arc<Single>,
    master: Arc<Master>,
    /// A call is under way (set while one runs).
    busy: bool,
    _permit: OwnedSemaphorePermit,
}

impl Member {
    /// Runs `[ASKING,] EVALSHA[, WAIT]` (and `INFO replication` if `WAIT`
    /// counted too few), loading the script first if this handle has not
    /// on this master.
    async fn run(
        &mut self,
        script: &Script,
        keys: &[String],
        args: &[Vec<u8>],
        asking: bool,
        wait: bool,
    ) -> Result<Tried, Error> {
        let limits = self.master.limits;
        let mut pipe = redis::pipe();
        if asking {
            pipe.add_command(redis::cmd("ASKING"));
        }
        let mut evalsha = redis::cmd("EVALSHA");
        evalsha.arg(script.get_hash()).arg(keys.len()).arg(keys);
        for a in args {
            evalsha.arg(a.as_slice());
        }
        pipe.add_command(evalsha);
        if wait {
            let mut wait = redis::cmd("WAIT");
            wait.arg(limits.replicas)
                .arg(limits.replica_timeout.as_millis() as u64);
            pipe.add_command(wait);
        }
        let (skip, count) = (usize::from(asking), 1 + usize::from(wait));
        let master = Arc::clone(&self.master);
        self.busy = true;
        let reply = self
            .single
            .call(|mut conn| async move {
                // Where the script may be missing (a master this handle has
                // not used it on, a replica just promoted), load it first:
                // after a NOSCRIPT the WAIT behind it would still wait its
                // full timeout on a master short of replicas.
                if !master.knows(script) {
                    script.prepare_invoke().load_async(&mut conn).await?;
                    master.loaded(script);
                }
                let mut values = conn.req_packed_commands(&pipe, skip, count).await?;
                if is_noscript(&values) {
                    script.prepare_invoke().load_async(&mut conn).await?;
                    values = conn.req_packed_commands(&pipe, skip, count).await?;
                }
                let acked = match values.get(1) {
                    Some(Value::Int(n)) => u32::try_from(*n).unwrap_or(0),
                    _ => 0,
                };
                let online = if wait && acked < limits.replicas && is_reply(values.first()) {
                    online_replicas(&mut conn).await
                } else {
                    None
                };
                Ok((values, acked, online))
            })
            .await;
        // The call ended, whatever its outcome: no WAIT blocks the
        // connection.
        self.busy = false;
        let (values, acked, online) = match reply {
            Ok(reply) => reply,
            Err(Error::Redis(error)) => {
                return match self.master.retry_after(&error) {
                    Some(again) => Ok(again),
                    None => Err(Error::Redis(error)),
                }
            }
            Err(other) => return Err(other),
        };
        let value = values.into_iter().next().unwrap_or(Value::Nil);
        if let Value::ServerError(error) = &value {
            let error = redis::RedisError::from(error.clone());
            if let Some(again) = self.master.retry_after(&error) {
                return Ok(again);
            }
        }
        Ok(Tried::Done {
            value,
            acked,
            online,
        })
    }

    /// Asks the master how many replicas it has online, and takes the
    /// answer (no answer at all changes nothing: the write that follows
    /// meets the same trouble and says so).
    async fn check(&mut self) {
        self.busy = true;
        let online = self
            .single
            .call(|mut conn| async move { Ok(online_replicas(&mut conn).await) })
            .await;
        self.busy = false;
        if let Ok(online) = online {
            self.master.checked(online);
        }
    }
}

impl Master {
    /// Whether a call that failed with `error` did not run and is worth
    /// sending again, and where: after a redirect, to the node it names
    /// (at once); after a refused connection or a cluster that is down
    /// there (a failover under way), by the map, after a pause.
    fn retry_after(&self, error: &redis::RedisError) -> Option<Tried> {
        let target = |address: Option<(&str, u16)>, ask: bool| match address {
            Some((address, _)) if ask => Target::Ask(address.to_owned()),
            Some((address, _)) => Target::Moved(address.to_owned()),
            None => Target::Slot,
        };
        match error.kind() {
            ErrorKind::Server(ServerErrorKind::Moved) => Some(Tried::Again {
                target: target(error.redirect_node(), false),
                pause: false,
            }),
            ErrorKind::Server(ServerErrorKind::Ask) => Some(Tried::Again {
                target: target(error.redirect_node(), true),
                pause: false,
            }),
            ErrorKind::Server(
                ServerErrorKind::ReadOnly
                | ServerErrorKind::TryAgain
                | ServerErrorKind::ClusterDown
                | ServerErrorKind::MasterDown,
            ) if self.cluster => Some(Tried::Again {
                target: Target::Slot,
                pause: true,
            }),
            _ if self.cluster && error.is_connection_refusal() => Some(Tried::Again {
                target: Target::Slot,
                pause: true,
            }),
            _ => None,
        }
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        if !self.busy {
            lock(&self.master.idle).push(Arc::clone(&self.single));
        }
    }
}

/// Traces a change of what a master's replicas allow that matters to
/// writes: short of replicas, or back to having them.
fn trace_change(from: Health, to: Health, wanted: u32) {
    match (from, to) {
        (Health::Short { .. }, Health::Healthy | Health::Lagging { .. }) => {
            tracing::info!(target: targets::REDIS,
                wanted,
                "a master has its replicas back: writes wait for them again"
            );
        }
        (
            Health::Unknown | Health::Healthy | Health::Lagging { .. },
            Health::Short { online, .. },
        ) => {
            tracing::warn!(target: targets::REDIS, online, wanted, "a master has fewer replicas online than asked for: its writes are not replicated (required ones fail with NotReplicated) until it has them back");
        }
        _ => {}
    }
}

/// Whether a pipeline's first reply is a reply (not an error).
fn is_reply(value: Option<&Value>) -> bool {
    !matches!(value, None | Some(Value::ServerError(_)))
}

/// How many replicas the master on `conn` has online, by `INFO
/// replication` (`None`: no answer, or the node is no master).
async fn online_replicas(conn: &mut MultiplexedConnection) -> Option<u32> {
    let info: String = redis::cmd("INFO")
        .arg("replication")
        .query_async(conn)
        .await
        .ok()?;
    count_online(&info)
}

/// The replicas `INFO replication` lists as online (`None` unless the
/// node says it is a master).
fn count_online(info: &str) -> Option<u32> {
    if !info.lines().any(|line| line.trim() == "role:master") {
        return None;
    }
    let online = info
        .lines()
        .filter(|line| line.starts_with("slave") && line.contains("state=online"))
        .count();
    Some(u32::try_from(online).unwrap_or(u32::MAX))
}

/// `host:port` as a host and a port (the host may hold colons: IPv6).
fn split_address(address: &str) -> Option<(String, u16)> {
    let (host, port) = address.rsplit_once(':')?;
    Some((host.to_owned(), port.parse().ok()?))
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn online_replicas_are_counted_from_info_on_a_master_only() {
        let master = "# Replication\r\nrole:master\r\nconnected_slaves:2\r\n\
            slave0:ip=127.0.0.1,port=7001,state=online,offset=42,lag=0\r\n\
            slave1:ip=127.0.0.1,port=7002,state=wait_bgsave,offset=0,lag=0\r\n\
            master_failover_state:no-failover\r\n";
        assert_eq!(count_online(master), Some(1));
        let alone = "# Replication\r\nrole:master\r\nconnected_slaves:0\r\n";
        assert_eq!(count_online(alone), Some(0));
        let replica = "# Replication\r\nrole:slave\r\nmaster_host:127.0.0.1\r\n";
        assert_eq!(count_online(replica), None);
    }

    #[test]
    fn addresses_split_at_the_last_colon() {
        assert_eq!(
            split_address("127.0.0.1:7000"),
            Some(("127.0.0.1".to_owned(), 7000))
        );
        assert_eq!(split_address("::1:7000"), Some(("::1".to_owned(), 7000)));
        assert_eq!(split_address("nowhere"), None);
    }
}
