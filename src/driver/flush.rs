//! The flush: firing every entry that is due, waking its sleep's owner or
//! queueing its callback, then recording each shard's next due tick; and
//! running the callbacks found due, on the driver task.
//!
//! Every flush is bounded ([`INLINE_BATCH`] where the clock fired,
//! [`DRIVER_BATCH`] on the driver task), and so is each lock hold within it
//! ([`WAKE_CHUNK`] entries, a coarse bucket moved down a few dozen entries
//! a step); wakers are woken, and callbacks run, with no lock held (see the
//! ground rules in [`shared`](super::shared)).

use std::task::Waker;

use crate::sync::lock;
use crate::wheel::Polled;

use super::deadlines::Due;
use super::jobs::{Job, EXPIRED};
use super::shared::{Shard, Shared, Slot};

/// Most entries fired by the waker tokio calls, before it hands the rest to
/// the driver task.
pub(super) const INLINE_BATCH: usize = 1024;
/// Most entries the driver task fires before it yields to other tasks.
pub(super) const DRIVER_BATCH: usize = 1024;
/// Wakers collected per lock hold (tokio uses 32 too).
const WAKE_CHUNK: usize = 32;
/// What one step of draining a coarse bucket counts for against
/// [`WAKE_CHUNK`]: so a lock hold moves at most 4 steps' worth of entries.
const STEP_UNITS: usize = 8;

/// What a flush left behind.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Flushed {
    /// Everything due has fired.
    Done,
    /// The budget ran out with more entries due.
    More,
    Shutdown,
}

impl Shared {
    /// Runs up to `budget` due callbacks, earliest deadline first, outside
    /// the lock. Returns `true` if more are waiting.
    pub(super) fn run_ready(&self, budget: usize) -> bool {
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

    /// Fires up to about `budget` due entries, waking their owners outside
    /// the lock, then records each shard's next due tick.
    pub(super) fn flush(&self, budget: usize) -> Flushed {
        self.flush_at(self.ticks.now_tick(self.own_now()), budget)
    }

    /// [`Shared::flush`] with the clock already read: `now` is a tick.
    pub(super) fn flush_at(&self, now: u64, budget: usize) -> Flushed {
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
}
