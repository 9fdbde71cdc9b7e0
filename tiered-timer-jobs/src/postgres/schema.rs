//! The schema the Postgres backend keeps its queues in: where it is (the
//! URL's `schema` parameter), its tables, and how it is created and
//! migrated.
//!
//! # Tables
//!
//! * `jobs`: one row per job that exists (waiting, leased or dead),
//!   keyed by `(queue, id)`. `state` is 0 (waiting), 1 (leased) or 2
//!   (dead); `at_ms` is the one time that orders each state (the due
//!   time, the lease expiry, the time of death, in ms of the database's
//!   clock); `deadline_ms` the due time of the delivery a lease or a
//!   death belongs to; `token` the lease's fencing token. One index,
//!   `(queue, state, at_ms)`, serves every claim (due jobs and expired
//!   leases are each a range of it, earliest first), the next wake-up
//!   time (its first entry per state), the listings and the counts.
//!   An ack deletes the row: nothing accumulates, so the table's size is
//!   its live jobs plus what autovacuum has not yet reclaimed.
//! * `queues`: the queues created here (what `find_queues` lists).
//! * `lateness`: how late claims were, per queue and bucket, spread over
//!   16 slots (a connection's slot is its backend pid mod 16) so that
//!   concurrent claims do not queue on one row.
//! * `recurrences` (version 2): one row per recurring job, keyed by
//!   `(queue, name)`: its definition, its waiting occurrence (a job whose
//!   `chain` column is set), its last delivered one and its run of
//!   missed ones (see `recur.rs`).
//! * `throughput` (version 3): jobs processed (acked) and attempts failed
//!   per queue and minute (of the database's clock), spread over 16 slots
//!   like `lateness`, counted by the statements that ack or end an
//!   attempt; minutes older than a day are deleted by the next count.
//! * `schema_version`: the last migration applied.
//!
//! Version 2 added the `chain` column (a recurrence's waiting occurrence)
//! and the `recurrences` table. Version 3 added to `jobs` the job's
//! creation time (`created_ms`), its
//! running attempt's claim time and holder (`claimed_ms`, `holder`), and
//! its ended attempts (`history`, a jsonb array of at most `HISTORY_LEN`
//! objects `{n, c, h, o, e, r}`: attempt number, claimed, holder,
//! outcome code, ended, error), each written by the statement that
//! claims the job or ends the attempt. Later additions are new
//! migrations the same way: a column or a table beside these, never a
//! rewrite of `jobs`.
//!
//! # Migrations
//!
//! [`migrate`] runs in one transaction under a transaction-scoped
//! advisory lock derived from the schema's name, so processes that start
//! at once apply each migration exactly once; a schema already at this
//! version is checked with one read and no lock. A schema written by a
//! newer version of the crate is refused, never downgraded. Handles that
//! only look ([`Builder::register(false)`](crate::Builder::register))
//! never create or migrate anything.

use sqlx::{Executor, PgConnection, Row};

use crate::data::error::Error;

/// The schema used when the URL names none.
pub(crate) const DEFAULT_SCHEMA: &str = "tiered_timer_jobs";

/// The migrations, in order; version `n` is `MIGRATIONS[n - 1]`. `{s}`
/// stands for the schema's (checked) name.
const MIGRATIONS: &[&str] = &[
    // 1: the jobs, the queues, the lateness histogram, the lease tokens.
    //
    // The storage parameters make autovacuum keep up with a table whose
    // every row is inserted, updated once or twice and deleted: vacuum
    // after 1 000 dead rows plus 1 % of the table (not the default 20 %,
    // which on a busy queue lets dead rows pile into the millions before
    // the first vacuum), without the cost-based sleeps that make vacuum
    // fall behind such a table (River's and Oban's trackers are full of
    // both).
    "CREATE TABLE {s}.jobs (
        queue text NOT NULL,
        id text NOT NULL,
        state smallint NOT NULL,
        at_ms bigint NOT NULL,
        deadline_ms bigint,
        attempts integer NOT NULL DEFAULT 0,
        token bigint,
        last_error text,
        payload bytea NOT NULL,
        PRIMARY KEY (queue, id)
    ) WITH (
        autovacuum_vacuum_scale_factor = 0.01,
        autovacuum_vacuum_threshold = 1000,
        autovacuum_vacuum_insert_scale_factor = 0.01,
        autovacuum_vacuum_insert_threshold = 1000,
        autovacuum_analyze_scale_factor = 0.02,
        autovacuum_vacuum_cost_delay = 0
    );
    CREATE INDEX jobs_by_time ON {s}.jobs (queue, state, at_ms);
    CREATE TABLE {s}.queues (
        name text PRIMARY KEY,
        created_at timestamptz NOT NULL DEFAULT clock_timestamp()
    );
    CREATE TABLE {s}.lateness (
        queue text NOT NULL,
        slot integer NOT NULL,
        bucket integer NOT NULL,
        count bigint NOT NULL,
        PRIMARY KEY (queue, slot, bucket)
    );
    CREATE SEQUENCE {s}.tokens;",
    // 2: recurring jobs (`recur.rs`). A recurrence's waiting occurrence
    // is a job marked `chain`, which plain claims pass over: the claim of
    // an occurrence is a transaction that also schedules the next one.
    // Adding a column without a default rewrites nothing; the partial
    // index holds only the waiting occurrences (one per recurrence).
    "ALTER TABLE {s}.jobs ADD COLUMN chain boolean;
    CREATE INDEX jobs_chained ON {s}.jobs (queue, at_ms) WHERE chain;
    CREATE TABLE {s}.recurrences (
        queue text NOT NULL,
        name text NOT NULL,
        version integer NOT NULL,
        spec text NOT NULL,
        zone text NOT NULL,
        missed text NOT NULL,
        payload bytea NOT NULL,
        paused boolean NOT NULL DEFAULT false,
        pending_id text,
        pending_ms bigint,
        last_id text,
        last_ms bigint,
        run integer NOT NULL DEFAULT 0,
        PRIMARY KEY (queue, name)
    );",
    // 3: what operators read of the past (issue 34, part 4; the bounds
    // are src/data/history.rs'). Each job's creation time, the claim time
    // and holder of its running attempt, and its ended attempts (a jsonb
    // array, oldest first, at most HISTORY_LEN: written by the statement
    // that ends an attempt, deleted with the row); jobs processed and
    // failed per minute, per queue, spread over 16 slots as `lateness` is,
    // the last day kept. New nullable columns without a default: no
    // rewrite of `jobs`, rows written before version 3 read as "not recorded".
    // `IF NOT EXISTS`: a half-applied schema (by hand) is completed, not
    // refused.
    "ALTER TABLE {s}.jobs
        ADD COLUMN IF NOT EXISTS created_ms bigint,
        ADD COLUMN IF NOT EXISTS claimed_ms bigint,
        ADD COLUMN IF NOT EXISTS holder text,
        ADD COLUMN IF NOT EXISTS history jsonb;
    CREATE TABLE IF NOT EXISTS {s}.throughput (
        queue text NOT NULL,
        minute bigint NOT NULL,
        slot integer NOT NULL,
        processed bigint NOT NULL,
        failed bigint NOT NULL,
        PRIMARY KEY (queue, minute, slot)
    );",
];

/// The schema version this build writes and reads.
pub(crate) const VERSION: i32 = MIGRATIONS.len() as i32;

/// Splits a `postgres://` URL into what sqlx connects to and the schema
/// its queues are in (its `schema` query parameter, removed from the
/// URL; [`DEFAULT_SCHEMA`] if none).
///
/// # Errors
///
/// [`Error::InvalidUrl`] if the schema is not a plain lower-case SQL
/// name (it is written into statements), or if sqlx cannot parse the
/// rest. The URL is not repeated: it may hold a password.
pub(crate) fn split_url(url: &str) -> Result<(String, String), Error> {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, query),
        None => (url, ""),
    };
    let mut schema = None;
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.strip_prefix("schema=") {
            Some(name) => schema = Some(name.to_owned()),
            None => kept.push(pair),
        }
    }
    let schema = schema.unwrap_or_else(|| DEFAULT_SCHEMA.to_owned());
    check_schema(&schema)?;
    let rest = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    if let Err(error) = rest.parse::<sqlx::postgres::PgConnectOptions>() {
        return Err(Error::InvalidUrl {
            reason: format!("not a Postgres URL sqlx can connect to: {}", redact(&error)),
        });
    }
    Ok((rest, schema))
}

/// sqlx's parse error, without anything that could be the URL.
fn redact(error: &sqlx::Error) -> String {
    match error {
        sqlx::Error::Configuration(inner) => inner.to_string(),
        other => other.to_string(),
    }
}

/// A schema name is written into statements: it must be a plain
/// lower-case name (no quoting needed, nothing to inject).
fn check_schema(name: &str) -> Result<(), Error> {
    let mut chars = name.chars();
    let plain = matches!(chars.next(), Some('a'..='z' | '_'))
        && chars.all(|c| matches!(c, 'a'..='z' | '0'..='9' | '_'))
        && name.len() <= 63;
    if plain {
        Ok(())
    } else {
        Err(Error::InvalidUrl {
            reason: "the schema parameter must be a lower-case SQL name: a-z, 0-9 and _, \
                     not starting with a digit, at most 63 bytes"
                .to_owned(),
        })
    }
}

/// A stable 64-bit hash (FNV-1a): the advisory lock's key and the
/// NOTIFY channel's name are derived from names with it, the same in
/// every process and every build.
pub(crate) fn stable_hash(parts: &[&str]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for byte in part.bytes().chain([0xff]) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

/// The NOTIFY channel of a queue: one per (schema, queue), named by a
/// hash since queue names may be longer than a channel name can be (a
/// collision only wakes a handle for nothing).
pub(crate) fn channel(schema: &str, queue: &str) -> String {
    format!("ttr_{:016x}", stable_hash(&[schema, queue]))
}

/// The schema's version: `None` if it has no version table (not created).
async fn version(conn: &mut PgConnection, schema: &str) -> Result<Option<i32>, sqlx::Error> {
    let table = format!("{schema}.schema_version");
    let exists: bool = sqlx::query("SELECT to_regclass($1) IS NOT NULL")
        .bind(&table)
        .fetch_one(&mut *conn)
        .await?
        .get(0);
    if !exists {
        return Ok(None);
    }
    let row = sqlx::query(&format!("SELECT max(version) FROM {table}"))
        .fetch_one(&mut *conn)
        .await?;
    Ok(Some(row.get::<Option<i32>, _>(0).unwrap_or(0)))
}

/// The error for a schema written by a newer version of this crate.
fn newer(schema: &str, found: i32) -> Error {
    Error::Postgres(sqlx::Error::Protocol(format!(
        "schema {schema} is at version {found}, newer than this build's {VERSION}: \
         upgrade tiered-timer-jobs (nothing was changed)"
    )))
}

/// Whether the schema exists at this build's version, without writing
/// anything (for handles that only look): `Ok(false)` if it was never
/// created.
///
/// # Errors
///
/// [`Error::Postgres`]; a schema at a newer version.
pub(crate) async fn check(conn: &mut PgConnection, schema: &str) -> Result<bool, Error> {
    match version(conn, schema).await.map_err(Error::Postgres)? {
        None => Ok(false),
        Some(found) if found > VERSION => Err(newer(schema, found)),
        Some(found) => Ok(found == VERSION),
    }
}

/// Creates the schema or brings it to this build's version, in one
/// transaction under an advisory lock (so processes that start together
/// apply each migration once).
///
/// # Errors
///
/// [`Error::Postgres`]; a schema at a newer version.
pub(crate) async fn migrate(conn: &mut PgConnection, schema: &str) -> Result<(), Error> {
    if check(conn, schema).await? {
        return Ok(());
    }
    let lock = stable_hash(&["tiered_timer_jobs schema", schema]) as i64;
    let mut tx = sqlx::Connection::begin(&mut *conn)
        .await
        .map_err(Error::Postgres)?;
    let applied = async {
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(lock)
            .execute(&mut *tx)
            .await?;
        tx.execute(
            format!(
                "CREATE SCHEMA IF NOT EXISTS {schema};
                 CREATE TABLE IF NOT EXISTS {schema}.schema_version (version integer NOT NULL)"
            )
            .as_str(),
        )
        .await?;
        let found = version(&mut tx, schema).await?.unwrap_or(0);
        for (index, migration) in MIGRATIONS.iter().enumerate().skip(found.max(0) as usize) {
            tx.execute(migration.replace("{s}", schema).as_str())
                .await?;
            sqlx::query(&format!(
                "INSERT INTO {schema}.schema_version (version) VALUES ($1)"
            ))
            .bind(index as i32 + 1)
            .execute(&mut *tx)
            .await?;
            tracing::info!(target: crate::targets::POSTGRES, schema, version = index + 1, "schema migrated");
        }
        Ok::<i32, sqlx::Error>(found)
    }
    .await
    .map_err(Error::Postgres)?;
    if applied > VERSION {
        return Err(newer(schema, applied));
    }
    tx.commit().await.map_err(Error::Postgres)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_parameter_is_taken_out_of_the_url_and_checked() {
        let (url, schema) = split_url("postgres://u:secret@h:5432/db").unwrap();
        assert_eq!(
            (url.as_str(), schema.as_str()),
            ("postgres://u:secret@h:5432/db", DEFAULT_SCHEMA)
        );
        let (url, schema) =
            split_url("postgres://h/db?sslmode=disable&schema=jobs_2&application_name=x").unwrap();
        assert_eq!(url, "postgres://h/db?sslmode=disable&application_name=x");
        assert_eq!(schema, "jobs_2");
        for bad in ["Jobs", "1jobs", "jobs;drop", "a\"b", ""] {
            let error = split_url(&format!("postgres://u:secret@h/db?schema={bad}")).unwrap_err();
            assert!(error.to_string().contains("lower-case SQL name"), "{error}");
            assert!(!error.to_string().contains("secret"), "{error}");
        }
    }

    #[test]
    fn channels_are_valid_names_that_differ_by_schema_and_queue() {
        let a = channel("s", "orders");
        assert_eq!(a.len(), 4 + 16);
        assert_ne!(a, channel("t", "orders"));
        assert_ne!(a, channel("s", "orders2"));
        // The separator keeps ("ab", "c") apart from ("a", "bc").
        assert_ne!(channel("ab", "c"), channel("a", "bc"));
    }
}
