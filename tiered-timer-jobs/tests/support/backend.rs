//! One contract, three backends: a store to run a contract test on (a
//! fresh redis-server, a fresh directory for the embedded store, or a
//! fresh Postgres server), and
//! what a test needs to know of it that the `Queue` API does not say.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use tiered_timer_jobs::{JobId, Queue};

use super::postgres::PostgresServer;
use super::RedisServer;

/// Where a contract test's jobs are.
pub enum Store {
    Redis(RedisServer),
    Embedded(TempDir),
    Postgres(PostgresServer),
}

impl Store {
    pub fn redis() -> Store {
        Store::Redis(RedisServer::start())
    }

    pub fn embedded() -> Store {
        Store::Embedded(TempDir::new("contract"))
    }

    pub fn postgres() -> Store {
        Store::Postgres(PostgresServer::start())
    }

    /// The URL a `Queue` connects to.
    pub fn url(&self) -> String {
        match self {
            Store::Redis(server) => server.url(),
            Store::Postgres(server) => server.url(),
            Store::Embedded(dir) => format!("file://{}", dir.0.display()),
        }
    }

    /// The clock that decides whether a job is due: Redis' `TIME`, or the
    /// host's wall clock.
    pub async fn now_ms(&self) -> u64 {
        match self {
            Store::Redis(server) => server.now_ms().await,
            Store::Postgres(server) => server.now_ms().await,
            Store::Embedded(_) => SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap()
                .as_millis() as u64,
        }
    }

    /// The queue `orders`, with this lease and max attempts.
    pub async fn queue(&self, lease: Duration, max_attempts: u32) -> Queue {
        self.queue_named("orders", lease, max_attempts).await
    }

    pub async fn queue_named(&self, name: &str, lease: Duration, max_attempts: u32) -> Queue {
        Queue::builder(&self.url(), name)
            .lease(lease)
            .max_attempts(max_attempts)
            .connect()
            .await
            .expect("connect")
    }

    /// Asserts that `queue` holds nothing: no waiting, leased or dead job
    /// (and, on Redis, no job key left behind).
    pub async fn assert_empty(&self, queue: &Queue, ids: &[&JobId]) {
        let stats = queue.stats().await.unwrap();
        assert_eq!(
            (stats.pending, stats.leased, stats.dead),
            (0, 0, 0),
            "{stats:?}"
        );
        for id in ids {
            assert_eq!(queue.job(id).await.unwrap(), None, "{id} is gone");
        }
        if let Store::Redis(server) = self {
            assert_eq!(server.job_keys(), "0", "nothing left in Redis");
        }
        if let Store::Postgres(server) = self {
            assert_eq!(server.job_rows().await, 0, "no row left in Postgres");
        }
    }

    /// A job's lease expiry, by the deciding clock.
    pub async fn lease_expiry_ms(&self, queue: &Queue, id: &JobId) -> Option<u64> {
        let info = queue.job(id).await.unwrap()?;
        let expiry = info.lease_expiry?;
        Some(
            expiry
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap()
                .as_millis() as u64,
        )
    }
}

/// A fresh directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(what: &str) -> TempDir {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "ttj-{what}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
