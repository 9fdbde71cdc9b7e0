//! For the examples: the Redis at `REDIS_URL`, or a redis-server started
//! here on a free port in a temporary directory (stopped on drop).

#![allow(dead_code)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A Redis to run against.
pub struct Redis {
    pub url: String,
    /// The server started here, if `REDIS_URL` was not set.
    child: Option<(Child, PathBuf)>,
}

impl Redis {
    /// The Redis at `REDIS_URL`, or a fresh redis-server.
    pub fn start() -> Redis {
        if let Ok(url) = std::env::var("REDIS_URL") {
            return Redis { url, child: None };
        }
        Redis::start_own(&[])
    }

    /// A fresh redis-server, whatever `REDIS_URL` says, with extra
    /// arguments.
    pub fn start_own(extra: &[&str]) -> Redis {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("find a free port")
            .port();
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "ttr-example-{}-{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("create a temporary directory");
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .args(["--appendonly", "no", "--dir"])
            .arg(&dir)
            .args(extra)
            .current_dir(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .env_remove("LD_PRELOAD")
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "could not start redis-server ({e}): install it with \
                     `apt-get install -y redis-server`, or set REDIS_URL"
                )
            });
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Redis {
            url: format!("redis://127.0.0.1:{port}/"),
            child: Some((child, dir)),
        }
    }

    /// The port of the server.
    pub fn port(&self) -> u16 {
        self.url
            .trim_end_matches('/')
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("a port in the URL")
    }

    /// Whether the server was started here (so it may be flushed).
    pub fn owned(&self) -> bool {
        self.child.is_some()
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        if let Some((mut child, dir)) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
