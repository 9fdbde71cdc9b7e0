//! [`Clock`]: the wall clock an embedded store decides by, the system's
//! or one a test moves.
//!
//! # Design
//!
//! A store reads "now" for every due time, lease and sleep of its driver;
//! with [`Clock::manual`] that now is a value the test sets, so a month of
//! a daily recurrence, a lease that runs out or a job due in three days
//! take no real time. Moving a manual clock wakes the drivers of the
//! stores that use it (each registers a poke, kept as a `Weak` so a
//! closed store is forgotten), which then hand out what became due, as
//! the system clock's passing would.

use std::fmt;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime};

/// A poke registered by a store's driver.
type Poke = Weak<dyn Fn() + Send + Sync>;

/// The wall clock of an embedded (`file://`) store:
/// [`system`](Clock::system) (the default), or [`manual`](Clock::manual)
/// for tests, set with [`Builder::clock`](crate::Builder::clock).
///
/// A store reads every "now" from its clock: due times and delays,
/// leases and their expiry, when its driver wakes. With a manual clock
/// nothing is due until the test moves the clock past it, and then it is
/// at once, so code that schedules for next week, or a daily
/// [`Recurrence`](crate::Recurrence) across a daylight-saving change, is
/// tested in milliseconds. (Redis decides by its own `TIME`, which no
/// client can move: a clock is for `file://` stores.)
///
/// Clones share one clock.
///
/// # Examples
///
/// ```no_run
/// use std::time::{Duration, SystemTime};
/// use tiered_timer_jobs::{Clock, Queue};
///
/// # async fn demo() -> Result<(), tiered_timer_jobs::Error> {
/// let clock = Clock::manual(SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_225_600));
/// let queue = Queue::builder("file:///tmp/test-jobs", "mail").clock(clock.clone()).connect().await?;
/// queue.schedule(Duration::from_secs(3 * 86_400), "reminder").await?;
/// clock.advance(Duration::from_secs(3 * 86_400)); // three days, at once
/// let job = queue.next().await?;                  // due now
/// job.ack().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Clock {
    manual: Option<Arc<Manual>>,
}

/// A clock the test moves.
struct Manual {
    /// Since the Unix epoch.
    now: Mutex<Duration>,
    pokes: Mutex<Vec<Poke>>,
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.manual {
            None => f.write_str("Clock::system()"),
            Some(_) => f.debug_tuple("Clock::manual").field(&self.now()).finish(),
        }
    }
}

impl Default for Clock {
    fn default() -> Clock {
        Clock::system()
    }
}

impl Clock {
    /// The system's wall clock (`SystemTime::now`): the default.
    pub fn system() -> Clock {
        Clock { manual: None }
    }

    /// A clock that shows `start` until it is moved with
    /// [`advance`](Clock::advance) or [`set`](Clock::set).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use tiered_timer_jobs::Clock;
    ///
    /// let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
    /// let clock = Clock::manual(start);
    /// clock.advance(Duration::from_secs(5));
    /// assert_eq!(clock.now(), start + Duration::from_secs(5));
    /// ```
    pub fn manual(start: SystemTime) -> Clock {
        Clock {
            manual: Some(Arc::new(Manual {
                now: Mutex::new(
                    start
                        .duration_since(SystemTime::UNIX_EPOCH)
                        .unwrap_or_default(),
                ),
                pokes: Mutex::new(Vec::new()),
            })),
        }
    }

    /// What the clock shows.
    pub fn now(&self) -> SystemTime {
        match &self.manual {
            None => SystemTime::now(),
            Some(manual) => SystemTime::UNIX_EPOCH + *lock(&manual.now),
        }
    }

    /// Moves a manual clock forward by `by`, and wakes the stores that use
    /// it.
    ///
    /// # Panics
    ///
    /// On [`Clock::system`], which only time moves.
    #[track_caller]
    pub fn advance(&self, by: Duration) {
        let manual = self
            .manual
            .as_ref()
            .expect("Clock::advance needs a manual clock");
        *lock(&manual.now) += by;
        self.poke();
    }

    /// Sets a manual clock to `to` (forward or, as a wall clock may,
    /// back: a store never hands out a job before its due time by the
    /// clock), and wakes the stores that use it.
    ///
    /// # Panics
    ///
    /// On [`Clock::system`], which only time moves.
    #[track_caller]
    pub fn set(&self, to: SystemTime) {
        let manual = self
            .manual
            .as_ref()
            .expect("Clock::set needs a manual clock");
        *lock(&manual.now) = to
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        self.poke();
    }

    /// Whether this is a manual clock.
    pub fn is_manual(&self) -> bool {
        self.manual.is_some()
    }

    /// Whether two handles are the same clock.
    pub(crate) fn same(&self, other: &Clock) -> bool {
        match (&self.manual, &other.manual) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// Calls `poke` whenever a manual clock moves, for as long as it
    /// lives (nothing on the system clock).
    pub(crate) fn on_move(&self, poke: &Arc<dyn Fn() + Send + Sync>) {
        if let Some(manual) = &self.manual {
            let mut pokes = lock(&manual.pokes);
            pokes.retain(|p| p.strong_count() > 0);
            pokes.push(Arc::downgrade(poke));
        }
    }

    fn poke(&self) {
        let Some(manual) = &self.manual else { return };
        // Called with no lock of the clock's held: a poke takes a store's.
        let pokes: Vec<_> = lock(&manual.pokes)
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        for poke in pokes {
            poke();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
