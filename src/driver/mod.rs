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
//! woken. Each flush is bounded ([`INLINE_BATCH`], [`DRIVER_BATCH`]), and
//! so is each lock hold within it ([`WAKE_CHUNK`], with a coarse bucket's
//! entries moved down a few dozen at a time); the driver task carries on
//! with the rest, yielding between batches, so a million simultaneous
//! expiries never monopolise a worker or a shard's lock. At each batch,
//! sleeps that came due meanwhile go first ([`Wheel::overtake`]), so a
//! sleep due just after a storm is not held behind all of it; callbacks
//! never overtake, so they still run earliest deadline first.
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
//!   [`deadlines`], "the timer lock" being the shard's; the
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
use crate::sync::{lock, Arc, AtomicBool, AtomicU64, Mutex, Ordering, ShardLock, Weak};
use crate::wheel::{Key, Polled, Wheel};
use crate::Instant;

use self::deadlines::{DeadlineTable, Due, FIRED, SHUTDOWN};
use self::jobs::{Job, ReadyQueue, Task, CANCELLED, EXPIRED, PENDING, UNFIRED};
use self::ticks::{earliest, Ticks, MAX_TICK};

/// Most entries fired by the waker tokio calls, before it hands the rest to
/// the driver task.
const INLINE_BATCH: usize = 1024;
/// Most entries the driver task fires before it yields to other tasks.
const DRIVER_BATCH: usize = 1024;
/// Wakers collected per lock hold (tokio uses 32 too).
const WAKE_CHUNK: usize = 32;
/// What one step of draining a coarse bucket counts for against
/// [`WAKE_CHUNK`]: so a lock hold moves at most 4 steps' worth of entries.
const STEP_UNITS: usize = 8;

/// An entry's key as sleeps and callbacks hold it: its shard and its key in
/// that shard's wheel, packed in one word.
pub(crate) type EntryKey = usize;

/// Low bits of an [`EntryKey`] that name the shard.
const SHARD_BITS: u32 = 6;
/// Most shards a timer has.
pub(crate) const MAX_SHARDS: usize = 1 << SHARD_BITS;

fn pack(shard: usize, key: Key) -> EntryKey {
    debug_assert!(shard < MAX_SHARDS);
    (key << SHARD_BITS) | shard
}

fn unpack(key: EntryKey) -> (usize, Key) {
    (key & (MAX_SHARDS - 1), key >> SHARD_BITS)
}

/// The outcome of asking the timer to file a sleep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Filing {
    /// Filed under `key`.
    Filed { key: EntryKey },
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
    /// How many shards to split the entries into (the runtime's workers).
    pub(crate) shards: usize,
}

/// What a wheel entry is for. 16 bytes, a sleep's waker: there is one per
/// pending timer.
#[derive(Debug)]
enum Slot {
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
struct State {
    /// The entries.
    wheel: Wheel<Slot>,
    /// Callbacks found due, waiting for the driver task (shard 0 only).
    ready: ReadyQueue,
    /// The earliest tick the driver has been told this shard needs a turn
    /// at: the wheel's next due bucket as of the last flush, or sooner if a
    /// registration has made an earlier one since.
    next: Option<u64>,
    /// Sleeps whose word is an ordinary tick (registered, and neither
    /// fired nor removed), plus callbacks that have neither run nor been
    /// cancelled.
    pending: usize,
    /// Entries fired: sleeps woken and callbacks found due.
    fired: u64,
    shutdown: bool,
}

/// One shard: a wheel behind its own lock, and its entries' deadline words.
#[derive(Debug)]
struct Shard {
    state: ShardLock<State>,
    deadlines: DeadlineTable,
}

/// What the driver is armed for, and how to wake it.
#[derive(Debug, Default)]
struct Control {
    /// The tick the driver will next run at (its sleep's deadline, or sooner
    /// if it has been woken), or `None` if it waits for a registration.
    armed: Option<u64>,
    /// The earliest tick requested by registrations since arming began.
    requested: Option<u64>,
    /// The driver task's waker.
    driver: Option<Waker>,
    /// Flushes run: the driver's turns (see [`crate::Stats`]).
    wakeups: u64,
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
    shards: Box<[Shard]>,
    control: Mutex<Control>,
    /// `Control::armed` (`u64::MAX` for `None`), readable without its lock.
    /// A registration uses it only to skip a clock read: see
    /// [`Shared::register`].
    armed_at: AtomicU64,
    ticks: Ticks,
    config: Config,
    clock: Arc<dyn Clock>,
    /// The runtime the driver runs on, entered to read the clock or arm it
    /// from elsewhere (`None` in the loom models, which have none).
    runtime: Option<Runtime>,
    /// The clock sleep the driver waits on. Both the driver task and the
    /// inline flush in [`DriverWake`] re-arm it; see [`Shared::arm`].
    arm: Mutex<Arm>,
    is_shutdown: AtomicBool,
    /// Set when the runtime dropped the driver task before the timer was
    /// shut down otherwise: the runtime is shutting down (see
    /// [`Shared::shut_down_by_this_runtime`]).
    runtime_gone: AtomicBool,
}

impl Shared {
    /// Creates a timer's state and its driver future, which the caller must
    /// spawn on a runtime.
    ///
    /// # Panics
    ///
    /// If the clock cannot make a sleep (tokio's, on a runtime without its
    /// time driver), at the caller's location.
    ///
    /// With [`Lifetime::Runtime`] the driver keeps the timer alive until the
    /// runtime drops it (a runtime's default timer); with
    /// [`Lifetime::Owners`] it holds it weakly, so the timer ends when its
    /// last owner (a `Timer`, `Handle` or future) is dropped.
    #[track_caller]
    pub(crate) fn new(
        config: Config,
        clock: Arc<dyn Clock>,
        runtime: Option<Runtime>,
        lifetime: Lifetime,
    ) -> (Arc<Shared>, Driver) {
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
        let shared = Arc::new(Shared {
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
        });
        let wake = Waker::from(Arc::new(DriverWake {
            shared: Arc::downgrade(&shared),
        }));
        let driver = Driver {
            shared: match lifetime {
                Lifetime::Runtime => DriverRef::Strong(shared.clone()),
                Lifetime::Owners => DriverRef::Weak(Arc::downgrade(&shared)),
            },
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
    fn shard_of(&self, key: EntryKey) -> (&Shard, Key) {
        let (shard, key) = unpack(key);
        (&self.shards[shard], key)
    }

    /// The deadline word of entry `key` (see [`deadlines`]).
    pub(crate) fn deadline_of(&self, key: EntryKey) -> u64 {
        let (shard, key) = self.shard_of(key);
        shard.deadlines.get(key)
    }

    /// Moves entry `key`'s wanted deadline later without a lock; see
    /// [`DeadlineTable::try_extend`].
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
    /// been reached the entry is settled as fired. An entry that fired kept
    /// its waker, which it wakes again. After shutdown the entry is marked
    /// so that its owner's next poll reports the shutdown.
    pub(crate) fn refile(&self, entry: EntryKey, tick: u64, now: u64) -> Filing {
        let (shard, key) = self.shard_of(entry);
        let mut state = shard.state.lock();
        if state.shutdown {
            shard.deadlines.set(key, SHUTDOWN);
            return Filing::Shutdown;
        }
        let before = shard.deadlines.get(key);
        // Counted as pending: entries that want an ordinary tick.
        state.pending -= usize::from(before <= MAX_TICK);
        if tick <= now || tick <= state.wheel.elapsed() {
            state.wheel.unfile(key);
            shard.deadlines.set(key, FIRED);
            drop(state);
            Filing::Elapsed
        } else {
            state.pending += 1;
            // As in `register`: file it against the present, so that the
            // wheel does not lag the clock after an idle stretch.
            state.wheel.catch_up(now);
            let due_at = state.wheel.reset(key, tick);
            shard.deadlines.set(key, tick);
            let tell = note_due_at(&mut state, due_at);
            drop(state);
            if tell {
                self.request(due_at);
            }
            Filing::Filed { key: entry }
        }
    }

    /// Makes `waker` the one entry `key` wakes. Returns `Elapsed` if the
    /// entry fired meanwhile (the waker is then not stored).
    pub(crate) fn update_waker(&self, entry: EntryKey, waker: &Waker) -> Filing {
        let (shard, key) = self.shard_of(entry);
        // Cloned before the lock, as in `register`.
        let waker = waker.clone();
        let mut state = shard.state.lock();
        if state.shutdown {
            return Filing::Shutdown;
        }
        if shard.deadlines.get(key) == FIRED {
            return Filing::Elapsed;
        }
        let old = std::mem::replace(state.wheel.get_mut(key).waker(), waker);
        drop(state);
        drop(old);
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
            !state.shutdown && shard.deadlines.get(key) <= MAX_TICK
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
        let task = Arc::new(Task::new(
            deadline,
            state.wheel.vacant_key(),
            Arc::downgrade(self),
            run,
        ));
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

    /// Runs up to `budget` due callbacks, earliest deadline first, outside
    /// the lock. Returns `true` if more are waiting.
    fn run_ready(&self, budget: usize) -> bool {
        let mut batch = Vec::with_capacity(WAKE_CHUNK);
        let mut ran = 0;
        loop {
            let mut state = self.shards[0].state.lock();
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

    /// Fires up to about `budget` due entries, waking their owners outside
    /// the lock, then records each shard's next due tick.
    fn flush(&self, budget: usize) -> Flushed {
        self.flush_at(self.ticks.now_tick(self.own_now()), budget)
    }

    /// [`Shared::flush`] with the clock already read: `now` is a tick.
    fn flush_at(&self, now: u64, budget: usize) -> Flushed {
        {
            let mut control = lock(&self.control);
            if control.shutdown {
                return Flushed::Shutdown;
            }
            control.wakeups += 1;
        }
        let mut fired = 0;
        let mut result = Flushed::Done;
        for shard in self.shards.iter() {
            match self.flush_shard(shard, now, budget.saturating_sub(fired)) {
                (_, Flushed::Shutdown) => return Flushed::Shutdown,
                (n, Flushed::More) => {
                    fired += n;
                    result = Flushed::More;
                }
                (n, Flushed::Done) => fired += n,
            }
        }
        result
    }

    /// Flushes one shard; returns how many entries it fired. It stops at
    /// `budget` entries fired, or `budget` steps of moving entries from
    /// coarse buckets into finer ones (each at most
    /// [`CASCADE_STEP`](crate::wheel::CASCADE_STEP) entries), whichever comes first.
    fn flush_shard(&self, shard: &Shard, now: u64, budget: usize) -> (usize, Flushed) {
        let mut wakers: Vec<Waker> = Vec::new();
        let mut fired = 0;
        let mut steps = 0;
        loop {
            let mut guard = shard.state.lock();
            if guard.shutdown {
                return (fired, Flushed::Shutdown);
            }
            let state = &mut *guard;
            // Another flush (the inline one, or the driver task on another
            // worker) may have read the clock later and moved the wheel past
            // our `now` between two of our chunks. The wheel's time is never
            // ahead of the real time, so catching up is still never early,
            // and it matters: an entry wanted later than a stale `now` but
            // not later than the wheel's time would be re-filed straight
            // back into the due list, forever.
            let now = now.max(state.wheel.elapsed());
            let mut drained = false;
            if fired == 0 && steps == 0 {
                // A new batch: sleeps that came due since go first.
                let is_sleep = |slot: &Slot| matches!(slot, Slot::Sleep(_));
                state.wheel.overtake(now, WAKE_CHUNK, is_sleep);
            }
            // Bounded per lock hold: callbacks found due add no waker;
            // moving a coarse bucket's entries (32 a step) counts as a few.
            let mut units = 0;
            while units < WAKE_CHUNK {
                units += 1;
                let key = match state.wheel.poll_step(now) {
                    Polled::Due(key) => key,
                    Polled::Busy => {
                        steps += 1;
                        units += STEP_UNITS - 1;
                        continue;
                    }
                    Polled::Idle => {
                        drained = true;
                        break;
                    }
                };
                match shard.deadlines.settle(key, now) {
                    Due::Later(tick) => {
                        state.wheel.reset(key, tick);
                    }
                    Due::Fire => {
                        state.fired += 1;
                        match state.wheel.get_mut(key) {
                            Slot::Sleep(waker) => {
                                state.pending -= 1;
                                wakers.push(waker.clone());
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
            if drained {
                state.next = state.wheel.next_expiration();
            }
            drop(guard);
            wakers.drain(..).for_each(Waker::wake);
            if drained {
                return (fired, Flushed::Done);
            }
            if fired >= budget || steps >= budget {
                return (fired, Flushed::More);
            }
        }
    }

    /// Stores the driver task's waker. Returns `false` if the timer has shut
    /// down (the driver should then finish).
    fn set_driver_waker(&self, waker: &Waker) -> bool {
        let mut control = lock(&self.control);
        if control.shutdown {
            return false;
        }
        if !control.driver.as_ref().is_some_and(|w| w.will_wake(waker)) {
            let old = control.driver.replace(waker.clone());
            drop(control);
            drop(old);
        }
        true
    }

    /// Wakes the driver task, if it is waiting.
    fn wake_driver(&self) {
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
                        if shard.deadlines.get(key) != FIRED {
                            shard.deadlines.set(key, SHUTDOWN);
                        }
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

/// What a flush left behind.
#[derive(Debug, PartialEq, Eq)]
enum Flushed {
    /// Everything due has fired.
    Done,
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
        // Requests made before this point lowered their shard's `next`
        // first, so the scan below sees them; later ones are kept in
        // `requested`, and taken into account at the end.
        {
            let mut control = lock(&self.control);
            if control.shutdown {
                return Armed::Waiting;
            }
            control.requested = None;
        }
        let mut next = None;
        for shard in self.shards.iter() {
            next = earliest(next, shard.state.lock().next);
        }
        let next = {
            let mut control = lock(&self.control);
            if control.shutdown {
                return Armed::Waiting;
            }
            let next = earliest(next, control.requested.take());
            control.armed = next;
            self.armed_at
                .store(next.unwrap_or(u64::MAX), Ordering::Relaxed);
            next
        };
        let Some(at) = next.map(|tick| self.ticks.instant_of(tick)) else {
            // Nothing is due: a registration will wake the driver.
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
        !self.shards[0].state.lock().ready.is_empty()
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
                Flushed::Done if self.has_ready() => break,
                Flushed::Done => {}
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

/// How long a timer lives: see [`Shared::new`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lifetime {
    /// Until its runtime drops the driver task.
    Runtime,
    /// Until its last owner is dropped (or its runtime drops the driver).
    Owners,
}

/// The driver's hold on its timer.
#[derive(Debug)]
enum DriverRef {
    Strong(Arc<Shared>),
    Weak(Weak<Shared>),
}

impl DriverRef {
    fn get(&self) -> Option<Arc<Shared>> {
        match self {
            DriverRef::Strong(shared) => Some(shared.clone()),
            DriverRef::Weak(shared) => shared.upgrade(),
        }
    }
}

/// The driver task of one timer.
///
/// Dropping it (the runtime shutting down, for instance) shuts the timer
/// down. It ends when the timer shuts down, or when the last owner of a
/// [`Lifetime::Owners`] timer is dropped.
#[derive(Debug)]
pub(crate) struct Driver {
    shared: DriverRef,
    /// A [`DriverWake`]: what the clock sleep is polled with.
    wake: Waker,
}

impl Future for Driver {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // Every owner gone: the timer was dropped (and woke us, see
        // `Shared`'s `Drop`), nothing is left to drive.
        let Some(shared) = self.shared.get() else {
            return Poll::Ready(());
        };
        if !shared.set_driver_waker(cx.waker()) {
            return Poll::Ready(());
        }
        loop {
            let flushed = shared.flush(DRIVER_BATCH);
            // Callbacks found due by this flush, or by an inline one.
            let more_ready = shared.run_ready(DRIVER_BATCH);
            if flushed == Flushed::Shutdown {
                return Poll::Ready(());
            }
            if more_ready || flushed == Flushed::More {
                // Yield between batches so the worker serves other tasks.
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            match shared.arm(&self.wake, true) {
                Armed::Waiting | Armed::Busy => return Poll::Pending,
                // Time moved while we flushed: go round again.
                Armed::Due => {}
            }
        }
    }
}

impl Drop for Driver {
    /// The runtime is dropping the driver task: shut the timer down. The
    /// callbacks that never ran are dropped. (If the timer had already
    /// shut down, or every owner is gone, there is nothing to do.)
    fn drop(&mut self) {
        if let Some(shared) = self.shared.get() {
            if !shared.is_shutdown() {
                shared.runtime_gone.store(true, Ordering::Release);
            }
            drop(shared.shutdown());
        }
    }
}

impl Drop for Shared {
    /// The last owner of a [`Lifetime::Owners`] timer is gone: wake its
    /// driver task so that it ends. (Callbacks that never ran are dropped
    /// with the wheel.)
    fn drop(&mut self) {
        let driver = lock(&self.control).driver.take();
        wake(driver);
    }
}

#[cfg(test)]
mod tests;
