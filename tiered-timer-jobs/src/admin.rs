//! The operator's view of a queue: [`Queue::stats`], how late claims were
//! ([`Queue::lateness`]) and the dead letters ([`Queue::dead_letters`],
//! [`Queue::requeue`], [`Queue::requeue_all`], [`Queue::purge`],
//! [`Queue::purge_all`]). The `ttr` binary is built on these alone.
//!
//! Ground rules:
//!
//! * Every read is one script per partition, so each partition's numbers
//!   are one snapshot at one instant of Redis' clock ("how overdue" is
//!   that instant minus the earliest due time, never a local clock against
//!   Redis'). Partitions are read one after another, so a total is a sum
//!   of snapshots a round trip apart.
//! * Bulk changes (`*_all`) and dead-letter listings go in batches of
//!   [`BATCH`] dead letters per script, so no single script holds Redis
//!   for long, and stop when a batch comes back short.

#[cfg(feature = "redis")]
use std::time::{Duration, SystemTime};

#[cfg(feature = "redis")]
use redis::Value;

use crate::data::error::Error;
use crate::data::id::JobId;
use crate::data::lateness::Lateness;
#[cfg(feature = "redis")]
use crate::data::lateness::LATENESS_BOUNDS_MS;
#[cfg(feature = "redis")]
use crate::data::stats::Counts;
use crate::data::stats::{DeadLetter, Stats};
#[cfg(feature = "redis")]
use crate::queue::{arg, parse, Inner};
use crate::queue::{Backend, Queue};
#[cfg(feature = "redis")]
use crate::redis::keys::Keys;
#[cfg(feature = "redis")]
use crate::redis::scripts;

/// How many dead letters one `requeue_all` / `purge_all` script moves, or
/// one `dead_letters` script lists.
#[cfg(feature = "redis")]
const BATCH: usize = 500;

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
        match &self.inner.backend {
            #[cfg(feature = "embedded")]
            Backend::Embedded(local) => local.stats().await,
            #[cfg(feature = "redis")]
            Backend::Redis(_) => self.stats_redis().await,
        }
    }

    #[cfg(feature = "redis")]
    async fn stats_redis(&self) -> Result<Stats, Error> {
        let mut partitions = Vec::with_capacity(self.inner.redis().partitions.len());
        for (p, keys) in self.inner.redis().partitions.iter().enumerate() {
            let reply: Vec<i64> = self
                .inner
                .eval(&scripts::STATS_SCRIPT, keys, Vec::new())
                .await?;
            partitions.push(stats_from_reply(p as u32, &reply)?);
        }
        Ok(Stats::total(partitions))
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
        match &self.inner.backend {
            #[cfg(feature = "embedded")]
            Backend::Embedded(local) => local.dead_letters(limit).await,
            #[cfg(feature = "redis")]
            Backend::Redis(_) => self.dead_letters_redis(limit).await,
        }
    }

    #[cfg(feature = "redis")]
    async fn dead_letters_redis(&self, limit: usize) -> Result<Vec<DeadLetter>, Error> {
        let mut all = Vec::new();
        for (p, keys) in self.inner.redis().partitions.iter().enumerate() {
            // This partition's newest `limit`, a page of BATCH at a time.
            let first = all.len();
            loop {
                let offset = all.len() - first;
                let count = (limit - offset).min(BATCH);
                let reply: Vec<Value> = self
                    .inner
                    .eval(
                        &scripts::DEAD_LIST_SCRIPT,
                        keys,
                        vec![arg(&offset.to_string()), arg(&count.to_string())],
                    )
                    .await?;
                let got = dead_from_reply(p as u32, reply, &mut all)?;
                if got < count || all.len() - first == limit {
                    break;
                }
            }
        }
        all.sort_by(|a, b| b.died_at.cmp(&a.died_at).then_with(|| a.id.cmp(&b.id)));
        all.truncate(limit);
        Ok(all)
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
        match &self.inner.backend {
            #[cfg(feature = "embedded")]
            Backend::Embedded(local) => local.requeue(id).await,
            #[cfg(feature = "redis")]
            Backend::Redis(_) => self.requeue_redis(id).await,
        }
    }

    #[cfg(feature = "redis")]
    async fn requeue_redis(&self, id: &JobId) -> Result<bool, Error> {
        crate::data::id::check_job_id(id.as_str())?;
        let keys = self.inner.keys_of(id);
        let moved: i64 = self
            .inner
            .eval(&scripts::REQUEUE_SCRIPT, keys, vec![arg(id.as_str())])
            .await?;
        Ok(moved == 1)
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
        match &self.inner.backend {
            #[cfg(feature = "embedded")]
            Backend::Embedded(local) => local.requeue_all().await,
            #[cfg(feature = "redis")]
            Backend::Redis(_) => self.requeue_all_redis().await,
        }
    }

    #[cfg(feature = "redis")]
    async fn requeue_all_redis(&self) -> Result<u64, Error> {
        self.in_batches(&scripts::REQUEUE_ALL_SCRIPT, |_| {
            vec![arg(&BATCH.to_string())]
        })
        .await
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
        match &self.inner.backend {
            #[cfg(feature = "embedded")]
            Backend::Embedded(local) => local.purge(id).await,
            #[cfg(feature = "redis")]
            Backend::Redis(_) => self.purge_redis(id).await,
        }
    }

    #[cfg(feature = "redis")]
    async fn purge_redis(&self, id: &JobId) -> Result<bool, Error> {
        crate::data::id::check_job_id(id.as_str())?;
        let keys = self.inner.keys_of(id);
        let removed: i64 = self
            .inner
            .eval(&scripts::PURGE_SCRIPT, keys, vec![arg(id.as_str())])
            .await?;
        Ok(removed == 1)
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
        match &self.inner.backend {
            #[cfg(feature = "embedded")]
            Backend::Embedded(local) => local.purge_all().await,
            #[cfg(feature = "redis")]
            Backend::Redis(_) => self.purge_all_redis().await,
        }
    }

    #[cfg(feature = "redis")]
    async fn purge_all_redis(&self) -> Result<u64, Error> {
        self.in_batches(&scripts::PURGE_ALL_SCRIPT, |_| {
            vec![arg(&BATCH.to_string())]
        })
        .await
    }

    /// Runs a batch script on every partition until it reports a short
    /// batch, or has handled as many dead letters as the partition held
    /// when it began (so jobs that die again as fast as they are requeued
    /// cannot keep it going); returns the sum of what it reported.
    #[cfg(feature = "redis")]
    async fn in_batches(
        &self,
        script: &redis::Script,
        args: impl Fn(&Keys) -> Vec<Vec<u8>>,
    ) -> Result<u64, Error> {
        let inner: &Inner = &self.inner;
        let mut total = 0;
        for keys in &inner.redis().partitions {
            let mut left: u64 = inner.query(redis::cmd("ZCARD").arg(keys.dead())).await?;
            while left > 0 {
                let n: u64 = inner.eval(script, keys, args(keys)).await?;
                total += n;
                left = left.saturating_sub(n);
                if n < BATCH as u64 {
                    break;
                }
            }
        }
        Ok(total)
    }
}

impl Queue {
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
        match &self.inner.backend {
            #[cfg(feature = "embedded")]
            Backend::Embedded(local) => local.lateness().await,
            #[cfg(feature = "redis")]
            Backend::Redis(_) => self.lateness_redis().await,
        }
    }

    #[cfg(feature = "redis")]
    async fn lateness_redis(&self) -> Result<Lateness, Error> {
        let mut lateness = Lateness::default();
        lateness.add_stored(&[]);
        for keys in &self.inner.redis().partitions {
            let stored: Option<Vec<u8>> = self
                .inner
                .query(redis::cmd("GET").arg(keys.lateness()))
                .await?;
            lateness.add_stored(stored.as_deref().unwrap_or_default());
        }
        Ok(lateness)
    }
}

/// Appends one partition's dead letters from the list script's reply;
/// returns how many.
#[cfg(feature = "redis")]
fn dead_from_reply(
    partition: u32,
    reply: Vec<Value>,
    out: &mut Vec<DeadLetter>,
) -> Result<usize, Error> {
    let mut fields = reply.into_iter();
    let now: i64 = parse(fields.next())?;
    let rest: Vec<Value> = fields.collect();
    let listed = rest.len() / 5;
    if rest.len() % 5 != 0 {
        return Err(unexpected_reply("the dead-letter script"));
    }
    let mut rows = rest.into_iter();
    while let Some(id) = rows.next() {
        let id: String = parse(Some(id))?;
        let died: i64 = parse(rows.next())?;
        let attempts: u32 = parse(rows.next())?;
        let payload_len: u64 = parse(rows.next())?;
        let last_error: Option<Vec<u8>> = parse(rows.next())?;
        out.push(DeadLetter {
            id: JobId::from(id),
            partition,
            died_at: at_ms(died).unwrap_or(SystemTime::UNIX_EPOCH),
            dead_for: Duration::from_millis(u64::try_from(now - died).unwrap_or(0)),
            attempts,
            payload_len,
            last_error: last_error.map(|e| String::from_utf8_lossy(&e).into_owned()),
        });
    }
    Ok(listed)
}

/// A time in ms since the epoch; `None` for the scripts' `-1`.
#[cfg(feature = "redis")]
pub(crate) fn at_ms(ms: i64) -> Option<SystemTime> {
    let ms = u64::try_from(ms).ok()?;
    Some(SystemTime::UNIX_EPOCH + Duration::from_millis(ms))
}

/// One partition's numbers from the stats script's reply.
#[cfg(feature = "redis")]
pub(crate) fn stats_from_reply(partition: u32, reply: &[i64]) -> Result<Stats, Error> {
    let [now, pending, due_now, earliest_due, leased, expired, earliest_expiry, dead, latest_death] =
        *reply
    else {
        return Err(unexpected_reply("the stats script"));
    };
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    let time = |n: i64| u64::try_from(n).ok();
    let counts = Counts {
        now_ms: count(now),
        pending: count(pending),
        due_now: count(due_now),
        earliest_due_ms: time(earliest_due),
        leased: count(leased),
        expired_leases: count(expired),
        earliest_lease_expiry_ms: time(earliest_expiry),
        dead: count(dead),
        latest_death_ms: time(latest_death),
        damaged_frames: 0,
    };
    Ok(Stats::of_partition(partition, counts))
}

/// The Lua that defines `record_lateness(key, late_ms)`, to be included
/// in the claim script (see the file's comments).
#[cfg(feature = "redis")]
pub(crate) const RECORD_LATENESS: &str = include_str!("redis/lua/record_lateness.lua");

/// Adds a partition's lateness histogram as Redis stores it: big-endian
/// `u32`s, one per bucket (`BITFIELD`'s layout), missing bytes being
/// zeros.
#[cfg(feature = "redis")]
pub(crate) trait AddStored {
    fn add_stored(&mut self, bytes: &[u8]);
}

#[cfg(feature = "redis")]
impl AddStored for Lateness {
    fn add_stored(&mut self, bytes: &[u8]) {
        let buckets = LATENESS_BOUNDS_MS.len() + 1;
        let mut counts = vec![0; buckets];
        for (i, chunk) in bytes.chunks(4).take(buckets).enumerate() {
            let mut word = [0u8; 4];
            word[..chunk.len()].copy_from_slice(chunk);
            counts[i] = u64::from(u32::from_be_bytes(word));
        }
        self.add(&Lateness::from_counts(counts));
    }
}

#[cfg(feature = "redis")]
pub(crate) fn unexpected_reply(what: &str) -> Error {
    Error::Redis(redis::RedisError::from((
        redis::ErrorKind::UnexpectedReturnType,
        "unexpected reply",
        what.to_owned(),
    )))
}

#[cfg(all(test, feature = "redis"))]
mod tests {
    use super::*;

    fn ms(ms: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
    }

    #[test]
    fn a_partition_snapshot_reads_overdue_from_one_clock() {
        let stats = stats_from_reply(2, &[10_000, 5, 2, 7_000, 1, 0, 40_000, 3, 9_000]).unwrap();
        assert_eq!(stats.partition, Some(2));
        assert_eq!(stats.redis_time, ms(10_000));
        assert_eq!((stats.pending, stats.due_now), (5, 2));
        assert_eq!(stats.earliest_due, Some(ms(7_000)));
        assert_eq!(stats.overdue, Duration::from_secs(3));
        assert_eq!(stats.next_due_in(), Some(Duration::ZERO));
        assert_eq!(stats.earliest_lease_expiry, Some(ms(40_000)));
        assert_eq!((stats.dead, stats.latest_death), (3, Some(ms(9_000))));
        assert_eq!(
            stats.to_string(),
            "pending 5 (2 due, most overdue 3s), leased 1, dead 3"
        );

        let idle = stats_from_reply(0, &[10_000, 1, 0, 250_000, 0, 0, -1, 0, -1]).unwrap();
        assert_eq!(idle.overdue, Duration::ZERO);
        assert_eq!(idle.next_due_in(), Some(Duration::from_secs(240)));
        assert_eq!(idle.earliest_lease_expiry, None);
        assert_eq!(
            idle.to_string(),
            "pending 1 (next due in 4m), leased 0, dead 0"
        );
        assert!(stats_from_reply(0, &[1, 2, 3]).is_err());
    }

    #[test]
    fn totals_sum_counts_and_take_extremes() {
        let a = stats_from_reply(0, &[10_000, 5, 2, 7_000, 1, 1, 9_500, 3, 9_000]).unwrap();
        let b = stats_from_reply(1, &[10_004, 4, 1, 8_000, 2, 0, 12_000, 0, -1]).unwrap();
        let total = Stats::total(vec![a.clone(), b.clone()]);
        assert_eq!(total.partition, None);
        assert_eq!(total.redis_time, ms(10_004));
        assert_eq!((total.pending, total.due_now), (9, 3));
        assert_eq!(total.earliest_due, Some(ms(7_000)));
        assert_eq!(total.overdue, Duration::from_secs(3));
        assert_eq!((total.leased, total.expired_leases), (3, 1));
        assert_eq!(total.earliest_lease_expiry, Some(ms(9_500)));
        assert_eq!((total.dead, total.latest_death), (3, Some(ms(9_000))));
        assert_eq!(total.partitions, vec![a, b]);
        assert_eq!(
            total.to_string(),
            "pending 9 (3 due, most overdue 3s), leased 3 (1 lease(s) expired), dead 3"
        );
    }
}

#[cfg(all(test, feature = "redis"))]
mod lateness_tests {
    use super::*;

    fn stored(counts: &[(usize, u32)]) -> Vec<u8> {
        let mut bytes = vec![0u8; 4 * 20];
        for &(i, n) in counts {
            bytes[4 * i..4 * i + 4].copy_from_slice(&n.to_be_bytes());
        }
        bytes
    }

    #[test]
    fn stored_counters_decode_sum_and_subtract() {
        let mut a = Lateness::default();
        a.add_stored(&stored(&[(0, 5), (3, 2), (19, 1)]));
        a.add_stored(&stored(&[(0, 1)])[..3]); // short: missing bytes are zeros
        a.add_stored(&stored(&[(3, 1)]));
        let buckets = a.buckets();
        assert_eq!(buckets[0], (Some(Duration::ZERO), 5));
        assert_eq!(buckets[3], (Some(Duration::from_millis(5)), 3));
        assert_eq!(buckets[19], (None, 1));
        assert_eq!(a.total(), 9);
        assert_eq!(a.quantile(0.5), Some(Duration::ZERO));
        assert_eq!(a.quantile(0.8), Some(Duration::from_millis(5)));
        assert_eq!(a.quantile(1.0), None);
        let mut b = Lateness::default();
        b.add_stored(&stored(&[(0, 2)]));
        let between = a.since(&b);
        assert_eq!(between.total(), 7);
        assert_eq!(between.buckets()[0].1, 3);
    }

    /// The Lua recorder against a real redis-server: bucket edges match
    /// [`LATENESS_BOUNDS_MS`], one command per batch, and the counters
    /// saturate.
    #[test]
    fn the_lua_recorder_fills_the_buckets_rust_reads() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut server = match std::process::Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(std::process::Stdio::null())
            .spawn()
        {
            Ok(child) => child,
            Err(e) => panic!(
                "this test needs redis-server on PATH (apt-get install -y redis-server): {e}"
            ),
        };
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
        let mut conn = (0..500)
            .find_map(|_| {
                client.get_connection().ok().or_else(|| {
                    std::thread::sleep(Duration::from_millis(10));
                    None
                })
            })
            .expect("redis-server started");
        let script = redis::Script::new(&format!(
            "{RECORD_LATENESS}\nrecord_lateness(KEYS[1], cjson.decode(ARGV[1]))"
        ));
        let mut record = |values: &str| {
            let _: () = script
                .key("h")
                .arg(values)
                .invoke(&mut conn)
                .expect("record");
        };
        // Every bound and one past it: bucket i gets the bound itself and
        // bucket i + 1 the value after it.
        let mut values: Vec<u64> = Vec::new();
        for &bound in &LATENESS_BOUNDS_MS {
            values.push(bound);
            values.push(bound + 1);
        }
        let before: u64 = stat(&client, "cmdstat_bitfield");
        record(&format!("{values:?}"));
        assert_eq!(
            stat(&client, "cmdstat_bitfield") - before,
            1,
            "one BITFIELD per batch"
        );
        record("[]");
        let mut conn = client.get_connection().unwrap();
        let bytes: Vec<u8> = redis::cmd("GET").arg("h").query(&mut conn).unwrap();
        let mut read = Lateness::default();
        read.add_stored(&bytes);
        let counts: Vec<u64> = read.buckets().iter().map(|b| b.1).collect();
        // Bucket 0 holds only 0; bucket i >= 1 holds bound[i - 1] + 1 and
        // bound[i] (for 0 -> 1 and 1 -> 2 those are the same value, twice);
        // the last holds one past the last bound.
        let mut expected = vec![2u64; 20];
        expected[0] = 1;
        expected[19] = 1;
        assert_eq!(counts, expected, "{values:?}");
        // Saturation: a counter stops at u32::MAX instead of wrapping.
        let _: () = redis::cmd("BITFIELD")
            .arg(&["h", "SET", "u32", "#5", &u32::MAX.to_string()])
            .query(&mut conn)
            .unwrap();
        record("[20]");
        let bytes: Vec<u8> = redis::cmd("GET").arg("h").query(&mut conn).unwrap();
        let mut read = Lateness::default();
        read.add_stored(&bytes);
        assert_eq!(read.buckets()[5].1, u64::from(u32::MAX));
        let _ = server.kill();
        let _ = server.wait();
    }

    /// How many times Redis ran a command (`INFO commandstats`).
    fn stat(client: &redis::Client, which: &str) -> u64 {
        let mut conn = client.get_connection().unwrap();
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut conn)
            .unwrap();
        info.lines()
            .find_map(|line| line.strip_prefix(&format!("{which}:calls=")))
            .and_then(|rest| rest.split(',').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    }
}
