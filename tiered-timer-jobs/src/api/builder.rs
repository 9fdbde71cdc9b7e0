//! [`Builder`]: a queue's settings, checked in [`Builder::connect`]
//! before the backend its URL names opens the queue (the settings a
//! backend does not have are refused there, from its capabilities: see
//! `src/contract.rs`).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::inner::Inner;
use super::queue::Queue;
use crate::backends::AnyBackend;
use crate::contract::Settings;
use crate::data::checks::check_queue_name;
use crate::data::clock::Clock;
use crate::data::error::Error;
use crate::data::history::{check_holder, default_holder};
use crate::data::limits::{millis_up, LEASE_RANGE, MAX_PARTITIONS, MAX_SPAN_MS};

impl Queue {
    /// Connects to the queue `name` at `url` (an embedded store's
    /// `file://` directory, or a Redis; see [`builder`](Queue::builder)),
    /// with the default settings (see [`Builder`]).
    ///
    /// # Errors
    ///
    /// As [`Builder::connect`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), tiered_timer_jobs::Error> {
    /// let queue = tiered_timer_jobs::Queue::connect("file:///var/lib/shop/jobs", "orders").await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn connect(url: &str, name: &str) -> Result<Queue, Error> {
        Queue::builder(url, name).connect().await
    }

    /// Settings for the queue `name` at `url`: an embedded store's
    /// directory (`file:///var/lib/app/jobs`, or `file://rel/dir` relative
    /// to the working directory; the queue's name is also a file's name
    /// there), or a Redis
    /// (`redis://host:port/db`, `rediss://`, `redis+unix://`).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), tiered_timer_jobs::Error> {
    /// let queue = tiered_timer_jobs::Queue::builder("redis://127.0.0.1:6379/", "orders")
    ///     .max_attempts(5)
    ///     .connect()
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn builder(url: &str, name: &str) -> Builder {
        Builder {
            settings: Settings {
                url: url.to_owned(),
                name: name.to_owned(),
                lease: Duration::from_secs(30),
                max_attempts: 10,
                max_payload: 512 * 1024,
                command_timeout: Duration::from_secs(5),
                health_check: Duration::from_secs(15),
                replicas: 0,
                replica_timeout: Duration::from_secs(1),
                prefetch: 0,
                register: true,
                read_only: false,
                partitions: None,
                cluster: false,
                clock: Clock::system(),
                holder: default_holder(),
            },
        }
    }
}

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
#[derive(Clone)]
pub struct Builder {
    settings: Settings,
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.settings;
        f.debug_struct("Builder")
            .field("url", &s.url)
            .field("name", &s.name)
            .field("lease", &s.lease)
            .field("max_attempts", &s.max_attempts)
            .field("max_payload", &s.max_payload)
            .field("command_timeout", &s.command_timeout)
            .field("health_check", &s.health_check)
            .field("replicas", &s.replicas)
            .field("replica_timeout", &s.replica_timeout)
            .field("prefetch", &s.prefetch)
            .field("register", &s.register)
            .field("read_only", &s.read_only)
            .field("partitions", &s.partitions)
            .field("cluster", &s.cluster)
            .field("clock", &s.clock)
            .field("holder", &s.holder)
            .finish()
    }
}

impl Builder {
    /// How long a delivered job stays claimed by its worker before it is
    /// due again (by Redis' clock). Default 30 s. Rounded up to whole
    /// milliseconds; at least 1 ms and at most 2^51 ms (about 71 000
    /// years), as for [`Job::extend_lease`](crate::Job::extend_lease):
    /// [`connect`](Builder::connect) checks it.
    pub fn lease(mut self, lease: Duration) -> Builder {
        self.settings.lease = lease;
        self
    }

    /// How many deliveries a job gets; after the last one's lease runs out
    /// (or it is retried) it goes to the dead letters. Default 10.
    pub fn max_attempts(mut self, max_attempts: u32) -> Builder {
        self.settings.max_attempts = max_attempts;
        self
    }

    /// The largest payload, in bytes. Default 512 KiB.
    pub fn max_payload(mut self, bytes: usize) -> Builder {
        self.settings.max_payload = bytes;
        self
    }

    /// How long a call waits for Redis before it returns [`Error::Timeout`]
    /// (also the connect timeout: a refused connection is an error at
    /// once, a silent one after this long). Default 5 s.
    ///
    /// Redis only; accepted and ignored on a `file://` store.
    pub fn command_timeout(mut self, timeout: Duration) -> Builder {
        self.settings.command_timeout = timeout;
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
        self.settings.health_check = every;
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
        self.settings.replicas = n;
        self
    }

    /// How long a write waits for its [replicas](Builder::replicas).
    /// Default 1 s. Keep it below the
    /// [command timeout](Builder::command_timeout): a write whose `WAIT`
    /// outlasts that is [`Error::Timeout`], not `NotReplicated`.
    pub fn replica_timeout(mut self, timeout: Duration) -> Builder {
        self.settings.replica_timeout = timeout;
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
        self.settings.prefetch = jobs;
        self
    }

    /// Whether connecting may create the queue: record its name and
    /// partition count in the registry `ttr:queues` if none is recorded
    /// yet (default `true`). Tools that only look at queues (`ttr`) pass
    /// `false`, so that looking at a name never makes a queue appear.
    ///
    /// With `false`, [`connect`](Builder::connect) opens only a queue that
    /// exists, and fails with [`Error::NoSuchQueue`] otherwise: on Redis,
    /// one in the registry or with keys of its own (a queue no producer
    /// of this version registered; such a handle records it at its first
    /// successful schedule); on a `file://` store, one with a log. A
    /// registered queue with no jobs exists.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use tiered_timer_jobs::{Error, Queue};
    ///
    /// # async fn demo() -> Result<(), Error> {
    /// match Queue::builder("redis://127.0.0.1:6379/", "ordres").register(false).connect().await {
    ///     Ok(queue) => println!("{}", queue.stats().await?),
    ///     Err(Error::NoSuchQueue { queue }) => eprintln!("no queue named {queue}"),
    ///     Err(other) => return Err(other),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn register(mut self, register: bool) -> Builder {
        self.settings.register = register;
        self
    }

    /// Opens the queue to look at it, never to change it (default
    /// `false`): for tools such as `ttr` and dashboards. `file://` only
    /// ([`Error::Unsupported`] on Redis).
    ///
    /// The handle takes no lock and writes nothing: no directory, lock
    /// file or log is created (a queue or store that does not exist is
    /// [`Error::NoSuchQueue`]), and
    /// the end of the log is left as it is (a torn write is not read, a
    /// damaged last frame is not read and counts in
    /// [`Stats::damaged_frames`](crate::Stats::damaged_frames)). So it
    /// can look at a store that a running service holds. Each look
    /// (stats, counts, listings, [`Queue::job`], dead letters, lateness)
    /// first reads what the log gained since the last one; a compacted
    /// log is read again whole. Leases are not in the log (only claims):
    /// a job leased by a running service shows as leased, its lease run
    /// out at its claim, as a restart of that service would find it.
    ///
    /// Calls that would change the queue (schedule, `next`, ack, cancel,
    /// requeue, purge, promote...) fail with [`Error::ReadOnly`], changing
    /// nothing.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use tiered_timer_jobs::Queue;
    ///
    /// # async fn demo() -> Result<(), tiered_timer_jobs::Error> {
    /// // While the service that owns the store runs.
    /// let look = Queue::builder("file:///var/lib/shop/jobs", "orders")
    ///     .read_only(true)
    ///     .connect()
    ///     .await?;
    /// println!("{}", look.stats().await?);
    /// # Ok(())
    /// # }
    /// ```
    pub fn read_only(mut self, read_only: bool) -> Builder {
        self.settings.read_only = read_only;
        self
    }

    /// Spreads the queue over `n` hash tags (`{name#0}` .. `{name#n-1}`),
    /// so over the nodes of a Redis Cluster: a job's partition is a hash
    /// of its id modulo `n`. At most 1024. Redis only: other than 1 it is
    /// [`Error::Unsupported`] on a `file://` store.
    ///
    /// A queue's count is recorded in Redis by its first connect, and
    /// every handle uses that count. A handle that does not call this
    /// adopts it ([`Queue::partitions`] says which), so only the process
    /// that creates a queue needs to say how it is partitioned; a handle
    /// that asks for another count than the recorded one fails with
    /// [`Error::PartitionMismatch`] (its jobs would be under other hash
    /// tags). A new queue gets `n`, or 1 if this is not called. The
    /// registry is read and written in one script, so of two first
    /// connects one records its count and the other adopts it (or, if it
    /// asked for another, gets the mismatch).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), tiered_timer_jobs::Error> {
    /// use tiered_timer_jobs::Queue;
    /// let url = "redis://127.0.0.1:6379/";
    /// // The service that creates the queue says how it is partitioned...
    /// let producer = Queue::builder(url, "mail").partitions(8).connect().await?;
    /// // ... and any other handle adopts the count.
    /// let worker = Queue::connect(url, "mail").await?;
    /// assert_eq!(worker.partitions(), 8);
    /// # Ok(())
    /// # }
    /// ```
    pub fn partitions(mut self, n: u32) -> Builder {
        self.settings.partitions = Some(n);
        self
    }

    /// Connects to a Redis Cluster, with the URL as a seed node, instead of
    /// a single Redis. Redis only: [`Error::Unsupported`] on a `file://`
    /// store.
    pub fn cluster(mut self) -> Builder {
        self.settings.cluster = true;
        self
    }

    /// The wall clock an embedded (`file://`) store decides by: every due
    /// time, delay, lease and wake-up of its driver. Default
    /// [`Clock::system`]; a [`Clock::manual`] makes time stand still until
    /// the test moves it, which is how to test code that uses durable jobs
    /// (a job due in three days, a lease that runs out, a month of a daily
    /// [`Recurrence`](crate::Recurrence) across a daylight-saving change)
    /// in milliseconds of real time.
    ///
    /// A store is one per directory in a process: every handle on it must
    /// give the same clock ([`Error::InvalidConfig`] otherwise). Redis
    /// decides by its own `TIME`, which no client can move: a manual clock
    /// is [`Error::Unsupported`] there.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::time::{Duration, SystemTime};
    /// use tiered_timer_jobs::{Clock, Queue};
    ///
    /// # async fn demo() -> Result<(), tiered_timer_jobs::Error> {
    /// let clock = Clock::manual(SystemTime::now());
    /// let queue = Queue::builder("file:///tmp/jobs-test", "mail")
    ///     .clock(clock.clone())
    ///     .lease(Duration::from_secs(30))
    ///     .connect()
    ///     .await?;
    /// let job = { queue.schedule(Duration::ZERO, "hi").await?; queue.next().await? };
    /// clock.advance(Duration::from_secs(31)); // its lease ran out: delivered again
    /// assert_eq!(queue.next().await?.attempt(), 2);
    /// # drop(job);
    /// # Ok(())
    /// # }
    /// ```
    pub fn clock(mut self, clock: Clock) -> Builder {
        self.settings.clock = clock;
        self
    }

    /// Who this handle's claims are recorded as held by: a host or
    /// process name, shown with each attempt in a job's history
    /// ([`JobInfo::history`](crate::JobInfo::history)), as the holder of a
    /// leased job ([`JobInfo::holder`](crate::JobInfo::holder)), by
    /// `ttr job` and on the dashboard's job page. 1 to
    /// [`MAX_HOLDER`](crate::MAX_HOLDER) bytes without control characters
    /// ([`connect`](Builder::connect) checks it).
    ///
    /// Default: `hostname:pid` (the host's name from the kernel, or the
    /// `HOSTNAME` variable), which tells which machine and which process
    /// held a job that hung, the way Sidekiq names its processes. Give
    /// your own where that says less than you know: a pod's name, a
    /// worker's number.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), tiered_timer_jobs::Error> {
    /// let queue = tiered_timer_jobs::Queue::builder("file:///var/lib/shop/jobs", "orders")
    ///     .holder("billing-worker-3")
    ///     .connect()
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn holder(mut self, name: impl Into<String>) -> Builder {
        self.settings.holder = name.into();
        self
    }

    /// Checks the settings and connects.
    ///
    /// On its first connect, a queue records its partition count in Redis
    /// (the registry `ttr:queues`, see [`register`](Builder::register));
    /// every later handle uses the same (see
    /// [`partitions`](Builder::partitions)).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidUrl`], [`Error::InvalidQueueName`] or
    /// [`Error::InvalidConfig`] for bad settings;
    /// [`Error::PartitionMismatch`] if [`partitions`](Builder::partitions)
    /// asked for another count than the queue's;
    /// [`Error::NoSuchQueue`] with [`register(false)`](Builder::register)
    /// for a queue that does not exist; [`Error::Redis`] at once if the
    /// connection is refused, [`Error::Timeout`] if Redis does not answer
    /// within the command timeout.
    pub async fn connect(self) -> Result<Queue, Error> {
        let settings = self.settings;
        check(&settings)?;
        let backend = AnyBackend::open(&settings).await?;
        Ok(Queue {
            inner: Arc::new(Inner::new(settings, backend)),
        })
    }
}

/// The checks of the settings every backend shares, in the order they are
/// reported.
fn check(settings: &Settings) -> Result<(), Error> {
    crate::backends::check_url(&settings.url)?;
    check_queue_name(&settings.name)?;
    let invalid = |reason| Err(Error::InvalidConfig { reason });
    if settings.lease.is_zero() || millis_up(settings.lease) > MAX_SPAN_MS {
        return invalid(LEASE_RANGE);
    }
    if settings.max_attempts == 0 {
        return invalid("max_attempts must be at least 1");
    }
    if settings
        .partitions
        .is_some_and(|n| n == 0 || n > MAX_PARTITIONS)
    {
        return invalid("partitions must be between 1 and 1024");
    }
    if settings.command_timeout.is_zero() {
        return invalid("the command timeout must not be zero");
    }
    if settings.health_check < Duration::from_millis(100) {
        return invalid("the health check interval must be at least 100 ms");
    }
    if settings.replicas > 0 && settings.replica_timeout.is_zero() {
        return invalid("the replica timeout must not be zero");
    }
    if settings.prefetch > 1000 {
        return invalid("prefetch must be at most 1000");
    }
    check_holder(&settings.holder).or_else(invalid)
}
