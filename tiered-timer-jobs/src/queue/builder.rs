//! [`Builder`]: a queue's settings, and `connect`, which picks the backend
//! by the URL's scheme and refuses settings the backend does not have.

use super::*;

/// Settings for a [`Queue`], from [`Queue::builder`].
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use tiered_timer_jobs::Queue;
///
/// # async fn demo() -> Result<(), tiered_timer_jobs::Error> {
/// let queue = Queue::builder("redis://127.0.0.1:6379/", "orders")
///     .lease(Duration::from_secs(30))
///     .max_attempts(10)
///     .command_timeout(Duration::from_secs(2))
///     .connect()
///     .await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Builder {
    pub(super) url: String,
    pub(super) name: String,
    pub(super) lease: Duration,
    pub(super) max_attempts: u32,
    pub(super) max_payload: usize,
    pub(super) command_timeout: Duration,
    pub(super) health_check: Duration,
    pub(super) replicas: u32,
    pub(super) replica_timeout: Duration,
    pub(super) prefetch: usize,
    pub(super) register: bool,
    pub(super) partitions: u32,
    pub(super) cluster: bool,
}

impl Builder {
    /// How long a delivered job stays claimed by its worker before it is
    /// due again (by Redis' clock). Default 30 s. Rounded up to whole
    /// milliseconds.
    pub fn lease(mut self, lease: Duration) -> Builder {
        self.lease = lease;
        self
    }

    /// How many deliveries a job gets; after the last one's lease runs out
    /// (or it is retried) it goes to the dead letters. Default 10.
    pub fn max_attempts(mut self, max_attempts: u32) -> Builder {
        self.max_attempts = max_attempts;
        self
    }

    /// The largest payload, in bytes. Default 512 KiB.
    pub fn max_payload(mut self, bytes: usize) -> Builder {
        self.max_payload = bytes;
        self
    }

    /// How long a call waits for Redis before it returns [`Error::Timeout`]
    /// (also the connect timeout: a refused connection is an error at
    /// once, a silent one after this long). Default 5 s.
    ///
    /// Redis only; accepted and ignored on a `file://` store.
    pub fn command_timeout(mut self, timeout: Duration) -> Builder {
        self.command_timeout = timeout;
        self
    }

    /// How soon a connection that stops answering (a NAT or load balancer
    /// that dropped it, a dead host, a hung Redis: nothing that sends a
    /// FIN or RST) is noticed, and replaced. Default 15 s; at least
    /// 100 ms.
    ///
    /// A waiting worker's blocking call carries a reply deadline of this
    /// long (Redis ends it a little earlier with an empty reply; no reply
    /// by the deadline means the connection is dead), so an idle worker
    /// sends one command per `health_check`. A command connection silent
    /// for longer than this is pinged before it is used. Every connection
    /// also has TCP keepalive probes after this much silence and a
    /// `TCP_USER_TIMEOUT` of this long, for peers that vanish.
    ///
    /// Redis only; accepted and ignored on a `file://` store.
    pub fn health_check(mut self, every: Duration) -> Builder {
        self.health_check = every;
        self
    }

    /// Waits after every write the caller is promised (a schedule, an ack,
    /// a retry or failure, a cancel, the operator's changes) until it
    /// reached `n` replicas (`WAIT n`), and fails that call with
    /// [`Error::NotReplicated`] if fewer acknowledged it within the
    /// [replica timeout](Builder::replica_timeout). Default 0: no
    /// waiting, and a failover may lose writes acknowledged by the master
    /// shortly before it (Redis replicates asynchronously).
    ///
    /// With `n` at least 1 and one replica per master, a write that
    /// returned `Ok` survives the failover of its master to that replica.
    /// Claims, lease renewals and releases wait too while the replicas keep
    /// up (so that a failover does not hand a job a worker holds to
    /// another), but never fail for want of them: losing one only means a
    /// redelivery or a delay. So a master left with fewer than `n`
    /// replicas (a promoted replica has none until another joins) goes on
    /// delivering; its schedules and acks are done on it and fail with
    /// `NotReplicated`, without waiting when it is known to be short (it
    /// is asked how many replicas it has online: when first written to,
    /// after a `WAIT` that counted too few, and every second while short).
    ///
    /// Costs one more command and one replication round trip per write,
    /// on connections of the queue handle's own (up to 8 per master, one
    /// write at a time each: a `WAIT` blocks its connection in Redis).
    /// Redis only: above 0 it is [`Error::Unsupported`] on a `file://`
    /// store (whose writes are on its disk before they return).
    pub fn replicas(mut self, n: u32) -> Builder {
        self.replicas = n;
        self
    }

    /// How long a write waits for its [replicas](Builder::replicas).
    /// Default 1 s. Keep it below the
    /// [command timeout](Builder::command_timeout): a write whose `WAIT`
    /// outlasts that is [`Error::Timeout`], not `NotReplicated`.
    pub fn replica_timeout(mut self, timeout: Duration) -> Builder {
        self.replica_timeout = timeout;
        self
    }

    /// How many jobs a claim may take beyond what this handle's waiting
    /// calls asked for, kept for the next [`next`](Queue::next) calls
    /// (which then return without a round trip). Default 0. At most 1000.
    ///
    /// For short jobs in a backlog: claims are fewer and bigger. A
    /// prefetched job is leased from its claim on, so its lease runs
    /// while it waits its turn; one that no call takes within half its
    /// lease is released, and so are all of them on [`Queue::close`] or
    /// when the last handle is dropped. Leave it at 0 for long jobs.
    /// With [`Job::ack_batched`](crate::Job::ack_batched) the acks go
    /// many per round trip too, and a worker waits for none.
    ///
    /// Redis only (it saves round trips); accepted and ignored on a
    /// `file://` store, whose claims are in-process.
    pub fn prefetch(mut self, jobs: usize) -> Builder {
        self.prefetch = jobs;
        self
    }

    /// Whether connecting records the queue's name and partition count in
    /// the registry `ttr:queues` if none is recorded yet (default `true`).
    /// Every handle is checked against a recorded count (see
    /// [`connect`](Builder::connect)); tools that only look at queues
    /// (`ttr`) pass `false`, so that looking at a name does not make a
    /// queue appear. (Such a handle records the queue at its first
    /// successful schedule instead.)
    ///
    /// On a `file://` store, where a queue is its log file, `false` opens
    /// only a queue that exists ([`Error::Io`] with
    /// [`NotFound`](std::io::ErrorKind::NotFound) otherwise).
    pub fn register(mut self, register: bool) -> Builder {
        self.register = register;
        self
    }

    /// Spreads the queue over `n` hash tags (`{name#0}` .. `{name#n-1}`),
    /// so over the nodes of a Redis Cluster. Every process using the queue
    /// must use the same `n`: a job's partition is a hash of its id modulo
    /// `n`. Default 1 (one tag, `{name}`). At most 1024. Redis only: other
    /// than 1 it is [`Error::Unsupported`] on a `file://` store.
    pub fn partitions(mut self, n: u32) -> Builder {
        self.partitions = n;
        self
    }

    /// Connects to a Redis Cluster, with the URL as a seed node, instead of
    /// a single Redis. Redis only: [`Error::Unsupported`] on a `file://`
    /// store.
    pub fn cluster(mut self) -> Builder {
        self.cluster = true;
        self
    }

    /// Checks the settings and connects.
    ///
    /// On its first connect, a queue records its partition count in Redis
    /// (the registry `ttr:queues`, see [`register`](Builder::register));
    /// every later handle must use the same.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidUrl`], [`Error::InvalidQueueName`] or
    /// [`Error::InvalidConfig`] for bad settings;
    /// [`Error::PartitionMismatch`] if the queue was created with another
    /// partition count; [`Error::Redis`] at once if the connection is
    /// refused, [`Error::Timeout`] if Redis does not answer within the
    /// command timeout.
    pub async fn connect(self) -> Result<Queue, Error> {
        check_queue_name(&self.name)?;
        if self.lease.is_zero() || millis_up(self.lease) > MAX_DEADLINE_MS {
            return Err(Error::InvalidConfig {
                reason: "the lease must be at least 1 ms and at most 2^52 ms",
            });
        }
        if self.max_attempts == 0 {
            return Err(Error::InvalidConfig {
                reason: "max_attempts must be at least 1",
            });
        }
        if self.partitions == 0 || self.partitions > 1024 {
            return Err(Error::InvalidConfig {
                reason: "partitions must be between 1 and 1024",
            });
        }
        if self.command_timeout.is_zero() {
            return Err(Error::InvalidConfig {
                reason: "the command timeout must not be zero",
            });
        }
        if self.health_check < Duration::from_millis(100) {
            return Err(Error::InvalidConfig {
                reason: "the health check interval must be at least 100 ms",
            });
        }
        if self.replicas > 0 && self.replica_timeout.is_zero() {
            return Err(Error::InvalidConfig {
                reason: "the replica timeout must not be zero",
            });
        }
        if self.prefetch > 1000 {
            return Err(Error::InvalidConfig {
                reason: "prefetch must be at most 1000",
            });
        }
        if self.url.starts_with("file://") {
            return self.connect_embedded().await;
        }
        self.connect_redis().await
    }

    #[cfg(not(feature = "redis"))]
    async fn connect_redis(self) -> Result<Queue, Error> {
        Err(Error::InvalidUrl {
            reason: format!(
                "{}: only file:// URLs without the crate's `redis` feature",
                self.url
            ),
        })
    }

    /// Connects to Redis.
    #[cfg(feature = "redis")]
    async fn connect_redis(self) -> Result<Queue, Error> {
        let timeout = self.command_timeout;
        let limits = Limits {
            command_timeout: timeout,
            health_check: self.health_check,
            replicas: self.replicas,
            replica_timeout: self.replica_timeout,
        };
        let conn = Conn::open(&self.url, self.cluster, limits).await?;
        check_partitions(&conn, &self.name, self.partitions, self.register).await?;
        let partitions: Vec<Keys> = (0..self.partitions)
            .map(|p| Keys::new(&self.name, p, self.partitions))
            .collect();
        let wake = Shared::start(Setup {
            name: self.name.clone(),
            conn: conn.clone(),
            partitions: partitions.clone(),
            lease: Duration::from_millis(millis_up(self.lease)),
            max_attempts: self.max_attempts,
            prefetch: self.prefetch,
            health_check: self.health_check,
            token_prefix: format!("{}-", &random_id()[..16]),
            tokens: AtomicU64::new(0),
        });
        Ok(Queue {
            inner: Arc::new(Inner {
                name: self.name,
                lease: self.lease,
                max_attempts: self.max_attempts,
                max_payload: self.max_payload,
                closed: AtomicBool::new(false),
                held: watch::Sender::new(0),
                acks: Default::default(),
                backend: Backend::Redis(RedisPart {
                    conn,
                    partitions,
                    wake,
                    // Connecting recorded the partition count (if asked to).
                    registered: AtomicBool::new(self.register),
                }),
            }),
        })
    }
}

impl Builder {
    /// Opens (or creates) the queue in a `file://` store: the Redis-only
    /// settings that would change what the queue promises are refused.
    #[cfg(feature = "embedded")]
    async fn connect_embedded(self) -> Result<Queue, Error> {
        use crate::embedded::queue as local;
        let unsupported = |setting| Error::Unsupported {
            setting,
            backend: "embedded",
        };
        if self.partitions != 1 {
            return Err(unsupported("partitions"));
        }
        if self.cluster {
            return Err(unsupported("cluster"));
        }
        if self.replicas > 0 {
            return Err(unsupported("replicas"));
        }
        local::check_file_name(&self.name)?;
        let dir = local::dir_of(&self.url)?;
        if !self.register {
            local::check_exists(&dir, &self.name)?;
        }
        let local = local::open(&dir, &self.name).await?;
        Ok(Queue {
            inner: Arc::new(Inner {
                name: self.name,
                lease: self.lease,
                max_attempts: self.max_attempts,
                max_payload: self.max_payload,
                closed: AtomicBool::new(false),
                held: watch::Sender::new(0),
                acks: Default::default(),
                backend: Backend::Embedded(local),
            }),
        })
    }

    #[cfg(not(feature = "embedded"))]
    async fn connect_embedded(self) -> Result<Queue, Error> {
        Err(Error::InvalidUrl {
            reason: "file:// URLs need the crate's `embedded` feature".to_owned(),
        })
    }
}
