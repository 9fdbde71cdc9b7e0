//! Which partition a busy worker claims from: the one whose due jobs are
//! the oldest, as far as this process knows.
//!
//! # Why
//!
//! Each partition has a wake-up chain of its own, and a worker learns of
//! a partition's due jobs by popping its baton or by claiming there. A
//! worker that is never idle never pops a baton: left to itself it stayed
//! on the partition it was on (the backlog its last claim found, the baton
//! it kept, the partition of the job it acked with `ack_and_next`), and
//! the other partitions' jobs waited however overdue they were (issue 33:
//! one slow worker on three partitions, one partition 6 min 31 s late
//! and growing while jobs due after them were served on the other two).
//!
//! # What this process knows, for nothing
//!
//! Every claim's reply says, for its partition: Redis' time, the
//! partition's earliest event left (its most overdue job or expired
//! lease, or when its next job comes due) and how many due jobs it left
//! ([`Seen`]). A job that was not there at that claim was scheduled after
//! it, so it is due no earlier than the claim (unless scheduled for a time
//! already past): so the partition has had a job due since no earlier
//! than the earliest event or the claim, whichever came first
//! ([`Seen::due_since`]). The claim read all that anyway; knowing it costs
//! no command.
//!
//! # The choice
//!
//! While some partition is known to hold a backlog (its last claim here
//! left [`BACKLOG`] or more due jobs), a worker that comes for a job
//! claims at once, without waiting for a baton (as it did before, on the
//! backlog's partition), on the partition that may have had a job due the
//! longest ([`State::oldest`]):
//!
//! * one of a due baton held here: with the baton;
//! * one whose last claim left due jobs, or whose next job came due
//!   since: without a baton (on a backlog only if more than one job is
//!   due, the lone last one being its baton holder's; elsewhere even a
//!   lone job: no worker of this busy process is there to pop its baton);
//! * one not known to have a due job, once the jobs about to be taken
//!   elsewhere came due after its last claim here (a job due there since
//!   would be older): the claim may find nothing, so such a claim is made
//!   at most once in [`SPECULATE_EVERY`] claims, which bounds what they
//!   cost whatever the number of partitions.
//!
//! So under a backlog jobs are taken oldest due first across partitions,
//! a claim at a time (a claim takes its jobs from one partition: with
//! [`prefetch`](crate::Builder::prefetch), up to that many more), and
//! each claim still takes its jobs in one script: the commands and round
//! trips per job stay what they were. Without a backlog nothing changes:
//! a due baton held here is claimed with, the oldest first, and waiting
//! workers block on the marker sets, the partitions that may have waited
//! longest first in the `BZPOPMIN` (which pops from the first non-empty
//! set it is given).
//!
//! [`Job::ack_and_next`](crate::Job::ack_and_next) acks and claims in
//! one script, on its job's partition. Under a backlog it stays there for
//! up to [`STAY`] claims in a row while another partition's jobs are
//! older, then acks alone and claims on the oldest beside it (two scripts
//! in flight at once, one round trip of waiting): at most one command
//! more every [`STAY`] + 1 claims, for a bound on how far a partition
//! falls behind.

use super::baton::BACKLOG;
use super::request::Outcome;

/// Under a backlog, a claim on a partition whose last claim here found no
/// due job is made at most once in this many claims of this process (it
/// may find nothing: a claim wasted in this many at most).
pub(super) const SPECULATE_EVERY: u32 = 8;
/// Under a backlog, [`Job::ack_and_next`](crate::Job::ack_and_next)
/// claims on its job's partition (ack and claim in one script) at most
/// this many times in a row while another partition's jobs are older.
pub(super) const STAY: u32 = 7;

/// What the last claim on a partition said of it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Seen {
    /// Redis' time of the claim (ms).
    pub(super) at_ms: u64,
    /// The partition's earliest event then (ms, Redis' clock): its most
    /// overdue job or expired lease, or its next due job; `None`: none.
    pub(super) next_ms: Option<u64>,
    /// Due jobs the claim saw and left (up to [`BACKLOG`] + 1).
    pub(super) left: u64,
}

impl Seen {
    /// Since when the partition may have had a job due (ms, Redis'
    /// clock): its earliest event, or the claim if that came first (a job
    /// scheduled since is due no earlier than that, unless scheduled for a
    /// time already past).
    pub(super) fn due_since(&self) -> u64 {
        self.next_ms.map_or(self.at_ms, |next| next.min(self.at_ms))
    }

    /// Whether the partition has a due job (or an expired lease) by
    /// `redis_now` (ms, Redis' clock), unless another claim took it: one
    /// the claim left, or its next event since come due.
    pub(super) fn due_by(&self, redis_now: u64) -> bool {
        self.next_ms
            .is_some_and(|next| next <= self.at_ms.max(redis_now))
    }

    pub(super) fn backlog(&self) -> bool {
        self.left >= BACKLOG
    }
}

/// This process' knowledge of its partitions (see the module docs).
#[derive(Debug, Default)]
pub(super) struct Fairness {
    /// By partition (`None`: no claim here read it yet).
    pub(super) seen: Vec<Option<Seen>>,
    /// How many partitions [`Seen::backlog`] holds for.
    pub(super) backlogs: usize,
    /// Claims picked since the last speculative one.
    pub(super) since_speculation: u32,
    /// `ack_and_next` claims in a row on their job's partition while
    /// another partition's jobs were older.
    pub(super) stayed: u32,
}

impl Fairness {
    pub(super) fn new(partitions: u32) -> Fairness {
        Fairness {
            seen: vec![None; partitions as usize],
            backlogs: 0,
            since_speculation: SPECULATE_EVERY,
            stayed: 0,
        }
    }

    /// Takes what a claim's reply said of `partition`; returns whether a
    /// backlog began or ended there.
    pub(super) fn note(&mut self, partition: u32, outcome: &Outcome) -> bool {
        let seen = Seen {
            at_ms: outcome.now_ms,
            next_ms: outcome.next,
            left: outcome.left,
        };
        let Some(slot) = self.seen.get_mut(partition as usize) else {
            return false;
        };
        let before = slot.replace(seen).is_some_and(|s| s.backlog());
        match (before, seen.backlog()) {
            (false, true) => self.backlogs += 1,
            (true, false) => self.backlogs -= 1,
            _ => return false,
        }
        true
    }

    /// Whether some partition is known to hold a backlog.
    pub(super) fn backlog(&self) -> bool {
        self.backlogs > 0
    }

    /// Since when `partition` may have had a job due (ms, Redis' clock; 0
    /// if no claim here read it yet: it may have waited longest).
    pub(super) fn due_since(&self, partition: u32) -> u64 {
        self.seen
            .get(partition as usize)
            .copied()
            .flatten()
            .map_or(0, |seen| seen.due_since())
    }
}

#[cfg(test)]
mod tests {
    use tokio::time::Instant;

    use super::super::request::With;
    use super::super::state::State;
    use super::*;

    /// A claim's reply on a partition: Redis' time, its earliest event,
    /// due jobs left.
    fn reply(now_ms: u64, next: Option<u64>, left: u64) -> Outcome {
        Outcome {
            now_ms,
            next,
            left,
            ..Outcome::nothing()
        }
    }

    fn state(partitions: u32) -> State {
        State {
            fair: Fairness::new(partitions),
            ..State::default()
        }
    }

    #[test]
    fn a_backlog_is_counted_once_per_partition_until_a_claim_ends_it() {
        let mut fair = Fairness::new(2);
        assert!(fair.note(0, &reply(1000, Some(10), BACKLOG)));
        assert!(
            !fair.note(0, &reply(1001, Some(11), BACKLOG + 1)),
            "still one"
        );
        assert!(fair.note(1, &reply(1002, Some(5), BACKLOG)));
        assert!(fair.note(0, &reply(1003, Some(2000), 0)));
        assert!(fair.backlog());
        assert!(fair.note(1, &reply(1004, None, 1)));
        assert!(!fair.backlog());
        // A partition this handle does not have is ignored.
        assert!(!fair.note(7, &reply(1005, Some(1), BACKLOG)));
        assert!(!fair.backlog());
    }

    #[test]
    fn without_a_backlog_nothing_is_claimed_without_a_baton() {
        let mut state = state(3);
        state.fair.note(0, &reply(1000, Some(10), BACKLOG - 1));
        assert!(state.pick(Instant::now(), true).is_none());
    }

    #[test]
    fn under_a_backlog_the_partition_with_the_oldest_due_jobs_is_picked() {
        let mut state = state(3);
        state.fair.note(0, &reply(1000, Some(500), BACKLOG));
        state.fair.note(1, &reply(1000, Some(300), 2));
        state.fair.note(2, &reply(1000, Some(400), BACKLOG));
        let now = Instant::now();
        // Partition 1 is no backlog: even a lone job is taken there.
        assert!(matches!(state.pick(now, true), Some((1, With::Overdue))));
        state.fair.note(1, &reply(1001, Some(5000), 0));
        assert!(matches!(state.pick(now, false), Some((2, With::Nothing))));
        state.fair.note(2, &reply(1002, Some(600), BACKLOG));
        assert!(matches!(state.pick(now, false), Some((0, With::Nothing))));
    }

    #[test]
    fn a_partition_not_known_to_have_due_jobs_is_tried_once_in_eight_claims() {
        let mut state = state(2);
        // Partition 1 had nothing due at 100; partition 0's backlog came
        // due after that, so partition 1 may hold older jobs.
        state.fair.note(1, &reply(100, None, 0));
        let mut picked = Vec::new();
        for k in 0..20 {
            state.fair.note(0, &reply(1000 + k, Some(200 + k), BACKLOG));
            let (partition, _) = state.pick(Instant::now(), true).unwrap();
            picked.push(partition);
            if partition == 1 {
                // It had nothing: its last look is now recent again.
                state.fair.note(1, &reply(100 + k, None, 0));
            }
        }
        let tries: Vec<usize> = (0..20).filter(|&k| picked[k] == 1).collect();
        assert_eq!(tries, vec![0, 9, 18], "{picked:?}");
    }

    #[test]
    fn ack_and_next_stays_seven_claims_then_claims_on_the_oldest() {
        let mut state = state(2);
        state.fair.note(0, &reply(1000, Some(500), BACKLOG));
        state.fair.note(1, &reply(1000, Some(100), BACKLOG));
        let now = Instant::now();
        for _ in 0..STAY {
            assert!(matches!(state.pick_for_ack(0, now), (None, With::Nothing)));
        }
        assert!(matches!(
            state.pick_for_ack(0, now),
            (Some(1), With::Nothing)
        ));
        // On the oldest partition, it stays without counting.
        for _ in 0..2 * STAY {
            assert!(matches!(state.pick_for_ack(1, now), (None, With::Nothing)));
        }
    }

    #[test]
    fn bzpopmin_tries_the_partitions_that_may_have_waited_longest_first() {
        let mut state = state(4);
        state.fair.note(0, &reply(1000, None, 0));
        state.fair.note(1, &reply(900, Some(950), 0));
        state.fair.note(3, &reply(1000, Some(800), 1));
        // Partition 2 was never read: first.
        assert_eq!(state.marker_order(&[0, 1, 2, 3]), vec![2, 3, 1, 0]);
    }
}
