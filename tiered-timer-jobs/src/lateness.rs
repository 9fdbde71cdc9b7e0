//! How late claims were: a bounded histogram per partition, kept in Redis
//! by the claim script, read by [`Queue::lateness`].
//!
//! Ground rules:
//!
//! * Lateness is Redis' now at the claim minus the job's due time, both on
//!   Redis' clock, counted in the claim script itself; no client clock is
//!   involved.
//! * Recording costs one `BITFIELD` per claim batch, whatever its size
//!   (`src/lua/record_lateness.lua`, [`RECORD_LATENESS`]): per bucket of
//!   [`LATENESS_BOUNDS_MS`] a saturating `u32` counter, so the key is at
//!   most 80 bytes per partition, forever.
//! * The counters only grow: "recent" lateness is the difference of two
//!   reads ([`Lateness::since`]), which is what the dashboard charts.

use std::time::Duration;

use crate::error::Error;
use crate::keys::LATENESS_BOUNDS_MS;
use crate::queue::{Backend, Queue};

/// The Lua that defines `record_lateness(key, late_ms)`, to be included
/// in the claim script (see the file's comments).
#[cfg(feature = "redis")]
pub(crate) const RECORD_LATENESS: &str = include_str!("lua/record_lateness.lua");

/// A histogram of how late jobs were claimed (Redis' now at the claim
/// minus the due time), from [`Queue::lateness`].
///
/// Buckets are fixed: 0 ms (on time to the millisecond), up to 1, 2, 5, 10,
/// 20, 50, 100, 200, 500 ms, 1, 2, 5, 10, 30 s, 1, 5, 15 min, 1 h, and
/// later. Counts only grow (each saturates at `u32::MAX` per partition);
/// subtract an earlier read with [`since`](Lateness::since) for a recent
/// window.
///
/// # Examples
///
/// ```no_run
/// # use tiered_timer_jobs::Queue;
/// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
/// let before = queue.lateness().await?;
/// tokio::time::sleep(std::time::Duration::from_secs(60)).await;
/// let last_minute = queue.lateness().await?.since(&before);
/// println!("{} claims, 99% within {:?}", last_minute.total(), last_minute.quantile(0.99));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Lateness {
    counts: Vec<u64>,
}

impl Lateness {
    /// The buckets: each one's upper bound (inclusive; `None` for the last,
    /// which has none) and its count.
    ///
    /// # Examples
    ///
    /// ```
    /// let empty = tiered_timer_jobs::Lateness::default();
    /// let buckets = empty.buckets();
    /// assert_eq!(buckets.len(), 20);
    /// assert_eq!(buckets[0], (Some(std::time::Duration::ZERO), 0));
    /// assert_eq!(buckets[19].0, None);
    /// ```
    pub fn buckets(&self) -> Vec<(Option<Duration>, u64)> {
        let bounds = LATENESS_BOUNDS_MS
            .iter()
            .map(|&ms| Some(Duration::from_millis(ms)))
            .chain([None]);
        bounds
            .enumerate()
            .map(|(i, bound)| (bound, self.counts.get(i).copied().unwrap_or(0)))
            .collect()
    }

    /// How many claims were counted.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(tiered_timer_jobs::Lateness::default().total(), 0);
    /// ```
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The upper bound of the bucket holding the `q`-quantile (`q` in
    /// 0..=1): "a fraction `q` of the claims were at most this late".
    /// `None` if nothing was counted, or if the quantile falls in the last
    /// bucket (later than an hour).
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(tiered_timer_jobs::Lateness::default().quantile(0.5), None);
    /// ```
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        let total = self.total();
        if total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (bound, count) in self.buckets() {
            seen += count;
            if seen >= rank {
                return bound;
            }
        }
        None
    }

    /// The claims counted in `self` but not in `earlier` (an older read of
    /// the same queue): the lateness of the claims in between.
    ///
    /// # Examples
    ///
    /// ```
    /// use tiered_timer_jobs::Lateness;
    /// assert_eq!(Lateness::default().since(&Lateness::default()).total(), 0);
    /// ```
    pub fn since(&self, earlier: &Lateness) -> Lateness {
        let counts = (0..self.counts.len().max(earlier.counts.len()))
            .map(|i| {
                let now = self.counts.get(i).copied().unwrap_or(0);
                now.saturating_sub(earlier.counts.get(i).copied().unwrap_or(0))
            })
            .collect();
        Lateness { counts }
    }

    /// Adds a partition's histogram, as stored: big-endian `u32`s, one per
    /// bucket (`BITFIELD`'s layout), missing bytes being zeros.
    /// The embedded store's counters, bucket by bucket.
    #[cfg(feature = "embedded")]
    pub(crate) fn from_counts(counts: Vec<u64>) -> Lateness {
        Lateness { counts }
    }

    #[cfg(feature = "redis")]
    fn add_stored(&mut self, bytes: &[u8]) {
        let buckets = LATENESS_BOUNDS_MS.len() + 1;
        self.counts.resize(buckets, 0);
        for (i, chunk) in bytes.chunks(4).take(buckets).enumerate() {
            let mut word = [0u8; 4];
            word[..chunk.len()].copy_from_slice(chunk);
            self.counts[i] += u64::from(u32::from_be_bytes(word));
        }
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

#[cfg(all(test, feature = "redis"))]
mod tests {
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
