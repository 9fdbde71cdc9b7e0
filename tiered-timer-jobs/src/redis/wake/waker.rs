//! The waker task: keeps a blocking `BZPOPMIN` outstanding while workers
//! wait, fires held batons on time, probes the chain head, and replaces a
//! silent connection (see the ground rules in the module above).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::baton::{Baton, Kind, HOLD, LINGER, PROBE_EVERY, WATCH, WATCH_MS};
use super::claim::run_claim;
use super::fair::Fairness;
use super::request::{ClaimRequest, Outcome, With};
use super::shared::{Event, Setup, Shared};
use super::state::State;
use crate::contract::Claimed;
use crate::data::error::Error;
use crate::targets;

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

/// A blocking call may come back this much before its bound.
const CHECK_SLACK: Duration = Duration::from_millis(20);

const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// Starts the waker task of a new queue handle.
pub(crate) fn start(setup: Setup) -> Arc<Shared> {
    let (inbox, events) = mpsc::unbounded_channel();
    let state = State {
        fair: Fairness::new(setup.partitions.len() as u32),
        ..State::default()
    };
    let shared = Arc::new(Shared::new(setup, state, inbox));
    let task = tokio::spawn(Waker::new(Arc::clone(&shared), events).run());
    shared.set_task(task);
    shared
}

pub(super) struct Waker {
    shared: Arc<Shared>,
    events: mpsc::UnboundedReceiver<Event>,
    blockers: Vec<Blocker>,
    started: bool,
    probe_next: u32,
    /// Since when no worker of this process waits (`None`: some do); a
    /// new handle is busy from its start.
    busy_since: Option<Instant>,
}

impl Waker {
    pub(super) fn new(shared: Arc<Shared>, events: mpsc::UnboundedReceiver<Event>) -> Waker {
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
            busy_since: Some(Instant::now()),
        }
    }

    pub(super) async fn run(mut self) {
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
            let (demand, closed) = (state.demand(), state.closed);
            // Waiting: some worker of this process waits (for a job or
            // for a claim in flight on its behalf).
            let waiting = state.has_waiters() && !closed;
            match (self.busy_since, waiting) {
                (Some(busy_since), true) => {
                    let partitions = self.shared.setup.partitions.len() as u32;
                    state.begin_waiting(partitions, busy_since, now);
                    self.busy_since = None;
                }
                (None, false) => self.busy_since = Some(now),
                _ => {}
            }
            (demand, closed)
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
            let mut batons = std::mem::take(&mut state.batons);
            // The demand goes to the partitions that may have waited
            // longest first.
            batons.sort_by_cached_key(|b| state.baton_age(b));
            for mut baton in batons {
                let due = baton.fire_at.is_none_or(|at| at <= now);
                if closed {
                    give_back.push(baton);
                } else if baton.kind == Kind::Watch && demand == 0 {
                    // A watch is this process' to check with, waiting
                    // workers or not: handed back whenever a worker got
                    // busy, it would cost a ZADD and a BZPOPMIN per job.
                    // With nobody here waiting it claims nothing: it only
                    // re-arms a stale chain for the workers that wait.
                    if due {
                        fire.push((baton, 0, 0));
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
                        tracing::info!(target: targets::JOB, queue = %shared.setup.name, job = %job.id, attempt = job.attempt, "prefetched job released: no worker took it within half its lease")
                    }
                    Err(error) => {
                        tracing::warn!(target: targets::JOB, queue = %shared.setup.name, job = %job.id, %error, "could not release a prefetched job; it comes back when its lease runs out")
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
        // Back by the first chain head to check, if that comes first; the
        // partitions that may have waited longest first (`BZPOPMIN` pops
        // from the first non-empty set it is given).
        let (check, order) = {
            let state = self.shared.lock();
            let partitions = &self.blockers[index].partitions;
            let check = partitions.iter().filter_map(|&p| state.check_at(p)).min();
            (check, state.marker_order(partitions))
        };
        let now = Instant::now();
        let block_for = match check {
            Some(at) => (health - margin).min(at.saturating_duration_since(now)),
            None => health - margin,
        }
        // (0 would block for ever.)
        .max(Duration::from_millis(10));
        let blocker = &mut self.blockers[index];
        let Some(mut conn) = blocker.conn.clone() else {
            return;
        };
        blocker.generation += 1;
        let generation = blocker.generation;
        let markers: Vec<String> = order.iter().map(|&i| blocker.markers[i].clone()).collect();
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
            tracing::warn!(target: targets::WAKE, queue = %self.shared.setup.name, partitions = ?blocker.partitions, error = %why, "wake-up connection lost; reconnecting");
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
                        let due = self.due_checks(blocker);
                        let b = &mut self.blockers[blocker];
                        b.phase = Phase::Idle;
                        if !due.is_empty() {
                            for p in due {
                                self.probe(p);
                            }
                            return;
                        }
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
                            tracing::info!(target: targets::WAKE, queue = %self.shared.setup.name, partitions = ?partitions, "wake-up connection re-established; reading Redis again");
                            for p in partitions {
                                self.start_claim(p, With::Rescue);
                            }
                        } else {
                            tracing::debug!(target: targets::WAKE, queue = %self.shared.setup.name, partitions = ?partitions, "wake-up connection established");
                        }
                    }
                    Err(error) => {
                        let b = &mut self.blockers[blocker];
                        tracing::warn!(target: targets::WAKE, queue = %self.shared.setup.name, partitions = ?b.partitions, %error, retry_in = ?b.backoff, "could not open a wake-up connection");
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
                let armed = raw.split(' ').next().and_then(|f| f.parse::<u64>().ok());
                let stale = {
                    let mut state = self.shared.lock();
                    // Unclaimed WATCH past its time (the watch's rule), and
                    // not this process' to claim with.
                    let stale = match (armed, state.offset) {
                        (Some(armed), Some(offset)) => {
                            offset.local_at(armed + WATCH_MS) <= Instant::now()
                                && !state.batons.iter().any(|b| {
                                    b.partition == partition
                                        && b.kind == Kind::Head
                                        && b.at_ms == armed
                                })
                        }
                        (Some(_), None) => true,
                        (None, _) => false,
                    };
                    if stale {
                        state.checks.remove(&partition);
                    } else {
                        state.learn(partition, armed);
                    }
                    stale
                };
                if stale {
                    tracing::info!(target: targets::WAKE, queue = %self.shared.setup.name, partition, "the wake-up chain head is stale (its holder is gone?); re-arming it");
                    self.start_claim(partition, With::Rescue);
                }
            }
            Event::HandedBack { baton, result } => {
                if let Err(error) = result {
                    tracing::warn!(target: targets::WAKE, queue = %self.shared.setup.name, partition = baton.partition, %error, "could not hand a wake-up baton back; keeping it");
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

    /// The partitions of blocker `index` whose chain head is due to be
    /// checked; each is checked again in [`WATCH`] should the probe fail.
    fn due_checks(&self, index: usize) -> Vec<u32> {
        let now = Instant::now();
        let mut state = self.shared.lock();
        let due: Vec<u32> = self.blockers[index]
            .partitions
            .iter()
            .copied()
            .filter(|&p| state.check_at(p).is_some_and(|at| at <= now + CHECK_SLACK))
            .collect();
        for p in &due {
            if let Some(check) = state.checks.get_mut(p) {
                check.at = now + WATCH;
            }
        }
        due
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
                tracing::debug!(target: targets::WAKE, queue = %self.shared.setup.name, partition = request.partition, %error, "claim failed");
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
        let jobs: VecDeque<Claimed> = outcome.jobs.into();
        if let Err(error) = outcome.replicated {
            // The ack of a caller that is gone reached too few replicas:
            // nobody is left to tell but the log. The jobs claimed with
            // it are claimed all the same: they go to the waiters.
            if let Some((id, _)) = &request.ack {
                tracing::warn!(target: targets::JOB, queue = %self.shared.setup.name, job = %id, %error, "an ack made with a claim did not reach the replicas (its caller is gone)");
            }
        }
        let mut state = self.shared.lock();
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
