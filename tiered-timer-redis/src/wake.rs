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
//! script passes the baton on to the next event (`src/lua/claim.lua`):
//! into the marker set, for another waiting worker (at once if it is due
//! already: a backlog is worked on by every idle worker), or straight back
//! to the claimer if the next event is due within [`KEEP_HORIZON`] (a
//! worker that comes back for its next job in time needs no `BZPOPMIN`).
//! Scripts that create an event before the chain head (a schedule, a
//! retry, a release) put a baton in for it. So a due job costs one
//! `BZPOPMIN` at most, one claim and one ack, whatever the number of
//! workers `W` and partitions `P`.
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
use redis::Value;
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::conn::Conn;
use crate::error::Error;
use crate::job::JobId;
use crate::keys::Keys;
use crate::queue::{arg, millis_up, parse};
use crate::scripts;

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
/// How long past its time the chain head may go unclaimed (the scripts'
/// `GRACE`).
const GRACE: Duration = Duration::from_secs(10);
/// How long past the chain head's time the watch baton's holder checks it
/// (the scripts' `WATCH`, ms).
const WATCH_MS: u64 = 2000;

/// A job claimed by a claim script, not yet handed to a worker.
#[derive(Debug)]
pub(crate) struct Claimed {
    pub(crate) partition: u32,
    pub(crate) id: JobId,
    pub(crate) payload: Vec<u8>,
    pub(crate) deadline_ms: u64,
    pub(crate) attempt: u32,
    pub(crate) token: String,
    pub(crate) lease: Duration,
    /// When the claim was sent: the lease started no earlier.
    pub(crate) sent: Instant,
    /// Taken back from a lease that ran out (a redelivery).
    pub(crate) expired: bool,
    /// Redis' now at the claim (ms).
    pub(crate) claimed_ms: u64,
}

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
    /// A partition where the last claim left a backlog ([`BACKLOG`] or
    /// more due jobs): the next call claims there at once, without a baton,
    /// instead of waiting for one, so every worker works on a backlog at
    /// once.
    backlog: Option<u32>,
    closed: bool,
}

/// How long after a failed claim a partition's claims do not hold demand.
const FRAGILE: Duration = Duration::from_secs(10);

impl State {
    /// Whether claims on `partition` failed lately.
    fn fragile(&self, partition: u32) -> bool {
        self.failed_at
            .get(&partition)
            .is_some_and(|at| at.elapsed() < FRAGILE)
    }

    /// Jobs asked for by open waiters and not yet being claimed.
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

/// Which baton a claim is made with.
#[derive(Debug, Clone, Copy)]
pub(crate) enum With {
    /// None: claim only if more than one job is due (the baton's holder
    /// takes the first).
    Nothing,
    /// None, but re-arm the chain whatever `armed` says: after a lost
    /// connection, or a probe that found the chain head stale.
    Rescue,
    /// None: the first claim of this queue handle (claims, and re-arms a
    /// missing or stale chain).
    Start,
    /// This baton.
    Baton(Baton),
}

#[derive(Debug)]
pub(crate) struct ClaimRequest {
    pub(crate) partition: u32,
    pub(crate) n: usize,
    pub(crate) with: With,
    pub(crate) ack: Option<(JobId, String)>,
    /// Demand of waiting workers this claim serves.
    reserved: usize,
}

/// A claim script's reply.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub(crate) now_ms: u64,
    /// How many due jobs the claim saw and left (at most [`BACKLOG`] + 1):
    /// [`BACKLOG`] or more is a backlog.
    pub(crate) left: u64,
    /// `Some(false)`: the job to ack had lost its lease (nothing done).
    pub(crate) acked: Option<bool>,
    pub(crate) kept: Option<u64>,
    pub(crate) buried: Vec<String>,
    pub(crate) jobs: Vec<Claimed>,
    /// The claim ran, but fewer replicas than asked for acknowledged it.
    pub(crate) replicated: Result<(), Error>,
}

impl Shared {
    /// Starts the waker task of a new queue handle.
    pub(crate) fn start(setup: Setup) -> Arc<Shared> {
        let (inbox, events) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            setup,
            state: Mutex::new(State::default()),
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
    /// loses nothing: the claim is finished in a task of its own); and if
    /// the last claim here left a backlog, the call claims from it at once
    /// without a baton (taking a job only if more than one is due).
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
                let now = Instant::now();
                let alone = state.demand() == 0 && state.waiters.is_empty();
                let due = state
                    .batons
                    .iter()
                    .position(|b| b.fire_at.is_none_or(|at| at <= now));
                match (due, state.backlog) {
                    (Some(i), _) if alone => {
                        let baton = state.batons.swap_remove(i);
                        Some((baton.partition, With::Baton(baton)))
                    }
                    (None, Some(partition)) if alone => {
                        state.backlog = None;
                        Some((partition, With::Nothing))
                    }
                    _ => None,
                }
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
            let outcome = self.claim_for_caller(request).await?;
            if let Err(error) = outcome.replicated {
                for job in &outcome.jobs {
                    let _ = self.release(job).await;
                }
                return Err(error);
            }
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

    /// Claims now, in a task of its own, for a caller that holds a job
    /// (see [`Job::ack_and_next`](crate::Job::ack_and_next)): with a
    /// baton of this partition if this process holds a due one.
    pub(crate) async fn claim_now(
        self: &Arc<Self>,
        partition: u32,
        ack: (JobId, String),
    ) -> Result<Outcome, Error> {
        let with = {
            let mut state = self.lock();
            let now = Instant::now();
            let due = state
                .batons
                .iter()
                .position(|b| b.partition == partition && b.fire_at.is_none_or(|at| at <= now));
            match due {
                Some(i) => With::Baton(state.batons.swap_remove(i)),
                None => With::Nothing,
            }
        };
        self.claim_for_caller(ClaimRequest {
            partition,
            n: 1 + self.setup.prefetch,
            with,
            ack: Some(ack),
            reserved: 0,
        })
        .await
    }

    /// Runs a claim in a task of its own and waits for its outcome; if
    /// this call is dropped meanwhile, the jobs go to the next waiters.
    async fn claim_for_caller(self: &Arc<Self>, request: ClaimRequest) -> Result<Outcome, Error> {
        let shared = Arc::clone(self);
        let claim: InFlight = Box::pin(async move {
            let sent = Instant::now();
            let result = claim(&shared.setup, &request, sent).await;
            (request, sent, Instant::now(), result)
        });
        let mut in_flight = InlineClaim {
            claim: Some(claim),
            shared: self,
        };
        let (request, sent, received, result) = in_flight.run().await;
        let result = match result {
            Ok(mut outcome) => {
                self.note(&request, sent, received, &mut outcome);
                Ok(outcome)
            }
            Err(error) => {
                self.note_failure(&request);
                Err(error)
            }
        };
        self.notify.notify_one();
        result
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

    /// Takes what a claim's reply says about this process' state: Redis'
    /// clock (the offset), the baton passed back to it, and the jobs it
    /// buried (traced). Leaves the jobs.
    fn note(
        &self,
        request: &ClaimRequest,
        sent: Instant,
        received: Instant,
        outcome: &mut Outcome,
    ) {
        let name = &self.setup.name;
        let partition = request.partition;
        for id in std::mem::take(&mut outcome.buried) {
            tracing::warn!(queue = %name, job = %id, attempts = self.setup.max_attempts, partition, "job moved to the dead letters: its last lease ran out");
            crate::metrics::dead_lettered(name);
        }
        let mut state = self.lock();
        state.reserved = state.reserved.saturating_sub(request.reserved);
        state.failed_at.remove(&partition);
        if outcome.left >= BACKLOG {
            state.backlog = Some(partition);
        } else if state.backlog == Some(partition) {
            state.backlog = None;
        }
        if outcome.now_ms > 0 && received.duration_since(sent) < Duration::from_secs(1) {
            state.offset = Some(Offset {
                redis_ms: outcome.now_ms,
                local: received,
            });
        }
        if let Some(at_ms) = outcome.kept.take() {
            let fire_at = state.offset.map(|o| o.local_at(at_ms));
            state.batons.push(Baton {
                partition,
                at_ms,
                kind: Kind::Head,
                fire_at,
                linger_until: None,
            });
        }
    }

    /// A claim failed: the demand it served is free again, the partition
    /// is fragile for a while, and the baton the claim was made with is
    /// not lost with it (it is tried again in half a second).
    fn note_failure(&self, request: &ClaimRequest) {
        let mut state = self.lock();
        state.reserved = state.reserved.saturating_sub(request.reserved);
        state.failed_at.insert(request.partition, Instant::now());
        if let With::Baton(baton) = request.with {
            state.batons.push(Baton {
                fire_at: Some(Instant::now() + Duration::from_millis(500)),
                linger_until: None,
                ..baton
            });
        }
    }

    /// Hands a claim's outcome to the waker; if the waker is gone (the
    /// last handle was dropped), hands its jobs and baton back to Redis.
    async fn report(
        &self,
        request: ClaimRequest,
        sent: Instant,
        received: Instant,
        result: Result<Outcome, Error>,
    ) {
        let partition = request.partition;
        let Err(mpsc::error::SendError(event)) = self.inbox.send(Event::Claimed {
            request,
            sent,
            received,
            result,
        }) else {
            return;
        };
        if let Event::Claimed {
            result: Ok(outcome),
            ..
        } = event
        {
            for job in &outcome.jobs {
                let _ = self.release(job).await;
            }
            if let Some(at_ms) = outcome.kept {
                let baton = Baton {
                    partition,
                    at_ms,
                    kind: Kind::Head,
                    fire_at: None,
                    linger_until: None,
                };
                let _ = self.hand_back(&baton).await;
            }
        }
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
                true,
            )
            .await?;
        Ok(done == 1)
    }
}

/// A claim in flight, as a boxed future.
type InFlight = std::pin::Pin<
    Box<
        dyn std::future::Future<Output = (ClaimRequest, Instant, Instant, Result<Outcome, Error>)>
            + Send,
    >,
>;

/// A claim run in the caller's task; if the caller is dropped before it
/// ends, it is finished in a task of its own and reported to the waker (its
/// jobs go to the next waiters), so that nothing is stranded.
struct InlineClaim<'a> {
    claim: Option<InFlight>,
    shared: &'a Arc<Shared>,
}

impl InlineClaim<'_> {
    async fn run(&mut self) -> (ClaimRequest, Instant, Instant, Result<Outcome, Error>) {
        let claim = self.claim.as_mut().expect("run once");
        let done = claim.await;
        self.claim = None;
        done
    }
}

impl Drop for InlineClaim<'_> {
    fn drop(&mut self) {
        let Some(claim) = self.claim.take() else {
            return;
        };
        let shared = Arc::clone(self.shared);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let (request, sent, received, result) = claim.await;
                shared.report(request, sent, received, result).await;
            });
        }
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

/// Runs one claim and reports it: to `caller` if given and still there,
/// else to the waker.
async fn run_claim(shared: Arc<Shared>, request: ClaimRequest) {
    let sent = Instant::now();
    let result = claim(&shared.setup, &request, sent).await;
    let received = Instant::now();
    shared.report(request, sent, received, result).await;
}

/// Runs the claim script.
async fn claim(setup: &Setup, request: &ClaimRequest, sent: Instant) -> Result<Outcome, Error> {
    let keys = &setup.partitions[request.partition as usize];
    let lease_ms = millis_up(setup.lease);
    let token = setup.token();
    let (baton, min_due) = match request.with {
        With::Nothing => (String::new(), 2),
        With::Rescue => ("r".to_owned(), 1),
        With::Start => (String::new(), 1),
        // A watch claims only if more than one job is due, unless it
        // finds the chain head stale (the script decides).
        With::Baton(baton) if baton.kind == Kind::Watch => (baton.claim_arg(), 2),
        With::Baton(baton) => (baton.claim_arg(), 1),
    };
    let (ack_id, ack_token) = match &request.ack {
        Some((id, token)) => (arg(id.as_str()), arg(token)),
        None => (Vec::new(), Vec::new()),
    };
    let args = vec![
        arg(&request.n.to_string()),
        arg(&lease_ms.to_string()),
        arg(&setup.max_attempts.to_string()),
        arg(&token),
        arg(&baton),
        arg(&KEEP_HORIZON.as_millis().to_string()),
        arg(&min_due.to_string()),
        ack_id,
        ack_token,
    ];
    let (reply, replicated): (Vec<Value>, _) = setup
        .conn
        .eval_replicated(&scripts::CLAIM_SCRIPT, &keys.ordered, args, true)
        .await?;
    let mut fields = reply.into_iter();
    let now_ms: i64 = parse(fields.next())?;
    let acked: i64 = parse(fields.next())?;
    let _next: i64 = parse(fields.next())?;
    let kept: i64 = parse(fields.next())?;
    let left: i64 = parse(fields.next())?;
    let n_buried: usize = parse(fields.next())?;
    let mut buried = Vec::with_capacity(n_buried);
    for _ in 0..n_buried {
        buried.push(parse::<String>(fields.next())?);
    }
    let mut jobs = Vec::with_capacity(fields.len() / 5);
    while let Some(id) = fields.next() {
        let id: String = parse(Some(id))?;
        let payload: Vec<u8> = parse(fields.next())?;
        let deadline_ms: u64 = parse(fields.next())?;
        let attempt: u32 = parse(fields.next())?;
        let expired: i64 = parse(fields.next())?;
        let token = format!("{token}.{}", jobs.len() + 1);
        jobs.push(Claimed {
            partition: request.partition,
            id: JobId::from(id),
            payload,
            deadline_ms,
            attempt,
            token,
            lease: Duration::from_millis(lease_ms),
            sent,
            expired: expired == 1,
            claimed_ms: u64::try_from(now_ms).unwrap_or(0),
        });
    }
    Ok(Outcome {
        now_ms: u64::try_from(now_ms).unwrap_or(0),
        left: u64::try_from(left).unwrap_or(0),
        acked: match acked {
            1 => Some(true),
            0 => Some(false),
            _ => None,
        },
        kept: u64::try_from(kept).ok(),
        buried,
        jobs,
        replicated,
    })
}

/// One blocking connection: to the single Redis for all partitions, or to
/// one partition's master on a cluster.
struct Blocker {
    partitions: Vec<u32>,
    markers: Vec<String>,
    conn: Option<MultiplexedConnection>,
    /// Bumped on every new connection and every call, so that late
    /// answers to abandoned ones are ignored.
    generation: u64,
    phase: Phase,
    /// Empty replies in a row (for the probe).
    empty: u32,
    /// The connection was lost (a rescue is due once it is back).
    lost: bool,
    backoff: Duration,
}

enum Phase {
    /// Connected, no call outstanding.
    Idle,
    /// A `BZPOPMIN` is outstanding; no reply by `deadline` means the
    /// connection is dead.
    Blocking {
        task: JoinHandle<()>,
        deadline: Instant,
    },
    Connecting {
        task: JoinHandle<()>,
    },
    /// Waiting to reconnect.
    Backoff {
        until: Instant,
    },
}

const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(2);

struct Waker {
    shared: Arc<Shared>,
    events: mpsc::UnboundedReceiver<Event>,
    blockers: Vec<Blocker>,
    started: bool,
    probe_next: u32,
}

impl Waker {
    fn new(shared: Arc<Shared>, events: mpsc::UnboundedReceiver<Event>) -> Waker {
        let setup = &shared.setup;
        let all: Vec<u32> = (0..setup.partitions.len() as u32).collect();
        let groups: Vec<Vec<u32>> = if setup.conn.is_single() {
            vec![all]
        } else {
            all.into_iter().map(|p| vec![p]).collect()
        };
        let blockers = groups
            .into_iter()
            .map(|partitions| Blocker {
                markers: partitions
                    .iter()
                    .map(|&p| setup.partitions[p as usize].marker().to_owned())
                    .collect(),
                partitions,
                conn: None,
                generation: 0,
                phase: Phase::Backoff {
                    until: Instant::now(),
                },
                empty: 0,
                lost: false,
                backoff: FIRST_BACKOFF,
            })
            .collect();
        Waker {
            shared,
            events,
            blockers,
            started: false,
            probe_next: 0,
        }
    }

    async fn run(mut self) {
        loop {
            let wake_at = self.step();
            let notified = self.shared.notify.notified();
            let sleep = async {
                match wake_at {
                    Some(at) => tiered_timer::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                event = self.events.recv() => match event {
                    Some(event) => self.handle(event),
                    None => return,
                },
                () = notified => {}
                () = sleep => {}
            }
        }
    }

    /// Does what is due now; returns when to look again.
    fn step(&mut self) -> Option<Instant> {
        let now = Instant::now();
        let mut wake_at: Option<Instant> = None;
        let mut soonest = |at: Instant| {
            wake_at = Some(wake_at.map_or(at, |w: Instant| w.min(at)));
        };
        let (demand, closed) = {
            let mut state = self.shared.lock();
            (state.demand(), state.closed)
        };
        // The first claim of this handle: read every partition once.
        if demand > 0 && !self.started && !closed {
            self.started = true;
            for p in 0..self.shared.setup.partitions.len() as u32 {
                self.start_claim(p, With::Start);
            }
        }
        self.fire_batons(now, closed, &mut soonest);
        self.release_stale_buffer(now, &mut soonest);
        // Keep a blocking call outstanding while workers wait, unless a
        // baton held here is due now and serves them at once.
        let waiting = {
            let mut state = self.shared.lock();
            state.demand() > 0
                && !state
                    .batons
                    .iter()
                    .any(|b| b.fire_at.is_none_or(|at| at <= now))
        } && !closed;
        for index in 0..self.blockers.len() {
            match self.blockers[index].phase {
                Phase::Idle if waiting => self.block(index),
                Phase::Idle => {}
                Phase::Blocking { deadline, .. } => {
                    if deadline <= now {
                        self.lose(
                            index,
                            format!(
                                "no reply within the health check interval ({:?})",
                                self.shared.setup.health_check
                            ),
                        );
                    }
                }
                Phase::Connecting { .. } => {}
                Phase::Backoff { until } => {
                    if waiting && until <= now {
                        self.connect(index);
                    }
                }
            }
            match self.blockers[index].phase {
                Phase::Blocking { deadline, .. } => soonest(deadline),
                Phase::Backoff { until } if waiting => soonest(until.max(now)),
                _ => {}
            }
        }
        wake_at
    }

    /// Claims with the batons that are due while workers wait; hands back
    /// those nobody here will use.
    fn fire_batons(&mut self, now: Instant, closed: bool, soonest: &mut impl FnMut(Instant)) {
        let mut fire = Vec::new();
        let mut give_back = Vec::new();
        {
            let mut state = self.shared.lock();
            let mut demand = state.demand();
            let batons = std::mem::take(&mut state.batons);
            for mut baton in batons {
                let due = baton.fire_at.is_none_or(|at| at <= now);
                if closed {
                    give_back.push(baton);
                } else if baton.kind == Kind::Watch && demand == 0 {
                    // A watch is this process' to check with, waiting
                    // workers or not: handed back whenever a worker got
                    // busy, it would cost a ZADD and a BZPOPMIN per job.
                    if due {
                        fire.push((baton, 1 + self.shared.setup.prefetch, 0));
                    } else {
                        if let Some(at) = baton.fire_at {
                            soonest(at);
                        }
                        state.batons.push(baton);
                    }
                } else if due && demand > 0 {
                    let n = demand + self.shared.setup.prefetch;
                    // A fragile partition's claim holds no demand: the
                    // others may serve the same workers meanwhile.
                    let reserved = if state.fragile(baton.partition) {
                        0
                    } else {
                        demand
                    };
                    demand -= reserved;
                    state.reserved += reserved;
                    fire.push((baton, n, reserved));
                } else if demand > 0 {
                    // Workers wait: fire it on time.
                    if let Some(at) = baton.fire_at {
                        soonest(at);
                    }
                    state.batons.push(baton);
                } else {
                    // Nobody here waits: keep it only if it is due within
                    // HOLD, and only until LINGER past its time, for a
                    // worker that comes back by then; else another worker
                    // may use it.
                    let at = baton.fire_at.unwrap_or(now);
                    if at <= now + HOLD {
                        let until = *baton.linger_until.get_or_insert(at.max(now) + LINGER);
                        if until > now {
                            soonest(until);
                            state.batons.push(baton);
                            continue;
                        }
                    }
                    give_back.push(baton);
                }
            }
        }
        for (baton, n, reserved) in fire {
            self.spawn_claim(ClaimRequest {
                partition: baton.partition,
                n,
                with: With::Baton(baton),
                ack: None,
                reserved,
            });
        }
        for baton in give_back {
            let shared = Arc::clone(&self.shared);
            tokio::spawn(async move {
                let result = shared.hand_back(&baton).await;
                let _ = shared.inbox.send(Event::HandedBack { baton, result });
            });
        }
    }

    /// Releases prefetched jobs nobody took within half their lease.
    fn release_stale_buffer(&mut self, now: Instant, soonest: &mut impl FnMut(Instant)) {
        let mut stale = Vec::new();
        {
            let mut state = self.shared.lock();
            let mut kept = VecDeque::new();
            for (job, since) in state.buffer.drain(..) {
                let limit = since + job.lease / 2;
                if limit <= now {
                    stale.push(job);
                } else {
                    soonest(limit);
                    kept.push_back((job, since));
                }
            }
            state.buffer = kept;
        }
        for job in stale {
            let shared = Arc::clone(&self.shared);
            tokio::spawn(async move {
                match shared.release(&job).await {
                    Ok(_) => {
                        tracing::info!(queue = %shared.setup.name, job = %job.id, attempt = job.attempt, "prefetched job released: no worker took it within half its lease")
                    }
                    Err(error) => {
                        tracing::warn!(queue = %shared.setup.name, job = %job.id, %error, "could not release a prefetched job; it comes back when its lease runs out")
                    }
                }
            });
        }
    }

    /// A claim for the waiting workers (or none), with `with`.
    fn start_claim(&mut self, partition: u32, with: With) {
        let (n, reserved) = {
            let mut state = self.shared.lock();
            let demand = state.demand();
            let reserved = if state.fragile(partition) { 0 } else { demand };
            state.reserved += reserved;
            (demand + self.shared.setup.prefetch, reserved)
        };
        self.spawn_claim(ClaimRequest {
            partition,
            n,
            with,
            ack: None,
            reserved,
        });
    }

    fn spawn_claim(&self, request: ClaimRequest) {
        tokio::spawn(run_claim(Arc::clone(&self.shared), request));
    }

    fn block(&mut self, index: usize) {
        let health = self.shared.setup.health_check;
        let margin = (health / 5).min(Duration::from_secs(1));
        let block_for = health - margin;
        let blocker = &mut self.blockers[index];
        let Some(mut conn) = blocker.conn.clone() else {
            return;
        };
        blocker.generation += 1;
        let generation = blocker.generation;
        let markers = blocker.markers.clone();
        let inbox = self.shared.inbox.clone();
        let task = tokio::spawn(async move {
            let mut cmd = redis::cmd("BZPOPMIN");
            cmd.arg(&markers)
                .arg(format!("{:.3}", block_for.as_secs_f64()));
            let result = match cmd
                .query_async::<Option<(String, String, f64)>>(&mut conn)
                .await
            {
                Ok(Some((key, member, score))) => {
                    Ok(Some((key, Kind::of(&member), score.max(0.0) as u64)))
                }
                Ok(None) => Ok(None),
                Err(error) => Err(Error::Redis(error)),
            };
            let _ = inbox.send(Event::Popped {
                blocker: index,
                generation,
                result,
            });
        });
        blocker.phase = Phase::Blocking {
            task,
            deadline: Instant::now() + health,
        };
    }

    fn connect(&mut self, index: usize) {
        let blocker = &mut self.blockers[index];
        blocker.generation += 1;
        let generation = blocker.generation;
        let shared = Arc::clone(&self.shared);
        let marker = blocker.markers[0].clone();
        let task = tokio::spawn(async move {
            let result = shared.setup.conn.blocking_connection(&marker).await;
            let _ = shared.inbox.send(Event::Connected {
                blocker: index,
                generation,
                result,
            });
        });
        blocker.phase = Phase::Connecting { task };
    }

    /// A blocking connection is gone or silent: drop it, and the command
    /// connection with it (the path is in doubt); reconnect soon.
    fn lose(&mut self, index: usize, why: String) {
        let blocker = &mut self.blockers[index];
        if let Phase::Blocking { task, .. } | Phase::Connecting { task } = &blocker.phase {
            task.abort();
        }
        blocker.conn = None;
        blocker.generation += 1;
        if !blocker.lost {
            tracing::warn!(queue = %self.shared.setup.name, partitions = ?blocker.partitions, error = %why, "wake-up connection lost; reconnecting");
        }
        blocker.lost = true;
        blocker.phase = Phase::Backoff {
            until: Instant::now(),
        };
        self.shared.setup.conn.reset();
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::Claimed {
                request,
                sent,
                received,
                result,
            } => self.claimed(request, sent, received, result),
            Event::Popped {
                blocker,
                generation,
                result,
            } => {
                if self.blockers[blocker].generation != generation {
                    return;
                }
                match result {
                    Ok(Some((key, kind, at_ms))) => {
                        let b = &mut self.blockers[blocker];
                        b.phase = Phase::Idle;
                        b.empty = 0;
                        if let Some(i) = b.markers.iter().position(|m| *m == key) {
                            let partition = b.partitions[i];
                            self.hold(partition, at_ms, kind);
                        }
                    }
                    Ok(None) => {
                        let b = &mut self.blockers[blocker];
                        b.phase = Phase::Idle;
                        b.empty += 1;
                        if b.empty % PROBE_EVERY == 0 {
                            let partitions = b.partitions.clone();
                            let p = partitions[self.probe_next as usize % partitions.len()];
                            self.probe_next = self.probe_next.wrapping_add(1);
                            self.probe(p);
                        }
                    }
                    Err(error) => self.lose(blocker, error.to_string()),
                }
            }
            Event::Connected {
                blocker,
                generation,
                result,
            } => {
                if self.blockers[blocker].generation != generation {
                    return;
                }
                match result {
                    Ok(conn) => {
                        let b = &mut self.blockers[blocker];
                        b.conn = Some(conn);
                        b.phase = Phase::Idle;
                        b.backoff = FIRST_BACKOFF;
                        let partitions = b.partitions.clone();
                        if b.lost {
                            b.lost = false;
                            tracing::info!(queue = %self.shared.setup.name, partitions = ?partitions, "wake-up connection re-established; reading Redis again");
                            for p in partitions {
                                self.start_claim(p, With::Rescue);
                            }
                        } else {
                            tracing::debug!(queue = %self.shared.setup.name, partitions = ?partitions, "wake-up connection established");
                        }
                    }
                    Err(error) => {
                        let b = &mut self.blockers[blocker];
                        tracing::warn!(queue = %self.shared.setup.name, partitions = ?b.partitions, %error, retry_in = ?b.backoff, "could not open a wake-up connection");
                        b.lost = true;
                        b.phase = Phase::Backoff {
                            until: Instant::now() + b.backoff,
                        };
                        b.backoff = (b.backoff * 2).min(MAX_BACKOFF);
                        // With no working wake-up connection left, waiting
                        // workers hear why.
                        let healthy = self
                            .blockers
                            .iter()
                            .any(|b| matches!(b.phase, Phase::Idle | Phase::Blocking { .. }));
                        if !healthy {
                            let message = error.to_string();
                            let mut state = self.shared.lock();
                            let reserved = state.reserved;
                            if reserved == 0 {
                                state.fail_waiters(|| match &error {
                                    Error::Timeout { after } => Error::Timeout { after: *after },
                                    _ => Error::Redis(redis::RedisError::from((
                                        redis::ErrorKind::Io,
                                        "cannot reach Redis for wake-ups",
                                        message.clone(),
                                    ))),
                                });
                            }
                        }
                    }
                }
            }
            Event::Probed { partition, result } => {
                let Ok(Some(raw)) = result else {
                    return;
                };
                let mut fields = raw.split(' ').map(|f| f.parse::<u64>().ok());
                let armed = fields.next().flatten();
                let watch = fields.nth(1).flatten();
                let offset = self.shared.lock().offset;
                // The scripts' rule (chain.lua's head_stale): GRACE past
                // its time, or its watch WATCH overdue too.
                let stale = match (armed, offset) {
                    (Some(armed), Some(offset)) => {
                        let now = Instant::now();
                        offset.local_at(armed) + GRACE <= now
                            || watch.is_some_and(|watch| {
                                armed + WATCH_MS <= watch
                                    && offset.local_at(watch + WATCH_MS) <= now
                            })
                    }
                    (Some(_), None) => true,
                    (None, _) => false,
                };
                if stale {
                    tracing::info!(queue = %self.shared.setup.name, partition, "the wake-up chain head is stale (its holder is gone?); re-arming it");
                    self.start_claim(partition, With::Rescue);
                }
            }
            Event::HandedBack { baton, result } => {
                if let Err(error) = result {
                    tracing::warn!(queue = %self.shared.setup.name, partition = baton.partition, %error, "could not hand a wake-up baton back; keeping it");
                    let mut state = self.shared.lock();
                    state.batons.push(Baton {
                        fire_at: Some(Instant::now() + Duration::from_millis(100)),
                        linger_until: None,
                        ..baton
                    });
                }
            }
        }
    }

    /// Holds a baton popped for `partition` at `at_ms`.
    fn hold(&mut self, partition: u32, at_ms: u64, kind: Kind) {
        let mut state = self.shared.lock();
        let fire_at = state.offset.map(|o| o.local_at(at_ms));
        state.batons.push(Baton {
            partition,
            at_ms,
            kind,
            fire_at,
            linger_until: None,
        });
    }

    fn probe(&self, partition: u32) {
        let shared = Arc::clone(&self.shared);
        tokio::spawn(async move {
            let keys = &shared.setup.partitions[partition as usize];
            let mut cmd = redis::cmd("HGET");
            cmd.arg(keys.job()).arg("m");
            let result = shared.setup.conn.query::<Option<String>>(&cmd).await;
            let _ = shared.inbox.send(Event::Probed { partition, result });
        });
    }

    fn claimed(
        &mut self,
        request: ClaimRequest,
        sent: Instant,
        received: Instant,
        result: Result<Outcome, Error>,
    ) {
        let mut outcome = match result {
            Ok(outcome) => outcome,
            Err(error) => {
                tracing::debug!(queue = %self.shared.setup.name, partition = request.partition, %error, "claim failed");
                self.shared.note_failure(&request);
                if request.reserved > 0 {
                    let message = error.to_string();
                    self.shared.lock().fail_waiters(|| match &error {
                        Error::Timeout { after } => Error::Timeout { after: *after },
                        _ => Error::Redis(redis::RedisError::from((
                            redis::ErrorKind::Io,
                            "claim failed",
                            message.clone(),
                        ))),
                    });
                }
                self.notify();
                return;
            }
        };
        self.shared.note(&request, sent, received, &mut outcome);
        let mut jobs: VecDeque<Claimed> = outcome.jobs.into();
        let mut state = self.shared.lock();
        if let Err(error) = outcome.replicated {
            // Not on a replica: a failover could hand these jobs to
            // another worker while ours works on them. Hand them back.
            for job in jobs.drain(..) {
                let shared = Arc::clone(&self.shared);
                tokio::spawn(async move {
                    let _ = shared.release(&job).await;
                });
            }
            if request.reserved > 0 {
                if let Some(waiter) = state.waiters.pop_front() {
                    let _ = waiter.tx.send(Err(error));
                }
            }
        }
        let left = state.serve(jobs);
        let now = Instant::now();
        state.buffer.extend(left.into_iter().map(|job| (job, now)));
        drop(state);
        self.notify();
    }

    fn notify(&self) {
        self.shared.notify.notify_one();
    }
}

impl Drop for Blocker {
    fn drop(&mut self) {
        if let Phase::Blocking { task, .. } | Phase::Connecting { task } = &self.phase {
            task.abort();
        }
    }
}
