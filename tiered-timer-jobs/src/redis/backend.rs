//! [`RedisBackend`]: the backend contract (`src/contract.rs`) on Redis.
//! Every change is one Lua script on the job's partition (`scripts.rs`,
//! `lua/`), run within the command timeout and followed by `WAIT` when the
//! queue asks for replicas (`replication.rs`); waiting for due jobs is the
//! waker's (`wake/`). The operator's calls are in `operator.rs`, the
//! registry of queues and their discovery in `registry.rs`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::{FromRedisValue, Script};

use super::conn::Conn;
use super::keys::{partition_of, Keys, LEASED};
use super::node::Limits;
use super::registry;
use super::reply::{arg, not_redis, token_text};
use super::scripts;
use super::wake::{self, Setup, Shared};
use crate::contract::{
    AckAndClaim, Backend, Claimed, Failure, GaveUp, Lease, LeaseToken, NewJob, NewRecurrence,
    Settings,
};
use crate::data::error::Error;
use crate::data::history::Throughput;
use crate::data::id::{random_id, JobId};
use crate::data::lateness::Lateness;
use crate::data::limits::{CHUNK_BYTES, CHUNK_JOBS};
use crate::data::listing::{JobInfo, Listing, Page, QueueInfo};
use crate::data::recurrence::RecurrenceInfo;
use crate::data::stats::{DeadLetter, Stats};
use crate::targets;

/// A Redis queue handle.
pub(crate) struct RedisBackend {
    name: String,
    pub(super) conn: Conn,
    /// The keys of each partition, in partition order.
    pub(super) partitions: Vec<Keys>,
    /// The waker: waiting calls, held batons, prefetched jobs.
    wake: Arc<Shared>,
    /// Set once this handle wrote the queue to the registry.
    registered: AtomicBool,
    max_attempts: u32,
}

impl Drop for RedisBackend {
    fn drop(&mut self) {
        // The last handle (and the last job) is gone: the waker's batons
        // and prefetched jobs go back to Redis.
        self.wake.abandon();
    }
}

impl RedisBackend {
    /// Runs a script on a partition's keys, within the command timeout;
    /// a write is followed by `WAIT` if the queue asks for replicas, as
    /// the script's [durability](scripts::durability) says.
    pub(super) async fn eval<T: FromRedisValue>(
        &self,
        script: &Script,
        keys: &Keys,
        args: Vec<Vec<u8>>,
    ) -> Result<T, Error> {
        self.conn
            .eval(script, &keys.ordered, args, scripts::durability(script))
            .await
    }

    /// Runs one plain command within the command timeout.
    pub(super) async fn query<T: FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T, Error> {
        self.conn.query(cmd).await
    }

    /// Writes this queue's partition count to the registry, once per
    /// handle; a failure is only traced (the next schedule tries again).
    async fn register(&self) {
        if self.registered.load(Ordering::Relaxed) {
            return;
        }
        match registry::register(&self.conn, &self.name, self.partitions()).await {
            Ok(()) => self.registered.store(true, Ordering::Relaxed),
            Err(error) => {
                tracing::debug!(target: targets::QUEUE, queue = %self.name, %error, "could not register the queue in ttr:queues")
            }
        }
    }

    /// The partition of job `id`.
    pub(super) fn partition_of(&self, id: &JobId) -> u32 {
        partition_of(id.as_str(), self.partitions.len() as u32)
    }

    /// The keys of job `id`'s partition.
    pub(super) fn keys_of(&self, id: &JobId) -> &Keys {
        &self.partitions[self.partition_of(id) as usize]
    }

    /// The keys of a lease's partition.
    fn keys_of_lease(&self, lease: &Lease<'_>) -> &Keys {
        &self.partitions[lease.partition as usize]
    }

    /// A script on a lease's partition, with the job's id and token first.
    async fn under_lease<T: FromRedisValue>(
        &self,
        script: &Script,
        lease: Lease<'_>,
        more: impl IntoIterator<Item = Vec<u8>>,
    ) -> Result<T, Error> {
        let mut args = vec![arg(lease.id.as_str()), arg(token_text(lease.token))];
        args.extend(more);
        self.eval(script, self.keys_of_lease(&lease), args).await
    }

    /// One job-id script on the job's partition: `true` if it answered 1.
    pub(super) async fn on_job(&self, script: &Script, id: &JobId) -> Result<bool, Error> {
        let done: i64 = self
            .eval(script, self.keys_of(id), vec![arg(id.as_str())])
            .await?;
        Ok(done == 1)
    }

    /// The jobs scored from `min` to `max` in every partition's timeline
    /// (`ZCOUNT` syntax): waiting jobs below `LEASED`, leased ones above.
    async fn count_timeline(
        &self,
        min: impl AsRef<str>,
        max: impl AsRef<str>,
    ) -> Result<u64, Error> {
        let mut total = 0;
        for keys in &self.partitions {
            let n: u64 = self
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

/// The fail and retry scripts' answer.
fn gave_up(done: i64) -> GaveUp {
    match done {
        1 => GaveUp::Rescheduled,
        2 => GaveUp::Buried,
        _ => GaveUp::Lost,
    }
}

impl Backend for RedisBackend {
    async fn open(settings: &Settings) -> Result<RedisBackend, Error> {
        let limits = Limits {
            command_timeout: settings.command_timeout,
            health_check: settings.health_check,
            replicas: settings.replicas,
            replica_timeout: settings.replica_timeout,
        };
        let conn = Conn::open(&settings.url, settings.cluster, limits)
            .await
            .map_err(not_redis)?;
        let name = &settings.name;
        let count =
            registry::resolve_partitions(&conn, name, settings.partitions, settings.register)
                .await
                .map_err(not_redis)?;
        let partitions: Vec<Keys> = (0..count).map(|p| Keys::new(name, p, count)).collect();
        let wake = wake::start(Setup {
            name: name.clone(),
            conn: conn.clone(),
            partitions: partitions.clone(),
            lease_ms: settings.lease_ms(),
            max_attempts: settings.max_attempts,
            prefetch: settings.prefetch,
            health_check: settings.health_check,
            token_prefix: format!("{}-", &random_id()[..16]),
            tokens: AtomicU64::new(0),
            holder: settings.holder.clone(),
        });
        Ok(RedisBackend {
            name: name.clone(),
            conn,
            partitions,
            wake,
            // Connecting recorded the partition count (if asked to).
            registered: AtomicBool::new(settings.register),
            max_attempts: settings.max_attempts,
        })
    }

    async fn find_queues(
        url: &str,
        cluster: bool,
        timeout: Duration,
    ) -> Result<Vec<QueueInfo>, Error> {
        registry::find_queues(url, cluster, timeout).await
    }

    fn partitions(&self) -> u32 {
        self.partitions.len() as u32
    }

    async fn schedule(&self, job: NewJob) -> Result<(), Error> {
        let mode = if job.due.is_delay() { "d" } else { "a" };
        let args = vec![
            arg(job.id.as_str()),
            arg(mode),
            arg(&job.due.ms().to_string()),
            job.payload,
        ];
        let _: (i64, i64) = self
            .eval(&scripts::SCHEDULE_SCRIPT, self.keys_of(&job.id), args)
            .await?;
        self.register().await;
        Ok(())
    }

    /// Chunks of one partition, one script each. One "now" per clock: on
    /// a single Redis every chunk counts its delays from the first
    /// script's `TIME`; on a cluster, each partition from its own node's
    /// (the clock that decides when its jobs are due).
    async fn schedule_many(&self, jobs: Vec<NewJob>) -> Result<usize, Error> {
        if jobs.is_empty() {
            return Ok(0);
        }
        let mode = if jobs[0].due.is_delay() { "d" } else { "a" };
        let mut by_partition: Vec<Vec<NewJob>> = Vec::new();
        by_partition.resize_with(self.partitions.len(), Vec::new);
        for job in jobs {
            by_partition[self.partition_of(&job.id) as usize].push(job);
        }
        let one_clock = self.conn.is_single();
        let mut base: Option<u64> = None;
        let mut written = 0;
        for (keys, jobs) in self.partitions.iter().zip(by_partition) {
            if !one_clock {
                base = None;
            }
            let mut jobs = jobs.into_iter().peekable();
            while jobs.peek().is_some() {
                let base_arg = base.map_or_else(Vec::new, |ms| arg(&ms.to_string()));
                let mut args = vec![arg(mode), base_arg];
                let mut bytes = 0;
                for job in jobs.by_ref() {
                    bytes += job.payload.len();
                    args.extend([
                        arg(job.id.as_str()),
                        arg(&job.due.ms().to_string()),
                        job.payload,
                    ]);
                    if args.len() >= 2 + 3 * CHUNK_JOBS || bytes >= CHUNK_BYTES {
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
        self.register().await;
        Ok(written)
    }

    async fn cancel(&self, id: &JobId) -> Result<bool, Error> {
        self.on_job(&scripts::CANCEL_SCRIPT, id).await
    }

    async fn claim(&self, max: usize) -> Result<Vec<Claimed>, Error> {
        self.wake.wait(max).await
    }

    fn take_claimed(&self) -> Option<Claimed> {
        self.wake.take_buffered()
    }

    fn give_back(&self, jobs: Vec<Claimed>) {
        self.wake.absorb(jobs);
    }

    /// The ack and the next claim in one script (see
    /// [`Shared::claim_now`]).
    async fn ack_and_claim(&self, lease: Lease<'_>) -> Result<AckAndClaim, Error> {
        let ack = (lease.id.clone(), lease.token.clone());
        let outcome = self.wake.claim_now(lease.partition, ack).await?;
        Ok(AckAndClaim {
            acked: outcome.acked != Some(false),
            replicated: outcome.replicated,
            jobs: outcome.jobs,
        })
    }

    fn close(&self) -> Vec<Claimed> {
        self.wake.close()
    }

    /// Fenced by the token only (see [`Job::ack`](crate::Job::ack)).
    async fn ack(&self, lease: Lease<'_>) -> Result<bool, Error> {
        let done: i64 = self.under_lease(&scripts::ACK_SCRIPT, lease, []).await?;
        Ok(done == 1)
    }

    async fn ack_many(
        &self,
        partition: u32,
        leases: &[(JobId, LeaseToken)],
    ) -> Result<Vec<JobId>, Error> {
        let keys = &self.partitions[partition as usize];
        let mut args = Vec::with_capacity(2 * leases.len());
        for (id, token) in leases {
            args.push(arg(id.as_str()));
            args.push(arg(token_text(token)));
        }
        let refused: Vec<String> = self.eval(&scripts::ACK_MANY_SCRIPT, keys, args).await?;
        Ok(refused.into_iter().map(JobId::from).collect())
    }

    async fn retry(&self, lease: Lease<'_>, delay_ms: u64) -> Result<GaveUp, Error> {
        let more = [
            arg(&delay_ms.to_string()),
            arg(&self.max_attempts.to_string()),
        ];
        let done: i64 = self
            .under_lease(&scripts::RETRY_SCRIPT, lease, more)
            .await?;
        Ok(gave_up(done))
    }

    async fn fail(
        &self,
        lease: Lease<'_>,
        failure: Failure,
        reason: &str,
    ) -> Result<GaveUp, Error> {
        let (action, delay_ms) = match failure {
            Failure::Retry(delay_ms) => ("r", delay_ms),
            Failure::Bury => ("b", 0),
        };
        let more = [
            arg(action),
            arg(&delay_ms.to_string()),
            arg(&self.max_attempts.to_string()),
            arg(reason),
        ];
        let done: i64 = self.under_lease(&scripts::FAIL_SCRIPT, lease, more).await?;
        Ok(gave_up(done))
    }

    async fn extend(&self, lease: Lease<'_>, lease_ms: u64) -> Result<bool, Error> {
        let expiry: i64 = self
            .under_lease(&scripts::EXTEND_SCRIPT, lease, [arg(&lease_ms.to_string())])
            .await?;
        Ok(expiry != 0)
    }

    async fn release(&self, lease: Lease<'_>) -> Result<bool, Error> {
        let done: i64 = self
            .under_lease(&scripts::RELEASE_SCRIPT, lease, [])
            .await?;
        Ok(done == 1)
    }

    async fn pending(&self) -> Result<u64, Error> {
        self.count_timeline("-inf", format!("({LEASED}")).await
    }

    async fn leased(&self) -> Result<u64, Error> {
        self.count_timeline(LEASED.to_string(), "+inf").await
    }

    async fn stats(&self) -> Result<Stats, Error> {
        self.stats_of_partitions().await
    }

    async fn lateness(&self) -> Result<Lateness, Error> {
        self.stored_lateness().await
    }

    async fn throughput(&self, since_ms: u64) -> Result<Throughput, Error> {
        self.stored_throughput(since_ms).await
    }

    async fn dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>, Error> {
        self.dead_letter_pages(limit).await
    }

    async fn requeue(&self, id: &JobId) -> Result<bool, Error> {
        self.on_job(&scripts::REQUEUE_SCRIPT, id).await
    }

    async fn requeue_all(&self) -> Result<u64, Error> {
        self.in_batches(&scripts::REQUEUE_ALL_SCRIPT).await
    }

    async fn purge(&self, id: &JobId) -> Result<bool, Error> {
        self.on_job(&scripts::PURGE_SCRIPT, id).await
    }

    async fn purge_all(&self) -> Result<u64, Error> {
        self.in_batches(&scripts::PURGE_ALL_SCRIPT).await
    }

    async fn job(&self, id: &JobId) -> Result<Option<JobInfo>, Error> {
        self.inspect(id).await
    }

    async fn list(&self, listing: Listing, offset: usize, limit: usize) -> Result<Page, Error> {
        self.page(listing, offset, limit).await
    }

    async fn promote(&self, id: &JobId) -> Result<bool, Error> {
        self.on_job(&scripts::PROMOTE_SCRIPT, id).await
    }

    async fn recur(&self, recurrence: NewRecurrence) -> Result<bool, Error> {
        let changed = self.recur_one(recurrence).await?;
        self.register().await;
        Ok(changed)
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
