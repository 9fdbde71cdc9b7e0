//! [`DelayQueue`]: values that come out at their deadlines, a drop-in for
//! `tokio_util::time::DelayQueue`.
//!
//! # Design
//!
//! The queue owns a timing wheel of its own (the crate's pure core, which
//! the timers use too): no lock, no driver task, no sharing. Its owner's
//! calls move it: `insert`, `reset` and `remove` file and unfile entries in
//! O(1), and [`DelayQueue::poll_expired`] hands out what is due. To be
//! woken, the queue keeps **one** [`Sleep`](crate::Sleep) of this crate
//! (see `poll.rs`), set to the start of the wheel's earliest bucket and reset in
//! place as that moves; its timer (the current runtime's default timer, or
//! the one given to [`DelayQueue::with_handle`]) supplies the clock and the
//! tick, so tokio's paused time, a [`ManualClock`](crate::clock::ManualClock)
//! or a coarse tick apply to the queue as to any sleep.
//!
//! Time is the timer's ticks: a deadline is rounded *up* to a tick, "now"
//! *down*, so a value never comes out before its deadline. A deadline the
//! wheel's time has already passed is filed at the wheel's time: it is due at
//! once, and comes out after the values already due, which keeps the values
//! in the order of their reported [`Expired::deadline`]s.
//!
//! # Keys
//!
//! A [`Key`] is a slab index plus a stamp, a 64-bit count of the queue's
//! insertions, kept in the entry. A key whose value has left the queue
//! (polled out, removed, cleared) never matches again, even once its slot
//! holds another value: the stamps differ.

mod expired;
mod poll;

use std::fmt;
use std::task::Waker;
use std::time::Duration;

use crate::timer::DEFAULT_WHEEL_SIZE;
use crate::wheel::{self, Wheel};
use crate::{Handle, Instant};

pub use self::expired::{Expired, Key};
use self::poll::QueueTimer;

// Ground rules: everything is behind `&mut self`; the queue is plain data
// plus one `Sleep`. The only other party is the timer's driver, which wakes
// that sleep's waker; the queue touches the timer's locks only through the
// `Sleep` (resetting it earlier, or after it fired, takes its shard's lock
// once). The queue's own waker is woken only from `&mut self` methods, never
// with a lock held.

/// A queue of values that come out once their deadlines are reached.
///
/// Insert a value with a deadline and get a [`Key`]; remove it or move its
/// deadline by that key; poll the values out, each once, as they expire,
/// with [`poll_expired`](DelayQueue::poll_expired) or as a
/// [`Stream`](futures_core::Stream). The API is that of
/// `tokio_util::time::DelayQueue` (0.7): switching is a change of imports.
///
/// Beyond tokio-util's:
///
/// * **Never early, in order.** A value comes out at the first tick of the
///   queue's timer (250 µs for the default timer) at or after its
///   deadline, never before, each exactly once unless removed. Values come
///   out in the order of their deadlines' ticks.
/// * **Any deadline.** There is no range limit: a deadline years away is
///   filed like any other. A deadline too far for an [`Instant`] (such as
///   `insert(v, Duration::MAX)`) is clamped to about 30 years from now,
///   as `tokio::time::sleep(Duration::MAX)` is. Nothing panics.
/// * **Every key state is defined** (see [`remove`](DelayQueue::remove)):
///   a value that is due but not yet polled out can still be removed or
///   reset, and a key whose value has left the queue never names another
///   value: [`try_remove`](DelayQueue::try_remove) returns `None` and
///   [`remove`](DelayQueue::remove) panics saying so.
/// * **Memory comes back.** [`shrink_to_fit`](DelayQueue::shrink_to_fit)
///   returns the room past the highest live entry without moving any, so
///   every key stays valid; a queue that empties returns its slab by itself.
/// * **Fair.** Each `poll_expired` does a bounded amount of work and spends
///   one unit of tokio's cooperative budget, so a million values expiring at
///   once never starve the other tasks of a worker.
/// * [`DelayQueue::with_handle`] runs the queue on a timer of your own.
///
/// `DelayQueue<T>` is [`Unpin`], and `Send`/`Sync` when `T` is.
///
/// # Examples
///
/// A cache whose entries expire 30 s after they were last written:
///
/// ```
/// use std::collections::HashMap;
/// use std::time::Duration;
/// use tiered_timer::delay_queue::Key;
/// use tiered_timer::DelayQueue;
///
/// struct Cache {
///     entries: HashMap<String, (String, Key)>,
///     expirations: DelayQueue<String>,
/// }
///
/// impl Cache {
///     fn insert(&mut self, key: String, value: String) {
///         if let Some((_, old)) = self.entries.remove(&key) {
///             self.expirations.remove(&old);
///         }
///         let expiry = self.expirations.insert(key.clone(), Duration::from_secs(30));
///         self.entries.insert(key, (value, expiry));
///     }
///
///     async fn purge_expired(&mut self) {
///         // `next` on the `Stream` works as well; this needs no extra crate.
///         while let Some(expired) =
///             std::future::poll_fn(|cx| self.expirations.poll_expired(cx)).await
///         {
///             self.entries.remove(expired.get_ref());
///         }
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let mut cache = Cache { entries: HashMap::new(), expirations: DelayQueue::new() };
/// cache.insert("session".into(), "alice".into());
/// cache.purge_expired().await; // 30 s of paused time later
/// assert!(cache.entries.is_empty());
/// # }
/// ```
pub struct DelayQueue<T> {
    wheel: Wheel<Slot<T>>,
    /// The timer the queue runs on, found on first use (so that
    /// [`DelayQueue::new`] works outside a runtime, as tokio-util's does).
    timer: Option<QueueTimer>,
    /// The tick the sleep is set for, if it is set and has not fired.
    armed: Option<u64>,
    /// A tick known to have been reached: the sleep fired for it.
    reached: u64,
    /// The waker of the last `poll_expired`, woken when an insertion or a
    /// reset needs an earlier wake-up than the sleep's, or when the queue
    /// empties.
    waker: Option<Waker>,
    /// The stamp of the next insertion.
    next_stamp: u64,
}

/// A value and the stamp of its insertion.
#[derive(Debug)]
struct Slot<T> {
    value: T,
    stamp: u64,
}

impl<T> DelayQueue<T> {
    /// Creates an empty queue on the current runtime's default timer.
    ///
    /// Allocates nothing; the timer is looked up on first use, so this may
    /// be called outside a runtime (as tokio-util's may).
    ///
    /// # Examples
    ///
    /// ```
    /// use tiered_timer::DelayQueue;
    ///
    /// let queue: DelayQueue<u32> = DelayQueue::new();
    /// assert!(queue.is_empty());
    /// ```
    pub fn new() -> DelayQueue<T> {
        DelayQueue::with_capacity(0)
    }

    /// Creates an empty queue with room for `capacity` values before it
    /// reallocates, on the current runtime's default timer.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::DelayQueue;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mut queue = DelayQueue::with_capacity(10);
    /// assert!(queue.capacity() >= 10);
    /// for i in 0..10 {
    ///     queue.insert(i, Duration::from_secs(i)); // no reallocation
    /// }
    /// # }
    /// ```
    pub fn with_capacity(capacity: usize) -> DelayQueue<T> {
        DelayQueue::build(DEFAULT_WHEEL_SIZE, capacity)
    }

    /// Creates an empty queue on the timer of `handle`: its clock (such as a
    /// [`ManualClock`](crate::clock::ManualClock)) and its tick apply.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::{clock::ManualClock, DelayQueue, Timer};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let clock = ManualClock::new();
    /// let timer = Timer::builder().clock(clock.clone()).tick(Duration::from_millis(10)).build();
    /// let mut queue = DelayQueue::with_handle(&timer.handle());
    /// queue.insert("in an hour", Duration::from_secs(3600));
    /// clock.advance(Duration::from_secs(3600));
    /// let expired = std::future::poll_fn(|cx| queue.poll_expired(cx)).await.unwrap();
    /// assert_eq!(expired.into_inner(), "in an hour"); // no real hour passed
    /// # }
    /// ```
    pub fn with_handle(handle: &Handle) -> DelayQueue<T> {
        DelayQueue::with_capacity_and_handle(0, handle)
    }

    /// Creates an empty queue with room for `capacity` values, on the timer
    /// of `handle`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tiered_timer::{DelayQueue, Handle};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let queue: DelayQueue<u64> = DelayQueue::with_capacity_and_handle(100, &Handle::current());
    /// assert!(queue.capacity() >= 100);
    /// # }
    /// ```
    pub fn with_capacity_and_handle(capacity: usize, handle: &Handle) -> DelayQueue<T> {
        let wheel_size = handle.shared.config().wheel_size;
        let mut queue = DelayQueue::build(wheel_size, capacity);
        queue.timer = Some(QueueTimer::new(handle.clone()));
        queue.catch_up();
        queue
    }

    fn build(wheel_size: usize, capacity: usize) -> DelayQueue<T> {
        let mut wheel = Wheel::new(wheel_size);
        wheel.reserve(capacity);
        DelayQueue {
            wheel,
            timer: None,
            armed: None,
            reached: 0,
            waker: None,
            next_stamp: 0,
        }
    }

    /// Inserts `value`, to come out once `when` is reached, and returns its
    /// key.
    ///
    /// The value comes out at the first tick boundary of the queue's timer at
    /// or after `when` (so a `when` in the past is due at once, and one
    /// within the current tick at its end, as for a sleep). A `when` beyond
    /// what the timer can represent (past its last tick, hundreds of
    /// millions of years away at the default tick) is clamped to about 30
    /// years from now; no deadline panics.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime, for a queue made by [`new`](Self::new) or
    /// [`with_capacity`](Self::with_capacity) (it looks up the runtime's
    /// default timer on first use); or with more than `u32::MAX - 1` values
    /// in the queue.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::{DelayQueue, Instant};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut queue = DelayQueue::new();
    /// let key = queue.insert_at("foo", Instant::now() + Duration::from_secs(5));
    /// assert_eq!(*queue.remove(&key).get_ref(), "foo");
    /// # }
    /// ```
    #[track_caller]
    pub fn insert_at(&mut self, value: T, when: Instant) -> Key {
        let tick = self.tick_of(when);
        self.insert_tick(value, tick)
    }

    /// Inserts `value`, to come out once `timeout` has elapsed, and returns
    /// its key.
    ///
    /// A zero `timeout` makes the value due at the end of the current tick
    /// at the latest; one too large for an
    /// [`Instant`] (such as [`Duration::MAX`]) is clamped to about 30 years,
    /// as tokio clamps `sleep(Duration::MAX)`: it does not panic.
    ///
    /// # Panics
    ///
    /// As [`insert_at`](Self::insert_at).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::DelayQueue;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mut queue = DelayQueue::new();
    /// let key = queue.insert("foo", Duration::from_secs(5));
    /// queue.insert("never, really", Duration::MAX); // no panic
    /// assert_eq!(queue.remove(&key).into_inner(), "foo");
    /// # }
    /// ```
    #[track_caller]
    pub fn insert(&mut self, value: T, timeout: Duration) -> Key {
        let tick = self.tick_after(timeout);
        self.insert_tick(value, tick)
    }

    #[track_caller]
    fn insert_tick(&mut self, value: T, tick: u64) -> Key {
        let stamp = self.next_stamp;
        self.next_stamp += 1;
        let tick = tick.max(self.wheel.elapsed());
        let (index, due_at) = self.wheel.insert(tick, Slot { value, stamp });
        self.due_at(due_at);
        Key { index, stamp }
    }

    /// The wheel index of `key`, if its value is still in the queue.
    fn index_of(&self, key: &Key) -> Option<usize> {
        match self.wheel.get(key.index) {
            Some(slot) if slot.stamp == key.stamp => Some(key.index),
            _ => None,
        }
    }

    #[track_caller]
    fn index_or_panic(&self, key: &Key, method: &str) -> usize {
        match self.index_of(key) {
            Some(index) => index,
            None => stale_key_panic(method),
        }
    }

    /// Returns the deadline of the value under `key`: its deadline rounded
    /// up to the timer's tick, or, if that had already passed when it was
    /// inserted or last reset, the queue's time then (so the reported
    /// deadlines come out in order). Never earlier than the deadline given.
    ///
    /// # Panics
    ///
    /// If `key`'s value is no longer in the queue (polled out, removed or
    /// cleared).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::DelayQueue;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mut queue = DelayQueue::new();
    /// let key1 = queue.insert("foo", Duration::from_secs(5));
    /// let key2 = queue.insert("bar", Duration::from_secs(10));
    /// assert!(queue.deadline(&key1) < queue.deadline(&key2));
    /// # }
    /// ```
    #[track_caller]
    pub fn deadline(&self, key: &Key) -> Instant {
        let index = self.index_or_panic(key, "deadline");
        self.instant_of(self.wheel.deadline(index))
    }

    /// Removes the value under `key` and returns it with its deadline.
    ///
    /// What each state of `key` gives, for `remove`, [`try_remove`] and
    /// [`reset`]:
    ///
    /// | `key`'s value | `remove` | `try_remove` | `reset` / `reset_at` |
    /// |---|---|---|---|
    /// | waiting for its deadline | the value | `Some(value)` | moves the deadline |
    /// | due, not yet polled out | the value (it will not come out) | `Some(value)` | moves the deadline (a future one makes it wait again) |
    /// | polled out, removed, or cleared | panics | `None` | panics |
    ///
    /// A key never names a value other than its own, even once its slot has
    /// been reused.
    ///
    /// [`try_remove`]: Self::try_remove
    /// [`reset`]: Self::reset
    ///
    /// # Panics
    ///
    /// If `key`'s value is no longer in the queue.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::DelayQueue;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mut queue = DelayQueue::new();
    /// let key = queue.insert("foo", Duration::from_secs(5));
    /// let item = queue.remove(&key);
    /// assert_eq!(*item.get_ref(), "foo");
    /// # }
    /// ```
    #[track_caller]
    pub fn remove(&mut self, key: &Key) -> Expired<T> {
        let index = self.index_or_panic(key, "remove");
        self.take(index)
    }

    /// Removes the value under `key`, if it is still in the queue, and
    /// returns it with its deadline; `None` if it has left (see the table
    /// at [`remove`](Self::remove)).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::DelayQueue;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mut queue = DelayQueue::new();
    /// let key = queue.insert("foo", Duration::from_secs(5));
    /// assert_eq!(queue.try_remove(&key).unwrap().into_inner(), "foo");
    /// assert!(queue.try_remove(&key).is_none());
    /// # }
    /// ```
    pub fn try_remove(&mut self, key: &Key) -> Option<Expired<T>> {
        let index = self.index_of(key)?;
        Some(self.take(index))
    }

    /// Takes entry `index` out of the wheel.
    fn take(&mut self, index: usize) -> Expired<T> {
        let deadline = self.instant_of(self.wheel.deadline(index));
        let Slot { value, stamp } = self.wheel.remove(index);
        if self.wheel.len() == 0 {
            // A `Stream` consumer waiting on an empty queue sees its end.
            if let Some(waker) = self.waker.take() {
                waker.wake();
            }
        }
        Expired {
            data: value,
            deadline,
            key: Key { index, stamp },
        }
    }

    /// Moves the deadline of the value under `key` to `when`.
    ///
    /// The value stays in the queue, even if it was due and not yet polled
    /// out; a `when` already passed makes it due at once. Far deadlines are
    /// clamped as by [`insert_at`](Self::insert_at).
    ///
    /// # Panics
    ///
    /// If `key`'s value is no longer in the queue (see the table at
    /// [`remove`](Self::remove)).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::{DelayQueue, Instant};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mut queue = DelayQueue::new();
    /// let key = queue.insert("foo", Duration::from_secs(5));
    /// let later = Instant::now() + Duration::from_secs(10);
    /// queue.reset_at(&key, later);
    /// assert!(queue.deadline(&key) >= later);
    /// # }
    /// ```
    #[track_caller]
    pub fn reset_at(&mut self, key: &Key, when: Instant) {
        let index = self.index_or_panic(key, "reset_at");
        let tick = self.tick_of(when);
        self.reset_tick(index, tick);
    }

    /// Moves the deadline of the value under `key` to `timeout` from now.
    ///
    /// # Panics
    ///
    /// As [`reset_at`](Self::reset_at).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::DelayQueue;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mut queue = DelayQueue::new();
    /// let key = queue.insert("foo", Duration::from_secs(5));
    /// queue.reset(&key, Duration::from_secs(10)); // now due in 10 s
    /// # }
    /// ```
    #[track_caller]
    pub fn reset(&mut self, key: &Key, timeout: Duration) {
        let index = self.index_or_panic(key, "reset");
        let tick = self.tick_after(timeout);
        self.reset_tick(index, tick);
    }

    fn reset_tick(&mut self, index: usize, tick: u64) {
        let tick = tick.max(self.wheel.elapsed());
        let due_at = self.wheel.reset(index, tick);
        self.due_at(due_at);
    }

    /// Returns the key of the value [`poll_expired`](Self::poll_expired)
    /// will pull out next, without waiting for it: a value already due if
    /// any, else one with the earliest deadline (if several share that
    /// tick, any of them).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::DelayQueue;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mut queue = DelayQueue::new();
    /// queue.insert("foo", Duration::from_secs(10));
    /// let key2 = queue.insert("bar", Duration::from_secs(5));
    /// queue.insert("baz", Duration::from_secs(15));
    /// assert_eq!(queue.peek(), Some(key2));
    /// # }
    /// ```
    pub fn peek(&self) -> Option<Key> {
        let index = self.wheel.peek()?;
        let stamp = self.wheel.get(index).expect("peeked entry exists").stamp;
        Some(Key { index, stamp })
    }

    /// Removes every value. Their keys name nothing afterwards; the
    /// queue's memory is returned.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::DelayQueue;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mut queue = DelayQueue::new();
    /// let key = queue.insert("foo", Duration::from_secs(5));
    /// queue.clear();
    /// assert!(queue.is_empty());
    /// assert!(queue.try_remove(&key).is_none());
    /// # }
    /// ```
    pub fn clear(&mut self) {
        let had_values = self.wheel.len() > 0;
        let elapsed = self.wheel.elapsed();
        let wheel_size = match &self.timer {
            Some(timer) => timer.handle.shared.config().wheel_size,
            None => DEFAULT_WHEEL_SIZE,
        };
        let mut wheel = Wheel::new(wheel_size);
        wheel.catch_up(elapsed);
        // Drop the values after the queue is consistent again: a value's
        // `Drop` cannot observe a half-cleared queue, it has no access.
        drop(std::mem::replace(&mut self.wheel, wheel));
        self.armed = None;
        if had_values {
            if let Some(waker) = self.waker.take() {
                waker.wake();
            }
        }
    }

    /// Returns how many values the queue can hold without reallocating.
    ///
    /// # Examples
    ///
    /// ```
    /// use tiered_timer::DelayQueue;
    ///
    /// let queue: DelayQueue<i32> = DelayQueue::with_capacity(10);
    /// assert!(queue.capacity() >= 10);
    /// ```
    pub fn capacity(&self) -> usize {
        self.wheel.capacity()
    }

    /// Returns how many values are in the queue, due or not.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::DelayQueue;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mut queue = DelayQueue::new();
    /// assert_eq!(queue.len(), 0);
    /// queue.insert(3, Duration::from_secs(5));
    /// assert_eq!(queue.len(), 1);
    /// # }
    /// ```
    pub fn len(&self) -> usize {
        self.wheel.len()
    }

    /// Makes room for at least `additional` more values.
    ///
    /// # Panics
    ///
    /// If the new capacity would exceed `u32::MAX - 1` values.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::DelayQueue;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mut queue = DelayQueue::new();
    /// queue.insert("hello", Duration::from_secs(10));
    /// queue.reserve(10);
    /// assert!(queue.capacity() >= 11);
    /// # }
    /// ```
    #[track_caller]
    pub fn reserve(&mut self, additional: usize) {
        let limit = wheel::MAX_ENTRIES - 1;
        assert!(
            self.wheel.len().saturating_add(additional) <= limit,
            "tiered-timer: DelayQueue::reserve: more than {limit} values"
        );
        self.wheel.reserve(additional);
    }

    /// Returns `true` if the queue holds no values.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::DelayQueue;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mut queue = DelayQueue::new();
    /// assert!(queue.is_empty());
    /// queue.insert("hello", Duration::from_secs(5));
    /// assert!(!queue.is_empty());
    /// # }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.wheel.len() == 0
    }

    /// Returns memory the queue no longer needs, without moving a value:
    /// every key stays valid.
    ///
    /// The room past the highest value still in the queue is freed (all of
    /// it once the queue is empty, which also happens by itself when a big
    /// queue empties); freed slots below it are reused by later insertions,
    /// lowest first, so a later call frees more.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::DelayQueue;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mut queue = DelayQueue::with_capacity(1_000);
    /// let key = queue.insert("kept", Duration::from_secs(5));
    /// queue.shrink_to_fit();
    /// assert!(queue.capacity() < 1_000);
    /// assert_eq!(queue.remove(&key).into_inner(), "kept"); // still valid
    /// # }
    /// ```
    pub fn shrink_to_fit(&mut self) {
        self.wheel.shrink_to_fit();
    }

    /// Returns memory the queue no longer needs; the same as
    /// [`shrink_to_fit`](Self::shrink_to_fit).
    ///
    /// tokio-util's `compact` moves values to the lowest slots and keeps a
    /// map from the keys it handed out to their new slots, which costs a
    /// hash lookup on every later use of a key. This one moves nothing:
    /// keys stay valid and cost nothing, but a value in a high slot holds
    /// the room below it until it leaves.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::DelayQueue;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mut queue = DelayQueue::with_capacity(100);
    /// let key1 = queue.insert(5, Duration::from_secs(5));
    /// let key2 = queue.insert(10, Duration::from_secs(10));
    /// queue.remove(&key2);
    /// queue.compact();
    /// assert_eq!(queue.capacity(), 1);
    /// assert_eq!(queue.remove(&key1).into_inner(), 5);
    /// # }
    /// ```
    pub fn compact(&mut self) {
        self.shrink_to_fit();
    }
}

#[cold]
#[track_caller]
fn stale_key_panic(method: &str) -> ! {
    panic!(
        "tiered-timer: DelayQueue::{method}: the key's value is no longer in the queue (it \
         was polled out, removed or cleared); `try_remove` returns `None` for such a key"
    )
}

// The values are never pinned: a pinned queue hands them out by value.
impl<T> Unpin for DelayQueue<T> {}

impl<T> Default for DelayQueue<T> {
    fn default() -> DelayQueue<T> {
        DelayQueue::new()
    }
}

impl<T> fmt::Debug for DelayQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DelayQueue")
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .field("handle", &self.timer.as_ref().map(|timer| &timer.handle))
            .finish()
    }
}
