//! For the examples: the Redis at `REDIS_URL`, or a redis-server started
//! here on a free port in a temporary directory (stopped on drop).

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
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("find a free port")
            .port();
        let dir = std::env::temp_dir().join(format!("ttr-example-{}", std::process::id()));
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

    /// Whether the server was started here (so it may be flushed).
    #[allow(dead_code)]
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
