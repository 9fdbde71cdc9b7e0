//! The calls that run in the caller's own transaction (or on any sqlx
//! executor): schedule and cancel beside a business change, and an ack
//! committed with the job's effects. They are the same statements as the
//! handle's own (`sql.rs`), sent on the caller's connection: a job
//! scheduled in a transaction that rolls back never existed, and its
//! `pg_notify` is never delivered; one that commits wakes the waiting
//! workers at the commit.
//!
//! No command timeout here: the connection and its transaction are the
//! caller's, and cutting a statement short would leave them in a state
//! only the caller can clean up (sqlx's own `statement_timeout` or the
//! server's apply).

use sqlx::PgExecutor;

use super::backend::{ack_query, acked, schedule_query, PostgresBackend};
use crate::contract::{Lease, NewJob};
use crate::data::error::Error;
use crate::data::id::JobId;

impl PostgresBackend {
    /// Schedules a checked job on `executor`, unless its id is waiting
    /// or leased (as `schedule`).
    pub(crate) async fn schedule_in<'c, E: PgExecutor<'c>>(
        &self,
        executor: E,
        job: NewJob,
    ) -> Result<(), Error> {
        schedule_query(&self.shared, &job)
            .fetch_optional(executor)
            .await
            .map_err(Error::Postgres)?;
        Ok(())
    }

    /// Cancels a waiting job on `executor`; `true` if it was waiting.
    pub(crate) async fn cancel_in<'c, E: PgExecutor<'c>>(
        &self,
        executor: E,
        id: &JobId,
    ) -> Result<bool, Error> {
        let done = sqlx::query(&self.shared.sql.cancel)
            .bind(&self.shared.name)
            .bind(id.as_str())
            .execute(executor)
            .await
            .map_err(Error::Postgres)?;
        Ok(done.rows_affected() == 1)
    }

    /// Acks `lease` on `executor`: `false` if the lease was lost. In a
    /// transaction the job's row stays locked until it ends, so no claim
    /// takes the job meanwhile (claims skip locked rows); a rollback
    /// leaves it leased, and it comes back when its lease runs out.
    pub(crate) async fn ack_in<'c, E: PgExecutor<'c>>(
        &self,
        executor: E,
        lease: Lease<'_>,
    ) -> Result<bool, Error> {
        let row = ack_query(&self.shared, lease)
            .fetch_one(executor)
            .await
            .map_err(Error::Postgres)?;
        acked(&row).map_err(Error::Postgres)
    }
}
