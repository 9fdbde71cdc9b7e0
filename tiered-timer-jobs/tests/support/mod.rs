//! Real Redis servers for the tests: each test starts its own
//! `redis-server` on a free port in a temporary directory and stops it on
//! drop. Without `redis-server` on `PATH` the test fails, saying how to
//! install it: never a silent skip.

#![allow(dead_code)]

#[path = "backend.rs"]
pub mod backend;
#[path = "cluster_join.rs"]
mod cluster_join;
#[path = "postgres.rs"]
pub mod postgres;

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// One `redis-server` child process.
pub struct RedisServer {
    pub port: u16,
    pub dir: PathBuf,
    args: Vec<String>,
    child: Option<Child>,
    owns_dir: bool,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind a free port")
        .local_addr()
        .unwrap()
        .port()
}

fn temp_dir(label: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "ttr-test-{}-{}-{}",
        label,
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).expect("create a temporary directory");
    dir
}

fn spawn(port: u16, dir: &PathBuf, args: &[String]) -> Child {
    let mut command = Command::new("redis-server");
    command
        .arg("--port")
        .arg(port.to_string())
        .arg("--bind")
        .arg("127.0.0.1")
        .arg("--dir")
        .arg(dir)
        .arg("--save")
        .arg("")
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // libfaketime in a test's environment must not reach the server.
        .env_remove("LD_PRELOAD")
        .env_remove("FAKETIME");
    match command.spawn() {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
            "`redis-server` is not on PATH: these tests need a real Redis. \
             Install it with `apt-get install -y redis-server` (Debian/Ubuntu) and run again."
        ),
        Err(e) => panic!("could not start redis-server: {e}"),
    }
}

/// Waits until the server at `port` answers PING.
fn wait_ready(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(output) = Command::new("redis-cli")
            .args(["-p", &port.to_string(), "PING"])
            .output()
        {
            if String::from_utf8_lossy(&output.stdout).contains("PONG") {
                return;
            }
        }
        assert!(
            Instant::now() < deadline,
            "redis-server on port {port} did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl RedisServer {
    /// Starts a server without persistence.
    pub fn start() -> RedisServer {
        RedisServer::start_with(&["--appendonly", "no"])
    }

    /// Starts a server with extra arguments.
    pub fn start_with(args: &[&str]) -> RedisServer {
        let dir = temp_dir("redis");
        let port = free_port();
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let child = spawn(port, &dir, &args);
        wait_ready(port);
        RedisServer {
            port,
            dir,
            args,
            child: Some(child),
            owns_dir: true,
        }
    }

    /// Redis' clock in ms (`TIME`): the clock the queue decides by.
    pub async fn now_ms(&self) -> u64 {
        redis_now_ms(&self.url()).await
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Stops the server: SHUTDOWN (which writes the append-only file), or
    /// a kill if that does not work.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("redis-cli")
                .args(["-p", &self.port.to_string(), "SHUTDOWN"])
                .output();
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills the server at once (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Freezes the server (SIGSTOP): connections stay open, nothing is
    /// answered, as with a hung or partitioned server.
    pub fn freeze(&self) {
        self.signal("-STOP");
    }

    /// Lets a frozen server go on (SIGCONT).
    pub fn thaw(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("server running").id();
        let status = Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success());
    }

    /// Starts the server again on the same port and directory.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "stop the server first");
        self.child = Some(spawn(self.port, &self.dir, &self.args));
        wait_ready(self.port);
    }

    /// Runs a redis-cli command against this server and returns its output.
    pub fn cli(&self, args: &[&str]) -> String {
        let output = Command::new("redis-cli")
            .arg("-p")
            .arg(self.port.to_string())
            .args(args)
            .output()
            .expect("run redis-cli");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// How many keys hold jobs, as a string (like `DBSIZE`'s answer): every
    /// key but a queue's own metadata, which outlives its jobs by design
    /// (the registry `ttr:queues`, the lateness histograms, the wake-up
    /// batons `marker`, and a `job` hash that holds nothing but the
    /// partition's `m`, the wake-up chain's state).
    pub fn job_keys(&self) -> String {
        self.cli(&["--scan"])
            .lines()
            .filter(|key| {
                if key.is_empty()
                    || *key == "ttr:queues"
                    || key.ends_with(":lateness")
                    || key.ends_with(":throughput")
                    || key.ends_with(":marker")
                {
                    return false;
                }
                if key.ends_with(":job") {
                    let fields = self.cli(&["HKEYS", key]);
                    return fields.lines().any(|f| !f.is_empty() && f != "m");
                }
                true
            })
            .count()
            .to_string()
    }

    /// Redis' `total_commands_processed` (`INFO stats`).
    pub fn commands_processed(&self) -> u64 {
        let info = self.cli(&["INFO", "stats"]);
        info.lines()
            .find_map(|line| line.strip_prefix("total_commands_processed:"))
            .and_then(|n| n.trim().parse().ok())
            .expect("total_commands_processed in INFO stats")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        if self.owns_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A local Redis Cluster of `n` masters, no replicas.
pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// `masters` masters with `replicas` replicas each (the first
    /// `masters` nodes are the masters), every node started with the
    /// extra `args` as well (e.g. a node timeout).
    pub fn start_with_replicas(masters: usize, replicas: usize, args: &[&str]) -> RedisCluster {
        let mut all = vec!["--appendonly", "no", "--cluster-enabled", "yes"];
        all.extend(["--cluster-config-file", "nodes.conf"]);
        all.extend(args);
        let n = masters * (replicas + 1);
        let nodes: Vec<RedisServer> = (0..n).map(|_| RedisServer::start_with(&all)).collect();
        let ports: Vec<u16> = nodes.iter().map(|node| node.port).collect();
        cluster_join::join_with_replicas(&ports, replicas);
        RedisCluster { nodes }
    }

    /// The cluster's view, asked of a node that is up: which node (by
    /// port) serves the slot of `key` as master.
    pub fn master_of(&self, key: &str) -> u16 {
        let node = self
            .nodes
            .iter()
            .find(|n| n.child.is_some())
            .expect("a node that is up");
        let slot: u16 = node
            .cli(&["CLUSTER", "KEYSLOT", key])
            .trim()
            .parse()
            .unwrap();
        let slots = node.cli(&["CLUSTER", "SLOTS"]);
        // redis-cli prints the nested reply flat: start, end, ip, port,
        // id, (ip, port, id)* per range.
        let lines: Vec<&str> = slots.lines().map(str::trim).collect();
        let mut i = 0;
        while i + 3 < lines.len() {
            if let (Ok(start), Ok(end)) = (lines[i].parse::<u16>(), lines[i + 1].parse::<u16>()) {
                if lines[i + 2].contains('.') && (start..=end).contains(&slot) {
                    return lines[i + 3].parse().unwrap();
                }
            }
            i += 1;
        }
        panic!("no master for slot {slot}: {slots}")
    }

    /// The port of a replica of the master on `port`.
    pub fn replica_of(&self, port: u16) -> u16 {
        let nodes = self.nodes[0].cli(&["CLUSTER", "NODES"]);
        let id_of = |port: u16| {
            nodes
                .lines()
                .find(|l| l.contains(&format!(":{port}@")))
                .and_then(|l| l.split(' ').next())
                .map(str::to_owned)
                .expect("the node is known")
        };
        let master = id_of(port);
        nodes
            .lines()
            .find(|l| l.contains(&format!("slave {master}")))
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|addr| addr.split('@').next())
            .and_then(|addr| addr.rsplit(':').next())
            .and_then(|p| p.parse().ok())
            .expect("the master has a replica")
    }

    pub fn start(n: usize) -> RedisCluster {
        let mut args = vec!["--appendonly", "no"];
        args.extend(cluster_join::NODE_ARGS);
        let nodes: Vec<RedisServer> = (0..n).map(|_| RedisServer::start_with(&args)).collect();
        let ports: Vec<u16> = nodes.iter().map(|node| node.port).collect();
        cluster_join::join(&ports);
        RedisCluster { nodes }
    }

    pub fn url(&self) -> String {
        self.nodes[0].url()
    }
}

/// Waits (asynchronously) until `condition` holds, or panics after
/// `within` saying what was awaited.
pub async fn eventually<F, Fut>(what: &str, within: Duration, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if condition().await {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs one worker per queue (claim, record, ack) until `total` jobs were
/// delivered, then a little longer to catch any extra delivery; returns
/// every delivery. Workers loop on `next` without a timeout (a `next` cut
/// short could strand its claim until the lease runs out) and are stopped
/// only once every job is in.
pub async fn deliver_all(
    queues: Vec<tiered_timer_jobs::Queue>,
    total: usize,
    within: Duration,
) -> Vec<tiered_timer_jobs::JobId> {
    use std::sync::{Arc, Mutex};
    let delivered = Arc::new(Mutex::new(Vec::new()));
    let workers: Vec<_> = queues
        .into_iter()
        .map(|queue| {
            let delivered = delivered.clone();
            tokio::spawn(async move {
                loop {
                    let job = queue.next().await.expect("next");
                    delivered.lock().unwrap().push(job.id().clone());
                    job.ack().await.expect("ack");
                }
            })
        })
        .collect();
    eventually("every job is delivered", within, || {
        let n = delivered.lock().unwrap().len();
        async move { n >= total }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    for worker in &workers {
        assert!(!worker.is_finished(), "a worker failed");
        worker.abort();
    }
    let result = delivered.lock().unwrap().clone();
    result
}

/// Redis' clock in ms (`TIME` of the server at `url`).
pub async fn redis_now_ms(url: &str) -> u64 {
    let client = redis::Client::open(url).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(&mut conn).await.unwrap();
    secs * 1000 + micros / 1000
}

/// The queue `orders` on `server`, with this lease and max attempts.
pub async fn queue(
    server: &RedisServer,
    lease: Duration,
    max_attempts: u32,
) -> tiered_timer_jobs::Queue {
    tiered_timer_jobs::Queue::builder(&server.url(), "orders")
        .lease(lease)
        .max_attempts(max_attempts)
        .connect()
        .await
        .expect("connect")
}

/// The queue `orders` on `cluster`, in 6 partitions (spread over its
/// masters) with a 30 s lease.
pub async fn partitioned_cluster_queue(cluster: &RedisCluster) -> tiered_timer_jobs::Queue {
    tiered_timer_jobs::Queue::builder(&cluster.url(), "orders")
        .cluster()
        .partitions(6)
        .lease(Duration::from_secs(30))
        .connect()
        .await
        .expect("connect")
}

/// A TCP server that accepts connections and never answers (nor closes
/// them): a Redis that hangs, or a host behind a black hole after the
/// handshake. Stops listening when dropped.
pub struct SilentServer {
    pub port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl SilentServer {
    pub fn start() -> SilentServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            while !stopped.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((socket, _)) => held.push(socket),
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        SilentServer { port, stop }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }
}

impl Drop for SilentServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A port nobody listens on (bound, then let go).
pub fn closed_port() -> u16 {
    free_port()
}

/// A leased job's score in the timeline is 2^52 plus its lease expiry;
/// a waiting job's is its due time (see src/redis/keys.rs).
pub const LEASED: u64 = 1 << 52;

/// The raw timeline score of `id` in the partition with hash tag `tag`
/// (`orders`, `mail#2`).
pub async fn timeline_score(url: &str, tag: &str, id: &str) -> Option<u64> {
    let client = redis::Client::open(url).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let score: Option<f64> = redis::cmd("ZSCORE")
        .arg(format!("ttr:{{{tag}}}:timeline"))
        .arg(id)
        .query_async(&mut conn)
        .await
        .unwrap();
    score.map(|s| s as u64)
}

/// `id`'s due time (ms, Redis' clock) if it is waiting.
pub async fn due_ms(url: &str, tag: &str, id: &str) -> Option<u64> {
    timeline_score(url, tag, id).await.filter(|s| *s < LEASED)
}

/// `id`'s lease expiry (ms, Redis' clock) if it is leased.
pub async fn lease_expiry_ms(url: &str, tag: &str, id: &str) -> Option<u64> {
    timeline_score(url, tag, id)
        .await
        .and_then(|s| s.checked_sub(LEASED))
}

/// Which of `id`'s fields the job hash holds: its payload, an attempt
/// count, and a deadline (only while leased: `attempts token deadline
/// claimed holder`).
pub fn stored_fields(server: &RedisServer, tag: &str, id: &str) -> [bool; 3] {
    let key = format!("ttr:{{{tag}}}:job");
    let payload = server.cli(&["HEXISTS", &key, &format!("p{id}")]).trim() == "1";
    let lease = server.cli(&["HGET", &key, &format!("l{id}")]);
    let lease = lease.trim();
    [payload, !lease.is_empty(), lease.split(' ').count() >= 3]
}

/// Whether the job hash holds `id`'s creation time.
pub fn stored_created(server: &RedisServer, tag: &str, id: &str) -> bool {
    let key = format!("ttr:{{{tag}}}:job");
    server.cli(&["HEXISTS", &key, &format!("c{id}")]).trim() == "1"
}

/// Replaces the token of `id`'s lease, as if another delivery held it.
pub fn steal_lease(server: &RedisServer, tag: &str, id: &str) {
    let key = format!("ttr:{{{tag}}}:job");
    let field = format!("l{id}");
    let lease = server.cli(&["HGET", &key, &field]);
    let parts: Vec<&str> = lease.trim().splitn(4, ' ').collect();
    assert_eq!(parts.len(), 4, "{id} is leased: {lease:?}");
    let stolen = format!("{} someone-else {} {}", parts[0], parts[2], parts[3]);
    server.cli(&["HSET", &key, &field, &stolen]);
}

/// The id of a client blocked in `BZPOPMIN` (a waiting worker's wake-up
/// connection), if any.
pub fn blocked_client(server: &RedisServer) -> Option<String> {
    server
        .cli(&["CLIENT", "LIST"])
        .lines()
        .find(|line| line.contains("cmd=bzpopmin"))
        .and_then(|line| line.split(' ').find_map(|f| f.strip_prefix("id=")))
        .map(str::to_owned)
}

/// A TCP proxy to a local port, run by the test, that can be frozen: every
/// connection open at the freeze stops forwarding in both directions
/// without being closed (no FIN, no RST), as behind a NAT or load balancer
/// that dropped the flow or a peer host that hung; connections made after
/// the freeze go through. Thawing lets the held bytes through.
pub struct TcpProxy {
    pub port: u16,
    shared: std::sync::Arc<ProxyShared>,
}

struct ProxyShared {
    /// Connections with an id up to this are frozen.
    frozen_upto: std::sync::Mutex<Option<u64>>,
    thawed: std::sync::Condvar,
    next_id: std::sync::atomic::AtomicU64,
    stop: std::sync::atomic::AtomicBool,
}

impl ProxyShared {
    fn wait_while_frozen(&self, id: u64) {
        let mut frozen = self.frozen_upto.lock().unwrap();
        while frozen.is_some_and(|upto| id <= upto) {
            frozen = self.thawed.wait(frozen).unwrap();
        }
    }
}

impl TcpProxy {
    pub fn start(target: u16) -> TcpProxy {
        use std::io::{Read, Write};
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let shared = std::sync::Arc::new(ProxyShared {
            frozen_upto: std::sync::Mutex::new(None),
            thawed: std::sync::Condvar::new(),
            next_id: std::sync::atomic::AtomicU64::new(1),
            stop: std::sync::atomic::AtomicBool::new(false),
        });
        let state = shared.clone();
        std::thread::spawn(move || {
            while !state.stop.load(Ordering::Relaxed) {
                let Ok((client, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                client.set_nonblocking(false).unwrap();
                let Ok(server) = std::net::TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                let id = state.next_id.fetch_add(1, Ordering::SeqCst);
                for (mut from, mut to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    let state = state.clone();
                    std::thread::spawn(move || {
                        let mut buf = [0u8; 16 * 1024];
                        loop {
                            let n = match from.read(&mut buf) {
                                Ok(0) | Err(_) => 0,
                                Ok(n) => n,
                            };
                            state.wait_while_frozen(id);
                            if n == 0 || to.write_all(&buf[..n]).is_err() {
                                let _ = to.shutdown(std::net::Shutdown::Write);
                                return;
                            }
                        }
                    });
                }
            }
        });
        TcpProxy { port, shared }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Freezes every connection open now.
    pub fn freeze(&self) {
        let last = self.shared.next_id.load(Ordering::SeqCst) - 1;
        *self.shared.frozen_upto.lock().unwrap() = Some(last);
    }

    /// Lets the frozen connections go on, held bytes first.
    pub fn thaw(&self) {
        *self.shared.frozen_upto.lock().unwrap() = None;
        self.shared.thawed.notify_all();
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.thaw();
    }
}

/// A TCP server that answers anything with an HTTP 400, as a web server
/// on the port a Redis URL names would. Stops listening when dropped.
pub struct HttpServer {
    pub port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl HttpServer {
    pub fn start() -> HttpServer {
        use std::io::{Read, Write};
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                let Ok((mut socket, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                };
                let _ = socket.set_nonblocking(false);
                let _ = socket.set_read_timeout(Some(Duration::from_secs(1)));
                let _ = socket.read(&mut [0; 1024]);
                let _ = socket.write_all(
                    b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
            }
        });
        HttpServer { port, stop }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
