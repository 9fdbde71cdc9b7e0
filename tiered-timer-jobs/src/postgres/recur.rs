//! Recurring jobs on Postgres: the `recurrences` table (migration 2 of
//! `schema.rs`) and the transactions that register, replace, pause,
//! resume and remove them, and that claim their occurrences.
//!
//! # Design
//!
//! A recurrence's waiting occurrence is an ordinary job row with `chain`
//! set. The plain claim statement passes such rows over and says when one
//! is due; the handle then claims it in a transaction of its own
//! ([`Shared::claim_occurrences`]): the recurrence's row and the
//! occurrence's are locked (`FOR UPDATE ... SKIP LOCKED`, so concurrent
//! claimers take different ones and never wait), the decision of
//! [`Recurrence::advance`] is made here in Rust (SQL has no cron), the
//! occurrence is leased (or, skipped, deleted), the next occurrence is
//! inserted with `chain` set, and the recurrence's row records it, all in
//! one commit. A process that dies in between commits nothing: the
//! occurrence stays waiting, the chain as it was. Once claimed, an
//! occurrence is a plain job (`chain` cleared): its retries, lease expiry
//! and dead letter are every job's.
//!
//! Every "now" is the database's `clock_timestamp()`, as for every job.
//! Registrations of one name are serialized by a transaction-scoped
//! advisory lock, so processes that register the same recurrence at once
//! make one chain.

use std::time::Duration;

use sqlx::{PgConnection, Row};
use tiered_timer::Instant;

use super::backend::{ms, pg, PostgresBackend, Shared};
use super::schema::stable_hash;
use crate::contract::{Claimed, LeaseToken, NewRecurrence};
use crate::data::error::Error;
use crate::data::id::JobId;
use crate::data::limits::at_ms;
use crate::data::recurrence::{occurrence_id, LastRun, Missed, Recurrence, RecurrenceInfo};
use crate::targets;

/// The database's now in ms (rounded down), as the claim reads it.
const NOW_MS: &str = "floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint";

/// How many occurrences of one id's time taken by a leased job are
/// stepped over before the chain gives up (only a redefinition that
/// lands on occurrences still held can meet one).
const MAX_STEPS: usize = 16;

/// A recurrence's row, as the transactions read it.
struct Row_ {
    spec: String,
    zone: String,
    missed: String,
    payload: Vec<u8>,
    paused: bool,
    version: i32,
    pending_id: Option<String>,
    /// The pending occurrence's job is there and waiting.
    pending_waiting: bool,
}

impl Shared {
    /// Runs `work` within the command timeout.
    async fn timed<T>(
        &self,
        work: impl std::future::Future<Output = Result<T, Error>>,
    ) -> Result<T, Error> {
        match tiered_timer::timeout(self.timeout, work).await {
            Ok(done) => done,
            Err(_) => Err(Error::Timeout {
                after: self.timeout,
            }),
        }
    }

    fn sql_err(&self, error: sqlx::Error) -> Error {
        pg(error, self.timeout)
    }

    /// The database's now (ms).
    async fn now_in(&self, tx: &mut PgConnection) -> Result<u64, Error> {
        let now: i64 = sqlx::query(&format!("SELECT {NOW_MS}"))
            .fetch_one(&mut *tx)
            .await
            .map_err(|e| self.sql_err(e))?
            .get(0);
        Ok(u64::try_from(now).unwrap_or(0))
    }

    /// Locks and reads recurrence `name`'s row, if there is one.
    async fn lock_row(&self, tx: &mut PgConnection, name: &str) -> Result<Option<Row_>, Error> {
        let s = &self.sql.schema;
        let row = sqlx::query(&format!(
            "SELECT r.spec, r.zone, r.missed, r.payload, r.paused, r.version, r.pending_id,
               EXISTS (SELECT 1 FROM {s}.jobs AS j WHERE j.queue = r.queue
                 AND j.id = r.pending_id AND j.state = 0)
             FROM {s}.recurrences AS r WHERE r.queue = $1 AND r.name = $2 FOR UPDATE"
        ))
        .bind(&self.name)
        .bind(name)
        .fetch_optional(&mut *tx)
        .await
        .map_err(|e| self.sql_err(e))?;
        Ok(row.map(|row| Row_ {
            spec: row.get(0),
            zone: row.get(1),
            missed: row.get(2),
            payload: row.get(3),
            paused: row.get(4),
            version: row.get(5),
            pending_id: row.get(6),
            pending_waiting: row.get(7),
        }))
    }

    /// Deletes a recurrence's occurrence `id` if it is still waiting.
    async fn drop_waiting(&self, tx: &mut PgConnection, id: Option<&str>) -> Result<(), Error> {
        let Some(id) = id else { return Ok(()) };
        let s = &self.sql.schema;
        sqlx::query(&format!(
            "DELETE FROM {s}.jobs WHERE queue = $1 AND id = $2 AND state = 0"
        ))
        .bind(&self.name)
        .bind(id)
        .execute(&mut *tx)
        .await
        .map_err(|e| self.sql_err(e))?;
        Ok(())
    }

    /// Makes the occurrence at `at` of `name` wait, marked `chain`: a new
    /// row, a dead letter of its id replaced, or a waiting one adopted;
    /// past an id still leased, the next occurrence. Returns its id and
    /// time (`None`: no occurrence could be scheduled).
    async fn put_occurrence(
        &self,
        tx: &mut PgConnection,
        name: &str,
        recurrence: Option<&Recurrence>,
        payload: &[u8],
        mut at: u64,
    ) -> Result<Option<(String, u64)>, Error> {
        let s = &self.sql.schema;
        let put = format!(
            "WITH ins AS (
               INSERT INTO {s}.jobs AS j (queue, id, state, at_ms, payload, chain, created_ms)
               VALUES ($1, $2, 0, $3, $4, true,
                 floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint)
               ON CONFLICT (queue, id) DO UPDATE SET state = 0, at_ms = excluded.at_ms,
                 payload = excluded.payload, attempts = 0, token = NULL, deadline_ms = NULL,
                 last_error = NULL, chain = true, {fresh}
               WHERE j.state <> 1
               RETURNING at_ms)
             SELECT pg_notify($5, at_ms::text) FROM ins",
            fresh = super::sql::FRESH,
        );
        for _ in 0..MAX_STEPS {
            let id = occurrence_id(name, at);
            let put = sqlx::query(&put)
                .bind(&self.name)
                .bind(&id)
                .bind(ms(at))
                .bind(payload)
                .bind(&self.channel)
                .fetch_optional(&mut *tx)
                .await
                .map_err(|e| self.sql_err(e))?;
            if put.is_some() {
                return Ok(Some((id, at)));
            }
            match recurrence.and_then(|r| r.next_after_ms(ms(at))) {
                Some(later) => at = later,
                None => return Ok(None),
            }
        }
        Ok(None)
    }

    /// Records where recurrence `name`'s chain is.
    async fn set_pending(
        &self,
        tx: &mut PgConnection,
        name: &str,
        pending: Option<(String, u64)>,
        run: u32,
    ) -> Result<(), Error> {
        let s = &self.sql.schema;
        let (id, at) = pending.map_or((None, None), |(id, at)| (Some(id), Some(ms(at))));
        sqlx::query(&format!(
            "UPDATE {s}.recurrences SET pending_id = $3, pending_ms = $4, run = $5
             WHERE queue = $1 AND name = $2"
        ))
        .bind(&self.name)
        .bind(name)
        .bind(id)
        .bind(at)
        .bind(i32::try_from(run).unwrap_or(0))
        .execute(&mut *tx)
        .await
        .map_err(|e| self.sql_err(e))?;
        Ok(())
    }

    /// Claims up to `max` due occurrences, each in this one transaction
    /// with the scheduling of its next (see the module docs). Skipped
    /// occurrences ([`Missed::Skip`]) are deleted, not returned.
    pub(super) async fn claim_occurrences(&self, max: usize) -> Result<Vec<Claimed>, Error> {
        let sent = Instant::now();
        self.timed(async {
            let mut tx = self.pool.begin().await.map_err(|e| self.sql_err(e))?;
            let claimed = self.claim_occurrences_in(&mut tx, max, sent).await?;
            tx.commit().await.map_err(|e| self.sql_err(e))?;
            Ok(claimed)
        })
        .await
    }

    async fn claim_occurrences_in(
        &self,
        tx: &mut PgConnection,
        max: usize,
        sent: Instant,
    ) -> Result<Vec<Claimed>, Error> {
        let s = &self.sql.schema;
        let due = sqlx::query(&format!(
            "WITH t AS MATERIALIZED (SELECT {NOW_MS} AS now)
             SELECT (SELECT now FROM t), r.name, r.spec, r.zone, r.missed, r.payload, r.run,
               r.pending_ms, j.id
             FROM {s}.recurrences AS r JOIN {s}.jobs AS j
               ON j.queue = r.queue AND j.id = r.pending_id
             WHERE r.queue = $1 AND j.chain AND j.state = 0 AND j.at_ms <= (SELECT now FROM t)
             ORDER BY j.at_ms LIMIT $2
             FOR UPDATE OF r, j SKIP LOCKED"
        ))
        .bind(&self.name)
        .bind(i64::try_from(max).unwrap_or(i64::MAX))
        .fetch_all(&mut *tx)
        .await
        .map_err(|e| self.sql_err(e))?;
        let mut claimed = Vec::with_capacity(due.len());
        for row in due {
            let now = u64::try_from(row.get::<i64, _>(0)).unwrap_or(0);
            let name: String = row.get(1);
            let (spec, zone, missed): (String, String, String) =
                (row.get(2), row.get(3), row.get(4));
            let payload: Vec<u8> = row.get(5);
            let run = u32::try_from(row.get::<i32, _>(6)).unwrap_or(0);
            let at = u64::try_from(row.get::<i64, _>(7)).unwrap_or(0);
            let id: String = row.get(8);
            let recurrence = Recurrence::parse_stored(&spec, &zone, &missed);
            if let Err(error) = &recurrence {
                tracing::warn!(target: targets::POSTGRES, queue = %self.name, recurrence = %name, %error, "a recurrence this build cannot read: its chain stops after this occurrence");
            }
            let recurrence = recurrence.ok();
            let (deliver, next, run) = match &recurrence {
                Some(r) => {
                    let advance = r.advance(at, now, run);
                    (advance.deliver, advance.next, advance.run)
                }
                None => (true, None, 0),
            };
            if deliver {
                claimed.push(self.lease_occurrence(tx, &id, now, sent).await?);
            } else {
                self.drop_waiting(tx, Some(&id)).await?;
            }
            let pending = match next {
                Some(next) => {
                    self.put_occurrence(tx, &name, recurrence.as_ref(), &payload, next)
                        .await?
                }
                None => None,
            };
            self.set_pending(tx, &name, pending, run).await?;
            if deliver {
                sqlx::query(&format!(
                    "UPDATE {s}.recurrences SET last_id = $3, last_ms = $4
                     WHERE queue = $1 AND name = $2"
                ))
                .bind(&self.name)
                .bind(&name)
                .bind(&id)
                .bind(ms(at))
                .execute(&mut *tx)
                .await
                .map_err(|e| self.sql_err(e))?;
            }
        }
        Ok(claimed)
    }

    /// Leases a waiting occurrence as the claim statement leases a job:
    /// attempt + 1, a fresh token, a lease from the database's now; it is
    /// a plain job from here on (`chain` cleared).
    async fn lease_occurrence(
        &self,
        tx: &mut PgConnection,
        id: &str,
        now: u64,
        sent: Instant,
    ) -> Result<Claimed, Error> {
        let s = &self.sql.schema;
        let row = sqlx::query(&format!(
            "UPDATE {s}.jobs SET state = 1, chain = NULL, at_ms = $3 + $4,
               attempts = attempts + 1, token = nextval('{s}.tokens'), deadline_ms = at_ms,
               claimed_ms = $3, holder = $5
             WHERE queue = $1 AND id = $2
             RETURNING payload, deadline_ms, attempts, token"
        ))
        .bind(&self.name)
        .bind(id)
        .bind(ms(now))
        .bind(ms(self.lease_ms))
        .bind(&self.holder)
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| self.sql_err(e))?;
        Ok(Claimed {
            partition: 0,
            id: JobId::from(id),
            payload: row.get(0),
            deadline_ms: u64::try_from(row.get::<i64, _>(1)).unwrap_or(0),
            attempt: u32::try_from(row.get::<i32, _>(2)).unwrap_or(0),
            token: LeaseToken::Number(u64::try_from(row.get::<i64, _>(3)).unwrap_or(0)),
            lease: Duration::from_millis(self.lease_ms),
            sent,
            expired: false,
            claimed_ms: now,
        })
    }
}

impl PostgresBackend {
    /// See [`Backend::recur`](crate::contract::Backend::recur).
    pub(super) async fn recur_one(&self, new: NewRecurrence) -> Result<bool, Error> {
        let s = &self.shared;
        s.timed(async {
            let mut tx = s.pool.begin().await.map_err(|e| s.sql_err(e))?;
            let lock = stable_hash(&["recurrence", &s.sql.schema, &s.name, &new.name]) as i64;
            sqlx::query("SELECT pg_advisory_xact_lock($1)")
                .bind(lock)
                .execute(&mut *tx)
                .await
                .map_err(|e| s.sql_err(e))?;
            let changed = self.recur_in(&mut tx, &new).await?;
            tx.commit().await.map_err(|e| s.sql_err(e))?;
            Ok(changed)
        })
        .await
    }

    async fn recur_in(&self, tx: &mut PgConnection, new: &NewRecurrence) -> Result<bool, Error> {
        let s = &self.shared;
        let r = &new.recurrence;
        let (spec, zone, missed) = (r.spec(), r.time_zone_name(), r.missed_policy().to_string());
        let old = s.lock_row(tx, &new.name).await?;
        let same = old.as_ref().is_some_and(|o| {
            o.spec == spec && o.zone == zone && o.missed == missed && o.payload == new.payload
        });
        if let (true, Some(old)) = (same, &old) {
            if old.paused || old.pending_waiting {
                return Ok(false);
            }
        }
        if !same {
            s.drop_waiting(tx, old.as_ref().and_then(|o| o.pending_id.as_deref()))
                .await?;
        }
        let paused = old.as_ref().is_some_and(|o| o.paused);
        let pending = if paused {
            None
        } else {
            self.schedule_next(tx, &new.name, r, &new.payload).await?
        };
        let version = match &old {
            Some(o) if same => o.version,
            Some(o) => o.version.wrapping_add(1),
            None => 1,
        };
        let (pending_id, pending_ms) =
            pending.map_or((None, None), |(id, at)| (Some(id), Some(ms(at))));
        let schema = &s.sql.schema;
        sqlx::query(&format!(
            "INSERT INTO {schema}.recurrences
               (queue, name, version, spec, zone, missed, payload, paused, pending_id, pending_ms, run)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 0)
             ON CONFLICT (queue, name) DO UPDATE SET version = excluded.version,
               spec = excluded.spec, zone = excluded.zone, missed = excluded.missed,
               payload = excluded.payload, paused = excluded.paused,
               pending_id = excluded.pending_id, pending_ms = excluded.pending_ms, run = 0"
        ))
        .bind(&s.name)
        .bind(&new.name)
        .bind(version)
        .bind(&spec)
        .bind(zone)
        .bind(&missed)
        .bind(&new.payload)
        .bind(paused)
        .bind(pending_id)
        .bind(pending_ms)
        .execute(&mut *tx)
        .await
        .map_err(|e| s.sql_err(e))?;
        Ok(true)
    }

    /// Schedules the first occurrence after the database's now.
    async fn schedule_next(
        &self,
        tx: &mut PgConnection,
        name: &str,
        recurrence: &Recurrence,
        payload: &[u8],
    ) -> Result<Option<(String, u64)>, Error> {
        let s = &self.shared;
        let now = s.now_in(tx).await?;
        match recurrence.next_after_ms(ms(now)) {
            Some(at) => {
                s.put_occurrence(tx, name, Some(recurrence), payload, at)
                    .await
            }
            None => Ok(None),
        }
    }

    /// See [`Backend::unrecur`](crate::contract::Backend::unrecur).
    pub(super) async fn unrecur_one(&self, name: &str) -> Result<bool, Error> {
        let s = &self.shared;
        s.timed(async {
            let mut tx = s.pool.begin().await.map_err(|e| s.sql_err(e))?;
            let Some(old) = s.lock_row(&mut tx, name).await? else {
                return Ok(false);
            };
            s.drop_waiting(&mut tx, old.pending_id.as_deref()).await?;
            let schema = &s.sql.schema;
            sqlx::query(&format!(
                "DELETE FROM {schema}.recurrences WHERE queue = $1 AND name = $2"
            ))
            .bind(&s.name)
            .bind(name)
            .execute(&mut *tx)
            .await
            .map_err(|e| s.sql_err(e))?;
            tx.commit().await.map_err(|e| s.sql_err(e))?;
            Ok(true)
        })
        .await
    }

    /// See [`Backend::pause_recurrence`](crate::contract::Backend::pause_recurrence).
    pub(super) async fn pause_one(&self, name: &str, paused: bool) -> Result<bool, Error> {
        let s = &self.shared;
        s.timed(async {
            let mut tx = s.pool.begin().await.map_err(|e| s.sql_err(e))?;
            let Some(old) = s.lock_row(&mut tx, name).await? else {
                return Ok(false);
            };
            if old.paused == paused {
                return Ok(true);
            }
            let pending = if paused {
                s.drop_waiting(&mut tx, old.pending_id.as_deref()).await?;
                None
            } else {
                let recurrence = Recurrence::parse_stored(&old.spec, &old.zone, &old.missed)?;
                self.schedule_next(&mut tx, name, &recurrence, &old.payload)
                    .await?
            };
            s.set_pending(&mut tx, name, pending, 0).await?;
            let schema = &s.sql.schema;
            sqlx::query(&format!(
                "UPDATE {schema}.recurrences SET paused = $3 WHERE queue = $1 AND name = $2"
            ))
            .bind(&s.name)
            .bind(name)
            .bind(paused)
            .execute(&mut *tx)
            .await
            .map_err(|e| s.sql_err(e))?;
            tx.commit().await.map_err(|e| s.sql_err(e))?;
            Ok(true)
        })
        .await
    }

    /// See [`Backend::recurrences`](crate::contract::Backend::recurrences):
    /// one statement, the last occurrence's job joined for its fate.
    pub(super) async fn list_recurrences(&self) -> Result<Vec<RecurrenceInfo>, Error> {
        let s = &self.shared;
        let schema = &s.sql.schema;
        let rows = s
            .timed(async {
                sqlx::query(&format!(
                    "SELECT r.name, r.spec, r.zone, r.missed, r.paused, r.pending_ms, r.last_ms,
                       j.state, j.last_error
                     FROM {schema}.recurrences AS r LEFT JOIN {schema}.jobs AS j
                       ON j.queue = r.queue AND j.id = r.last_id
                     WHERE r.queue = $1 ORDER BY r.name"
                ))
                .bind(&s.name)
                .fetch_all(&s.pool)
                .await
                .map_err(|e| s.sql_err(e))
            })
            .await?;
        let time = |value: Option<i64>| value.map(|ms| at_ms(u64::try_from(ms).unwrap_or(0)));
        Ok(rows
            .iter()
            .map(|row| {
                let paused: bool = row.get(4);
                let last = time(row.get(6));
                let state: Option<i16> = row.get(7);
                RecurrenceInfo {
                    name: row.get(0),
                    spec: row.get(1),
                    time_zone: row.get(2),
                    missed: Missed::parse(row.get(3)).unwrap_or_default(),
                    paused,
                    next: time(row.get(5)).filter(|_| !paused),
                    last,
                    last_run: last.map(|_| match state {
                        Some(1) => LastRun::Running,
                        Some(0) => LastRun::Retrying,
                        Some(_) => LastRun::Dead,
                        None => LastRun::Done,
                    }),
                    last_error: row.get(8),
                }
            })
            .collect())
    }
}
