//! `DelayQueue` under tokio's paused clock, in the style of tokio-util's own
//! tests (`tokio_test::task::spawn`, `poll_expired`, `is_woken`), plus the
//! cases where it goes beyond tokio-util's: far deadlines, every key state,
//! stale keys, the cooperative budget, explicit timers.

#![cfg(not(loom))]

mod support;

use std::future::poll_fn;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use futures_core::Stream;
use tiered_timer::clock::ManualClock;
use tiered_timer::delay_queue::{Expired, Key};
use tiered_timer::{DelayQueue, Instant, Interval, Timer};
use tokio::time;
use tokio_test::{assert_pending, assert_ready, task};

use support::{ms, panic_message};

macro_rules! poll {
    ($queue:ident) => {
        $queue.enter(|cx, mut queue| queue.poll_expired(cx))
    };
}

macro_rules! assert_ready_some {
    ($e:expr) => {
        assert_ready!($e).expect("a value, not the end of the queue")
    };
}

macro_rules! assert_ready_value {
    ($queue:ident) => {
        assert_ready_some!(poll!($queue)).into_inner()
    };
}

/// Polls until `Pending`, returning the values in the order they came out.
fn drain<T>(queue: &mut task::Spawn<DelayQueue<T>>) -> Vec<Expired<T>> {
    let mut out = Vec::new();
    while let Poll::Ready(Some(expired)) = poll!(queue) {
        out.push(expired);
    }
    out
}

#[tokio::test(start_paused = true)]
async fn single_immediate_delay() {
    let mut queue = task::spawn(DelayQueue::new());
    let key = queue.insert_at("foo", Instant::now());
    let expired = assert_ready_some!(poll!(queue));
    assert_eq!(*expired.get_ref(), "foo");
    assert_eq!(expired.key(), key);
    assert!(assert_ready!(poll!(queue)).is_none());
}

#[tokio::test(start_paused = true)]
async fn single_short_delay_is_never_early() {
    let mut queue = task::spawn(DelayQueue::new());
    let start = Instant::now();
    queue.insert_at("foo", start + ms(5));
    assert_pending!(poll!(queue));

    time::advance(ms(4)).await;
    assert!(!queue.is_woken());
    assert_pending!(poll!(queue));

    time::advance(ms(1)).await;
    assert!(queue.is_woken());
    let expired = assert_ready_some!(poll!(queue));
    assert_eq!(*expired.get_ref(), "foo");
    assert!(expired.deadline() >= start + ms(5));
    assert!(Instant::now() >= expired.deadline());
    assert!(assert_ready!(poll!(queue)).is_none());
}

#[tokio::test(start_paused = true)]
async fn values_come_out_in_deadline_order() {
    let mut queue = task::spawn(DelayQueue::new());
    let start = Instant::now();
    for (value, delay) in [(3, 30), (1, 10), (5, 50), (2, 20), (4, 40)] {
        queue.insert_at(value, start + ms(delay));
    }
    assert_pending!(poll!(queue));
    let mut out = Vec::new();
    for _ in 0..50 {
        time::advance(ms(1)).await;
        for expired in drain(&mut queue) {
            assert!(Instant::now() >= start + ms(expired.get_ref() * 10));
            out.push(expired.into_inner());
        }
    }
    assert_eq!(out, [1, 2, 3, 4, 5]);
}

#[tokio::test(start_paused = true)]
async fn insert_before_the_first_wakes_the_poller() {
    let mut queue = task::spawn(DelayQueue::new());
    let start = Instant::now();
    queue.insert_at("later", start + ms(10));
    assert_pending!(poll!(queue));
    queue.insert_at("sooner", start + ms(5));
    assert!(queue.is_woken(), "the sleep must be set earlier");
    assert_pending!(poll!(queue));
    time::advance(ms(5)).await;
    assert!(queue.is_woken());
    assert_eq!(assert_ready_value!(queue), "sooner");
    assert_pending!(poll!(queue));
    time::advance(ms(5)).await;
    assert_eq!(assert_ready_value!(queue), "later");
}

#[tokio::test(start_paused = true)]
async fn insert_after_the_first_does_not_wake() {
    let mut queue = task::spawn(DelayQueue::new());
    queue.insert("first", ms(5));
    assert_pending!(poll!(queue));
    queue.insert("second", ms(10));
    assert!(!queue.is_woken());
}

#[tokio::test(start_paused = true)]
async fn insert_into_an_empty_polled_queue_wakes() {
    let mut queue = task::spawn(DelayQueue::new());
    assert!(assert_ready!(poll!(queue)).is_none());
    queue.insert("foo", ms(5));
    assert!(queue.is_woken());
    assert_pending!(poll!(queue));
    time::advance(ms(5)).await;
    assert_eq!(assert_ready_value!(queue), "foo");
}

#[tokio::test(start_paused = true)]
async fn reset_earlier_and_later() {
    let mut queue = task::spawn(DelayQueue::new());
    let start = Instant::now();
    let key = queue.insert_at("foo", start + ms(20));
    assert_pending!(poll!(queue));
    queue.reset_at(&key, start + ms(10));
    assert!(queue.is_woken());
    assert_pending!(poll!(queue));
    queue.reset_at(&key, start + ms(30));
    assert_pending!(poll!(queue));
    time::advance(ms(29)).await;
    assert_pending!(poll!(queue));
    time::advance(ms(1)).await;
    let expired = assert_ready_some!(poll!(queue));
    assert!(expired.deadline() >= start + ms(30));
}

#[tokio::test(start_paused = true)]
async fn remove_and_reset_a_value_that_is_due_but_not_polled_out() {
    let mut queue = task::spawn(DelayQueue::new());
    let first = queue.insert("a", ms(5));
    let second = queue.insert("b", ms(5));
    assert_pending!(poll!(queue));
    time::advance(ms(10)).await;
    assert!(queue.is_woken());
    // Both are due; neither has been polled out.
    assert_eq!(queue.remove(&first).into_inner(), "a");
    queue.reset(&second, ms(10));
    assert_pending!(poll!(queue), "a reset value waits again");
    time::advance(ms(10)).await;
    assert_eq!(assert_ready_value!(queue), "b");
    assert!(assert_ready!(poll!(queue)).is_none());
}

#[tokio::test(start_paused = true)]
async fn removing_the_last_value_wakes_a_stream_consumer() {
    let mut queue = task::spawn(DelayQueue::new());
    let key = queue.insert("foo", ms(5));
    assert_pending!(queue.enter(|cx, queue| queue.poll_next(cx)));
    queue.remove(&key);
    assert!(queue.is_woken());
    assert!(assert_ready!(queue.enter(|cx, queue| queue.poll_next(cx))).is_none());
}

#[tokio::test(start_paused = true)]
async fn stale_keys_never_alias_a_later_value() {
    let mut queue = DelayQueue::new();
    // Removed.
    let removed = queue.insert("a", ms(5));
    queue.remove(&removed);
    let reused = queue.insert("b", ms(5));
    assert_ne!(removed, reused);
    assert!(queue.try_remove(&removed).is_none());
    // Polled out.
    let polled = queue.insert("c", ms(1));
    time::advance(ms(1)).await;
    let out: Vec<_> = std::iter::from_fn(|| {
        let waker = std::task::Waker::noop();
        match queue.poll_expired(&mut std::task::Context::from_waker(waker)) {
            Poll::Ready(Some(expired)) => Some(expired.into_inner()),
            _ => None,
        }
    })
    .collect();
    assert_eq!(out, ["c"]);
    let _later = queue.insert("d", ms(5));
    assert!(queue.try_remove(&polled).is_none());
    // Cleared.
    queue.clear();
    let _after_clear = queue.insert("e", ms(5));
    assert!(queue.try_remove(&reused).is_none());
    assert_eq!(queue.len(), 1);

    for (what, call) in [
        (
            "remove",
            Box::new(|q: &mut DelayQueue<&str>| {
                q.remove(&removed);
            }) as Box<dyn Fn(&mut DelayQueue<&str>)>,
        ),
        (
            "reset",
            Box::new(|q: &mut DelayQueue<&str>| q.reset(&removed, ms(1))),
        ),
        (
            "reset_at",
            Box::new(|q: &mut DelayQueue<&str>| q.reset_at(&removed, Instant::now())),
        ),
        (
            "deadline",
            Box::new(|q: &mut DelayQueue<&str>| {
                q.deadline(&removed);
            }),
        ),
    ] {
        let panic = catch_unwind(AssertUnwindSafe(|| call(&mut queue))).expect_err(what);
        let message = panic_message(&*panic);
        assert!(
            message.contains(&format!("DelayQueue::{what}"))
                && message.contains("no longer in the queue"),
            "{what}: {message}"
        );
    }
    assert_eq!(queue.len(), 1, "a stale key touched another value");
}

#[tokio::test(start_paused = true)]
async fn far_deadlines_are_filed_and_never_panic() {
    let mut queue = task::spawn(DelayQueue::new());
    let start = Instant::now();
    // tokio-util panics past 2^36 ms (about 2.2 years) from its creation.
    let three_years = Duration::from_secs(3 * 365 * 86_400);
    let key = queue.insert("three years", three_years);
    assert!(queue.deadline(&key) >= start + three_years);
    // Unrepresentable: clamped to about 30 years, like sleep(Duration::MAX).
    let never = queue.insert("duration max", Duration::MAX);
    let thirty_years = Duration::from_secs(30 * 365 * 86_400);
    assert!(queue.deadline(&never) >= start + thirty_years);
    assert!(queue.deadline(&never) < start + thirty_years + Duration::from_secs(86_400));
    let reset = queue.insert("reset to max", ms(1));
    queue.reset(&reset, Duration::MAX);

    assert_pending!(poll!(queue));
    time::advance(three_years - ms(1)).await;
    assert_pending!(poll!(queue));
    time::advance(ms(1)).await;
    assert_eq!(assert_ready_value!(queue), "three years");
    assert_pending!(poll!(queue));
    time::advance(thirty_years).await;
    let mut rest: Vec<_> = drain(&mut queue)
        .into_iter()
        .map(Expired::into_inner)
        .collect();
    rest.sort_unstable();
    assert_eq!(rest, ["duration max", "reset to max"]);
}

#[tokio::test(start_paused = true)]
async fn instants_beyond_the_timers_range_are_clamped_not_panicking() {
    let mut queue = DelayQueue::new();
    let start = Instant::now();
    // Some 146 billion years: far past the default timer's last tick (146
    // million years away), though `Instant` can hold it.
    let Some(beyond) = start.checked_add(Duration::from_secs(1 << 62)) else {
        return; // an `Instant` that cannot hold it is the `Duration::MAX` case
    };
    let thirty_years = Duration::from_secs(30 * 365 * 86_400);
    let key = queue.insert_at("beyond", beyond);
    assert!(queue.deadline(&key) >= start + thirty_years);
    assert!(queue.deadline(&key) < start + thirty_years + Duration::from_secs(86_400));
    let other = queue.insert("soon", ms(1));
    queue.reset_at(&other, beyond);
    assert_eq!(queue.deadline(&other), queue.deadline(&key));
    // Far but within range: filed where it was asked, no clamp.
    let far = start + Duration::from_secs(1 << 40);
    let kept = queue.insert_at("35 000 years", far);
    assert!(queue.deadline(&kept) >= far);
    assert!(queue.deadline(&kept) < far + ms(1));
}

#[tokio::test(start_paused = true)]
async fn reserving_past_the_limit_panics_with_a_clear_message() {
    let mut queue: DelayQueue<u8> = DelayQueue::new();
    let panic = catch_unwind(AssertUnwindSafe(|| queue.reserve(usize::MAX))).unwrap_err();
    let message = panic_message(&*panic);
    assert!(message.contains("DelayQueue::reserve"), "{message}");
    queue.insert(1, ms(1));
    assert_eq!(queue.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn auto_advance_reaches_a_clamped_deadline() {
    let mut queue = DelayQueue::new();
    queue.insert("never, really", Duration::MAX);
    let start = Instant::now();
    let expired = poll_fn(|cx| queue.poll_expired(cx)).await.unwrap();
    assert_eq!(expired.into_inner(), "never, really");
    assert!(start.elapsed() >= Duration::from_secs(30 * 365 * 86_400));
}

#[tokio::test(start_paused = true)]
async fn past_deadlines_come_out_at_once_in_reported_order() {
    let mut queue = task::spawn(DelayQueue::new());
    let start = Instant::now();
    queue.insert_at("due", start + ms(1));
    time::advance(ms(5)).await;
    let past = start - ms(100);
    let key = queue.insert_at("long past", past);
    // Filed at the queue's time, never before the deadline given.
    assert!(queue.deadline(&key) >= past);
    let out = drain(&mut queue);
    assert_eq!(out.len(), 2);
    assert!(out[0].deadline() <= out[1].deadline());
    assert!(out
        .iter()
        .all(|expired| expired.deadline() <= Instant::now()));
}

#[tokio::test(start_paused = true)]
async fn poll_expired_spends_the_cooperative_budget() {
    let mut queue = DelayQueue::new();
    for i in 0..10_000 {
        queue.insert(i, ms(1));
    }
    time::advance(ms(2)).await;
    // One poll of this task: tokio's budget (128) runs out long before the
    // 10 000 due values, so the task yields and its neighbours run.
    let (handed_out, pending) = poll_fn(|cx| {
        let mut n = 0;
        loop {
            match queue.poll_expired(cx) {
                Poll::Ready(Some(_)) => n += 1,
                Poll::Ready(None) => return Poll::Ready((n, false)),
                Poll::Pending => return Poll::Ready((n, true)),
            }
        }
    })
    .await;
    assert!(pending, "the budget never ran out");
    assert!(
        (1..=128).contains(&handed_out),
        "{handed_out} in one budget"
    );
    // The rest come out over later turns.
    let mut rest = 0;
    while poll_fn(|cx| queue.poll_expired(cx)).await.is_some() {
        rest += 1;
    }
    assert_eq!(handed_out + rest, 10_000);
}

/// Counts its wakes.
struct CountingWaker(std::sync::atomic::AtomicUsize);

impl std::task::Wake for CountingWaker {
    fn wake(self: std::sync::Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

#[tokio::test(start_paused = true)]
async fn a_big_coarse_bucket_is_moved_down_over_several_polls() {
    let mut queue = DelayQueue::new();
    // An hour out, 100 000 values share one coarse bucket; when it comes
    // due they are moved into finer ones, a bounded number per poll.
    let far = Instant::now() + Duration::from_secs(3600);
    for i in 0..100_000u64 {
        queue.insert_at(i, far + Duration::from_micros(i * 10));
    }
    time::advance(Duration::from_secs(3602)).await;
    let wakes = std::sync::Arc::new(CountingWaker(Default::default()));
    let waker = std::task::Waker::from(wakes.clone());
    let mut cx = std::task::Context::from_waker(&waker);
    // Outside tokio's budget, to see the queue's own bound.
    let (out, yields) = tokio::task::unconstrained(async {
        let (mut out, mut yields) = (0u64, 0u64);
        loop {
            let before = wakes.0.load(std::sync::atomic::Ordering::Relaxed);
            match queue.poll_expired(&mut cx) {
                Poll::Ready(Some(expired)) => {
                    assert_eq!(expired.into_inner(), out, "in deadline order");
                    out += 1;
                }
                Poll::Ready(None) => break,
                Poll::Pending => {
                    // Everything is due: a `Pending` is the queue yielding
                    // mid-bucket, and it must have asked to be polled again.
                    let after = wakes.0.load(std::sync::atomic::Ordering::Relaxed);
                    assert!(after > before, "yielded without a wake-up");
                    yields += 1;
                }
            }
        }
        (out, yields)
    })
    .await;
    assert_eq!(out, 100_000);
    assert!(yields >= 1, "a 100 000-value bucket moved down in one poll");
}

#[tokio::test]
async fn an_explicit_timer_with_a_manual_clock_and_a_coarse_tick() {
    let clock = ManualClock::new();
    let timer = Timer::builder().clock(clock.clone()).tick(ms(10)).build();
    let mut queue = task::spawn(DelayQueue::with_handle(&timer.handle()));
    let start = timer.handle().now();
    queue.insert_at("a", start + ms(15));
    assert_pending!(poll!(queue));
    clock.advance(ms(15));
    // The deadline has passed, but the coarse tick's boundary (20 ms
    // from the timer's origin at the earliest) may not have: never early,
    // at most one tick late.
    clock.advance(ms(10));
    tokio::task::yield_now().await;
    assert!(queue.is_woken());
    let expired = assert_ready_some!(poll!(queue));
    assert!(expired.deadline() >= start + ms(15));
    assert!(expired.deadline() < start + ms(25));
}

#[tokio::test(start_paused = true)]
async fn peek_names_the_next_value_out() {
    let mut queue = task::spawn(DelayQueue::new());
    assert_eq!(queue.peek(), None);
    queue.insert("foo", ms(10));
    let bar = queue.insert("bar", ms(5));
    queue.insert("baz", ms(15));
    assert_eq!(queue.peek(), Some(bar));
    time::advance(ms(5)).await;
    let expired = assert_ready_some!(poll!(queue));
    assert_eq!(expired.key(), bar);
}

#[tokio::test(start_paused = true)]
async fn capacity_reserve_shrink_and_compact_keep_keys() {
    let mut queue = DelayQueue::with_capacity(8);
    assert!(queue.capacity() >= 8);
    let keys: Vec<Key> = (0..1_000).map(|i| queue.insert(i, ms(i + 1))).collect();
    for key in &keys[2..] {
        queue.remove(key);
    }
    queue.shrink_to_fit();
    assert!(queue.capacity() <= 2, "capacity {}", queue.capacity());
    queue.compact();
    assert_eq!(queue.remove(&keys[1]).into_inner(), 1);
    queue.reserve(100);
    assert!(queue.capacity() >= 101);
    assert_eq!(queue.remove(&keys[0]).into_inner(), 0);
    assert!(queue.is_empty());
}

#[tokio::test(start_paused = true)]
async fn interval_is_a_stream() {
    let start = Instant::now();
    let mut ticks = task::spawn(tiered_timer::interval(ms(10)));
    assert_eq!(
        assert_ready!(ticks.enter(|cx, ticks| ticks.poll_next(cx))),
        Some(start)
    );
    assert_pending!(ticks.enter(|cx, ticks| ticks.poll_next(cx)));
    time::advance(ms(10)).await;
    assert!(ticks.is_woken());
    assert_eq!(
        assert_ready!(ticks.enter(|cx, ticks| ticks.poll_next(cx))),
        Some(start + ms(10))
    );
}

#[test]
fn new_works_outside_a_runtime() {
    let queue: DelayQueue<u8> = DelayQueue::new();
    assert!(queue.is_empty());
    assert!(format!("{queue:?}").contains("DelayQueue"));
}

#[test]
fn auto_traits() {
    fn send_sync_unpin<T: Send + Sync + Unpin>() {}
    fn unpin<T: Unpin>() {}
    send_sync_unpin::<DelayQueue<u64>>();
    send_sync_unpin::<Key>();
    send_sync_unpin::<Expired<u64>>();
    send_sync_unpin::<Interval>();
    // Unpin even when the value is not.
    unpin::<DelayQueue<std::marker::PhantomPinned>>();
    let _ = Pin::new(&mut DelayQueue::<std::marker::PhantomPinned>::new());
}
