//! Waiting without polling: when a handle claims next, and its one
//! LISTEN connection.
//!
//! # Design
//!
//! A claim returns, besides its jobs, the queue's next event (the
//! earliest waiting job or lease expiry it did not take), in ms of the
//! database's clock with the database's now. [`Wake`] turns that into a
//! local instant (the reply's arrival plus the difference, so never
//! earlier than the database would call it due, give or take the clocks'
//! drift over the wait) and the handle's next claim sleeps on
//! `tiered-timer` until then. A job scheduled for earlier than that is
//! announced by the statement that wrote it (`pg_notify` on the queue's
//! channel, with its due time, delivered at commit): the handle's
//! listener ([`listen`]) moves the instant earlier and wakes the claimer.
//!
//! One claimer per handle: the handle's waiting `next` calls take turns
//! (the backend's `turn` lock), so one notification or one due time costs
//! one claim query per handle, however many workers wait on it; the
//! claim's reply says when the next worker in line should claim (at once
//! if it saw more due jobs). Handles in other processes each claim once
//! for a job that wakes them all: the cost of a job grows with the
//! handles that wait idle on its queue (a few per service), never with
//! the workers or the jobs.
//!
//! Nothing is lost between a claim's read and a notification: a
//! notification that arrives after a claim was sent may be for a commit
//! after the claim's snapshot, so it is kept ([`Wake::notified`]) and
//! merged with the claim's answer instead of being overwritten by it;
//! one that arrived before the claim was sent is for a commit the claim
//! saw. The listener, whenever it (re)starts listening, makes the handle
//! claim again (notifications may have been missed while it was not
//! listening).
//!
//! Idle, a handle sends only the listener's health check: `SELECT 1` on
//! the LISTEN connection every three quarters of
//! [`Builder::health_check`](crate::Builder::health_check), answered
//! within the last quarter, so a connection that went silent (no FIN, no
//! RST) is noticed within `health_check` and replaced.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use sqlx::postgres::{PgListener, PgPool};
use tiered_timer::Instant;
use tokio::sync::Notify;

use crate::targets;

/// When a handle claims next, and what changes it.
#[derive(Debug, Default)]
pub(super) struct Wake {
    state: Mutex<State>,
    /// Woken whenever the state moves earlier (or the handle closes).
    pub(super) changed: Notify,
}

#[derive(Debug, Default)]
struct State {
    /// When the next claim is due by what the last claim said; `None`:
    /// nothing is scheduled (wait for a notification).
    next: Option<Instant>,
    /// The earliest time notified since the last claim was sent.
    notified: Option<Instant>,
    /// The database's clock at the last reply (ms) and when it arrived.
    clock: Option<(u64, Instant)>,
    /// How long to wait before claiming again when due jobs were all
    /// locked by other claimers (or by an open `ack_within`).
    backoff: Duration,
}

/// The least wait before claiming again when every due job was locked
/// by another claim or transaction; doubled each time up to
/// [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(1);
/// The most: a due job stays locked only while another transaction holds
/// it (a claim for a few ms, an `ack_within` until its commit or
/// rollback).
const MAX_BACKOFF: Duration = Duration::from_secs(1);

fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

impl Wake {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new handle claims at once.
    pub(super) fn new() -> Wake {
        let wake = Wake::default();
        wake.lock().next = Some(Instant::now());
        wake
    }

    /// When the handle should claim next (`None`: when notified).
    pub(super) fn when(&self) -> Option<Instant> {
        let state = self.lock();
        earliest(state.next, state.notified)
    }

    /// Before a claim is sent: notifications from now on may be for
    /// commits the claim does not see, and are kept for after it.
    pub(super) fn sending(&self) {
        self.lock().notified = None;
    }

    /// After a claim: the database's now and its next event (ms), and
    /// whether it took anything.
    pub(super) fn claimed(&self, now_ms: u64, next_ms: Option<u64>, took: bool) {
        let arrived = Instant::now();
        let mut state = self.lock();
        state.clock = Some((now_ms, arrived));
        let next = next_ms.map(|ms| at(now_ms, arrived, ms));
        state.next = match next {
            // Due jobs it could not take: locked by other claims or an open
            // transaction. Claim again soon, later each time.
            Some(next) if !took && next <= arrived => {
                state.backoff = (state.backoff * 2).clamp(MIN_BACKOFF, MAX_BACKOFF);
                Some(arrived + state.backoff)
            }
            next => {
                if took {
                    state.backoff = Duration::ZERO;
                }
                next
            }
        };
    }

    /// A claim failed: the next one is sent at once.
    pub(super) fn failed(&self) {
        self.lock().next = Some(Instant::now());
    }

    /// A job due at `due_ms` (the database's clock) was committed.
    pub(super) fn notify(&self, due_ms: u64) {
        let mut state = self.lock();
        let at = match state.clock {
            Some((now_ms, arrived)) => at(now_ms, arrived, due_ms),
            None => Instant::now(),
        };
        let before = earliest(state.next, state.notified);
        state.notified = earliest(state.notified, Some(at));
        drop(state);
        if before.is_none_or(|before| at < before) {
            self.changed.notify_waiters();
        }
    }

    /// Claim at once (the listener (re)started: notifications may have
    /// been missed; or the handle is closing).
    pub(super) fn now(&self) {
        self.lock().notified = Some(Instant::now());
        self.changed.notify_waiters();
    }
}

/// The local instant at which the database's clock reads `due_ms`, by a
/// reply that said `now_ms` and arrived at `arrived`.
fn at(now_ms: u64, arrived: Instant, due_ms: u64) -> Instant {
    arrived + Duration::from_millis(due_ms.saturating_sub(now_ms))
}

/// What the listener task needs of its handle.
pub(super) struct Listening {
    pub(super) pool: PgPool,
    pub(super) channel: String,
    pub(super) queue: String,
    pub(super) health_check: Duration,
    pub(super) timeout: Duration,
    pub(super) wake: Arc<Wake>,
}

/// The listener task of one handle: LISTENs on the queue's channel,
/// passes notifications to the handle's [`Wake`], checks the connection
/// every `health_check` and replaces it when it fails or goes silent;
/// ends when the handle is dropped.
pub(super) async fn listen(listening: Weak<Listening>, stop: Arc<Notify>) {
    let mut backoff = Duration::from_millis(50);
    loop {
        let Some(shared) = listening.upgrade() else {
            return;
        };
        let connected = tiered_timer::timeout(shared.timeout, connect(&shared)).await;
        let listener = match connected {
            Ok(Ok(listener)) => listener,
            outcome => {
                let error = match outcome {
                    Ok(Err(error)) => error.to_string(),
                    _ => format!("no answer within {:?}", shared.timeout),
                };
                tracing::warn!(target: targets::POSTGRES, queue = %shared.queue, %error, "could not LISTEN for wake-ups; trying again");
                let wait = backoff;
                backoff = (backoff * 2).min(shared.health_check);
                drop(shared);
                tokio::select! {
                    () = tiered_timer::sleep(wait) => continue,
                    () = stop.notified() => return,
                }
            }
        };
        backoff = Duration::from_millis(50);
        tracing::info!(target: targets::POSTGRES, queue = %shared.queue, "listening for wake-ups");
        // Jobs committed while nobody listened: claim to see them.
        shared.wake.now();
        let lost = serve(&shared, listener, &stop).await;
        match lost {
            None => return,
            Some(reason) => {
                tracing::warn!(target: targets::POSTGRES, queue = %shared.queue, reason, "wake-up connection lost; connecting again")
            }
        }
    }
}

async fn connect(shared: &Listening) -> Result<PgListener, sqlx::Error> {
    let mut listener = PgListener::connect_with(&shared.pool).await?;
    listener.listen(&shared.channel).await?;
    Ok(listener)
}

/// Serves one LISTEN connection until it fails (`Some(why)`) or the
/// handle is dropped (`None`).
async fn serve(shared: &Listening, mut listener: PgListener, stop: &Notify) -> Option<String> {
    let quarter = shared.health_check / 4;
    let mut check_at = Instant::now() + quarter * 3;
    loop {
        tokio::select! {
            received = listener.try_recv() => match received {
                Ok(Some(notification)) => {
                    if let Ok(due_ms) = notification.payload().parse::<u64>() {
                        shared.wake.notify(due_ms);
                    }
                }
                Ok(None) => return Some("the connection closed".to_owned()),
                Err(error) => return Some(error.to_string()),
            },
            () = tiered_timer::sleep_until(check_at) => {
                let ping = sqlx::query("SELECT 1").execute(&mut listener);
                match tiered_timer::timeout(quarter, ping).await {
                    Ok(Ok(_)) => check_at = Instant::now() + quarter * 3,
                    Ok(Err(error)) => return Some(error.to_string()),
                    Err(_) => return Some(format!("no answer to the health check within {quarter:?}")),
                }
            }
            () = stop.notified() => return None,
        }
    }
}
