//! Closing unpaid orders, durably: a producer and two workers; one worker
//! is killed (SIGKILL, a real process) while holding a job, and the other
//! gets that job once its lease runs out.
//!
//! ```sh
//! cargo run -p tiered-timer-redis --example orders
//! REDIS_URL=redis://127.0.0.1:6379/ cargo run -p tiered-timer-redis --example orders
//! ```
//!
//! Starts its own redis-server unless `REDIS_URL` is set.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use tiered_timer_redis::Queue;

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

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("worker-a") {
        worker_a(&args[2]).await;
        return;
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
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["worker-a", &redis.url])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start worker A");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let held = lines.next().expect("worker A reports").unwrap();
    say(format!(
        "worker A: {} -- and hangs on it; killing it (SIGKILL)",
        held.to_lowercase()
    ));
    child.kill().unwrap();
    child.wait().unwrap();

    say(format!(
        "worker B: starting; the killed worker's job comes back after its {} s lease",
        LEASE.as_secs()
    ));
    let worker_b = connect(&redis.url).await;
    let mut done = 0;
    while done < 3 {
        let job = worker_b.next().await.unwrap();
        let late = SystemTime::now()
            .duration_since(job.deadline())
            .unwrap_or_default();
        say(format!(
            "worker B: {} attempt {} ({}), {} ms after it was due",
            job.id(),
            job.attempt(),
            String::from_utf8_lossy(job.payload()),
            late.as_millis()
        ));
        job.ack().await.unwrap();
        done += 1;
    }
    say(format!(
        "all orders handled; pending {}, leased {}",
        producer.pending().await.unwrap(),
        producer.leased().await.unwrap()
    ));
}
