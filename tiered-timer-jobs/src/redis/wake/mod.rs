//! The waker: one task per [`Queue`](crate::Queue) that decides when this
//! process claims, so that each due job wakes exactly one worker however
//! many wait, and a waiting worker sends nothing while nothing is due.
//!
//! # The wake-up chain
//!
//! Each partition has a *baton*: a member of its marker sorted set
//! (`ttr:T:marker`), named and scored by the time of the partition's next
//! event (a job coming due, a lease running out), on Redis' clock. Waiting workers
//! block on the marker with `BZPOPMIN`, which hands the baton to exactly
//! one of them. The holder converts the time to a local instant, sleeps
//! until then on `tiered-timer`, and claims with the baton; the claim
//! script passes the baton on to the next event (`src/redis/lua/claim.lua`):
//! into the marker set, for another waiting worker (at once if it is due
//! already: a backlog is worked on by every idle worker), or straight back
//! to the claimer if the next event is due within [`KEEP_HORIZON`] (a
//! worker that comes back for its next job in time needs no `BZPOPMIN`).
//! Scripts that create an event before the chain head (a schedule, a
//! retry, a release) put a baton in for it. So a due job costs one
//! `BZPOPMIN` at most, one claim and one ack, whatever the number of
//! workers `W` and partitions `P`.
//!
//! A worker that is never idle pops no baton: under a backlog it claims
//! without one, on the partition with the oldest due jobs as far as the
//! claims' replies told this process (see [`fair`]), so that one busy
//! worker does not drain one partition while the others' jobs wait.
//!
//! # Ground rules
//!
//! * The waker task owns the blocking connections and the batons this
//!   process holds; [`Shared`] holds what `next` and the task exchange
//!   (waiters, prefetched jobs, held batons), under a mutex held only for
//!   bookkeeping, never across an `.await`, and nobody is woken while it
//!   is held.
//! * Every claim runs in a task of its own and reports to the waker (or to
//!   the caller that asked, falling back to the waker if the caller is
//!   gone): a `next` that is dropped never loses a claimed job (it goes to
//!   the next waiter, or is released) nor the baton a claim passed back.
//! * A baton is never dropped: it is claimed with, or handed back
//!   (`ZADD`) when this process has no worker waiting for it (at once if
//!   it is due later than [`HOLD`], else [`LINGER`] past its time),
//!   when the queue closes, and when the last handle is dropped. If a
//!   process dies holding one, the *watch baton* finds out: each chain
//!   head's baton goes into the marker set with a watch (member `w`,
//!   scored `WATCH`, 2 s, after the head's time; one per partition, moved
//!   on as the head moves), which `BZPOPMIN` hands to another waiting
//!   worker after the head's; its holder claims with it at its time, and
//!   the script rescues the chain if the head is still unclaimed. If the
//!   watch's holder died too, the first script (or any waiting worker's
//!   periodic probe of `armed`) that finds the head `GRACE` (10 s) past
//!   its time, or its watch `WATCH` overdue, re-arms it.
//! * Times on Redis' clock become local instants through the offset
//!   measured on the last claim: Redis' now as read by the script, against
//!   the local instant its reply arrived (so a baton fires no earlier than
//!   its time, up to clock drift; firing early costs one claim that finds
//!   nothing and keeps the baton). A baton that arrives late (a stalled
//!   link) fires at once.
//! * Health: every blocking call carries a reply deadline of
//!   `health_check` (Redis ends it empty a little earlier), so a
//!   connection that stops answering is noticed within `health_check`,
//!   replaced (the command connection too, its path being in doubt), and
//!   Redis is read again with a rescue claim on each of its partitions
//!   (a baton popped on a dead connection may be lost: the rescue re-arms
//!   the chain).
//! * Losing and re-establishing a blocking connection are `tracing`
//!   events (warn and info).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::data::error::Error;
pub(crate) use crate::job::Claimed;
use crate::queue::arg;
use crate::redis::conn::Conn;
use crate::redis::keys::Keys;
use crate::redis::scripts;

mod claim;
mod fair;
mod waker;

use claim::{ClaimRequest, Outcome, With};
use waker::Waker;

/// A claim passes the next baton back to the claimer if the next event is
/// due within this long: a worker that comes back for its next job within
/// it claims without waiting for a baton.
pub(crate) const KEEP_HORIZON: Duration = Duration::from_millis(50);
/// A baton held while no worker of this process waits is kept if it is
/// due within this long (a worker of this process will most likely be
/// back for it), else handed back at once.
pub(crate) const HOLD: Duration = Duration::from_secs(1);
/// A held baton that comes due while no worker of this process waits is
/// kept this much longer, for a worker that comes back at once, then
/// handed back.
pub(crate) const LINGER: Duration = Duration::from_millis(2);
/// Every this many empty replies on a blocking connection, a waiting
/// worker probes one partition's chain head (one `HGET`): it is how a
/// baton lost with a dead process is found.
const PROBE_EVERY: u32 = 3;
/// How many due jobs left behind a claim make a backlog (the scripts'
/// `BACKLOG`): then every worker of this process claims from it at once
/// instead of waiting for a baton.
const BACKLOG: u64 = 8;
/// How long past the chain head's time the watch baton's holder checks it
/// (the scripts' `WATCH`, ms); a head unclaimed that long is taken for lost
/// with its holder.
const WATCH_MS: u64 = 2000;
/// [`WATCH_MS`] as a duration.
const WATCH: Duration = Duration::from_millis(WATCH_MS);
/// A waiting worker checks a chain head this long after it is due to be
/// lost (a little later than the watch's holder, which usually does it).
const CHECK_MARGIN: Duration = Duration::from_millis(100);
/// A chain head found alive is checked again no sooner than this.
const RECHECK: Duration = Duration::from_millis(250);

/// What a waiting call gets.
type Delivery = Result<Vec<Claimed>, Error>;

/// What the waker and its claims need of the queue.
pub(crate) struct Setup {
    pub(crate) name: String,
    pub(crate) conn: Conn,
    pub(crate) partitions: Vec<Keys>,
    pub(crate) lease: Duration,
    pub(crate) max_attempts: u32,
    /// Jobs a claim may take beyond what the waiting workers asked for.
    pub(crate) prefetch: usize,
    pub(crate) health_check: Duration,
    /// Lease tokens are this random prefix and a counter: unique across
    /// processes and within this one, and cheap.
    pub(crate) token_prefix: String,
    pub(crate) tokens: std::sync::atomic::AtomicU64,
}

impl Setup {
    /// A fresh token prefix for one claim (its k-th job's token is
    /// prefix.k).
    fn token(&self) -> String {
        let n = self
            .tokens
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("{}{n:x}", self.token_prefix)
    }
}

/// A baton this process holds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Baton {
    partition: u32,
    /// Its time, on Redis' clock (ms).
    at_ms: u64,
    kind: Kind,
    /// Its time as a local instant (`None`: no clock offset yet; now).
    fire_at: Option<Instant>,
    /// Kept past its time for a worker that may come back (see [`LINGER`]).
    linger_until: Option<Instant>,
}

struct Waiter {
    want: usize,
    tx: oneshot::Sender<Delivery>,
}

/// Redis' clock against the local one, from a claim's reply.
#[derive(Debug, Clone, Copy)]
struct Offset {
    redis_ms: u64,
    local: Instant,
}

/// Which baton of a partition's marker set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The chain head's baton, named by its time.
    Head,
    /// The k-th extra baton a claim put in for a backlog, named `xk`.
    Extra(u16),
    /// The watch baton, named `w`: its holder checks, the scripts' `WATCH`
    /// (2 s) after the chain head's time, that someone claimed with the
    /// head's baton, and rescues the chain if not (its holder died between
    /// its `BZPOPMIN` and its claim).
    Watch,
}

impl Kind {
    /// The kind of the marker set's member `member`.
    fn of(member: &str) -> Kind {
        if member == "w" {
            return Kind::Watch;
        }
        match member.strip_prefix('x').and_then(|k| k.parse().ok()) {
            Some(k) => Kind::Extra(k),
            None => Kind::Head,
        }
    }
}

impl Baton {
    /// Its name in the marker set.
    fn member(&self) -> String {
        match self.kind {
            Kind::Head => self.at_ms.to_string(),
            Kind::Extra(k) => format!("x{k}"),
            Kind::Watch => "w".to_owned(),
        }
    }

    /// Its name for the claim script (the watch's carries its time, so the
    /// script tells the watch out from one that was replaced).
    fn claim_arg(&self) -> String {
        match self.kind {
            Kind::Watch => format!("w{}", self.at_ms),
            _ => self.member(),
        }
    }
}

impl Offset {
    fn local_at(&self, at_ms: u64) -> Instant {
        self.local + Duration::from_millis(at_ms.saturating_sub(self.redis_ms))
    }

    /// The local instant `local` on Redis' clock (ms).
    fn redis_at(&self, local: Instant) -> u64 {
        let since = local.saturating_duration_since(self.local).as_millis();
        self.redis_ms
            .saturating_add(u64::try_from(since).unwrap_or(u64::MAX))
    }
}

#[derive(Default)]
struct State {
    waiters: VecDeque<Waiter>,
    /// Claimed jobs no waiter took yet (prefetched, or claimed for a
    /// waiter that left), with when they came.
    buffer: VecDeque<(Claimed, Instant)>,
    batons: Vec<Baton>,
    /// Demand that claims in flight are serving.
    reserved: usize,
    offset: Option<Offset>,
    /// When a claim on a partition last failed (its node down, say): for
    /// a while its claims do not hold waiting workers' demand, so that a
    /// dead node's partitions never make the others wait.
    failed_at: std::collections::HashMap<u32, Instant>,
    /// What the claims said of each partition: while one holds a backlog
    /// ([`BACKLOG`] or more due jobs), calls claim at once, without
    /// waiting for a baton, on the partition with the oldest due jobs
    /// (see [`fair`]), so every worker works on a backlog at once, oldest
    /// due first across partitions, until the claims' replies say it is
    /// gone.
    fair: fair::Fairness,
    /// When a waiting worker of this process is to check each partition's
    /// chain head (see [`State::learn`]).
    checks: std::collections::HashMap<u32, Check>,
    closed: bool,
}

/// A chain head a waiting worker is to check (see [`State::learn`]).
#[derive(Debug, Clone, Copy)]
struct Check {
    /// The head's time, on Redis' clock (ms).
    head: u64,
    /// When to check it.
    at: Instant,
    /// When this process read it.
    learned: Instant,
}

/// How long after a failed claim a partition's claims do not hold demand.
const FRAGILE: Duration = Duration::from_secs(10);

impl State {
    /// Takes what a claim or a probe read of `partition`'s chain head
    /// (its time, on Redis' clock; `None`: no event ahead): while workers
    /// of this process wait, they check it [`WATCH`] after its time unless
    /// this process holds its baton or a watch that checks it in time, so
    /// that a head lost with a process that held both its baton and its
    /// watch costs seconds.
    fn learn(&mut self, partition: u32, head: Option<u64>) {
        match head {
            Some(at_ms) => {
                let at = match self.offset {
                    Some(offset) => offset.local_at(at_ms + WATCH_MS),
                    None => Instant::now() + WATCH,
                };
                let now = Instant::now();
                let at = (at + CHECK_MARGIN).max(now + RECHECK);
                self.checks.insert(
                    partition,
                    Check {
                        head: at_ms,
                        at,
                        learned: now,
                    },
                );
            }
            None => {
                self.checks.remove(&partition);
            }
        }
    }

    /// A waiting period begins after a busy one that began at
    /// `busy_since` (no worker of this process waited since): what this
    /// process read of a chain head before then may be out of date
    /// (another process may hold an earlier head, and its watch, since),
    /// so each such head is checked [`WATCH`] from now at the latest. A
    /// head read since is known well enough: checking it anyway would
    /// cost a command per partition for every job a worker takes.
    fn begin_waiting(&mut self, partitions: u32, busy_since: Instant, now: Instant) {
        for partition in 0..partitions {
            let check = self.checks.entry(partition).or_insert(Check {
                head: 0,
                at: now + WATCH,
                learned: busy_since,
            });
            if check.learned <= busy_since {
                check.at = check.at.min(now + WATCH);
            }
        }
    }

    /// When a waiting worker of this process is to check `partition`'s
    /// chain head, unless this process holds the head's baton, or a watch
    /// that checks it by then.
    fn check_at(&self, partition: u32) -> Option<Instant> {
        let check = self.checks.get(&partition)?;
        let covered = self.batons.iter().any(|b| {
            b.partition == partition
                && match b.kind {
                    Kind::Head => b.at_ms == check.head,
                    Kind::Watch => b.at_ms <= check.head + WATCH_MS,
                    Kind::Extra(_) => false,
                }
        });
        (!covered).then_some(check.at)
    }

    /// Whether claims on `partition` failed lately.
    fn fragile(&self, partition: u32) -> bool {
        self.failed_at
            .get(&partition)
            .is_some_and(|at| at.elapsed() < FRAGILE)
    }

    /// Jobs asked for by open waiters and not yet being claimed.
    /// Whether a worker of this process waits (whether or not a claim is
    /// in flight for it).
    fn has_waiters(&mut self) -> bool {
        self.waiters.retain(|w| !w.tx.is_closed());
        !self.waiters.is_empty()
    }

    fn demand(&mut self) -> usize {
        self.waiters.retain(|w| !w.tx.is_closed());
        let asked: usize = self.waiters.iter().map(|w| w.want).sum();
        asked.saturating_sub(self.reserved)
    }

    /// Gives jobs to the waiters, first come first served; returns what is
    /// left.
    fn serve(&mut self, mut jobs: VecDeque<Claimed>) -> VecDeque<Claimed> {
        while !jobs.is_empty() {
            let Some(waiter) = self.waiters.pop_front() else {
                break;
            };
            let take = waiter.want.min(jobs.len());
            let batch: Vec<Claimed> = jobs.drain(..take).collect();
            match waiter.tx.send(Ok(batch)) {
                Ok(()) => {}
                Err(Ok(batch)) => {
                    for job in batch.into_iter().rev() {
                        jobs.push_front(job);
                    }
                }
                Err(Err(_)) => {}
            }
        }
        jobs
    }

    fn fail_waiters(&mut self, error: impl Fn() -> Error) {
        for waiter in self.waiters.drain(..) {
            let _ = waiter.tx.send(Err(error()));
        }
    }
}

/// What `next` and the waker task share.
pub(crate) struct Shared {
    pub(crate) setup: Setup,
    state: Mutex<State>,
    notify: Notify,
    inbox: mpsc::UnboundedSender<Event>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("queue", &self.setup.name)
            .finish_non_exhaustive()
    }
}

/// What happens to the waker task.
// One `Claimed` per claim, moved once through the inbox: boxing it would
// cost an allocation per claim for nothing.
#[allow(clippy::large_enum_variant)]
enum Event {
    Claimed {
        request: ClaimRequest,
        sent: Instant,
        received: Instant,
        result: Result<Outcome, Error>,
    },
    Popped {
        blocker: usize,
        generation: u64,
        result: Result<Option<(String, Kind, u64)>, Error>,
    },
    Connected {
        blocker: usize,
        generation: u64,
        result: Result<MultiplexedConnection, Error>,
    },
    Probed {
        partition: u32,
        result: Result<Option<String>, Error>,
    },
    HandedBack {
        baton: Baton,
        result: Result<(), Error>,
    },
}

impl Shared {
    /// Starts the waker task of a new queue handle.
    pub(crate) fn start(setup: Setup) -> Arc<Shared> {
        let (inbox, events) = mpsc::unbounded_channel();
        let state = State {
            fair: fair::Fairness::new(setup.partitions.len() as u32),
            ..State::default()
        };
        let shared = Arc::new(Shared {
            setup,
            state: Mutex::new(state),
            notify: Notify::new(),
            inbox,
            task: Mutex::new(None),
        });
        let task = tokio::spawn(Waker::new(Arc::clone(&shared), events).run());
        *shared.task.lock().unwrap_or_else(|e| e.into_inner()) = Some(task);
        shared
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for between one and `max` claimed jobs (fewer only if fewer
    /// were due at once).
    ///
    /// A prefetched job is taken at once; if no other call waits and this
    /// process holds a baton that is due, the call claims with it right
    /// away, without going through the waker task (a call dropped meanwhile
    /// loses nothing: the claim is finished in a task of its own); and
    /// while a claim here left a backlog, every call claims at once,
    /// whoever else waits, on the partition with the oldest due jobs (see
    /// [`fair`]).
    pub(crate) async fn wait(self: &Arc<Self>, max: usize) -> Delivery {
        loop {
            let direct = {
                let mut state = self.lock();
                if state.closed {
                    return Err(Error::Closed);
                }
                if !state.buffer.is_empty() {
                    let take = max.min(state.buffer.len());
                    let jobs = state.buffer.drain(..take).map(|(job, _)| job).collect();
                    return Ok(jobs);
                }
                let alone = state.demand() == 0 && state.waiters.is_empty();
                // Under a backlog every caller claims at once, whoever
                // else waits (through the waker, the callers of one
                // `Queue` would take turns), oldest due first across
                // partitions. The claim's reply says whether the backlog
                // is still there.
                state.pick(Instant::now(), alone)
            };
            let Some((partition, with)) = direct else {
                break;
            };
            let request = ClaimRequest {
                partition,
                n: max + self.setup.prefetch,
                with,
                ack: None,
                reserved: 0,
            };
            // (No ack, so no verdict on replicas: see `Outcome`.)
            let outcome = self.claim_for_caller(request).await?;
            if !outcome.jobs.is_empty() {
                let mut jobs = outcome.jobs;
                let rest = jobs.split_off(max.min(jobs.len()));
                self.absorb(rest);
                return Ok(jobs);
            }
            // Nothing was claimable (the baton was early, or its job
            // gone): wait like any call.
        }
        let rx = {
            let mut state = self.lock();
            if state.closed {
                return Err(Error::Closed);
            }
            let (tx, rx) = oneshot::channel();
            state.waiters.push_back(Waiter { want: max, tx });
            rx
        };
        self.notify.notify_one();
        let mut pending = Pending {
            rx: Some(rx),
            shared: self,
        };
        pending.recv().await
    }

    /// Takes a prefetched job, if there is one.
    pub(crate) fn take_buffered(&self) -> Option<Claimed> {
        self.lock().buffer.pop_front().map(|(job, _)| job)
    }

    /// Takes what a claim made for a caller returned besides its first
    /// job: the other jobs (for the next waiters), and the clock offset.
    pub(crate) fn absorb(&self, jobs: Vec<Claimed>) {
        if jobs.is_empty() {
            return;
        }
        let mut state = self.lock();
        let left = state.serve(jobs.into_iter().collect());
        let now = Instant::now();
        state.buffer.extend(left.into_iter().map(|job| (job, now)));
        drop(state);
        self.notify.notify_one();
    }

    /// Closes: waiting calls fail with [`Error::Closed`], held batons are
    /// handed back, and prefetched jobs are returned (for the caller to
    /// release).
    pub(crate) fn close(&self) -> Vec<Claimed> {
        let mut state = self.lock();
        state.closed = true;
        state.fail_waiters(|| Error::Closed);
        let buffered = state.buffer.drain(..).map(|(job, _)| job).collect();
        drop(state);
        self.notify.notify_one();
        buffered
    }

    /// The last handle is gone: stop the task, and hand back batons and
    /// prefetched jobs from a task of their own (if there is a runtime).
    pub(crate) fn abandon(self: &Arc<Self>) {
        if let Some(task) = self.task.lock().unwrap_or_else(|e| e.into_inner()).take() {
            task.abort();
        }
        let (batons, buffered) = {
            let mut state = self.lock();
            (
                std::mem::take(&mut state.batons),
                state
                    .buffer
                    .drain(..)
                    .map(|(job, _)| job)
                    .collect::<Vec<_>>(),
            )
        };
        if batons.is_empty() && buffered.is_empty() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let shared = Arc::clone(self);
        runtime.spawn(async move {
            for baton in batons {
                let _ = shared.hand_back(&baton).await;
            }
            for job in buffered {
                let _ = shared.release(&job).await;
            }
        });
    }

    /// Puts a baton back in its partition's marker set.
    async fn hand_back(&self, baton: &Baton) -> Result<(), Error> {
        let keys = &self.setup.partitions[baton.partition as usize];
        let mut cmd = redis::cmd("ZADD");
        cmd.arg(keys.marker()).arg(baton.at_ms).arg(baton.member());
        self.setup.conn.query::<i64>(&cmd).await.map(|_| ())
    }

    /// Hands a claimed job back (see [`Job::release`](crate::Job::release)).
    pub(crate) async fn release(&self, job: &Claimed) -> Result<bool, Error> {
        let keys = &self.setup.partitions[job.partition as usize];
        let done: i64 = self
            .setup
            .conn
            .eval(
                &scripts::RELEASE_SCRIPT,
                &keys.ordered,
                vec![arg(job.id.as_str()), arg(&job.token)],
                scripts::durability(&scripts::RELEASE_SCRIPT),
            )
            .await?;
        Ok(done == 1)
    }
}

/// A waiting call's end of the channel: if the call is dropped after the
/// waker sent it jobs, they go back to the buffer for the next waiter.
struct Pending<'a> {
    rx: Option<oneshot::Receiver<Delivery>>,
    shared: &'a Arc<Shared>,
}

impl Pending<'_> {
    async fn recv(&mut self) -> Delivery {
        let rx = self.rx.as_mut().expect("received once");
        let delivery = rx.await.unwrap_or(Err(Error::Closed));
        self.rx = None;
        delivery
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        let Some(mut rx) = self.rx.take() else {
            return;
        };
        rx.close();
        if let Ok(Ok(jobs)) = rx.try_recv() {
            self.shared.absorb(jobs);
        }
        self.shared.notify.notify_one();
    }
}
