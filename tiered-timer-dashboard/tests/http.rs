//! The dashboard mounted in an application's router, over plain HTTP
//! in-process (no browser): links under the mount point, the job page,
//! which actions are offered to whom, the application's own check, and an
//! embedded store shared with the application that holds it. Each test's
//! store is an embedded one in a temporary directory.

mod support;

use std::time::Duration;

use axum::routing;
use axum::Router;
use support::{csrf_of, form, get, post, TempDir};
use tiered_timer_dashboard::Dashboard;
use tiered_timer_jobs::{JobId, JobState, Queue, Recurrence};

const HOSTILE: &str = "<script>alert(1)</script>";

/// An application with a route of its own and the dashboard at `/ops/jobs`.
fn shop(dashboard: &Dashboard) -> Router {
    Router::new()
        .route("/", routing::get(|| async { "the shop" }))
        .nest("/ops/jobs", dashboard.router())
}

#[tokio::test]
async fn links_carry_the_mount_point() {
    let dir = TempDir::new("mount");
    let orders = Queue::connect(&dir.url(), "orders").await.unwrap();
    orders
        .schedule_with_id("order-710", Duration::from_secs(3600), "x")
        .await
        .unwrap();
    let app = shop(&Dashboard::builder().queue(orders).build().unwrap());

    assert_eq!(get(&app, "/", &[]).await.body, "the shop");
    let overview = get(&app, "/ops/jobs", &[]).await;
    assert_eq!(overview.status, 200, "{}", overview.body);
    assert!(
        overview.body.contains(r#"href="/ops/jobs/queues/orders""#),
        "{}",
        overview.body
    );
    assert!(overview.body.contains(r#"href="/ops/jobs/metrics""#));
    assert!(overview
        .body
        .contains(r#"<a class="brand" href="/ops/jobs">"#));
    let page = get(&app, "/ops/jobs/queues/orders", &[]).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page
        .body
        .contains(r#"href="/ops/jobs/queues/orders/jobs/order-710""#));
    assert!(page
        .body
        .contains(r#"action="/ops/jobs/queues/orders/action""#));
    // The old address of a queue's page leads to the new one, mounted.
    let moved = get(&app, "/ops/jobs/queue/orders?tab=dead", &[]).await;
    assert_eq!(moved.status, 308);
    assert_eq!(moved.header("location"), "/ops/jobs/queues/orders?tab=dead");
    let metrics = get(&app, "/ops/jobs/metrics", &[]).await;
    assert!(
        metrics
            .body
            .contains("ttr_queue_pending{queue=\"orders\",partition=\"0\"} 1\n"),
        "{}",
        metrics.body
    );
}

#[tokio::test]
async fn a_job_has_a_page_of_its_own() {
    let dir = TempDir::new("job-page");
    let orders = Queue::builder(&dir.url(), "orders")
        .max_attempts(1)
        .connect()
        .await
        .unwrap();
    orders
        .schedule_with_id("order-710", Duration::from_secs(3600), "close order 710")
        .await
        .unwrap();
    orders
        .schedule_with_id(HOSTILE, Duration::ZERO, "<b>payload</b>")
        .await
        .unwrap();
    orders.next().await.unwrap().fail(HOSTILE).await.unwrap();
    let app = shop(&Dashboard::builder().queue(orders).build().unwrap());

    let page = get(&app, "/ops/jobs/queues/orders/jobs/order-710", &[]).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains(r#"<td data-k="state">waiting</td>"#));
    assert!(page
        .body
        .contains(r#"<pre id="payload">close order 710</pre>"#));
    // The breadcrumb names the page, under its queue.
    assert!(
        page.body
            .contains(r#"<a href="/ops/jobs/queues/orders">orders</a></li><li><span aria-current="page">order-710</span>"#),
        "{}",
        page.body
    );

    // The search box leads to the job's page.
    let found = get(&app, "/ops/jobs/queues/orders/jobs?id=order-710", &[]).await;
    assert_eq!(found.status, 303);
    assert_eq!(
        found.header("location"),
        "/ops/jobs/queues/orders/jobs/order-710"
    );
    let missing = get(&app, "/ops/jobs/queues/orders/jobs/order-711", &[]).await;
    assert_eq!(missing.status, 404);
    assert!(missing.body.contains(r#"id="missing""#));
    let no_queue = get(&app, "/ops/jobs/queues/nope/jobs/order-710", &[]).await;
    assert_eq!(no_queue.status, 404);

    // A hostile id and error are text on the job's page too.
    let path = "/ops/jobs/queues/orders/jobs/%3Cscript%3Ealert(1)%3C%2Fscript%3E";
    let page = get(&app, path, &[]).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(!page.body.contains("<script>alert"), "{}", page.body);
    assert!(page
        .body
        .contains(r#"<td class="err" data-k="error">&lt;script&gt;alert(1)&lt;/script&gt;</td>"#));
    assert!(page.body.contains(r#"<td data-k="state">dead</td>"#));
    assert!(page.body.contains("&lt;b&gt;payload&lt;/b&gt;"));
}

#[tokio::test]
async fn promote_is_offered_only_for_jobs_not_yet_due() {
    let dir = TempDir::new("promote");
    let orders = Queue::connect(&dir.url(), "orders").await.unwrap();
    orders
        .schedule_with_id("due", Duration::ZERO, "x")
        .await
        .unwrap();
    // Due times are rounded up (never early): "now" may be a millisecond
    // away yet.
    while orders.stats().await.unwrap().due_now == 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    orders
        .schedule_with_id("later", Duration::from_secs(3600), "x")
        .await
        .unwrap();
    let app = shop(
        &Dashboard::builder()
            .queue(orders)
            .token("t0ken")
            .build()
            .unwrap(),
    );
    let signed_in = [("authorization", "Bearer t0ken")];

    let waiting = get(&app, "/ops/jobs/queues/orders?tab=waiting", &signed_in).await;
    assert!(
        waiting.body.contains(r#"value="promote:later""#),
        "{}",
        waiting.body
    );
    assert!(
        !waiting.body.contains(r#"value="promote:due""#),
        "{}",
        waiting.body
    );
    assert!(waiting.body.contains(r#"value="cancel:due""#));
    let due = get(&app, "/ops/jobs/queues/orders?tab=due", &signed_in).await;
    assert!(
        !due.body.contains(r#"data-action="promote""#),
        "{}",
        due.body
    );
    assert!(due.body.contains(r#"id="bulk-cancel""#));
    let job = get(&app, "/ops/jobs/queues/orders/jobs/due", &signed_in).await;
    assert!(
        !job.body.contains(r#"data-action="promote""#),
        "{}",
        job.body
    );
    assert!(job.body.contains(r#"data-action="cancel""#));
    let job = get(&app, "/ops/jobs/queues/orders/jobs/later", &signed_in).await;
    assert!(
        job.body.contains(r#"data-action="promote""#),
        "{}",
        job.body
    );
}

#[tokio::test]
async fn before_a_login_actions_show_disabled_with_a_hint() {
    let dir = TempDir::new("disabled");
    let orders = Queue::connect(&dir.url(), "orders").await.unwrap();
    orders
        .schedule_with_id("later", Duration::from_secs(3600), "x")
        .await
        .unwrap();
    let with_token = shop(
        &Dashboard::builder()
            .queue(orders.clone())
            .token("t0ken")
            .build()
            .unwrap(),
    );
    let page = get(&with_token, "/ops/jobs/queues/orders", &[]).await;
    assert!(
        page.body.contains(
            r#"<button id="bulk-promote" name="action" value="promote" data-action="promote" disabled title="Log in to act">"#
        ),
        "{}",
        page.body
    );
    assert!(page
        .body
        .contains(r#"<p class="note" id="log-in"><a href="/ops/jobs/login">Log in</a>"#));
    // No boxes to tick: nothing could be done with them.
    assert!(!page.body.contains(r#"type="checkbox" name="id""#));
    let login = get(&with_token, "/ops/jobs/login", &[]).await;
    assert_eq!(login.status, 200);
    assert!(login.body.contains(r#"action="/ops/jobs/login""#));

    // A read-only dashboard offers no action at all.
    let read_only = shop(&Dashboard::builder().queue(orders).build().unwrap());
    let page = get(&read_only, "/ops/jobs/queues/orders", &[]).await;
    assert!(!page.body.contains("data-action"), "{}", page.body);
    assert!(page.body.contains(r#"id="read-only""#));
}

#[tokio::test]
async fn a_login_is_a_session_for_the_mount_point_only() {
    let dir = TempDir::new("login");
    let orders = Queue::connect(&dir.url(), "orders").await.unwrap();
    let app = shop(
        &Dashboard::builder()
            .queue(orders)
            .token("t0ken")
            .build()
            .unwrap(),
    );
    let csrf = csrf_of(&get(&app, "/ops/jobs/login", &[]).await.body);
    let wrong = post(
        &app,
        "/ops/jobs/login",
        &[],
        &form(&[("csrf", &csrf), ("token", "nope")]),
    )
    .await;
    assert_eq!(wrong.status, 401);
    let done = post(
        &app,
        "/ops/jobs/login",
        &[],
        &form(&[("csrf", &csrf), ("token", "t0ken")]),
    )
    .await;
    assert_eq!(done.status, 303);
    assert_eq!(done.header("location"), "/ops/jobs");
    let cookie = done.header("set-cookie");
    assert!(
        cookie.contains("HttpOnly; SameSite=Strict; Path=/ops/jobs"),
        "{cookie}"
    );
    let session = cookie.split(';').next().unwrap().to_owned();
    let page = get(&app, "/ops/jobs", &[("cookie", &session)]).await;
    assert!(
        page.body.contains("<span>signed in</span>"),
        "{}",
        page.body
    );
}

#[tokio::test]
async fn an_application_check_replaces_the_token() {
    let dir = TempDir::new("check");
    let orders = Queue::connect(&dir.url(), "orders").await.unwrap();
    let id = orders
        .schedule(Duration::from_secs(3600), "x")
        .await
        .unwrap();
    let dashboard = Dashboard::builder()
        .queue(orders.clone())
        .authorize(|request| {
            request
                .headers
                .get("x-shop-user")
                .is_some_and(|user| user == "admin")
        })
        .login_url("/account/login")
        .build()
        .unwrap();
    let app = shop(&dashboard);
    let admin = [("x-shop-user", "admin")];

    let page = get(&app, "/ops/jobs/queues/orders", &admin).await;
    assert!(
        page.body
            .contains(r#"data-action="promote">Promote</button>"#),
        "enabled for the admin: {}",
        page.body
    );
    let csrf = csrf_of(&page.body);
    let page = get(&app, "/ops/jobs/queues/orders", &[]).await;
    assert!(
        page.body
            .contains(r#"<p class="note" id="log-in"><a href="/account/login">Log in</a>"#),
        "{}",
        page.body
    );
    let promote = form(&[
        ("csrf", &csrf),
        ("do", &format!("promote:{id}")),
        ("confirm", "yes"),
    ]);
    // Refused: not the admin (the token has no say), no CSRF token, or
    // from another origin.
    let refused = post(&app, "/ops/jobs/queues/orders/action", &[], &promote).await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    let no_csrf = form(&[("do", &format!("promote:{id}")), ("confirm", "yes")]);
    let refused = post(&app, "/ops/jobs/queues/orders/action", &admin, &no_csrf).await;
    assert_eq!(refused.status, 403);
    assert!(refused.body.contains("CSRF"));
    let elsewhere = [("x-shop-user", "admin"), ("origin", "http://evil.example")];
    let refused = post(&app, "/ops/jobs/queues/orders/action", &elsewhere, &promote).await;
    assert_eq!(refused.status, 403);
    assert_eq!(orders.stats().await.unwrap().due_now, 0, "nothing changed");
    // There is no token to log in with.
    let login = post(
        &app,
        "/ops/jobs/login",
        &[],
        &form(&[("csrf", &csrf), ("token", "")]),
    )
    .await;
    assert_eq!(login.status, 401);

    let done = post(&app, "/ops/jobs/queues/orders/action", &admin, &promote).await;
    assert_eq!(done.status, 200, "{}", done.body);
    assert!(done.body.contains(r#"data-changed="1""#), "{}", done.body);
    assert_eq!(orders.stats().await.unwrap().due_now, 1);
}

#[tokio::test]
async fn read_only_refuses_actions_even_with_the_token() {
    let dir = TempDir::new("read-only");
    let orders = Queue::connect(&dir.url(), "orders").await.unwrap();
    let id = orders
        .schedule(Duration::from_secs(3600), "x")
        .await
        .unwrap();
    let app = shop(
        &Dashboard::builder()
            .queue(orders.clone())
            .token("t0ken")
            .read_only(true)
            .build()
            .unwrap(),
    );
    let bearer = [("authorization", "Bearer t0ken")];
    let page = get(&app, "/ops/jobs/queues/orders", &bearer).await;
    assert!(page.body.contains(r#"id="read-only""#));
    assert!(!page.body.contains("data-action"));
    let promote = form(&[
        ("csrf", &csrf_of(&page.body)),
        ("do", &format!("promote:{id}")),
        ("confirm", "yes"),
    ]);
    let refused = post(&app, "/ops/jobs/queues/orders/action", &bearer, &promote).await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(refused.body.contains("read-only"));
    assert_eq!(orders.stats().await.unwrap().due_now, 0);
}

/// The point of mounting: on an embedded store, which one process owns,
/// the dashboard works through the application's own handle. An action
/// succeeds while the application holds the store (`ttr serve` opens the
/// store for an action, and gets `Locked`), and the lateness histogram
/// counts the application's claims (a look's handle counts none).
#[tokio::test]
async fn mounted_in_the_service_it_shares_the_embedded_store() {
    let dir = TempDir::new("shared");
    let orders = Queue::connect(&dir.url(), "orders").await.unwrap();
    let app = shop(
        &Dashboard::builder()
            .queue(orders.clone())
            .store_url(dir.url())
            .token("t0ken")
            .build()
            .unwrap(),
    );
    let id = orders
        .schedule(Duration::from_secs(3600), "x")
        .await
        .unwrap();
    orders.schedule(Duration::ZERO, "y").await.unwrap();
    orders.next().await.unwrap().ack().await.unwrap();

    let bearer = [("authorization", "Bearer t0ken")];
    let page = get(&app, "/ops/jobs/queues/orders", &bearer).await;
    let promote = form(&[
        ("csrf", &csrf_of(&page.body)),
        ("do", &format!("promote:{id}")),
        ("confirm", "yes"),
    ]);
    let done = post(&app, "/ops/jobs/queues/orders/action", &bearer, &promote).await;
    assert_eq!(done.status, 200, "{}", done.body);
    assert!(done.body.contains(r#"data-changed="1""#), "{}", done.body);
    let job = orders
        .job(&JobId::from(id.as_str()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(job.state, JobState::Waiting);
    assert_eq!(orders.stats().await.unwrap().due_now, 1);

    let metrics = get(&app, "/ops/jobs/metrics", &[]).await;
    assert!(
        metrics
            .body
            .contains("ttr_queue_claim_lateness_seconds_count{queue=\"orders\"} 1\n"),
        "{}",
        metrics.body
    );
}

#[test]
fn debug_output_keeps_the_secrets() {
    let builder = Dashboard::builder()
        .store_url("redis://:hunter2@127.0.0.1:6379/")
        .token("t0ken");
    let shown = format!("{builder:?} {:?}", builder.clone().build().unwrap());
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(!shown.contains("t0ken"), "{shown}");
    assert!(shown.contains("redis://***@127.0.0.1:6379/"), "{shown}");
}

#[tokio::test]
async fn settings_that_cannot_work_are_refused() {
    use tiered_timer_dashboard::BuildError;
    let both = Dashboard::builder()
        .token("t")
        .authorize(|_| true)
        .build()
        .unwrap_err();
    assert_eq!(both, BuildError::TokenAndCheck);
    assert_eq!(
        Dashboard::builder().token("").build().unwrap_err(),
        BuildError::EmptyToken
    );
    assert_eq!(
        Dashboard::builder()
            .sample_every(Duration::ZERO)
            .build()
            .unwrap_err(),
        BuildError::ZeroDuration {
            setting: "sample_every"
        }
    );
}

/// A queue's recurring jobs show on its page (name, spec, zone, next),
/// each with a pause or resume button that works as every action does:
/// a confirmation, then the change.
#[tokio::test]
async fn recurring_jobs_are_listed_and_paused_and_resumed() {
    let dir = TempDir::new("recurring");
    let reports = Queue::connect(&dir.url(), "reports").await.unwrap();
    let nightly = Recurrence::cron("0 30 2 * * *")
        .unwrap()
        .time_zone("Europe/Berlin")
        .unwrap();
    reports.recur("nightly", nightly, "{}").await.unwrap();
    let app = shop(
        &Dashboard::builder()
            .queue(reports.clone())
            .token("t0ken")
            .build()
            .unwrap(),
    );
    let signed_in = [("authorization", "Bearer t0ken")];

    let page = get(&app, "/ops/jobs/queues/reports", &signed_in).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body.contains(r#"<tr data-recurrence="nightly">"#),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("<code>0 30 2 * * *</code>"),
        "{}",
        page.body
    );
    assert!(page.body.contains("Europe/Berlin"));
    assert!(
        page.body.contains(r#"value="pause-recurrence:nightly""#),
        "{}",
        page.body
    );
    let csrf = csrf_of(&page.body);

    let pause = [("csrf", csrf.as_str()), ("do", "pause-recurrence:nightly")];
    let asked = post(
        &app,
        "/ops/jobs/queues/reports/action",
        &signed_in,
        &form(&pause),
    )
    .await;
    assert_eq!(asked.status, 200, "{}", asked.body);
    assert!(
        asked.body.contains("Pause 1 recurring job(s)"),
        "{}",
        asked.body
    );
    assert!(
        !reports.recurrences().await.unwrap()[0].paused,
        "not before the confirmation"
    );
    let confirmed = [
        ("csrf", csrf.as_str()),
        ("do", "pause-recurrence:nightly"),
        ("confirm", "yes"),
    ];
    let done = post(
        &app,
        "/ops/jobs/queues/reports/action",
        &signed_in,
        &form(&confirmed),
    )
    .await;
    assert!(done.body.contains(r#"data-changed="1""#), "{}", done.body);
    assert!(reports.recurrences().await.unwrap()[0].paused);

    let page = get(&app, "/ops/jobs/queues/reports", &signed_in).await;
    assert!(
        page.body.contains(r#"<td data-k="next">paused</td>"#),
        "{}",
        page.body
    );
    assert!(
        page.body.contains(r#"value="resume-recurrence:nightly""#),
        "{}",
        page.body
    );
    let resume = [
        ("csrf", csrf.as_str()),
        ("do", "resume-recurrence:nightly"),
        ("confirm", "yes"),
    ];
    let done = post(
        &app,
        "/ops/jobs/queues/reports/action",
        &signed_in,
        &form(&resume),
    )
    .await;
    assert!(done.body.contains(r#"data-changed="1""#), "{}", done.body);
    assert!(!reports.recurrences().await.unwrap()[0].paused);
}
