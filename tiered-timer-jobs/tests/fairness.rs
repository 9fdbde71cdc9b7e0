//! Fairness across partitions (issue 33, part 4): under a backlog, claims
//! take jobs oldest due first across partitions, so that no partition's
//! most overdue job waits while jobs that came due after it, on the other
//! partitions, are served.
//!
//! Each test gives one busy worker a backlog on three partitions, with
//! every job's due time distinct (a job's *rank* is its place in due
//! order), and measures in jobs, not in seconds: how many jobs that came
//! due after a partition's most overdue waiting job were delivered before
//! it (*overtook* it), at worst over the run. Before the fix a worker
//! drained one partition, then the next (150 to 200 overtakers of 200
//! deliveries); oldest due first keeps it to a job or two.

mod support;

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use support::RedisServer;
use tiered_timer_jobs::{Job, JobId, Queue};

const WAIT: Duration = Duration::from_secs(30);
const PARTITIONS: u32 = 3;
/// The backlog: this many jobs, due 1 ms apart, the last a minute ago.
const BACKLOG: usize = 300;
/// A `next` claims one job, on the partition with the oldest due jobs:
/// a partition's most overdue job is overtaken by a job or two at most
/// (the ones other partitions' first claims took before all three were
/// known).
const NEXT_BOUND: usize = 3;
/// `ack_and_next` stays on its job's partition (ack and claim in one
/// script) for up to 7 claims in a row while another partition's jobs are
/// older, then claims on the oldest: a partition's most overdue job waits
/// for at most that, on each of the two other partitions, plus a claim.
const ACK_AND_NEXT_BOUND: usize = 2 * 8 + 2;

async fn connect(server: &RedisServer) -> Queue {
    Queue::builder(&server.url(), "mail")
        .partitions(PARTITIONS)
        .connect()
        .await
        .unwrap()
}

/// Schedules the backlog (each job's payload: its rank), on the
/// partitions `on` only (the others' jobs are cancelled); returns each
/// job's due time and partition.
async fn backlog(server: &RedisServer, queue: &Queue, on: &[u32]) -> HashMap<JobId, Due> {
    let last = UNIX_EPOCH + Duration::from_millis(server.now_ms().await - 60_000);
    let first = last - Duration::from_millis(BACKLOG as u64);
    let ids = queue
        .schedule_many_at((0..BACKLOG).map(|rank| {
            let at = first + Duration::from_millis(rank as u64);
            (at, rank.to_string())
        }))
        .await
        .unwrap();
    let mut jobs = HashMap::new();
    for id in ids {
        let due = due(queue, &id).await;
        if on.contains(&due.partition) {
            jobs.insert(id, due);
        } else {
            assert!(queue.cancel(&id).await.unwrap());
        }
    }
    for p in on {
        let n = jobs.values().filter(|due| due.partition == *p).count();
        assert!(n >= BACKLOG / 5, "partition {p} has only {n} jobs");
    }
    jobs
}

/// When a job is due and where.
#[derive(Debug, Clone, Copy)]
struct Due {
    at: SystemTime,
    partition: u32,
}

async fn due(queue: &Queue, id: &JobId) -> Due {
    let info = queue.job(id).await.unwrap().expect("scheduled");
    Due {
        at: info.due.expect("waiting"),
        partition: info.partition,
    }
}

/// The worst overtaking over the deliveries `order` of the jobs `jobs`:
/// (overtakers, partition, after how many deliveries). Jobs due at the
/// same millisecond count in the order they were scheduled (`seq`).
///
/// A job scheduled after delivery k is due after every job delivered by
/// then (all of them were due), so it has none to count, and is taken for
/// waiting from the start.
fn worst_overtaking(jobs: &HashMap<JobId, (Due, usize)>, order: &[JobId]) -> (usize, u32, usize) {
    let mut by_due: Vec<(&JobId, &(Due, usize))> = jobs.iter().collect();
    by_due.sort_by_key(|(_, (due, seq))| (due.at, *seq));
    let rank: HashMap<&JobId, usize> = by_due
        .iter()
        .enumerate()
        .map(|(r, (id, _))| (*id, r))
        .collect();
    let partition_of: Vec<u32> = by_due.iter().map(|(_, (due, _))| due.partition).collect();
    let mut delivered = vec![false; by_due.len()];
    let mut worst = (0, 0, 0);
    for (k, id) in order.iter().enumerate() {
        let r = rank[id];
        assert!(!delivered[r], "{id} delivered twice");
        delivered[r] = true;
        for p in 0..PARTITIONS {
            let oldest = (0..by_due.len()).find(|&r| partition_of[r] == p && !delivered[r]);
            let Some(oldest) = oldest else { continue };
            let overtakers = order[..=k].iter().filter(|id| rank[id] > oldest).count();
            if overtakers > worst.0 {
                worst = (overtakers, p, k + 1);
            }
        }
    }
    worst
}

/// Lets `take` deliver jobs from a backlog of [`BACKLOG`] jobs on every
/// partition; returns the worst overtaking (see [`worst_overtaking`]),
/// and the scripts Redis ran meanwhile.
async fn overtaking<F, Fut>(take: F) -> ((usize, u32, usize), u64)
where
    F: FnOnce(Queue) -> Fut,
    Fut: std::future::Future<Output = Vec<JobId>>,
{
    let server = RedisServer::start();
    let queue = connect(&server).await;
    let jobs = backlog(&server, &queue, &[0, 1, 2]).await;
    let before = scripts_run(&server);
    let order = tokio::time::timeout(WAIT, take(queue.clone()))
        .await
        .expect("the worker took its jobs");
    let scripts = scripts_run(&server) - before;
    assert_eq!(order.len(), 2 * BACKLOG / 3);
    println!("{scripts} scripts for {} jobs", order.len());
    let jobs = jobs.into_iter().map(|(id, due)| (id, (due, 0))).collect();
    (report(worst_overtaking(&jobs, &order)), scripts)
}

/// Redis' count of `EVALSHA` calls (`INFO commandstats`).
fn scripts_run(server: &RedisServer) -> u64 {
    let info = server.cli(&["INFO", "commandstats"]);
    info.lines()
        .find_map(|line| line.strip_prefix("cmdstat_evalsha:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn report(worst: (usize, u32, usize)) -> (usize, u32, usize) {
    println!(
        "worst: partition {}'s most overdue job overtaken by {} jobs, after {} deliveries",
        worst.1, worst.0, worst.2
    );
    worst
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn next_takes_the_oldest_due_job_across_partitions() {
    let ((worst, partition, after), _) = overtaking(|queue| async move {
        let mut order = Vec::new();
        while order.len() < 2 * BACKLOG / 3 {
            let job = queue.next().await.unwrap();
            order.push(job.id().clone());
            job.ack().await.unwrap();
        }
        order
    })
    .await;
    assert!(
        worst <= NEXT_BOUND,
        "partition {partition}'s most overdue job was overtaken by {worst} jobs due after it \
         (after {after} deliveries)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ack_and_next_takes_the_oldest_due_job_across_partitions_within_a_bound() {
    let ((worst, partition, after), scripts) = overtaking(|queue| async move {
        let mut job = queue.next().await.unwrap();
        let mut order = vec![job.id().clone()];
        while order.len() < 2 * BACKLOG / 3 {
            job = job.ack_and_next().await.unwrap();
            order.push(job.id().clone());
        }
        order
    })
    .await;
    assert!(
        worst <= ACK_AND_NEXT_BOUND,
        "partition {partition}'s most overdue job was overtaken by {worst} jobs due after it \
         (after {after} deliveries)"
    );
    // One script per job (an ack and a claim), and an ack of its own once
    // in 8 claims at most; a few more for the first claims and the
    // scripts' first loads.
    let jobs = (2 * BACKLOG / 3) as u64;
    assert!(
        scripts <= jobs + jobs / 8 + 6,
        "{scripts} scripts for {jobs} jobs"
    );
}

/// The demo: jobs keep coming on every partition, one per job the
/// worker takes, so the worker never catches up; one partition had none
/// when the worker began (its first claim found it empty). Its jobs must
/// not wait behind the others' newer ones, though no worker of this busy
/// process ever blocks on its wake-up baton.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_coming_on_a_partition_found_empty_are_not_left_behind() {
    let server = RedisServer::start();
    let queue = connect(&server).await;
    let backlog = backlog(&server, &queue, &[0, 1]).await;
    let mut jobs: HashMap<JobId, (Due, usize)> = backlog
        .into_iter()
        .map(|(id, due)| (id, (due, 0)))
        .collect();
    let mut order = Vec::new();
    tokio::time::timeout(WAIT, async {
        while order.len() < 2 * BACKLOG {
            let job: Job = queue.next().await.unwrap();
            order.push(job.id().clone());
            job.ack().await.unwrap();
            let id = queue.schedule(Duration::ZERO, "new").await.unwrap();
            let seq = order.len();
            jobs.insert(id.clone(), (due(&queue, &id).await, seq));
        }
    })
    .await
    .expect("the worker took its jobs");
    let on_two = order.iter().filter(|id| jobs[*id].0.partition == 2).count();
    assert!(on_two > 0, "no job of partition 2 was delivered");
    let (worst, partition, after) = report(worst_overtaking(&jobs, &order));
    assert!(
        worst <= NEXT_BOUND,
        "partition {partition}'s most overdue job was overtaken by {worst} jobs due after it \
         (after {after} deliveries)"
    );
}

/// An `ack_and_next` whose lease was lost strands nothing when its claim
/// went to another partition beside the ack: what that claim took goes to
/// the next call. The backlog is cut so that the worker's partition is
/// never the one with the oldest jobs after its first job: partition 0
/// holds the oldest job and then only the newest, partition 1 those in
/// between. So `ack_and_next` stays on partition 0 for 7 claims (see
/// `STAY` in src/redis/wake/fair.rs), and the 8th claims on partition 1, beside
/// an ack whose lease was taken over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ack_and_next_with_a_lost_lease_strands_what_it_claimed_elsewhere() {
    let server = RedisServer::start();
    let queue = connect(&server).await;
    let jobs = backlog(&server, &queue, &[0, 1]).await;
    let mut by_due: Vec<(&JobId, &Due)> = jobs.iter().collect();
    by_due.sort_by_key(|(_, due)| due.at);
    let (first, _) = by_due.iter().find(|(_, due)| due.partition == 0).unwrap();
    let first = (*first).clone();
    let newest = by_due.len() * 2 / 3;
    let mut middle = Vec::new();
    for (rank, (id, due)) in by_due.iter().enumerate() {
        let keep = match due.partition {
            0 => **id == first || rank >= newest,
            _ => rank < newest && by_due[..rank].iter().any(|(f, _)| **f == first),
        };
        if !keep {
            assert!(queue.cancel(id).await.unwrap());
        } else if due.partition == 1 {
            middle.push((*id).clone());
        }
    }
    assert!(middle.len() >= 8, "partition 1 keeps {} jobs", middle.len());

    let mut job = queue.next().await.unwrap();
    assert_eq!(job.id(), &first);
    for _ in 0..7 {
        job = job.ack_and_next().await.unwrap();
        assert_eq!(due(&queue, job.id()).await.partition, 0, "stays");
    }
    support::steal_lease(&server, "mail#0", job.id().as_str());
    let lost = job.id().clone();
    match job.ack_and_next().await {
        Err(tiered_timer_jobs::Error::LeaseExpired { id }) => assert_eq!(id, lost),
        other => panic!("expected LeaseExpired, got {other:?}"),
    }
    // The job claimed on partition 1 beside the lost ack is the next
    // call's, not leased to nobody until its lease runs out.
    let next = queue.next().await.unwrap();
    assert_eq!(next.id(), &middle[0]);
    assert_eq!(
        queue.leased().await.unwrap(),
        2,
        "the lost one and this one"
    );
    next.ack().await.unwrap();
}
