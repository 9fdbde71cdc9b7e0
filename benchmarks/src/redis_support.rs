//! Redis for the Redis benchmarks (`peers`, `bench`, `ops_cost`, `stores`,
//! `herd`): a Redis at a given URL or a redis-server started here (on a
//! free port, in a temporary directory, no persistence, stopped on drop), a
//! local Redis Cluster, and what Redis says about its own work (commands
//! processed, CPU, `MONITOR`).
//!
//! The tests of `tiered-timer-jobs` have their own support (with replicas
//! and failovers); this one is the benchmarks' alone, so that neither
//! reaches into the other's files.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A Redis to run against.
#[derive(Debug)]
pub struct Redis {
    /// Its URL, `redis://127.0.0.1:<port>/` for one started here.
    pub url: String,
    /// The server started here, and its directory.
    child: Option<(Child, PathBuf)>,
}

impl Redis {
    /// The Redis at `url` (not started or stopped here), or a fresh
    /// redis-server if there is none.
    ///
    /// # Panics
    ///
    /// As [`Redis::start_own`].
    pub fn at_or_start(url: Option<String>) -> Redis {
        match url {
            Some(url) => Redis { url, child: None },
            None => Redis::start_own(&[]),
        }
    }

    /// A fresh redis-server with `extra` arguments.
    ///
    /// # Panics
    ///
    /// If redis-server cannot be started (not installed: the message says
    /// how to install it) or does not accept connections within 20 s.
    pub fn start_own(extra: &[&str]) -> Redis {
        static STARTED: AtomicU32 = AtomicU32::new(0);
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let dir = std::env::temp_dir().join(format!(
            "ttr-bench-{}-{}",
            std::process::id(),
            STARTED.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--dir"])
            .arg(&dir)
            .args(extra)
            .current_dir(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // libfaketime crashes redis-server (see CONTRIBUTING.md).
            .env_remove("LD_PRELOAD")
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "could not start redis-server ({e}): install it with \
                     `apt-get install -y redis-server`, or give a Redis URL"
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

    /// The server's port.
    ///
    /// # Panics
    ///
    /// If the URL has no port.
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

    /// Runs `redis-cli -p <port> args...` and returns what it printed.
    ///
    /// # Panics
    ///
    /// If redis-cli cannot be run.
    pub fn cli(&self, args: &[&str]) -> String {
        let output = Command::new("redis-cli")
            .arg("-p")
            .arg(self.port().to_string())
            .args(args)
            .output()
            .expect("redis-cli on PATH (apt-get install -y redis-tools)");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// A number from `INFO`: `field` of `section` (`stats`, `cpu`, ...), 0
    /// if absent.
    pub fn info(&self, section: &str, field: &str) -> f64 {
        self.cli(&["INFO", section])
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    }

    /// Commands processed so far (`total_commands_processed`), and Redis'
    /// CPU seconds (system + user). Four `INFO` calls, which count.
    pub fn counters(&self) -> (f64, f64) {
        let commands = self.info("stats", "total_commands_processed");
        let cpu = self.info("cpu", "used_cpu_sys") + self.info("cpu", "used_cpu_user");
        (commands, cpu)
    }

    /// Counts the commands clients send (not those scripts run, nor lines
    /// naming `herd-marker`) from now until the returned monitor is stopped;
    /// each counted line is also appended to `dump`, if given.
    ///
    /// # Panics
    ///
    /// If `redis-cli MONITOR` cannot be run.
    pub fn monitor(&self, dump: Option<PathBuf>) -> Monitor {
        let mut child = Command::new("redis-cli")
            .arg("-p")
            .arg(self.port().to_string())
            .arg("MONITOR")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-cli MONITOR");
        let stdout = child.stdout.take().expect("piped stdout");
        let count = Arc::new(AtomicU64::new(0));
        let started = Arc::new(AtomicBool::new(false));
        let (counted, ok) = (count.clone(), started.clone());
        std::thread::spawn(move || {
            let mut dump = dump.map(|path| {
                std::fs::OpenOptions::new()
                    .append(true)
                    .create(true)
                    .open(&path)
                    .unwrap_or_else(|e| panic!("cannot open {}: {e}", path.display()))
            });
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line == "OK" {
                    ok.store(true, Ordering::SeqCst);
                } else if !line.contains("[0 lua]") && !line.contains("herd-marker") {
                    counted.fetch_add(1, Ordering::Relaxed);
                    if let Some(file) = &mut dump {
                        let _ = writeln!(file, "{line}");
                    }
                }
            }
        });
        while !started.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(5));
        }
        Monitor { child, count }
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

/// A `redis-cli MONITOR` counting commands; see [`Redis::monitor`].
#[derive(Debug)]
pub struct Monitor {
    child: Child,
    count: Arc<AtomicU64>,
}

impl Monitor {
    /// Stops monitoring (after 200 ms, for the last lines to arrive) and
    /// returns the count.
    pub fn stop(mut self) -> u64 {
        std::thread::sleep(Duration::from_millis(200));
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.count.load(Ordering::Relaxed)
    }
}

/// A local Redis Cluster of masters without replicas, started here.
#[derive(Debug)]
pub struct Cluster {
    pub nodes: Vec<Redis>,
}

impl Cluster {
    /// `n` redis-servers started with `--cluster-enabled yes`, joined by
    /// `redis-cli --cluster create`, every node at `cluster_state:ok`.
    ///
    /// # Panics
    ///
    /// If a node cannot be started, the join fails, or the cluster is not
    /// ready within 30 s.
    pub fn start(n: usize) -> Cluster {
        let nodes: Vec<Redis> = (0..n)
            .map(|_| {
                Redis::start_own(&[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "5000",
                ])
            })
            .collect();
        let addrs: Vec<String> = nodes
            .iter()
            .map(|node| format!("127.0.0.1:{}", node.port()))
            .collect();
        let output = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .expect("run redis-cli --cluster create");
        assert!(
            output.status.success(),
            "redis-cli --cluster create failed: {}",
            String::from_utf8_lossy(&output.stdout)
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        for node in &nodes {
            while !node.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok") {
                assert!(
                    Instant::now() < deadline,
                    "the cluster did not reach cluster_state:ok"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Cluster { nodes }
    }

    /// The URL of its first node.
    pub fn url(&self) -> String {
        self.nodes[0].url.clone()
    }
}

/// Redis' `total_commands_processed` (`INFO stats`; commands run inside a
/// script count too). The `INFO` itself counts as one.
///
/// # Panics
///
/// If the `INFO` fails or has no such field.
pub async fn commands_processed(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("stats")
        .query_async(conn)
        .await
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("total_commands_processed:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap()
}
