//! What a claim is asked ([`ClaimRequest`], made [`With`] a baton or
//! without) and what it answers ([`Outcome`]): the claim script's request
//! and reply (`claim.rs` runs it).

use super::baton::Baton;
use crate::contract::{Claimed, LeaseToken};
use crate::data::error::Error;
use crate::data::id::JobId;

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
    /// None, even for a lone due job: under a backlog, a partition with
    /// the oldest due jobs that no worker of this busy process would pop
    /// the baton of (see [`fair`](super::fair)).
    Overdue,
    /// This baton.
    Baton(Baton),
}

#[derive(Debug)]
pub(crate) struct ClaimRequest {
    pub(crate) partition: u32,
    pub(crate) n: usize,
    pub(crate) with: With,
    pub(crate) ack: Option<(JobId, LeaseToken)>,
    /// Demand of waiting workers this claim serves.
    pub(super) reserved: usize,
}

/// A claim script's reply.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub(crate) now_ms: u64,
    /// How many due jobs the claim saw and left (at most
    /// [`BACKLOG`](super::BACKLOG) + 1): `BACKLOG` or more is a backlog.
    pub(crate) left: u64,
    /// `Some(false)`: the job to ack had lost its lease (nothing done).
    pub(crate) acked: Option<bool>,
    pub(crate) kept: Option<u64>,
    /// The chain head's time after the claim (`None`: no event ahead).
    pub(crate) head: Option<u64>,
    /// The partition's earliest event left, as it is (`head` is moved up
    /// to now): its most overdue job or expired lease, or its next due
    /// job (`None`: none).
    pub(crate) next: Option<u64>,
    pub(crate) buried: Vec<String>,
    pub(crate) jobs: Vec<Claimed>,
    /// The claim ran, but the ack made with it reached fewer replicas
    /// than asked for (a claim without an ack is never an error for want
    /// of replicas: see [`crate::redis::replication`]).
    pub(crate) replicated: Result<(), Error>,
}

impl Outcome {
    /// The outcome of a claim that took nothing and read nothing.
    pub(super) fn nothing() -> Outcome {
        Outcome {
            now_ms: 0,
            left: 0,
            acked: None,
            kept: None,
            head: None,
            next: None,
            buried: Vec::new(),
            jobs: Vec::new(),
            replicated: Ok(()),
        }
    }
}
