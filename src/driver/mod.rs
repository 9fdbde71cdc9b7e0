//! The async layer's engine room: the state a timer shares between its
//! handles, its sleeps and its driver task, and the driver itself.
//!
//! # How time moves
//!
//! The driver is one tokio task per timer. It asks the wheel for the next
//! due bucket, waits on its [`Clock`]'s sleep (a single
//! `tokio::time::Sleep` by default) until that bucket's instant, then
//! flushes everything due: it wakes the owners of due sleeps, and runs due
//! callbacks itself, earliest deadline first. Nothing ticks
//! while nothing is due. When a registration creates a new earliest bucket
//! the registering thread wakes the driver so it can sleep less; no other
//! registration touches the driver.
//!
//! The clock's sleep is polled with a waker of our own ([`DriverWake`])
//! rather than the driver task's. When tokio's time driver (or a manual
//! clock being advanced) fires it, that waker flushes the due entries right
//! there, before tokio returns to any task. Callbacks are not run there:
//! they go to a ready queue that the driver task works through, so user
//! code never runs inside tokio's time driver.
//! This is what makes `tokio::time::advance(d).await` behave as it does for
//! tokio's own timers: when it returns, every sleep due by then has been
//! woken. Each flush is bounded ([`INLINE_BATCH`], [`DRIVER_BATCH`]); the
//! driver task carries on with the rest, yielding between batches, so a
//! million simultaneous expiries never monopolise a worker.
//!
//! # Ground rules
//!
//! * [`State`] (the wheel, the driver's waker, what the driver is armed for)
//!   is only touched with the timer lock held.
//! * Wakers are never woken, and never dropped, with the lock held: they are
//!   moved out and handled after it is released.
//! * The per-entry deadline words follow the rules in [`deadlines`]; the
//!   scheduled callbacks' state, the rules in [`jobs`].
//! * A slab key belongs to the sleep that registered it until that sleep
//!   deregisters it (on drop), even after it fired; so a key is never reused
//!   while anyone could still write its deadline word. A callback's key is
//!   freed when it is found due or cancelled; nobody writes its word
//!   without the lock.

pub(crate) mod deadlines;
pub(crate) mod jobs;
#[cfg(loom)]
pub mod loom_api;
pub(crate) mod registry;
pub(crate) mod ticks;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use crate::clock::{Clock, ClockSleep};
use crate::error::Error;
use crate::rt::Runtime;
use crate::sync::{lock, Arc, AtomicBool, AtomicU64, Mutex, Ordering, Weak};
use crate::wheel::{Key, Wheel};
use crate::Instant;

use self::deadlines::{DeadlineTable, Due, FIRED, SHUTDOWN};
use self::jobs::{Job, ReadyQueue, Task, CANCELLED, EXPIRED, PENDING, UNFIRED};
use self::ticks::{Ticks, NEVER};

/// Most entries fired by the waker tokio calls, before it hands the rest to
/// the driver task.
const INLINE_BATCH: usize = 1024;
/// Most entries the driver task fires before it yields to other tasks.
const DRIVER_BATCH: usize = 1024;
/// Wakers collected per lock hold (tokio uses 32 too).
const WAKE_CHUNK: usize = 32;

/// The outcome of asking the timer to file a sleep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Filing {
    /// Filed (or parked, for a deadline that never comes) under `key`.
    Filed { key: Key },
    /// Its deadline has already been reached.
    Elapsed,
    /// The timer has shut down.
    Shutdown,
}

/// The timer's configuration, fixed at build time.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Config {
    pub(crate) tick: Duration,
    pub(crate) wheel_size: usize,
    /// Most pending entries before `schedule` refuses more.
    pub(crate) max_pending: usize,
}

/// What a wheel entry is for.
#[derive(Debug)]
enum Slot {
    /// A sleep: the waker to wake when it fires, taken when it does.
    Sleep(Option<Waker>),
    /// A scheduled callback.
    Job(Job),
}

impl Slot {
    /// The waker of a sleep's entry.
    fn waker(&mut self) -> &mut Option<Waker> {
        match self {
            Slot::Sleep(waker) => waker,
            Slot::Job(_) => unreachable!("a sleep's key holds a callback"),
        }
    }
}

/// A callback that never ran because its timer shut down; see
/// [`Timer::shutdown`](crate::Timer::shutdown).
pub(crate) type Unfired = Job;
/// What the lock guards.
#[derive(Debug)]
struct State {
    /// The entries.
    wheel: Wheel<Slot>,
    /// Callbacks found due, waiting for the driver task.
    ready: ReadyQueue,
    /// The tick the driver will next run at (its sleep's deadline, or sooner
    /// if it has been woken), or `None` if it waits for a registration.
    armed: Option<u64>,
    /// The driver task's waker.
    driver: Option<Waker>,
    /// Sleeps whose word is an ordinary tick (registered, and neither
    /// fired, removed, nor moved to a deadline that never comes), plus
    /// callbacks that have neither run nor been cancelled.
    pending: usize,
    /// Flushes run: the driver's turns (see [`crate::Stats`]).
    wakeups: u64,
    /// Entries fired: sleeps woken and callbacks found due.
    fired: u64,
    shutdown: bool,
}

/// A snapshot of a timer's counters.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Counters {
    pub(crate) wakeups: u64,
    pub(crate) fired: u64,
    pub(crate) cascaded: u64,
    pub(crate) pending: usize,
}

/// The state one timer shares between its handles, sleeps and driver.
#[derive(Debug)]
pub(crate) struct Shared {
    state: Mutex<State>,
    deadlines: DeadlineTable,
    ticks: Ticks,
    config: Config,
    clock: Arc<dyn Clock>,
    /// The runtime the driver runs on, entered to read the clock or arm it
    /// from elsewhere (`None` in the loom models, which have none).
    runtime: Option<Runtime>,
    /// The clock sleep the driver waits on. Both the driver task and the
    /// inline flush in [`DriverWake`] re-arm it; see [`Shared::arm`].
    arm: Mutex<Arm>,
    /// The latest clock reading taken for a new sleep, as a tick. A hint
    /// only: taken in the caller's runtime, whose clock may not be the
    /// timer's, so it tells a registration to check its own clock, never
    /// that a deadline has passed.
    now_hint: AtomicU64,
    is_shutdown: AtomicBool,
}

impl Shared {
    /// Creates a timer's state and its driver future, which the caller must
    /// spawn on a runtime.
    pub(crate) fn new(
        config: Config,
        clock: Arc<dyn Clock>,
        runtime: Option<Runtime>,
    ) -> (Arc<Shared>, Driver) {
        let now = clock.now();
        // Made now rather than on the driver's first turn so that a runtime
        // without tokio's time driver fails in the caller, with tokio's
        // message, not later inside the driver task.
        let first = clock.sleep_until(now);
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                wheel: Wheel::new(config.wheel_size),
                ready: ReadyQueue::default(),
                armed: None,
                driver: None,
                pending: 0,
                wakeups: 0,
                fired: 0,
                shutdown: false,
            }),
            deadlines: DeadlineTable::new(),
            ticks: Ticks::new(now, config.tick),
            config,
            clock,
            runtime,
            arm: Mutex::new(Arm {
                sleep: Some(first),
                until: Some(0),
            }),
            now_hint: AtomicU64::new(0),
            is_shutdown: AtomicBool::new(false),
        });
        let wake = Waker::from(Arc::new(DriverWake {
            shared: Arc::downgrade(&shared),
        }));
        let driver = Driver {
            shared: shared.clone(),
            wake,
        };
        (shared, driver)
    }

    pub(crate) fn config(&self) -> Config {
        self.config
    }

    /// The clock, read in the caller's context: for tokio's clock, the
    /// clock of the runtime the caller runs in. Used where tokio itself
    /// reads the current context's clock (a new sleep's deadline).
    pub(crate) fn now(&self) -> Instant {
        self.clock.now()
    }

    /// The timer's own clock, wherever the caller runs: with tokio's clock,
    /// read inside the timer's runtime, so a future polled from another
    /// runtime (paused differently) is still judged by its timer's time.
    pub(crate) fn own_now(&self) -> Instant {
        let _runtime = self.runtime.as_ref().map(Runtime::enter);
        self.clock.now()
    }

    pub(crate) fn ticks(&self) -> &Ticks {
        &self.ticks
    }

    pub(crate) fn deadlines(&self) -> &DeadlineTable {
        &self.deadlines
    }

    pub(crate) fn is_shutdown(&self) -> bool {
        self.is_shutdown.load(Ordering::Acquire)
    }

    /// How many entries are registered and have neither fired nor been
    /// removed.
    pub(crate) fn pending(&self) -> usize {
        lock(&self.state).pending
    }

    /// The timer's counters, read under the lock so they agree.
    pub(crate) fn counters(&self) -> Counters {
        let state = lock(&self.state);
        Counters {
            wakeups: state.wakeups,
            fired: state.fired,
            cascaded: state.wheel.cascaded(),
            pending: state.pending,
        }
    }

    /// Records a clock reading taken for a new sleep, so registrations can
    /// tell that a deadline has passed without reading the clock again.
    pub(crate) fn observe(&self, now: Instant) {
        let tick = self.ticks.now_tick(now);
        // Load first: the line is written about once per tick, not per call.
        if self.now_hint.load(Ordering::Relaxed) < tick {
            self.now_hint.fetch_max(tick, Ordering::Relaxed);
        }
    }

    /// Whether `tick` has already been reached, by the clock.
    ///
    /// Registrations and locked resets ask this so that a deadline already
    /// passed completes at once. The wheel's own time cannot answer it: it
    /// only moves when the driver flushes, and the driver may not have run
    /// since the clock last moved.
    pub(crate) fn is_due_now(&self, tick: u64) -> bool {
        self.ticks.now_tick(self.own_now()) >= tick
    }

    /// Files a new entry due at `tick` that wakes `waker`, or reports that
    /// its deadline has already been reached.
    pub(crate) fn register(&self, tick: u64, waker: &Waker) -> Filing {
        let mut state = lock(&self.state);
        if state.shutdown {
            return Filing::Shutdown;
        }
        if tick <= state.wheel.elapsed() {
            return Filing::Elapsed;
        }
        // A deadline the wheel has not seen pass may still have passed: the
        // wheel's time only moves when something is due. If the driver is
        // armed for this tick or earlier, its turn comes no later than this
        // entry's, so the entry fires then, without a clock read here (the
        // common case: guards registered behind the earliest one; tokio
        // behaves so too). Otherwise (the driver idle, or armed later), or
        // if a recent reading suggests the deadline has passed, ask the
        // timer's own clock. The hint only decides whether to ask: it may
        // come from another runtime's clock.
        let driver_comes_first = state.armed.is_some_and(|armed| armed <= tick);
        let hinted_due = tick <= self.now_hint.load(Ordering::Relaxed);
        if (hinted_due || !driver_comes_first) && self.is_due_now(tick) {
            return Filing::Elapsed;
        }
        let (key, due_at) = state.wheel.insert(tick, Slot::Sleep(Some(waker.clone())));
        state.pending += 1;
        self.deadlines.ensure(key);
        self.deadlines.set(key, tick);
        let driver = self.note_due_at(&mut state, due_at);
        drop(state);
        wake(driver);
        Filing::Filed { key }
    }

    /// Files entry `key` again, at `tick`: the locked path of a reset (to an
    /// earlier deadline, or after the entry fired). If `due_now`, the caller
    /// found the deadline already reached and the entry is settled as fired.
    /// An entry that fired lost its waker; `waker` (the one its owner last
    /// registered) takes its place. After shutdown the entry is marked so
    /// that its owner's next poll reports the shutdown.
    pub(crate) fn refile(
        &self,
        key: Key,
        tick: u64,
        due_now: bool,
        waker: Option<&Waker>,
    ) -> Filing {
        let mut state = lock(&self.state);
        if state.shutdown {
            self.deadlines.set(key, SHUTDOWN);
            return Filing::Shutdown;
        }
        let before = self.deadlines.get(key);
        let old_waker = if before == FIRED {
            std::mem::replace(state.wheel.get_mut(key).waker(), waker.cloned())
        } else {
            None
        };
        // Counted as pending: entries that want an ordinary tick.
        state.pending -= usize::from(before < NEVER);
        let filing = if due_now || tick <= state.wheel.elapsed() {
            state.wheel.unfile(key);
            self.deadlines.set(key, FIRED);
            drop(state);
            Filing::Elapsed
        } else if tick >= NEVER {
            state.wheel.unfile(key);
            self.deadlines.set(key, NEVER);
            drop(state);
            Filing::Filed { key }
        } else {
            state.pending += 1;
            let due_at = state.wheel.reset(key, tick);
            self.deadlines.set(key, tick);
            let driver = self.note_due_at(&mut state, due_at);
            drop(state);
            wake(driver);
            Filing::Filed { key }
        };
        drop(old_waker);
        filing
    }

    /// Makes `waker` the one entry `key` wakes. Returns `Elapsed` if the
    /// entry fired meanwhile (the waker is then not stored).
    pub(crate) fn update_waker(&self, key: Key, waker: &Waker) -> Filing {
        let mut state = lock(&self.state);
        if state.shutdown {
            return Filing::Shutdown;
        }
        if self.deadlines.get(key) == FIRED {
            return Filing::Elapsed;
        }
        let old = state.wheel.get_mut(key).waker().replace(waker.clone());
        drop(state);
        drop(old);
        Filing::Filed { key }
    }

    /// Removes entry `key` for good (its sleep is being dropped).
    pub(crate) fn deregister(&self, key: Key) {
        let mut state = lock(&self.state);
        if !state.shutdown && self.deadlines.get(key) < NEVER {
            state.pending -= 1;
        }
        let slot = state.wheel.remove(key);
        drop(state);
        drop(slot);
    }

    /// Schedules `run` to run on the driver task at `deadline` (`tick` in
    /// ticks; `NEVER` keeps it until it is cancelled or handed back by
    /// shutdown).
    pub(crate) fn schedule(
        self: &Arc<Self>,
        deadline: Instant,
        tick: u64,
        run: Box<dyn FnOnce() + Send + 'static>,
    ) -> Result<Arc<Task>, Error> {
        // Read the clock before taking the lock: a deadline already passed
        // runs on the driver's next turn even if the driver lags the clock.
        let due_now = tick < NEVER && self.is_due_now(tick);
        let mut state = lock(&self.state);
        if state.shutdown {
            return Err(Error::Shutdown);
        }
        if state.pending >= self.config.max_pending {
            return Err(Error::AtCapacity);
        }
        state.pending += 1;
        let task = Arc::new(Task::new(
            deadline,
            state.wheel.vacant_key(),
            Arc::downgrade(self),
        ));
        let job = Job {
            task: task.clone(),
            run,
        };
        let driver = if due_now || tick <= state.wheel.elapsed() {
            task.set_state(EXPIRED);
            state.ready.push(job);
            state.driver.clone()
        } else if tick >= NEVER {
            state.wheel.insert_unfiled(NEVER, Slot::Job(job));
            None
        } else {
            let (key, due_at) = state.wheel.insert(tick, Slot::Job(job));
            debug_assert_eq!(key, task.key);
            self.deadlines.ensure(key);
            self.deadlines.set(key, tick);
            self.note_due_at(&mut state, due_at)
        };
        drop(state);
        wake(driver);
        Ok(task)
    }

    /// Cancels `task`'s callback. Returns `true` if this call stopped it
    /// from running.
    pub(crate) fn cancel(&self, task: &Task) -> bool {
        if task.state() != PENDING {
            return false;
        }
        let mut state = lock(&self.state);
        if task.state() != PENDING {
            // Found due, cancelled or handed back since we looked.
            return false;
        }
        task.set_state(CANCELLED);
        state.pending -= 1;
        let slot = state.wheel.remove(task.key);
        drop(state);
        drop(slot);
        true
    }

    /// Runs up to `budget` due callbacks, earliest deadline first, outside
    /// the lock. Returns `true` if more are waiting.
    fn run_ready(&self, budget: usize) -> bool {
        let mut batch = Vec::with_capacity(WAKE_CHUNK);
        let mut ran = 0;
        loop {
            let mut state = lock(&self.state);
            if state.shutdown {
                return false;
            }
            while batch.len() < WAKE_CHUNK && ran + batch.len() < budget {
                let Some(job) = state.ready.pop() else { break };
                batch.push(job);
            }
            // Room comes back as the callbacks start to run.
            state.pending -= batch.len();
            let more = !state.ready.is_empty();
            drop(state);
            ran += batch.len();
            batch.drain(..).for_each(Job::run);
            if !more || ran >= budget {
                return more;
            }
        }
    }

    /// Records that an entry will come out of the wheel at `due_at`; if that
    /// is sooner than the driver is armed for, returns the driver's waker so
    /// the caller wakes it (after releasing the lock).
    fn note_due_at(&self, state: &mut State, due_at: u64) -> Option<Waker> {
        if state.armed.is_some_and(|armed| armed <= due_at) {
            return None;
        }
        state.armed = Some(due_at);
        state.driver.clone()
    }

    /// Fires up to about `budget` due entries, waking their owners outside
    /// the lock, then records the next due tick as what the driver is armed
    /// for.
    fn flush(&self, budget: usize) -> Flushed {
        self.flush_at(self.ticks.now_tick(self.own_now()), budget)
    }

    /// [`Shared::flush`] with the clock already read: `now` is a tick.
    fn flush_at(&self, now: u64, budget: usize) -> Flushed {
        let mut wakers: Vec<Waker> = Vec::with_capacity(WAKE_CHUNK);
        let mut fired = 0;
        let mut first = true;
        loop {
            let mut guard = lock(&self.state);
            if guard.shutdown {
                return Flushed::Shutdown;
            }
            let state = &mut *guard;
            state.wakeups += u64::from(std::mem::take(&mut first));
            // Another flush (the inline one, or the driver task on another
            // worker) may have read the clock later and moved the wheel past
            // our `now` between two of our chunks. The wheel's time is never
            // ahead of the real time, so catching up is still never early,
            // and it matters: an entry wanted later than a stale `now` but
            // not later than the wheel's time would be re-filed straight
            // back into the due list, forever.
            let now = now.max(state.wheel.elapsed());
            let mut drained = false;
            // Bounded per lock hold: callbacks found due add no waker.
            for _ in 0..WAKE_CHUNK {
                let Some(key) = state.wheel.poll(now) else {
                    drained = true;
                    break;
                };
                match self.deadlines.settle(key, now) {
                    Due::Later(tick) => {
                        state.wheel.reset(key, tick);
                    }
                    Due::Fire => {
                        state.fired += 1;
                        match state.wheel.get_mut(key) {
                            Slot::Sleep(waker) => {
                                state.pending -= 1;
                                wakers.extend(waker.take());
                            }
                            Slot::Job(_) => {
                                // Pending until it runs; cancel now fails.
                                let Slot::Job(job) = state.wheel.remove(key) else {
                                    unreachable!()
                                };
                                job.task.set_state(EXPIRED);
                                state.ready.push(job);
                            }
                        }
                    }
                }
                fired += 1;
            }
            let next = if drained {
                let next = state.wheel.next_expiration();
                state.armed = next;
                Some(next)
            } else {
                None
            };
            drop(guard);
            wakers.drain(..).for_each(Waker::wake);
            match next {
                Some(next) => return Flushed::Until(next),
                None if fired >= budget => return Flushed::More,
                None => {}
            }
        }
    }

    /// Stores the driver task's waker. Returns `false` if the timer has shut
    /// down (the driver should then finish).
    fn set_driver_waker(&self, waker: &Waker) -> bool {
        let mut state = lock(&self.state);
        if state.shutdown {
            return false;
        }
        if !state.driver.as_ref().is_some_and(|w| w.will_wake(waker)) {
            let old = state.driver.replace(waker.clone());
            drop(state);
            drop(old);
        }
        true
    }

    /// Wakes the driver task, if it is waiting.
    fn wake_driver(&self) {
        let driver = lock(&self.state).driver.clone();
        wake(driver);
    }

    /// Stops the timer: nothing fires any more, every pending sleep's owner
    /// is woken (its next poll reports the shutdown), the driver ends, and
    /// the callbacks that never ran are returned, earliest deadline first.
    /// Idempotent: later calls return nothing.
    pub(crate) fn shutdown(&self) -> Vec<Unfired> {
        let mut guard = lock(&self.state);
        if guard.shutdown {
            return Vec::new();
        }
        let state = &mut *guard;
        state.shutdown = true;
        state.pending = 0;
        self.is_shutdown.store(true, Ordering::Release);
        let mut wakers = Vec::new();
        let mut job_keys = Vec::new();
        for (key, slot) in state.wheel.iter_mut() {
            match slot {
                Slot::Sleep(waker) => {
                    if self.deadlines.get(key) != FIRED {
                        self.deadlines.set(key, SHUTDOWN);
                    }
                    wakers.extend(waker.take());
                }
                Slot::Job(_) => job_keys.push(key),
            }
        }
        state.wheel.unfile_all();
        let mut unfired: Vec<Unfired> = state.ready.drain().collect();
        for key in job_keys {
            if let Slot::Job(job) = state.wheel.remove(key) {
                unfired.push(job);
            }
        }
        unfired.iter().for_each(|job| job.task.set_state(UNFIRED));
        state.armed = None;
        wakers.extend(state.driver.take());
        drop(guard);
        self.disarm();
        wakers.into_iter().for_each(Waker::wake);
        unfired.sort_by_key(|job| job.task.deadline);
        unfired
    }
}

/// Wakes `waker`, if any. Never called with the lock held.
fn wake(waker: Option<Waker>) {
    if let Some(waker) = waker {
        waker.wake();
    }
}

/// What a flush left behind.
#[derive(Debug, PartialEq, Eq)]
enum Flushed {
    /// Everything due has fired; the next entry comes due at this tick.
    Until(Option<u64>),
    /// The budget ran out with more entries due.
    More,
    Shutdown,
}

/// The clock sleep the driver waits on, and the tick it waits for.
struct Arm {
    sleep: Option<ClockSleep>,
    until: Option<u64>,
}

impl std::fmt::Debug for Arm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Arm")
            .field("until", &self.until)
            .finish_non_exhaustive()
    }
}

/// What arming the driver's clock sleep found.
#[derive(Debug, PartialEq, Eq)]
enum Armed {
    /// Waiting: the sleep will wake [`DriverWake`] when the next bucket is
    /// due, or nothing is due and a registration will wake the driver.
    Waiting,
    /// The next bucket is already due: flush again.
    Due,
    /// Someone else is arming it just now; they will see the same state.
    Busy,
}

impl Shared {
    /// Points the driver's clock sleep at the tick the driver is armed for
    /// (as the last flush or a registration left it), polled with `wake`.
    ///
    /// Called by the driver task and by the inline flush in [`DriverWake`].
    /// The latter re-arms right where tokio's time driver woke it, so the
    /// timer keeps time even when the driver task waits behind thousands of
    /// woken tasks in a worker's queue. It only tries the lock: whoever holds
    /// it reads `armed` after any flush that changed it (the lock order is
    /// arm, then state), or the driver task, which it then wakes, does.
    fn arm(&self, wake: &Waker, wait_for_lock: bool) -> Armed {
        let mut arm = if wait_for_lock {
            lock(&self.arm)
        } else {
            match self.arm.try_lock() {
                Ok(arm) => arm,
                Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => return Armed::Busy,
            }
        };
        let next = {
            let state = lock(&self.state);
            if state.shutdown {
                return Armed::Waiting;
            }
            state.armed
        };
        let Some(at) = next.and_then(|tick| self.ticks.instant_of(tick)) else {
            // Nothing is due, ever: a registration will wake the driver.
            let old = arm.sleep.take();
            arm.until = None;
            drop(arm);
            drop(old);
            return Armed::Waiting;
        };
        if arm.until != next || arm.sleep.is_none() {
            // tokio's sleep belongs to the runtime current when it is made.
            let _runtime = self.runtime.as_ref().map(Runtime::enter);
            arm.sleep = Some(self.clock.sleep_until(at));
            arm.until = next;
        }
        let sleep = arm.sleep.as_mut().expect("armed just above");
        if sleep
            .as_mut()
            .poll(&mut Context::from_waker(wake))
            .is_pending()
        {
            Armed::Waiting
        } else {
            Armed::Due
        }
    }

    /// Whether callbacks found due wait for the driver task to run them.
    fn has_ready(&self) -> bool {
        !lock(&self.state).ready.is_empty()
    }

    /// Drops the driver's clock sleep (the timer has shut down).
    fn disarm(&self) {
        let old = lock(&self.arm).sleep.take();
        drop(old);
    }

    /// The turn taken where the clock woke [`DriverWake`]: flush what is
    /// due, then re-arm the clock for the next bucket. Callbacks, a flush
    /// too big for one batch, and a re-arm that someone else is doing are
    /// left to the driver task.
    fn turn_inline(&self, wake: &Waker) {
        // Bounded: under a clock that keeps moving, the driver task takes over.
        for _ in 0..4 {
            match self.flush(INLINE_BATCH) {
                Flushed::Shutdown => return,
                Flushed::More => break,
                Flushed::Until(_) if self.has_ready() => break,
                Flushed::Until(_) => {}
            }
            match self.arm(wake, false) {
                Armed::Waiting => return,
                Armed::Due => {}
                Armed::Busy => break,
            }
        }
        self.wake_driver();
    }
}

/// The waker the driver polls its clock sleep with: when tokio (or a manual
/// clock) fires the sleep, this flushes due entries at once and re-arms.
#[derive(Debug)]
struct DriverWake {
    shared: Weak<Shared>,
}

impl Wake for DriverWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if let Some(shared) = self.shared.upgrade() {
            shared.turn_inline(&Waker::from(self.clone()));
        }
    }
}

/// The driver task of one timer.
///
/// Dropping it (the runtime shutting down, for instance) shuts the timer
/// down.
#[derive(Debug)]
pub(crate) struct Driver {
    shared: Arc<Shared>,
    /// A [`DriverWake`]: what the clock sleep is polled with.
    wake: Waker,
}

impl Future for Driver {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if !self.shared.set_driver_waker(cx.waker()) {
            return Poll::Ready(());
        }
        loop {
            let flushed = self.shared.flush(DRIVER_BATCH);
            // Callbacks found due by this flush, or by an inline one.
            let more_ready = self.shared.run_ready(DRIVER_BATCH);
            if flushed == Flushed::Shutdown {
                return Poll::Ready(());
            }
            if more_ready || flushed == Flushed::More {
                // Yield between batches so the worker serves other tasks.
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            match self.shared.arm(&self.wake, true) {
                Armed::Waiting | Armed::Busy => return Poll::Pending,
                // Time moved while we flushed: go round again.
                Armed::Due => {}
            }
        }
    }
}

impl Drop for Driver {
    /// The runtime is dropping the driver task: shut the timer down. The
    /// callbacks that never ran are dropped.
    fn drop(&mut self) {
        drop(self.shared.shutdown());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: a flush whose clock reading is older than the wheel's
    /// time must not spin on an entry due between the two.
    #[tokio::test]
    async fn flush_with_a_stale_now_terminates() {
        let (shared, driver) =
            Shared::new(Config::default(), Arc::new(crate::clock::TokioClock), None);
        let key = {
            let mut state = lock(&shared.state);
            assert_eq!(state.wheel.poll(10), None);
            // Due at 8: the wheel, at 10, puts it straight in the due list.
            let (key, _) = state
                .wheel
                .insert(8, Slot::Sleep(Some(Waker::noop().clone())));
            state.pending += 1;
            shared.deadlines.ensure(key);
            shared.deadlines.set(key, 8);
            key
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let flusher = shared.clone();
        std::thread::spawn(move || {
            let _ = tx.send(flusher.flush_at(5, usize::MAX));
        });
        let Ok(flushed) = rx.recv_timeout(Duration::from_secs(10)) else {
            // The spinning flush holds the lock: dropping these would block.
            std::mem::forget((driver, shared));
            panic!("flush with a stale `now` never returned");
        };
        assert_eq!(flushed, Flushed::Until(None));
        assert_eq!(shared.deadlines.get(key), FIRED);
        assert_eq!(shared.pending(), 0);
    }
}
