//! `ttr serve` in a real browser: Debian's chromium, driven through
//! WebDriver (chromedriver), against a real redis-server and the real
//! `ttr` binary, each started by the test on free ports.
//!
//! It checks what an operator relies on: the overview's counts are the
//! queue's, partitions open on click, a hostile job id and error show as
//! text (no script runs) in the listing and on the job's own page, actions
//! show disabled before a login and are refused without the token,
//! without the CSRF token and from another origin, and requeueing a dead
//! letter after logging in moves it back; a job's page shows its attempt
//! history and its holder, and the throughput chart shows the jobs
//! processed and failed before `ttr serve` started (the store's counts,
//! not the dashboard's samples). It also takes a screenshot of the
//! overview (`$CARGO_TARGET_TMPDIR/overview.png`, or `$TTR_SCREENSHOT`).
//!
//! Without chromium and chromedriver the test fails, saying how to install
//! them (`.ci/run` does).

#[path = "../../tiered-timer-jobs/tests/support/mod.rs"]
mod support;
// The browser's helpers, shared with the dashboard crate's browser test.
#[path = "../../tiered-timer-dashboard/tests/support/browser.rs"]
mod browser_support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

use browser_support::{browser, chromedriver, text, wait_for, Running};
use fantoccini::Locator;
use support::RedisServer;
use tiered_timer_jobs::{JobId, JobState, Queue};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const HOSTILE: &str = "<script>alert(1)</script>";

/// `ttr serve` on a free port; returns it and its address.
fn serve(url: &str) -> (Running, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ttr"))
        .args([
            "--url",
            url,
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--token",
            "s3cret",
        ])
        .args(["--sample-every", "1s", "--refresh", "60s"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("run ttr serve");
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    // "ttr dashboard on http://127.0.0.1:PORT/ (...)"
    let address = first
        .split_whitespace()
        .find_map(|w| w.strip_prefix("http://"))
        .and_then(|w| w.strip_suffix('/'))
        .unwrap_or_else(|| panic!("no address in {first:?}"))
        .to_owned();
    (Running(child), address)
}

/// A plain HTTP request to the dashboard: the status and body.
async fn request(address: &str, head: &str, body: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let request = format!(
        "{head}\r\nHost: {address}\r\nContent-Type: application/x-www-form-urlencoded\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {response:?}"));
    let body = response
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    (status, body)
}

fn form(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| {
            format!(
                "{}={}",
                k,
                percent_encoding::utf8_percent_encode(v, percent_encoding::NON_ALPHANUMERIC)
            )
        })
        .collect::<Vec<_>>()
        .join("&")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_in_a_real_browser() {
    let server = RedisServer::start();
    let url = server.url();
    let orders = Queue::builder(&url, "orders")
        .max_attempts(3)
        .holder("billing-1")
        .connect()
        .await
        .unwrap();
    let mail = Queue::builder(&url, "mail")
        .partitions(3)
        .connect()
        .await
        .unwrap();
    let t0 = server.now_ms().await;
    let at = |ms: u64| SystemTime::UNIX_EPOCH + Duration::from_millis(ms);
    // orders: two dead letters (one named and failed with markup), one
    // leased, two due and two waiting for an hour.
    orders
        .schedule_with_id(HOSTILE, Duration::ZERO, "<b>payload</b>")
        .await
        .unwrap();
    orders
        .schedule_with_id("plain-dead", Duration::ZERO, "x")
        .await
        .unwrap();
    for _ in 0..2 {
        let job = orders.next().await.unwrap();
        let reason = if job.id().as_str() == HOSTILE {
            HOSTILE
        } else {
            "declined"
        };
        job.bury(reason).await.unwrap();
    }
    // Three processed before the dashboard starts: only the store knows.
    orders
        .schedule_many((0..3).map(|i| (Duration::ZERO, format!("done {i}"))))
        .await
        .unwrap();
    for _ in 0..3 {
        orders.next().await.unwrap().ack().await.unwrap();
    }
    orders.schedule_at(at(t0 - 120_000), "late").await.unwrap();
    let held = orders.next().await.unwrap(); // leased while the test runs
    orders.schedule_at(at(t0 - 60_000), "late").await.unwrap();
    orders.schedule_at(at(t0 - 30_000), "late").await.unwrap();
    orders
        .schedule(Duration::from_secs(3600), "later")
        .await
        .unwrap();
    orders
        .schedule(Duration::from_secs(3600), "later")
        .await
        .unwrap();
    mail.schedule_many((0..9).map(|i| (Duration::from_secs(600), format!("mail {i}"))))
        .await
        .unwrap();

    let serve_started_ms = server.now_ms().await;
    let (_serve, address) = serve(&url);
    let (_driver, driver_port) = chromedriver();
    let profile = std::env::temp_dir().join(format!("ttr-chromium-{}", std::process::id()));
    let client = browser(driver_port, &profile).await;
    let base = format!("http://{address}");

    // The overview shows the queue's own numbers, and partitions on click.
    client.goto(&base).await.unwrap();
    let stats = orders.stats().await.unwrap();
    assert_eq!(
        (stats.pending, stats.due_now, stats.leased, stats.dead),
        (4, 2, 1, 2)
    );
    for (key, expected) in [
        ("pending", stats.pending),
        ("due", stats.due_now),
        ("leased", stats.leased),
        ("dead", stats.dead),
    ] {
        let shown = text(
            &client,
            &format!(r#"tr[data-queue="orders"] > td[data-k="{key}"]"#),
        )
        .await;
        assert_eq!(shown, expected.to_string(), "orders {key}");
    }
    let overdue = text(&client, r#"tr[data-queue="orders"] > td[data-k="overdue"]"#).await;
    assert!(overdue.starts_with("1m"), "most overdue: {overdue}");
    assert_eq!(
        text(&client, r#"tr[data-queue="mail"] > td[data-k="pending"]"#).await,
        "9"
    );
    let partition = client
        .find(Locator::Css(
            r#"tr[data-queue="mail"] tr[data-partition="2"]"#,
        ))
        .await
        .unwrap();
    assert!(
        !partition.is_displayed().await.unwrap(),
        "partitions are folded"
    );
    client
        .find(Locator::Css(r#"tr[data-queue="mail"] summary"#))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert!(
        partition.is_displayed().await.unwrap(),
        "partitions open on click"
    );
    let mut by_partition = 0;
    for p in 0..3 {
        let css = format!(r#"tr[data-queue="mail"] tr[data-partition="{p}"] td[data-k="pending"]"#);
        by_partition += text(&client, &css).await.parse::<u64>().unwrap();
    }
    assert_eq!(by_partition, 9);

    // The screenshot for the README (with a few samples in the charts).
    tokio::time::sleep(Duration::from_millis(2500)).await;
    client.goto(&base).await.unwrap();
    let png = client.screenshot().await.unwrap();
    let shot = std::env::var_os("TTR_SCREENSHOT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("overview.png"));
    std::fs::write(&shot, &png).unwrap();
    assert!(png.starts_with(b"\x89PNG"), "a PNG screenshot");

    // A hostile id and error are text: shown as written, never run.
    client
        .goto(&format!("{base}/queues/orders?tab=dead"))
        .await
        .unwrap();
    let row = format!(r#"tr[data-id="{HOSTILE}"]"#);
    assert_eq!(text(&client, &format!("{row} td.id")).await, HOSTILE);
    assert_eq!(text(&client, &format!("{row} td.err")).await, HOSTILE);
    assert!(client.get_alert_text().await.is_err(), "no alert is open");
    for script in client.find_all(Locator::Css("script")).await.unwrap() {
        let code = script.html(true).await.unwrap();
        assert!(!code.contains("alert(1)"), "a script element holds {code}");
    }
    // Not logged in: the actions show disabled, with a pointer to the
    // login.
    let bulk = wait_for(&client, "#bulk-requeue").await;
    assert!(!bulk.is_enabled().await.unwrap(), "disabled before a login");
    assert_eq!(
        bulk.attr("title").await.unwrap().as_deref(),
        Some("Log in to act")
    );
    assert!(text(&client, "#log-in").await.contains("Log in"));

    // The hostile job's own page: its id readable in the address (encoded
    // only where it must be), shown as text in the page and the
    // breadcrumb, with its error, payload and attempts.
    client
        .find(Locator::Css(&format!("{row} td.id a")))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert_eq!(text(&client, "h1").await, HOSTILE);
    assert!(
        client
            .current_url()
            .await
            .unwrap()
            .as_str()
            .ends_with("/queues/orders/jobs/%3Cscript%3Ealert(1)%3C%2Fscript%3E"),
        "the job's address"
    );
    assert_eq!(text(&client, r#"[aria-current="page"]"#).await, HOSTILE);
    assert_eq!(text(&client, r#"td[data-k="state"]"#).await, "dead");
    assert_eq!(text(&client, r#"td[data-k="error"]"#).await, HOSTILE);
    assert_eq!(text(&client, "#payload").await, "<b>payload</b>");
    // Its attempt history: one attempt, by this test's holder, buried
    // with its error.
    let attempt = r#"#attempts tbody tr[data-outcome="buried"]"#;
    assert_eq!(
        client
            .find_all(Locator::Css("#attempts tbody tr"))
            .await
            .unwrap()
            .len(),
        1
    );
    let cells = text(&client, attempt).await;
    assert!(
        cells.contains("billing-1") && cells.contains(HOSTILE),
        "{cells}"
    );
    assert!(client.get_alert_text().await.is_err(), "no alert is open");
    let requeue_job = wait_for(&client, r#"#job-actions button[data-action="requeue"]"#).await;
    assert!(!requeue_job.is_enabled().await.unwrap());
    // The leased job's page names its holder, and its running attempt.
    client
        .goto(&format!("{base}/queues/orders/jobs/{}", held.id().as_str()))
        .await
        .unwrap();
    assert_eq!(text(&client, r#"td[data-k="holder"]"#).await, "billing-1");
    wait_for(&client, r#"#attempts tr[data-outcome="running"]"#).await;

    // The queue's throughput chart shows what was processed and failed
    // before the dashboard started, in the minutes it happened: read from
    // the store, not sampled by the dashboard.
    client.goto(&format!("{base}/queues/orders")).await.unwrap();
    let mut counted = (0, 0);
    let mut earliest_counted = u64::MAX;
    for minute in client
        .find_all(Locator::Css("#throughput g.minute"))
        .await
        .unwrap()
    {
        let number = |value: Option<String>| value.unwrap().parse::<u64>().unwrap();
        let processed = number(minute.attr("data-processed").await.unwrap());
        let failed = number(minute.attr("data-failed").await.unwrap());
        counted = (counted.0 + processed, counted.1 + failed);
        if processed + failed > 0 {
            let start = number(minute.attr("data-start").await.unwrap());
            earliest_counted = earliest_counted.min(start * 1000);
        }
    }
    assert_eq!(counted, (3, 2), "3 acked, 2 buried before serve started");
    assert!(
        earliest_counted <= serve_started_ms,
        "a minute from before the dashboard started: {earliest_counted} > {serve_started_ms}"
    );
    let caption = text(&client, "#throughput figcaption").await;
    assert!(caption.ends_with("3 processed, 2 failed"), "{caption}");
    client
        .goto(&format!("{base}/queues/orders?tab=dead"))
        .await
        .unwrap();
    let csrf = client
        .find(Locator::Css(r#"input[name="csrf"]"#))
        .await
        .unwrap()
        .attr("value")
        .await
        .unwrap()
        .unwrap();

    // Refused: no token; the token without the CSRF token; the token and
    // the CSRF token from another origin. Nothing changes.
    let path = "POST /queues/orders/action HTTP/1.1";
    let requeue = |csrf: &str| {
        form(&[
            ("csrf", csrf),
            ("action", "requeue"),
            ("id", HOSTILE),
            ("confirm", "yes"),
        ])
    };
    let (status, body) = request(&address, path, &requeue(&csrf)).await;
    assert_eq!(status, 401, "{body}");
    let bearer = format!("{path}\r\nAuthorization: Bearer s3cret");
    let (status, body) = request(&address, &bearer, &requeue("")).await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("CSRF"), "{body}");
    let wrong = format!("{path}\r\nAuthorization: Bearer wrong");
    let (status, _) = request(&address, &wrong, &requeue(&csrf)).await;
    assert_eq!(status, 401);
    let evil = format!("{bearer}\r\nOrigin: http://evil.example");
    let (status, _) = request(&address, &evil, &requeue(&csrf)).await;
    assert_eq!(status, 403);
    assert_eq!(
        orders.stats().await.unwrap().dead,
        2,
        "nothing was requeued"
    );
    // With both, unconfirmed: a confirmation page, still nothing changed.
    let unconfirmed = form(&[("csrf", &csrf), ("action", "requeue"), ("id", HOSTILE)]);
    let (status, body) = request(&address, &bearer, &unconfirmed).await;
    assert_eq!(status, 200);
    assert!(
        body.contains("Confirm") && !body.contains(HOSTILE),
        "escaped in the page: {body}"
    );
    assert_eq!(orders.stats().await.unwrap().dead, 2);

    // Log in with the token, then requeue the hostile dead letter.
    client.goto(&format!("{base}/login")).await.unwrap();
    client
        .find(Locator::Css("#token"))
        .await
        .unwrap()
        .send_keys("s3cret")
        .await
        .unwrap();
    client
        .find(Locator::Css("#login"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert_eq!(text(&client, "header .who > span").await, "signed in");
    client
        .goto(&format!("{base}/queues/orders?tab=dead"))
        .await
        .unwrap();
    client
        .find(Locator::Css(&format!(
            r#"{row} button[data-action="requeue"]"#
        )))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert!(text(&client, "#question")
        .await
        .starts_with("Requeue 1 dead letter(s)"));
    assert_eq!(text(&client, "#ids").await, HOSTILE);
    assert_eq!(
        orders.stats().await.unwrap().dead,
        2,
        "nothing before the confirmation"
    );
    client
        .find(Locator::Css("#confirm"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let done = wait_for(&client, "#done").await;
    assert_eq!(
        done.attr("data-changed").await.unwrap().as_deref(),
        Some("1")
    );
    let stats = orders.stats().await.unwrap();
    assert_eq!((stats.pending, stats.dead), (5, 1));
    let back = orders.job(&JobId::from(HOSTILE)).await.unwrap().unwrap();
    assert_eq!((back.state, back.attempts), (JobState::Waiting, 0));
    // The dead tab no longer lists it; the waiting tab does.
    wait_for(&client, "#back").await.click().await.unwrap();
    wait_for(&client, "#tab-dead.on").await;
    assert!(client
        .find_all(Locator::Css(&row))
        .await
        .unwrap()
        .is_empty());
    client
        .goto(&format!("{base}/queues/orders?tab=waiting"))
        .await
        .unwrap();
    assert_eq!(text(&client, &format!("{row} td.id")).await, HOSTILE);

    // Prometheus metrics say the same.
    let (status, metrics) = request(&address, "GET /metrics HTTP/1.1", "").await;
    assert_eq!(status, 200);
    assert!(
        metrics.contains(r#"ttr_queue_dead{queue="orders",partition="0"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"ttr_queue_pending{queue="mail",partition="2"} "#),
        "{metrics}"
    );

    client.close().await.unwrap();
    drop(held);
    let _ = std::fs::remove_dir_all(&profile);
}
