//! Claims: the claim script's requests and replies, and running one so
//! that nothing it took is stranded (a claim made for a caller that is
//! dropped meanwhile is finished in a task of its own and its jobs go to
//! the next waiters).

use std::sync::Arc;
use std::time::Duration;

use redis::Value;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::baton::{Baton, Kind, Offset, KEEP_HORIZON};
use super::request::{ClaimRequest, Outcome, With};
use super::shared::{Event, Setup, Shared};
use crate::contract::{Claimed, LeaseToken};
use crate::data::error::Error;
use crate::data::id::JobId;
use crate::redis::replication::Durability;
use crate::redis::reply::{arg, parse, token_text};
use crate::redis::scripts;
use crate::targets;

impl Shared {
    /// Claims now, in a task of its own, for a caller that holds a job
    /// (see [`Job::ack_and_next`](crate::Job::ack_and_next)): on the job's
    /// partition, with its baton if this process holds a due one, in the
    /// ack's script; under a backlog, on the partition with the oldest due
    /// jobs once the job's has had its turn (see [`fair`](super::fair)),
    /// the ack then going alone beside the claim.
    pub(crate) async fn claim_now(
        self: &Arc<Self>,
        partition: u32,
        ack: (JobId, LeaseToken),
    ) -> Result<Outcome, Error> {
        let (elsewhere, with) = self.lock().pick_for_ack(partition, Instant::now());
        let n = 1 + self.setup.prefetch;
        let Some(other) = elsewhere else {
            return self
                .claim_for_caller(ClaimRequest {
                    partition,
                    n,
                    with,
                    ack: Some(ack),
                    reserved: 0,
                })
                .await;
        };
        let claim = self.claim_for_caller(ClaimRequest {
            partition: other,
            n,
            with,
            ack: None,
            reserved: 0,
        });
        let (acked, claimed) = tokio::join!(self.ack_alone(partition, &ack), claim);
        self.merge(acked, claimed)
    }

    /// Runs the ack script alone: whether the lease was still held, and
    /// whether the ack reached the replicas asked for.
    pub(super) async fn ack_alone(
        &self,
        partition: u32,
        (id, token): &(JobId, LeaseToken),
    ) -> Result<(bool, Result<(), Error>), Error> {
        let keys = &self.setup.partitions[partition as usize];
        let (done, replicated): (i64, _) = self
            .setup
            .conn
            .eval_replicated(
                &scripts::ACK_SCRIPT,
                &keys.ordered,
                vec![arg(id.as_str()), arg(token_text(token))],
                Durability::Required,
            )
            .await?;
        Ok((done == 1, replicated))
    }

    /// An ack and a claim made side by side, as the reply of one script
    /// that did both: if the ack failed or found its lease lost, what the
    /// claim took goes to the next calls (as the script would not have
    /// claimed); if only the claim failed, the ack stands and no job came
    /// (the caller then waits as `next` does, which reports a Redis that
    /// stays unreachable).
    pub(super) fn merge(
        self: &Arc<Self>,
        acked: Result<(bool, Result<(), Error>), Error>,
        claimed: Result<Outcome, Error>,
    ) -> Result<Outcome, Error> {
        let (acked, ack_replicated) = match acked {
            Ok(acked) => acked,
            Err(error) => {
                if let Ok(outcome) = claimed {
                    self.pass_on(outcome);
                }
                return Err(error);
            }
        };
        let mut outcome = match claimed {
            Ok(outcome) if !acked => {
                self.pass_on(outcome);
                Outcome::nothing()
            }
            Ok(outcome) => outcome,
            Err(error) => {
                tracing::debug!(target: targets::WAKE, queue = %self.setup.name, %error, "claim beside an ack failed");
                Outcome::nothing()
            }
        };
        outcome.acked = Some(acked);
        if outcome.replicated.is_ok() {
            outcome.replicated = ack_replicated;
        }
        Ok(outcome)
    }

    /// Jobs claimed for a caller that cannot take them: to the next calls,
    /// or back to Redis if the claim did not reach its replicas.
    pub(super) fn pass_on(self: &Arc<Self>, outcome: Outcome) {
        if outcome.replicated.is_ok() {
            self.absorb(outcome.jobs);
            return;
        }
        let shared = Arc::clone(self);
        tokio::spawn(async move {
            for job in &outcome.jobs {
                let _ = shared.release(job).await;
            }
        });
    }

    /// Runs a claim in a task of its own and waits for its outcome; if
    /// this call is dropped meanwhile, the jobs go to the next waiters.
    pub(super) async fn claim_for_caller(
        self: &Arc<Self>,
        request: ClaimRequest,
    ) -> Result<Outcome, Error> {
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
        let (result, changed) = match result {
            Ok(mut outcome) => {
                let changed = self.note(&request, sent, received, &mut outcome);
                (Ok(outcome), changed)
            }
            Err(error) => {
                self.note_failure(&request);
                (Err(error), true)
            }
        };
        // The waker looks again only if the claim changed what it acts on
        // (waking it for every claim of a backlog costs a task switch per
        // job).
        if changed {
            self.notify.notify_one();
        }
        result
    }

    /// Takes what a claim's reply says about this process' state: Redis'
    /// clock (the offset), the baton passed back to it, and the jobs it
    /// buried (traced). Leaves the jobs. Returns whether the waker has
    /// something new to act on: a baton, a backlog begun or ended, demand
    /// freed, a chain head to check.
    pub(super) fn note(
        &self,
        request: &ClaimRequest,
        sent: Instant,
        received: Instant,
        outcome: &mut Outcome,
    ) -> bool {
        let name = &self.setup.name;
        let partition = request.partition;
        for id in std::mem::take(&mut outcome.buried) {
            tracing::warn!(target: targets::JOB, queue = %name, job = %id, attempts = self.setup.max_attempts, partition, "job moved to the dead letters: its last lease ran out");
            crate::metrics::dead_lettered(name);
        }
        let mut state = self.lock();
        let mut changed = request.reserved > 0 || state.failed_at.contains_key(&partition);
        state.reserved = state.reserved.saturating_sub(request.reserved);
        state.failed_at.remove(&partition);
        // (A claim whose ack lost its lease read nothing.)
        if outcome.acked != Some(false) {
            changed |= state.fair.note(partition, outcome);
        }
        if outcome.now_ms > 0 && received.duration_since(sent) < Duration::from_secs(1) {
            state.offset = Some(Offset {
                redis_ms: outcome.now_ms,
                local: received,
            });
        }
        // What the chain head is now: checked WATCH after its time unless
        // this process holds its baton (a claim whose ack lost its lease
        // read nothing).
        if outcome.acked != Some(false) {
            state.learn(partition, outcome.head);
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
            changed = true;
        }
        changed
    }

    /// A claim failed: the demand it served is free again, the partition
    /// is fragile for a while, and the baton the claim was made with is
    /// not lost with it (it is tried again in half a second).
    pub(super) fn note_failure(&self, request: &ClaimRequest) {
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
    pub(super) async fn report(
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
}

/// A claim in flight, as a boxed future.
pub(super) type InFlight = std::pin::Pin<
    Box<
        dyn std::future::Future<Output = (ClaimRequest, Instant, Instant, Result<Outcome, Error>)>
            + Send,
    >,
>;

/// A claim run in the caller's task; if the caller is dropped before it
/// ends, it is finished in a task of its own and reported to the waker (its
/// jobs go to the next waiters), so that nothing is stranded.
pub(super) struct InlineClaim<'a> {
    pub(super) claim: Option<InFlight>,
    pub(super) shared: &'a Arc<Shared>,
}

impl InlineClaim<'_> {
    pub(super) async fn run(&mut self) -> (ClaimRequest, Instant, Instant, Result<Outcome, Error>) {
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

/// Runs one claim and reports it: to `caller` if given and still there,
/// else to the waker.
pub(super) async fn run_claim(shared: Arc<Shared>, request: ClaimRequest) {
    let sent = Instant::now();
    let result = claim(&shared.setup, &request, sent).await;
    let received = Instant::now();
    shared.report(request, sent, received, result).await;
}

/// Runs the claim script.
pub(super) async fn claim(
    setup: &Setup,
    request: &ClaimRequest,
    sent: Instant,
) -> Result<Outcome, Error> {
    let keys = &setup.partitions[request.partition as usize];
    let lease_ms = setup.lease_ms;
    let token = setup.token();
    let (baton, min_due) = match request.with {
        With::Nothing => (String::new(), 2),
        With::Rescue => ("r".to_owned(), 1),
        With::Start | With::Overdue => (String::new(), 1),
        // A watch claims only if more than one job is due, unless it
        // finds the chain head stale (the script decides).
        With::Baton(baton) if baton.kind == Kind::Watch => (baton.claim_arg(), 2),
        With::Baton(baton) => (baton.claim_arg(), 1),
    };
    let (ack_id, ack_token) = match &request.ack {
        Some((id, token)) => (arg(id.as_str()), arg(token_text(token))),
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
        arg(&setup.holder),
    ];
    // A claim is best effort (its loss in a failover only means a
    // redelivery); an ack made with it was promised to its caller.
    let durability = match request.ack {
        Some(_) => Durability::Required,
        None => Durability::BestEffort,
    };
    let (reply, replicated): (Vec<Value>, _) = setup
        .conn
        .eval_replicated(&scripts::CLAIM_SCRIPT, &keys.ordered, args, durability)
        .await?;
    let mut fields = reply.into_iter();
    let now_ms: i64 = parse(fields.next())?;
    let acked: i64 = parse(fields.next())?;
    let head: i64 = parse(fields.next())?;
    let kept: i64 = parse(fields.next())?;
    let left: i64 = parse(fields.next())?;
    let next: i64 = parse(fields.next())?;
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
        let token = LeaseToken::Text(format!("{token}.{}", jobs.len() + 1));
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
    // Occurrences of recurrences carry a line for this claimer first.
    let jobs = crate::redis::duties::fulfil_duties(&setup.conn, keys, &setup.name, jobs).await;
    Ok(Outcome {
        now_ms: u64::try_from(now_ms).unwrap_or(0),
        left: u64::try_from(left).unwrap_or(0),
        acked: match acked {
            1 => Some(true),
            0 => Some(false),
            _ => None,
        },
        kept: u64::try_from(kept).ok(),
        head: u64::try_from(head).ok(),
        next: u64::try_from(next).ok(),
        buried,
        jobs,
        replicated,
    })
}
