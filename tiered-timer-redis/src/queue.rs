//! [`Queue`], its [`Builder`], and the claim loop of [`Queue::next`].
//!
//! Ground rules:
//!
//! * Redis owns every job's state; this process owns nothing but open
//!   leases' tokens (inside [`Job`]s) and the wake-up subscription. A
//!   process that dies loses nothing but its leases, which run out.
//! * Every call is one script or one read, wrapped in the command timeout;
//!   input is checked before anything is sent.
//! * [`Queue::next`] subscribes to wake-ups before it reads, sleeps only
//!   for durations Redis reported (never for a time computed from the
//!   local clock against Redis'), and after any doubt (a reconnect, a
//!   lagging receiver) reads again.
//! * [`Queue::close`] sets a flag shared by every clone and wakes the
//!   waiters; a `next` checks it before each claim round and after a
//!   claim (handing back a job claimed as the queue closed). The number of
//!   [`Job`]s out is counted in a `watch` channel so that
//!   [`Queue::shutdown`] can wait for it to reach zero.

use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use redis::aio::ConnectionManager;
use redis::cluster_async::ClusterConnection;
use redis::{FromRedisValue, Script, Value};
use tokio::sync::{broadcast, watch};
use tokio::time::Instant;

use crate::error::Error;
use crate::job::{Held, Job, JobId, LocalLease};
use crate::keys::{check_job_id, check_queue_name, partition_of, Keys};
use crate::scripts;
use crate::wake::{Subscriber, Wake};

/// The latest due time a job may have, in ms since the Unix epoch: 2^52,
/// well inside the range where a sorted set's `f64` score is exact.
pub(crate) const MAX_DEADLINE_MS: u64 = 1 << 52;

/// The most jobs one batched schedule script takes (see
/// [`Queue::schedule_many`]): a chunk of 1 000 small jobs holds Redis for
/// about 3 ms.
pub(crate) const CHUNK_JOBS: usize = 1_000;
/// About the most payload bytes one batched schedule script takes: a
/// chunk closes once it holds this much, however few jobs.
const CHUNK_BYTES: usize = 4 << 20;

/// The connection: one node through a reconnecting connection manager, or
/// a cluster.
#[derive(Clone)]
enum Conn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

/// What one claim attempt found.
enum Claim {
    Job(Job),
    /// Nothing claimable; something may be in this long (from Redis' now),
    /// or never (`None`) until a new job is scheduled.
    Wait(Option<Duration>),
}

/// The shared state behind every clone of a [`Queue`] and every [`Job`].
pub(crate) struct Inner {
    name: String,
    conn: Conn,
    pub(crate) partitions: Vec<Keys>,
    lease: Duration,
    pub(crate) max_attempts: u32,
    max_payload: usize,
    command_timeout: Duration,
    /// Where the next claim round starts, so partitions take turns.
    next_partition: AtomicU32,
    wake: broadcast::Sender<Wake>,
    /// Set once by [`Queue::close`].
    closed: AtomicBool,
    /// How many [`Job`]s of this queue are out (see the ground rules).
    held: watch::Sender<usize>,
    /// Set once this handle wrote the queue to the registry (`src/discover.rs`).
    pub(crate) registered: AtomicBool,
    _subscriber: Subscriber,
}

/// A durable queue of delayed jobs on Redis.
///
/// Cheap to clone (an `Arc`); clones share one connection and one pub/sub
/// subscription. Any number of processes may open the same queue (same
/// Redis, same name, same [`partitions`](Builder::partitions)): each due
/// job is delivered to exactly one of their [`next`](Queue::next) calls at a
/// time.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use tiered_timer_redis::Queue;
///
/// # async fn demo() -> Result<(), tiered_timer_redis::Error> {
/// let queue = Queue::connect("redis://127.0.0.1:6379/", "orders").await?;
/// queue.schedule_with_id("order-42", Duration::from_secs(1800), b"close order 42".to_vec()).await?;
///
/// let job = queue.next().await?; // sleeps until a job is due
/// println!("{}: {:?}", job.id(), job.payload());
/// job.ack().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Queue {
    pub(crate) inner: Arc<Inner>,
}

impl fmt::Debug for Queue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Queue")
            .field("name", &self.inner.name)
            .field("partitions", &self.inner.partitions.len())
            .field("lease", &self.inner.lease)
            .field("max_attempts", &self.inner.max_attempts)
            .finish_non_exhaustive()
    }
}

/// Settings for a [`Queue`], from [`Queue::builder`].
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use tiered_timer_redis::Queue;
///
/// # async fn demo() -> Result<(), tiered_timer_redis::Error> {
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
    url: String,
    name: String,
    lease: Duration,
    max_attempts: u32,
    max_payload: usize,
    command_timeout: Duration,
    partitions: u32,
    cluster: bool,
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
    /// (also the connect timeout). Default 5 s.
    pub fn command_timeout(mut self, timeout: Duration) -> Builder {
        self.command_timeout = timeout;
        self
    }

    /// Spreads the queue over `n` hash tags (`{name#0}` .. `{name#n-1}`),
    /// so over the nodes of a Redis Cluster. Every process using the queue
    /// must use the same `n`: a job's partition is a hash of its id modulo
    /// `n`. Default 1 (one tag, `{name}`). At most 1024.
    pub fn partitions(mut self, n: u32) -> Builder {
        self.partitions = n;
        self
    }

    /// Connects to a Redis Cluster, with the URL as a seed node, instead of
    /// a single Redis.
    pub fn cluster(mut self) -> Builder {
        self.cluster = true;
        self
    }

    /// Checks the settings and connects.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidUrl`], [`Error::InvalidQueueName`] or
    /// [`Error::InvalidConfig`] for bad settings; [`Error::Timeout`] or
    /// [`Error::Redis`] if Redis cannot be reached.
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
        let client = redis::Client::open(self.url.as_str()).map_err(|e| Error::InvalidUrl {
            reason: e.to_string(),
        })?;
        let timeout = self.command_timeout;
        let conn = if self.cluster {
            let cluster = redis::cluster::ClusterClient::builder(vec![self.url.as_str()])
                .connection_timeout(timeout)
                .response_timeout(timeout)
                .build()
                .map_err(|e| Error::InvalidUrl {
                    reason: e.to_string(),
                })?;
            Conn::Cluster(with_timeout(timeout, cluster.get_async_connection()).await?)
        } else {
            let config = redis::aio::ConnectionManagerConfig::new()
                .set_connection_timeout(Some(timeout))
                .set_response_timeout(Some(timeout))
                .set_max_delay(Duration::from_secs(1));
            Conn::Single(
                with_timeout(
                    timeout,
                    ConnectionManager::new_with_config(client.clone(), config),
                )
                .await?,
            )
        };
        let partitions: Vec<Keys> = (0..self.partitions)
            .map(|p| Keys::new(&self.name, p, self.partitions))
            .collect();
        let (wake, _) = broadcast::channel(1024);
        let channels = partitions.iter().map(|k| k.channel.clone()).collect();
        let subscriber =
            Subscriber::spawn(self.name.clone(), client, channels, wake.clone(), timeout);
        Ok(Queue {
            inner: Arc::new(Inner {
                name: self.name,
                conn,
                partitions,
                lease: self.lease,
                max_attempts: self.max_attempts,
                max_payload: self.max_payload,
                command_timeout: timeout,
                next_partition: AtomicU32::new(0),
                wake,
                closed: AtomicBool::new(false),
                held: watch::Sender::new(0),
                registered: AtomicBool::new(false),
                _subscriber: subscriber,
            }),
        })
    }
}

impl Queue {
    /// Connects to the queue `name` on the Redis at `url`, with the default
    /// settings (see [`Builder`]).
    ///
    /// # Errors
    ///
    /// As [`Builder::connect`].
    pub async fn connect(url: &str, name: &str) -> Result<Queue, Error> {
        Queue::builder(url, name).connect().await
    }

    /// Settings for the queue `name` on the Redis at `url`
    /// (`redis://host:port/db`, `rediss://`, `redis+unix://`).
    pub fn builder(url: &str, name: &str) -> Builder {
        Builder {
            url: url.to_owned(),
            name: name.to_owned(),
            lease: Duration::from_secs(30),
            max_attempts: 10,
            max_payload: 512 * 1024,
            command_timeout: Duration::from_secs(5),
            partitions: 1,
            cluster: false,
        }
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Schedules a job due `delay` from now, where "now" is Redis' clock
    /// when it receives the job, under a new random id.
    ///
    /// # Errors
    ///
    /// [`Error::PayloadTooLarge`]; [`Error::InvalidDeadline`] if `delay`
    /// is beyond 2^52 ms; [`Error::Timeout`] or [`Error::Redis`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, SystemTime};
    /// # use tiered_timer_redis::{JobId, Queue};
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_redis::Error> {
    /// let id = queue.schedule(Duration::from_secs(1800), b"close order 42".to_vec()).await?;
    /// println!("scheduled {id}");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn schedule(
        &self,
        delay: Duration,
        payload: impl Into<Vec<u8>>,
    ) -> Result<JobId, Error> {
        self.schedule_inner(random_id().into(), Due::After(delay), payload.into())
            .await
    }

    /// Schedules a job due at `at`, under a new random id. A time in the
    /// past makes the job due at once.
    ///
    /// `at` is read as a point on Redis' clock: a client whose clock is off
    /// by `e` gets its job `e` early or late relative to its own intent,
    /// but never before `at` by Redis' clock. Prefer
    /// [`schedule`](Queue::schedule) with a delay when clocks may differ.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidDeadline`] if `at` is before the Unix epoch or past
    /// 2^52 ms after it; otherwise as [`schedule`](Queue::schedule).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, SystemTime};
    /// # use tiered_timer_redis::{JobId, Queue};
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_redis::Error> {
    /// let at = SystemTime::now() + Duration::from_secs(60);
    /// queue.schedule_at(at, "remind the shop owner").await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn schedule_at(
        &self,
        at: SystemTime,
        payload: impl Into<Vec<u8>>,
    ) -> Result<JobId, Error> {
        self.schedule_inner(random_id().into(), Due::At(at), payload.into())
            .await
    }

    /// Schedules a job under your id, due `delay` from Redis' now; if a job
    /// with this id is already waiting or leased, changes nothing and
    /// returns the id. A producer that retries after a timeout therefore
    /// makes no duplicate. (A dead letter with this id is replaced.)
    ///
    /// # Errors
    ///
    /// [`Error::InvalidJobId`]; otherwise as [`schedule`](Queue::schedule).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, SystemTime};
    /// # use tiered_timer_redis::{JobId, Queue};
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_redis::Error> {
    /// let first = queue.schedule_with_id("order-42", Duration::from_secs(1800), "close").await?;
    /// // A retry after a timeout makes no duplicate.
    /// let again = queue.schedule_with_id("order-42", Duration::from_secs(1800), "close").await?;
    /// assert_eq!(first, again);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn schedule_with_id(
        &self,
        id: impl Into<JobId>,
        delay: Duration,
        payload: impl Into<Vec<u8>>,
    ) -> Result<JobId, Error> {
        self.schedule_inner(id.into(), Due::After(delay), payload.into())
            .await
    }

    /// Schedules many jobs under new random ids, each `(delay, payload)`,
    /// with every delay counted from one instant of Redis' clock. Returns
    /// their ids in order.
    ///
    /// The jobs go in chunks, each one script on its partition: at most
    /// 1 000 jobs (or about 4 MiB of payload) per script, so no single
    /// script holds Redis for long (a chunk of 1 000 small jobs runs in
    /// about 3 ms). Each chunk reads `TIME` once, writes all its jobs or
    /// none, and publishes at most one wake-up (only if one of its jobs is
    /// now the partition's earliest).
    ///
    /// "Now" is the same for the whole call: the first script reads
    /// Redis' `TIME` and every later chunk on the same Redis counts from
    /// that instant, so equal delays give equal due times and no job is
    /// due before the call plus its delay. (On a [cluster](Builder::cluster)
    /// each partition's first chunk reads its own node's clock instead,
    /// which is the one that decides whether its jobs are due.) As in
    /// [`schedule`](Queue::schedule), a delay is rounded up to the
    /// millisecond, and so is "now".
    ///
    /// Atomic per chunk, not per call: the input is checked in full before
    /// anything is sent (a bad job anywhere writes nothing), then the
    /// chunks run one after another, partition by partition. A call of at
    /// most 1 000 jobs on a queue of one partition is one script: all or
    /// nothing. On an error from Redis (a timeout, a lost connection) the
    /// chunks before the failing one are written, those after it are not
    /// sent, and the failing one may or may not have run; to retry such a
    /// call without duplicates, use
    /// [`schedule_many_with_ids`](Queue::schedule_many_with_ids).
    ///
    /// # Errors
    ///
    /// As [`schedule`](Queue::schedule), for any one of the jobs.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, SystemTime};
    /// # use tiered_timer_redis::{JobId, Queue};
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_redis::Error> {
    /// let ids = queue
    ///     .schedule_many((0..1000).map(|i| (Duration::from_secs(60), format!("job {i}"))))
    ///     .await?;
    /// assert_eq!(ids.len(), 1000); // all due at the same millisecond
    /// # Ok(())
    /// # }
    /// ```
    pub async fn schedule_many<P: Into<Vec<u8>>>(
        &self,
        jobs: impl IntoIterator<Item = (Duration, P)>,
    ) -> Result<Vec<JobId>, Error> {
        let jobs = jobs
            .into_iter()
            .map(|(delay, payload)| (JobId::from(random_id()), Due::After(delay), payload.into()));
        self.schedule_batch(jobs, true).await
    }

    /// Schedules many jobs under new random ids, each `(at, payload)`, due
    /// at those exact times (rounded up to the millisecond). Returns their
    /// ids in order.
    ///
    /// Each `at` is read on Redis' clock and converted as in
    /// [`schedule_at`](Queue::schedule_at) (a time in the past is due at
    /// once); the jobs go in chunks as in
    /// [`schedule_many`](Queue::schedule_many), with the same atomicity.
    /// This is the call for a producer that computes its own due times:
    /// how long the batch takes to send changes none of them.
    ///
    /// # Errors
    ///
    /// As [`schedule_at`](Queue::schedule_at), for any one of the jobs.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, SystemTime};
    /// # use tiered_timer_redis::{JobId, Queue};
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_redis::Error> {
    /// // One reminder a second for the next ten minutes.
    /// let start = SystemTime::now();
    /// let ids = queue
    ///     .schedule_many_at((1..=600).map(|s| (start + Duration::from_secs(s), "tick")))
    ///     .await?;
    /// assert_eq!(ids.len(), 600);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn schedule_many_at<P: Into<Vec<u8>>>(
        &self,
        jobs: impl IntoIterator<Item = (SystemTime, P)>,
    ) -> Result<Vec<JobId>, Error> {
        let jobs = jobs
            .into_iter()
            .map(|(at, payload)| (JobId::from(random_id()), Due::At(at), payload.into()));
        self.schedule_batch(jobs, false).await
    }

    /// Schedules many jobs under your ids, each `(id, delay, payload)`, as
    /// [`schedule_with_id`](Queue::schedule_with_id) would one by one: an
    /// id that is already waiting or leased, or that comes earlier in the
    /// same call, is left alone. Returns how many jobs were new.
    ///
    /// Delays count from one instant of Redis' clock, and the jobs go in
    /// chunks, as in [`schedule_many`](Queue::schedule_many). Being
    /// idempotent, the whole call can be repeated after an error (a
    /// timeout in the middle, say): what was written stays as it was, the
    /// rest is written.
    ///
    /// # Errors
    ///
    /// As [`schedule_with_id`](Queue::schedule_with_id), for any one of the
    /// jobs.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, SystemTime};
    /// # use tiered_timer_redis::{JobId, Queue};
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_redis::Error> {
    /// let close = |order: u32| (format!("close-{order}"), Duration::from_secs(1800), "close");
    /// assert_eq!(queue.schedule_many_with_ids((1..=100).map(close)).await?, 100);
    /// // Sent again (a retry after a timeout): nothing new.
    /// assert_eq!(queue.schedule_many_with_ids((1..=100).map(close)).await?, 0);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn schedule_many_with_ids<I: Into<JobId>, P: Into<Vec<u8>>>(
        &self,
        jobs: impl IntoIterator<Item = (I, Duration, P)>,
    ) -> Result<usize, Error> {
        let jobs = jobs
            .into_iter()
            .map(|(id, delay, payload)| (id.into(), Due::After(delay), payload.into()));
        let (_, written) = self.inner.schedule_chunks(jobs, true).await?;
        Ok(written)
    }

    /// The random-id batches: the ids in order.
    async fn schedule_batch(
        &self,
        jobs: impl Iterator<Item = (JobId, Due, Vec<u8>)>,
        delays: bool,
    ) -> Result<Vec<JobId>, Error> {
        let (ids, _) = self.inner.schedule_chunks(jobs, delays).await?;
        Ok(ids)
    }

    /// Checks one job and schedules it with one script on its partition.
    async fn schedule_inner(&self, id: JobId, due: Due, payload: Vec<u8>) -> Result<JobId, Error> {
        let (mode, value) = self.inner.checked_due(&id, due, &payload)?;
        let keys = self.inner.keys_of(&id);
        let args = vec![
            arg(id.as_str()),
            arg(mode),
            arg(&value.to_string()),
            payload,
            arg(&keys.channel),
        ];
        let _: (i64, i64) = self
            .inner
            .eval(&scripts::SCHEDULE_SCRIPT, keys, args)
            .await?;
        self.inner.register().await;
        Ok(id)
    }

    /// Cancels a waiting job. Returns `true` if it was waiting and will now
    /// never be delivered; `false` if it was leased (a delivered job cannot
    /// be cancelled), dead, done or unknown. Nothing changes on `false`.
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`] or [`Error::Redis`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, SystemTime};
    /// # use tiered_timer_redis::{JobId, Queue};
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_redis::Error> {
    /// let id = queue.schedule(Duration::from_secs(1800), "close").await?;
    /// assert!(queue.cancel(&id).await?); // paid: never delivered
    /// assert!(!queue.cancel(&id).await?);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn cancel(&self, id: &JobId) -> Result<bool, Error> {
        let keys = self.inner.keys_of(id);
        let removed: i64 = self
            .inner
            .eval(&scripts::CANCEL_SCRIPT, keys, vec![arg(id.as_str())])
            .await?;
        Ok(removed == 1)
    }

    /// How many jobs are waiting: scheduled, not leased, not dead. (A job
    /// whose lease ran out counts again once it is redelivered or buried.)
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`] or [`Error::Redis`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, SystemTime};
    /// # use tiered_timer_redis::{JobId, Queue};
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_redis::Error> {
    /// println!("{} jobs waiting", queue.pending().await?);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn pending(&self) -> Result<u64, Error> {
        let mut total = 0;
        for keys in &self.inner.partitions {
            let n: u64 = self
                .inner
                .query(redis::cmd("ZCARD").arg(keys.due()))
                .await?;
            total += n;
        }
        Ok(total)
    }

    /// How many jobs are leased to workers right now (including leases
    /// that ran out and have not been reclaimed yet).
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`] or [`Error::Redis`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, SystemTime};
    /// # use tiered_timer_redis::{JobId, Queue};
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_redis::Error> {
    /// println!("{} jobs being worked on", queue.leased().await?);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn leased(&self) -> Result<u64, Error> {
        let mut total = 0;
        for keys in &self.inner.partitions {
            let n: u64 = self
                .inner
                .query(redis::cmd("ZCARD").arg(keys.leased()))
                .await?;
            total += n;
        }
        Ok(total)
    }

    /// Stops handing out jobs, for a worker that is shutting down.
    ///
    /// From now on every [`next`](Queue::next) of this queue and its clones
    /// returns [`Error::Closed`]: waiting calls at once, later calls
    /// without asking Redis. Jobs already delivered are left to their
    /// workers, which may finish them (ack, retry, extend and release go on
    /// working), and any of them dropped unfinished from now on is
    /// [released](Job::release) at once instead of waiting out its lease.
    /// So a worker that drops its work on a signal hands the job straight
    /// to another worker. Scheduling and the other calls go on working.
    ///
    /// Only this process' handle is closed (this `Queue` and its clones):
    /// other processes and other `Queue`s on the same Redis queue go on.
    /// Closing twice changes nothing; a closed queue cannot be reopened
    /// (connect a new one).
    ///
    /// See [`shutdown`](Queue::shutdown) to also wait until every job out
    /// is finished or handed back.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tiered_timer_redis::{Error, Queue};
    /// # async fn demo(queue: Queue) -> Result<(), Error> {
    /// let worker = tokio::spawn({
    ///     let queue = queue.clone();
    ///     async move {
    ///         loop {
    ///             let job = match queue.next().await {
    ///                 Err(Error::Closed) => return, // shutting down
    ///                 other => other.expect("Redis is up"),
    ///             };
    ///             // ... work, then ack ...
    ///             let _ = job.ack().await;
    ///         }
    ///     }
    /// });
    /// tokio::signal::ctrl_c().await.expect("listen for Ctrl-C");
    /// queue.close();
    /// worker.abort(); // drops the job in hand, if any: it is released
    /// queue.shutdown().await; // waits for that release
    /// # Ok(())
    /// # }
    /// ```
    pub fn close(&self) {
        if !self.inner.closed.swap(true, Ordering::SeqCst) {
            tracing::info!(queue = %self.inner.name, "queue closed: no more jobs handed out");
            // Waiters re-check the flag; one that subscribes after this
            // send reads the flag after it was set.
            let _ = self.inner.wake.send(Wake::Reread);
        }
    }

    /// Whether [`close`](Queue::close) was called on this queue or a
    /// clone.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tiered_timer_redis::Queue;
    /// # async fn demo(queue: Queue) {
    /// assert!(!queue.is_closed());
    /// queue.close();
    /// assert!(queue.is_closed());
    /// # }
    /// ```
    pub fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// Closes the queue ([`close`](Queue::close)) and waits until every
    /// [`Job`] it handed out is finished: acked, retried, released, or
    /// dropped and then released (the release runs in a spawned task,
    /// which this call waits for).
    ///
    /// It waits for work in progress: put a timeout around it, and drop
    /// (abort) the work that has not finished in time, to hand those jobs
    /// back too. A release that fails (Redis unreachable) is reported as a
    /// `tracing` warning, and that job comes back when its lease runs out,
    /// as after a crash.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use tiered_timer_redis::Queue;
    /// # async fn demo(queue: Queue, workers: Vec<tokio::task::JoinHandle<()>>) {
    /// queue.close();
    /// // Ten seconds of grace for the jobs in hand, then drop them.
    /// if tokio::time::timeout(Duration::from_secs(10), queue.shutdown()).await.is_err() {
    ///     for worker in &workers {
    ///         worker.abort();
    ///     }
    ///     queue.shutdown().await; // the dropped jobs are released
    /// }
    /// # }
    /// ```
    pub async fn shutdown(&self) {
        self.close();
        let mut held = self.inner.held.subscribe();
        // `wait_for` only fails if the sender is gone; `self` keeps it.
        let _ = held.wait_for(|n| *n == 0).await;
    }

    /// Waits until a job is due, claims it under a lease, and returns it.
    ///
    /// Each round is one script per partition that either claims the
    /// earliest due job (or one whose lease ran out) or says how long until
    /// the next one is due; then this call sleeps on `tiered-timer` for
    /// exactly that long, and is woken sooner by the queue's pub/sub
    /// channel when an earlier job is scheduled. While nothing is due it
    /// sends no commands.
    ///
    /// Cancel-safe: dropping the future before it returns claims nothing
    /// (a claim made by the last round trip as it is dropped is lost to
    /// this worker and redelivered after the lease).
    ///
    /// # Errors
    ///
    /// [`Error::Closed`] once the queue was [closed](Queue::close), at
    /// once for a call that was waiting. [`Error::Timeout`] or
    /// [`Error::Redis`] when a claim cannot reach Redis; call again to go
    /// on waiting (the queue reconnects by itself).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, SystemTime};
    /// # use tiered_timer_redis::{JobId, Queue};
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_redis::Error> {
    /// loop {
    ///     let job = queue.next().await?;
    ///     println!("{} (attempt {})", job.id(), job.attempt());
    ///     job.ack().await?;
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn next(&self) -> Result<Job, Error> {
        loop {
            // Listen before reading: a job scheduled after the read below
            // is announced to this receiver (and so is `close`).
            let mut wake = self.inner.wake.subscribe();
            if self.is_closed() {
                return Err(Error::Closed);
            }
            let wait = match self.try_claim().await? {
                Claim::Job(job) if self.is_closed() => {
                    // Closed while the claim was in flight: hand it back.
                    let _ = job.release().await;
                    return Err(Error::Closed);
                }
                Claim::Job(job) => return Ok(job),
                Claim::Wait(wait) => wait,
            };
            let mut deadline = wait.map(|wait| Instant::now() + wait);
            let mut sleep = deadline.map(tiered_timer::sleep_until);
            loop {
                let slept = async {
                    match sleep.as_mut() {
                        Some(sleep) => sleep.await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    () = slept => break,
                    message = wake.recv() => match message {
                        Ok(Wake::At(at)) => {
                            if deadline.is_none_or(|deadline| at < deadline) {
                                deadline = Some(at);
                                match sleep.as_mut() {
                                    Some(sleep) => std::pin::Pin::new(sleep).reset(at),
                                    None => sleep = Some(tiered_timer::sleep_until(at)),
                                }
                            }
                        }
                        // A reconnect or a missed message: read again.
                        Ok(Wake::Reread) | Err(_) => break,
                    },
                }
            }
        }
    }

    /// One claim round over every partition, starting where the last round
    /// of this queue left off.
    async fn try_claim(&self) -> Result<Claim, Error> {
        let inner = &self.inner;
        let n = inner.partitions.len() as u32;
        let start = inner.next_partition.fetch_add(1, Ordering::Relaxed) % n;
        let mut soonest: Option<Duration> = None;
        for i in 0..n {
            let p = (start + i) % n;
            match inner.claim(&self.inner, p).await? {
                Claim::Job(job) => return Ok(Claim::Job(job)),
                Claim::Wait(Some(wait)) => {
                    soonest = Some(soonest.map_or(wait, |s| s.min(wait)));
                }
                Claim::Wait(None) => {}
            }
        }
        Ok(Claim::Wait(soonest))
    }
}

/// When a job is due.
#[derive(Clone, Copy)]
enum Due {
    After(Duration),
    At(SystemTime),
}

impl Inner {
    pub(crate) fn keys_of(&self, id: &JobId) -> &Keys {
        let p = partition_of(id.as_str(), self.partitions.len() as u32);
        &self.partitions[p as usize]
    }

    /// Checks a job; returns how its due time goes to the scripts: a
    /// delay (`d`) or an absolute due time (`a`), in ms.
    fn checked_due(
        &self,
        id: &JobId,
        due: Due,
        payload: &[u8],
    ) -> Result<(&'static str, u64), Error> {
        check_job_id(id.as_str())?;
        if payload.len() > self.max_payload {
            return Err(Error::PayloadTooLarge {
                len: payload.len(),
                limit: self.max_payload,
            });
        }
        let (mode, value) = match due {
            Due::After(delay) => ("d", millis_up(delay)),
            Due::At(at) => (
                "a",
                at.duration_since(SystemTime::UNIX_EPOCH)
                    .map(millis_up)
                    .map_err(|_| Error::InvalidDeadline)?,
            ),
        };
        // A delay is added to Redis' now (about 2^40.6 ms today): keep the
        // sum under 2^52 with a margin of centuries.
        let limit = if mode == "d" {
            MAX_DEADLINE_MS / 2
        } else {
            MAX_DEADLINE_MS
        };
        if value > limit {
            return Err(Error::InvalidDeadline);
        }
        Ok((mode, value))
    }

    /// Checks every job, then schedules them in chunks of one partition,
    /// one script each (see [`Queue::schedule_many`]). `delays`: every
    /// job's due time is a [`Due::After`], else a [`Due::At`]. Returns the
    /// ids in order and how many jobs were new.
    async fn schedule_chunks(
        &self,
        jobs: impl Iterator<Item = (JobId, Due, Vec<u8>)>,
        delays: bool,
    ) -> Result<(Vec<JobId>, usize), Error> {
        let n = self.partitions.len() as u32;
        let mut ids = Vec::new();
        let mut by_partition: Vec<Vec<(usize, u64, Vec<u8>)>> = vec![Vec::new(); n as usize];
        for (id, due, payload) in jobs {
            let (_, value) = self.checked_due(&id, due, &payload)?;
            by_partition[partition_of(id.as_str(), n) as usize].push((ids.len(), value, payload));
            ids.push(id);
        }
        // One "now" per clock: on a single Redis every chunk counts its
        // delays from the first script's `TIME`; on a cluster, each
        // partition from its own node's (the clock that decides when its
        // jobs are due).
        let one_clock = matches!(self.conn, Conn::Single(_));
        let mode = if delays { "d" } else { "a" };
        let mut base: Option<u64> = None;
        let mut written = 0;
        for (keys, jobs) in self.partitions.iter().zip(by_partition) {
            if !one_clock {
                base = None;
            }
            let mut jobs = jobs.into_iter().peekable();
            while jobs.peek().is_some() {
                let base_arg = base.map_or_else(Vec::new, |ms| arg(&ms.to_string()));
                let mut args = vec![arg(&keys.channel), arg(mode), base_arg];
                let mut bytes = 0;
                for (index, value, payload) in jobs.by_ref() {
                    bytes += payload.len();
                    args.extend([arg(ids[index].as_str()), arg(&value.to_string()), payload]);
                    if args.len() >= 3 * (CHUNK_JOBS + 1) || bytes >= CHUNK_BYTES {
                        break;
                    }
                }
                let (new, used_base): (usize, u64) = self
                    .eval(&scripts::SCHEDULE_MANY_SCRIPT, keys, args)
                    .await?;
                written += new;
                base.get_or_insert(used_base);
            }
        }
        if !ids.is_empty() {
            self.register().await;
        }
        Ok((ids, written))
    }

    async fn claim(&self, this: &Arc<Inner>, partition: u32) -> Result<Claim, Error> {
        let keys = &self.partitions[partition as usize];
        let token = random_id();
        let lease_ms = millis_up(self.lease);
        // The lease starts no earlier than this, by the local clock.
        let sent = Instant::now();
        let reply: Vec<Value> = self
            .eval(
                &scripts::CLAIM_SCRIPT,
                keys,
                vec![
                    arg(&lease_ms.to_string()),
                    arg(&self.max_attempts.to_string()),
                    arg(&token),
                ],
            )
            .await?;
        let mut fields = reply.into_iter();
        let kind: i64 = parse(fields.next())?;
        if kind == 0 {
            let wait: i64 = parse(fields.next())?;
            self.trace_buried(partition, fields.next());
            return Ok(Claim::Wait(
                u64::try_from(wait).ok().map(Duration::from_millis),
            ));
        }
        let id = JobId::from(parse::<String>(fields.next())?);
        let payload: Vec<u8> = parse(fields.next())?;
        let deadline_ms: u64 = parse(fields.next())?;
        let attempt: u32 = parse(fields.next())?;
        let expiry: u64 = parse(fields.next())?;
        let expired: i64 = parse(fields.next()).unwrap_or(0);
        self.trace_buried(partition, fields.next());
        if expired == 1 {
            tracing::warn!(queue = %self.name, job = %id, attempt, partition, "job redelivered: its last lease ran out before an ack");
        } else {
            tracing::debug!(queue = %self.name, job = %id, attempt, partition, "job claimed");
        }
        crate::metrics::claimed(
            &self.name,
            crate::metrics::claim_lateness(expired == 1, expiry, lease_ms, deadline_ms),
        );
        let lease = Duration::from_millis(lease_ms);
        Ok(Claim::Job(Job {
            inner: Arc::clone(this),
            partition,
            id,
            payload,
            deadline_ms,
            attempt,
            token,
            lease,
            local_lease: std::sync::Mutex::new(LocalLease {
                sent,
                length: lease,
            }),
            held: Some(Held::new(this)),
            finished: false,
        }))
    }

    /// Emits a dead-letter event for each id the claim script buried.
    fn trace_buried(&self, partition: u32, buried: Option<Value>) {
        if let Ok(ids) = parse::<Vec<String>>(buried) {
            for id in ids {
                tracing::warn!(queue = %self.name, job = %id, attempts = self.max_attempts, partition, "job moved to the dead letters: its last lease ran out");
                crate::metrics::dead_lettered(&self.name);
            }
        }
    }

    pub(crate) async fn ack(&self, partition: u32, id: &JobId, token: &str) -> Result<bool, Error> {
        let keys = &self.partitions[partition as usize];
        let done: i64 = self
            .eval(
                &scripts::ACK_SCRIPT,
                keys,
                vec![arg(id.as_str()), arg(token)],
            )
            .await?;
        Ok(done == 1)
    }

    /// Runs the retry script: 1 rescheduled, 2 buried (it was the last
    /// attempt), 0 lease lost.
    pub(crate) async fn retry(
        &self,
        partition: u32,
        id: &JobId,
        token: &str,
        delay: Duration,
    ) -> Result<i64, Error> {
        let delay = millis_up(delay);
        if delay > MAX_DEADLINE_MS / 2 {
            return Err(Error::InvalidDeadline);
        }
        let keys = &self.partitions[partition as usize];
        let done: i64 = self
            .eval(
                &scripts::RETRY_SCRIPT,
                keys,
                vec![
                    arg(id.as_str()),
                    arg(token),
                    arg(&delay.to_string()),
                    arg(&self.max_attempts.to_string()),
                    arg(&keys.channel),
                ],
            )
            .await?;
        if done == 2 {
            tracing::warn!(queue = %self.name, job = %id, attempts = self.max_attempts, "job moved to the dead letters: retried on its last attempt");
            crate::metrics::dead_lettered(&self.name);
        }
        Ok(done)
    }

    /// The queue's name, for events.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// One more (`+1`) or one fewer (`-1`) job out.
    pub(crate) fn held_changed(&self, by: isize) {
        self.held.send_modify(|n| *n = n.saturating_add_signed(by));
    }

    /// Renews a lease (see [`Job::extend_lease`]); `false` if it was lost.
    pub(crate) async fn extend(
        &self,
        partition: u32,
        id: &JobId,
        token: &str,
        lease_ms: u64,
    ) -> Result<bool, Error> {
        let keys = &self.partitions[partition as usize];
        let expiry: i64 = self
            .eval(
                &scripts::EXTEND_SCRIPT,
                keys,
                vec![arg(id.as_str()), arg(token), arg(&lease_ms.to_string())],
            )
            .await?;
        Ok(expiry != 0)
    }

    /// Hands a held job back (see [`Job::release`]); `false` if the lease
    /// was lost.
    pub(crate) async fn release(
        &self,
        partition: u32,
        id: &JobId,
        token: &str,
    ) -> Result<bool, Error> {
        let keys = &self.partitions[partition as usize];
        let done: i64 = self
            .eval(
                &scripts::RELEASE_SCRIPT,
                keys,
                vec![arg(id.as_str()), arg(token), arg(&keys.channel)],
            )
            .await?;
        Ok(done == 1)
    }

    /// Runs a script on a partition's keys, within the command timeout.
    pub(crate) async fn eval<T: FromRedisValue>(
        &self,
        script: &Script,
        keys: &Keys,
        args: Vec<Vec<u8>>,
    ) -> Result<T, Error> {
        let mut invocation = script.prepare_invoke();
        for key in &keys.ordered {
            invocation.key(key);
        }
        for a in args {
            invocation.arg(a);
        }
        let run = async {
            match self.conn.clone() {
                Conn::Single(mut conn) => invocation.invoke_async(&mut conn).await,
                Conn::Cluster(mut conn) => invocation.invoke_async(&mut conn).await,
            }
        };
        with_timeout(self.command_timeout, run).await
    }

    /// Runs one plain command within the command timeout.
    pub(crate) async fn query<T: FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T, Error> {
        let run = async {
            match self.conn.clone() {
                Conn::Single(mut conn) => cmd.query_async(&mut conn).await,
                Conn::Cluster(mut conn) => cmd.query_async(&mut conn).await,
            }
        };
        with_timeout(self.command_timeout, run).await
    }
}

/// Runs a Redis call within `timeout`. A timeout is [`Error::Timeout`]
/// whether our timer or the `redis` crate's response timeout (set to the
/// same value) noticed it first.
async fn with_timeout<T>(
    timeout: Duration,
    future: impl std::future::Future<Output = redis::RedisResult<T>>,
) -> Result<T, Error> {
    match tiered_timer::timeout(timeout, future).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) if error.is_timeout() => Err(Error::Timeout { after: timeout }),
        Ok(Err(error)) => Err(Error::Redis(error)),
        Err(_) => Err(Error::Timeout { after: timeout }),
    }
}

pub(crate) fn parse<T: FromRedisValue>(value: Option<Value>) -> Result<T, Error> {
    let value = value.unwrap_or(Value::Nil);
    redis::from_redis_value(value).map_err(|e| Error::Redis(e.into()))
}

pub(crate) fn arg(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

/// A duration in whole milliseconds, rounded up (never early).
pub(crate) fn millis_up(d: Duration) -> u64 {
    let ms = d.as_millis() + u128::from(d.subsec_nanos() % 1_000_000 != 0);
    u64::try_from(ms).unwrap_or(u64::MAX)
}

/// 128 random bits as 32 hex digits: a job id or a lease token. Random
/// keys per process (std's `RandomState`, seeded by the OS) hashing a
/// process-wide counter.
pub(crate) fn random_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut first = RandomState::new().build_hasher();
    first.write_u64(n);
    let a = first.finish();
    let mut second = RandomState::new().build_hasher();
    second.write_u64(n);
    second.write_u64(a);
    format!("{a:016x}{:016x}", second.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn millis_round_up() {
        assert_eq!(millis_up(Duration::ZERO), 0);
        assert_eq!(millis_up(Duration::from_micros(1)), 1);
        assert_eq!(millis_up(Duration::from_millis(5)), 5);
        assert_eq!(millis_up(Duration::from_micros(5001)), 6);
        assert_eq!(millis_up(Duration::MAX), u64::MAX);
    }

    #[test]
    fn random_ids_differ() {
        let ids: std::collections::HashSet<String> = (0..10_000).map(|_| random_id()).collect();
        assert_eq!(ids.len(), 10_000);
        assert!(ids.iter().all(|id| id.len() == 32));
    }
}
