//! `ttr serve` over plain HTTP (no browser): the read-only mode, the
//! login, the security headers, an unknown queue, and `/metrics` in
//! Prometheus' text format, against a real redis-server.

#[path = "../../tiered-timer-jobs/tests/support/mod.rs"]
mod support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use support::RedisServer;
use tiered_timer_jobs::Queue;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(url: &str, extra: &[&str]) -> (Running, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ttr"))
        .args(["--url", url, "serve", "--listen", "127.0.0.1:0"])
        .args(extra)
        .env_remove("TTR_TOKEN")
        .stdout(Stdio::piped())
        .spawn()
        .expect("run ttr serve");
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let address = first
        .split_whitespace()
        .find_map(|w| w.strip_prefix("http://"))
        .and_then(|w| w.strip_suffix('/'))
        .unwrap_or_else(|| panic!("no address in {first:?}"))
        .to_owned();
    (Running(child), address)
}

/// The status, the head and the body of one request.
async fn request(address: &str, head: &str, body: &str) -> (u16, String, String) {
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let request = format!(
        "{head}\r\nHost: {address}\r\nContent-Type: application/x-www-form-urlencoded\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, head.to_lowercase(), body.to_owned())
}

/// The CSRF token in a page's forms.
fn csrf_of(page: &str) -> String {
    let at = page.find(r#"name="csrf" value=""#).expect("a CSRF field") + 19;
    page[at..at + 32].to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_without_a_token_and_metrics_for_prometheus() {
    let server = RedisServer::start();
    let url = server.url();
    let mail = Queue::builder(&url, "mail")
        .partitions(2)
        .connect()
        .await
        .unwrap();
    mail.schedule_many((0..6).map(|i| (Duration::ZERO, format!("m{i}"))))
        .await
        .unwrap();
    mail.next().await.unwrap().bury("bounced").await.unwrap();
    let (_serve, address) = serve(&url, &[]);

    let (status, head, page) = request(&address, "GET /queues/mail?tab=dead HTTP/1.1", "").await;
    assert_eq!(status, 200);
    assert!(
        head.contains("content-security-policy: default-src 'none'; script-src 'nonce-"),
        "{head}"
    );
    assert!(head.contains("x-frame-options: deny"), "{head}");
    assert!(page.contains(r#"id="read-only""#), "says it is read-only");
    assert!(
        !page.contains(r#"data-action="requeue""#),
        "no action buttons"
    );
    let csrf = csrf_of(&page);
    let dead = mail.dead_letters(1).await.unwrap()[0].id.clone();
    let form = format!("csrf={csrf}&action=requeue&id={dead}&confirm=yes");
    let (status, _, body) = request(&address, "POST /queues/mail/action HTTP/1.1", &form).await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("read-only"), "{body}");
    assert_eq!(mail.stats().await.unwrap().dead, 1);
    // Logging in is refused too: there is no token.
    let (status, _, _) = request(
        &address,
        "POST /login HTTP/1.1",
        &format!("csrf={csrf}&token=x"),
    )
    .await;
    assert_eq!(status, 401);

    let (status, _, _) = request(&address, "GET /queues/nope HTTP/1.1", "").await;
    assert_eq!(status, 404);
    // The queue page's old address leads to its new one.
    let (status, head, _) = request(&address, "GET /queue/mail?tab=dead HTTP/1.1", "").await;
    assert_eq!(status, 308);
    assert!(head.contains("location: /queues/mail?tab=dead"), "{head}");

    let (status, head, metrics) = request(&address, "GET /metrics HTTP/1.1", "").await;
    assert_eq!(status, 200);
    assert!(
        head.contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    let stats = mail.stats().await.unwrap();
    for p in &stats.partitions {
        let n = p.partition.unwrap();
        for (family, value) in [
            ("ttr_queue_pending", p.pending),
            ("ttr_queue_dead", p.dead),
            ("ttr_queue_due", p.due_now),
            ("ttr_queue_leased", p.leased),
        ] {
            let line = format!("{family}{{queue=\"mail\",partition=\"{n}\"}} {value}\n");
            assert!(metrics.contains(&line), "{line} in\n{metrics}");
        }
    }
    assert!(metrics.contains("# TYPE ttr_queue_most_overdue_seconds gauge"));
    assert!(
        metrics.contains("ttr_queue_claim_lateness_seconds_bucket{queue=\"mail\",le=\"+Inf\"} ")
    );
    // Every sample line is `name{labels} number`.
    for line in metrics.lines().filter(|l| !l.starts_with('#')) {
        let (_, value) = line.rsplit_once(' ').unwrap();
        assert!(value.parse::<f64>().is_ok(), "{line}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_sets_a_strict_http_only_cookie_that_allows_actions() {
    let server = RedisServer::start();
    let url = server.url();
    let orders = Queue::connect(&url, "orders").await.unwrap();
    let id = orders
        .schedule(Duration::from_secs(3600), "x")
        .await
        .unwrap();
    let (_serve, address) = serve(&url, &["--token", "t0ken"]);
    let (_, _, page) = request(&address, "GET /login HTTP/1.1", "").await;
    let csrf = csrf_of(&page);
    let (status, _, _) = request(
        &address,
        "POST /login HTTP/1.1",
        &format!("csrf={csrf}&token=wrong"),
    )
    .await;
    assert_eq!(status, 401);
    let (status, head, _) = request(
        &address,
        "POST /login HTTP/1.1",
        &format!("csrf={csrf}&token=t0ken"),
    )
    .await;
    assert_eq!(status, 303);
    let cookie = head
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: "))
        .expect("a cookie")
        .to_owned();
    assert!(
        cookie.contains("httponly") && cookie.contains("samesite=strict"),
        "{cookie}"
    );
    let session = cookie.split(';').next().unwrap().to_owned();
    // With the cookie and the CSRF token: promote, confirmed (at the
    // action's path before the dashboard was a library, which scripts
    // may still use).
    let post = format!("POST /queue/orders/action HTTP/1.1\r\nCookie: {session}");
    let form = format!("csrf={csrf}&do=promote%3A{id}&confirm=yes");
    let (status, _, body) = request(&address, &post, &form).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#"data-changed="1""#), "{body}");
    assert_eq!(orders.stats().await.unwrap().due_now, 1);
    // A forged cookie is not a session.
    let forged = "POST /queue/orders/action HTTP/1.1\r\nCookie: ttr_session=0123";
    let (status, _, _) = request(&address, forged, &form).await;
    assert_eq!(status, 401);
}

/// What the README shows for scripts: the token in an `Authorization:
/// Bearer` header and this process' CSRF token (from any page's forms) in
/// `X-CSRF-Token` allow an action; the CSRF token alone does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bearer_header_with_the_csrf_token_allows_actions() {
    let server = RedisServer::start();
    let url = server.url();
    let orders = Queue::connect(&url, "orders").await.unwrap();
    orders
        .schedule_with_id("order-17", Duration::from_secs(3600), "x")
        .await
        .unwrap();
    let (_serve, address) = serve(&url, &["--token", "t0ken"]);
    let (_, _, page) = request(&address, "GET /login HTTP/1.1", "").await;
    let csrf = csrf_of(&page);
    let form = "do=promote:order-17&confirm=yes";
    let without = format!("POST /queues/orders/action HTTP/1.1\r\nX-CSRF-Token: {csrf}");
    let (status, _, _) = request(&address, &without, form).await;
    assert_eq!(status, 401);
    assert_eq!(orders.stats().await.unwrap().due_now, 0);
    let with = format!("{without}\r\nAuthorization: Bearer t0ken");
    let (status, _, body) = request(&address, &with, form).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#"data-changed="1""#), "{body}");
    assert_eq!(orders.stats().await.unwrap().due_now, 1);
}

/// On an embedded store the pages and `/metrics` look while the service
/// that owns the store holds it (read-only, without its lock), and follow
/// what it writes; an action opens the store for itself, so it is refused
/// while the service runs and done once it stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_an_embedded_store_pages_look_while_its_service_runs() {
    let dir = support::backend::TempDir::new("ttr-serve-embedded");
    let url = format!("file://{}", dir.0.display());
    let service = Queue::connect(&url, "orders").await.unwrap();
    let id = service
        .schedule(Duration::from_secs(3600), "x")
        .await
        .unwrap();
    let (_serve, address) = serve(&url, &["--token", "t0ken"]);
    let pending = |metrics: &str| {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix("ttr_queue_pending{queue=\"orders\",partition=\"0\"} "))
            .map(|n| n.to_owned())
    };
    let (status, _, metrics) = request(&address, "GET /metrics HTTP/1.1", "").await;
    assert_eq!(status, 200, "{metrics}");
    assert_eq!(pending(&metrics).as_deref(), Some("1"), "{metrics}");
    let (status, _, page) = request(&address, "GET /queues/orders HTTP/1.1", "").await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains(id.as_str()), "the waiting job is listed");
    service
        .schedule(Duration::from_secs(3600), "y")
        .await
        .unwrap();
    let (_, _, metrics) = request(&address, "GET /metrics HTTP/1.1", "").await;
    assert_eq!(pending(&metrics).as_deref(), Some("2"), "{metrics}");

    // Log in, then promote: refused while the service holds the store.
    let (_, _, login) = request(&address, "GET /login HTTP/1.1", "").await;
    let csrf = csrf_of(&login);
    let (_, head, _) = request(
        &address,
        "POST /login HTTP/1.1",
        &format!("csrf={csrf}&token=t0ken"),
    )
    .await;
    let session = head
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: "))
        .and_then(|c| c.split(';').next())
        .expect("a session cookie")
        .to_owned();
    let post = format!("POST /queues/orders/action HTTP/1.1\r\nCookie: {session}");
    let form = format!("csrf={csrf}&do=promote%3A{id}&confirm=yes");
    let (status, _, body) = request(&address, &post, &form).await;
    assert_eq!(status, 502, "{body}");
    assert!(body.contains("open in another process"), "{body}");
    assert_eq!(service.stats().await.unwrap().due_now, 0);
    drop(service);
    let mut done = (0, String::new());
    for _ in 0..50 {
        // The store closes once its last handle's last frame is written.
        let (status, _, body) = request(&address, &post, &form).await;
        done = (status, body);
        if status == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(done.0, 200, "{}", done.1);
    assert!(done.1.contains(r#"data-changed="1""#), "{}", done.1);
    let (_, _, page) = request(&address, "GET /queues/orders?tab=due HTTP/1.1", "").await;
    assert!(page.contains(id.as_str()), "promoted: due now");
}

/// `ttr serve` on a Postgres: the overview, a queue's dead letters and
/// `/metrics`, by the public API alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_pages_and_metrics() {
    let server = support::postgres::PostgresServer::start();
    let url = server.url();
    let mail = Queue::connect(&url, "mail").await.unwrap();
    mail.schedule_many((0..3).map(|i| (Duration::ZERO, format!("m{i}"))))
        .await
        .unwrap();
    mail.next().await.unwrap().bury("bounced").await.unwrap();
    let (_serve, address) = serve(&url, &[]);

    let (status, _, page) = request(&address, "GET / HTTP/1.1", "").await;
    assert_eq!(status, 200);
    assert!(page.contains("mail"), "{page}");
    let (status, _, page) = request(&address, "GET /queues/mail?tab=dead HTTP/1.1", "").await;
    assert_eq!(status, 200);
    assert!(page.contains("bounced"), "{page}");
    assert!(page.contains("Postgres time"), "{page}");
    let (status, _, metrics) = request(&address, "GET /metrics HTTP/1.1", "").await;
    assert_eq!(status, 200);
    assert!(
        metrics.contains("ttr_queue_dead{queue=\"mail\",partition=\"0\"} 1"),
        "{metrics}"
    );
}
