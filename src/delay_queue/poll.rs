//! How a [`DelayQueue`] waits: its timer (one [`Sleep`], reset in place
//! as the earliest bucket moves), deadlines turned into the timer's ticks,
//! and values polled out as they come due.

use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use crate::ticks::Ticks;
use crate::wheel::Polled;
use crate::{Handle, Instant, Sleep};

use super::{DelayQueue, Expired};

/// Most cascade steps (each moving a few dozen entries of a coarse bucket
/// into finer ones) one `poll_expired` takes before it yields.
const MAX_STEPS_PER_POLL: usize = 64;

/// The queue's timer: its handle, time base, and the one sleep.
pub(super) struct QueueTimer {
    pub(super) handle: Handle,
    ticks: Ticks,
    sleep: Sleep,
}

impl QueueTimer {
    pub(super) fn new(handle: Handle) -> QueueTimer {
        let ticks = *handle.shared.ticks();
        let sleep = handle.sleep_until(handle.shared.now());
        QueueTimer {
            handle,
            ticks,
            sleep,
        }
    }
}

impl<T> DelayQueue<T> {
    /// The queue's timer, looked up on first use.
    #[track_caller]
    pub(super) fn timer(&mut self) -> &mut QueueTimer {
        if self.timer.is_none() {
            self.timer = Some(QueueTimer::new(Handle::current()));
            self.catch_up();
        }
        self.timer.as_mut().expect("just set")
    }

    /// Brings the wheel's time up to the clock, so that what is filed next
    /// lands in fine buckets.
    pub(super) fn catch_up(&mut self) {
        if let Some(timer) = &self.timer {
            let now = timer.ticks.now_tick(timer.handle.shared.now());
            self.wheel.catch_up(now);
        }
    }

    /// The tick of a deadline `timeout` from now, clamped as by
    /// [`Handle::sleep`] when out of range.
    #[track_caller]
    pub(super) fn tick_after(&mut self, timeout: Duration) -> u64 {
        let timer = self.timer();
        let now = timer.handle.shared.now();
        let when = timer.ticks.clamp(now.checked_add(timeout), || now);
        timer.ticks.deadline_tick(when)
    }

    /// The tick of deadline `when`, clamped as by [`Handle::sleep_until`]
    /// when out of range.
    #[track_caller]
    pub(super) fn tick_of(&mut self, when: Instant) -> u64 {
        let timer = self.timer();
        let when = timer.ticks.clamp(Some(when), || timer.handle.shared.now());
        timer.ticks.deadline_tick(when)
    }

    /// Something was filed to come out of the wheel at tick `due_at`: if
    /// that is before the sleep would wake the poller, wake it now, so that
    /// its next poll sets the sleep earlier.
    pub(super) fn due_at(&mut self, due_at: u64) {
        if self.armed.is_none_or(|armed| due_at < armed) {
            if let Some(waker) = self.waker.take() {
                waker.wake();
            }
        }
    }

    /// The instant of a tick the queue filed (deadlines are clamped before
    /// filing, so it is representable).
    pub(super) fn instant_of(&self, tick: u64) -> Instant {
        let timer = self.timer.as_ref().expect("a filed entry implies a timer");
        timer.ticks.instant_of(tick)
    }

    /// Pulls out the next value whose deadline has been reached.
    ///
    /// Returns `Ready(Some(expired))` for such a value, `Pending` if values
    /// wait but none is due (the waker of `cx` is woken when one is, or
    /// when an insertion or reset makes one due sooner), and `Ready(None)`
    /// if the queue is empty (inserting afterwards makes it yield again, and
    /// wakes the last waker).
    ///
    /// Each call does a bounded amount of work and spends one unit of
    /// tokio's cooperative budget; with the budget spent it returns
    /// `Pending` and arranges to be polled again.
    ///
    /// # Panics
    ///
    /// If the queue's timer has shut down (a [`Timer`](crate::Timer) given
    /// to [`with_handle`](Self::with_handle) was dropped) while values wait;
    /// outside a runtime, for a queue on the default timer.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::future::poll_fn;
    /// use std::time::Duration;
    /// use tiered_timer::DelayQueue;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut queue = DelayQueue::new();
    /// queue.insert("second", Duration::from_secs(2));
    /// queue.insert("first", Duration::from_secs(1));
    /// let mut out = Vec::new();
    /// while let Some(expired) = poll_fn(|cx| queue.poll_expired(cx)).await {
    ///     out.push(expired.into_inner());
    /// }
    /// assert_eq!(out, ["first", "second"]);
    /// # }
    /// ```
    #[track_caller]
    pub fn poll_expired(&mut self, cx: &mut Context<'_>) -> Poll<Option<Expired<T>>> {
        if !self.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            self.waker = Some(cx.waker().clone());
        }
        if self.wheel.len() == 0 {
            // Whatever the sleep was set for, an insertion must wake us.
            self.armed = None;
            return Poll::Ready(None);
        }
        let coop = ready!(crate::rt::poll_proceed(cx));
        let poll = self.poll_due(cx);
        if poll.is_ready() {
            coop.made_progress();
        }
        poll.map(Some)
    }

    /// Hands out the next due value, or sets the sleep for the earliest
    /// bucket and waits.
    #[track_caller]
    fn poll_due(&mut self, cx: &mut Context<'_>) -> Poll<Expired<T>> {
        let mut steps = 0;
        loop {
            match self.wheel.poll_step(self.reached) {
                Polled::Due(index) => return Poll::Ready(self.take(index)),
                Polled::Busy => {
                    steps += 1;
                    if steps == MAX_STEPS_PER_POLL {
                        // A big coarse bucket is being moved down: carry on
                        // in the next poll, after the other tasks.
                        cx.waker().wake_by_ref();
                        return Poll::Pending;
                    }
                }
                Polled::Idle => {
                    let next = self
                        .wheel
                        .next_expiration()
                        .expect("every value in the queue is filed");
                    ready!(self.wait_until(next, cx));
                }
            }
        }
    }

    /// Sets the sleep for tick `next` and polls it; once it has fired,
    /// records the tick reached (by the clock: often later than `next`).
    #[track_caller]
    fn wait_until(&mut self, next: u64, cx: &mut Context<'_>) -> Poll<()> {
        if self.armed != Some(next) {
            let at = self.instant_of(next);
            let timer = self.timer();
            Pin::new(&mut timer.sleep).reset(at);
            self.armed = Some(next);
        }
        let timer = self.timer();
        ready!(timer.sleep.poll_elapsed(cx));
        let now = timer.handle.shared.now_tick();
        self.armed = None;
        self.reached = self.reached.max(next).max(now);
        Poll::Ready(())
    }
}

impl<T> futures_core::Stream for DelayQueue<T> {
    type Item = Expired<T>;

    /// As [`DelayQueue::poll_expired`]: `Ready(None)` when the queue is
    /// empty, and more items after a later insertion.
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Expired<T>>> {
        self.get_mut().poll_expired(cx)
    }
}
