//! `ttr serve`: the dashboard (HTML rendered here, no build step), its
//! actions, and Prometheus `/metrics`.
//!
//! Ground rules:
//!
//! * Read-only unless started with `--token`. Every action is a POST that
//!   needs the token (an `Authorization: Bearer` header, or the session
//!   cookie that logging in with the token sets: HttpOnly,
//!   SameSite=Strict), this process' CSRF token (a form field or an
//!   `X-CSRF-Token` header), and, when the browser sends them, an `Origin`
//!   equal to the `Host` and a same-origin `Sec-Fetch-Site`. Each action
//!   first shows what it will do and asks to confirm (a second POST).
//! * Everything from Redis (queue names, ids, errors, payloads) is
//!   HTML-escaped where it is written (`html.rs`); payloads are shown as
//!   text or hex, never interpreted. Responses carry a Content-Security-
//!   Policy that only runs this process' own inline script (by nonce).
//! * Binds 127.0.0.1 by default. Behind a reverse proxy, keep it on
//!   loopback and let the proxy terminate TLS (see the README).
//! * Charts are sampled by this process (every `--sample-every`, and on
//!   each page view), kept for an hour in memory.

mod auth;
mod chart;
mod html;
mod prom;

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use clap::Args;
use tiered_timer_jobs::{find_queues, JobId, Lateness, Listing, Queue, QueueInfo, Stats};
use tokio::sync::Mutex;

use crate::{Failure, RedisArgs};

use auth::{login, login_page, logout, random_token};

/// `ttr serve`'s options.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Where to listen. Loopback by default; to share the dashboard, put a
    /// reverse proxy with TLS in front rather than binding 0.0.0.0.
    #[arg(long, default_value = "127.0.0.1:7878")]
    listen: SocketAddr,
    /// Allow actions (requeue, purge, cancel, promote) to whoever gives
    /// this token, in an `Authorization: Bearer` header or on the login
    /// page; without it the dashboard is read-only.
    #[arg(long, env = "TTR_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// How often the pages reload themselves.
    #[arg(long, default_value = "5s", value_parser = crate::positive_duration)]
    refresh: Duration,
    /// How often every queue is sampled for the charts.
    #[arg(long, default_value = "10s", value_parser = crate::positive_duration)]
    sample_every: Duration,
}

/// How much history the charts keep.
const WINDOW: Duration = Duration::from_secs(3600);
/// How often the list of queues is read again.
const REDISCOVER: Duration = Duration::from_secs(30);
/// Jobs per page of a listing.
const PAGE: usize = 50;

/// One sample of a queue for the charts.
#[derive(Debug, Clone)]
pub(crate) struct Sample {
    pub(crate) at: SystemTime,
    pub(crate) pending: u64,
    pub(crate) due_now: u64,
    pub(crate) leased: u64,
}

/// What the charts know of one queue.
#[derive(Debug, Default)]
pub(crate) struct History {
    pub(crate) samples: VecDeque<Sample>,
    /// Lateness reads, oldest first: the newest minus the oldest is the
    /// last hour's claims (or since this process started).
    pub(crate) lateness: VecDeque<(SystemTime, Lateness)>,
}

/// The queues known to this process.
#[derive(Debug, Default)]
struct Known {
    read_at: Option<Instant>,
    infos: Vec<QueueInfo>,
    handles: HashMap<String, (u32, Queue)>,
}

/// The state behind every request.
#[derive(Debug)]
pub(crate) struct App {
    redis: RedisArgs,
    token: Option<String>,
    /// The session cookie's value, given out by a login with the token.
    session: String,
    /// This process' CSRF token, in every form.
    pub(crate) csrf: String,
    pub(crate) refresh: Duration,
    known: Mutex<Known>,
    history: std::sync::Mutex<HashMap<String, History>>,
}

type Shared = Arc<App>;

pub(crate) async fn run(redis: RedisArgs, args: ServeArgs) -> Result<(), Failure> {
    crate::probe(&redis.url, redis.timeout).await?;
    let app = Arc::new(App {
        redis,
        token: args.token.filter(|t| !t.is_empty()),
        session: random_token(),
        csrf: random_token(),
        refresh: args.refresh,
        known: Mutex::new(Known::default()),
        history: std::sync::Mutex::new(HashMap::new()),
    });
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| Failure::Runtime(format!("cannot listen on {}: {e}", args.listen)))?;
    let bound = listener
        .local_addr()
        .map_err(|e| Failure::Runtime(format!("cannot listen on {}: {e}", args.listen)))?;
    let mode = if app.token.is_some() {
        "actions need the token"
    } else {
        "read-only: no --token"
    };
    println!("ttr dashboard on http://{bound}/ ({mode}); Prometheus metrics at /metrics");
    if !bound.ip().is_loopback() {
        eprintln!(
            "ttr: listening on {bound}, not loopback: anyone who can reach it can read every queue"
        );
    }
    tokio::spawn(sampler(Arc::clone(&app), args.sample_every));
    let router = Router::new()
        .route("/", get(overview))
        .route("/queue/{name}", get(queue_page))
        .route("/queue/{name}/action", post(action))
        .route("/login", get(login_page).post(login))
        .route("/logout", post(logout))
        .route("/metrics", get(metrics))
        .with_state(app);
    axum::serve(listener, router)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .map_err(|e| Failure::Runtime(format!("the server stopped: {e}")))
}

impl App {
    /// The queues, read again if the last read is older than
    /// [`REDISCOVER`].
    async fn queues(&self) -> Result<Vec<QueueInfo>, String> {
        let mut known = self.known.lock().await;
        if known.read_at.is_none_or(|at| at.elapsed() > REDISCOVER) {
            let found = find_queues(&self.redis.url, self.redis.cluster, self.redis.timeout)
                .await
                .map_err(|e| format!("cannot list the queues: {e}"))?;
            known.infos = found;
            known.read_at = Some(Instant::now());
        }
        Ok(known.infos.clone())
    }

    /// The handle of queue `name`: with its registered or found partition
    /// count, else `--partitions`.
    async fn queue(&self, name: &str) -> Result<Queue, String> {
        // Only queues that exist: a request must not make this process open
        // a connection per name it invents.
        let Some(partitions) = self
            .queues()
            .await?
            .iter()
            .find(|q| q.name == name)
            .map(|q| q.partitions)
        else {
            return Err(format!("no queue named {name:?} in this store"));
        };
        let mut known = self.known.lock().await;
        if let Some((p, queue)) = known.handles.get(name) {
            if *p == partitions {
                return Ok(queue.clone());
            }
        }
        // A look registers nothing (`register(false)`), even a queue
        // found by its keys alone.
        let mut builder = Queue::builder(&self.redis.url, name)
            .partitions(partitions)
            .command_timeout(self.redis.timeout)
            .register(false)
            // An embedded store's pages look without its lock (its service
            // may run); actions open it for themselves (`queue_to_change`).
            .read_only(crate::embedded::is_embedded(&self.redis.url));
        if self.redis.cluster {
            builder = builder.cluster();
        }
        let queue = builder.connect().await.map_err(|e| e.to_string())?;
        known
            .handles
            .insert(name.to_owned(), (partitions, queue.clone()));
        Ok(queue)
    }

    /// A handle that may change queue `name`: the page's own, or, on an
    /// embedded store (whose pages look read-only), the store opened as
    /// its owner would for this action alone (so it needs the store's
    /// service stopped: `Error::Locked` otherwise).
    async fn queue_to_change(&self, name: &str) -> Result<Queue, String> {
        let queue = self.queue(name).await?;
        if !crate::embedded::is_embedded(&self.redis.url) {
            return Ok(queue);
        }
        Queue::builder(&self.redis.url, name)
            .register(false)
            .connect()
            .await
            .map_err(|e| e.to_string())
    }

    /// Reads a queue's stats and lateness, and keeps them as a sample if
    /// the last one is older than a second.
    async fn read(&self, queue: &Queue) -> Result<(Stats, Lateness), String> {
        let stats = queue.stats().await.map_err(|e| e.to_string())?;
        let lateness = queue.lateness().await.map_err(|e| e.to_string())?;
        let mut history = self.history.lock().unwrap_or_else(|e| e.into_inner());
        let h = history.entry(queue.name().to_owned()).or_default();
        let now = stats.redis_time;
        if h.samples
            .back()
            .is_none_or(|s| now.duration_since(s.at).unwrap_or_default() >= Duration::from_secs(1))
        {
            h.samples.push_back(Sample {
                at: now,
                pending: stats.pending,
                due_now: stats.due_now,
                leased: stats.leased,
            });
            h.lateness.push_back((now, lateness.clone()));
        }
        let horizon = now.checked_sub(WINDOW).unwrap_or(SystemTime::UNIX_EPOCH);
        while h.samples.front().is_some_and(|s| s.at < horizon) {
            h.samples.pop_front();
        }
        // Keep the oldest lateness read inside the window as the base.
        while h.lateness.len() > 1 && h.lateness[1].0 < horizon {
            h.lateness.pop_front();
        }
        Ok((stats, lateness))
    }

    /// The samples of a queue, and its lateness over the window.
    fn history_of(&self, name: &str) -> (Vec<Sample>, Option<Lateness>) {
        let history = self.history.lock().unwrap_or_else(|e| e.into_inner());
        match history.get(name) {
            Some(h) => {
                let recent = match (h.lateness.front(), h.lateness.back()) {
                    (Some(first), Some(last)) => Some(last.1.since(&first.1)),
                    _ => None,
                };
                (h.samples.iter().cloned().collect(), recent)
            }
            None => (Vec::new(), None),
        }
    }
}

/// An HTML response with the security headers and this response's script
/// nonce.
fn html(status: StatusCode, nonce: &str, body: String) -> Response {
    let csp = format!(
        "default-src 'none'; script-src 'nonce-{nonce}'; style-src 'unsafe-inline'; img-src data:; \
         form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    );
    let mut response = (status, body).into_response();
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    if let Ok(csp) = HeaderValue::from_str(&csp) {
        h.insert(header::CONTENT_SECURITY_POLICY, csp);
    }
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn refuse(status: StatusCode, why: &str) -> Response {
    let nonce = random_token();
    html(status, &nonce, html::message_page(&nonce, "Refused", why))
}

fn failed(why: &str) -> Response {
    let nonce = random_token();
    html(
        StatusCode::BAD_GATEWAY,
        &nonce,
        html::message_page(&nonce, "Redis trouble", why),
    )
}

/// Form or query fields, in order (a field may repeat).
fn fields(bytes: &[u8]) -> Vec<(String, String)> {
    form_urlencoded::parse(bytes).into_owned().collect()
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

async fn sampler(app: Shared, every: Duration) {
    let mut ticks = tokio::time::interval(every);
    loop {
        ticks.tick().await;
        let Ok(queues) = app.queues().await else {
            continue;
        };
        for info in queues {
            if let Ok(queue) = app.queue(&info.name).await {
                let _ = app.read(&queue).await;
            }
        }
    }
}

async fn overview(State(app): State<Shared>, headers: HeaderMap) -> Response {
    let queues = match app.queues().await {
        Ok(q) => q,
        Err(e) => return failed(&e),
    };
    let mut rows = Vec::new();
    for info in &queues {
        let queue = match app.queue(&info.name).await {
            Ok(q) => q,
            Err(e) => return failed(&e),
        };
        let (stats, _) = match app.read(&queue).await {
            Ok(read) => read,
            Err(e) => return failed(&e),
        };
        let (samples, _) = app.history_of(&info.name);
        rows.push(html::QueueRow {
            info: info.clone(),
            stats,
            samples,
        });
    }
    let nonce = random_token();
    let view = html::View {
        app: &app,
        nonce: &nonce,
        signed_in: app.signed_in(&headers),
        actions_allowed: app.token.is_some(),
    };
    html(StatusCode::OK, &nonce, html::overview(&view, &rows))
}

async fn queue_page(
    State(app): State<Shared>,
    Path(name): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let query = fields(query.unwrap_or_default().as_bytes());
    match app.queues().await {
        Ok(found) if !found.iter().any(|q| q.name == name) => {
            return refuse(StatusCode::NOT_FOUND, "no such queue in this store")
        }
        Ok(_) => {}
        Err(e) => return failed(&e),
    }
    let queue = match app.queue(&name).await {
        Ok(q) => q,
        Err(e) => return failed(&e),
    };
    let (stats, _) = match app.read(&queue).await {
        Ok(read) => read,
        Err(e) => return failed(&e),
    };
    let listing = field(&query, "tab")
        .and_then(|t| t.parse::<Listing>().ok())
        .unwrap_or(Listing::Waiting);
    let page_no: usize = field(&query, "page")
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let offset = page_no.saturating_mul(PAGE);
    let page = match queue.list(listing, offset, PAGE).await {
        Ok(page) => Some(page),
        Err(tiered_timer_jobs::Error::InvalidArgument { reason }) => {
            return refuse(StatusCode::BAD_REQUEST, reason)
        }
        Err(e) => return failed(&e.to_string()),
    };
    let job = match field(&query, "job").filter(|id| !id.is_empty()) {
        Some(id) => match queue.job(&JobId::from(id)).await {
            Ok(found) => Some((id.to_owned(), found)),
            Err(e) => return failed(&e.to_string()),
        },
        None => None,
    };
    let (samples, lateness) = app.history_of(&name);
    let nonce = random_token();
    let view = html::View {
        app: &app,
        nonce: &nonce,
        signed_in: app.signed_in(&headers),
        actions_allowed: app.token.is_some(),
    };
    let body = html::queue_page(&html::QueuePage {
        view,
        name: &name,
        partitions: stats.partitions.len() as u32,
        stats: &stats,
        samples: &samples,
        lateness: lateness.as_ref(),
        listing,
        page_no,
        page: page.as_ref(),
        job: job
            .as_ref()
            .map(|(id, found)| (id.as_str(), found.as_ref())),
    });
    html(StatusCode::OK, &nonce, body)
}

/// The actions a form may ask for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Action {
    Requeue,
    Purge,
    RequeueAll,
    PurgeAll,
    Cancel,
    Promote,
}

impl Action {
    fn parse(s: &str) -> Option<Action> {
        Some(match s {
            "requeue" => Action::Requeue,
            "purge" => Action::Purge,
            "requeue-all" => Action::RequeueAll,
            "purge-all" => Action::PurgeAll,
            "cancel" => Action::Cancel,
            "promote" => Action::Promote,
            _ => return None,
        })
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Action::Requeue => "requeue",
            Action::Purge => "purge",
            Action::RequeueAll => "requeue-all",
            Action::PurgeAll => "purge-all",
            Action::Cancel => "cancel",
            Action::Promote => "promote",
        }
    }

    pub(crate) fn takes_ids(self) -> bool {
        !matches!(self, Action::RequeueAll | Action::PurgeAll)
    }

    /// What it does, for the confirmation: "requeue 3 dead letter(s)".
    pub(crate) fn describe(self, n: usize) -> String {
        match self {
            Action::Requeue => format!("Requeue {n} dead letter(s): due now, attempts reset"),
            Action::Purge => format!("Delete {n} dead letter(s) for good"),
            Action::RequeueAll => "Requeue every dead letter: due now, attempts reset".to_owned(),
            Action::PurgeAll => "Delete every dead letter for good".to_owned(),
            Action::Cancel => format!("Cancel {n} waiting job(s): they will never be delivered"),
            Action::Promote => format!("Make {n} waiting job(s) due now"),
        }
    }
}

async fn action(
    State(app): State<Shared>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let form = fields(&body);
    if let Err(refused) = app.authorize(&headers, field(&form, "csrf")) {
        return refused.into_response();
    }
    // A row's own button names its action and job ("requeue:ID"); the
    // bulk buttons name the action, and the ticked boxes the jobs.
    let (act, ids) = match field(&form, "do").and_then(|d| d.split_once(':')) {
        Some((act, id)) => (Action::parse(act), vec![id.to_owned()]),
        None => (
            field(&form, "action").and_then(Action::parse),
            form.iter()
                .filter(|(k, _)| k == "id")
                .map(|(_, v)| v.clone())
                .collect(),
        ),
    };
    let Some(act) = act else {
        return refuse(StatusCode::BAD_REQUEST, "unknown action");
    };
    if act.takes_ids() && ids.is_empty() {
        return refuse(StatusCode::BAD_REQUEST, "select at least one job");
    }
    let back = field(&form, "tab").unwrap_or("waiting").to_owned();
    let nonce = random_token();
    if field(&form, "confirm") != Some("yes") {
        let body = html::confirm_page(&app, &nonce, &name, act, &ids, &back);
        return html(StatusCode::OK, &nonce, body);
    }
    let queue = match app.queue_to_change(&name).await {
        Ok(q) => q,
        Err(e) => return failed(&e),
    };
    let outcome = match act {
        Action::RequeueAll => queue.requeue_all().await.map(|n| (n, 0)),
        Action::PurgeAll => queue.purge_all().await.map(|n| (n, 0)),
        _ => {
            let mut changed = 0;
            let mut result = Ok(());
            for id in &ids {
                let id = JobId::from(id.as_str());
                let done = match act {
                    Action::Requeue => queue.requeue(&id).await,
                    Action::Purge => queue.purge(&id).await,
                    Action::Cancel => queue.cancel(&id).await,
                    _ => queue.promote(&id).await,
                };
                match done {
                    Ok(true) => changed += 1,
                    Ok(false) => {}
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                }
            }
            result.map(|()| (changed, ids.len() as u64 - changed))
        }
    };
    let body = match outcome {
        Ok((changed, unchanged)) => {
            html::done_page(&app, &nonce, &name, act, changed, unchanged, &back)
        }
        Err(e) => return failed(&e.to_string()),
    };
    html(StatusCode::OK, &nonce, body)
}

async fn metrics(State(app): State<Shared>) -> Response {
    let queues = match app.queues().await {
        Ok(q) => q,
        Err(e) => return (StatusCode::BAD_GATEWAY, e).into_response(),
    };
    let mut read = Vec::new();
    for info in queues {
        let queue = match app.queue(&info.name).await {
            Ok(q) => q,
            Err(e) => return (StatusCode::BAD_GATEWAY, e).into_response(),
        };
        match app.read(&queue).await {
            Ok((stats, lateness)) => read.push((info.name, stats, lateness)),
            Err(e) => return (StatusCode::BAD_GATEWAY, e).into_response(),
        }
    }
    let mut response = prom::render(&read).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::auth::{cookie, same, same_origin};
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn origins_must_match_the_host() {
        assert!(same_origin(&headers(&[("host", "127.0.0.1:7878")])).is_ok());
        assert!(same_origin(&headers(&[
            ("host", "127.0.0.1:7878"),
            ("origin", "http://127.0.0.1:7878")
        ]))
        .is_ok());
        assert!(same_origin(&headers(&[
            ("host", "127.0.0.1:7878"),
            ("origin", "http://evil.example")
        ]))
        .is_err());
        assert!(same_origin(&headers(&[("host", "127.0.0.1:7878"), ("origin", "null")])).is_err());
        assert!(same_origin(&headers(&[("host", "h"), ("sec-fetch-site", "cross-site")])).is_err());
        assert!(same_origin(&headers(&[
            ("host", "h"),
            ("sec-fetch-site", "same-origin")
        ]))
        .is_ok());
    }

    #[test]
    fn cookies_and_tokens() {
        let h = headers(&[("cookie", "a=1; ttr_session=abc; b=2")]);
        assert_eq!(cookie(&h, "ttr_session").as_deref(), Some("abc"));
        assert_eq!(cookie(&h, "c"), None);
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd"));
        assert!(!same("abc", "abcd"));
        assert_ne!(random_token(), random_token());
        assert_eq!(random_token().len(), 32);
    }
}
