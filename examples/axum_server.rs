//! An axum server whose request deadlines run on tiered-timer
//! (`tiered_timer::tower::TimeoutLayer`), with a slow and a fast route.
//!
//! `cargo run --example axum_server --features tower` runs a short
//! self-demo and exits: it starts the server on 127.0.0.1 (any free port)
//! and asks it for `/fast` (answered), `/slow` (cut off at the layer's
//! 500 ms timeout: 408 Request Timeout) and `/slow` again with a
//! `grpc-timeout: 100m` header (cut off at the request's own, earlier,
//! deadline of 100 ms).
//!
//! `cargo run --example axum_server --features tower -- --serve [ADDR]`
//! serves forever on ADDR (default 127.0.0.1:8080); try
//! `curl -i http://127.0.0.1:8080/slow`.
//!
//! Moving an axum app from tower's timeout to this one is one line, the
//! import: `use tower::timeout::TimeoutLayer;` becomes
//! `use tiered_timer::tower::TimeoutLayer;`. The error is still tower's
//! `Elapsed`, so the `HandleErrorLayer` below is unchanged.

use std::net::SocketAddr;
use std::time::Duration;

use axum::error_handling::HandleErrorLayer;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use tiered_timer::tower::{FromExtensions, RequestDeadline, TimeoutLayer};
use tiered_timer::Instant;
use tokio::net::{TcpListener, TcpStream};
use tower::{BoxError, ServiceBuilder};

/// Every request gets this long, unless it asks for less.
const TIMEOUT: Duration = Duration::from_millis(500);

async fn fast() -> &'static str {
    "fast: answered at once"
}

async fn slow() -> &'static str {
    tiered_timer::sleep(Duration::from_secs(2)).await;
    "slow: answered after 2 s"
}

/// Turns the timeout layer's error into a response, exactly as for tower's
/// own `TimeoutLayer`.
async fn handle_timeout(err: BoxError) -> (StatusCode, String) {
    if err.is::<tower::timeout::error::Elapsed>() {
        (StatusCode::REQUEST_TIMEOUT, "request timed out".to_owned())
    } else {
        (StatusCode::INTERNAL_SERVER_ERROR, err.to_string())
    }
}

/// A `grpc-timeout` value (digits and a unit: `H`, `M`, `S`, `m`, `u`,
/// `n`) as a duration.
fn grpc_timeout(value: &str) -> Option<Duration> {
    let (digits, unit) = value.split_at(value.len().checked_sub(1)?);
    let amount: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(amount.checked_mul(3600)?),
        "M" => Duration::from_secs(amount.checked_mul(60)?),
        "S" => Duration::from_secs(amount),
        "m" => Duration::from_millis(amount),
        "u" => Duration::from_micros(amount),
        "n" => Duration::from_nanos(amount),
        _ => return None,
    })
}

/// Records the client's own deadline, if it sent one, where the timeout
/// layer looks for it.
fn client_deadline(mut request: Request) -> Request {
    let asked = request
        .headers()
        .get("grpc-timeout")
        .and_then(|value| value.to_str().ok())
        .and_then(grpc_timeout);
    if let Some(deadline) = asked.and_then(|asked| Instant::now().checked_add(asked)) {
        request.extensions_mut().insert(RequestDeadline(deadline));
    }
    request
}

fn app() -> Router {
    Router::new()
        .route("/fast", get(fast))
        .route("/slow", get(slow))
        .layer(
            ServiceBuilder::new()
                .layer(HandleErrorLayer::new(handle_timeout))
                .map_request(client_deadline)
                // The one line: tower's `TimeoutLayer`, on this timer. The
                // deadline source makes it honour an earlier client deadline.
                .layer(TimeoutLayer::new(TIMEOUT).deadline_source(FromExtensions)),
        )
}

/// One request on a connection of its own; returns the status line and
/// body.
async fn get_with(
    addr: SocketAddr,
    path: &str,
    grpc_timeout: Option<&str>,
) -> Result<String, Box<dyn std::error::Error>> {
    let stream = TcpStream::connect(addr).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let mut request = hyper::Request::get(path).header("host", addr.to_string());
    if let Some(value) = grpc_timeout {
        request = request.header("grpc-timeout", value);
    }
    let response = sender
        .send_request(request.body(Empty::<Bytes>::new())?)
        .await?;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    Ok(format!("{status}: {}", String::from_utf8_lossy(&body)))
}

async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    println!("axum server on {addr}, request timeout {TIMEOUT:?} on tiered-timer");
    tokio::spawn(async move { axum::serve(listener, app()).await });

    let asks = [
        ("/fast", None, StatusCode::OK),
        ("/slow", None, StatusCode::REQUEST_TIMEOUT),
        ("/slow", Some("100m"), StatusCode::REQUEST_TIMEOUT),
    ];
    for (path, own, expected) in asks {
        let start = Instant::now();
        let answer = get_with(addr, path, own).await?;
        let took = start.elapsed();
        let asked = own.map_or(String::new(), |own| format!(" (grpc-timeout {own})"));
        println!("[client] GET {path}{asked} -> {answer} after {took:.1?}");
        assert!(answer.starts_with(expected.as_str()), "expected {expected}");
        if expected == StatusCode::REQUEST_TIMEOUT {
            let deadline = own.and_then(grpc_timeout).unwrap_or(TIMEOUT);
            // Never early: the answer cannot come before the deadline.
            assert!(
                took >= deadline,
                "timed out after {took:?}, before {deadline:?}"
            );
        }
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    if args.next().as_deref() == Some("--serve") {
        let addr = args.next().unwrap_or_else(|| "127.0.0.1:8080".to_owned());
        let listener = TcpListener::bind(&addr).await?;
        println!(
            "axum server on {}, request timeout {TIMEOUT:?} on tiered-timer",
            listener.local_addr()?
        );
        axum::serve(listener, app()).await?;
        Ok(())
    } else {
        demo().await
    }
}
