//! [`State`]: what `next` and the waker task share under the mutex of
//! [`Shared`](super::shared::Shared): waiting calls, prefetched jobs, held
//! batons, the clock offset, what the claims said of each partition
//! (`fair.rs`), and the chain heads to check. Held only for bookkeeping,
//! never across an `.await`.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::baton::{Baton, Kind, Offset, CHECK_MARGIN, RECHECK, WATCH, WATCH_MS};
use super::fair::{Fairness, SPECULATE_EVERY, STAY};
use super::request::With;
use crate::contract::Claimed;
use crate::data::error::Error;

/// What a waiting call gets.
pub(super) type Delivery = Result<Vec<Claimed>, Error>;

pub(super) struct Waiter {
    pub(super) want: usize,
    pub(super) tx: oneshot::Sender<Delivery>,
}

#[derive(Default)]
pub(super) struct State {
    pub(super) waiters: VecDeque<Waiter>,
    /// Claimed jobs no waiter took yet (prefetched, or claimed for a
    /// waiter that left), with when they came.
    pub(super) buffer: VecDeque<(Claimed, Instant)>,
    pub(super) batons: Vec<Baton>,
    /// Demand that claims in flight are serving.
    pub(super) reserved: usize,
    pub(super) offset: Option<Offset>,
    /// When a claim on a partition last failed (its node down, say): for
    /// a while its claims do not hold waiting workers' demand, so that a
    /// dead node's partitions never make the others wait.
    pub(super) failed_at: std::collections::HashMap<u32, Instant>,
    /// What the claims said of each partition: while one holds a backlog
    /// ([`BACKLOG`] or more due jobs), calls claim at once, without
    /// waiting for a baton, on the partition with the oldest due jobs
    /// (see [`fair`]), so every worker works on a backlog at once, oldest
    /// due first across partitions, until the claims' replies say it is
    /// gone.
    pub(super) fair: Fairness,
    /// When a waiting worker of this process is to check each partition's
    /// chain head (see [`State::learn`]).
    pub(super) checks: std::collections::HashMap<u32, Check>,
    pub(super) closed: bool,
}

/// A chain head a waiting worker is to check (see [`State::learn`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct Check {
    /// The head's time, on Redis' clock (ms).
    pub(super) head: u64,
    /// When to check it.
    pub(super) at: Instant,
    /// When this process read it.
    pub(super) learned: Instant,
}

/// How long after a failed claim a partition's claims do not hold demand.
pub(super) const FRAGILE: Duration = Duration::from_secs(10);

impl State {
    /// Takes what a claim or a probe read of `partition`'s chain head
    /// (its time, on Redis' clock; `None`: no event ahead): while workers
    /// of this process wait, they check it [`WATCH`] after its time unless
    /// this process holds its baton or a watch that checks it in time, so
    /// that a head lost with a process that held both its baton and its
    /// watch costs seconds.
    pub(super) fn learn(&mut self, partition: u32, head: Option<u64>) {
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
    pub(super) fn begin_waiting(&mut self, partitions: u32, busy_since: Instant, now: Instant) {
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
    pub(super) fn check_at(&self, partition: u32) -> Option<Instant> {
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
    pub(super) fn fragile(&self, partition: u32) -> bool {
        self.failed_at
            .get(&partition)
            .is_some_and(|at| at.elapsed() < FRAGILE)
    }

    /// Jobs asked for by open waiters and not yet being claimed.
    /// Whether a worker of this process waits (whether or not a claim is
    /// in flight for it).
    pub(super) fn has_waiters(&mut self) -> bool {
        self.waiters.retain(|w| !w.tx.is_closed());
        !self.waiters.is_empty()
    }

    pub(super) fn demand(&mut self) -> usize {
        self.waiters.retain(|w| !w.tx.is_closed());
        let asked: usize = self.waiters.iter().map(|w| w.want).sum();
        asked.saturating_sub(self.reserved)
    }

    /// Gives jobs to the waiters, first come first served; returns what is
    /// left.
    pub(super) fn serve(&mut self, mut jobs: VecDeque<Claimed>) -> VecDeque<Claimed> {
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

    pub(super) fn fail_waiters(&mut self, error: impl Fn() -> Error) {
        for waiter in self.waiters.drain(..) {
            let _ = waiter.tx.send(Err(error()));
        }
    }
}

/// Where a claim picked by [`State::oldest`] goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Target {
    /// With the due baton `batons[i]` held here.
    Baton(usize),
    /// Without a baton: a partition with due jobs, as its last claim left
    /// them or its next job since came due (`backlog`: a backlog).
    Due { partition: u32, backlog: bool },
    /// Without a baton: a partition not known to have a due job.
    Speculative(u32),
}

impl State {
    /// The order in which the held batons that are due serve waiting
    /// workers: the partitions that may have waited longest first, a
    /// watch baton (which checks the chain, and claims only from a
    /// backlog) after the others.
    pub(super) fn baton_age(&self, baton: &Baton) -> (bool, u64) {
        let since = self.fair.due_since(baton.partition).min(baton.at_ms);
        (baton.kind == Kind::Watch, since)
    }

    /// The oldest due work this process knows of, under a backlog (see
    /// the module docs); `None` without a backlog.
    pub(super) fn oldest(&self, now: Instant) -> Option<Target> {
        if !self.fair.backlog() {
            return None;
        }
        let mut best: Option<(u64, Target)> = None;
        let mut consider = |since: u64, target: Target| {
            if best.is_none_or(|(b, _)| since < b) {
                best = Some((since, target));
            }
        };
        // Batons first: on a tie, the claim goes with the baton.
        for (i, baton) in self.batons.iter().enumerate() {
            if baton.kind != Kind::Watch && baton.fire_at.is_none_or(|at| at <= now) {
                consider(self.baton_age(baton).1, Target::Baton(i));
            }
        }
        let speculate = self.fair.since_speculation >= SPECULATE_EVERY;
        let redis_now = self.offset.map_or(0, |offset| offset.redis_at(now));
        for (partition, seen) in (0u32..).zip(&self.fair.seen) {
            match seen {
                Some(seen) if seen.due_by(redis_now) => consider(
                    seen.due_since(),
                    Target::Due {
                        partition,
                        backlog: seen.backlog(),
                    },
                ),
                _ if speculate => consider(
                    self.fair.due_since(partition),
                    Target::Speculative(partition),
                ),
                _ => {}
            }
        }
        best.map(|(_, target)| target)
    }

    /// Where a call that wants a job claims at once, if anywhere: `alone`
    /// (no other call waits), with the oldest due baton held here; under a
    /// backlog, on the partition with the oldest due work, whoever else
    /// waits (a held baton is left to the waker, which serves the calls
    /// in the order they came). `None`: the call waits for a baton.
    pub(super) fn pick(&mut self, now: Instant, alone: bool) -> Option<(u32, With)> {
        if !self.fair.backlog() {
            if !alone {
                return None;
            }
            let i = self
                .batons
                .iter()
                .enumerate()
                .filter(|(_, b)| b.fire_at.is_none_or(|at| at <= now))
                .min_by_key(|(_, b)| self.baton_age(b))?
                .0;
            let baton = self.batons.swap_remove(i);
            return Some((baton.partition, With::Baton(baton)));
        }
        match self.oldest(now)? {
            Target::Baton(_) if !alone => None,
            target => Some(self.take(target)),
        }
    }

    /// Where [`Job::ack_and_next`](crate::Job::ack_and_next) on a job of
    /// `partition` claims: `None` there, with its due baton if one is held
    /// here (in the ack's script); `Some` elsewhere, the partition with
    /// the oldest due work, when `partition` has stayed [`STAY`] claims in
    /// a row while another's jobs were older (the ack then goes alone).
    pub(super) fn pick_for_ack(&mut self, partition: u32, now: Instant) -> (Option<u32>, With) {
        let elsewhere = match self.oldest(now) {
            Some(target) if self.partition_of(target) != partition => Some(target),
            _ => None,
        };
        match elsewhere {
            Some(target) if self.fair.stayed >= STAY => {
                self.fair.stayed = 0;
                let (other, with) = self.take(target);
                return (Some(other), with);
            }
            Some(_) => self.fair.stayed += 1,
            None => self.fair.stayed = 0,
        }
        self.fair.since_speculation = self.fair.since_speculation.saturating_add(1);
        let due = self
            .batons
            .iter()
            .position(|b| b.partition == partition && b.fire_at.is_none_or(|at| at <= now));
        match due {
            Some(i) => (None, With::Baton(self.batons.swap_remove(i))),
            None => (None, With::Nothing),
        }
    }

    pub(super) fn partition_of(&self, target: Target) -> u32 {
        match target {
            Target::Baton(i) => self.batons[i].partition,
            Target::Due { partition, .. } | Target::Speculative(partition) => partition,
        }
    }

    /// The claim for `target`: its partition, and what it is made with.
    pub(super) fn take(&mut self, target: Target) -> (u32, With) {
        self.fair.since_speculation = self.fair.since_speculation.saturating_add(1);
        match target {
            Target::Baton(i) => {
                let baton = self.batons.swap_remove(i);
                (baton.partition, With::Baton(baton))
            }
            Target::Due {
                partition,
                backlog: true,
            } => (partition, With::Nothing),
            Target::Due { partition, .. } => (partition, With::Overdue),
            Target::Speculative(partition) => {
                self.fair.since_speculation = 0;
                (partition, With::Overdue)
            }
        }
    }

    /// The marker sets of `partitions` in the order a `BZPOPMIN` is to
    /// try them: the partitions that may have had a job due the longest
    /// first.
    pub(super) fn marker_order(&self, partitions: &[u32]) -> Vec<usize> {
        let mut order: Vec<usize> = (0..partitions.len()).collect();
        order.sort_by_key(|&i| self.fair.due_since(partitions[i]));
        order
    }
}
