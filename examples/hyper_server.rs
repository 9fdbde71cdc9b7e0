//! A hyper HTTP/1 server whose timers run on tiered-timer
//! (`tiered_timer::HyperTimer`), with a header read timeout.
//!
//! `cargo run --example hyper_server --features hyper` runs a short
//! self-demo and exits: it starts the server on 127.0.0.1 (any free port),
//! a normal client is served, and a client that sends half its headers and
//! then stalls is cut off at the header read timeout.
//!
//! `cargo run --example hyper_server --features hyper -- --serve [ADDR]`
//! serves forever on ADDR (default 127.0.0.1:8080) with a 10 s header read
//! timeout; try it with `curl http://127.0.0.1:8080/`.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tiered_timer::{HyperTimer, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

async fn hello(request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = format!(
        "hello from hyper on tiered-timer, you asked for {}\n",
        request.uri()
    );
    Ok(Response::new(Full::new(Bytes::from(body))))
}

/// Accepts connections forever; hyper's header read timeout runs on
/// `HyperTimer`.
async fn serve(listener: TcpListener, header_timeout: Duration) -> io::Result<()> {
    let start = Instant::now();
    loop {
        let (socket, peer) = listener.accept().await?;
        tokio::spawn(async move {
            let mut http = http1::Builder::new();
            http.timer(HyperTimer::new())
                .header_read_timeout(header_timeout);
            let result = http
                .serve_connection(TokioIo::new(socket), service_fn(hello))
                .await;
            let at = start.elapsed().as_secs_f64();
            match result {
                Ok(()) => println!("[server {at:6.3}s] {peer}: connection done"),
                Err(err) => println!("[server {at:6.3}s] {peer}: connection dropped: {err}"),
            }
        });
    }
}

async fn get(addr: SocketAddr, path: &str) -> Result<String, Box<dyn std::error::Error>> {
    let stream = TcpStream::connect(addr).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let request = Request::get(path)
        .header("host", addr.to_string())
        .body(Empty::<Bytes>::new())?;
    let response = sender.send_request(request).await?;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    Ok(format!(
        "{status} {}",
        String::from_utf8_lossy(&body).trim_end()
    ))
}

async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    let header_timeout = Duration::from_millis(500);
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    println!("hyper server on {addr}, header read timeout {header_timeout:?}");
    tokio::spawn(serve(listener, header_timeout));
    let start = Instant::now();

    // A slow client: half a request, then nothing.
    let slow = tokio::spawn(async move {
        let mut socket = TcpStream::connect(addr).await?;
        socket
            .write_all(b"GET /slow HTTP/1.1\r\nHost: demo\r\n")
            .await?;
        let mut answer = Vec::new();
        // Until the server closes the connection.
        let _ = socket.read_to_end(&mut answer).await;
        let at = start.elapsed();
        println!(
            "[slow   {:6.3}s] the server cut me off ({} bytes of answer: {:?})",
            at.as_secs_f64(),
            answer.len(),
            String::from_utf8_lossy(&answer)
                .lines()
                .next()
                .unwrap_or("")
        );
        assert!(at >= header_timeout, "cut off before the header timeout");
        io::Result::Ok(())
    });

    // Normal clients, served meanwhile.
    for path in ["/one", "/two", "/three"] {
        let answer = get(addr, path).await?;
        println!("[client {:6.3}s] {answer}", start.elapsed().as_secs_f64());
        tiered_timer::sleep(Duration::from_millis(100)).await;
    }
    slow.await??;
    let answer = get(addr, "/after").await?;
    println!("[client {:6.3}s] {answer}", start.elapsed().as_secs_f64());
    tiered_timer::sleep(Duration::from_millis(50)).await;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    if args.next().as_deref() == Some("--serve") {
        let addr = args.next().unwrap_or_else(|| "127.0.0.1:8080".to_owned());
        let listener = TcpListener::bind(&addr).await?;
        let header_timeout = Duration::from_secs(10);
        println!(
            "hyper server on {}, header read timeout {header_timeout:?}",
            listener.local_addr()?
        );
        serve(listener, header_timeout).await?;
        Ok(())
    } else {
        demo().await
    }
}
