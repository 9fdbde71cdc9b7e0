//! The operator's calls on a queue: its numbers ([`Queue::stats`]), how
//! late claims were ([`Queue::lateness`]), how many jobs were processed
//! and failed per minute ([`Queue::throughput`]), the dead letters
//! ([`Queue::dead_letters`], [`Queue::requeue`], [`Queue::requeue_all`],
//! [`Queue::purge`], [`Queue::purge_all`]), single jobs and pages of jobs
//! ([`Queue::job`], [`Queue::list`]) and making a waiting job due now
//! ([`Queue::promote`]). The `ttr` binary and its dashboard are built on
//! these alone.
//!
//! Ground rules:
//!
//! * Every read is one snapshot per partition at one instant of the
//!   deciding clock (one script per partition on Redis; one look at the
//!   index in the embedded store); a total over several partitions is a
//!   sum of snapshots a round trip apart.
//! * Nothing here holds a store for long: bulk changes and listings go in
//!   batches (on Redis, 500 per script), a page is at most [`MAX_PAGE`]
//!   jobs with at most [`PREVIEW`](crate::PREVIEW) bytes of payload each.
//! * Input is checked here, before the backend sees it.

use super::queue::Queue;
use crate::data::checks::check_job_id;
use crate::data::error::Error;
use crate::data::history::{ms_since_epoch, Throughput};
use crate::data::id::JobId;
use crate::data::lateness::Lateness;
use crate::data::limits::{MAX_OFFSET, MAX_PARTITIONED_END};
use crate::data::listing::{JobInfo, Listing, Page, MAX_PAGE};
use crate::data::stats::{DeadLetter, Stats};

impl Queue {
    /// A snapshot of the queue by Redis' clock: how many jobs are waiting,
    /// due, leased (and with an expired lease) and dead, the earliest due
    /// time and how overdue the most overdue waiting job is; summed over
    /// the partitions, and per partition in [`Stats::partitions`].
    ///
    /// Each partition is read by one script, so its numbers are
    /// consistent with each other and with one instant of Redis' clock.
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`] or [`Error::Redis`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tiered_timer_jobs::Queue;
    /// # async fn demo() -> Result<(), tiered_timer_jobs::Error> {
    /// let queue = Queue::connect("redis://127.0.0.1:6379/", "orders").await?;
    /// let stats = queue.stats().await?;
    /// println!("{stats}"); // pending 120 (3 due, most overdue 3m 12s), leased 2, dead 1
    /// assert_eq!(stats.pending, stats.partitions.iter().map(|p| p.pending).sum::<u64>());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn stats(&self) -> Result<Stats, Error> {
        self.inner.backend.stats().await
    }

    /// How late this queue's jobs were claimed, summed over its
    /// partitions: a histogram of Redis' now at each claim minus the job's
    /// due time, kept in Redis by the claim script (one `BITFIELD` per
    /// claim batch). One `GET` per partition.
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`] or [`Error::Redis`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tiered_timer_jobs::Queue;
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// let lateness = queue.lateness().await?;
    /// println!("median claim lateness: {:?}", lateness.quantile(0.5));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn lateness(&self) -> Result<Lateness, Error> {
        self.inner.backend.lateness().await
    }

    /// How many jobs were processed (acked) and how many attempts failed
    /// (see [`Outcome::is_failure`](crate::Outcome::is_failure)), per
    /// minute by the store's clock, from the minute holding `since` to
    /// now, summed over the partitions; minutes older than
    /// [`THROUGHPUT_MINUTES`](crate::THROUGHPUT_MINUTES) are not kept.
    ///
    /// The counts are the store's, kept with the jobs (on Redis one
    /// `HINCRBY` inside the ack and failure scripts, in a hash per
    /// partition; in the embedded store derived from its log's records,
    /// and kept through compaction; on Postgres in a table written by
    /// the ack and failure statements), so a dashboard or tool started
    /// now sees the minutes before it, and every process' work. One
    /// script per partition (one statement on Postgres).
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`], [`Error::Redis`] or [`Error::Postgres`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::{Duration, SystemTime};
    /// # use tiered_timer_jobs::Queue;
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// let since = SystemTime::now() - Duration::from_secs(15 * 60);
    /// for minute in queue.throughput(since).await?.minutes {
    ///     println!("{:?}: {} ok, {} failed", minute.start, minute.processed, minute.failed);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn throughput(&self, since: std::time::SystemTime) -> Result<Throughput, Error> {
        self.inner.backend.throughput(ms_since_epoch(since)).await
    }

    /// Up to `limit` dead letters, the most recent deaths first, with their
    /// last error, attempts and payload size.
    ///
    /// Read in pages of 500 per script, so a large `limit` never holds
    /// Redis for long (each page is one snapshot: a dead letter that comes
    /// or goes between pages may be missed or listed twice). With several
    /// partitions, the newest `limit` of all are kept.
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`] or [`Error::Redis`].
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tiered_timer_jobs::Queue;
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// for dead in queue.dead_letters(100).await? {
    ///     println!("{}: {:?}", dead.id, dead.last_error);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>, Error> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        self.inner.backend.dead_letters(limit).await
    }

    /// Moves a dead letter back to the waiting jobs, due at once, with its
    /// attempt count reset and its last error cleared. Returns `false`
    /// (changing nothing) if `id` is not a dead letter.
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
    /// if !queue.requeue(&JobId::from("order-42")).await? {
    ///     println!("order-42 is not a dead letter");
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn requeue(&self, id: &JobId) -> Result<bool, Error> {
        check_job_id(id.as_str())?;
        self.inner.backend.requeue(id).await
    }

    /// Moves every dead letter back to the waiting jobs, as
    /// [`requeue`](Queue::requeue) does one; returns how many. Goes in
    /// batches of 500 per script, so jobs that die meanwhile may be
    /// requeued too.
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`] or [`Error::Redis`]; the batches before the
    /// error stay requeued.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tiered_timer_jobs::Queue;
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// // The payment provider is back: try every dead order again.
    /// let n = queue.requeue_all().await?;
    /// println!("requeued {n} jobs");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn requeue_all(&self) -> Result<u64, Error> {
        self.inner.backend.requeue_all().await
    }

    /// Deletes a dead letter for good, payload, attempts and last error
    /// with it. Returns `false` (changing nothing) if `id` is not a dead
    /// letter: a waiting or leased job is never purged.
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
    /// assert!(queue.purge(&JobId::from("order-42")).await?);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn purge(&self, id: &JobId) -> Result<bool, Error> {
        check_job_id(id.as_str())?;
        self.inner.backend.purge(id).await
    }

    /// Deletes every dead letter for good; returns how many. Goes in
    /// batches of 500 per script.
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`] or [`Error::Redis`]; the batches before the
    /// error stay deleted.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use tiered_timer_jobs::Queue;
    /// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
    /// let n = queue.purge_all().await?;
    /// println!("deleted {n} dead letters");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn purge_all(&self) -> Result<u64, Error> {
        self.inner.backend.purge_all().await
    }

    /// Everything stored about one job: its state, due time, lease expiry
    /// or time of death, attempts, last error and payload, when it was
    /// created, who holds its lease, and its last attempts
    /// ([`JobInfo::history`]); `None` if the id is not waiting, leased or
    /// dead (done, cancelled, purged or never scheduled).
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
        check_job_id(id.as_str())?;
        self.inner.backend.job(id).await
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
    /// A page that starts past the listing's end is empty, whatever its
    /// `offset`.
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
        if self.partitions() > 1 && offset.saturating_add(limit) > MAX_PARTITIONED_END {
            return Err(Error::InvalidArgument {
                reason: "on a partitioned queue, a page must end within the first 10 000 jobs",
            });
        }
        // No store holds this many jobs: a page starting further is empty
        // (and the stores need not count that far).
        let mut page = self
            .inner
            .backend
            .list(listing, offset.min(MAX_OFFSET), limit)
            .await?;
        page.offset = offset;
        Ok(page)
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
        check_job_id(id.as_str())?;
        self.inner.backend.promote(id).await
    }
}
