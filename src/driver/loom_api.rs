//! What the loom models (`tests/loom.rs`) drive: a timer's shared state
//! without a tokio runtime. Compiled only with `--cfg loom`; not public API.

use std::time::Duration;

use super::shared::{Config, Shared};
use super::task::{Driver, Lifetime};
use crate::clock::ManualClock;
use crate::sync::Arc;
use crate::{Handle, Unfired};

/// A timer whose driver turns are taken by hand.
#[derive(Debug)]
pub struct Model {
    shared: Arc<Shared>,
    /// Kept so the timer stays up: dropping the driver shuts it down.
    _driver: Driver,
}

impl Model {
    /// A timer on `clock` with the given tick and wheel size.
    pub fn new(clock: &ManualClock, tick: Duration, wheel_size: usize) -> Model {
        let config = Config {
            tick,
            wheel_size,
            max_pending: usize::MAX,
            shards: 2,
        };
        let (shared, driver) =
            super::timer(config, Arc::new(clock.clone()), None, Lifetime::Runtime);
        Model {
            shared,
            _driver: driver,
        }
    }

    /// A handle to the timer, as `Timer::handle` gives.
    pub fn handle(&self) -> Handle {
        Handle {
            shared: self.shared.clone(),
        }
    }

    /// One driver turn: fire everything due by the clock (waking owners
    /// outside the lock) and run the callbacks found due.
    pub fn turn(&self) {
        self.shared.flush(usize::MAX);
        while self.shared.run_ready(usize::MAX) {}
    }

    /// The driver's arming step: point the clock sleep at the earliest
    /// bucket of any shard (polled with a no-op waker).
    pub fn arm(&self) {
        self.shared.arm(std::task::Waker::noop(), true);
    }

    /// The tick the driver is armed for, if any.
    pub fn armed_for(&self) -> Option<u64> {
        crate::sync::lock(&self.shared.control).armed
    }

    /// `Timer::shutdown`.
    pub fn shutdown(&self) -> Vec<Unfired> {
        self.shared
            .shutdown()
            .into_iter()
            .map(Unfired::new)
            .collect()
    }
}

/// The spin lock (feature `spin-lock`) on its own, for the model that
/// checks it excludes.
#[cfg(feature = "spin-lock")]
#[derive(Debug)]
pub struct SpinLockProbe(crate::spin_lock::SpinLock<u64>);

#[cfg(feature = "spin-lock")]
impl SpinLockProbe {
    /// A lock around zero.
    pub fn new() -> SpinLockProbe {
        SpinLockProbe(crate::spin_lock::SpinLock::new(0))
    }

    /// Adds one under the lock, reading and writing in two steps with a
    /// yield between them: if two holders overlapped, an update would be
    /// lost (and loom's cell tracking reports the overlap itself).
    pub fn increment(&self) {
        let mut value = self.0.lock();
        let read = *value;
        loom::thread::yield_now();
        *value = read + 1;
    }

    /// The value, read under the lock.
    pub fn value(&self) -> u64 {
        *self.0.lock()
    }
}

#[cfg(feature = "spin-lock")]
impl Default for SpinLockProbe {
    fn default() -> SpinLockProbe {
        SpinLockProbe::new()
    }
}
