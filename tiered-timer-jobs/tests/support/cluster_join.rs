//! Joins local redis-servers started with `--cluster-enabled yes` into one
//! Redis Cluster of masters without replicas, and waits until every node
//! says `cluster_state:ok`. For the tests' support (the benchmark member
//! has its own, `benchmarks/src/redis_support.rs`).

use std::process::Command;
use std::time::{Duration, Instant};

/// The options a node of [`join`]'s cluster is started with.
pub const NODE_ARGS: [&str; 6] = [
    "--cluster-enabled",
    "yes",
    "--cluster-config-file",
    "nodes.conf",
    "--cluster-node-timeout",
    "5000",
];

/// Runs `redis-cli --cluster create` over the nodes on `ports` (all on
/// 127.0.0.1) and waits up to 30 s for every node to be ready.
pub fn join(ports: &[u16]) {
    join_with_replicas(ports, 0);
}

/// As [`join`], with `replicas` replicas per master (the first
/// `ports.len() / (replicas + 1)` nodes become the masters), and waits
/// until every replica is in sync.
pub fn join_with_replicas(ports: &[u16], replicas: usize) {
    let addrs: Vec<String> = ports
        .iter()
        .map(|port| format!("127.0.0.1:{port}"))
        .collect();
    let output = Command::new("redis-cli")
        .arg("--cluster")
        .arg("create")
        .args(&addrs)
        .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
        .output()
        .expect("run redis-cli --cluster create");
    assert!(
        output.status.success(),
        "redis-cli --cluster create failed: {}",
        String::from_utf8_lossy(&output.stdout)
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    for port in ports {
        loop {
            let info = Command::new("redis-cli")
                .args(["-p", &port.to_string(), "CLUSTER", "INFO"])
                .output()
                .expect("run redis-cli");
            if String::from_utf8_lossy(&info.stdout).contains("cluster_state:ok") {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the cluster did not reach cluster_state:ok"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    for port in ports {
        loop {
            let info = Command::new("redis-cli")
                .args(["-p", &port.to_string(), "INFO", "replication"])
                .output()
                .expect("run redis-cli");
            let info = String::from_utf8_lossy(&info.stdout);
            if info.contains("role:master") || info.contains("master_link_status:up") {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "a replica did not sync with its master"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
