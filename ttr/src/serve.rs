//! `ttr serve`: the dashboard (the `tiered-timer-dashboard` crate's
//! router) on a listener of its own, over every queue of `--url`.
//!
//! The router does everything (pages, actions and their checks,
//! `/metrics`); this file turns the command line into its settings. On an
//! embedded store its pages look without the store's lock, so they work
//! while the store's service runs; its actions open the store for
//! themselves, so they need that service stopped. (A service that mounts
//! the dashboard itself shares its own handles instead.)

use std::net::SocketAddr;
use std::time::Duration;

use clap::Args;
use tiered_timer_dashboard::Dashboard;

use crate::{Failure, RedisArgs};

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

/// What a read-only `ttr serve` says about actions.
const READ_ONLY: &str =
    "Read-only dashboard: start ttr serve with --token to requeue, purge, cancel or promote.";

pub(crate) async fn run(redis: RedisArgs, args: ServeArgs) -> Result<(), Failure> {
    crate::probe(&redis.url, redis.timeout).await?;
    let dashboard = dashboard(&redis, &args)?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| Failure::Runtime(format!("cannot listen on {}: {e}", args.listen)))?;
    let bound = listener
        .local_addr()
        .map_err(|e| Failure::Runtime(format!("cannot listen on {}: {e}", args.listen)))?;
    let mode = if args.token.as_deref().is_some_and(|t| !t.is_empty()) {
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
    axum::serve(listener, dashboard.router::<()>())
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .map_err(|e| Failure::Runtime(format!("the server stopped: {e}")))
}

/// The dashboard `--url`, `--cluster`, `--timeout` and `serve`'s options
/// describe. An empty `--token` (an empty `TTR_TOKEN`) is no token.
fn dashboard(redis: &RedisArgs, args: &ServeArgs) -> Result<Dashboard, Failure> {
    let mut builder = Dashboard::builder()
        .store_url(&redis.url)
        .command_timeout(redis.timeout)
        .refresh(args.refresh)
        .sample_every(args.sample_every)
        .title("ttr")
        .read_only_note(READ_ONLY);
    if redis.cluster {
        builder = builder.cluster();
    }
    if let Some(token) = args.token.as_deref().filter(|t| !t.is_empty()) {
        builder = builder.token(token);
    }
    builder.build().map_err(|e| Failure::Usage(e.to_string()))
}
