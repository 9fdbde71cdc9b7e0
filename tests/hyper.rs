//! `HyperTimer`: hyper's own timer-driven features on this crate's timer.

mod support;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper::rt::{Sleep, Timer as _};
use hyper::server::conn::{http1, http2};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use support::ms;
use tiered_timer::clock::ManualClock;
use tiered_timer::{Handle, HyperTimer, Instant, Timer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

async fn hello(_: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(b"hello"))))
}

/// The address of the sleep's allocation.
fn address(sleep: &Pin<Box<dyn Sleep>>) -> *const u8 {
    &**sleep as *const dyn Sleep as *const u8
}

#[test]
fn is_clone_send_sync_debug() {
    fn check<T: hyper::rt::Timer + Clone + Send + Sync + std::fmt::Debug + 'static>() {}
    check::<HyperTimer>();
}

#[tokio::test(start_paused = true)]
async fn sleep_and_sleep_until_follow_the_timer() {
    let timer = HyperTimer::new();
    let start = Instant::now();
    timer.sleep(secs(3)).await;
    assert_eq!(start.elapsed(), secs(3));
    timer.sleep_until(timer.now() + secs(2)).await;
    assert_eq!(start.elapsed(), secs(5));
}

#[tokio::test(start_paused = true)]
async fn reset_moves_the_existing_sleep_in_place() {
    let timer = HyperTimer::new();
    let handle = Handle::current();
    let mut sleep = timer.sleep(ms(10));
    // Registered (polled once), then moved later: same allocation, same
    // timer entry.
    assert!(futures_poll(sleep.as_mut()).is_pending());
    assert_eq!(handle.pending(), 1);
    let before = address(&sleep);
    let start = Instant::now();
    timer.reset(&mut sleep, timer.now() + secs(5));
    assert_eq!(address(&sleep), before, "reset allocated a new sleep");
    assert_eq!(handle.pending(), 1);
    sleep.as_mut().await;
    assert_eq!(start.elapsed(), secs(5));
    // Reset after completion, and earlier: still in place.
    timer.reset(&mut sleep, timer.now() + secs(1));
    assert_eq!(address(&sleep), before);
    sleep.as_mut().await;
    assert_eq!(start.elapsed(), secs(6));
}

/// A sleep made by another timer.
struct Foreign(Pin<Box<time::Sleep>>);

impl Future for Foreign {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.0.as_mut().poll(cx)
    }
}

impl Sleep for Foreign {}

#[tokio::test(start_paused = true)]
async fn reset_replaces_a_sleep_of_another_timer() {
    let timer = HyperTimer::new();
    let mut sleep: Pin<Box<dyn Sleep>> = Box::pin(Foreign(Box::pin(time::sleep(secs(100)))));
    let start = Instant::now();
    timer.reset(&mut sleep, timer.now() + secs(2));
    assert!(!sleep.is::<Foreign>());
    sleep.as_mut().await;
    assert_eq!(start.elapsed(), secs(2));
}

#[tokio::test(start_paused = true)]
async fn now_follows_paused_time() {
    let timer = HyperTimer::new();
    let before = timer.now();
    time::advance(secs(42)).await;
    assert_eq!(timer.now() - before, secs(42));
}

#[tokio::test]
async fn now_follows_a_manual_clock() {
    let clock = ManualClock::new();
    let own = Timer::builder().clock(clock.clone()).build();
    let timer = HyperTimer::from(own.handle());
    let before = timer.now();
    clock.advance(secs(3600));
    assert_eq!(timer.now() - before, secs(3600));
    assert_eq!(timer.handle().now() - Instant::from_std(before), secs(3600));
}

fn futures_poll(sleep: Pin<&mut dyn Sleep>) -> Poll<()> {
    let mut cx = Context::from_waker(std::task::Waker::noop());
    sleep.poll(&mut cx)
}

/// An HTTP/1 server on `HyperTimer` with a header read timeout.
async fn http1_server(header_timeout: Duration) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (socket, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let mut http = http1::Builder::new();
                http.timer(HyperTimer::new())
                    .header_read_timeout(header_timeout);
                let _ = http
                    .serve_connection(TokioIo::new(socket), service_fn(hello))
                    .await;
            });
        }
    });
    addr
}

async fn get(addr: SocketAddr) -> (u16, Bytes) {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let request = Request::get("/")
        .header("host", "localhost")
        .body(Empty::<Bytes>::new())
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, body)
}

/// Reads until the peer closes (or resets) the connection.
async fn until_closed(stream: &mut (impl AsyncRead + Unpin)) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0; 1024];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return got,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_read_timeout_cuts_off_slow_headers_while_others_are_served() {
    const HEADER_TIMEOUT: Duration = Duration::from_millis(500);
    let addr = http1_server(HEADER_TIMEOUT).await;
    let start = Instant::now();
    let mut slow = TcpStream::connect(addr).await.unwrap();
    // Half a request, then nothing.
    slow.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n")
        .await
        .unwrap();
    // Meanwhile normal clients are served by the same server.
    for _ in 0..3 {
        assert_eq!(get(addr).await, (200, Bytes::from_static(b"hello")));
    }
    let answer = until_closed(&mut slow).await;
    let elapsed = start.elapsed();
    assert!(
        !String::from_utf8_lossy(&answer).contains("200 OK"),
        "the slow client was served"
    );
    assert!(
        elapsed >= HEADER_TIMEOUT,
        "cut off early, after {elapsed:?}"
    );
    assert!(
        elapsed < HEADER_TIMEOUT + secs(10),
        "cut off late, after {elapsed:?}"
    );
    // And the server still serves.
    assert_eq!(get(addr).await.0, 200);
}

// HTTP/2 frames, by hand: a client that answers pings or not.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const SETTINGS: u8 = 4;
const PING: u8 = 6;
const GOAWAY: u8 = 7;
const ACK: u8 = 1;

fn frame(kind: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut frame = len.to_be_bytes()[1..].to_vec();
    frame.extend_from_slice(&[kind, flags, 0, 0, 0, 0]);
    frame.extend_from_slice(payload);
    frame
}

async fn read_frame(stream: &mut (impl AsyncRead + Unpin)) -> Option<(u8, u8, Vec<u8>)> {
    let mut head = [0; 9];
    stream.read_exact(&mut head).await.ok()?;
    let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
    let mut payload = vec![0; len];
    stream.read_exact(&mut payload).await.ok()?;
    Some((head[3], head[4], payload))
}

/// An HTTP/2 connection to a server on `HyperTimer` with keep-alive pings
/// every 10 s and a 5 s ping timeout, over an in-memory pipe under paused
/// time; returns the client end and the server's result.
async fn http2_connection() -> (
    tokio::io::DuplexStream,
    tokio::task::JoinHandle<hyper::Result<()>>,
) {
    let (mut client, server) = tokio::io::duplex(64 * 1024);
    let server = tokio::spawn(async move {
        http2::Builder::new(TokioExecutor::new())
            .timer(HyperTimer::new())
            .keep_alive_interval(secs(10))
            .keep_alive_timeout(secs(5))
            .serve_connection(TokioIo::new(server), service_fn(hello))
            .await
    });
    client.write_all(PREFACE).await.unwrap();
    client.write_all(&frame(SETTINGS, 0, &[])).await.unwrap();
    loop {
        let (kind, flags, _) = read_frame(&mut client).await.unwrap();
        if kind == SETTINGS && flags & ACK == 0 {
            client.write_all(&frame(SETTINGS, ACK, &[])).await.unwrap();
            break;
        }
    }
    (client, server)
}

#[tokio::test(start_paused = true)]
async fn http2_keep_alive_pings_answered_keep_the_connection() {
    let (mut client, server) = http2_connection().await;
    let start = Instant::now();
    let mut pings = Vec::new();
    while pings.len() < 6 {
        let (kind, flags, payload) = read_frame(&mut client).await.expect("connection closed");
        if kind == PING && flags & ACK == 0 {
            pings.push(start.elapsed());
            client.write_all(&frame(PING, ACK, &payload)).await.unwrap();
        }
    }
    // A ping every 10 s (from the last frame read), answered each time.
    for pair in pings.windows(2) {
        assert!(pair[1] - pair[0] >= secs(10), "{pings:?}");
        assert!(pair[1] - pair[0] < secs(11), "{pings:?}");
    }
    assert!(!server.is_finished());
}

#[tokio::test(start_paused = true)]
async fn http2_keep_alive_closes_a_peer_that_stops_answering() {
    let (mut client, server) = http2_connection().await;
    let start = Instant::now();
    let mut ping_at = None;
    while let Some((kind, flags, _)) = read_frame(&mut client).await {
        if kind == PING && flags & ACK == 0 && ping_at.is_none() {
            // Not answered.
            ping_at = Some(start.elapsed());
        }
        if kind == GOAWAY {
            break;
        }
    }
    let ping_at = ping_at.expect("no keep-alive ping");
    assert!(ping_at >= secs(10) && ping_at < secs(11), "{ping_at:?}");
    let closed_at = start.elapsed();
    assert!(closed_at >= ping_at + secs(5), "closed after {closed_at:?}");
    assert!(closed_at < ping_at + secs(6), "closed after {closed_at:?}");
    let err = server.await.unwrap().unwrap_err();
    assert!(format!("{err:?}").contains("KeepAlive"), "{err:?}");
}
