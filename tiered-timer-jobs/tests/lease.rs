//! Renewable, fenced leases (`Job::extend_lease`, `Job::keep_alive`)
//! against a real redis-server started by each test (see `support`).

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::{eventually, RedisServer};
use tiered_timer_jobs::{Error, Job, JobId, Queue};

const WAIT: Duration = Duration::from_secs(20);

async fn queue(server: &RedisServer, lease: Duration) -> Queue {
    support::queue(server, lease, 5).await
}

/// The lease expiry of `id` (ms, Redis' clock), if it is leased.
async fn lease_expiry(server: &RedisServer, id: &JobId) -> Option<u64> {
    support::lease_expiry_ms(&server.url(), "orders", id.as_str()).await
}

/// Every delivery: the job, its attempt, and Redis' time of the claim.
type Deliveries = Arc<Mutex<Vec<(JobId, u32, u64)>>>;

/// A worker that records every delivery (with Redis' time of the claim)
/// and acks it.
fn recording_worker(queue: Queue, server_url: String) -> (Deliveries, tokio::task::JoinHandle<()>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let task = tokio::spawn(async move {
        loop {
            let job = queue.next().await.expect("next");
            let expiry = support::lease_expiry_ms(&server_url, "orders", job.id().as_str())
                .await
                .expect("leased");
            let claimed_at = expiry - job.lease().as_millis() as u64;
            record
                .lock()
                .unwrap()
                .push((job.id().clone(), job.attempt(), claimed_at));
            job.ack().await.expect("ack");
        }
    });
    (seen, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_kept_alive_for_five_leases_is_delivered_once() {
    let server = RedisServer::start();
    let lease = Duration::from_millis(200);
    let holder = queue(&server, lease).await;
    let id = holder.schedule(Duration::ZERO, "long").await.unwrap();
    let job = holder.next().await.unwrap();
    let first_expiry = lease_expiry(&server, &id).await.unwrap();

    // Another worker waits for the job the whole time.
    let (others, other) = recording_worker(queue(&server, lease).await, server.url());

    let worked = job
        .keep_alive(async {
            tokio::time::sleep(lease * 5).await;
            "done"
        })
        .await
        .expect("the lease is kept");
    assert_eq!(worked, "done");
    let renewed_expiry = lease_expiry(&server, &id).await.unwrap();
    assert!(
        renewed_expiry >= first_expiry + 3 * lease.as_millis() as u64,
        "the lease was renewed while the work ran ({first_expiry} -> {renewed_expiry})"
    );
    assert!(
        others.lock().unwrap().is_empty(),
        "delivered to another worker while kept alive: {:?}",
        others.lock().unwrap()
    );
    job.ack().await.expect("ack after five leases");

    // Nothing comes back afterwards either.
    tokio::time::sleep(lease * 2).await;
    assert!(others.lock().unwrap().is_empty());
    assert!(!other.is_finished(), "the other worker failed");
    other.abort();
    assert_eq!(server.job_keys(), "0");
}

/// Worker A renews at about the moment its lease runs out while worker B
/// waits to claim the job. Whatever the order, exactly one holds it: A's
/// renewal succeeds and B gets nothing, or A's renewal fails and B gets
/// the job (attempt 2) and A's ack fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_racing_the_expiry_leaves_exactly_one_holder() {
    let server = RedisServer::start();
    let lease = Duration::from_millis(60);
    let a = queue(&server, lease).await;
    let b = queue(&server, Duration::from_secs(30)).await;
    let (mut renewed, mut taken_over) = (0, 0);
    for round in 0..30i64 {
        let skew_ms = round % 15 - 7; // -7 .. +7 ms around the expiry
        let id = a
            .schedule_with_id(format!("race-{round}"), Duration::ZERO, "x")
            .await
            .unwrap();
        let job = a.next().await.unwrap();
        assert_eq!(job.id(), &id);
        let expiry = lease_expiry(&server, &id).await.unwrap();
        let b_next = tokio::spawn({
            let b = b.clone();
            async move { b.next().await }
        });
        let now = server.now_ms().await;
        let target = expiry as i64 + skew_ms;
        if target > now as i64 {
            tokio::time::sleep(Duration::from_millis((target - now as i64) as u64)).await;
        }
        match job.extend_lease(Duration::from_secs(30)).await {
            Ok(()) => {
                renewed += 1;
                let mut b_next = b_next;
                let b_got = tokio::time::timeout(Duration::from_millis(150), &mut b_next).await;
                assert!(
                    b_got.is_err(),
                    "round {round} (skew {skew_ms} ms): renewed, yet B got {b_got:?}"
                );
                b_next.abort();
                job.ack().await.expect("the renewed holder acks");
            }
            Err(Error::LeaseExpired { id: lost }) => {
                taken_over += 1;
                assert_eq!(lost, id);
                let b_job = tokio::time::timeout(WAIT, b_next)
                    .await
                    .expect("B gets the job whose lease ran out")
                    .unwrap()
                    .unwrap();
                assert_eq!(b_job.id(), &id);
                assert_eq!(b_job.attempt(), 2);
                assert!(
                    matches!(job.ack().await, Err(Error::LeaseExpired { .. })),
                    "round {round}: the old holder's ack must fail"
                );
                b_job.ack().await.expect("the new holder acks");
            }
            Err(other) => panic!("round {round}: unexpected {other:?}"),
        }
        assert_eq!(a.leased().await.unwrap(), 0, "round {round}");
        assert_eq!(a.pending().await.unwrap(), 0, "round {round}");
    }
    eprintln!("race: renewed {renewed}, taken over {taken_over} of 30 rounds");
    // Both sides of the race were exercised (early renewals succeed, late
    // ones find the lease gone); a run with only one kind tested nothing.
    assert!(
        renewed > 0 && taken_over > 0,
        "renewed {renewed}, taken over {taken_over}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_whose_renewals_stop_loses_the_job_after_one_lease() {
    let server = RedisServer::start();
    let lease = Duration::from_millis(300);
    let holder = queue(&server, lease).await;
    let id = holder.schedule(Duration::ZERO, "x").await.unwrap();
    let job = holder.next().await.unwrap();
    let (others, other) = recording_worker(queue(&server, lease).await, server.url());

    // Renewed for a while; then the worker stops renewing (its keep_alive
    // is dropped: the worker hangs, or forgot).
    let cut = tokio::time::timeout(lease * 3, job.keep_alive(std::future::pending::<()>())).await;
    assert!(cut.is_err(), "the pending work never finishes");
    let stopped_at = server.now_ms().await;
    assert!(
        others.lock().unwrap().is_empty(),
        "delivered to another worker while renewed"
    );

    eventually("another worker gets the job", WAIT, || {
        let n = others.lock().unwrap().len();
        async move { n == 1 }
    })
    .await;
    let (got, attempt, claimed_at) = others.lock().unwrap()[0].clone();
    assert_eq!(got, id);
    assert_eq!(attempt, 2);
    // Claimed once the last renewal's lease ran out: no later than one
    // lease after the renewals stopped (plus the claim's own latency).
    assert!(
        claimed_at <= stopped_at + lease.as_millis() as u64 + 1000,
        "claimed at {claimed_at}, renewals stopped at {stopped_at}"
    );
    assert!(matches!(job.ack().await, Err(Error::LeaseExpired { .. })));
    other.abort();
}

#[tokio::test]
async fn keep_alive_stops_the_work_and_reports_a_lost_lease() {
    let server = RedisServer::start();
    let lease = Duration::from_millis(300);
    let queue = queue(&server, lease).await;
    let id = queue.schedule(Duration::ZERO, "x").await.unwrap();
    let job = queue.next().await.unwrap();

    // While the work runs, someone else's token replaces ours (as a
    // takeover would): the next renewal fails and the work is stopped.
    let finished = AtomicBool::new(false);
    let work = async {
        tokio::time::sleep(Duration::from_secs(5)).await;
        finished.store(true, Ordering::SeqCst);
    };
    let steal = async {
        tokio::time::sleep(lease / 2).await;
        support::steal_lease(&server, "orders", id.as_str());
        std::future::pending::<()>().await
    };
    let started = tokio::time::Instant::now();
    let outcome = tokio::select! {
        outcome = job.keep_alive(work) => outcome,
        () = steal => unreachable!(),
    };
    match outcome {
        Err(Error::LeaseExpired { id: lost }) => assert_eq!(lost, id),
        other => panic!("expected LeaseExpired, got {other:?}"),
    }
    assert!(!finished.load(Ordering::SeqCst), "the work was stopped");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "stopped at the first failed renewal, not at the end of the work"
    );
}

#[tokio::test]
async fn extend_after_the_lease_is_lost_fails_clearly() {
    let server = RedisServer::start();
    let queue = queue(&server, Duration::from_millis(150)).await;
    let id = queue.schedule(Duration::ZERO, "x").await.unwrap();
    let job = queue.next().await.unwrap();

    assert!(matches!(
        job.extend_lease(Duration::ZERO).await,
        Err(Error::InvalidArgument { .. })
    ));
    assert!(matches!(
        job.extend_lease(Duration::MAX).await,
        Err(Error::InvalidArgument { .. })
    ));
    job.extend_lease(Duration::from_millis(150))
        .await
        .expect("held");

    // Run out by Redis' clock, not yet claimed by anyone: still refused.
    let expiry = lease_expiry(&server, &id).await.unwrap();
    eventually("Redis' clock passes the lease", WAIT, || async {
        server.now_ms().await > expiry
    })
    .await;
    let error = job.extend_lease(Duration::from_secs(30)).await.unwrap_err();
    assert!(matches!(&error, Error::LeaseExpired { id: lost } if lost == &id));
    assert!(
        error.to_string().contains(id.as_str()),
        "the message names the job: {error}"
    );
    assert_eq!(
        lease_expiry(&server, &id).await,
        Some(expiry),
        "a refused renewal changes nothing"
    );
    // keep_alive finds out at its first renewal and never finishes the work.
    let outcome = job
        .keep_alive(tokio::time::sleep(Duration::from_secs(5)))
        .await;
    assert!(matches!(outcome, Err(Error::LeaseExpired { .. })));

    // Redelivered, then acked by the new holder: still refused.
    let again = tokio::time::timeout(WAIT, queue.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.attempt(), 2);
    again.ack().await.unwrap();
    assert!(matches!(
        job.extend_lease(Duration::from_secs(30)).await,
        Err(Error::LeaseExpired { .. })
    ));
    assert_eq!(server.job_keys(), "0", "nothing was revived");
}

#[tokio::test]
async fn keep_alive_gives_up_before_the_lease_runs_out_when_redis_is_unreachable() {
    let server = RedisServer::start();
    let lease = Duration::from_millis(600);
    let queue = Queue::builder(&server.url(), "orders")
        .lease(lease)
        .command_timeout(Duration::from_secs(5))
        .connect()
        .await
        .unwrap();
    queue.schedule(Duration::ZERO, "x").await.unwrap();
    let job: Job = queue.next().await.unwrap();
    let claimed = tokio::time::Instant::now();
    server.freeze();
    let outcome = job.keep_alive(std::future::pending::<()>()).await;
    let gave_up_after = claimed.elapsed();
    server.thaw();
    assert!(
        matches!(outcome, Err(Error::Timeout { .. } | Error::Redis(_))),
        "got {outcome:?}"
    );
    // Not after the lease (by the local estimate, which is never later
    // than Redis' expiry), and not before a renewal was due.
    assert!(
        gave_up_after >= lease / 3 && gave_up_after <= lease + Duration::from_millis(200),
        "gave up after {gave_up_after:?}"
    );
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

/// A measurement, not a check: what keeping one job alive costs Redis,
/// with two idle workers waiting on the queue. Prints scripts/s and
/// commands/s (commands inside scripts included) over 9 s, lease 3 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement (about 10 s): cargo test -p tiered-timer-jobs --test lease -- --ignored --nocapture"]
async fn measure_the_cost_of_keep_alive() {
    let server = RedisServer::start();
    let lease = Duration::from_secs(3);
    let holder = queue(&server, lease).await;
    holder.schedule(Duration::ZERO, "x").await.unwrap();
    let job = holder.next().await.unwrap();
    let mut waiters = Vec::new();
    for _ in 0..2 {
        let waiter = queue(&server, lease).await;
        waiters.push(tokio::spawn(async move { waiter.next().await }));
    }
    let window = Duration::from_secs(9);
    let (commands, scripts) = job
        .keep_alive(async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let (c0, s0) = (server.commands_processed(), scripts_run(&server));
            tokio::time::sleep(window).await;
            let (c1, s1) = (server.commands_processed(), scripts_run(&server));
            // Less our own two INFO commands.
            ((c1 - c0 - 2) as f64, (s1 - s0) as f64)
        })
        .await
        .unwrap();
    for waiter in &waiters {
        assert!(!waiter.is_finished(), "taken while kept alive");
        waiter.abort();
    }
    let secs = window.as_secs_f64();
    println!(
        "one job kept alive, lease {lease:?}, 2 idle waiters: {:.2} scripts/s, {:.2} commands/s",
        scripts / secs,
        commands / secs
    );
}
