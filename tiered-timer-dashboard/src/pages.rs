//! The pages' handlers: read what a page shows from the queues, hand it to
//! its template (`views/`), send it with the security headers.

use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use tiered_timer_jobs::{Error, JobId, Listing};

use crate::app::WINDOW;
use crate::respond::{failed, field, fields, page, redirect, refuse, Shared, Visit};
use crate::views;
use crate::views::overview::Row;
use crate::views::queue::QueuePage;

/// Jobs per page of a listing.
const PAGE: usize = 50;

/// `GET /`: every queue with its counts.
pub(crate) async fn overview(State(app): State<Shared>, visit: Visit) -> Response {
    let queues = match app.queues().await {
        Ok(q) => q,
        Err(e) => return failed(&app, &visit, &e),
    };
    let mut rows = Vec::with_capacity(queues.len());
    for listed in queues {
        let read = match app.queue(&listed.name).await {
            Ok(queue) => app.read(&queue).await.map_err(|e| e.to_string()),
            Err(e) => Err(e),
        };
        let (stats, _) = match read {
            Ok(read) => read,
            Err(e) => return failed(&app, &visit, &e),
        };
        let (samples, _) = app.history_of(&listed.name);
        rows.push(Row {
            queue: listed,
            stats,
            samples,
        });
    }
    page(
        StatusCode::OK,
        &visit.nonce,
        views::overview::page(&app, &visit, &rows),
    )
}

/// `GET /queues/{name}?tab=..&page=..`: a queue's counts, charts and jobs.
pub(crate) async fn queue(
    State(app): State<Shared>,
    visit: Visit,
    Path(name): Path<String>,
    RawQuery(query): RawQuery,
) -> Response {
    let query = fields(query.unwrap_or_default().as_bytes());
    match app.exists(&name).await {
        Ok(true) => {}
        Ok(false) => return refuse(&app, &visit, StatusCode::NOT_FOUND, "no such queue here"),
        Err(e) => return failed(&app, &visit, &e),
    }
    let queue = match app.queue(&name).await {
        Ok(q) => q,
        Err(e) => return failed(&app, &visit, &e),
    };
    let (stats, lateness) = match app.read(&queue).await {
        Ok(read) => read,
        Err(e) => return failed(&app, &visit, &e.to_string()),
    };
    // The store's counts per minute: minutes from before this dashboard
    // started are there.
    let since = stats
        .redis_time
        .checked_sub(WINDOW)
        .unwrap_or(stats.redis_time);
    let throughput = match queue.throughput(since).await {
        Ok(throughput) => throughput,
        Err(e) => return failed(&app, &visit, &e.to_string()),
    };
    let listing = field(&query, "tab")
        .and_then(|t| t.parse::<Listing>().ok())
        .unwrap_or(Listing::Waiting);
    let page_no: usize = field(&query, "page")
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let listed = match queue
        .list(listing, page_no.saturating_mul(PAGE), PAGE)
        .await
    {
        Ok(listed) => listed,
        Err(Error::InvalidArgument { reason }) => {
            return refuse(&app, &visit, StatusCode::BAD_REQUEST, reason)
        }
        Err(e) => return failed(&app, &visit, &e.to_string()),
    };
    // A backend without recurring jobs has none to show.
    let recurrences = match queue.recurrences().await {
        Ok(all) => all,
        Err(Error::Unsupported { .. }) => Vec::new(),
        Err(e) => return failed(&app, &visit, &e.to_string()),
    };
    let (samples, recent) = app.history_of(&name);
    let body = views::queue::page(
        &app,
        &visit,
        &QueuePage {
            name: &name,
            stats: &stats,
            samples: &samples,
            lateness: &lateness,
            recent: &recent,
            throughput: &throughput,
            listing,
            page_no,
            page: &listed,
            recurrences: &recurrences,
        },
    );
    page(StatusCode::OK, &visit.nonce, body)
}

/// `GET /queues/{name}/jobs?id=ID`: the search box, to the job's page.
pub(crate) async fn find_job(
    State(app): State<Shared>,
    visit: Visit,
    Path(name): Path<String>,
    RawQuery(query): RawQuery,
) -> Response {
    let query = fields(query.unwrap_or_default().as_bytes());
    match field(&query, "id")
        .map(str::trim)
        .filter(|id| !id.is_empty())
    {
        Some(id) => redirect(StatusCode::SEE_OTHER, &visit.job_url(&name, id)),
        None => refuse(
            &app,
            &visit,
            StatusCode::BAD_REQUEST,
            "give a job id to find",
        ),
    }
}

/// `GET /queues/{name}/jobs/{id}`: one job (404 if the queue has none by
/// that id).
pub(crate) async fn job(
    State(app): State<Shared>,
    visit: Visit,
    Path((name, id)): Path<(String, String)>,
) -> Response {
    match app.exists(&name).await {
        Ok(true) => {}
        Ok(false) => return refuse(&app, &visit, StatusCode::NOT_FOUND, "no such queue here"),
        Err(e) => return failed(&app, &visit, &e),
    }
    let queue = match app.queue(&name).await {
        Ok(q) => q,
        Err(e) => return failed(&app, &visit, &e),
    };
    let found = match queue.job(&JobId::from(id.as_str())).await {
        Ok(found) => found,
        // An id the store could never hold: no such job, as for one that
        // could but is not there.
        Err(Error::InvalidJobId { .. }) => None,
        Err(e) => return failed(&app, &visit, &e.to_string()),
    };
    let status = if found.is_some() {
        StatusCode::OK
    } else {
        StatusCode::NOT_FOUND
    };
    let body = views::job::page(&app, &visit, &name, &id, found.as_ref());
    page(status, &visit.nonce, body)
}

/// `GET /queue/{name}`: where `ttr serve` had a queue's page; the job
/// search's `?job=ID` goes to the job's page.
pub(crate) async fn moved_queue(
    visit: Visit,
    Path(name): Path<String>,
    RawQuery(query): RawQuery,
) -> Response {
    let fields = fields(query.as_deref().unwrap_or_default().as_bytes());
    let to = match field(&fields, "job").filter(|id| !id.is_empty()) {
        Some(id) => visit.job_url(&name, id),
        None => match query.filter(|q| !q.is_empty()) {
            Some(query) => format!("{}?{query}", visit.queue_url(&name)),
            None => visit.queue_url(&name),
        },
    };
    redirect(StatusCode::PERMANENT_REDIRECT, &to)
}
