//! A few queues with producers and workers that behave like real ones
//! (most jobs succeed, some fail and are retried, a few die, one worker
//! hangs), to look at `ttr serve` with something on it:
//!
//! ```text
//! cargo run -p tiered-timer-ttr --example demo_load -- redis://127.0.0.1:6379/ 120
//! cargo run -p tiered-timer-ttr -- serve --sample-every 2s
//! ```
//!
//! Arguments: the Redis URL (default `redis://127.0.0.1:6379/`; or an
//! embedded store, `file:///tmp/jobs`) and how many seconds to run
//! (default 120).

use std::time::Duration;

use tiered_timer_jobs::{Job, Queue};

#[tokio::main]
async fn main() -> Result<(), tiered_timer_jobs::Error> {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .unwrap_or_else(|| "redis://127.0.0.1:6379/".to_owned());
    let secs: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(120);

    let orders = Queue::builder(&url, "orders")
        .lease(Duration::from_secs(10))
        .max_attempts(3)
        .connect()
        .await?;
    // Partitions are Redis' (an embedded store has one per queue).
    let partitions = if url.starts_with("file://") { 1 } else { 3 };
    let mail = Queue::builder(&url, "mail")
        .partitions(partitions)
        .connect()
        .await?;
    let reports = Queue::connect(&url, "reports").await?;

    // Reports: a backlog due over the next hours, nobody working on it.
    reports
        .schedule_many((0..240).map(|i| (Duration::from_secs(60 * i), format!("report {i}"))))
        .await?;
    // A worker that hangs: its jobs' leases run out.
    for i in 0..3 {
        orders
            .schedule_with_id(format!("order-hung-{i}"), Duration::ZERO, "charge")
            .await?;
    }
    for _ in 0..3 {
        std::mem::forget(orders.next().await?);
    }

    let mut tasks = Vec::new();
    // Producers: orders at a steady rate, mail in bursts.
    tasks.push(tokio::spawn({
        let orders = orders.clone();
        async move {
            for i in 0u64.. {
                let delay = Duration::from_millis(200 + (i * 7919 % 5000));
                let _ = orders
                    .schedule_with_id(format!("order-{i}"), delay, format!("charge order {i}"))
                    .await;
                tokio::time::sleep(Duration::from_millis(60 + i % 90)).await;
            }
        }
    }));
    tasks.push(tokio::spawn({
        let mail = mail.clone();
        async move {
            for burst in 0u64.. {
                let n = 20 + (burst * 37 % 60);
                let _ = mail
                    .schedule_many(
                        (0..n)
                            .map(|i| (Duration::from_millis(i * 40), format!("mail {burst}.{i}"))),
                    )
                    .await;
                tokio::time::sleep(Duration::from_secs(4)).await;
            }
        }
    }));
    // Workers: orders slower than they arrive at times, so a backlog
    // grows and shrinks; one order in 9 fails, one in 40 is buried.
    for w in 0..2 {
        let orders = orders.clone();
        tasks.push(tokio::spawn(async move {
            let mut n = w as u64;
            while let Ok(job) = orders.next().await {
                n += 1;
                tokio::time::sleep(Duration::from_millis(90 + (n * 31 % 120))).await;
                let _ = finish(job, n).await;
            }
        }));
    }
    let mail_worker = mail.clone();
    tasks.push(tokio::spawn(async move {
        while let Ok(job) = mail_worker.next().await {
            tokio::time::sleep(Duration::from_millis(120)).await;
            let _ = job.ack().await;
        }
    }));
    tokio::time::sleep(Duration::from_secs(secs)).await;
    for task in tasks {
        task.abort();
    }
    println!("{}: {}", orders.name(), orders.stats().await?);
    println!("{}: {}", mail.name(), mail.stats().await?);
    Ok(())
}

async fn finish(job: Job, n: u64) -> Result<(), tiered_timer_jobs::Error> {
    if n % 40 == 0 {
        job.bury("card declined: <insufficient funds>").await
    } else if n % 9 == 0 {
        job.fail("payment provider timed out after 30s")
            .await
            .map(|_| ())
    } else {
        job.ack().await
    }
}
