//! The Redis backend ([`RedisBackend`], `backend.rs`): one queue is a set
//! of keys per partition under one hash tag (`keys.rs`), every change one
//! Lua script (`scripts.rs`, `lua/`), run on the command connection of
//! `conn.rs` (one node: `node.rs`; a cluster: `cluster.rs`; writes that
//! wait for replicas: `replication.rs`); waiting
//! for due jobs is the waker's (`wake/`). The operator's calls are in
//! `operator.rs`, the registry of queues and their discovery in
//! `registry.rs`, recurrences in `recur.rs` (the claimer's part in `duties.rs`), replies and arguments in `reply.rs`.

mod backend;
mod cluster;
mod conn;
mod duties;
mod keys;
mod node;
mod operator;
mod recur;
mod registry;
mod replication;
mod reply;
mod scripts;
mod wake;

pub(crate) use backend::RedisBackend;
