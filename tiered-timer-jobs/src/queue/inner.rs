//! What every [`Queue`](super::Queue) and [`Job`] call needs of a queue
//! handle, whatever the backend: its settings, the checks of input, and
//! the calls a [`Job`] makes on its queue (ack, retry, extend, release),
//! dispatched to the backend.

use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

#[cfg(feature = "redis")]
use super::{arg, RedisPart};
use super::{Backend, Due, Inner};
use crate::data::error::Error;
use crate::data::id::check_job_id;
use crate::data::id::JobId;
use crate::data::limits::{millis_up, MAX_DEADLINE_MS, MAX_SPAN_MS};
#[cfg(feature = "redis")]
use crate::data::limits::{CHUNK_BYTES, CHUNK_JOBS};
#[cfg(feature = "redis")]
use crate::redis::keys::{partition_of, Keys};
#[cfg(feature = "redis")]
use crate::redis::scripts;

impl Inner {
    /// The Redis backend's state. Only Redis code paths call it: every
    /// public method dispatches on [`Inner::local`] first.
    #[cfg(feature = "redis")]
    #[track_caller]
    pub(crate) fn redis(&self) -> &RedisPart {
        match &self.backend {
            Backend::Redis(redis) => redis,
            #[cfg(feature = "embedded")]
            Backend::Embedded(_) => unreachable!("a Redis call on an embedded queue"),
        }
    }

    /// The embedded backend's state, if this queue is on it.
    #[cfg(feature = "embedded")]
    pub(crate) fn local(&self) -> Option<&crate::embedded::queue::Local> {
        match &self.backend {
            Backend::Embedded(local) => Some(local),
            #[cfg(feature = "redis")]
            Backend::Redis(_) => None,
        }
    }

    /// Whether this queue is on Redis.
    #[cfg(feature = "redis")]
    pub(crate) fn is_redis(&self) -> bool {
        match &self.backend {
            Backend::Redis(_) => true,
            #[cfg(feature = "embedded")]
            Backend::Embedded(_) => false,
        }
    }

    /// `"redis"` or `"embedded"`.
    pub(super) fn backend_name(&self) -> &'static str {
        match &self.backend {
            #[cfg(feature = "redis")]
            Backend::Redis(_) => "redis",
            #[cfg(feature = "embedded")]
            Backend::Embedded(_) => "embedded",
        }
    }

    /// The lease a claim grants.
    #[cfg(feature = "embedded")]
    pub(crate) fn lease(&self) -> Duration {
        self.lease
    }

    #[cfg(feature = "redis")]
    pub(crate) fn keys_of(&self, id: &JobId) -> &Keys {
        let p = partition_of(id.as_str(), self.redis().partitions.len() as u32);
        &self.redis().partitions[p as usize]
    }

    /// Checks a job; returns how its due time goes to the scripts: a
    /// delay (`d`) or an absolute due time (`a`), in ms.
    pub(super) fn checked_due(
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
            MAX_SPAN_MS
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
    pub(super) async fn schedule_chunks(
        &self,
        jobs: impl Iterator<Item = (JobId, Due, Vec<u8>)>,
        delays: bool,
    ) -> Result<(Vec<JobId>, usize), Error> {
        match &self.backend {
            #[cfg(feature = "embedded")]
            Backend::Embedded(local) => {
                let mut checked = Vec::new();
                for (id, due, payload) in jobs {
                    let (_, value) = self.checked_due(&id, due, &payload)?;
                    checked.push((id, value, payload));
                }
                let written = local.schedule_chunks(&checked, delays).await?;
                Ok((checked.into_iter().map(|(id, _, _)| id).collect(), written))
            }
            #[cfg(feature = "redis")]
            Backend::Redis(_) => {
                let n = self.redis().partitions.len() as u32;
                let mut ids = Vec::new();
                let mut by_partition: Vec<Vec<(usize, u64, Vec<u8>)>> =
                    vec![Vec::new(); n as usize];
                for (id, due, payload) in jobs {
                    let (_, value) = self.checked_due(&id, due, &payload)?;
                    by_partition[partition_of(id.as_str(), n) as usize].push((
                        ids.len(),
                        value,
                        payload,
                    ));
                    ids.push(id);
                }
                // One "now" per clock: on a single Redis every chunk counts its
                // delays from the first script's `TIME`; on a cluster, each
                // partition from its own node's (the clock that decides when its
                // jobs are due).
                let one_clock = self.redis().conn.is_single();
                let mode = if delays { "d" } else { "a" };
                let mut base: Option<u64> = None;
                let mut written = 0;
                for (keys, jobs) in self.redis().partitions.iter().zip(by_partition) {
                    if !one_clock {
                        base = None;
                    }
                    let mut jobs = jobs.into_iter().peekable();
                    while jobs.peek().is_some() {
                        let base_arg = base.map_or_else(Vec::new, |ms| arg(&ms.to_string()));
                        let mut args = vec![arg(mode), base_arg];
                        let mut bytes = 0;
                        for (index, value, payload) in jobs.by_ref() {
                            bytes += payload.len();
                            args.extend([
                                arg(ids[index].as_str()),
                                arg(&value.to_string()),
                                payload,
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
                if !ids.is_empty() {
                    self.register().await;
                }
                Ok((ids, written))
            }
        }
    }

    /// Runs the ack script (fenced by the token only; see
    /// [`Job::ack`]).
    #[cfg_attr(not(feature = "redis"), allow(unused_variables))]
    pub(crate) async fn ack(&self, partition: u32, id: &JobId, token: &str) -> Result<bool, Error> {
        match &self.backend {
            #[cfg(feature = "embedded")]
            Backend::Embedded(local) => local.ack(id, token).await,
            #[cfg(feature = "redis")]
            Backend::Redis(_) => {
                let keys = &self.redis().partitions[partition as usize];
                let done: i64 = self
                    .eval(
                        &scripts::ACK_SCRIPT,
                        keys,
                        vec![arg(id.as_str()), arg(token)],
                    )
                    .await?;
                Ok(done == 1)
            }
        }
    }

    /// Runs the retry script: 1 rescheduled, 2 buried (it was the last
    /// attempt), 0 lease lost.
    #[cfg_attr(not(feature = "redis"), allow(unused_variables))]
    pub(crate) async fn retry(
        &self,
        partition: u32,
        id: &JobId,
        token: &str,
        delay: Duration,
    ) -> Result<i64, Error> {
        let delay = millis_up(delay);
        if delay > MAX_SPAN_MS {
            return Err(Error::InvalidDeadline);
        }
        let done = match &self.backend {
            #[cfg(feature = "embedded")]
            Backend::Embedded(local) => local.retry(id, token, delay, self.max_attempts).await?,
            #[cfg(feature = "redis")]
            Backend::Redis(_) => self.retry_redis(partition, id, token, delay).await?,
        };
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
    #[cfg_attr(not(feature = "redis"), allow(unused_variables))]
    pub(crate) async fn extend(
        &self,
        partition: u32,
        id: &JobId,
        token: &str,
        lease_ms: u64,
    ) -> Result<bool, Error> {
        match &self.backend {
            #[cfg(feature = "embedded")]
            Backend::Embedded(local) => Ok(local.extend(id, token, lease_ms)),
            #[cfg(feature = "redis")]
            Backend::Redis(_) => {
                let keys = &self.redis().partitions[partition as usize];
                let expiry: i64 = self
                    .eval(
                        &scripts::EXTEND_SCRIPT,
                        keys,
                        vec![arg(id.as_str()), arg(token), arg(&lease_ms.to_string())],
                    )
                    .await?;
                Ok(expiry != 0)
            }
        }
    }

    /// Hands a held job back (see [`Job::release`]); `false` if the lease
    /// was lost.
    #[cfg_attr(not(feature = "redis"), allow(unused_variables))]
    pub(crate) async fn release(
        &self,
        partition: u32,
        id: &JobId,
        token: &str,
    ) -> Result<bool, Error> {
        match &self.backend {
            #[cfg(feature = "embedded")]
            Backend::Embedded(local) => local.release(id, token).await,
            #[cfg(feature = "redis")]
            Backend::Redis(_) => {
                let keys = &self.redis().partitions[partition as usize];
                let done: i64 = self
                    .eval(
                        &scripts::RELEASE_SCRIPT,
                        keys,
                        vec![arg(id.as_str()), arg(token)],
                    )
                    .await?;
                Ok(done == 1)
            }
        }
    }
}
