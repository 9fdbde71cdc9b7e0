//! The dashboard mounted in a small axum application (at `/ops/jobs`, next
//! to a route of its own) over an embedded store that the same application
//! uses, in a real browser: Debian's chromium driven through WebDriver
//! (chromedriver).
//!
//! The application schedules, claims, acks and fails jobs between the
//! browser's looks, and the browser reads the counts the queue has at each
//! step; the lateness chart shows the application's claims; a job's page
//! shows its failure; and an action made in the browser (after logging in)
//! goes through the application's own handle while the application holds
//! the store, so its worker then gets the promoted job. (`ttr serve` can
//! only look at a store its service holds: its actions open the store and
//! get `Locked`.)
//!
//! Without chromium and chromedriver the test fails, saying how to install
//! them (`.ci/run` does).

mod support;

use std::time::Duration;

use axum::routing::get;
use axum::Router;
use fantoccini::{Client, Locator};
use support::browser::{browser, chromedriver, text, wait_for};
use support::TempDir;
use tiered_timer_dashboard::Dashboard;
use tiered_timer_jobs::{JobId, Queue};

/// The counts the overview shows for `orders` against the queue's own.
async fn counts_match(client: &Client, base: &str, orders: &Queue) {
    client.goto(base).await.unwrap();
    let stats = orders.stats().await.unwrap();
    for (key, expected) in [
        ("pending", stats.pending),
        ("due", stats.due_now),
        ("leased", stats.leased),
        ("dead", stats.dead),
    ] {
        let css = format!(r#"tr[data-queue="orders"] > td[data-k="{key}"]"#);
        assert_eq!(text(client, &css).await, expected.to_string(), "{key}");
    }
}

/// A screenshot of the page, in `$CARGO_TARGET_TMPDIR` (to look at).
async fn screenshot(client: &Client, name: &str) {
    let png = client.screenshot().await.unwrap();
    assert!(png.starts_with(b"\x89PNG"), "a PNG screenshot");
    std::fs::write(
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name),
        &png,
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mounted_in_an_application_over_the_store_it_uses() {
    let dir = TempDir::new("browser");
    // The application's own queue, held for the whole test: no other
    // process could open this store.
    let orders = Queue::builder(&dir.url(), "orders")
        .max_attempts(1)
        .connect()
        .await
        .unwrap();
    let dashboard = Dashboard::builder()
        .queue(orders.clone())
        .token("s3cret")
        .sample_every(Duration::from_millis(500))
        .refresh(Duration::from_secs(60))
        .title("Shop jobs")
        .build()
        .unwrap();
    let app = Router::new()
        .route("/", get(|| async { "the shop" }))
        .nest("/ops/jobs", dashboard.router());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let (_driver, driver_port) = chromedriver();
    let profile = std::env::temp_dir().join(format!("ttd-chromium-{}", std::process::id()));
    let client = browser(driver_port, &profile).await;
    let base = format!("http://{address}/ops/jobs");

    // The application schedules: five jobs for later, three due now.
    let later = orders
        .schedule_many((0..5).map(|i| (Duration::from_secs(3600), format!("later {i}"))))
        .await
        .unwrap();
    orders
        .schedule_many((0..3).map(|i| (Duration::ZERO, format!("now {i}"))))
        .await
        .unwrap();
    while orders.stats().await.unwrap().due_now < 3 {
        tokio::time::sleep(Duration::from_millis(1)).await; // due times round up
    }
    counts_match(&client, &base, &orders).await;
    // The queue's page, read once before any claim: the lateness chart's
    // base.
    client.goto(&format!("{base}/queues/orders")).await.unwrap();
    wait_for(&client, "#listing").await;

    // It claims two, then acks one and fails the other (out of attempts:
    // a dead letter), then claims and acks the third; the browser reads
    // the counts after each step.
    let first = orders.next().await.unwrap();
    let second = orders.next().await.unwrap();
    counts_match(&client, &base, &orders).await;
    first.ack().await.unwrap();
    let failed = second.id().clone();
    second.fail("card declined").await.unwrap();
    counts_match(&client, &base, &orders).await;
    orders.next().await.unwrap().ack().await.unwrap();
    counts_match(&client, &base, &orders).await;

    // The lateness chart counts the application's claims (sampled every
    // half second: reloaded until a sample after them is in).
    let queue_page = format!("{base}/queues/orders");
    let mut legend = String::new();
    for _ in 0..100 {
        client.goto(&queue_page).await.unwrap();
        legend = text(&client, "#lateness .legend").await;
        if legend.starts_with("3 claims") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(legend.starts_with("3 claims"), "lateness: {legend}");
    assert_eq!(orders.lateness().await.unwrap().total(), 3);
    screenshot(&client, "queue.png").await;

    // The failed job's page, from the dead tab.
    client
        .goto(&format!("{queue_page}?tab=dead"))
        .await
        .unwrap();
    client
        .find(Locator::Css(&format!(
            r#"tr[data-id="{}"] td.id a"#,
            failed.as_str()
        )))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert_eq!(text(&client, "h1").await, failed.as_str());
    assert_eq!(text(&client, r#"td[data-k="state"]"#).await, "dead");
    assert_eq!(
        text(&client, r#"td[data-k="error"]"#).await,
        "card declined"
    );
    // Its one attempt, as the store kept it: by this process (the
    // default holder), ended buried with its error.
    let attempt = text(&client, r#"#attempts tbody tr[data-outcome="buried"]"#).await;
    let holder = format!(":{}", std::process::id());
    assert!(
        attempt.contains(&holder) && attempt.contains("card declined"),
        "{attempt}"
    );
    let crumbs = text(&client, "nav.crumbs").await;
    assert!(crumbs.starts_with("Queues"), "{crumbs}");
    assert!(crumbs.ends_with(failed.as_str()), "{crumbs}");
    screenshot(&client, "job.png").await;

    // Log in, then promote a later job from its page: done through the
    // application's handle while it holds the store.
    client.goto(&format!("{base}/login")).await.unwrap();
    wait_for(&client, "#token")
        .await
        .send_keys("s3cret")
        .await
        .unwrap();
    wait_for(&client, "#login").await.click().await.unwrap();
    assert_eq!(text(&client, "header .who > span").await, "signed in");
    let promoted = later[0].clone();
    client
        .goto(&format!("{queue_page}/jobs/{}", promoted.as_str()))
        .await
        .unwrap();
    wait_for(&client, r#"#job-actions button[data-action="promote"]"#)
        .await
        .click()
        .await
        .unwrap();
    assert!(text(&client, "#question")
        .await
        .starts_with("Make 1 waiting job(s) due now"));
    wait_for(&client, "#confirm").await.click().await.unwrap();
    let done = wait_for(&client, "#done").await;
    assert_eq!(
        done.attr("data-changed").await.unwrap().as_deref(),
        Some("1")
    );
    wait_for(&client, "#back").await.click().await.unwrap();
    assert_eq!(text(&client, "h1").await, promoted.as_str());
    // The application's worker gets it (the only job due).
    let next = orders.next().await.unwrap();
    assert_eq!(next.id(), &JobId::from(promoted.as_str()));
    next.ack().await.unwrap();
    counts_match(&client, &base, &orders).await;

    client.close().await.unwrap();
    let _ = std::fs::remove_dir_all(&profile);
}
