//! An I/O guard re-armed on every event: `tiered_timer::io::TimeoutStream`
//! against `tokio_io_timeout::TimeoutStream`, and a bare stream for the
//! guard's own cost.
//!
//! Run with `cargo bench -p tiered-timer-benchmarks --bench io_guard` (ours
//! alone: `cargo bench --bench io_guard` at the workspace root).
//!
//! One round trip over an in-memory `tokio::io::duplex` pipe (8-byte
//! buffers), polled by hand so no scheduler noise is measured:
//!
//! 1. the guarded end reads: `Pending` (nothing sent yet), which arms the
//!    read limit (and ours, the idle limit);
//! 2. the peer writes 8 bytes; the guarded read completes (disarms);
//! 3. the guarded end writes 8 bytes (the pipe is then full), writes again:
//!    `Pending`, which arms the write limit (and idle again);
//! 4. the peer reads; the guarded write completes (disarms); the peer
//!    drains it.
//!
//! So every round trip re-arms each limit: two clock reads and resets to a
//! later deadline per guard. Ours carries read, write and idle timeouts;
//! tokio-io-timeout has no idle timeout, so it carries read and write.

use std::hint::black_box;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use tokio::io::{duplex, AsyncRead, AsyncWrite, DuplexStream, ReadBuf};

const TIMEOUT: Duration = Duration::from_secs(5);

fn round_trip<S: AsyncRead + AsyncWrite + Unpin>(
    guarded: &mut S,
    peer: &mut DuplexStream,
    cx: &mut Context<'_>,
) {
    let mut bytes = [0u8; 8];
    let mut guarded = Pin::new(guarded);
    let mut peer = Pin::new(peer);
    let mut buf = ReadBuf::new(&mut bytes);
    assert!(guarded.as_mut().poll_read(cx, &mut buf).is_pending());
    assert!(matches!(
        peer.as_mut().poll_write(cx, b"request!"),
        Poll::Ready(Ok(8))
    ));
    assert!(matches!(
        guarded.as_mut().poll_read(cx, &mut buf),
        Poll::Ready(Ok(()))
    ));
    assert_eq!(black_box(buf.filled()).len(), 8);
    assert!(matches!(
        guarded.as_mut().poll_write(cx, b"reply 1!"),
        Poll::Ready(Ok(8))
    ));
    assert!(guarded.as_mut().poll_write(cx, b"reply 2!").is_pending());
    let mut buf = ReadBuf::new(&mut bytes);
    assert!(matches!(
        peer.as_mut().poll_read(cx, &mut buf),
        Poll::Ready(Ok(()))
    ));
    assert!(matches!(
        guarded.as_mut().poll_write(cx, b"reply 2!"),
        Poll::Ready(Ok(8))
    ));
    let mut buf = ReadBuf::new(&mut bytes);
    assert!(matches!(
        peer.as_mut().poll_read(cx, &mut buf),
        Poll::Ready(Ok(()))
    ));
}

fn io_guard(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let _entered = runtime.enter();
    let mut cx = Context::from_waker(Waker::noop());
    let mut group = c.benchmark_group("io_guard_round_trip");

    group.bench_function("bare_duplex", |b| {
        let (mut guarded, mut peer) = duplex(8);
        b.iter(|| round_trip(&mut guarded, &mut peer, &mut cx));
    });

    group.bench_function("tiered_timer_read_write_idle", |b| {
        let (guarded, mut peer) = duplex(8);
        let mut guarded = tiered_timer::io::TimeoutStream::new(guarded);
        guarded.set_read_timeout(Some(TIMEOUT));
        guarded.set_write_timeout(Some(TIMEOUT));
        guarded.set_idle_timeout(Some(TIMEOUT * 6));
        b.iter(|| round_trip(&mut guarded, &mut peer, &mut cx));
    });

    group.bench_function("tiered_timer_read_write", |b| {
        let (guarded, mut peer) = duplex(8);
        let mut guarded = tiered_timer::io::TimeoutStream::new(guarded);
        guarded.set_read_timeout(Some(TIMEOUT));
        guarded.set_write_timeout(Some(TIMEOUT));
        b.iter(|| round_trip(&mut guarded, &mut peer, &mut cx));
    });

    group.bench_function("tokio_io_timeout_read_write", |b| {
        let (guarded, mut peer) = duplex(8);
        let mut guarded = tokio_io_timeout::TimeoutStream::new(guarded);
        guarded.set_read_timeout(Some(TIMEOUT));
        guarded.set_write_timeout(Some(TIMEOUT));
        // `!Unpin`: it must be pinned, and boxed to be moved around.
        let mut guarded = Box::pin(guarded);
        b.iter(|| round_trip(&mut guarded, &mut peer, &mut cx));
    });

    group.finish();
}

criterion_group!(benches, io_guard);
criterion_main!(benches);
