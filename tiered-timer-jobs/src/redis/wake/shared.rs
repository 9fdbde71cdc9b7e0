//! [`Shared`]: what `next` and the waker task of one queue handle share
//! (the [`State`] under its mutex, the waker's inbox of events), and the
//! calls that go through it: waiting for jobs, taking prefetched ones,
//! closing, abandoning, handing batons and jobs back. The claims it runs
//! are `claim.rs`'s, the task itself `waker.rs`'s.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::baton::{Baton, Kind};
use super::request::{ClaimRequest, Outcome};
use super::state::{Delivery, State, Waiter};
use crate::contract::Claimed;
use crate::data::error::Error;
use crate::redis::conn::Conn;
use crate::redis::keys::Keys;
use crate::redis::reply::{arg, token_text};
use crate::redis::scripts;

/// What the waker and its claims need of the queue.
pub(crate) struct Setup {
    pub(crate) name: String,
    pub(crate) conn: Conn,
    pub(crate) partitions: Vec<Keys>,
    /// The lease a claim grants, in ms.
    pub(crate) lease_ms: u64,
    pub(crate) max_attempts: u32,
    /// Jobs a claim may take beyond what the waiting workers asked for.
    pub(crate) prefetch: usize,
    pub(crate) health_check: Duration,
    /// Lease tokens are this random prefix and a counter: unique across
    /// processes and within this one, and cheap.
    pub(crate) token_prefix: String,
    pub(crate) tokens: std::sync::atomic::AtomicU64,
    /// Who the claims are for (`Builder::holder`): recorded with each
    /// job's lease and in its history.
    pub(crate) holder: String,
}

impl Setup {
    /// A fresh token prefix for one claim (its k-th job's token is
    /// prefix.k).
    pub(super) fn token(&self) -> String {
        let n = self
            .tokens
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("{}{n:x}", self.token_prefix)
    }
}

/// What `next` and the waker task share.
pub(crate) struct Shared {
    pub(crate) setup: Setup,
    pub(super) state: Mutex<State>,
    pub(super) notify: Notify,
    pub(super) inbox: mpsc::UnboundedSender<Event>,
    pub(super) task: Mutex<Option<JoinHandle<()>>>,
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
pub(super) enum Event {
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
    /// The shared state of a new handle, before its waker task starts.
    pub(super) fn new(setup: Setup, state: State, inbox: mpsc::UnboundedSender<Event>) -> Shared {
        Shared {
            setup,
            state: Mutex::new(state),
            notify: Notify::new(),
            inbox,
            task: Mutex::new(None),
        }
    }

    /// Keeps the waker task, to stop it when the last handle is gone.
    pub(super) fn set_task(&self, task: JoinHandle<()>) {
        *self.task.lock().unwrap_or_else(|e| e.into_inner()) = Some(task);
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
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
    pub(super) async fn hand_back(&self, baton: &Baton) -> Result<(), Error> {
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
                vec![arg(job.id.as_str()), arg(token_text(&job.token))],
                scripts::durability(&scripts::RELEASE_SCRIPT),
            )
            .await?;
        Ok(done == 1)
    }
}

/// A waiting call's end of the channel: if the call is dropped after the
/// waker sent it jobs, they go back to the buffer for the next waiter.
pub(super) struct Pending<'a> {
    pub(super) rx: Option<oneshot::Receiver<Delivery>>,
    pub(super) shared: &'a Arc<Shared>,
}

impl Pending<'_> {
    pub(super) async fn recv(&mut self) -> Delivery {
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
