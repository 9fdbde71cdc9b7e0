//! The Redis side of the operator's calls: a queue's numbers, its
//! lateness histogram, dead letters in pages, bulk requeues and purges,
//! one job, pages of jobs.
//!
//! Ground rules:
//!
//! * Every read is one script per partition (`lua/stats.lua`,
//!   `lua/dead_list.lua`, `lua/inspect_job.lua`, `lua/list_jobs.lua`), so
//!   each partition's numbers are one snapshot at one instant of Redis'
//!   clock ("how overdue" is that instant minus the earliest due time,
//!   never a local clock against Redis'). Partitions are read one after
//!   another, so a total is a sum of snapshots a round trip apart.
//! * Bulk changes (`*_all`) and dead-letter listings go in batches of
//!   [`BATCH`] dead letters per script, so no single script holds Redis
//!   for long, and stop when a batch comes back short.
//! * The lateness histogram is kept by the claim script, one `BITFIELD`
//!   per claim batch (`lua/record_lateness.lua`): per bucket a saturating
//!   big-endian `u32`, read back with one `GET` per partition.

use std::time::{Duration, SystemTime};

use redis::{Script, Value};

use super::backend::RedisBackend;
use super::reply::{arg, ms, parse, unexpected_reply};
use super::scripts;
use crate::data::error::Error;
use crate::data::history::{history, Outcome, StoredAttempt, Throughput};
use crate::data::id::JobId;
use crate::data::lateness::{Lateness, LATENESS_BOUNDS_MS};
use crate::data::limits::at_ms;
use crate::data::listing::{JobInfo, JobState, JobSummary, Listing, Page, PREVIEW};
use crate::data::stats::{Counts, DeadLetter, Stats};

/// How many dead letters one `requeue_all` / `purge_all` script moves, or
/// one `dead_letters` script lists; how many rows one list script reads
/// on a partitioned queue.
const BATCH: usize = 500;

impl RedisBackend {
    /// Every partition's numbers, and their total.
    pub(super) async fn stats_of_partitions(&self) -> Result<Stats, Error> {
        let mut partitions = Vec::with_capacity(self.partitions.len());
        for (p, keys) in self.partitions.iter().enumerate() {
            let reply: Vec<i64> = self.eval(&scripts::STATS_SCRIPT, keys, Vec::new()).await?;
            partitions.push(stats_from_reply(p as u32, &reply)?);
        }
        Ok(Stats::total(partitions))
    }

    /// The lateness histograms of every partition, summed.
    pub(super) async fn stored_lateness(&self) -> Result<Lateness, Error> {
        let mut lateness = Lateness::default();
        lateness.add_stored(&[]);
        for keys in &self.partitions {
            let stored: Option<Vec<u8>> =
                self.query(redis::cmd("GET").arg(keys.lateness())).await?;
            lateness.add_stored(stored.as_deref().unwrap_or_default());
        }
        Ok(lateness)
    }

    /// The counts per minute of every partition from `since_ms`, summed
    /// (one script per partition; Redis' now is the last one's).
    pub(super) async fn stored_throughput(&self, since_ms: u64) -> Result<Throughput, Error> {
        let mut now_ms = 0;
        let mut counts = Vec::new();
        for keys in &self.partitions {
            let reply: Vec<i64> = self
                .eval(
                    &scripts::THROUGHPUT_SCRIPT,
                    keys,
                    vec![arg(&since_ms.to_string())],
                )
                .await?;
            let (now, rows) = reply
                .split_first()
                .ok_or_else(|| unexpected_reply("the throughput script"))?;
            if rows.len() % 3 != 0 {
                return Err(unexpected_reply("the throughput script"));
            }
            now_ms = ms(*now).unwrap_or(0);
            for row in rows.chunks_exact(3) {
                let [minute, processed, failed] =
                    [row[0], row[1], row[2]].map(|n| ms(n).unwrap_or(0));
                counts.push((minute, processed, failed));
            }
        }
        Ok(Throughput::from_counts(now_ms, since_ms, counts))
    }

    /// Up to `limit` dead letters, newest first: each partition's newest
    /// `limit`, a page of [`BATCH`] at a time, then the newest of all.
    pub(super) async fn dead_letter_pages(&self, limit: usize) -> Result<Vec<DeadLetter>, Error> {
        let mut all = Vec::new();
        for (p, keys) in self.partitions.iter().enumerate() {
            let first = all.len();
            loop {
                let offset = all.len() - first;
                let count = (limit - offset).min(BATCH);
                let reply: Vec<Value> = self
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

    /// Runs a batch script on every partition until it reports a short
    /// batch, or has handled as many dead letters as the partition held
    /// when it began (so jobs that die again as fast as they are requeued
    /// cannot keep it going); returns the sum of what it reported.
    pub(super) async fn in_batches(&self, script: &Script) -> Result<u64, Error> {
        let mut total = 0;
        for keys in &self.partitions {
            let mut left: u64 = self.query(redis::cmd("ZCARD").arg(keys.dead())).await?;
            while left > 0 {
                let n: u64 = self
                    .eval(script, keys, vec![arg(&BATCH.to_string())])
                    .await?;
                total += n;
                left = left.saturating_sub(n);
                if n < BATCH as u64 {
                    break;
                }
            }
        }
        Ok(total)
    }

    /// Everything stored about one job, by one script on its partition.
    pub(super) async fn inspect(&self, id: &JobId) -> Result<Option<JobInfo>, Error> {
        let reply: Vec<Value> = self
            .eval(
                &scripts::INSPECT_JOB_SCRIPT,
                self.keys_of(id),
                vec![arg(id.as_str())],
            )
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
        let created: i64 = parse(fields.next())?;
        let claimed: i64 = parse(fields.next())?;
        let holder: Option<Vec<u8>> = parse(fields.next())?;
        let ended: Option<Vec<u8>> = parse(fields.next())?;
        let holder = holder.map(|h| String::from_utf8_lossy(&h).into_owned());
        let running = match (state, ms(claimed)) {
            (JobState::Leased, Some(claimed_ms)) => Some(StoredAttempt {
                number: attempts,
                claimed_ms,
                holder: holder.clone(),
                outcome: Outcome::Running,
                ended_ms: None,
                error: None,
            }),
            _ => None,
        };
        let ended = parse_history(ended.as_deref().unwrap_or_default());
        let time = |value: i64| ms(value).map(at_ms);
        let (due, lease_expiry, died_at) = match state {
            JobState::Waiting => (time(score), None, None),
            JobState::Leased => (time(deadline), time(score), None),
            JobState::Dead => (time(deadline), None, time(score)),
        };
        Ok(Some(JobInfo {
            id: id.clone(),
            partition: self.partition_of(id),
            state,
            redis_time: redis_time(now),
            due,
            lease_expiry,
            died_at,
            attempts,
            last_error: last_error.map(|e| String::from_utf8_lossy(&e).into_owned()),
            payload,
            created: time(created),
            holder: holder.filter(|_| state == JobState::Leased),
            history: history(ended, running),
        }))
    }

    /// A page of a listing: one script on a queue of one partition; with
    /// several, each partition read from its start to the page's end (the
    /// caller keeps that end within reach) and the pages merged.
    pub(super) async fn page(
        &self,
        listing: Listing,
        offset: usize,
        limit: usize,
    ) -> Result<Page, Error> {
        if self.partitions.len() == 1 {
            let (now, total, jobs) = self.list_partition(listing, 0, offset, limit).await?;
            return Ok(Page {
                redis_time: now,
                total,
                offset,
                jobs,
            });
        }
        let end = offset.saturating_add(limit);
        let mut redis_time = SystemTime::UNIX_EPOCH;
        let mut total = 0;
        let mut jobs = Vec::new();
        for p in 0..self.partitions.len() as u32 {
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
    async fn list_partition(
        &self,
        listing: Listing,
        partition: u32,
        offset: usize,
        count: usize,
    ) -> Result<(SystemTime, u64, Vec<JobSummary>), Error> {
        let keys = &self.partitions[partition as usize];
        let args = vec![
            arg(listing.as_str()),
            arg(&offset.to_string()),
            arg(&count.to_string()),
            arg(&PREVIEW.to_string()),
        ];
        let reply: Vec<Value> = self.eval(&scripts::LIST_JOBS_SCRIPT, keys, args).await?;
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
                at: redis_time(score),
                attempts,
                payload_len,
                payload_preview,
                last_error: last_error.map(|e| String::from_utf8_lossy(&e).into_owned()),
            });
        }
        Ok((redis_time(now), total, jobs))
    }
}

/// A time a script read, as a `SystemTime` (the epoch for none).
fn redis_time(value: i64) -> SystemTime {
    ms(value).map_or(SystemTime::UNIX_EPOCH, at_ms)
}

/// One partition's numbers from the stats script's reply.
fn stats_from_reply(partition: u32, reply: &[i64]) -> Result<Stats, Error> {
    let [now, pending, due_now, earliest_due, leased, expired, earliest_expiry, dead, latest_death] =
        *reply
    else {
        return Err(unexpected_reply("the stats script"));
    };
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    let counts = Counts {
        now_ms: count(now),
        pending: count(pending),
        due_now: count(due_now),
        earliest_due_ms: ms(earliest_due),
        leased: count(leased),
        expired_leases: count(expired),
        earliest_lease_expiry_ms: ms(earliest_expiry),
        dead: count(dead),
        latest_death_ms: ms(latest_death),
        damaged_frames: 0,
    };
    Ok(Stats::of_partition(partition, counts))
}

/// Appends one partition's dead letters from the list script's reply;
/// returns how many.
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
            died_at: redis_time(died),
            dead_for: Duration::from_millis(u64::try_from(now - died).unwrap_or(0)),
            attempts,
            payload_len,
            last_error: last_error.map(|e| String::from_utf8_lossy(&e).into_owned()),
        });
    }
    Ok(listed)
}

/// Adds a partition's lateness histogram as Redis stores it: big-endian
/// `u32`s, one per bucket (`BITFIELD`'s layout), missing bytes being
/// zeros.
trait AddStored {
    fn add_stored(&mut self, bytes: &[u8]);
}

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

#[cfg(test)]
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

#[cfg(test)]
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
            "{}\nrecord_lateness(KEYS[1], cjson.decode(ARGV[1]))",
            scripts::RECORD_LATENESS
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

/// A job's ended attempts as its `h` field holds them (see
/// `lua/history.lua`): `attempt,claimed,ended,outcome,holder
/// bytes,error bytes:` then the holder and the error, per attempt. What
/// does not read so is left out (from there on).
fn parse_history(mut raw: &[u8]) -> Vec<StoredAttempt> {
    let mut all = Vec::new();
    while let Some(colon) = raw.iter().position(|&b| b == b':') {
        let Some(attempt) = parse_entry(&raw[..colon], &raw[colon + 1..]) else {
            break;
        };
        let (stored, len) = attempt;
        all.push(stored);
        raw = &raw[colon + 1 + len..];
    }
    all
}

/// One ended attempt from its head (before the colon) and what follows
/// it; with how many bytes of what follows it took.
fn parse_entry(head: &[u8], rest: &[u8]) -> Option<(StoredAttempt, usize)> {
    let head = std::str::from_utf8(head).ok()?;
    let mut parts = head.split(',');
    let mut next = || parts.next();
    let number: u32 = next()?.parse().ok()?;
    let claimed_ms: u64 = next()?.parse().ok()?;
    let ended_ms: u64 = next()?.parse().ok()?;
    let outcome = match next()? {
        "r" => Outcome::Retried,
        "f" => Outcome::Failed,
        "l" => Outcome::Released,
        "x" => Outcome::LeaseExpired,
        "b" => Outcome::Buried,
        _ => return None,
    };
    let holder_len: usize = next()?.parse().ok()?;
    let error_len: i64 = next()?.parse().ok()?;
    let holder = rest.get(..holder_len)?;
    let (error, len) = match usize::try_from(error_len) {
        Ok(n) => (
            Some(rest.get(holder_len..holder_len + n)?.to_vec()),
            holder_len + n,
        ),
        Err(_) => (None, holder_len),
    };
    Some((
        StoredAttempt {
            number,
            claimed_ms,
            holder: Some(String::from_utf8_lossy(holder).into_owned()),
            outcome,
            ended_ms: Some(ended_ms),
            error,
        },
        len,
    ))
}

#[cfg(test)]
mod history_tests {
    use super::*;

    #[test]
    fn histories_read_as_the_scripts_write_them() {
        let raw = b"1,100,200,f,3,4:h:1boom2,300,400,x,5,-1:h,:2:3,500,600,b,0,0:";
        let all = parse_history(raw);
        assert_eq!(all.len(), 3);
        assert_eq!(all[0].outcome, Outcome::Failed);
        assert_eq!(all[0].holder.as_deref(), Some("h:1"));
        assert_eq!(all[0].error.as_deref(), Some(&b"boom"[..]));
        assert_eq!((all[1].claimed_ms, all[1].ended_ms), (300, Some(400)));
        assert_eq!(all[1].holder.as_deref(), Some("h,:2:"));
        assert_eq!(all[1].error, None);
        assert_eq!(all[2].error.as_deref(), Some(&b""[..]));
        // Garbage ends the history, never panics.
        for cut in 0..raw.len() {
            let _ = parse_history(&raw[..cut]);
        }
        assert!(parse_history(b"1,2,3,?,0,-1:").is_empty());
    }
}
