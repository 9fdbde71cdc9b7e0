//! Looking at single jobs and pages of jobs, and making a waiting job due
//! now: [`Queue::job`], [`Queue::list`] and [`Queue::promote`], for the
//! `ttr` command line and its dashboard.
//!
//! Ground rules:
//!
//! * Every read is one script per partition (`src/redis/lua/inspect_job.lua`,
//!   `src/redis/lua/list_jobs.lua`), so what it says about a partition is one
//!   snapshot at one instant of Redis' clock; a page over several
//!   partitions merges snapshots a round trip apart.
//! * A listing never holds Redis for long: a page is at most [`MAX_PAGE`]
//!   jobs, each with at most [`PREVIEW`] bytes of payload.
//! * [`Queue::promote`] is one script that changes only a waiting job's
//!   due time, and wakes waiters as scheduling does.

#[cfg(feature = "redis")]
use std::sync::LazyLock;
#[cfg(feature = "redis")]
use std::time::SystemTime;

#[cfg(feature = "redis")]
use redis::{Script, Value};

#[cfg(feature = "redis")]
use crate::admin::{at_ms, unexpected_reply};
use crate::data::error::Error;
#[cfg(feature = "redis")]
use crate::data::id::check_job_id;
use crate::data::id::JobId;
#[cfg(feature = "redis")]
use crate::data::listing::JobState;
use crate::data::listing::{JobInfo, Listing, Page, MAX_PAGE};
#[cfg(feature = "redis")]
use crate::data::listing::{JobSummary, PREVIEW};
#[cfg(feature = "redis")]
use crate::queue::{arg, parse};
use crate::queue::{Backend, Queue};
#[cfg(feature = "redis")]
use crate::redis::scripts;

#[cfg(feature = "redis")]
/// On a queue of several partitions, a page must end within this many
/// jobs: each partition is read from its start up to the page's end.
#[cfg(feature = "redis")]
const MAX_PARTITIONED_END: usize = 10_000;
/// How many rows one list script reads on a partitioned queue.
#[cfg(feature = "redis")]
const BATCH: usize = 500;

#[cfg(feature = "redis")]
pub(crate) static INSPECT_JOB: LazyLock<Script> =
    LazyLock::new(|| scripts::script(&[include_str!("redis/lua/inspect_job.lua")]));
#[cfg(feature = "redis")]
pub(crate) static LIST_JOBS: LazyLock<Script> =
    LazyLock::new(|| scripts::script(&[include_str!("redis/lua/list_jobs.lua")]));
#[cfg(feature = "redis")]
static PROMOTE: LazyLock<Script> =
    LazyLock::new(|| scripts::script(&[include_str!("redis/lua/promote.lua")]));

impl Queue {
    /// Everything stored about one job: its state, due time, lease expiry
    /// or time of death, attempts, last error and payload; `None` if the
    /// id is not waiting, leased or dead (done, cancelled, purged or never
    /// scheduled).
    ///
    /// One script on the job's partition: one snapshot by Redis' clock.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidJobId`]; [`Error::Timeout`] or [`Error::Redis`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tiered_timer_jobs::{JobId, Queue};
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// match queue.job(&JobId::from("order-42")).await? {
    ///     Some(job) => println!("{}: {} ({} attempts)", job.id, job.state, job.attempts),
    ///     None => println!("order-42 is done, or never was"),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn job(&self, id: &JobId) -> Result<Option<JobInfo>, Error> {
        match &self.inner.backend {
            #[cfg(feature = "embedded")]
            Backend::Embedded(local) => local.job(id).await,
            #[cfg(feature = "redis")]
            Backend::Redis(_) => self.job_redis(id).await,
        }
    }

    #[cfg(feature = "redis")]
    async fn job_redis(&self, id: &JobId) -> Result<Option<JobInfo>, Error> {
        check_job_id(id.as_str())?;
        let inner = &self.inner;
        let keys = inner.keys_of(id);
        let partition =
            crate::redis::keys::partition_of(id.as_str(), inner.redis().partitions.len() as u32);
        let reply: Vec<Value> = inner
            .eval(&INSPECT_JOB, keys, vec![arg(id.as_str())])
            .await?;
        let mut fields = reply.into_iter();
        let now: i64 = parse(fields.next())?;
        let Some(state) = fields.next() else {
            return Ok(None);
        };
        let state = match parse::<String>(Some(state))?.as_str() {
            "waiting" => JobState::Waiting,
            "leased" => JobState::Leased,
            "dead" => JobState::Dead,
            _ => return Err(unexpected_reply("the inspect script")),
        };
        let score: i64 = parse(fields.next())?;
        let attempts: u32 = parse(fields.next())?;
        let deadline: i64 = parse(fields.next())?;
        let payload: Vec<u8> = parse(fields.next())?;
        let last_error: Option<Vec<u8>> = parse(fields.next())?;
        let (due, lease_expiry, died_at) = match state {
            JobState::Waiting => (at_ms(score), None, None),
            JobState::Leased => (at_ms(deadline), at_ms(score), None),
            JobState::Dead => (at_ms(deadline), None, at_ms(score)),
        };
        Ok(Some(JobInfo {
            id: id.clone(),
            partition,
            state,
            redis_time: at_ms(now).unwrap_or(SystemTime::UNIX_EPOCH),
            due,
            lease_expiry,
            died_at,
            attempts,
            last_error: last_error.map(|e| String::from_utf8_lossy(&e).into_owned()),
            payload,
        }))
    }

    /// A page of jobs: up to `limit` (at most 1 000) of `listing`,
    /// starting `offset` jobs in, with their due time, lease expiry or time
    /// of death, attempts, payload size and first 64 bytes, and last
    /// error; and how many jobs the listing has in all.
    ///
    /// On a queue of one partition this is one script. With several, each
    /// partition is read from its start to `offset + limit` (in scripts of
    /// 500 jobs) and the pages merged, so a page must end within the first
    /// 10 000 jobs.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a `limit` of 0 or above 1 000, or a
    /// partitioned page ending past 10 000; [`Error::Timeout`] or
    /// [`Error::Redis`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tiered_timer_jobs::{Listing, Queue};
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// let page = queue.list(Listing::Due, 0, 50).await?;
    /// println!("{} jobs due; the most overdue:", page.total);
    /// for job in &page.jobs {
    ///     println!("  {} due {:?}", job.id, job.at);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn list(&self, listing: Listing, offset: usize, limit: usize) -> Result<Page, Error> {
        if limit == 0 || limit > MAX_PAGE {
            return Err(Error::InvalidArgument {
                reason: "a page holds 1 to 1000 jobs",
            });
        }
        match &self.inner.backend {
            #[cfg(feature = "embedded")]
            Backend::Embedded(local) => local.list(listing, offset, limit).await,
            #[cfg(feature = "redis")]
            Backend::Redis(_) => self.list_redis(listing, offset, limit).await,
        }
    }

    #[cfg(feature = "redis")]
    async fn list_redis(
        &self,
        listing: Listing,
        offset: usize,
        limit: usize,
    ) -> Result<Page, Error> {
        let partitions = &self.inner.redis().partitions;
        if partitions.len() == 1 {
            let (now, total, jobs) = self.list_partition(listing, 0, offset, limit).await?;
            return Ok(Page {
                redis_time: now,
                total,
                offset,
                jobs,
            });
        }
        let end = offset.saturating_add(limit);
        if end > MAX_PARTITIONED_END {
            return Err(Error::InvalidArgument {
                reason: "on a partitioned queue, a page must end within the first 10 000 jobs",
            });
        }
        let mut redis_time = SystemTime::UNIX_EPOCH;
        let mut total = 0;
        let mut jobs = Vec::new();
        for p in 0..partitions.len() as u32 {
            let mut read = 0;
            while read < end {
                let count = (end - read).min(BATCH);
                let (now, all, page) = self.list_partition(listing, p, read, count).await?;
                if read == 0 {
                    total += all;
                }
                redis_time = redis_time.max(now);
                read += page.len();
                let short = page.len() < count;
                jobs.extend(page);
                if short {
                    break;
                }
            }
        }
        if listing == Listing::Dead {
            jobs.sort_by(|a, b| b.at.cmp(&a.at).then_with(|| a.id.cmp(&b.id)));
        } else {
            jobs.sort_by(|a, b| a.at.cmp(&b.at).then_with(|| a.id.cmp(&b.id)));
        }
        let jobs = jobs.into_iter().skip(offset).take(limit).collect();
        Ok(Page {
            redis_time,
            total,
            offset,
            jobs,
        })
    }

    /// One list script on one partition: Redis' now, the listing's total
    /// there, and the page.
    #[cfg(feature = "redis")]
    async fn list_partition(
        &self,
        listing: Listing,
        partition: u32,
        offset: usize,
        count: usize,
    ) -> Result<(SystemTime, u64, Vec<JobSummary>), Error> {
        let keys = &self.inner.redis().partitions[partition as usize];
        let args = vec![
            arg(listing.as_str()),
            arg(&offset.to_string()),
            arg(&count.to_string()),
            arg(&PREVIEW.to_string()),
        ];
        let reply: Vec<Value> = self.inner.eval(&LIST_JOBS, keys, args).await?;
        let mut fields = reply.into_iter();
        let now: i64 = parse(fields.next())?;
        let total: u64 = parse(fields.next())?;
        let rest: Vec<Value> = fields.collect();
        if rest.len() % 6 != 0 {
            return Err(unexpected_reply("the list script"));
        }
        let mut jobs = Vec::with_capacity(rest.len() / 6);
        let mut rows = rest.into_iter();
        while let Some(id) = rows.next() {
            let id: String = parse(Some(id))?;
            let score: i64 = parse(rows.next())?;
            let attempts: u32 = parse(rows.next())?;
            let payload_len: u64 = parse(rows.next())?;
            let payload_preview: Vec<u8> = parse(rows.next())?;
            let last_error: Option<Vec<u8>> = parse(rows.next())?;
            jobs.push(JobSummary {
                id: JobId::from(id),
                partition,
                state: listing.state(),
                at: at_ms(score).unwrap_or(SystemTime::UNIX_EPOCH),
                attempts,
                payload_len,
                payload_preview,
                last_error: last_error.map(|e| String::from_utf8_lossy(&e).into_owned()),
            });
        }
        Ok((at_ms(now).unwrap_or(SystemTime::UNIX_EPOCH), total, jobs))
    }

    /// Makes a waiting job due now (by Redis' clock), as an operator's
    /// "run it now"; a job already due keeps its earlier due time, so it
    /// keeps its place. Waiting workers are woken as a schedule wakes
    /// them. Returns `false` (changing nothing) if the job is not waiting:
    /// leased, dead, done or unknown.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidJobId`]; [`Error::Timeout`] or [`Error::Redis`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use tiered_timer_jobs::Queue;
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// let id = queue.schedule(Duration::from_secs(3600), "report").await?;
    /// assert!(queue.promote(&id).await?); // delivered now, not in an hour
    /// # Ok(())
    /// # }
    /// ```
    pub async fn promote(&self, id: &JobId) -> Result<bool, Error> {
        match &self.inner.backend {
            #[cfg(feature = "embedded")]
            Backend::Embedded(local) => local.promote(id).await,
            #[cfg(feature = "redis")]
            Backend::Redis(_) => self.promote_redis(id).await,
        }
    }

    #[cfg(feature = "redis")]
    async fn promote_redis(&self, id: &JobId) -> Result<bool, Error> {
        check_job_id(id.as_str())?;
        let keys = self.inner.keys_of(id);
        let done: i64 = self
            .inner
            .eval(&PROMOTE, keys, vec![arg(id.as_str())])
            .await?;
        Ok(done == 1)
    }
}
