//! The pure timing wheel under the crate's timers, for owners that bring
//! their own clock, their own unit of time and their own lock.
//!
//! [`Wheel`] is the synchronous core the timers and
//! [`DelayQueue`](crate::DelayQueue) are built on: a hierarchical timing
//! wheel (Kafka's `SystemTimer` shape) over one slab. It never reads a
//! clock, never sleeps, never locks and never allocates per entry beyond
//! its slab: time is a `u64` count of *ticks* that the owner passes in,
//! in whatever unit it likes (the timers use 250 µs of the runtime's
//! clock; a durable job store may use milliseconds of the wall clock).
//!
//! * `insert`, `remove` and `reset` are O(1); an entry's [`Key`] stays
//!   valid until it is removed.
//! * **Never early**: [`Wheel::poll_step`]`(now)` hands an entry out only
//!   once its deadline is at or before `now`, in deadline order (entries
//!   due at the same tick in the order they were filed), each once.
//! * **No range limit**: any `u64` deadline is filed; overflow levels are
//!   created as needed.
//! * **Bounded steps**: one [`Wheel::poll_step`] moves at most a few
//!   dozen entries, so an owner that holds a lock around the wheel can let
//!   go of it between steps even when a million entries come due at once.
//! * [`Wheel::next_expiration`] says when to look again: the owner sleeps
//!   until then instead of ticking through empty slots.
//!
//! Use [`DelayQueue`](crate::DelayQueue) instead when the values should
//! come out as a `Stream` on the runtime's clock: it owns one of these and
//! a timer to sleep on.
//!
//! # Examples
//!
//! ```
//! use tiered_timer::wheel_core::{Polled, Wheel};
//!
//! let mut wheel: Wheel<&str> = Wheel::new(64);
//! let close = wheel.insert(1_800, "close order 42");
//! let remind = wheel.insert(60, "remind");
//! wheel.remove(close); // paid: it will never come out
//!
//! assert_eq!(wheel.next_expiration(), Some(60)); // sleep until tick 60
//! let mut due = Vec::new();
//! loop {
//!     match wheel.poll_step(60) {
//!         Polled::Due(key) => due.push(wheel.remove(key)),
//!         Polled::Busy => continue, // the owner may release its lock here
//!         Polled::Idle => break,
//!     }
//! }
//! assert_eq!(due, ["remind"]);
//! # let _ = remind;
//! ```

use std::fmt;

use crate::wheel;

/// Identifies an entry of a [`Wheel`]: an index into its slab, below
/// `u32::MAX`, stable until the entry is removed (then it may be reused).
///
/// # Examples
///
/// ```
/// use tiered_timer::wheel_core::{Key, Wheel};
///
/// let mut wheel = Wheel::new(64);
/// let key: Key = wheel.insert(10, 'a');
/// assert_eq!(wheel.get(key), Some(&'a'));
/// ```
pub type Key = usize;

/// What one [`Wheel::poll_step`] did.
///
/// # Examples
///
/// ```
/// use tiered_timer::wheel_core::{Polled, Wheel};
///
/// let mut wheel = Wheel::new(64);
/// let key = wheel.insert(5, ());
/// assert_eq!(wheel.poll_step(4), Polled::Idle);
/// assert_eq!(wheel.poll_step(5), Polled::Due(key));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Polled {
    /// This entry is due: it stays in the wheel, unfiled (it will not come
    /// out again), until the owner removes or resets it.
    Due(Key),
    /// Moved a few entries of a coarse bucket into finer ones, none due
    /// yet: call again (the owner may release its lock in between).
    Busy,
    /// Nothing more is due by `now`; the wheel's time is now `now` (or
    /// later, if it was already).
    Idle,
}

/// A hierarchical timing wheel of values of type `T`, with deadlines in
/// ticks of the owner's choosing (see the [module docs](self)).
///
/// # Examples
///
/// Wall-clock milliseconds as ticks, as a durable store might use them:
///
/// ```
/// use std::time::{SystemTime, UNIX_EPOCH};
/// use tiered_timer::wheel_core::{Polled, Wheel};
///
/// let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
/// let mut wheel = Wheel::new(64);
/// wheel.catch_up(now_ms); // start the wheel's time at now
/// let key = wheel.insert(now_ms + 30_000, "job 7");
/// assert_eq!(wheel.poll_step(now_ms + 29_999), Polled::Idle); // never early
/// let mut polled = wheel.poll_step(now_ms + 30_000);
/// while polled == Polled::Busy {
///     polled = wheel.poll_step(now_ms + 30_000);
/// }
/// assert_eq!(polled, Polled::Due(key));
/// assert_eq!(wheel.remove(key), "job 7");
/// ```
pub struct Wheel<T> {
    inner: wheel::Wheel<T>,
}

impl<T> fmt::Debug for Wheel<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Wheel")
            .field("len", &self.inner.len())
            .field("elapsed", &self.inner.elapsed())
            .finish_non_exhaustive()
    }
}

impl<T> Wheel<T> {
    /// An empty wheel of `wheel_size` slots per level, whose time starts at
    /// tick 0 (see [`catch_up`](Wheel::catch_up) to start it later). A
    /// power of two finds an entry's level without a search; the timers
    /// use 64.
    ///
    /// # Panics
    ///
    /// If `wheel_size` is below 2 or above 2^20.
    ///
    /// # Examples
    ///
    /// ```
    /// let wheel: tiered_timer::wheel_core::Wheel<u32> = tiered_timer::wheel_core::Wheel::new(64);
    /// assert!(wheel.is_empty());
    /// ```
    #[track_caller]
    pub fn new(wheel_size: usize) -> Wheel<T> {
        assert!(
            (2..=1 << 20).contains(&wheel_size),
            "a wheel has 2 to 2^20 slots per level, not {wheel_size}"
        );
        Wheel {
            inner: wheel::Wheel::new(wheel_size),
        }
    }

    /// Adds `value`, due at tick `deadline`, and returns its key. A
    /// deadline at or before the wheel's time is due at once (it comes out
    /// of the next [`poll_step`](Wheel::poll_step)). O(1).
    ///
    /// # Panics
    ///
    /// If the wheel already holds `u32::MAX - 1` entries.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut wheel = tiered_timer::wheel_core::Wheel::new(64);
    /// let key = wheel.insert(1_000, "later");
    /// assert_eq!(wheel.deadline(key), 1_000);
    /// ```
    #[track_caller]
    pub fn insert(&mut self, deadline: u64, value: T) -> Key {
        self.inner.insert(deadline, value).0
    }

    /// Removes entry `key`, filed or handed out, and returns its value.
    /// O(1).
    ///
    /// # Panics
    ///
    /// If `key` is not in the wheel.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut wheel = tiered_timer::wheel_core::Wheel::new(64);
    /// let key = wheel.insert(1_000, "cancelled");
    /// assert_eq!(wheel.remove(key), "cancelled");
    /// assert!(wheel.is_empty());
    /// ```
    #[track_caller]
    pub fn remove(&mut self, key: Key) -> T {
        assert!(self.inner.get(key).is_some(), "no entry {key} in the wheel");
        self.inner.remove(key)
    }

    /// Moves entry `key` to a new deadline, earlier or later, and files it
    /// again if it had been handed out. O(1).
    ///
    /// # Panics
    ///
    /// If `key` is not in the wheel.
    ///
    /// # Examples
    ///
    /// ```
    /// use tiered_timer::wheel_core::{Polled, Wheel};
    ///
    /// let mut wheel = Wheel::new(64);
    /// let key = wheel.insert(10, "lease");
    /// wheel.reset(key, 40); // renewed
    /// assert_eq!(wheel.poll_step(10), Polled::Idle);
    /// assert_eq!(wheel.deadline(key), 40);
    /// ```
    #[track_caller]
    pub fn reset(&mut self, key: Key, deadline: u64) {
        assert!(self.inner.get(key).is_some(), "no entry {key} in the wheel");
        self.inner.reset(key, deadline);
    }

    /// The value of entry `key`, if there is one.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut wheel = tiered_timer::wheel_core::Wheel::new(64);
    /// let key = wheel.insert(1, 7u32);
    /// assert_eq!(wheel.get(key), Some(&7));
    /// wheel.remove(key);
    /// assert_eq!(wheel.get(key), None);
    /// ```
    pub fn get(&self, key: Key) -> Option<&T> {
        self.inner.get(key)
    }

    /// The deadline of entry `key`, in ticks.
    ///
    /// # Panics
    ///
    /// If `key` is not in the wheel.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut wheel = tiered_timer::wheel_core::Wheel::new(64);
    /// let key = wheel.insert(99, ());
    /// assert_eq!(wheel.deadline(key), 99);
    /// ```
    #[track_caller]
    pub fn deadline(&self, key: Key) -> u64 {
        assert!(self.inner.get(key).is_some(), "no entry {key} in the wheel");
        self.inner.deadline(key)
    }

    /// How many entries the wheel holds (filed, or handed out and not yet
    /// removed).
    ///
    /// # Examples
    ///
    /// ```
    /// let mut wheel = tiered_timer::wheel_core::Wheel::new(64);
    /// wheel.insert(5, ());
    /// assert_eq!(wheel.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// Whether the wheel holds no entry.
    ///
    /// # Examples
    ///
    /// ```
    /// let wheel: tiered_timer::wheel_core::Wheel<()> = tiered_timer::wheel_core::Wheel::new(64);
    /// assert!(wheel.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.inner.len() == 0
    }

    /// Makes room for `additional` more entries without reallocating.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut wheel: tiered_timer::wheel_core::Wheel<u32> = tiered_timer::wheel_core::Wheel::new(64);
    /// wheel.reserve(1_000);
    /// ```
    pub fn reserve(&mut self, additional: usize) {
        self.inner.reserve(additional);
    }

    /// The wheel's time, in ticks: the last `now` it was polled or caught
    /// up to, or the start of the last bucket that came due.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut wheel: tiered_timer::wheel_core::Wheel<()> = tiered_timer::wheel_core::Wheel::new(64);
    /// wheel.catch_up(1_000);
    /// assert_eq!(wheel.elapsed(), 1_000);
    /// ```
    pub fn elapsed(&self) -> u64 {
        self.inner.elapsed()
    }

    /// The tick at which the next entry may come due: the start of the
    /// earliest non-empty bucket (a coarse bucket starts before the
    /// deadlines in it: polling then moves them to finer buckets), or the
    /// wheel's time if entries are due already. `None` when nothing is
    /// filed. The owner sleeps until then.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut wheel = tiered_timer::wheel_core::Wheel::new(64);
    /// assert_eq!(wheel.next_expiration(), None);
    /// wheel.insert(10, ());
    /// assert_eq!(wheel.next_expiration(), Some(10));
    /// ```
    pub fn next_expiration(&mut self) -> Option<u64> {
        self.inner.next_expiration()
    }

    /// The key of a filed entry with the earliest deadline (among equal
    /// deadlines, any one), or `None` when nothing is filed. Walks the
    /// non-empty buckets in order until their start passes the best
    /// deadline found: for occasional use (a dashboard), not for every
    /// call.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut wheel = tiered_timer::wheel_core::Wheel::new(64);
    /// wheel.insert(5_000, "b");
    /// let first = wheel.insert(4_000, "a");
    /// assert_eq!(wheel.peek(), Some(first));
    /// ```
    pub fn peek(&self) -> Option<Key> {
        self.inner.peek()
    }

    /// One bounded step of polling at time `now` (ticks): hands out the
    /// next entry whose deadline is at or before `now`
    /// ([`Polled::Due`]), or moves at most a few dozen entries of a coarse
    /// bucket that came due into finer buckets ([`Polled::Busy`]: call
    /// again), or says that nothing more is due ([`Polled::Idle`], and the
    /// wheel's time moves to `now`).
    ///
    /// A `now` behind the wheel's time (a clock that stepped back) hands
    /// out nothing new and leaves the wheel's time where it is.
    ///
    /// # Examples
    ///
    /// ```
    /// use tiered_timer::wheel_core::{Polled, Wheel};
    ///
    /// let mut wheel = Wheel::new(4);
    /// let keys: Vec<_> = (1..=100).map(|t| wheel.insert(t, t)).collect();
    /// let mut out = Vec::new();
    /// loop {
    ///     match wheel.poll_step(50) {
    ///         Polled::Due(key) => out.push(wheel.remove(key)),
    ///         Polled::Busy => {}
    ///         Polled::Idle => break,
    ///     }
    /// }
    /// assert_eq!(out, (1..=50).collect::<Vec<u64>>()); // in deadline order
    /// # let _ = keys;
    /// ```
    pub fn poll_step(&mut self, now: u64) -> Polled {
        match self.inner.poll_step(now) {
            wheel::Polled::Due(key) => Polled::Due(key),
            wheel::Polled::Busy => Polled::Busy,
            wheel::Polled::Idle => Polled::Idle,
        }
    }

    /// Moves the wheel's time forward to `now` if nothing is due by then
    /// (returns whether it did), without handing anything out. An owner
    /// that starts a wheel at a late time (wall-clock milliseconds since
    /// 1970, say) calls this first, so that entries land in fine buckets.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut wheel: tiered_timer::wheel_core::Wheel<()> = tiered_timer::wheel_core::Wheel::new(64);
    /// assert!(wheel.catch_up(1_700_000_000_000));
    /// assert_eq!(wheel.elapsed(), 1_700_000_000_000);
    /// ```
    pub fn catch_up(&mut self, now: u64) -> bool {
        self.inner.catch_up(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wrapper hands out what a model says, in order, never early,
    /// through resets and removals, with wall-clock-sized ticks.
    #[test]
    fn matches_a_sorted_model_at_wall_clock_ticks() {
        let start = 1_700_000_000_000u64;
        let mut wheel = Wheel::new(64);
        assert!(wheel.catch_up(start));
        let mut model = std::collections::BTreeMap::new();
        let mut keys = Vec::new();
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for i in 0..5_000u64 {
            let deadline = start + next() % 3_600_000;
            let key = wheel.insert(deadline, i);
            model.insert((deadline, i), key);
            keys.push((key, deadline, i));
        }
        // Move a third, remove a third.
        for (n, &(key, deadline, i)) in keys.iter().enumerate() {
            if n % 3 == 0 {
                let later = deadline + next() % 60_000;
                wheel.reset(key, later);
                model.remove(&(deadline, i));
                model.insert((later, i), key);
            } else if n % 3 == 1 {
                assert_eq!(wheel.remove(key), i);
                model.remove(&(deadline, i));
            }
        }
        let mut now = start;
        while !model.is_empty() {
            now += next() % 120_000;
            loop {
                match wheel.poll_step(now) {
                    Polled::Due(key) => {
                        let deadline = wheel.deadline(key);
                        assert!(deadline <= now, "early: {deadline} > {now}");
                        let value = wheel.remove(key);
                        let first = *model.keys().next().unwrap();
                        assert_eq!(first.0, deadline, "out of deadline order");
                        assert_eq!(model.remove(&(deadline, value)), Some(key));
                    }
                    Polled::Busy => {}
                    Polled::Idle => break,
                }
            }
            if let Some(&(first, _)) = model.keys().next() {
                assert!(first > now, "{first} was due by {now} but not handed out");
            }
        }
        assert!(wheel.is_empty());
    }
}
