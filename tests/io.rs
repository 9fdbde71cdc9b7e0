//! `io::TimeoutStream`: the limits under paused time over
//! `tokio::io::duplex`, and idle connections over real TCP.

mod support;

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use support::ms;
use tiered_timer::io::TimeoutStream;
use tiered_timer::{Handle, Instant, Timer};
use tokio::io::{
    duplex, AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, ReadBuf,
};
use tokio::time;
use tokio_test::{assert_pending, task};

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn assert_timed_out(err: &io::Error, message: &str) {
    assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
    assert_eq!(err.to_string(), message);
}

/// A stream whose every operation stays `Pending` and never wakes anyone:
/// only the limits can end a wait.
struct Stuck;

impl AsyncRead for Stuck {
    fn poll_read(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        _: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Poll::Pending
    }
}

impl AsyncWrite for Stuck {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, _: &[u8]) -> Poll<io::Result<usize>> {
        Poll::Pending
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Pending
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Pending
    }
}

#[test]
fn is_unpin_send_sync_when_the_stream_is() {
    fn check<T: Unpin + Send + Sync + std::fmt::Debug>() {}
    check::<TimeoutStream<tokio::io::DuplexStream>>();
    check::<TimeoutStream<tokio::net::TcpStream>>();
}

#[tokio::test(start_paused = true)]
async fn silent_peer_read_times_out_at_the_read_timeout() {
    let (stream, _peer) = duplex(64);
    let mut stream = TimeoutStream::new(stream);
    stream.set_read_timeout(Some(secs(5)));
    let start = Instant::now();
    let err = stream.read(&mut [0; 8]).await.unwrap_err();
    assert_timed_out(&err, "read timeout of 5s elapsed");
    assert_eq!(start.elapsed(), secs(5));
}

#[tokio::test(start_paused = true)]
async fn read_timeout_is_not_early_by_one_tick() {
    let (stream, _peer) = duplex(64);
    let mut stream = TimeoutStream::new(stream);
    stream.set_read_timeout(Some(secs(5)));
    let mut read = task::spawn(async move { stream.read(&mut [0; 8]).await });
    assert_pending!(read.poll());
    time::advance(secs(5) - ms(1)).await;
    assert_pending!(read.poll());
    time::advance(ms(1)).await;
    assert!(read.is_woken());
    match read.poll() {
        Poll::Ready(Err(err)) => assert_timed_out(&err, "read timeout of 5s elapsed"),
        other => panic!("expected the timeout, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn trickling_peer_never_times_out() {
    let (stream, mut peer) = duplex(64);
    let mut stream = TimeoutStream::new(stream);
    stream.set_read_timeout(Some(secs(5)));
    stream.set_idle_timeout(Some(secs(5)));
    let writer = tokio::spawn(async move {
        for _ in 0..20 {
            time::sleep(secs(4)).await;
            peer.write_all(b"x").await.unwrap();
        }
        peer
    });
    let start = Instant::now();
    let mut got = 0;
    while got < 20 {
        got += stream.read(&mut [0; 8]).await.unwrap();
    }
    assert_eq!(start.elapsed(), secs(80));
    // Then the peer falls silent: the limits apply again, from the first
    // wait after the last byte.
    let _peer = writer.await.unwrap();
    let start = Instant::now();
    let err = stream.read(&mut [0; 8]).await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    assert_eq!(start.elapsed(), secs(5));
}

#[tokio::test(start_paused = true)]
async fn peer_that_stops_reading_makes_writes_time_out() {
    let (stream, _not_reading) = duplex(16);
    let mut stream = TimeoutStream::new(stream);
    stream.set_write_timeout(Some(secs(5)));
    let start = Instant::now();
    let err = stream.write_all(&[7; 64]).await.unwrap_err();
    assert_timed_out(&err, "write timeout of 5s elapsed");
    assert_eq!(start.elapsed(), secs(5));
}

#[tokio::test(start_paused = true)]
async fn slow_but_steady_reader_keeps_writes_alive() {
    let (stream, mut peer) = duplex(16);
    let mut stream = TimeoutStream::new(stream);
    stream.set_write_timeout(Some(secs(5)));
    let reader = tokio::spawn(async move {
        let mut total = 0;
        let mut buf = [0; 16];
        while total < 256 {
            time::sleep(secs(3)).await;
            total += peer.read(&mut buf).await.unwrap();
        }
        total
    });
    stream.write_all(&[1; 256]).await.unwrap();
    assert_eq!(reader.await.unwrap(), 256);
}

#[tokio::test(start_paused = true)]
async fn no_limit_set_is_transparent() {
    let handle = Handle::current();
    let (stream, mut peer) = duplex(64);
    let mut stream = TimeoutStream::new(stream);
    stream.write_all(b"hello").await.unwrap();
    let mut buf = [0; 5];
    peer.read_exact(&mut buf).await.unwrap();
    assert_eq!(&buf, b"hello");
    peer.write_all(b"world").await.unwrap();
    stream.read_exact(&mut buf).await.unwrap();
    assert_eq!(&buf, b"world");
    // A silent peer: the read waits as long as it takes, with no timer.
    let mut read = task::spawn(async move { stream.read(&mut [0; 8]).await });
    assert_pending!(read.poll());
    assert_eq!(handle.pending(), 0);
    time::advance(Duration::from_secs(3600)).await;
    assert_pending!(read.poll());
    peer.write_all(b"!").await.unwrap();
    assert!(read.is_woken());
    match read.poll() {
        Poll::Ready(Ok(1)) => {}
        other => panic!("expected one byte, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn idle_timeout_closes_a_silent_connection() {
    let (stream, _peer) = duplex(64);
    let mut stream = TimeoutStream::new(stream);
    stream.set_idle_timeout(Some(secs(30)));
    let start = Instant::now();
    let err = stream.read(&mut [0; 8]).await.unwrap_err();
    assert_timed_out(&err, "idle timeout of 30s elapsed");
    assert_eq!(start.elapsed(), secs(30));
}

#[tokio::test(start_paused = true)]
async fn writes_keep_a_waiting_read_from_going_idle() {
    let (stream, mut peer) = duplex(1024);
    let mut stream = TimeoutStream::new(stream);
    stream.set_idle_timeout(Some(secs(30)));
    let (mut rd, mut wr) = tokio::io::split(stream);
    let start = Instant::now();
    let mut buf = [0; 8];
    // The peer never writes, but we write every 20 s for 200 s.
    while start.elapsed() < secs(200) {
        tokio::select! {
            read = rd.read(&mut buf) => panic!("read ended early: {read:?}"),
            _ = time::sleep(secs(20)) => wr.write_all(b"tick").await.unwrap(),
        }
    }
    let mut sent = vec![0; 40];
    peer.read_exact(&mut sent).await.unwrap();
    // Once writes stop, the read fails 30 s after its first wait.
    let start = Instant::now();
    let err = rd.read(&mut buf).await.unwrap_err();
    assert_timed_out(&err, "idle timeout of 30s elapsed");
    assert_eq!(start.elapsed(), secs(30));
}

#[tokio::test(start_paused = true)]
async fn read_timeout_is_a_stall_detector_not_an_idle_timer() {
    // A read timeout longer than the gaps between the peer's bytes, and an
    // idle timeout shorter than the whole exchange: neither fires.
    let (stream, mut peer) = duplex(64);
    let mut stream = TimeoutStream::new(stream);
    stream.set_read_timeout(Some(secs(2)));
    stream.set_idle_timeout(Some(secs(3)));
    tokio::spawn(async move {
        for _ in 0..10 {
            time::sleep(ms(1500)).await;
            peer.write_all(b"ab").await.unwrap();
        }
        time::sleep(secs(3600)).await;
    });
    let mut got = 0;
    while got < 20 {
        got += stream.read(&mut [0; 1]).await.unwrap();
    }
    // The read timeout is the shorter: it names itself.
    let err = stream.read(&mut [0; 1]).await.unwrap_err();
    assert_timed_out(&err, "read timeout of 2s elapsed");
}

#[tokio::test(start_paused = true)]
async fn a_limit_re_arms_on_the_next_poll_after_expiring() {
    let (stream, mut peer) = duplex(64);
    let mut stream = TimeoutStream::new(stream);
    stream.set_read_timeout(Some(secs(5)));
    let start = Instant::now();
    stream.read(&mut [0; 8]).await.unwrap_err();
    assert_eq!(start.elapsed(), secs(5));
    // A retry waits the whole limit again...
    stream.read(&mut [0; 8]).await.unwrap_err();
    assert_eq!(start.elapsed(), secs(10));
    // ...and still reads what arrives in time.
    tokio::spawn(async move {
        time::sleep(secs(4)).await;
        peer.write_all(b"late").await.unwrap();
        time::sleep(secs(3600)).await;
    });
    let mut buf = [0; 4];
    stream.read_exact(&mut buf).await.unwrap();
    assert_eq!(&buf, b"late");
}

#[tokio::test(start_paused = true)]
async fn flush_and_shutdown_are_covered_by_the_write_timeout() {
    let mut stream = TimeoutStream::new(Stuck);
    stream.set_write_timeout(Some(secs(2)));
    let start = Instant::now();
    let err = stream.flush().await.unwrap_err();
    assert_timed_out(&err, "write timeout of 2s elapsed");
    assert_eq!(start.elapsed(), secs(2));
    let err = stream.shutdown().await.unwrap_err();
    assert_timed_out(&err, "write timeout of 2s elapsed");
    assert_eq!(start.elapsed(), secs(4));
}

#[tokio::test(start_paused = true)]
async fn write_stall_does_not_trip_the_read_timeout() {
    let mut stream = TimeoutStream::new(Stuck);
    stream.set_read_timeout(Some(secs(1)));
    stream.set_write_timeout(Some(secs(3)));
    let start = Instant::now();
    let err = stream.write(b"x").await.unwrap_err();
    assert_timed_out(&err, "write timeout of 3s elapsed");
    assert_eq!(start.elapsed(), secs(3));
}

#[tokio::test(start_paused = true)]
async fn deadline_cuts_off_an_always_ready_stream_and_stays_passed() {
    let mut stream = TimeoutStream::new(tokio::io::repeat(1));
    let deadline = Instant::now() + secs(10);
    stream.set_deadline(Some(deadline));
    assert_eq!(stream.deadline(), Some(deadline));
    let mut buf = [0; 64];
    assert_eq!(stream.read(&mut buf).await.unwrap(), 64);
    time::advance(secs(10) - ms(1)).await;
    assert_eq!(stream.read(&mut buf).await.unwrap(), 64);
    time::advance(ms(1)).await;
    for _ in 0..3 {
        let err = stream.read(&mut buf).await.unwrap_err();
        assert_timed_out(&err, "stream deadline passed");
    }
    // Moving it revives the stream; clearing it too.
    stream.set_deadline(Some(Instant::now() + secs(5)));
    assert_eq!(stream.read(&mut buf).await.unwrap(), 64);
    time::advance(secs(5)).await;
    stream.read(&mut buf).await.unwrap_err();
    stream.set_deadline(None);
    assert_eq!(stream.deadline(), None);
    assert_eq!(stream.read(&mut buf).await.unwrap(), 64);
}

#[tokio::test(start_paused = true)]
async fn deadline_wakes_a_waiting_read_and_covers_writes() {
    let (stream, _peer) = duplex(16);
    let mut stream = TimeoutStream::new(stream);
    stream.set_read_timeout(Some(secs(60)));
    stream.set_deadline(Some(Instant::now() + secs(7)));
    let start = Instant::now();
    let err = stream.read(&mut [0; 8]).await.unwrap_err();
    assert_timed_out(&err, "stream deadline passed");
    assert_eq!(start.elapsed(), secs(7));
    let err = stream.write(b"x").await.unwrap_err();
    assert_timed_out(&err, "stream deadline passed");
    let err = stream.shutdown().await.unwrap_err();
    assert_timed_out(&err, "stream deadline passed");
}

#[tokio::test(start_paused = true)]
async fn deadline_already_passed_fails_the_first_operation() {
    let (stream, mut peer) = duplex(64);
    peer.write_all(b"ready").await.unwrap();
    let mut stream = TimeoutStream::new(stream);
    stream.set_deadline(Some(Instant::now() - ms(1)));
    let err = stream.read(&mut [0; 8]).await.unwrap_err();
    assert_timed_out(&err, "stream deadline passed");
}

#[tokio::test(start_paused = true)]
async fn changing_an_armed_timeout_restarts_its_clock_now() {
    let (stream, _peer) = duplex(64);
    let mut stream = TimeoutStream::new(stream);
    stream.set_read_timeout(Some(secs(60)));
    {
        let mut buf = [0; 8];
        let mut read = task::spawn(stream.read(&mut buf));
        assert_pending!(read.poll());
        time::advance(secs(10)).await;
        assert_pending!(read.poll());
    }
    // Still armed (no read completed): the new length counts from now.
    stream.set_read_timeout(Some(secs(5)));
    assert_eq!(stream.read_timeout(), Some(secs(5)));
    time::advance(secs(3)).await;
    let start = Instant::now();
    let err = stream.read(&mut [0; 8]).await.unwrap_err();
    assert_timed_out(&err, "read timeout of 5s elapsed");
    assert_eq!(start.elapsed(), secs(2));
    // Clearing it gives the timer entry back.
    stream.set_read_timeout(None);
    let mut buf = [0; 8];
    let mut read = task::spawn(stream.read(&mut buf));
    assert_pending!(read.poll());
    assert_eq!(Handle::current().pending(), 0);
}

#[tokio::test(start_paused = true)]
async fn huge_timeouts_never_fire() {
    let (stream, _peer) = duplex(64);
    let mut stream = TimeoutStream::new(stream);
    stream.set_read_timeout(Some(Duration::MAX));
    stream.set_idle_timeout(Some(Duration::MAX));
    let mut buf = [0; 8];
    let mut read = task::spawn(stream.read(&mut buf));
    assert_pending!(read.poll());
    time::advance(secs(86_400 * 365)).await;
    assert_pending!(read.poll());
}

#[tokio::test(start_paused = true)]
async fn buf_read_is_guarded_as_a_read() {
    let (stream, mut peer) = duplex(64);
    peer.write_all(b"first line\nsecond").await.unwrap();
    let mut stream = TimeoutStream::new(BufReader::new(stream));
    stream.set_read_timeout(Some(secs(5)));
    let mut line = String::new();
    stream.read_line(&mut line).await.unwrap();
    assert_eq!(line, "first line\n");
    let start = Instant::now();
    let err = stream.read_line(&mut line).await.unwrap_err();
    assert_timed_out(&err, "read timeout of 5s elapsed");
    assert_eq!(start.elapsed(), secs(5));
}

#[tokio::test(start_paused = true)]
async fn seek_passes_through() {
    use tokio::io::AsyncSeekExt;
    let mut stream = TimeoutStream::new(std::io::Cursor::new(b"0123456789".to_vec()));
    stream.set_read_timeout(Some(secs(1)));
    stream.seek(io::SeekFrom::Start(6)).await.unwrap();
    let mut rest = String::new();
    stream.read_to_string(&mut rest).await.unwrap();
    assert_eq!(rest, "6789");
}

#[tokio::test(start_paused = true)]
async fn explicit_timer_fires_on_its_tick_never_early() {
    let timer = Timer::builder().tick(ms(10)).build();
    let (stream, _peer) = duplex(64);
    let mut stream = TimeoutStream::with_handle(stream, timer.handle());
    stream.set_read_timeout(Some(ms(5_003)));
    let start = Instant::now();
    stream.read(&mut [0; 8]).await.unwrap_err();
    // The first 10 ms tick at or after the deadline.
    assert_eq!(start.elapsed(), ms(5_010));
    assert_eq!(Handle::current().pending(), 0);
}

#[tokio::test(start_paused = true)]
async fn re_arming_on_every_event_reuses_the_timer_entries() {
    let handle = Handle::current();
    let (client, mut server) = duplex(64);
    let mut client = TimeoutStream::new(client);
    client.set_read_timeout(Some(secs(5)));
    client.set_write_timeout(Some(secs(5)));
    client.set_idle_timeout(Some(secs(30)));
    let echo = tokio::spawn(async move {
        let mut buf = [0; 16];
        loop {
            let n = server.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            time::sleep(ms(100)).await;
            server.write_all(&buf[..n]).await.unwrap();
        }
    });
    let mut buf = [0; 4];
    for i in 0u32..500 {
        client.write_all(&i.to_le_bytes()).await.unwrap();
        client.read_exact(&mut buf).await.unwrap();
        assert_eq!(u32::from_le_bytes(buf), i);
        // Read and idle (write never waits here): one entry each, reused;
        // plus the echo task's sleep.
        assert!(handle.pending() <= 3, "{} pending", handle.pending());
    }
    client.shutdown().await.unwrap();
    echo.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn accessors() {
    let (stream, _peer) = duplex(64);
    let mut stream = TimeoutStream::new(stream);
    assert_eq!(stream.read_timeout(), None);
    assert_eq!(stream.write_timeout(), None);
    assert_eq!(stream.idle_timeout(), None);
    assert_eq!(stream.deadline(), None);
    stream.set_read_timeout(Some(secs(1)));
    stream.set_write_timeout(Some(secs(2)));
    stream.set_idle_timeout(Some(secs(3)));
    assert_eq!(stream.read_timeout(), Some(secs(1)));
    assert_eq!(stream.write_timeout(), Some(secs(2)));
    assert_eq!(stream.idle_timeout(), Some(secs(3)));
    let debug = format!("{stream:?}");
    assert!(debug.contains("idle_timeout: Some(3s)"), "{debug}");
    let _: &tokio::io::DuplexStream = stream.get_ref();
    let _: &mut tokio::io::DuplexStream = stream.get_mut();
    let _: Pin<&mut tokio::io::DuplexStream> = Pin::new(&mut stream).get_pin_mut();
    let _: tokio::io::DuplexStream = stream.into_inner();
}

/// Hundreds of idle TCP connections, each closed by its idle timeout at
/// its deadline, none early: measured on the tokio clock, with a generous
/// upper bound for a busy machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_tcp_connections_close_at_their_deadline_none_early() {
    use tokio::net::{TcpListener, TcpStream};

    const CONNECTIONS: usize = 200;
    const IDLE: Duration = Duration::from_millis(300);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let mut conns = tokio::task::JoinSet::new();
        for _ in 0..CONNECTIONS {
            let (socket, _) = listener.accept().await.unwrap();
            conns.spawn(async move {
                let mut socket = TimeoutStream::new(socket);
                socket.set_idle_timeout(Some(IDLE));
                let start = Instant::now();
                let err = socket.read(&mut [0; 16]).await.unwrap_err();
                (start.elapsed(), err)
            });
        }
        conns.join_all().await
    });
    let mut clients = Vec::new();
    for _ in 0..CONNECTIONS {
        clients.push(TcpStream::connect(addr).await.unwrap());
    }
    let results = server.await.unwrap();
    assert_eq!(results.len(), CONNECTIONS);
    for (elapsed, err) in results {
        assert_timed_out(&err, "idle timeout of 300ms elapsed");
        assert!(elapsed >= IDLE, "closed early, after {elapsed:?}");
        assert!(elapsed < IDLE + secs(10), "closed late, after {elapsed:?}");
    }
    drop(clients);
}

/// Over real TCP, an active client is served while an idle one on the same
/// server is cut off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_active_connection_outlives_idle_timeout() {
    use tokio::net::{TcpListener, TcpStream};

    // Generous against a busy machine: the active client's 50 ms rounds
    // would have to stall for most of a second to look idle.
    const IDLE: Duration = Duration::from_millis(1000);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (socket, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let mut socket = TimeoutStream::new(socket);
                socket.set_idle_timeout(Some(IDLE));
                let mut buf = [0; 64];
                loop {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => socket.write_all(&buf[..n]).await.unwrap(),
                    }
                }
            });
        }
    });
    let mut idle = TcpStream::connect(addr).await.unwrap();
    let mut active = TcpStream::connect(addr).await.unwrap();
    let start = Instant::now();
    // The active client talks every 50 ms for well over the idle limit.
    let mut buf = [0; 4];
    for i in 0u32..40 {
        time::sleep(ms(50)).await;
        active.write_all(&i.to_le_bytes()).await.unwrap();
        active.read_exact(&mut buf).await.unwrap();
        assert_eq!(u32::from_le_bytes(buf), i);
    }
    assert!(start.elapsed() >= ms(2000));
    // The idle one was closed by the server: end of stream.
    assert_eq!(idle.read(&mut buf).await.unwrap(), 0);
}
