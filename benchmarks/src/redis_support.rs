//! Redis for the Redis benchmarks (`peers`, `bench`, `ops_cost`): the Redis
//! at `REDIS_URL` or a redis-server started here (the tutorial examples'
//! own helper, included by path), a local Redis Cluster, and Redis' count
//! of the commands it ran.

#[path = "../../tiered-timer-jobs/examples/support/mod.rs"]
mod server;

#[path = "../../tiered-timer-jobs/tests/support/cluster_join.rs"]
mod cluster_join;

pub use server::Redis;

/// A local Redis Cluster of `n` masters without replicas, started here
/// (`--cluster-enabled yes`, joined by `redis-cli --cluster create`).
pub struct Cluster {
    pub nodes: Vec<Redis>,
}

impl Cluster {
    pub fn start(n: usize) -> Cluster {
        let nodes: Vec<Redis> = (0..n)
            .map(|_| Redis::start_own(&cluster_join::NODE_ARGS))
            .collect();
        let ports: Vec<u16> = nodes.iter().map(Redis::port).collect();
        cluster_join::join(&ports);
        Cluster { nodes }
    }

    pub fn url(&self) -> String {
        self.nodes[0].url.clone()
    }
}

/// Redis' `total_commands_processed` (`INFO stats`; commands run inside a
/// script count too). The `INFO` itself counts as one.
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
