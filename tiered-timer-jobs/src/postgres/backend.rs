//! [`PostgresBackend`]: the backend contract (`src/contract.rs`) on a
//! Postgres schema (`schema.rs`), one statement per call (`sql.rs`), and
//! waiting without polling (`wake.rs`).
//!
//! Ground rules: the table owns every job's state; a handle owns its
//! pool, its listener task, its closed flag and its claimers' turn. Every
//! change is one autocommitted statement (durable as the server's
//! `synchronous_commit` says: on by default) before the call returns. The
//! answers are the Redis backend's, one for one.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgRow};
use sqlx::{ConnectOptions, Connection, Row};
use tiered_timer::Instant;
use tokio::sync::Notify;

use super::schema;
use super::sql::Sql;
use super::wake::{self, Listening, Wake};
use crate::contract::{
    AckAndClaim, Backend, Claimed, Failure, GaveUp, Lease, LeaseToken, NewJob, NewRecurrence,
    Settings,
};
use crate::data::error::Error;
use crate::data::history::{history, Outcome, StoredAttempt, Throughput};
use crate::data::id::JobId;
use crate::data::lateness::Lateness;
use crate::data::limits::{at_ms, CHUNK_BYTES, CHUNK_JOBS};
use crate::data::listing::{JobInfo, JobState, JobSummary, Listing, Page, QueueInfo, PREVIEW};
use crate::data::recurrence::RecurrenceInfo;
use crate::data::stats::{Counts, DeadLetter, Stats};
use crate::targets;

/// Dead letters per statement of `requeue_all`, `purge_all` and
/// `dead_letters`.
const BATCH: i64 = 1_000;

/// Connections per handle: its claimers and calls, and its listener.
const POOL_SIZE: u32 = 10;

/// A Postgres queue handle.
pub(crate) struct PostgresBackend {
    pub(super) shared: Arc<Shared>,
    /// The claimers of this handle take turns: one claim query per wake-up.
    turn: tokio::sync::Mutex<()>,
    /// Set by `close`: claims fail with [`Error::Closed`].
    closed: AtomicBool,
    /// The listener task, started by the first claim.
    listener: OnceLock<()>,
}

/// What a handle's calls and its background tasks share.
pub(crate) struct Shared {
    pub(super) pool: PgPool,
    pub(super) sql: Sql,
    pub(super) name: String,
    pub(super) channel: String,
    pub(super) lease_ms: u64,
    max_attempts: u32,
    /// Who this handle's claims are recorded as held by.
    pub(super) holder: String,
    pub(super) timeout: Duration,
    health_check: Duration,
    pub(super) wake: Arc<Wake>,
    /// Ends the listener task when the handle is dropped.
    stop: Arc<Notify>,
}

impl Drop for PostgresBackend {
    fn drop(&mut self) {
        self.shared.stop.notify_one();
    }
}

/// The connection options of a URL (without its `schema` parameter),
/// statements logged at debug level only (sqlx logs each at info).
fn options(url: &str) -> Result<PgConnectOptions, Error> {
    let options: PgConnectOptions = url.parse().map_err(|_| Error::InvalidUrl {
        reason: "not a Postgres URL sqlx can connect to".to_owned(),
    })?;
    Ok(options
        .log_statements(tracing::log::LevelFilter::Debug)
        .log_slow_statements(tracing::log::LevelFilter::Debug, Duration::from_secs(1)))
}

/// A sqlx error as the crate's: a pool that found no connection in time
/// is a timeout.
pub(super) fn pg(error: sqlx::Error, timeout: Duration) -> Error {
    match error {
        sqlx::Error::PoolTimedOut => Error::Timeout { after: timeout },
        other => Error::Postgres(other),
    }
}

/// The token of a lease this backend granted (a number from the
/// sequence; anything else holds no lease: 0 is never a token).
pub(super) fn number(token: &LeaseToken) -> i64 {
    match token {
        LeaseToken::Number(n) => i64::try_from(*n).unwrap_or(0),
        LeaseToken::Text(_) => 0,
    }
}

/// Milliseconds as Postgres' `bigint` (every checked value fits).
pub(super) fn ms(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// A `bigint` time or count read back (never negative here).
fn unsigned(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

impl Shared {
    /// Runs `query` within the command timeout.
    async fn run<T>(
        &self,
        query: impl Future<Output = Result<T, sqlx::Error>>,
    ) -> Result<T, Error> {
        match tiered_timer::timeout(self.timeout, query).await {
            Ok(done) => done.map_err(|error| pg(error, self.timeout)),
            Err(_) => Err(Error::Timeout {
                after: self.timeout,
            }),
        }
    }

    /// One claim statement: the jobs, the database's now, its next event.
    async fn claim(&self, max: usize) -> Result<ClaimReply, Error> {
        let rows = self
            .run(
                sqlx::query(&self.sql.claim)
                    .bind(&self.name)
                    .bind(i64::try_from(max).unwrap_or(i64::MAX))
                    .bind(ms(self.lease_ms))
                    .bind(i32::try_from(self.max_attempts).unwrap_or(i32::MAX))
                    .bind(&self.holder)
                    .fetch_all(&self.pool),
            )
            .await?;
        let mut reply =
            ClaimReply::read(&rows, self.lease_ms).map_err(|error| pg(error, self.timeout))?;
        // A recurrence's occurrence is due: its claim is a transaction of
        // its own (`recur.rs`). Its failure does not fail the jobs already
        // leased above; the occurrence stays due for the next claim.
        if reply.occurrence_due && reply.jobs.len() < max {
            match self.claim_occurrences(max - reply.jobs.len()).await {
                Ok(more) => reply.jobs.extend(more),
                Err(error) => {
                    tracing::warn!(target: targets::POSTGRES, queue = %self.name, %error, "could not claim a recurrence's occurrence; the next claim tries again");
                }
            }
        }
        Ok(reply)
    }

    /// Hands a job back under its lease: due now, the attempt not
    /// counted. `false` if the lease was lost.
    pub(super) async fn release(&self, id: &str, token: i64) -> Result<bool, Error> {
        let row = self
            .run(
                sqlx::query(&self.sql.release)
                    .bind(&self.name)
                    .bind(id)
                    .bind(token)
                    .bind(&self.channel)
                    .fetch_optional(&self.pool),
            )
            .await?;
        Ok(row.is_some())
    }
}

/// What a claim statement answered.
struct ClaimReply {
    now_ms: u64,
    next_ms: Option<u64>,
    buried: Vec<String>,
    jobs: Vec<Claimed>,
    /// A recurrence's waiting occurrence is due (the statement passed it
    /// over).
    occurrence_due: bool,
}

impl ClaimReply {
    fn read(rows: &[PgRow], lease_ms: u64) -> Result<ClaimReply, sqlx::Error> {
        let sent = Instant::now();
        let first = rows
            .first()
            .ok_or_else(|| sqlx::Error::Protocol("a claim returned no row".to_owned()))?;
        let now_ms = unsigned(first.try_get(0)?);
        let next_ms = first.try_get::<Option<i64>, _>(1)?.map(unsigned);
        let buried: Vec<String> = first.try_get(2)?;
        let occurrence_due: bool = first.try_get(9)?;
        let mut jobs = Vec::with_capacity(rows.len());
        for row in rows {
            let Some(id) = row.try_get::<Option<String>, _>(3)? else {
                continue;
            };
            jobs.push(Claimed {
                partition: 0,
                id: JobId::from(id),
                payload: row.try_get(4)?,
                deadline_ms: unsigned(row.try_get(5)?),
                attempt: u32::try_from(row.try_get::<i32, _>(6)?).unwrap_or(0),
                token: LeaseToken::Number(unsigned(row.try_get(7)?)),
                lease: Duration::from_millis(lease_ms),
                sent,
                expired: row.try_get(8)?,
                claimed_ms: now_ms,
            });
        }
        Ok(ClaimReply {
            now_ms,
            next_ms,
            buried,
            jobs,
            occurrence_due,
        })
    }
}

impl Backend for PostgresBackend {
    fn check_url(url: &str) -> Result<(), Error> {
        schema::split_url(url).map(|_| ())
    }

    async fn open(settings: &Settings) -> Result<PostgresBackend, Error> {
        let (url, schema) = schema::split_url(&settings.url)?;
        let timeout = settings.command_timeout;
        let connecting = PgPoolOptions::new()
            .max_connections(POOL_SIZE)
            .acquire_timeout(timeout)
            // Errors are reported by the call that meets them; a ping
            // before every statement would double the round trips.
            .test_before_acquire(false)
            .connect_with(options(&url)?);
        let pool = match tiered_timer::timeout(timeout, connecting).await {
            Ok(pool) => pool.map_err(|error| pg(error, timeout))?,
            Err(_) => return Err(Error::Timeout { after: timeout }),
        };
        let sql = Sql::new(&schema);
        let name = settings.name.clone();
        let prepare = async {
            let mut conn = pool.acquire().await.map_err(|e| pg(e, timeout))?;
            if settings.register {
                schema::migrate(&mut conn, &schema).await?;
                sqlx::query(&sql.register)
                    .bind(&name)
                    .execute(&mut *conn)
                    .await
                    .map_err(Error::Postgres)?;
            } else {
                let exists = schema::check(&mut conn, &schema).await?
                    && sqlx::query(&sql.exists)
                        .bind(&name)
                        .fetch_one(&mut *conn)
                        .await
                        .map_err(Error::Postgres)?
                        .get::<bool, _>(0);
                if !exists {
                    return Err(Error::NoSuchQueue {
                        queue: name.clone(),
                    });
                }
            }
            Ok(())
        };
        match tiered_timer::timeout(timeout, prepare).await {
            Ok(done) => done?,
            Err(_) => return Err(Error::Timeout { after: timeout }),
        }
        Ok(PostgresBackend {
            shared: Arc::new(Shared {
                pool,
                channel: schema::channel(&schema, &name),
                sql,
                name,
                lease_ms: settings.lease_ms(),
                max_attempts: settings.max_attempts,
                holder: settings.holder.clone(),
                timeout,
                health_check: settings.health_check,
                wake: Arc::new(Wake::new()),
                stop: Arc::new(Notify::new()),
            }),
            turn: tokio::sync::Mutex::new(()),
            closed: AtomicBool::new(false),
            listener: OnceLock::new(),
        })
    }

    /// The queues created in the URL's schema, read without writing
    /// anything (none if the schema was never created).
    async fn find_queues(
        url: &str,
        _cluster: bool,
        timeout: Duration,
    ) -> Result<Vec<QueueInfo>, Error> {
        let (url, schema) = schema::split_url(url)?;
        let options = options(&url)?;
        let look = async {
            let mut conn = options.connect().await.map_err(Error::Postgres)?;
            if !schema::check(&mut conn, &schema).await? {
                return Ok(Vec::new());
            }
            let rows = sqlx::query(&Sql::new(&schema).queues)
                .fetch_all(&mut conn)
                .await
                .map_err(Error::Postgres)?;
            let _ = conn.close().await;
            rows.iter()
                .map(|row| {
                    Ok(QueueInfo {
                        name: row.try_get(0).map_err(Error::Postgres)?,
                        partitions: 1,
                        registered: true,
                    })
                })
                .collect()
        };
        match tiered_timer::timeout(timeout, look).await {
            Ok(found) => found,
            Err(_) => Err(Error::Timeout { after: timeout }),
        }
    }

    fn partitions(&self) -> u32 {
        1
    }

    async fn schedule(&self, job: NewJob) -> Result<(), Error> {
        let s = &self.shared;
        s.run(schedule_query(s, &job).fetch_optional(&s.pool))
            .await?;
        Ok(())
    }

    /// In chunks as on Redis, each one statement (all or nothing); every
    /// delay counts from the first chunk's now.
    async fn schedule_many(&self, jobs: Vec<NewJob>) -> Result<usize, Error> {
        let s = &self.shared;
        let delays = jobs.first().is_some_and(|job| job.due.is_delay());
        let mut base: Option<i64> = None;
        let mut written = 0;
        let mut rest = &jobs[..];
        while !rest.is_empty() {
            let (chunk, later) = rest.split_at(chunk_len(rest));
            let ids: Vec<&str> = chunk.iter().map(|job| job.id.as_str()).collect();
            let values: Vec<i64> = chunk.iter().map(|job| ms(job.due.ms())).collect();
            let payloads: Vec<&[u8]> = chunk.iter().map(|job| job.payload.as_slice()).collect();
            let row = s
                .run(
                    sqlx::query(&s.sql.schedule_many)
                        .bind(&s.name)
                        .bind(ids)
                        .bind(delays)
                        .bind(values)
                        .bind(payloads)
                        .bind(&s.channel)
                        .bind(base)
                        .fetch_one(&s.pool),
                )
                .await?;
            let new: i64 = row.try_get(0).map_err(Error::Postgres)?;
            written += usize::try_from(new).unwrap_or(0);
            base = Some(row.try_get(1).map_err(Error::Postgres)?);
            rest = later;
        }
        Ok(written)
    }

    async fn cancel(&self, id: &JobId) -> Result<bool, Error> {
        let s = &self.shared;
        let done = s
            .run(
                sqlx::query(&s.sql.cancel)
                    .bind(&s.name)
                    .bind(id.as_str())
                    .execute(&s.pool),
            )
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Takes its turn among the handle's claimers, sleeps until the next
    /// event the last claim (or a notification) named, then claims; see
    /// `wake.rs`.
    async fn claim(&self, max: usize) -> Result<Vec<Claimed>, Error> {
        self.start_listener();
        let wake = &self.shared.wake;
        loop {
            let _turn = tokio::select! {
                turn = self.turn.lock() => turn,
                () = self.until_closed() => return Err(Error::Closed),
            };
            self.until_due().await?;
            wake.sending();
            let reply = match self.claim_once(max).await {
                Ok(reply) => reply,
                Err(error) => {
                    wake.failed();
                    tracing::warn!(target: targets::POSTGRES, queue = %self.shared.name, %error, "claim failed");
                    return Err(error);
                }
            };
            wake.claimed(reply.now_ms, reply.next_ms, !reply.jobs.is_empty());
            for id in &reply.buried {
                tracing::warn!(target: targets::JOB, queue = %self.shared.name, job = %id, attempts = self.shared.max_attempts, "job moved to the dead letters: its lease ran out on its last attempt");
                crate::metrics::dead_lettered(&self.shared.name);
            }
            if !reply.jobs.is_empty() {
                return Ok(reply.jobs);
            }
        }
    }

    /// Nothing is claimed ahead.
    fn take_claimed(&self) -> Option<Claimed> {
        None
    }

    /// Jobs claimed for a caller that cannot take them are released at
    /// once (their attempt not counted).
    fn give_back(&self, jobs: Vec<Claimed>) {
        release_later(Arc::clone(&self.shared), jobs);
    }

    /// An ack, then no claim: the caller claims as `claim` does.
    async fn ack_and_claim(&self, lease: Lease<'_>) -> Result<AckAndClaim, Error> {
        Ok(AckAndClaim {
            acked: self.ack(lease).await?,
            replicated: Ok(()),
            jobs: Vec::new(),
        })
    }

    fn close(&self) -> Vec<Claimed> {
        self.closed.store(true, Ordering::SeqCst);
        self.shared.wake.now();
        Vec::new()
    }

    async fn ack(&self, lease: Lease<'_>) -> Result<bool, Error> {
        let s = &self.shared;
        let row = s.run(ack_query(s, lease).fetch_one(&s.pool)).await?;
        acked(&row).map_err(Error::Postgres)
    }

    /// All in one statement.
    async fn ack_many(
        &self,
        _partition: u32,
        leases: &[(JobId, LeaseToken)],
    ) -> Result<Vec<JobId>, Error> {
        let s = &self.shared;
        let ids: Vec<&str> = leases.iter().map(|(id, _)| id.as_str()).collect();
        let tokens: Vec<i64> = leases.iter().map(|(_, token)| number(token)).collect();
        let rows = s
            .run(
                sqlx::query(&s.sql.ack_many)
                    .bind(&s.name)
                    .bind(ids)
                    .bind(tokens)
                    .fetch_all(&s.pool),
            )
            .await?;
        let acked: std::collections::HashSet<String> = rows
            .iter()
            .filter_map(|row| row.try_get::<String, _>(0).ok())
            .collect();
        Ok(leases
            .iter()
            .filter(|(id, _)| !acked.contains(id.as_str()))
            .map(|(id, _)| id.clone())
            .collect())
    }

    async fn retry(&self, lease: Lease<'_>, delay_ms: u64) -> Result<GaveUp, Error> {
        self.give_up(lease, false, delay_ms, None).await
    }

    async fn fail(
        &self,
        lease: Lease<'_>,
        failure: Failure,
        reason: &str,
    ) -> Result<GaveUp, Error> {
        match failure {
            Failure::Retry(delay_ms) => self.give_up(lease, false, delay_ms, Some(reason)).await,
            Failure::Bury => self.give_up(lease, true, 0, Some(reason)).await,
        }
    }

    async fn extend(&self, lease: Lease<'_>, lease_ms: u64) -> Result<bool, Error> {
        let s = &self.shared;
        let row = s
            .run(
                sqlx::query(&s.sql.extend)
                    .bind(&s.name)
                    .bind(lease.id.as_str())
                    .bind(number(lease.token))
                    .bind(ms(lease_ms))
                    .bind(&s.channel)
                    .fetch_optional(&s.pool),
            )
            .await?;
        Ok(row.is_some())
    }

    async fn release(&self, lease: Lease<'_>) -> Result<bool, Error> {
        self.shared
            .release(lease.id.as_str(), number(lease.token))
            .await
    }

    async fn pending(&self) -> Result<u64, Error> {
        self.count(0).await
    }

    async fn leased(&self) -> Result<u64, Error> {
        self.count(1).await
    }

    async fn stats(&self) -> Result<Stats, Error> {
        let s = &self.shared;
        let row = s
            .run(sqlx::query(&s.sql.stats).bind(&s.name).fetch_one(&s.pool))
            .await?;
        let read = || -> Result<Counts, sqlx::Error> {
            let count = |i: usize| row.try_get::<i64, _>(i).map(unsigned);
            let time = |i: usize| row.try_get::<Option<i64>, _>(i).map(|t| t.map(unsigned));
            Ok(Counts {
                now_ms: count(0)?,
                pending: count(1)?,
                due_now: count(2)?,
                earliest_due_ms: time(3)?,
                leased: count(4)?,
                expired_leases: count(5)?,
                earliest_lease_expiry_ms: time(6)?,
                dead: count(7)?,
                latest_death_ms: time(8)?,
                damaged_frames: 0,
            })
        };
        let counts = read().map_err(Error::Postgres)?;
        Ok(Stats::total(vec![Stats::of_partition(0, counts)]))
    }

    async fn lateness(&self) -> Result<Lateness, Error> {
        let s = &self.shared;
        let rows = s
            .run(
                sqlx::query(&s.sql.lateness)
                    .bind(&s.name)
                    .fetch_all(&s.pool),
            )
            .await?;
        let mut counts = vec![0u64; crate::data::lateness::LATENESS_BOUNDS_MS.len() + 1];
        for row in rows {
            let bucket: i32 = row.try_get(0).map_err(Error::Postgres)?;
            let count: i64 = row.try_get(1).map_err(Error::Postgres)?;
            if let Some(slot) = usize::try_from(bucket).ok().and_then(|b| counts.get_mut(b)) {
                *slot = unsigned(count);
            }
        }
        Ok(Lateness::from_counts(counts))
    }

    async fn throughput(&self, since_ms: u64) -> Result<Throughput, Error> {
        let s = &self.shared;
        let rows = s
            .run(
                sqlx::query(&s.sql.throughput)
                    .bind(&s.name)
                    .bind(ms(since_ms / 60_000))
                    .fetch_all(&s.pool),
            )
            .await?;
        read_throughput(&rows, since_ms).map_err(Error::Postgres)
    }

    async fn dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>, Error> {
        let mut all = Vec::new();
        while all.len() < limit {
            let count = (limit - all.len()).min(BATCH as usize);
            let page = self.page(Listing::Dead, all.len(), count, 0).await?;
            let now = page.redis_time;
            let got = page.jobs.len();
            all.extend(page.jobs.into_iter().map(|job| DeadLetter {
                id: job.id,
                partition: 0,
                died_at: job.at,
                dead_for: now.duration_since(job.at).unwrap_or_default(),
                attempts: job.attempts,
                payload_len: job.payload_len,
                last_error: job.last_error,
            }));
            if got < count {
                break;
            }
        }
        Ok(all)
    }

    async fn requeue(&self, id: &JobId) -> Result<bool, Error> {
        self.by_id(&self.shared.sql.requeue, id, true).await
    }

    async fn requeue_all(&self) -> Result<u64, Error> {
        self.in_batches(&self.shared.sql.requeue_batch, true).await
    }

    async fn purge(&self, id: &JobId) -> Result<bool, Error> {
        self.by_id(&self.shared.sql.purge, id, false).await
    }

    async fn purge_all(&self) -> Result<u64, Error> {
        self.in_batches(&self.shared.sql.purge_batch, false).await
    }

    async fn job(&self, id: &JobId) -> Result<Option<JobInfo>, Error> {
        let s = &self.shared;
        let row = s
            .run(
                sqlx::query(&s.sql.job)
                    .bind(&s.name)
                    .bind(id.as_str())
                    .fetch_one(&s.pool),
            )
            .await?;
        read_job(id, &row).map_err(Error::Postgres)
    }

    async fn list(&self, listing: Listing, offset: usize, limit: usize) -> Result<Page, Error> {
        self.page(listing, offset, limit, PREVIEW).await
    }

    async fn promote(&self, id: &JobId) -> Result<bool, Error> {
        self.by_id(&self.shared.sql.promote, id, true).await
    }

    async fn recur(&self, recurrence: NewRecurrence) -> Result<bool, Error> {
        self.recur_one(recurrence).await
    }

    async fn unrecur(&self, name: &str) -> Result<bool, Error> {
        self.unrecur_one(name).await
    }

    async fn pause_recurrence(&self, name: &str, paused: bool) -> Result<bool, Error> {
        self.pause_one(name, paused).await
    }

    async fn recurrences(&self) -> Result<Vec<RecurrenceInfo>, Error> {
        self.list_recurrences().await
    }
}

impl PostgresBackend {
    /// Starts the handle's listener task, once (at its first claim: a
    /// handle that never claims never LISTENs).
    fn start_listener(&self) {
        self.listener.get_or_init(|| {
            let s = &self.shared;
            let listening = Arc::new(Listening {
                pool: s.pool.clone(),
                channel: s.channel.clone(),
                queue: s.name.clone(),
                health_check: s.health_check,
                timeout: s.timeout,
                wake: Arc::clone(&s.wake),
            });
            // The task holds the only strong reference while it serves;
            // the handle's drop stops it.
            let weak = Arc::downgrade(&listening);
            let stop = Arc::clone(&s.stop);
            tokio::spawn(async move {
                let _keep = listening;
                wake::listen(weak, stop).await;
            });
        });
    }

    /// Completes once the handle is closed.
    async fn until_closed(&self) {
        loop {
            let changed = self.shared.wake.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.closed.load(Ordering::SeqCst) {
                return;
            }
            changed.await;
        }
    }

    /// Sleeps until the handle's next claim is due.
    ///
    /// # Errors
    ///
    /// [`Error::Closed`] once the handle is closed.
    async fn until_due(&self) -> Result<(), Error> {
        let wake = &self.shared.wake;
        loop {
            let changed = wake.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.closed.load(Ordering::SeqCst) {
                return Err(Error::Closed);
            }
            match wake.when() {
                Some(at) if at <= Instant::now() => return Ok(()),
                Some(at) => {
                    tokio::select! {
                        () = tiered_timer::sleep_until(at) => {}
                        () = &mut changed => {}
                    }
                }
                None => changed.await,
            }
        }
    }

    /// A claim that outlives the call that asked for it: run on a task of
    /// its own, and if that call is dropped before the claim returns, the
    /// task hands the jobs back (released at once, the attempt not
    /// counted), so that a cancelled `next` strands nothing.
    async fn claim_once(&self, max: usize) -> Result<ClaimReply, Error> {
        let shared = Arc::clone(&self.shared);
        let task = tokio::spawn(async move { shared.claim(max).await });
        let mut in_flight = InFlight {
            task: Some(task),
            shared: Arc::clone(&self.shared),
        };
        let task = in_flight.task.as_mut().expect("set above");
        let outcome = task.await;
        in_flight.task = None;
        outcome.unwrap_or_else(|join| {
            Err(Error::Postgres(sqlx::Error::Protocol(format!(
                "the claim's task failed: {join}"
            ))))
        })
    }

    async fn count(&self, state: i16) -> Result<u64, Error> {
        let s = &self.shared;
        let row = s
            .run(
                sqlx::query(&s.sql.count)
                    .bind(&s.name)
                    .bind(state)
                    .fetch_one(&s.pool),
            )
            .await?;
        Ok(unsigned(row.try_get(0).map_err(Error::Postgres)?))
    }

    async fn give_up(
        &self,
        lease: Lease<'_>,
        bury: bool,
        delay_ms: u64,
        reason: Option<&str>,
    ) -> Result<GaveUp, Error> {
        let s = &self.shared;
        let row = s
            .run(
                sqlx::query(&s.sql.give_up)
                    .bind(&s.name)
                    .bind(lease.id.as_str())
                    .bind(number(lease.token))
                    .bind(bury)
                    .bind(ms(delay_ms))
                    .bind(i32::try_from(s.max_attempts).unwrap_or(i32::MAX))
                    .bind(reason)
                    .bind(&s.channel)
                    .fetch_optional(&s.pool),
            )
            .await?;
        let Some(row) = row else {
            return Ok(GaveUp::Lost);
        };
        let state: i16 = row.try_get(0).map_err(Error::Postgres)?;
        Ok(if state == 2 {
            GaveUp::Buried
        } else {
            GaveUp::Rescheduled
        })
    }

    /// A statement on one job (`$1` queue, `$2` id, and `$3` the channel
    /// if `notify`): `true` if it changed the job.
    async fn by_id(&self, sql: &str, id: &JobId, notify: bool) -> Result<bool, Error> {
        let s = &self.shared;
        let mut query = sqlx::query(sql).bind(&s.name).bind(id.as_str());
        if notify {
            query = query.bind(&s.channel);
        }
        let done = s.run(query.execute(&s.pool)).await?;
        Ok(done.rows_affected() > 0)
    }

    /// Runs a batch statement until it does less than a batch (so other
    /// calls get their turn in between, as on Redis).
    async fn in_batches(&self, sql: &str, notify: bool) -> Result<u64, Error> {
        let s = &self.shared;
        let mut total = 0;
        loop {
            let mut query = sqlx::query(sql).bind(&s.name).bind(BATCH);
            if notify {
                query = query.bind(&s.channel);
            }
            let n = if notify {
                let row = s.run(query.fetch_one(&s.pool)).await?;
                unsigned(row.try_get(0).map_err(Error::Postgres)?)
            } else {
                s.run(query.execute(&s.pool)).await?.rows_affected()
            };
            total += n;
            if n < BATCH as u64 {
                return Ok(total);
            }
        }
    }

    async fn page(
        &self,
        listing: Listing,
        offset: usize,
        limit: usize,
        preview: usize,
    ) -> Result<Page, Error> {
        let (state, due_only, newest_first) = match listing {
            Listing::Waiting => (0i16, false, false),
            Listing::Due => (0, true, false),
            Listing::Leased => (1, false, false),
            Listing::Dead => (2, false, true),
        };
        let s = &self.shared;
        let rows = s
            .run(
                sqlx::query(&s.sql.list)
                    .bind(&s.name)
                    .bind(state)
                    .bind(due_only)
                    .bind(newest_first)
                    .bind(i64::try_from(offset).unwrap_or(i64::MAX))
                    .bind(i64::try_from(limit).unwrap_or(i64::MAX))
                    .bind(i32::try_from(preview).unwrap_or(i32::MAX))
                    .fetch_all(&s.pool),
            )
            .await?;
        read_page(&rows, listing, offset).map_err(Error::Postgres)
    }
}

/// The schedule statement for one checked job.
pub(super) fn schedule_query<'q>(
    s: &'q Shared,
    job: &'q NewJob,
) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
    sqlx::query(&s.sql.schedule)
        .bind(&s.name)
        .bind(job.id.as_str())
        .bind(job.due.is_delay())
        .bind(ms(job.due.ms()))
        .bind(job.payload.as_slice())
        .bind(&s.channel)
}

/// The ack statement for a lease.
pub(super) fn ack_query<'q>(
    s: &'q Shared,
    lease: Lease<'q>,
) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
    sqlx::query(&s.sql.ack)
        .bind(&s.name)
        .bind(lease.id.as_str())
        .bind(number(lease.token))
}

/// Whether an ack statement's one row says it acked the job.
pub(super) fn acked(row: &PgRow) -> Result<bool, sqlx::Error> {
    Ok(row.try_get::<i64, _>(0)? == 1)
}

/// A throughput statement's rows: now, then (minute, processed, failed)
/// (NULLs if no minute was counted).
fn read_throughput(rows: &[PgRow], since_ms: u64) -> Result<Throughput, sqlx::Error> {
    let first = rows
        .first()
        .ok_or_else(|| sqlx::Error::Protocol("a throughput read returned no row".to_owned()))?;
    let now = unsigned(first.try_get(0)?);
    let mut counts = Vec::with_capacity(rows.len());
    for row in rows {
        let Some(minute) = row.try_get::<Option<i64>, _>(1)? else {
            continue;
        };
        let count = |i: usize| -> Result<u64, sqlx::Error> {
            Ok(unsigned(row.try_get::<Option<i64>, _>(i)?.unwrap_or(0)))
        };
        counts.push((unsigned(minute), count(2)?, count(3)?));
    }
    Ok(Throughput::from_counts(now, since_ms, counts))
}

/// A job's ended attempts, from the job statement's arrays (columns 10
/// to 15: number, claimed, holder, outcome code, ended, error).
fn read_history(row: &PgRow) -> Result<Vec<StoredAttempt>, sqlx::Error> {
    let numbers: Vec<i32> = row.try_get(10)?;
    let claimed: Vec<i64> = row.try_get(11)?;
    let holders: Vec<Option<String>> = row.try_get(12)?;
    let outcomes: Vec<String> = row.try_get(13)?;
    let ended: Vec<i64> = row.try_get(14)?;
    let errors: Vec<Option<String>> = row.try_get(15)?;
    let mut history = Vec::with_capacity(numbers.len());
    for (i, number) in numbers.into_iter().enumerate() {
        let outcome = match outcomes.get(i).map(String::as_str) {
            Some("r") => Outcome::Retried,
            Some("f") => Outcome::Failed,
            Some("l") => Outcome::Released,
            Some("x") => Outcome::LeaseExpired,
            Some("b") => Outcome::Buried,
            other => {
                return Err(sqlx::Error::Protocol(format!(
                    "an attempt's outcome {other:?} in a job's history"
                )))
            }
        };
        history.push(StoredAttempt {
            number: u32::try_from(number).unwrap_or(0),
            claimed_ms: claimed.get(i).copied().map_or(0, unsigned),
            holder: holders.get(i).cloned().flatten(),
            outcome,
            ended_ms: ended.get(i).copied().map(unsigned),
            error: errors.get(i).cloned().flatten().map(String::into_bytes),
        });
    }
    Ok(history)
}

fn read_job(id: &JobId, row: &PgRow) -> Result<Option<JobInfo>, sqlx::Error> {
    let now = unsigned(row.try_get(0)?);
    let Some(state) = row.try_get::<Option<i16>, _>(1)? else {
        return Ok(None);
    };
    let at = at_ms(unsigned(row.try_get(2)?));
    let deadline = row
        .try_get::<Option<i64>, _>(4)?
        .map(|d| at_ms(unsigned(d)));
    let (state, due, lease_expiry, died_at) = match state {
        0 => (JobState::Waiting, Some(at), None, None),
        1 => (JobState::Leased, deadline, Some(at), None),
        _ => (JobState::Dead, deadline, None, Some(at)),
    };
    let attempts = u32::try_from(row.try_get::<i32, _>(3)?).unwrap_or(0);
    let claimed_ms = row.try_get::<Option<i64>, _>(8)?.map(unsigned);
    let holder: Option<String> = row.try_get(9)?;
    let leased = state == JobState::Leased;
    // The running attempt, if its claim was recorded (not by version 1).
    let running = claimed_ms
        .filter(|_| leased)
        .map(|claimed_ms| StoredAttempt {
            number: attempts,
            claimed_ms,
            holder: holder.clone(),
            outcome: Outcome::Running,
            ended_ms: None,
            error: None,
        });
    Ok(Some(JobInfo {
        id: id.clone(),
        partition: 0,
        state,
        redis_time: at_ms(now),
        due,
        lease_expiry,
        died_at,
        attempts,
        last_error: row.try_get(6)?,
        payload: row.try_get(5)?,
        created: row
            .try_get::<Option<i64>, _>(7)?
            .map(|c| at_ms(unsigned(c))),
        holder: holder.filter(|_| leased),
        history: history(read_history(row)?, running),
    }))
}

fn read_page(rows: &[PgRow], listing: Listing, offset: usize) -> Result<Page, sqlx::Error> {
    let first = rows
        .first()
        .ok_or_else(|| sqlx::Error::Protocol("a listing returned no row".to_owned()))?;
    let now = unsigned(first.try_get(0)?);
    let total = unsigned(first.try_get(1)?);
    let mut jobs = Vec::with_capacity(rows.len());
    for row in rows {
        let Some(id) = row.try_get::<Option<String>, _>(2)? else {
            continue;
        };
        jobs.push(JobSummary {
            id: JobId::from(id),
            partition: 0,
            state: listing.state(),
            at: at_ms(unsigned(row.try_get(3)?)),
            attempts: u32::try_from(row.try_get::<i32, _>(4)?).unwrap_or(0),
            payload_len: u64::try_from(row.try_get::<i32, _>(5)?).unwrap_or(0),
            payload_preview: row.try_get(6)?,
            last_error: row.try_get(7)?,
        });
    }
    Ok(Page {
        redis_time: at_ms(now),
        total,
        offset,
        jobs,
    })
}

/// How many of `jobs` go in the next chunk: at most [`CHUNK_JOBS`], and
/// closed once it holds [`CHUNK_BYTES`] of payload.
fn chunk_len(jobs: &[NewJob]) -> usize {
    let mut bytes = 0;
    let mut n = 0;
    for job in jobs {
        n += 1;
        bytes += job.payload.len();
        if n >= CHUNK_JOBS || bytes >= CHUNK_BYTES {
            break;
        }
    }
    n
}

/// Releases jobs claimed for nobody, from a task of its own (if there is
/// a runtime; else their leases run out).
fn release_later(shared: Arc<Shared>, jobs: Vec<Claimed>) {
    if jobs.is_empty() {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        for job in jobs {
            if let Err(error) = shared.release(job.id.as_str(), number(&job.token)).await {
                tracing::warn!(target: targets::JOB, job = %job.id, %error, "could not hand back a job claimed for a dropped call; it comes back when its lease runs out");
            }
        }
    });
}

type ClaimTask = tokio::task::JoinHandle<Result<ClaimReply, Error>>;

/// A claim in flight; dropped before it finished, its task's jobs are
/// released when it does.
struct InFlight {
    task: Option<ClaimTask>,
    shared: Arc<Shared>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let Some(task) = self.task.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return; // no runtime: the leases run out instead
        };
        let shared = Arc::clone(&self.shared);
        runtime.spawn(async move {
            if let Ok(Ok(orphaned)) = task.await {
                // Another claimer may sleep on what this claim would have
                // told it.
                shared.wake.failed();
                release_later(shared, orphaned.jobs);
            }
        });
    }
}
