//! The Redis backend: connections (`conn.rs`, with `replication.rs` for
//! writes that wait for replicas), the key layout (`keys.rs`), the Lua
//! scripts (`scripts.rs`, `lua/`) and the waker (`wake/`).

pub(crate) mod conn;
pub(crate) mod keys;
pub(crate) mod replication;
pub(crate) mod scripts;
pub(crate) mod wake;
