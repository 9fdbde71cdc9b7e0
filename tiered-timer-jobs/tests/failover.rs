//! A master's failover on a local 3-master + 3-replica Redis Cluster
//! (issue 25, targets 4 and 5), with Redis' default node timeout (15 s):
//! steady scheduling with known ids, four workers acking, SIGKILL of the
//! seed node of the URL (a master).
//!
//! * The other masters' partitions keep flowing: their jobs are at most
//!   2 s late while the dead master's slots are down (a claim round used
//!   to stop at the first partition that erred, after the command
//!   timeout: up to 20 s).
//! * Waiting workers are woken for a newly scheduled earlier job on the
//!   dead master's partitions once its replica took over (the wake-ups
//!   used to depend on the seed node alone).
//! * With `replicas(1)`, every job whose schedule returned `Ok` is
//!   delivered, none early, none held by two workers at once. (With one
//!   replica per master, the promoted replica has none until the killed
//!   node comes back as its replica: the test restarts it, and writes to
//!   that shard are `NotReplicated` until then.)

mod support;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use support::{eventually, RedisCluster};
use tiered_timer_jobs::{Error, Queue};

const PARTITIONS: u32 = 6;

/// The partition of a job id (FNV-1a modulo the partition count, as the
/// queue computes it).
fn partition_of(id: &str) -> u32 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in id.as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    (hash % u64::from(PARTITIONS)) as u32
}

async fn connect(url: &str, replicas: u32) -> Queue {
    Queue::builder(url, "orders")
        .cluster()
        .partitions(PARTITIONS)
        .replicas(replicas)
        .lease(Duration::from_secs(20))
        .command_timeout(Duration::from_secs(2))
        .health_check(Duration::from_secs(3))
        .connect()
        .await
        .unwrap()
}

#[derive(Default)]
struct Record {
    /// Jobs held by a worker now.
    holding: HashSet<String>,
    /// Every delivery: id, attempt, lateness (delivered minus due).
    deliveries: Vec<(String, u32, Duration)>,
    early: Vec<String>,
    twice: Vec<String>,
}

/// Runs the scenario; returns the ids whose schedule returned `Ok`, the
/// record, the dead master's partitions, and how long a worker took to
/// be woken for a new job on them after the failover.
async fn failover(replicas: u32) -> (HashSet<String>, Record, HashSet<u32>, Duration) {
    let cluster = RedisCluster::start_with_replicas(3, 1, &[]);
    let seed = &cluster.nodes[0];
    let url = seed.url();
    let dead: HashSet<u32> = (0..PARTITIONS)
        .filter(|p| cluster.master_of(&format!("ttr:{{orders#{p}}}:timeline")) == seed.port)
        .collect();
    assert!(!dead.is_empty(), "the seed serves some partitions");

    let record = Arc::new(Mutex::new(Record::default()));
    let mut workers = Vec::new();
    for _ in 0..4 {
        let queue = connect(&url, replicas).await;
        let record = record.clone();
        workers.push(tokio::spawn(async move {
            loop {
                let Ok(job) = queue.next().await else {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let id = job.id().to_string();
                let now = SystemTime::now();
                let late = now.duration_since(job.deadline());
                {
                    let mut r = record.lock().unwrap();
                    if late.is_err() {
                        r.early.push(id.clone());
                    }
                    if !r.holding.insert(id.clone()) {
                        r.twice.push(id.clone());
                    }
                    r.deliveries
                        .push((id.clone(), job.attempt(), late.unwrap_or_default()));
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
                record.lock().unwrap().holding.remove(&id);
                let _ = job.ack().await;
            }
        }));
    }

    let producer = connect(&url, replicas).await;
    let mut ok = HashSet::new();
    let mut n = 0u64;
    schedule_until(
        &producer,
        &mut n,
        &mut ok,
        Instant::now() + Duration::from_secs(2),
        || false,
    )
    .await;

    // SIGKILL the seed, a master; its replica takes over after the node
    // timeout. Scheduling goes on meanwhile.
    let mut cluster = cluster;
    let replica = cluster.replica_of(cluster.nodes[0].port);
    cluster.nodes[0].kill();
    let killed = Instant::now();
    let mut checked = Instant::now();
    let promoted = move || {
        if checked.elapsed() < Duration::from_millis(200) {
            return false;
        }
        checked = Instant::now();
        let info = std::process::Command::new("redis-cli")
            .args(["-p", &replica.to_string(), "INFO", "replication"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&info.stdout).contains("role:master")
    };
    schedule_until(
        &producer,
        &mut n,
        &mut ok,
        killed + Duration::from_secs(60),
        promoted,
    )
    .await;
    assert!(
        killed.elapsed() < Duration::from_secs(60),
        "no failover within 60 s"
    );
    schedule_until(
        &producer,
        &mut n,
        &mut ok,
        Instant::now() + Duration::from_secs(2),
        || false,
    )
    .await;
    // The killed node comes back, as a replica of the one that took over
    // (with one replica per master, writes to that shard cannot reach a
    // replica until then: they are NotReplicated).
    cluster.nodes[0].restart();
    let back = cluster.nodes[0].port;
    eventually(
        "the old master is a replica again",
        Duration::from_secs(30),
        || {
            let info = std::process::Command::new("redis-cli")
                .args(["-p", &back.to_string(), "INFO", "replication"])
                .output()
                .unwrap();
            let synced = String::from_utf8_lossy(&info.stdout).contains("master_link_status:up");
            async move { synced }
        },
    )
    .await;

    // A waiting worker is woken for a new, earlier job on a partition the
    // dead master served, now on its replica.
    let on_dead = |prefix: &str| {
        (0..)
            .map(|i| format!("{prefix}-{i}"))
            .find(|id| dead.contains(&partition_of(id)))
            .unwrap()
    };
    // First, until writes to that shard reach a replica again: a probe an
    // hour out, then cancelled.
    let probe = on_dead("probe");
    let trying = Instant::now();
    loop {
        match producer
            .schedule_with_id(probe.as_str(), Duration::from_secs(3600), "probe")
            .await
        {
            Ok(_) => break,
            Err(Error::Timeout { .. } | Error::Redis(_) | Error::NotReplicated { .. }) => {
                assert!(
                    trying.elapsed() < Duration::from_secs(30),
                    "no writes after the failover"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(other) => panic!("{other:?}"),
        }
    }
    assert!(producer.cancel(&probe.as_str().into()).await.unwrap());
    let on_dead = on_dead("wake");
    let wake_start = Instant::now();
    producer
        .schedule_with_id(on_dead.as_str(), Duration::ZERO, "wake")
        .await
        .unwrap();
    ok.insert(on_dead.clone());
    eventually("the woken worker takes it", Duration::from_secs(30), || {
        let got = record
            .lock()
            .unwrap()
            .deliveries
            .iter()
            .any(|(id, _, _)| *id == on_dead);
        async move { got }
    })
    .await;
    let wake_after = wake_start.elapsed();

    // Every job scheduled with Ok is delivered (without replicas, give
    // them as long, then count).
    if replicas == 0 {
        tokio::time::sleep(Duration::from_secs(10)).await;
    } else {
        eventually("every Ok'd job delivered", Duration::from_secs(60), || {
            let r = record.lock().unwrap();
            let seen: HashSet<&String> = r.deliveries.iter().map(|(id, _, _)| id).collect();
            let all = ok.iter().all(|id| seen.contains(id));
            async move { all }
        })
        .await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    for worker in workers {
        worker.abort();
    }
    let record = std::mem::take(&mut *record.lock().unwrap());
    drop(cluster);
    (ok, record, dead, wake_after)
}

/// Schedules `job-n`, `job-n+1`, ... (due 300 ms later) every 20 ms
/// until `until` or `stop()`; keeps the ids whose schedule returned `Ok`.
async fn schedule_until(
    producer: &Queue,
    n: &mut u64,
    ok: &mut HashSet<String>,
    until: Instant,
    mut stop: impl FnMut() -> bool,
) {
    while Instant::now() < until && !stop() {
        let id = format!("job-{n}");
        *n += 1;
        if producer
            .schedule_with_id(id.as_str(), Duration::from_millis(300), "x")
            .await
            .is_ok()
        {
            ok.insert(id);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_failover_loses_nothing_acknowledged_and_stops_only_its_partitions() {
    let (ok, record, dead, wake_after) = failover(1).await;
    assert!(record.early.is_empty(), "early: {:?}", record.early);
    assert!(
        record.twice.is_empty(),
        "held twice at once: {:?}",
        record.twice
    );
    let seen: HashSet<&String> = record.deliveries.iter().map(|(id, _, _)| id).collect();
    let lost: Vec<&String> = ok.iter().filter(|id| !seen.contains(id)).collect();
    assert!(lost.is_empty(), "lost after Ok: {lost:?}");
    // Redeliveries only as a new attempt.
    let mut attempts: HashMap<&String, Vec<u32>> = HashMap::new();
    for (id, attempt, _) in &record.deliveries {
        attempts.entry(id).or_default().push(*attempt);
    }
    for (id, list) in &attempts {
        assert!(
            list.windows(2).all(|w| w[0] < w[1]),
            "{id}: attempts {list:?}"
        );
    }
    // The surviving masters' partitions flowed: at most 2 s late.
    let worst = record
        .deliveries
        .iter()
        .filter(|(id, _, _)| !dead.contains(&partition_of(id)))
        .map(|(_, _, late)| *late)
        .max()
        .unwrap();
    // The contract is 2 s (0.9 s in the last run); the margin is for a
    // loaded CI. Before, a claim round stopped at the dead partition for
    // the whole node timeout: up to 20 s.
    assert!(
        worst <= Duration::from_secs(4),
        "a healthy partition's job came {worst:?} late"
    );
    assert!(
        wake_after <= Duration::from_secs(5),
        "woken {wake_after:?} after scheduling on the promoted replica"
    );
    println!(
        "{} jobs Ok'd, {} deliveries, healthy partitions at most {worst:?} late, woken {wake_after:?} after the failover",
        ok.len(),
        record.deliveries.len()
    );
}

/// Without `replicas`: what asynchronous replication lost in a failover.
/// A measurement, not a check:
/// `cargo test -p tiered-timer-jobs --test failover -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement (about 40 s): prints what a failover lost without replicas(1)"]
async fn without_replicas_a_failover_may_lose_acknowledged_jobs() {
    let (ok, record, _, _) = failover(0).await;
    let seen: HashSet<&String> = record.deliveries.iter().map(|(id, _, _)| id).collect();
    let lost = ok.iter().filter(|id| !seen.contains(id)).count();
    println!(
        "without replicas: {} jobs Ok'd, {lost} never delivered, {} held twice at once, {} early",
        ok.len(),
        record.twice.len(),
        record.early.len()
    );
}
