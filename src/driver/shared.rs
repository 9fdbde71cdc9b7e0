//! The state a timer shares between its handles, its sleeps and its
//! driver, and the operations the async layer calls on it: filing a sleep,
//! re-filing it, swapping its waker, removing it, scheduling and cancelling
//! callbacks, telling the driver of an earlier bucket, and shutting down.
//! The flush is in [`flush`](super::flush), the driver task in
//! [`task`](super::task), both above this module: the state holds the
//! clock sleep the driver waits on ([`Arm`]) and the driver task's waker,
//! but never makes or names the driver itself.
//!
//! # Ground rules
//!
//! * The entries are split into shards, one per runtime worker, each with
//!   its own lock and wheel, so workers registering and cancelling timers do
//!   not contend: a sleep goes to the shard of the thread that first polls
//!   it, and stays there. Callbacks all live in shard 0. A shard's
//!   [`State`] is only touched with its lock held.
//! * [`Control`] (the driver's waker, the tick it is armed for) has a lock
//!   of its own, never taken while a shard's is held. A registration that
//!   gives its shard a new earliest bucket then tells the driver through
//!   it ([`Shared::request`]); arming reads every shard's earliest bucket
//!   plus the requests made meanwhile ([`Shared::arm`]), so none is missed.
//! * Wakers are never woken, and never dropped, with the lock held: they are
//!   moved out and handled after it is released.
//! * The per-entry deadline words (one table per shard) follow the rules in
//!   [`deadlines`](super::deadlines), "the timer lock" being the shard's; the
//!   scheduled callbacks' state, the rules in [`jobs`](super::jobs).
//! * A slab key belongs to the sleep that registered it until that sleep
//!   deregisters it (on drop), even after it fired; so a key is never reused
//!   while anyone could still write its deadline word. A callback's key is
//!   freed when it is found due or cancelled; nobody writes its word
//!   without the lock.

use std::task::Waker;
use std::time::Duration;

use crate::clock::{Clock, ClockSleep};
use crate::error::Error;
use crate::rt::Runtime;
use crate::shim::shard_lock::ShardLock;
use crate::sync::{lock, Arc, AtomicBool, AtomicU64, Mutex, Ordering};
use crate::ticks::{earliest, Ticks};
use crate::wheel::{Key, Wheel};
use crate::Instant;

use super::deadlines::{DeadlineTable, Status};
use super::entry::{pack, unpack, EntryKey, Filing, MAX_SHARDS};
use super::jobs::{Job, ReadyQueue, Task, CANCELLED, EXPIRED, PENDING, UNFIRED};

/// The timer's configuration, fixed at build time.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Config {
    pub(crate) tick: Duration,
    pub(crate) wheel_size: usize,
    /// Most pending entries before `schedule` refuses more.
    pub(crate) max_pending: usize,
    /// How many shards to split the entries into (the runtime's workers).
    pub(crate) shards: usize,
}

/// A snapshot of a timer's counters.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Counters {
    pub(crate) wakeups: u64,
    pub(crate) fired: u64,
    pub(crate) cascaded: u64,
    pub(crate) pending: usize,
}

/// What a wheel entry is for. 16 bytes, a sleep's waker: there is one per
/// pending timer.
#[derive(Debug)]
pub(super) enum Slot {
    /// A sleep: the waker to wake when it fires. Firing wakes a clone and
    /// keeps it, so the entry still has it if its sleep is reset, and the
    /// sleep itself need not hold a clone: the owner's last registered
    /// waker is always here until the sleep is dropped (or the timer shuts
    /// down, which takes it, leaving a no-op waker).
    Sleep(Waker),
    /// A scheduled callback.
    Job(Job),
}

impl Slot {
    /// The waker of a sleep's entry.
    fn waker(&mut self) -> &mut Waker {
        match self {
            Slot::Sleep(waker) => waker,
            Slot::Job(_) => unreachable!("a sleep's key holds a callback"),
        }
    }
}

/// Takes a sleep's waker, leaving one that does nothing.
fn take_waker(waker: &mut Waker) -> Waker {
    std::mem::replace(waker, Waker::noop().clone())
}

/// A callback that never ran because its timer shut down; see
/// [`Timer::shutdown`](crate::Timer::shutdown).
pub(crate) type Unfired = Job;

/// What a shard's lock guards.
#[derive(Debug)]
pub(super) struct State {
    /// The entries.
    pub(super) wheel: Wheel<Slot>,
    /// Callbacks found due, waiting for the driver task (shard 0 only).
    pub(super) ready: ReadyQueue,
    /// The earliest tick the driver has been told this shard needs a turn
    /// at: the wheel's next due bucket as of the last flush, or sooner if a
    /// registration has made an earlier one since.
    pub(super) next: Option<u64>,
    /// Sleeps whose word is an ordinary tick (registered, and neither
    /// fired nor removed), plus callbacks that have neither run nor been
    /// cancelled.
    pub(super) pending: usize,
    /// Entries fired: sleeps woken and callbacks found due.
    pub(super) fired: u64,
    pub(super) shutdown: bool,
}

/// One shard: a wheel behind its own lock, and its entries' deadline words.
#[derive(Debug)]
pub(super) struct Shard {
    pub(super) state: ShardLock<State>,
    pub(super) deadlines: DeadlineTable,
}

/// The clock sleep the driver waits on, and the tick it waits for. Part of
/// the shared state because both the driver task and the waker the clock
/// fires re-arm it (see `Shared::arm` in [`task`](super::task)).
pub(crate) struct Arm {
    pub(super) sleep: Option<ClockSleep>,
    pub(super) until: Option<u64>,
}

impl std::fmt::Debug for Arm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Arm")
            .field("until", &self.until)
            .finish_non_exhaustive()
    }
}

/// What the driver is armed for, and how to wake it.
#[derive(Debug, Default)]
pub(super) struct Control {
    /// The tick the driver will next run at (its sleep's deadline, or sooner
    /// if it has been woken), or `None` if it waits for a registration.
    pub(super) armed: Option<u64>,
    /// The earliest tick requested by registrations since arming began.
    pub(super) requested: Option<u64>,
    /// The driver task's waker.
    pub(super) driver: Option<Waker>,
    /// Flushes run: the driver's turns (see [`crate::Stats`]).
    pub(super) wakeups: u64,
    pub(super) shutdown: bool,
}

/// The state one timer shares between its handles, sleeps and driver.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(super) shards: Box<[Shard]>,
    pub(super) control: Mutex<Control>,
    /// `Control::armed` (`u64::MAX` for `None`), readable without its lock.
    /// A registration uses it only to skip a clock read: see
    /// [`Shared::register`].
    pub(super) armed_at: AtomicU64,
    pub(super) ticks: Ticks,
    pub(super) config: Config,
    pub(super) clock: Arc<dyn Clock>,
    /// The runtime the driver runs on, entered to read the clock or arm it
    /// from elsewhere (`None` in the loom models, which have none).
    pub(super) runtime: Option<Runtime>,
    /// The clock sleep the driver waits on. Both the driver task and the
    /// inline flush where the clock fires re-arm it (`Shared::arm`, in
    /// [`task`](super::task)).
    pub(super) arm: Mutex<Arm>,
    pub(super) is_shutdown: AtomicBool,
    /// Set when the runtime dropped the driver task before the timer was
    /// shut down otherwise: the runtime is shutting down (see
    /// [`Shared::shut_down_by_this_runtime`]).
    pub(super) runtime_gone: AtomicBool,
}

impl Shared {
    /// Creates a timer's state, its clock sleep armed for the first turn.
    /// The driver task is made from it by
    /// [`Driver::new`](super::task::Driver::new) (see [`super::timer`]).
    ///
    /// # Panics
    ///
    /// If the clock cannot make a sleep (tokio's, on a runtime without its
    /// time driver), at the caller's location.
    #[track_caller]
    pub(crate) fn new(
        config: Config,
        clock: Arc<dyn Clock>,
        runtime: Option<Runtime>,
    ) -> Arc<Shared> {
        let now = clock.now();
        // Made now rather than on the driver's first turn so that a runtime
        // without tokio's time driver fails in the caller, with tokio's
        // message, not later inside the driver task.
        let first = clock.sleep_until(now);
        let shards = (0..config.shards.clamp(1, MAX_SHARDS))
            .map(|_| Shard {
                state: ShardLock::new(State {
                    wheel: Wheel::new(config.wheel_size),
                    ready: ReadyQueue::default(),
                    next: None,
                    pending: 0,
                    fired: 0,
                    shutdown: false,
                }),
                deadlines: DeadlineTable::new(),
            })
            .collect();
        Arc::new(Shared {
            shards,
            control: Mutex::new(Control::default()),
            armed_at: AtomicU64::new(u64::MAX),
            ticks: Ticks::new(now, config.tick),
            config,
            clock,
            runtime,
            arm: Mutex::new(Arm {
                sleep: Some(first),
                until: Some(0),
            }),
            is_shutdown: AtomicBool::new(false),
            runtime_gone: AtomicBool::new(false),
        })
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

    #[inline]
    pub(crate) fn ticks(&self) -> &Ticks {
        &self.ticks
    }

    /// The shard sleeps first polled on this thread go to.
    fn home_shard(&self) -> usize {
        match self.shards.len() {
            1 => 0,
            n => match crate::rt::home_index() {
                index if index < n => index,
                index => index % n,
            },
        }
    }

    /// The shard and wheel key of `key`.
    #[inline]
    fn shard_of(&self, key: EntryKey) -> (&Shard, Key) {
        let (shard, key) = unpack(key);
        (&self.shards[shard], key)
    }

    /// The status of entry `key` (see [`deadlines`](super::deadlines)).
    #[inline]
    pub(crate) fn status_of(&self, key: EntryKey) -> Status {
        let (shard, key) = self.shard_of(key);
        shard.deadlines.status(key)
    }

    /// Whether entry `key` fired for the tick its owner wants (read by
    /// the owner; see [`DeadlineTable::is_done`]).
    pub(crate) fn is_done(&self, key: EntryKey) -> bool {
        let (shard, key) = self.shard_of(key);
        shard.deadlines.is_done(key)
    }

    /// Moves entry `key`'s wanted deadline later without a lock; see
    /// [`DeadlineTable::try_extend`].
    #[inline]
    pub(crate) fn try_extend(&self, key: EntryKey, tick: u64) -> bool {
        let (shard, key) = self.shard_of(key);
        shard.deadlines.try_extend(key, tick)
    }

    pub(crate) fn is_shutdown(&self) -> bool {
        self.is_shutdown.load(Ordering::Acquire)
    }

    /// Whether the timer shut down because the runtime running its driver
    /// is shutting down, and the caller runs on that same runtime: it is
    /// polling a task the runtime is about to drop. (tokio drops its own
    /// time driver only after the tasks, so its sleeps never see this; a
    /// driver that is a task can be dropped while another worker still
    /// polls.) Such a sleep stays pending instead of panicking. Anywhere
    /// else, a sleep of a timer that is gone would never complete, and its
    /// poll says so.
    pub(crate) fn shut_down_by_this_runtime(&self) -> bool {
        self.runtime_gone.load(Ordering::Acquire)
            && self.runtime.as_ref().is_some_and(|runtime| {
                Runtime::try_current().is_some_and(|current| current.id() == runtime.id())
            })
    }

    /// How many entries are registered and have neither fired nor been
    /// removed.
    pub(crate) fn pending(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| shard.state.lock().pending)
            .sum()
    }

    /// [`pending`](Self::pending) if no shard's lock is held right now; for
    /// `Debug`, which may run under one (in a waker's clone) and must not
    /// wait for it.
    pub(crate) fn try_pending(&self) -> Option<usize> {
        let count = |shard: &Shard| shard.state.try_lock().map(|state| state.pending);
        self.shards.iter().map(count).sum()
    }

    /// The timer's counters, each shard's read under its lock.
    pub(crate) fn counters(&self) -> Counters {
        let mut counters = Counters {
            wakeups: lock(&self.control).wakeups,
            fired: 0,
            cascaded: 0,
            pending: 0,
        };
        for shard in self.shards.iter() {
            let state = shard.state.lock();
            counters.fired += state.fired;
            counters.cascaded += state.wheel.cascaded();
            counters.pending += state.pending;
        }
        counters
    }

    /// The current tick, by the timer's own clock.
    ///
    /// Registrations, locked resets and `schedule` read it so that a
    /// deadline already passed completes at once. The wheel's own time cannot
    /// answer that: it only moves when something comes due, and the driver
    /// may not have run since the clock last moved.
    pub(crate) fn now_tick(&self) -> u64 {
        self.ticks.now_tick(self.own_now())
    }

    /// Files a new entry due at `tick` that wakes `waker`, in this thread's
    /// shard, or reports that its deadline has already been reached.
    #[inline]
    pub(crate) fn register(&self, tick: u64, waker: &Waker) -> Filing {
        let index = self.home_shard();
        let shard = &self.shards[index];
        // A deadline the wheel has not seen pass may still have passed: the
        // wheel's time only moves when something is due. If the driver is
        // armed for this tick or earlier, its turn comes no later than this
        // entry's, so the entry fires then, without a clock read here (the
        // common case: guards registered behind the earliest one; tokio
        // behaves so too, relative to its driver's last turn). Otherwise (the
        // driver idle, or armed later), ask the timer's own clock.
        // (`armed_at` may be stale; if it is too early, the entry still
        // tells the driver below, so it fires on the driver's next turn at
        // the latest.) The clock and the waker's clone are the caller's
        // code (a `Clock`, a waker's vtable): both run before the shard's
        // spin lock is taken, never under it (an early return drops the
        // clone after the guard).
        let now = (self.armed_at.load(Ordering::Relaxed) > tick).then(|| self.now_tick());
        let slot = Slot::Sleep(waker.clone());
        let mut state = shard.state.lock();
        if state.shutdown {
            return Filing::Shutdown;
        }
        if tick <= state.wheel.elapsed() {
            return Filing::Elapsed;
        }
        if let Some(now) = now {
            if tick <= now {
                return Filing::Elapsed;
            }
            // The clock has been read anyway: bring this shard's wheel up to
            // it. After an idle stretch the wheel's time lags, and then this
            // entry would land in a coarse bucket that already started (a
            // needless cascade), and a passed deadline registered behind it
            // would wait for the driver's turn instead of completing at once.
            state.wheel.catch_up(now);
        }
        let (key, due_at) = state.wheel.insert(tick, slot);
        state.pending += 1;
        shard.deadlines.init(key, tick);
        let tell = note_due_at(&mut state, due_at);
        drop(state);
        if tell {
            self.request(due_at);
        }
        Filing::Filed {
            key: pack(index, key),
        }
    }

    /// Files entry `key` again, at `tick`: the locked path of a reset (to an
    /// earlier deadline, or after the entry fired). `now` is the current
    /// tick, read by the caller from the timer's clock; if the deadline has
    /// been reached the entry is recorded as done. An entry that fired kept
    /// its waker, which it wakes again. After shutdown the entry is marked
    /// so that its owner's next poll reports the shutdown.
    pub(crate) fn refile(&self, entry: EntryKey, tick: u64, now: u64) -> Filing {
        let (shard, key) = self.shard_of(entry);
        let mut state = shard.state.lock();
        let (filing, tell) = refile_locked(shard, &mut state, key, tick, now);
        drop(state);
        if let Some(due_at) = tell {
            self.request(due_at);
        }
        match filing {
            Filing::Filed { .. } => Filing::Filed { key: entry },
            other => other,
        }
    }

    /// The locked path of a poll: makes `waker` the one entry `key` wakes.
    /// An entry that fired for a deadline its owner has since moved later
    /// (see [`deadlines`](super::deadlines)) is filed again at the one it
    /// wants. Returns `Elapsed` if the entry is done (the waker is then not
    /// stored).
    pub(crate) fn update_waker(&self, entry: EntryKey, waker: &Waker) -> Filing {
        let (shard, key) = self.shard_of(entry);
        // Cloned before the lock, as in `register`.
        let waker = waker.clone();
        let mut state = shard.state.lock();
        if state.shutdown {
            return Filing::Shutdown;
        }
        let mut tell = None;
        if shard.deadlines.status(key) == Status::Fired {
            if shard.deadlines.is_done(key) {
                return Filing::Elapsed;
            }
            let wanted = shard.deadlines.wanted(key);
            // No clock read under the lock: the wheel's time is never ahead
            // of it, so this is never early; if the deadline has passed by
            // the clock but not by the wheel, the driver's next turn fires it.
            let (filing, due_at) = refile_locked(shard, &mut state, key, wanted, 0);
            if filing == Filing::Elapsed {
                return filing;
            }
            tell = due_at;
        }
        let old = std::mem::replace(state.wheel.get_mut(key).waker(), waker);
        drop(state);
        drop(old);
        if let Some(due_at) = tell {
            self.request(due_at);
        }
        Filing::Filed { key: entry }
    }

    /// Removes entry `key` for good (its sleep is being dropped).
    #[inline]
    pub(crate) fn deregister(&self, entry: EntryKey) {
        let (shard, key) = self.shard_of(entry);
        let mut state = shard.state.lock();
        // A sleep's entry is filed exactly while its word holds an ordinary
        // tick (shutdown unfiles all), so the count needs no look at it.
        let (slot, filed) = state.wheel.remove_filed(key);
        debug_assert_eq!(
            filed,
            !state.shutdown && shard.deadlines.status(key) == Status::Filed
        );
        state.pending -= usize::from(filed);
        drop(state);
        drop(slot);
    }

    /// Schedules `run` to run on the driver task at `deadline` (`tick` in
    /// ticks). Callbacks live in shard 0.
    pub(crate) fn schedule(
        self: &Arc<Self>,
        deadline: Instant,
        tick: u64,
        run: Box<dyn FnOnce() + Send + 'static>,
    ) -> Result<Arc<Task>, Error> {
        // Read the clock before taking the lock: a deadline already passed
        // runs on the driver's next turn even if the driver lags the clock.
        let now = self.now_tick();
        // Sleeps in other shards count towards the capacity too. They are
        // never refused, so a count taken just before is as good as any;
        // callbacks, all in shard 0, are counted under its lock. Without
        // a capacity there is nothing to count.
        let elsewhere: usize = if self.config.max_pending == usize::MAX {
            0
        } else {
            self.shards[1..]
                .iter()
                .map(|shard| shard.state.lock().pending)
                .sum()
        };
        let shard = &self.shards[0];
        let mut state = shard.state.lock();
        if state.shutdown {
            return Err(Error::Shutdown);
        }
        if state.pending.saturating_add(elsewhere) >= self.config.max_pending {
            return Err(Error::AtCapacity);
        }
        state.pending += 1;
        let task = Arc::new(Task::new(deadline, state.wheel.vacant_key(), run));
        let job = Job { task: task.clone() };
        let mut tell = None;
        if tick <= now || tick <= state.wheel.elapsed() {
            task.set_state(EXPIRED);
            state.ready.push(job);
            drop(state);
            self.wake_driver();
            return Ok(task);
        } else {
            // As in `register`: file it against the present.
            state.wheel.catch_up(now);
            let (key, due_at) = state.wheel.insert(tick, Slot::Job(job));
            debug_assert_eq!(key, task.key);
            shard.deadlines.init(key, tick);
            if note_due_at(&mut state, due_at) {
                tell = Some(due_at);
            }
        }
        drop(state);
        if let Some(due_at) = tell {
            self.request(due_at);
        }
        Ok(task)
    }

    /// Cancels `task`'s callback. Returns `true` if this call stopped it
    /// from running.
    pub(crate) fn cancel(&self, task: &Task) -> bool {
        if task.state() != PENDING {
            return false;
        }
        let mut state = self.shards[0].state.lock();
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

    /// Tells the driver that an entry comes out of a wheel at `due_at`,
    /// waking it if that is sooner than it is armed for. Called after the
    /// shard's lock is released.
    fn request(&self, due_at: u64) {
        let mut control = lock(&self.control);
        control.requested = earliest(control.requested, Some(due_at));
        let driver = if control.armed.is_some_and(|armed| armed <= due_at) {
            None
        } else {
            control.armed = Some(due_at);
            self.armed_at.store(due_at, Ordering::Relaxed);
            control.driver.clone()
        };
        drop(control);
        wake(driver);
    }

    /// Drops the driver's clock sleep (the timer has shut down).
    fn disarm(&self) {
        let old = lock(&self.arm).sleep.take();
        drop(old);
    }

    /// Wakes the driver task, if it is waiting.
    pub(super) fn wake_driver(&self) {
        let driver = lock(&self.control).driver.clone();
        wake(driver);
    }

    /// Stops the timer: nothing fires any more, every pending sleep's owner
    /// is woken (its next poll reports the shutdown), the driver ends, and
    /// the callbacks that never ran are returned, earliest deadline first.
    /// Idempotent: later calls return nothing.
    pub(crate) fn shutdown(&self) -> Vec<Unfired> {
        let mut wakers = Vec::new();
        {
            let mut control = lock(&self.control);
            if control.shutdown {
                return Vec::new();
            }
            control.shutdown = true;
            control.armed = None;
            self.armed_at.store(u64::MAX, Ordering::Relaxed);
            wakers.extend(control.driver.take());
        }
        self.is_shutdown.store(true, Ordering::Release);
        let mut unfired: Vec<Unfired> = Vec::new();
        for shard in self.shards.iter() {
            let mut guard = shard.state.lock();
            let state = &mut *guard;
            state.shutdown = true;
            state.pending = 0;
            let mut job_keys = Vec::new();
            for (key, slot) in state.wheel.iter_mut() {
                match slot {
                    Slot::Sleep(waker) => {
                        shard.deadlines.shut_down(key);
                        wakers.push(take_waker(waker));
                    }
                    Slot::Job(_) => job_keys.push(key),
                }
            }
            state.wheel.unfile_all();
            let first = unfired.len();
            unfired.extend(state.ready.drain());
            for key in job_keys {
                if let Slot::Job(job) = state.wheel.remove(key) {
                    unfired.push(job);
                }
            }
            // Under the lock, as every change of a callback's state.
            unfired[first..]
                .iter()
                .for_each(|job| job.task.set_state(UNFIRED));
            state.next = None;
        }
        self.disarm();
        wakers.into_iter().for_each(Waker::wake);
        unfired.sort_by_key(|job| job.task.deadline);
        unfired
    }
}

/// [`Shared::refile`] with the shard's lock held: returns what became of
/// the entry (its key in the shard, if filed) and the tick to
/// [`request`](Shared::request) once the lock is released, if any.
fn refile_locked(
    shard: &Shard,
    state: &mut State,
    key: Key,
    tick: u64,
    now: u64,
) -> (Filing, Option<u64>) {
    if state.shutdown {
        shard.deadlines.mark_shutdown(key);
        return (Filing::Shutdown, None);
    }
    // Counted as pending: entries filed.
    state.pending -= usize::from(shard.deadlines.status(key) == Status::Filed);
    if tick <= now || tick <= state.wheel.elapsed() {
        state.wheel.unfile(key);
        shard.deadlines.complete(key, tick);
        (Filing::Elapsed, None)
    } else {
        state.pending += 1;
        // As in `register`: file it against the present, so that the
        // wheel does not lag the clock after an idle stretch.
        state.wheel.catch_up(now);
        let due_at = state.wheel.reset(key, tick);
        shard.deadlines.file(key, tick);
        let tell = note_due_at(state, due_at).then_some(due_at);
        (Filing::Filed { key }, tell)
    }
}

/// Records that an entry will come out of a shard's wheel at `due_at`.
/// Returns whether that is sooner than the driver has been told of, in
/// which case the caller must [`request`](Shared::request) it once the
/// shard's lock is released.
fn note_due_at(state: &mut State, due_at: u64) -> bool {
    if state.next.is_some_and(|next| next <= due_at) {
        return false;
    }
    state.next = Some(due_at);
    true
}

/// Wakes `waker`, if any. Never called with the lock held.
fn wake(waker: Option<Waker>) {
    if let Some(waker) = waker {
        waker.wake();
    }
}

impl Drop for Shared {
    /// The last owner of a [`Lifetime::Owners`](super::task::Lifetime::Owners)
    /// timer is gone: wake its driver task so that it ends. (Callbacks that
    /// never ran are dropped with the wheel.)
    fn drop(&mut self) {
        let driver = lock(&self.control).driver.take();
        wake(driver);
    }
}
