//! Deadline guards for network I/O: [`TimeoutStream`].
//!
//! The most common timer in a network service is a deadline around I/O: a
//! read that must make progress within 5 s, a write to a peer that stopped
//! reading, an idle connection to close. [`TimeoutStream`] wraps any tokio
//! [`AsyncRead`] and/or [`AsyncWrite`] with four limits, each optional:
//!
//! | limit | armed | disarmed | error message |
//! |---|---|---|---|
//! | [read timeout](TimeoutStream::set_read_timeout) | a read returns `Pending` | a read returns `Ready` | `read timeout of 5s elapsed` |
//! | [write timeout](TimeoutStream::set_write_timeout) | a write, flush or shutdown returns `Pending` | one returns `Ready` | `write timeout of 5s elapsed` |
//! | [idle timeout](TimeoutStream::set_idle_timeout) | any operation returns `Pending` | any operation succeeds | `idle timeout of 30s elapsed` |
//! | [deadline](TimeoutStream::set_deadline) | set | changed or cleared | `stream deadline passed` |
//!
//! An expired limit fails the operation with [`io::ErrorKind::TimedOut`].
//!
//! ```
//! use std::time::Duration;
//! use tiered_timer::io::TimeoutStream;
//! use tokio::io::AsyncReadExt;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let (client, _server) = tokio::io::duplex(64);
//! let mut client = TimeoutStream::new(client);
//! client.set_read_timeout(Some(Duration::from_secs(5)));
//! // The server never writes: the read fails after 5 s.
//! let err = client.read(&mut [0; 16]).await.unwrap_err();
//! assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
//! assert_eq!(err.to_string(), "read timeout of 5s elapsed");
//! # }
//! ```

mod limits;

use std::fmt;
use std::io::{self, IoSlice, SeekFrom};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::io::{AsyncBufRead, AsyncRead, AsyncSeek, AsyncWrite, ReadBuf};

use crate::{Handle, Instant, Sleep};

use self::limits::{Direction, Limits};

pin_project! {
    /// A stream whose reads and writes fail with [`io::ErrorKind::TimedOut`]
    /// when they stall, when the stream is idle, or past a deadline.
    ///
    /// Wraps any `S`; implements [`AsyncRead`] when `S` does, [`AsyncWrite`]
    /// when `S` does, and passes [`AsyncBufRead`] and [`AsyncSeek`] through.
    /// It is [`Unpin`] when `S` is, so the setters take `&mut self` and need
    /// no pinning.
    ///
    /// # The limits
    ///
    /// * **Read timeout** ([`set_read_timeout`](Self::set_read_timeout)): a
    ///   stall detector, as in `tokio-io-timeout`. It is armed when a read
    ///   (`poll_read`, or `poll_fill_buf`) returns `Pending` while it is not
    ///   armed, and disarmed when one returns `Ready`. A read that waits
    ///   longer than the timeout fails. Reads that keep making progress,
    ///   however slowly, never time out.
    /// * **Write timeout** ([`set_write_timeout`](Self::set_write_timeout)):
    ///   the same for `poll_write`, `poll_write_vectored`, `poll_flush` and
    ///   `poll_shutdown`: a peer that stops reading makes writes fail.
    /// * **Idle timeout** ([`set_idle_timeout`](Self::set_idle_timeout)):
    ///   any successful operation, in either direction, disarms it; the next
    ///   operation that returns `Pending`, in either direction, arms it. So
    ///   the idle clock starts at the first `Pending` after a transfer, and
    ///   a read that waits while writes keep succeeding does not fail. (A
    ///   direction already waiting when the other one last transferred
    ///   re-arms when its old idle deadline passes, so in that case the
    ///   connection can stay idle up to twice the limit before it fails.)
    /// * **Deadline** ([`set_deadline`](Self::set_deadline)): an absolute
    ///   limit for the whole stream. Every operation checks it first, even
    ///   one the inner stream could complete at once, so a stream that is
    ///   always ready is cut off too (at the timer's next tick after the
    ///   deadline).
    ///
    /// # After a limit expires
    ///
    /// The operation that saw it returns `Err` with kind
    /// [`io::ErrorKind::TimedOut`] and a message naming the limit ("read
    /// timeout of 5s elapsed", "write timeout of 5s elapsed", "idle timeout
    /// of 30s elapsed", "stream deadline passed"). The stream itself stays
    /// usable:
    ///
    /// * an expired read, write or idle timeout is disarmed, and re-arms
    ///   (for its full length) on the next operation that returns `Pending`,
    ///   so a caller that chooses to retry waits the whole limit again;
    /// * once the deadline has passed, every operation fails with "stream
    ///   deadline passed" until [`set_deadline`](Self::set_deadline) moves or
    ///   clears it.
    ///
    /// # Cost
    ///
    /// The limits are [`Sleep`]s of this crate's timer, created on first
    /// need and reused: re-arming one is a reset to a later deadline, one
    /// atomic operation with no lock and no allocation, after one clock read
    /// per `Pending`. A successful operation only clears flags. With no
    /// limit set the wrapper is transparent: it adds a few branches and no
    /// timer work.
    ///
    /// The waker of the task that polled last is the one each limit wakes.
    /// Splitting the stream (with `tokio::io::split`) and driving the halves
    /// from two tasks works for the read and write timeouts; the idle
    /// timeout and the deadline then wake whichever half polled last, which
    /// fails its operation, as it should, but the other half only learns of
    /// it on its next poll.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::io::TimeoutStream;
    /// use tokio::io::{AsyncReadExt, AsyncWriteExt};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> std::io::Result<()> {
    /// let (client, mut server) = tokio::io::duplex(64);
    /// let mut client = TimeoutStream::new(client);
    /// client.set_read_timeout(Some(Duration::from_secs(5)));
    /// client.set_write_timeout(Some(Duration::from_secs(5)));
    /// client.set_idle_timeout(Some(Duration::from_secs(30)));
    ///
    /// client.write_all(b"ping").await?;
    /// let mut buf = [0; 4];
    /// server.read_exact(&mut buf).await?;
    /// server.write_all(b"pong").await?;
    /// client.read_exact(&mut buf).await?;
    /// assert_eq!(&buf, b"pong");
    /// # Ok(())
    /// # }
    /// ```
    pub struct TimeoutStream<S> {
        #[pin]
        inner: S,
        limits: Limits,
    }
}

impl<S> TimeoutStream<S> {
    /// Wraps `stream`, with no limit set, on the current runtime's default
    /// timer.
    ///
    /// Until a limit is set the wrapper is transparent.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime, or on one built without its time driver
    /// (`enable_time`). The panic reports the caller's location.
    ///
    /// # Examples
    ///
    /// ```
    /// use tiered_timer::io::TimeoutStream;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let (stream, _peer) = tokio::io::duplex(64);
    /// let stream = TimeoutStream::new(stream);
    /// assert_eq!(stream.read_timeout(), None);
    /// # }
    /// ```
    #[track_caller]
    pub fn new(stream: S) -> TimeoutStream<S> {
        TimeoutStream::with_handle(stream, Handle::current())
    }

    /// Wraps `stream`, with no limit set, on the timer of `handle`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::{io::TimeoutStream, Timer};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let timer = Timer::builder().tick(Duration::from_millis(10)).build();
    /// let (stream, _peer) = tokio::io::duplex(64);
    /// let mut stream = TimeoutStream::with_handle(stream, timer.handle());
    /// stream.set_idle_timeout(Some(Duration::from_secs(30)));
    /// # }
    /// ```
    pub fn with_handle(stream: S, handle: Handle) -> TimeoutStream<S> {
        TimeoutStream {
            inner: stream,
            limits: Limits::new(handle),
        }
    }

    /// Returns the read timeout: how long a read may wait without progress.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::io::TimeoutStream;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mut stream = TimeoutStream::new(tokio::io::empty());
    /// stream.set_read_timeout(Some(Duration::from_secs(5)));
    /// assert_eq!(stream.read_timeout(), Some(Duration::from_secs(5)));
    /// # }
    /// ```
    pub fn read_timeout(&self) -> Option<Duration> {
        self.limits.read.timeout
    }

    /// Sets the read timeout: a read (`poll_read` or `poll_fill_buf`) that
    /// waits this long without completing fails with
    /// [`io::ErrorKind::TimedOut`] ("read timeout of … elapsed"). `None`
    /// (the default) disables it.
    ///
    /// The timer starts when a read returns `Pending`, and stops when a read
    /// returns `Ready`. Changing the timeout while a read is waiting
    /// restarts the wait's clock now, with the new length.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::io::TimeoutStream;
    /// use tokio::io::AsyncReadExt;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let (stream, _silent_peer) = tokio::io::duplex(64);
    /// let mut stream = TimeoutStream::new(stream);
    /// stream.set_read_timeout(Some(Duration::from_secs(5)));
    /// let err = stream.read(&mut [0; 8]).await.unwrap_err();
    /// assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
    /// # }
    /// ```
    pub fn set_read_timeout(&mut self, timeout: Option<Duration>) {
        self.limits.read.set(&self.limits.handle, timeout);
    }

    /// Returns the write timeout: how long a write, flush or shutdown may
    /// wait without progress.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::io::TimeoutStream;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mut stream = TimeoutStream::new(tokio::io::sink());
    /// stream.set_write_timeout(Some(Duration::from_secs(5)));
    /// assert_eq!(stream.write_timeout(), Some(Duration::from_secs(5)));
    /// # }
    /// ```
    pub fn write_timeout(&self) -> Option<Duration> {
        self.limits.write.timeout
    }

    /// Sets the write timeout: a write (`poll_write`,
    /// `poll_write_vectored`), flush or shutdown that waits this long
    /// without completing fails with [`io::ErrorKind::TimedOut`] ("write
    /// timeout of … elapsed"). `None` (the default) disables it.
    ///
    /// This is what catches a peer that stopped reading: its receive window
    /// fills up and writes stay `Pending`. Changing the timeout while a
    /// write is waiting restarts the wait's clock now, with the new length.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::io::TimeoutStream;
    /// use tokio::io::AsyncWriteExt;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// // A 16-byte pipe whose other end never reads.
    /// let (stream, _not_reading) = tokio::io::duplex(16);
    /// let mut stream = TimeoutStream::new(stream);
    /// stream.set_write_timeout(Some(Duration::from_secs(5)));
    /// let err = stream.write_all(&[0; 64]).await.unwrap_err();
    /// assert_eq!(err.to_string(), "write timeout of 5s elapsed");
    /// # }
    /// ```
    pub fn set_write_timeout(&mut self, timeout: Option<Duration>) {
        self.limits.write.set(&self.limits.handle, timeout);
    }

    /// Returns the idle timeout: how long the stream may go without a
    /// successful operation in either direction.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::io::TimeoutStream;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mut stream = TimeoutStream::new(tokio::io::empty());
    /// stream.set_idle_timeout(Some(Duration::from_secs(60)));
    /// assert_eq!(stream.idle_timeout(), Some(Duration::from_secs(60)));
    /// # }
    /// ```
    pub fn idle_timeout(&self) -> Option<Duration> {
        self.limits.idle.timeout
    }

    /// Sets the idle timeout: an operation that waits while the stream has
    /// seen no successful read or write, in either direction, for this long
    /// fails with [`io::ErrorKind::TimedOut`] ("idle timeout of … elapsed").
    /// `None` (the default) disables it.
    ///
    /// Every successful operation re-arms it, lazily: the idle clock starts
    /// at the first operation that returns `Pending` after a transfer (see
    /// the [type's documentation](TimeoutStream#the-limits)). Changing it
    /// while armed restarts the idle clock now, with the new length.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::io::TimeoutStream;
    /// use tokio::io::AsyncReadExt;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let (stream, _idle_peer) = tokio::io::duplex(64);
    /// let mut stream = TimeoutStream::new(stream);
    /// stream.set_idle_timeout(Some(Duration::from_secs(30)));
    /// let err = stream.read(&mut [0; 8]).await.unwrap_err();
    /// assert_eq!(err.to_string(), "idle timeout of 30s elapsed");
    /// # }
    /// ```
    pub fn set_idle_timeout(&mut self, timeout: Option<Duration>) {
        self.limits.idle.set(&self.limits.handle, timeout);
    }

    /// Returns the absolute deadline of the whole stream, if one is set.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::{io::TimeoutStream, Instant};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mut stream = TimeoutStream::new(tokio::io::empty());
    /// let at = Instant::now() + Duration::from_secs(60);
    /// stream.set_deadline(Some(at));
    /// assert_eq!(stream.deadline(), Some(at));
    /// # }
    /// ```
    pub fn deadline(&self) -> Option<Instant> {
        self.limits.deadline.as_ref().map(Sleep::deadline)
    }

    /// Sets an absolute deadline for the whole stream: from the timer's
    /// first tick at or after `deadline`, every operation fails with
    /// [`io::ErrorKind::TimedOut`] ("stream deadline passed"), including
    /// ones the inner stream could complete at once, and keeps failing until
    /// the deadline is moved or cleared with this method. `None` (the
    /// default) clears it.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::{io::TimeoutStream, Instant};
    /// use tokio::io::AsyncReadExt;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// // An endless stream of zeros, cut off after 10 s.
    /// let mut stream = TimeoutStream::new(tokio::io::repeat(0));
    /// stream.set_deadline(Some(Instant::now() + Duration::from_secs(10)));
    /// let mut buf = [0; 1024];
    /// stream.read(&mut buf).await.unwrap();
    /// tokio::time::advance(Duration::from_secs(10)).await;
    /// let err = stream.read(&mut buf).await.unwrap_err();
    /// assert_eq!(err.to_string(), "stream deadline passed");
    /// # }
    /// ```
    pub fn set_deadline(&mut self, deadline: Option<Instant>) {
        let limits = &mut self.limits;
        match (deadline, &mut limits.deadline) {
            (None, slot) => *slot = None,
            (Some(at), Some(sleep)) => Pin::new(sleep).reset(at),
            (Some(at), slot @ None) => *slot = Some(limits.handle.sleep_until(at)),
        }
    }

    /// Returns a shared reference to the wrapped stream.
    ///
    /// # Examples
    ///
    /// ```
    /// use tiered_timer::io::TimeoutStream;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let stream = TimeoutStream::new(std::io::Cursor::new(vec![1, 2, 3]));
    /// assert_eq!(stream.get_ref().get_ref().len(), 3);
    /// # }
    /// ```
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// Returns a mutable reference to the wrapped stream.
    ///
    /// Reading or writing through it bypasses the limits.
    ///
    /// # Examples
    ///
    /// ```
    /// use tiered_timer::io::TimeoutStream;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mut stream = TimeoutStream::new(std::io::Cursor::new(vec![1, 2, 3]));
    /// stream.get_mut().set_position(2);
    /// assert_eq!(stream.get_ref().position(), 2);
    /// # }
    /// ```
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Returns a pinned mutable reference to the wrapped stream, for a
    /// stream that is not [`Unpin`].
    ///
    /// Reading or writing through it bypasses the limits.
    ///
    /// # Examples
    ///
    /// ```
    /// use tiered_timer::io::TimeoutStream;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mut stream = Box::pin(TimeoutStream::new(tokio::io::empty()));
    /// let _inner: std::pin::Pin<&mut tokio::io::Empty> = stream.as_mut().get_pin_mut();
    /// # }
    /// ```
    pub fn get_pin_mut(self: Pin<&mut Self>) -> Pin<&mut S> {
        self.project().inner
    }

    /// Unwraps the stream, dropping the limits (and their timer entries).
    ///
    /// # Examples
    ///
    /// ```
    /// use tiered_timer::io::TimeoutStream;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let stream = TimeoutStream::new(std::io::Cursor::new(vec![1, 2, 3]));
    /// assert_eq!(stream.into_inner().into_inner(), vec![1, 2, 3]);
    /// # }
    /// ```
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: AsyncRead> AsyncRead for TimeoutStream<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.project();
        let inner = this.inner;
        this.limits
            .guard(Direction::Read, cx, |cx| inner.poll_read(cx, buf))
    }
}

impl<S: AsyncWrite> AsyncWrite for TimeoutStream<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.project();
        let inner = this.inner;
        this.limits
            .guard(Direction::Write, cx, |cx| inner.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.project();
        let inner = this.inner;
        this.limits.guard(Direction::Write, cx, |cx| {
            inner.poll_write_vectored(cx, bufs)
        })
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.project();
        let inner = this.inner;
        this.limits
            .guard(Direction::Write, cx, |cx| inner.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.project();
        let inner = this.inner;
        this.limits
            .guard(Direction::Write, cx, |cx| inner.poll_shutdown(cx))
    }
}

impl<S: AsyncBufRead> AsyncBufRead for TimeoutStream<S> {
    /// Guarded as a read: the read timeout, the idle timeout and the
    /// deadline apply.
    fn poll_fill_buf(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<&[u8]>> {
        let this = self.project();
        let limits = this.limits;
        if let Err(err) = limits.check_deadline(cx) {
            return Poll::Ready(Err(err));
        }
        match this.inner.poll_fill_buf(cx) {
            Poll::Ready(result) => {
                limits.on_ready(Direction::Read, &result);
                Poll::Ready(result)
            }
            Poll::Pending => limits.on_pending(Direction::Read, cx),
        }
    }

    fn consume(self: Pin<&mut Self>, amt: usize) {
        self.project().inner.consume(amt);
    }
}

/// Passed through to the inner stream, with no limit.
impl<S: AsyncSeek> AsyncSeek for TimeoutStream<S> {
    fn start_seek(self: Pin<&mut Self>, position: SeekFrom) -> io::Result<()> {
        self.project().inner.start_seek(position)
    }

    fn poll_complete(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<u64>> {
        self.project().inner.poll_complete(cx)
    }
}

impl<S: fmt::Debug> fmt::Debug for TimeoutStream<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimeoutStream")
            .field("inner", &self.inner)
            .field("read_timeout", &self.limits.read.timeout)
            .field("write_timeout", &self.limits.write.timeout)
            .field("idle_timeout", &self.limits.idle.timeout)
            .field("deadline", &self.deadline())
            .finish()
    }
}
