//! A TCP echo server whose connections carry read, write and idle timeouts
//! (`tiered_timer::io::TimeoutStream`).
//!
//! `cargo run --example echo_server` runs a short self-demo and exits: it
//! starts the server on 127.0.0.1 (any free port), connects an active
//! client, which is served, and an idle one, which the server cuts off at
//! its idle timeout.
//!
//! `cargo run --example echo_server -- --serve [ADDR]` serves forever on
//! ADDR (default 127.0.0.1:7007) with a 5 s read timeout, a 5 s write
//! timeout and a 30 s idle timeout; try it with `nc 127.0.0.1 7007`.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tiered_timer::io::TimeoutStream;
use tiered_timer::{sleep, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The limits each connection carries.
#[derive(Clone, Copy, Debug)]
struct Limits {
    read: Duration,
    write: Duration,
    idle: Duration,
}

/// Echoes what `socket` sends until it closes or a limit expires.
async fn echo(socket: TcpStream, limits: Limits) -> io::Result<u64> {
    let mut socket = TimeoutStream::new(socket);
    socket.set_read_timeout(Some(limits.read));
    socket.set_write_timeout(Some(limits.write));
    socket.set_idle_timeout(Some(limits.idle));
    let mut buf = [0; 4096];
    let mut echoed = 0;
    loop {
        let n = socket.read(&mut buf).await?;
        if n == 0 {
            return Ok(echoed);
        }
        socket.write_all(&buf[..n]).await?;
        echoed += n as u64;
    }
}

/// Accepts connections forever, each served by its own task.
async fn serve(listener: TcpListener, limits: Limits) -> io::Result<()> {
    let start = Instant::now();
    loop {
        let (socket, peer) = listener.accept().await?;
        tokio::spawn(async move {
            let opened = Instant::now();
            let result = echo(socket, limits).await;
            let at = start.elapsed().as_secs_f64();
            let lived = opened.elapsed().as_secs_f64();
            match result {
                Ok(n) => println!(
                    "[server {at:6.3}s] {peer}: closed by peer after {lived:.3}s, {n} bytes echoed"
                ),
                Err(err) => println!("[server {at:6.3}s] {peer}: dropped after {lived:.3}s: {err}"),
            }
        });
    }
}

async fn demo() -> io::Result<()> {
    let limits = Limits {
        read: Duration::from_secs(2),
        write: Duration::from_secs(2),
        idle: Duration::from_millis(500),
    };
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr: SocketAddr = listener.local_addr()?;
    println!("echo server on {addr}, limits per connection: {limits:?}");
    tokio::spawn(serve(listener, limits));
    let start = Instant::now();

    // An idle client: connects and says nothing.
    let idle = tokio::spawn(async move {
        let mut socket = TcpStream::connect(addr).await?;
        let n = socket.read(&mut [0; 16]).await?;
        let at = start.elapsed();
        println!(
            "[idle   {:6.3}s] the server closed my connection (read returned {n})",
            at.as_secs_f64()
        );
        assert!(at >= limits.idle, "cut off before the idle timeout");
        io::Result::Ok(())
    });

    // An active client: a message every 200 ms, well past the idle limit.
    let mut socket = TcpStream::connect(addr).await?;
    for i in 0..8 {
        sleep(Duration::from_millis(200)).await;
        let message = format!("message {i}");
        socket.write_all(message.as_bytes()).await?;
        let mut reply = vec![0; message.len()];
        socket.read_exact(&mut reply).await?;
        println!(
            "[active {:6.3}s] echoed: {}",
            start.elapsed().as_secs_f64(),
            String::from_utf8_lossy(&reply)
        );
    }
    println!(
        "[active {:6.3}s] still served after {:?}, more than 3x the idle limit; closing",
        start.elapsed().as_secs_f64(),
        start.elapsed()
    );
    drop(socket);
    idle.await.expect("idle client panicked")?;
    // Let the server print the active client's close.
    sleep(Duration::from_millis(50)).await;
    Ok(())
}

#[tokio::main]
async fn main() -> io::Result<()> {
    let mut args = std::env::args().skip(1);
    if args.next().as_deref() == Some("--serve") {
        let addr = args.next().unwrap_or_else(|| "127.0.0.1:7007".to_owned());
        let limits = Limits {
            read: Duration::from_secs(5),
            write: Duration::from_secs(5),
            idle: Duration::from_secs(30),
        };
        let listener = TcpListener::bind(&addr).await?;
        println!(
            "echo server on {}, limits per connection: {limits:?}",
            listener.local_addr()?
        );
        serve(listener, limits).await
    } else {
        demo().await
    }
}
