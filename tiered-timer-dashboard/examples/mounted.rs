//! A small shop service that keeps its jobs in an embedded store and
//! mounts the dashboard next to its own routes, over its own queue handle:
//!
//! ```text
//! cargo run -p tiered-timer-dashboard --example mounted -- /tmp/shop-jobs 127.0.0.1:8080
//! ```
//!
//! then open <http://127.0.0.1:8080/ops/jobs> (the token is `shop`, or
//! `$JOBS_DASHBOARD_TOKEN`). The service schedules an order every 200 ms,
//! due in 0 to 20 s, and a worker task delivers them; one in ten fails
//! and is retried, and one in fifty is out of attempts (a dead letter).
//!
//! Arguments: the store's directory (default `shop-jobs` in the temporary
//! directory) and where to listen (default `127.0.0.1:8080`).

use std::time::Duration;

use axum::routing::get;
use axum::Router;
use tiered_timer_dashboard::Dashboard;
use tiered_timer_jobs::Queue;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = args
        .next()
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("shop-jobs"));
    let listen = args.next().unwrap_or_else(|| "127.0.0.1:8080".to_owned());
    std::fs::create_dir_all(&dir)?;

    // The service's queue: the store belongs to this process, and the
    // dashboard shares this handle instead of opening the store again.
    let orders = Queue::builder(&format!("file://{}", dir.display()), "orders")
        .max_attempts(3)
        .connect()
        .await?;
    let token = std::env::var("JOBS_DASHBOARD_TOKEN").unwrap_or_else(|_| "shop".to_owned());
    let dashboard = Dashboard::builder()
        .queue(orders.clone())
        .token(token)
        .title("Shop jobs")
        .build()?;
    let app = Router::new()
        .route("/", get(|| async { "the shop; its jobs are at /ops/jobs" }))
        .nest("/ops/jobs", dashboard.router());

    tokio::spawn(produce(orders.clone()));
    tokio::spawn(work(orders));

    let listener = tokio::net::TcpListener::bind(&listen).await?;
    println!(
        "the shop on http://{}/, its jobs at /ops/jobs",
        listener.local_addr()?
    );
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}

/// An order every 200 ms, due in 0 to 20 s.
async fn produce(orders: Queue) {
    for n in 0u64.. {
        let delay = Duration::from_millis(n * 7919 % 20_000);
        if let Err(e) = orders.schedule(delay, format!("order {n}")).await {
            eprintln!("cannot schedule: {e}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Delivers the orders: one in ten fails (and is retried), one in fifty
/// for good.
async fn work(orders: Queue) {
    let mut n = 0u64;
    while let Ok(job) = orders.next().await {
        n += 1;
        let done = if n % 50 == 0 {
            job.bury("card declined").await
        } else if n % 10 == 0 {
            job.fail("payment service timed out").await.map(|_| ())
        } else {
            job.ack().await
        };
        if let Err(e) = done {
            eprintln!("cannot finish a job: {e}");
        }
    }
}
