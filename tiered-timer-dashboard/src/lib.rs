//! The dashboard of [`tiered-timer-jobs`](tiered_timer_jobs) queues as an
//! [axum] [`Router`]: mount it in your service next to your own
//! routes, over the [`Queue`](tiered_timer_jobs::Queue) handles the service already holds, the way
//! Sidekiq's web UI is mounted in a Rails app, Oban Web in a Phoenix router
//! or Bull Board in an Express app. `ttr serve` is this router in a binary
//! of its own.
//!
//! ```no_run
//! use axum::{routing::get, Router};
//! use tiered_timer_dashboard::Dashboard;
//! use tiered_timer_jobs::Queue;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! // The service's own queue: an embedded store belongs to one process,
//! // so the dashboard looks through this handle instead of opening it.
//! let orders = Queue::connect("file:///var/lib/shop/jobs", "orders").await?;
//! let dashboard = Dashboard::builder()
//!     .queue(orders.clone())
//!     .token(std::env::var("JOBS_DASHBOARD_TOKEN")?)
//!     .build()?;
//! let app = Router::new()
//!     .route("/", get(|| async { "the shop" }))
//!     .nest("/ops/jobs", dashboard.router());
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! axum::serve(listener, app).await?;
//! # Ok(())
//! # }
//! ```
//!
//! # What it shows
//!
//! * The overview: every queue with its counts (pending, due now, most
//!   overdue, leased, expired leases, dead; per partition on click) and a
//!   depth chart.
//! * A page per queue (`queues/orders`): the waiting, due, leased and dead
//!   jobs, paged; depth and claim-lateness charts; a search by id.
//! * A page per job (`queues/orders/jobs/order-710`, the id readable in the
//!   URL): state, due time, lease, attempts, last error and payload (as
//!   text, or hex).
//! * `metrics`: every queue's numbers in Prometheus' text format.
//!
//! # Where the queues come from
//!
//! * [`Builder::queue`]: the application's own handles. Everything is read
//!   and changed through them, so an embedded store (`file://`), which only
//!   one process may open, is shared with the service instead of reopened,
//!   and its lateness histogram counts the service's claims.
//! * [`Builder::store_url`]: every queue found at a store
//!   ([`find_queues`](tiered_timer_jobs::find_queues), read again every
//!   30 s), each opened to look only (`register(false)`, and on an
//!   embedded store [`read_only`](tiered_timer_jobs::Builder::read_only),
//!   so it works while the store's service runs). An action on such a
//!   queue opens the embedded store as its owner for that action alone
//!   (it fails with the store's `Locked` error while its service runs).
//!   Both may be given: a handle wins over the store for its queue.
//!
//! # Who may act
//!
//! Looking needs nothing: wrap the router in your own layer (or put it
//! behind your proxy's authentication) to restrict who may look. The
//! actions (requeue, purge, cancel, promote; each a POST that shows what it
//! will do and asks to confirm) need all of:
//!
//! * the right to act: the [`token`](Builder::token) (an `Authorization:
//!   Bearer` header, or the session cookie that logging in with the token
//!   sets: HttpOnly, SameSite=Strict, scoped to the mount point), or the
//!   application's own check ([`Builder::authorize`]) instead;
//! * this dashboard's CSRF token (the `csrf` field of every page's forms,
//!   or an `X-CSRF-Token` header);
//! * when the browser sends them, an `Origin` equal to the `Host` (or
//!   `X-Forwarded-Host`) and a same-origin `Sec-Fetch-Site`.
//!
//! Without a token or a check, or with [`read_only`](Builder::read_only),
//! the dashboard is read-only and offers no action. With one, a visitor
//! who has not logged in sees the actions disabled, with a "log in to act"
//! hint.
//!
//! # Safety of the pages
//!
//! Every page, form and chart comes from [maud] templates, which
//! escape every value they are given; the only unescaped text is this
//! crate's own style sheet and script. Responses carry a
//! Content-Security-Policy that runs only the page's own script (by
//! nonce), `X-Frame-Options: DENY`, `nosniff` and `no-store`. Links carry
//! the path the router is mounted at (from axum's `OriginalUri`).
//!
//! # Charts
//!
//! The depth chart is sampled by the dashboard (every
//! [`sample_every`](Builder::sample_every), and at each page view) and kept
//! for an hour in memory; the lateness chart is the difference of two reads
//! of the queue's lateness counters over that hour. Sampling starts with
//! the router when it is made inside a tokio runtime, else at the first
//! request, and stops when the last clone of the router is dropped.

#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod actions;
mod app;
mod auth;
mod builder;
mod human;
mod pages;
mod prom;
mod respond;
mod text;
mod views;

use std::sync::Arc;

use axum::routing::{get, post};
use axum::Router;

pub use builder::{BuildError, Builder};

/// Not part of the API: the words and numbers for people that `ttr`'s
/// command line shares with the pages. They may change in any release.
#[doc(hidden)]
pub mod for_ttr {
    /// Durations, sizes, UTC times, relative times, clocks' names.
    pub mod human {
        pub use crate::human::{bytes, clock_name, duration, relative, utc};
    }
    pub use crate::text::{payload, redacted, safe};
}

/// The dashboard: build it with [`Dashboard::builder`], then mount its
/// [`router`](Dashboard::router) in your application.
///
/// Cloning is cheap: the clones share the queues, the charts' history and
/// the CSRF and session secrets.
///
/// # Examples
///
/// ```
/// use tiered_timer_dashboard::Dashboard;
///
/// let dashboard = Dashboard::builder().token("s3cret").build()?;
/// let app: axum::Router = axum::Router::new().nest("/jobs", dashboard.router());
/// # drop(app);
/// # Ok::<(), tiered_timer_dashboard::BuildError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Dashboard {
    app: Arc<app::App>,
}

impl Dashboard {
    /// Settings for a dashboard: where its queues come from, who may act,
    /// how often it refreshes. See [`Builder`].
    ///
    /// # Examples
    ///
    /// ```
    /// let dashboard = tiered_timer_dashboard::Dashboard::builder().build()?;
    /// # drop(dashboard);
    /// # Ok::<(), tiered_timer_dashboard::BuildError>(())
    /// ```
    pub fn builder() -> Builder {
        Builder::new()
    }

    /// The dashboard's routes, to serve or to nest under any path of an
    /// application's router (its links carry the path it is mounted at):
    ///
    /// | route | what |
    /// |---|---|
    /// | `GET /` | every queue with its counts |
    /// | `GET /queues/{queue}` | a queue's jobs (`?tab=waiting\|due\|leased\|dead&page=N`) |
    /// | `GET /queues/{queue}/jobs/{id}` | one job (`GET /queues/{queue}/jobs?id=ID` finds it) |
    /// | `POST /queues/{queue}/action` | requeue, purge, cancel, promote (asks to confirm) |
    /// | `GET`, `POST /login`; `POST /logout` | the token's login |
    /// | `GET /metrics` | Prometheus' text format |
    ///
    /// Earlier `ttr serve` paths still work: `/queue/{queue}` redirects,
    /// and `POST /queue/{queue}/action` acts.
    ///
    /// The router has no state of its own to give (any `S` fits), so it
    /// nests in a router of any state. Made inside a tokio runtime, it
    /// starts sampling the queues for the charts; otherwise the first
    /// request does.
    ///
    /// # Examples
    ///
    /// ```
    /// use tiered_timer_dashboard::Dashboard;
    ///
    /// #[derive(Clone)]
    /// struct Shop;
    ///
    /// let dashboard = Dashboard::builder().build()?;
    /// let app: axum::Router<Shop> = axum::Router::new().nest("/ops/jobs", dashboard.router());
    /// let app: axum::Router = app.with_state(Shop);
    /// # drop(app);
    /// # Ok::<(), tiered_timer_dashboard::BuildError>(())
    /// ```
    pub fn router<S>(&self) -> Router<S>
    where
        S: Clone + Send + Sync + 'static,
    {
        if tokio::runtime::Handle::try_current().is_ok() {
            app::App::start_sampling(&self.app);
        }
        Router::new()
            .route("/", get(pages::overview))
            .route("/queues/{name}", get(pages::queue))
            .route("/queues/{name}/jobs", get(pages::find_job))
            .route("/queues/{name}/jobs/{id}", get(pages::job))
            .route("/queues/{name}/action", post(actions::act))
            // The paths of `ttr serve` before the dashboard was a library:
            // bookmarks and scripts keep working.
            .route("/queue/{name}", get(pages::moved_queue))
            .route("/queue/{name}/action", post(actions::act))
            .route("/login", get(auth::login_page).post(auth::login))
            .route("/logout", post(auth::logout))
            .route("/metrics", get(prom::metrics))
            .with_state(Arc::clone(&self.app))
    }
}

/// The README's examples, compiled as doctests so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
