//! What a [`DelayQueue`](super::DelayQueue) hands out: the [`Key`] of an
//! inserted value, and the value again as [`Expired`] when it leaves.

use crate::Instant;

/// A token naming a value in a [`DelayQueue`](super::DelayQueue); returned by
/// [`DelayQueue::insert`](super::DelayQueue::insert).
///
/// It names that value only: once the value has left the queue (polled out,
/// removed, or cleared), the key matches nothing, even after its slot holds
/// another value.
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
/// let key = queue.insert("a", Duration::from_secs(1));
/// queue.remove(&key);
/// let other = queue.insert("b", Duration::from_secs(1));
/// assert_ne!(key, other);
/// assert!(queue.try_remove(&key).is_none()); // never "b"
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key {
    pub(super) index: usize,
    pub(super) stamp: u64,
}

/// A value that left a [`DelayQueue`](super::DelayQueue): polled out at its deadline, or
/// removed.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tiered_timer::DelayQueue;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let mut queue = DelayQueue::new();
/// let key = queue.insert("job", Duration::from_secs(5));
/// let expired = std::future::poll_fn(|cx| queue.poll_expired(cx)).await.unwrap();
/// assert_eq!(expired.key(), key);
/// assert_eq!(expired.into_inner(), "job");
/// # }
/// ```
#[derive(Debug)]
pub struct Expired<T> {
    pub(super) data: T,
    pub(super) deadline: Instant,
    pub(super) key: Key,
}

impl<T> Expired<T> {
    /// Returns a reference to the value.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tiered_timer::DelayQueue;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mut queue = DelayQueue::new();
    /// let key = queue.insert(7, Duration::from_secs(5));
    /// assert_eq!(*queue.remove(&key).get_ref(), 7);
    /// # }
    /// ```
    pub fn get_ref(&self) -> &T {
        &self.data
    }

    /// Returns a mutable reference to the value.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tiered_timer::DelayQueue;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mut queue = DelayQueue::new();
    /// let key = queue.insert(7, Duration::from_secs(5));
    /// let mut expired = queue.remove(&key);
    /// *expired.get_mut() += 1;
    /// assert_eq!(expired.into_inner(), 8);
    /// # }
    /// ```
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.data
    }

    /// Returns the value.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tiered_timer::DelayQueue;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mut queue = DelayQueue::new();
    /// let key = queue.insert(String::from("x"), Duration::from_secs(5));
    /// let value: String = queue.remove(&key).into_inner();
    /// assert_eq!(value, "x");
    /// # }
    /// ```
    pub fn into_inner(self) -> T {
        self.data
    }

    /// Returns the value's deadline as the queue kept it: rounded up to the
    /// timer's tick, and no earlier than the queue's time when it was
    /// inserted or last reset (see [`DelayQueue::deadline`](super::DelayQueue::deadline)).
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
    /// let asked = Instant::now() + Duration::from_secs(5);
    /// queue.insert_at("x", asked);
    /// let expired = std::future::poll_fn(|cx| queue.poll_expired(cx)).await.unwrap();
    /// assert!(expired.deadline() >= asked);
    /// assert!(Instant::now() >= expired.deadline()); // never early
    /// # }
    /// ```
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Returns the key the value was inserted under (it names nothing any
    /// more).
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tiered_timer::DelayQueue;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mut queue = DelayQueue::new();
    /// let key = queue.insert((), Duration::from_secs(5));
    /// assert_eq!(queue.remove(&key).key(), key);
    /// # }
    /// ```
    pub fn key(&self) -> Key {
        self.key
    }
}
