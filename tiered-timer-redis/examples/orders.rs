//! Closing unpaid orders, durably: a producer and three workers, each a
//! real process or task.
//!
//! * Worker A is killed (SIGKILL) while it holds a job: that job comes back
//!   once its lease runs out, with `attempt() == 2`.
//! * Worker C works on a long job, keeping its lease alive past the lease
//!   length, and is stopped with Ctrl-C (a real SIGINT): it stops taking
//!   jobs and hands back the job in hand, which another worker gets at
//!   once, with its attempt not counted.
//! * Worker B handles the rest, and stops the same way if you press Ctrl-C.
//!
//! ```sh
//! cargo run -p tiered-timer-redis --example orders
//! REDIS_URL=redis://127.0.0.1:6379/ cargo run -p tiered-timer-redis --example orders
//! ```
//!
//! Starts its own redis-server unless `REDIS_URL` is set.

mod support;

use std::io::{BufRead, BufReader, Lines};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use tiered_timer_redis::{Job, Queue};

const LEASE: Duration = Duration::from_secs(3);

async fn connect(url: &str) -> Queue {
    Queue::builder(url, "orders-example")
        .lease(LEASE)
        .max_attempts(5)
        .connect()
        .await
        .expect("connect to Redis")
}

/// Worker A, run as a child process: takes one job and hangs on it.
async fn worker_a(url: &str) {
    let queue = connect(url).await;
    let job = queue.next().await.expect("claim a job");
    println!("HOLDING {} attempt {}", job.id(), job.attempt());
    std::future::pending::<()>().await;
}

/// Closing an order: here, just taking `work` (longer than a lease for
/// worker C).
async fn close_order(job: &Job, work: Duration) {
    let _ = job.payload();
    tokio::time::sleep(work).await;
}

/// A worker as a service runs it: takes up to `jobs` jobs, each worked on
/// for `work` with its lease kept alive, until Ctrl-C. On Ctrl-C it stops
/// taking jobs (`close`) and hands back the job in hand (dropped after
/// `close`, so released), and `shutdown` waits for that release. Returns
/// whether it was stopped by Ctrl-C.
async fn work_until_ctrl_c(
    queue: &Queue,
    work: Duration,
    jobs: usize,
    say: impl Fn(String),
) -> bool {
    let ctrl_c = tokio::signal::ctrl_c();
    let mut ctrl_c = std::pin::pin!(ctrl_c);
    for _ in 0..jobs {
        let job = tokio::select! {
            biased; // listen for Ctrl-C before anything else
            _ = &mut ctrl_c => break,
            job = queue.next() => job.expect("Redis is up"),
        };
        let late = SystemTime::now()
            .duration_since(job.deadline())
            .unwrap_or_default();
        say(format!(
            "HOLDING {} attempt {} ({}), {} ms after it was due",
            job.id(),
            job.attempt(),
            String::from_utf8_lossy(job.payload()),
            late.as_millis()
        ));
        tokio::select! {
            biased;
            _ = &mut ctrl_c => {
                say(format!("Ctrl-C: handing {} back", job.id()));
                queue.close(); // no more jobs; jobs dropped from now on are released
                drop(job);
                queue.shutdown().await; // waits for the release
                return true;
            }
            worked = job.keep_alive(close_order(&job, work)) => match worked {
                Ok(()) => {
                    let id = job.id().clone();
                    job.ack().await.expect("ack");
                    say(format!("done with {id}"));
                }
                Err(error) => say(format!("lease lost, left to the next worker: {error}")),
            },
        }
    }
    queue.shutdown().await;
    false
}

/// Worker C, run as a child process: a long job kept alive, then Ctrl-C.
async fn worker_c(url: &str) {
    let queue = connect(url).await;
    let stopped = work_until_ctrl_c(&queue, LEASE * 10, 1, |line| println!("{line}")).await;
    if stopped {
        println!("STOPPED by Ctrl-C");
    }
}

fn start_child(mode: &str, url: &str) -> (Child, Lines<BufReader<ChildStdout>>) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([mode, url])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start a worker process");
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    (child, lines)
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("worker-a") => return worker_a(&args[2]).await,
        Some("worker-c") => return worker_c(&args[2]).await,
        _ => {}
    }

    let redis = support::Redis::start();
    let started = Instant::now();
    let say = |what: String| println!("[{:>5.2} s] {what}", started.elapsed().as_secs_f64());

    let producer = connect(&redis.url).await;
    for (order, secs) in [("order-1", 1.0), ("order-2", 1.5), ("order-3", 2.0)] {
        let payload = format!("close {order} if still unpaid");
        producer
            .schedule_with_id(order, Duration::from_secs_f64(secs), payload)
            .await
            .unwrap();
        say(format!("producer: {order} due in {secs} s"));
    }
    // A producer that retries after a timeout makes no duplicate.
    producer
        .schedule_with_id("order-1", Duration::from_secs(1), "again")
        .await
        .unwrap();
    say(format!(
        "producer: scheduled order-1 again (a retry): still {} pending",
        producer.pending().await.unwrap()
    ));

    say("worker A: starting (a separate process)".into());
    let (mut a, mut lines) = start_child("worker-a", &redis.url);
    let held = lines.next().expect("worker A reports").unwrap();
    say(format!(
        "worker A: {} -- and hangs on it; killing it (SIGKILL)",
        held.to_lowercase()
    ));
    a.kill().unwrap();
    a.wait().unwrap();

    say("worker C: starting (a separate process); its jobs take 30 s, 10 leases".into());
    let (mut c, mut lines) = start_child("worker-c", &redis.url);
    let held = lines.next().expect("worker C reports").unwrap();
    say(format!("worker C: {}", held.to_lowercase()));

    say(format!(
        "worker B: starting; gets order-3, order-1 once worker A's {} s lease runs out \
         (attempt 2), and order-2 as soon as worker C hands it back (attempt 1 again). \
         Press Ctrl-C to stop it the same way.",
        LEASE.as_secs()
    ));
    let worker_b = connect(&redis.url).await;
    let b = tokio::spawn(async move {
        let say = |what: String| println!("[{:>5.2} s] {what}", started.elapsed().as_secs_f64());
        let stopped = work_until_ctrl_c(&worker_b, Duration::ZERO, 3, |line| {
            say(format!("worker B: {}", line.to_lowercase()))
        })
        .await;
        if stopped {
            say("worker B: stopped by Ctrl-C".into());
        }
    });

    tokio::time::sleep(LEASE * 4 / 3).await;
    say(
        "worker C: still holds order-2 after 4/3 of a lease (kept alive); pressing Ctrl-C (SIGINT)"
            .into(),
    );
    let status = Command::new("kill")
        .args(["-INT", &c.id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
    for line in lines {
        say(format!("worker C: {}", line.unwrap().to_lowercase()));
    }
    c.wait().unwrap();

    b.await.unwrap();
    say(format!(
        "pending {}, leased {}",
        producer.pending().await.unwrap(),
        producer.leased().await.unwrap()
    ));
}
