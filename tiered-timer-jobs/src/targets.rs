//! The `tracing` targets of the crate's events, pinned here (every event
//! names one with `target:`) so that moving code between modules never
//! changes what an application filters on. The crate docs list them
//! ("Tracing"); `tests/tracing_events.rs` checks that every event carries
//! one of them, and `tests/layers.rs` that every event names its target.

// A build without one of the backends never emits its events.
#![allow(dead_code)]

/// Events about one job: claimed, redelivered, acked, retried, failed,
/// released, moved to the dead letters; its lease extended, lost or given
/// up.
pub(crate) const JOB: &str = "tiered_timer_jobs::job";
/// Events about a queue handle: closed, background acks that failed, the
/// queue's registration.
pub(crate) const QUEUE: &str = "tiered_timer_jobs::queue";
/// The Redis waker: wake-up connections lost and re-established, batons,
/// claims that failed.
pub(crate) const WAKE: &str = "tiered_timer_jobs::wake";
/// Redis connections: commands that failed, connections replaced,
/// masters short of replicas.
pub(crate) const REDIS: &str = "tiered_timer_jobs::redis";
/// The embedded store: logs opened, torn writes cut, damaged frames
/// quarantined, compactions, its driver.
pub(crate) const EMBEDDED: &str = "tiered_timer_jobs::embedded";
/// The Postgres backend: its schema created or migrated, its LISTEN
/// connection lost and re-established, claims that failed.
pub(crate) const POSTGRES: &str = "tiered_timer_jobs::postgres";
