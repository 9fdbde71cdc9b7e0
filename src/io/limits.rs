//! What a [`TimeoutStream`](super::TimeoutStream) keeps beside its stream:
//! the read, write and idle limits and the deadline, each a reusable
//! [`Sleep`], armed when an operation returns `Pending` and disarmed when
//! one makes progress.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::ticks::far_future;
use crate::{Handle, Instant, Sleep};

/// The timer state of a [`TimeoutStream`](super::TimeoutStream), apart from the pinned stream.
pub(super) struct Limits {
    pub(super) handle: Handle,
    pub(super) read: Limit,
    pub(super) write: Limit,
    pub(super) idle: Limit,
    pub(super) deadline: Option<Sleep>,
}

/// One stall or idle limit: its length, its sleep (created on first need
/// and then reused) and whether it is armed.
#[derive(Default)]
pub(super) struct Limit {
    pub(super) timeout: Option<Duration>,
    sleep: Option<Sleep>,
    armed: bool,
}

/// Which direction an operation belongs to.
#[derive(Clone, Copy)]
pub(super) enum Direction {
    Read,
    Write,
}

impl Limit {
    pub(super) fn set(&mut self, handle: &Handle, timeout: Option<Duration>) {
        self.timeout = timeout;
        if timeout.is_none() {
            // Nothing to fire: give the timer entry back.
            self.sleep = None;
            self.armed = false;
        } else if self.armed {
            // An operation is waiting: restart its clock now, with the new
            // length (its task stays registered with the sleep).
            self.armed = false;
            self.arm(handle, handle.shared.now());
        }
    }

    /// Whether arming it needs a clock read.
    #[inline]
    fn needs_arming(&self) -> bool {
        self.timeout.is_some() && !self.armed
    }

    /// Arms it to expire `timeout` after `now`, reusing its sleep: a reset
    /// to a later deadline, which takes no lock.
    #[inline]
    fn arm(&mut self, handle: &Handle, now: Instant) {
        let Some(timeout) = self.timeout else { return };
        if self.armed {
            return;
        }
        self.armed = true;
        match (&mut self.sleep, now.checked_add(timeout)) {
            (Some(sleep), Some(deadline)) => Pin::new(sleep).reset(deadline),
            (Some(sleep), None) => Pin::new(sleep).reset(far_future(now)),
            (None, _) => self.sleep = Some(handle.sleep_from(now, timeout)),
        }
    }

    /// Polls an armed limit: `Ready` once it has expired (and then it is
    /// disarmed).
    #[inline]
    fn poll_expired(&mut self, cx: &mut Context<'_>) -> Poll<Duration> {
        match (self.armed, &mut self.sleep, self.timeout) {
            (true, Some(sleep), Some(timeout)) => {
                if sleep.poll_elapsed(cx).is_ready() {
                    self.armed = false;
                    Poll::Ready(timeout)
                } else {
                    Poll::Pending
                }
            }
            _ => Poll::Pending,
        }
    }
}

impl Limits {
    pub(super) fn new(handle: Handle) -> Limits {
        Limits {
            handle,
            read: Limit::default(),
            write: Limit::default(),
            idle: Limit::default(),
            deadline: None,
        }
    }

    #[inline]
    fn limit(&mut self, direction: Direction) -> &mut Limit {
        match direction {
            Direction::Read => &mut self.read,
            Direction::Write => &mut self.write,
        }
    }

    /// Fails if the deadline has passed; otherwise registers the task to be
    /// woken when it does.
    #[inline]
    pub(super) fn check_deadline(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        match &mut self.deadline {
            Some(sleep) => match sleep.poll_elapsed(cx) {
                Poll::Ready(()) => Err(deadline_passed()),
                Poll::Pending => Ok(()),
            },
            None => Ok(()),
        }
    }

    /// Accounts for an operation in `direction` that returned `Ready`.
    #[inline]
    pub(super) fn on_ready<T>(&mut self, direction: Direction, result: &io::Result<T>) {
        self.limit(direction).armed = false;
        if result.is_ok() {
            self.idle.armed = false;
        }
    }

    /// Accounts for an operation in `direction` that returned `Pending`:
    /// arms its limit and the idle limit if they are not armed (with one
    /// clock read for both), and fails if either has expired.
    pub(super) fn on_pending<T>(
        &mut self,
        direction: Direction,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<T>> {
        if self.limit(direction).needs_arming() || self.idle.needs_arming() {
            // (No `observe`: these deadlines are all in the future.)
            let now = self.handle.shared.now();
            let handle = &self.handle;
            match direction {
                Direction::Read => self.read.arm(handle, now),
                Direction::Write => self.write.arm(handle, now),
            }
            self.idle.arm(handle, now);
        }
        if let Poll::Ready(timeout) = self.limit(direction).poll_expired(cx) {
            let what = match direction {
                Direction::Read => "read",
                Direction::Write => "write",
            };
            return Poll::Ready(Err(timed_out(what, timeout)));
        }
        if let Poll::Ready(timeout) = self.idle.poll_expired(cx) {
            return Poll::Ready(Err(timed_out("idle", timeout)));
        }
        Poll::Pending
    }

    /// Runs one guarded operation in `direction`.
    pub(super) fn guard<T>(
        &mut self,
        direction: Direction,
        cx: &mut Context<'_>,
        op: impl FnOnce(&mut Context<'_>) -> Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        self.check_deadline(cx)?;
        match op(cx) {
            Poll::Ready(result) => {
                self.on_ready(direction, &result);
                Poll::Ready(result)
            }
            Poll::Pending => self.on_pending(direction, cx),
        }
    }
}

#[cold]
fn deadline_passed() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "stream deadline passed")
}

#[cold]
fn timed_out(what: &str, timeout: Duration) -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!("{what} timeout of {timeout:?} elapsed"),
    )
}
