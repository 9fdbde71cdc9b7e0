//! The Postgres backend (feature `postgres`): durable delayed jobs in
//! one table of a schema the crate creates and migrates, written by one
//! statement per call, claimed with `FOR UPDATE SKIP LOCKED`, decided by
//! the database's clock, and waited for without polling.
//!
//! * `schema.rs`: the URL's `schema` parameter, the tables and their
//!   migrations (versioned, under an advisory lock);
//! * `sql.rs`: every statement, each one round trip; every "now" is the
//!   database's `clock_timestamp()`;
//! * `backend.rs`: the backend contract on them;
//! * `wake.rs`: when a handle claims next, and its LISTEN connection;
//! * `within.rs`: the calls that run in the caller's transaction
//!   (`Queue::within`, `Job::ack_within`).

mod backend;
mod schema;
mod sql;
mod wake;
mod within;

pub(crate) use backend::PostgresBackend;
