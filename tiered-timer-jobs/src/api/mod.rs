//! The top layer: the public API. [`Queue`] (`queue.rs`), its settings
//! ([`Builder`], `builder.rs`), scheduling (`schedule.rs`), the operator's
//! calls (`operator.rs`), a delivered [`Job`] (`job.rs`, failures in
//! `failure.rs`), background acks (`ack_batch.rs`, sent by the handle's
//! flush task in `inner.rs`) and the calls on a whole store (`store.rs`).
//!
//! Every public call checks its input here, once, and then makes one call
//! of the queue's backend through `src/backends.rs`; nothing here knows
//! which backend it is talking to (see CONTRIBUTING.md, "Architecture of
//! the jobs crate").

mod ack_batch;
mod builder;
mod failure;
mod inner;
mod job;
mod lease;
mod operator;
mod queue;
mod schedule;
mod store;
#[cfg(feature = "postgres")]
mod within;

pub use builder::Builder;
pub use failure::Fate;
pub use job::Job;
pub use queue::Queue;
pub use store::{find_queues, repair};
#[cfg(feature = "postgres")]
pub use within::Within;
