//! A master's failover on a local 3-master + 3-replica Redis Cluster
//! (issue 25, targets 4 and 5; issue 33, part 2): steady scheduling with
//! known ids (200 a second), four workers acking, SIGKILL of the seed node
//! of the URL (a master), which stays dead: its replica takes over and has
//! no replica left. Run for a node timeout of 2 s and for Redis' default
//! (15 s).
//!
//! With `replicas(1)`:
//!
//! * Every job whose schedule returned `Ok` is delivered after the
//!   failover, none early, none held by two workers at once, a redelivery
//!   only as a new attempt. (Claims used to wait for a replica too: on the
//!   promoted master, which has none, every claim was handed back and its
//!   partition never delivered again.)
//! * The dead master's partitions deliver again, and a waiting worker is
//!   woken for a job scheduled there after the failover (the wake-ups used
//!   to depend on the seed node alone).
//! * No caller sees a cluster redirect (`MOVED`, `ASK`): the crate follows
//!   them (they used to reach `schedule` while the slot map changed).
//! * `next` never fails for want of replicas, and the other masters'
//!   partitions keep flowing: their jobs are at most 2 s late while the
//!   dead master's slots are down (a claim round used to stop at the first
//!   partition that erred, after the command timeout: up to 20 s).

mod support;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use redis::{ErrorKind, ServerErrorKind};
use support::RedisCluster;
use tiered_timer_jobs::{Error, Queue};

const PARTITIONS: u32 = 6;
/// The producer schedules a job this often (200 a second).
const EVERY: Duration = Duration::from_millis(5);
/// How long a worker holds each job (four workers keep up with the
/// producer with room to spare).
const HOLD: Duration = Duration::from_millis(5);
/// The workers' lease: a claim whose reply was lost in the failover comes
/// back after it.
const LEASE: Duration = Duration::from_secs(10);
/// How long the test waits for what it expects (a liveness bound, not a
/// measurement: the runs here take seconds).
const PATIENCE: Duration = Duration::from_secs(60);

/// One scenario at a time: each starts six redis-servers, and two at once
/// on a small machine blur the failover they measure.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

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

/// Whether an error a caller saw is a cluster redirect, typed or carried
/// in a message (a failed claim reaches waiting workers as a message).
fn is_redirect(error: &Error) -> bool {
    let typed = matches!(error, Error::Redis(e)
        if matches!(e.kind(), ErrorKind::Server(ServerErrorKind::Moved | ServerErrorKind::Ask)));
    let text = error.to_string();
    typed || text.contains("Moved") || text.contains("MOVED") || text.contains("Ask:")
}

async fn connect(url: &str, replicas: u32) -> Queue {
    Queue::builder(url, "orders")
        .cluster()
        .partitions(PARTITIONS)
        .replicas(replicas)
        .lease(LEASE)
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
    /// The ids delivered.
    seen: HashSet<String>,
    early: Vec<String>,
    twice: Vec<String>,
    /// Every error a caller saw: which call, the error.
    errors: Vec<(&'static str, String)>,
    /// When each error came.
    error_at: Vec<Instant>,
    /// How many of them were redirects.
    redirects: usize,
}

impl Record {
    fn error(&mut self, call: &'static str, error: &Error) {
        if is_redirect(error) {
            self.redirects += 1;
        }
        self.errors.push((call, error.to_string()));
        self.error_at.push(Instant::now());
    }

    /// How many errors of each kind callers saw: the call and the message,
    /// numbers left out.
    fn kinds(&self) -> std::collections::BTreeMap<String, usize> {
        let mut kinds = std::collections::BTreeMap::new();
        for (call, error) in &self.errors {
            let mut kind = format!("{call}: ");
            for c in error.chars() {
                if !c.is_ascii_digit() {
                    kind.push(c);
                } else if !kind.ends_with('#') {
                    kind.push('#');
                }
            }
            *kinds.entry(kind).or_insert(0) += 1;
        }
        kinds
    }

    fn delivered(&self, id: &str) -> bool {
        self.seen.contains(id)
    }

    /// How many errors of `call` say `what`.
    fn count(&self, call: &str, what: &str) -> usize {
        self.errors
            .iter()
            .filter(|(c, e)| *c == call && e.contains(what))
            .count()
    }
}

/// What a scenario saw.
struct Seen {
    /// The ids whose schedule returned `Ok`.
    ok: HashSet<String>,
    record: Record,
    /// The dead master's partitions.
    dead: HashSet<u32>,
    /// Jobs scheduled on the dead master's partitions after the failover
    /// (written on the promoted master: `Ok` or `NotReplicated`).
    after: HashSet<String>,
    /// How long after the kill the replica took over.
    promoted_after: Duration,
    /// How long a waiting worker took to be woken for a job scheduled on
    /// the dead master's partitions after the failover (`None`: never).
    wake_after: Option<Duration>,
    /// The `Ok`'d jobs never delivered: each with where it is now on the
    /// node that serves it (waiting, leased, dead, absent) and when its
    /// schedule returned `Ok`, in ms from the kill.
    lost: Vec<(String, &'static str, i64)>,
    /// When the master was killed.
    killed: Instant,
}

/// Runs the scenario with `replicas(replicas)` and this node timeout.
async fn failover(replicas: u32, node_timeout: Duration) -> Seen {
    let _one = ONE_AT_A_TIME.lock().await;
    let timeout_ms = node_timeout.as_millis().to_string();
    let mut cluster =
        RedisCluster::start_with_replicas(3, 1, &["--cluster-node-timeout", &timeout_ms]);
    let seed = cluster.nodes[0].port;
    let url = cluster.nodes[0].url();
    let dead: HashSet<u32> = (0..PARTITIONS)
        .filter(|p| cluster.master_of(&format!("ttr:{{orders#{p}}}:timeline")) == seed)
        .collect();
    assert!(!dead.is_empty(), "the seed serves some partitions");

    let record = Arc::new(Mutex::new(Record::default()));
    let mut workers = Vec::new();
    for _ in 0..4 {
        let queue = connect(&url, replicas).await;
        workers.push(tokio::spawn(work(queue, record.clone())));
    }
    let producer = connect(&url, replicas).await;
    let mut producing = Producing {
        queue: &producer,
        record: &record,
        n: 0,
        outcomes: Default::default(),
        calls: tokio::task::JoinSet::new(),
    };
    producing
        .until(Instant::now() + Duration::from_secs(2), || false)
        .await;

    // SIGKILL the seed, a master; its replica takes over after the node
    // timeout. Scheduling goes on meanwhile, and for 3 s after: the
    // promoted master has no replica, so its partitions' schedules are
    // `NotReplicated`, and written there all the same.
    let replica = cluster.replica_of(seed);
    cluster.nodes[0].kill();
    let killed = Instant::now();
    producing
        .until(killed + PATIENCE, promoted_every_200ms(replica))
        .await;
    let promoted_after = killed.elapsed();
    assert!(promoted_after < PATIENCE, "no failover within {PATIENCE:?}");
    let failed_over = producing.n;
    producing
        .until(Instant::now() + Duration::from_secs(3), || false)
        .await;
    producing.settle().await;
    let Outcomes { ok, written, ok_at } = std::mem::take(&mut *producing.outcomes.lock().unwrap());
    let after: HashSet<String> = (failed_over..producing.n)
        .map(|i| format!("job-{i}"))
        .filter(|id| dead.contains(&partition_of(id)) && written.contains(id))
        .collect();

    let wake_after = wake_on(&producer, &record, &dead).await;
    // Every job scheduled with Ok is delivered (without replicas, give
    // them as long, then count).
    let waiting = Instant::now();
    while waiting.elapsed() < PATIENCE {
        let all = {
            let r = record.lock().unwrap();
            ok.iter().all(|id| r.delivered(id))
        };
        if all || (replicas == 0 && waiting.elapsed() > Duration::from_secs(10)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    for worker in workers {
        worker.abort();
    }
    let record = std::mem::take(&mut *record.lock().unwrap());
    let lost = ok
        .iter()
        .filter(|id| !record.delivered(id))
        .map(|id| {
            (
                id.clone(),
                where_is(&cluster, id),
                ms_from(killed, ok_at[id]),
            )
        })
        .collect();
    drop(cluster);
    Seen {
        ok,
        record,
        dead,
        after,
        promoted_after,
        wake_after,
        lost,
        killed,
    }
}

/// Whether the node on `port` is a master now, asked at most every 200 ms.
fn promoted_every_200ms(port: u16) -> impl FnMut() -> bool {
    let mut checked = Instant::now();
    move || {
        if checked.elapsed() < Duration::from_millis(200) {
            return false;
        }
        checked = Instant::now();
        let info = std::process::Command::new("redis-cli")
            .args(["-p", &port.to_string(), "INFO", "replication"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&info.stdout).contains("role:master")
    }
}

/// Schedules a job due now on one of the `dead` partitions (now on the
/// promoted replica) and returns how long a waiting worker took to get it
/// (`None`: not within [`PATIENCE`]).
async fn wake_on(
    producer: &Queue,
    record: &Mutex<Record>,
    dead: &HashSet<u32>,
) -> Option<Duration> {
    let on_dead = (0..)
        .map(|i| format!("wake-{i}"))
        .find(|id| dead.contains(&partition_of(id)))
        .unwrap();
    let start = Instant::now();
    while start.elapsed() < PATIENCE {
        match producer
            .schedule_with_id(on_dead.as_str(), Duration::ZERO, "wake")
            .await
        {
            Ok(_) | Err(Error::NotReplicated { .. }) => break,
            Err(error) => {
                record.lock().unwrap().error("schedule", &error);
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    while start.elapsed() < PATIENCE {
        if record.lock().unwrap().delivered(&on_dead) {
            return Some(start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

/// `at` in ms from `killed` (negative before).
fn ms_from(killed: Instant, at: Instant) -> i64 {
    if at >= killed {
        (at - killed).as_millis() as i64
    } else {
        -((killed - at).as_millis() as i64)
    }
}

/// A worker: takes jobs, records them, holds each [`HOLD`] and acks it;
/// records every error it sees and goes on.
async fn work(queue: Queue, record: Arc<Mutex<Record>>) {
    loop {
        let job = match queue.next().await {
            Ok(job) => job,
            Err(error) => {
                record.lock().unwrap().error("next", &error);
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let id = job.id().to_string();
        let late = SystemTime::now().duration_since(job.deadline());
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
            r.seen.insert(id.clone());
        }
        tokio::time::sleep(HOLD).await;
        record.lock().unwrap().holding.remove(&id);
        if let Err(error) = job.ack().await {
            record.lock().unwrap().error("ack", &error);
        }
    }
}

/// The producer: `job-0`, `job-1`, ... due 300 ms after they are
/// scheduled, one every [`EVERY`], each in a task of its own (as from
/// many request handlers: a call that waits for a dead node holds up no
/// other).
struct Producing<'a> {
    queue: &'a Queue,
    record: &'a Arc<Mutex<Record>>,
    n: u64,
    /// The ids whose schedule returned `Ok`, and those written on a master
    /// (`Ok` or `NotReplicated`).
    outcomes: Arc<Mutex<Outcomes>>,
    calls: tokio::task::JoinSet<()>,
}

#[derive(Default)]
struct Outcomes {
    ok: HashSet<String>,
    written: HashSet<String>,
    /// When each schedule returned `Ok`.
    ok_at: HashMap<String, Instant>,
}

impl Producing<'_> {
    /// Schedules until `until` or `stop()`.
    async fn until(&mut self, until: Instant, mut stop: impl FnMut() -> bool) {
        let mut next = tokio::time::Instant::now();
        while Instant::now() < until && !stop() {
            let id = format!("job-{}", self.n);
            self.n += 1;
            let queue = self.queue.clone();
            let record = self.record.clone();
            let outcomes = self.outcomes.clone();
            self.calls.spawn(async move {
                let result = queue
                    .schedule_with_id(id.as_str(), Duration::from_millis(300), "x")
                    .await;
                let mut outcomes = outcomes.lock().unwrap();
                match result {
                    Ok(_) => {
                        outcomes.ok.insert(id.clone());
                        outcomes.ok_at.insert(id.clone(), Instant::now());
                        outcomes.written.insert(id);
                    }
                    Err(error) => {
                        if matches!(error, Error::NotReplicated { .. }) {
                            outcomes.written.insert(id);
                        }
                        record.lock().unwrap().error("schedule", &error);
                    }
                }
            });
            next += EVERY;
            tokio::time::sleep_until(next).await;
        }
    }

    /// Waits for every call made so far.
    async fn settle(&mut self) {
        while self.calls.join_next().await.is_some() {}
    }
}

/// Where job `id` is on the node that serves its partition now:
/// `waiting`, `leased` or `absent`.
fn where_is(cluster: &RedisCluster, id: &str) -> &'static str {
    let key = format!("ttr:{{orders#{}}}:timeline", partition_of(id));
    let port = cluster.master_of(&key);
    let node = cluster.nodes.iter().find(|n| n.port == port).unwrap();
    match node.cli(&["ZSCORE", &key, id]).trim().parse::<f64>() {
        Ok(score) if score >= support::LEASED as f64 => "leased",
        Ok(_) => "waiting",
        Err(_) => {
            let dead = key.replace(":timeline", ":dead");
            if !node.cli(&["ZSCORE", &dead, id]).trim().is_empty() {
                "dead"
            } else {
                "absent"
            }
        }
    }
}

impl Seen {
    /// How many errors callers saw in each second from the kill (the
    /// seconds before it negative).
    fn errors_by_second(&self) -> std::collections::BTreeMap<i64, usize> {
        let mut by_second = std::collections::BTreeMap::new();
        for at in &self.record.error_at {
            let second = if *at >= self.killed {
                (*at - self.killed).as_secs() as i64
            } else {
                -1 - (self.killed - *at).as_secs() as i64
            };
            *by_second.entry(second).or_insert(0) += 1;
        }
        by_second
    }
}

/// What a scenario with `replicas(1)` must show (see the module docs).
fn check_with_replicas(seen: &Seen) {
    let record = &seen.record;
    println!(
        "replica took over {:?} after the kill; {} jobs Ok'd, {} deliveries, {} written on the \
         dead master's partitions after it; woken {:?} after scheduling there; errors: \
         schedule {} (NotReplicated {}), next {} (NotReplicated {}), ack {} (NotReplicated {}), \
         redirects {}",
        seen.promoted_after,
        seen.ok.len(),
        record.deliveries.len(),
        seen.after.len(),
        seen.wake_after,
        record.count("schedule", ""),
        record.count("schedule", "replica(s)"),
        record.count("next", ""),
        record.count("next", "replica(s)"),
        record.count("ack", ""),
        record.count("ack", "replica(s)"),
        record.redirects,
    );
    for (kind, n) in record.kinds() {
        println!("{n:6} {kind}");
    }
    println!(
        "errors by second from the kill: {:?}",
        seen.errors_by_second()
    );
    let mut states: HashMap<&str, usize> = HashMap::new();
    for (_, state, _) in &seen.lost {
        *states.entry(state).or_default() += 1;
    }
    println!(
        "{} of {} jobs Ok'd never delivered (now {states:?} on their node), e.g. {:?}",
        seen.lost.len(),
        seen.ok.len(),
        seen.lost
            .iter()
            .take(30)
            .map(|(id, state, ms)| format!(
                "{id} (partition {}, {state}, Ok {ms} ms after the kill)",
                partition_of(id)
            ))
            .collect::<Vec<_>>()
    );
    let redirects: Vec<&(&str, String)> = record
        .errors
        .iter()
        .filter(|(_, e)| e.contains("Moved") || e.contains("MOVED") || e.contains("Ask:"))
        .take(5)
        .collect();
    assert_eq!(
        record.redirects, 0,
        "callers saw cluster redirects, e.g. {redirects:?}"
    );
    assert!(
        seen.lost.is_empty(),
        "{} of {} jobs Ok'd never delivered (now {states:?} on their node), e.g. {:?}",
        seen.lost.len(),
        seen.ok.len(),
        seen.lost.iter().take(5).collect::<Vec<_>>()
    );
    assert!(
        seen.wake_after.is_some(),
        "no worker took a job scheduled on the dead master's partitions after the failover"
    );
    let revived = seen.after.iter().filter(|id| record.delivered(id)).count();
    assert_eq!(
        revived,
        seen.after.len(),
        "jobs written on the dead master's partitions after the failover, delivered"
    );
    let short = record.count("next", "replica(s)");
    assert_eq!(short, 0, "next failed for want of replicas");
    assert!(record.early.is_empty(), "early: {:?}", record.early);
    assert!(
        record.twice.is_empty(),
        "held twice at once: {:?}",
        record.twice
    );
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
        .filter(|(id, _, _)| !seen.dead.contains(&partition_of(id)))
        .map(|(_, _, late)| *late)
        .max()
        .unwrap();
    println!("healthy partitions at most {worst:?} late");
    // The contract is 2 s (0.9 s in the last run); the margin is for a
    // loaded CI. Before, a claim round stopped at the dead partition for
    // the whole node timeout: up to 20 s.
    assert!(
        worst <= Duration::from_secs(4),
        "a healthy partition's job came {worst:?} late"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_replicas_a_failover_after_a_2s_node_timeout_loses_nothing_acknowledged() {
    let seen = failover(1, Duration::from_secs(2)).await;
    check_with_replicas(&seen);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_replicas_a_failover_after_the_default_node_timeout_loses_nothing_acknowledged() {
    let seen = failover(1, Duration::from_secs(15)).await;
    check_with_replicas(&seen);
}

/// Without `replicas`: what asynchronous replication lost in a failover.
/// A measurement, not a check:
/// `cargo test -p tiered-timer-jobs --test failover -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement (about 40 s): prints what a failover lost without replicas(1)"]
async fn without_replicas_a_failover_may_lose_acknowledged_jobs() {
    let seen = failover(0, Duration::from_secs(15)).await;
    let record = &seen.record;
    println!(
        "without replicas: {} jobs Ok'd, {} never delivered, {} held twice at once, {} early, \
         {} redirects seen by callers",
        seen.ok.len(),
        seen.lost.len(),
        record.twice.len(),
        record.early.len(),
        record.redirects
    );
}
