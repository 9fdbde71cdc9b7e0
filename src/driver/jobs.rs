//! Scheduled callbacks: their shared state, and the queue of those due to
//! run on the driver task.
//!
//! # Ground rules
//!
//! * A task's state moves from `PENDING` exactly once (to `CANCELLED`,
//!   `EXPIRED` or `UNFIRED`), and only with the timer lock held, so cancel,
//!   expiry and shutdown agree on one outcome. It is read without the lock.
//! * While a task is `PENDING` its [`Job`] sits in the wheel under
//!   `Task::key`; the transition out of `PENDING` takes it out, so a key is
//!   never used after it may have been reused.
//! * A job's closure is run, handed back by shutdown, or dropped, always
//!   outside the timer lock.

use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::sync::{lock, AtomicU8, Mutex, Ordering};
use crate::wheel::Key;
use crate::Instant;

/// Waiting in the wheel.
pub(crate) const PENDING: u8 = 0;
/// Cancelled before it was due.
pub(crate) const CANCELLED: u8 = 1;
/// Found due: it runs (or has run) on the driver task.
pub(crate) const EXPIRED: u8 = 2;
/// The timer shut down first; the closure was handed back or dropped.
pub(crate) const UNFIRED: u8 = 3;

/// What a [`Scheduled`](crate::Scheduled) shares with the timer.
pub(crate) struct Task {
    state: AtomicU8,
    pub(crate) deadline: Instant,
    pub(crate) key: Key,
    /// The callback, until it runs or is dropped. Kept here rather than
    /// beside the task's key in the wheel, so a wheel slot stays as small
    /// as a sleep needs.
    run: Mutex<Option<Box<dyn FnOnce() + Send + 'static>>>,
}

impl fmt::Debug for Task {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Task")
            .field("state", &self.state)
            .field("deadline", &self.deadline)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl Task {
    pub(crate) fn new(
        deadline: Instant,
        key: Key,
        run: Box<dyn FnOnce() + Send + 'static>,
    ) -> Task {
        Task {
            state: AtomicU8::new(PENDING),
            deadline,
            key,
            run: Mutex::new(Some(run)),
        }
    }

    pub(crate) fn state(&self) -> u8 {
        self.state.load(Ordering::Acquire)
    }

    /// Moves the state on; the caller holds the timer lock.
    pub(crate) fn set_state(&self, state: u8) {
        self.state.store(state, Ordering::Release);
    }
}

/// A callback and the task it belongs to.
pub(crate) struct Job {
    pub(crate) task: crate::sync::Arc<Task>,
}

impl Job {
    /// Runs the callback, catching and reporting a panic so the driver
    /// carries on with the next one.
    /// The callback, taken out so that no lock is held while it runs.
    pub(crate) fn take(&self) -> Option<Box<dyn FnOnce() + Send + 'static>> {
        lock(&self.task.run).take()
    }

    pub(crate) fn run(self) {
        let Some(run) = self.take() else {
            return;
        };
        if let Err(panic) = catch_unwind(AssertUnwindSafe(run)) {
            let message = panic
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("a non-string payload");
            eprintln!(
                "tiered-timer: a scheduled callback (deadline {:?}) panicked: {message}; \
                 the timer carries on",
                self.task.deadline
            );
        }
    }
}

impl fmt::Debug for Job {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Job")
            .field("deadline", &self.task.deadline)
            .finish_non_exhaustive()
    }
}

/// Jobs found due and waiting for the driver task, earliest deadline first
/// (ties in the order they were found).
#[derive(Debug, Default)]
pub(crate) struct ReadyQueue {
    heap: BinaryHeap<Ready>,
    seq: u64,
}

impl ReadyQueue {
    pub(crate) fn push(&mut self, job: Job) {
        self.seq += 1;
        self.heap.push(Ready { seq: self.seq, job });
    }

    pub(crate) fn pop(&mut self) -> Option<Job> {
        let job = self.heap.pop().map(|ready| ready.job);
        if self.heap.is_empty() && self.heap.capacity() > 1024 {
            // A burst of callbacks is over: give its memory back.
            self.heap = BinaryHeap::new();
        }
        job
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    pub(crate) fn drain(&mut self) -> impl Iterator<Item = Job> + '_ {
        self.heap.drain().map(|ready| ready.job)
    }
}

#[derive(Debug)]
struct Ready {
    seq: u64,
    job: Job,
}

impl Ready {
    fn order(&self) -> (Instant, u64) {
        (self.job.task.deadline, self.seq)
    }
}

impl PartialEq for Ready {
    fn eq(&self, other: &Ready) -> bool {
        self.order() == other.order()
    }
}

impl Eq for Ready {}

impl PartialOrd for Ready {
    fn partial_cmp(&self, other: &Ready) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ready {
    /// Reversed: `BinaryHeap` is a max-heap and we want the earliest first.
    fn cmp(&self, other: &Ready) -> CmpOrdering {
        other.order().cmp(&self.order())
    }
}
