//! loom models of the timer's concurrent parts.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test --release --test loom
//! RUSTFLAGS="--cfg loom" cargo test --release --test loom --features spin-lock spin_lock
//! ```
//!
//! Each model runs the real shared state (the lock-guarded wheel, the
//! per-entry deadline words, the callbacks' state) under every interleaving
//! loom explores, with a `ManualClock` and driver turns taken by hand
//! (`tiered_timer::__loom::Model`). `LOOM_MAX_PREEMPTIONS` bounds the
//! search (default here: 3).
#![cfg(loom)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Mutex;
use loom::thread;
use tiered_timer::__loom::Model;
use tiered_timer::clock::ManualClock;
use tiered_timer::{Error, Sleep};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(3);
    }
    builder.check(f);
}

/// A waker that counts its wakes.
struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn counting_waker() -> (Arc<Count>, Waker) {
    let count = Arc::new(Count(AtomicUsize::new(0)));
    (count.clone(), Waker::from(count))
}

fn poll(sleep: &mut Sleep, waker: &Waker) -> Poll<()> {
    Pin::new(sleep).poll(&mut Context::from_waker(waker))
}

/// The spin lock (feature `spin-lock`) lets one holder in at a time: three
/// increments from two threads, each a read and a write with a yield
/// between, all land (and loom reports any overlap of two holders' accesses
/// by itself).
#[cfg(feature = "spin-lock")]
#[test]
fn spin_lock_excludes() {
    model(|| {
        let lock = Arc::new(tiered_timer::__loom::SpinLockProbe::new());
        let other = {
            let lock = lock.clone();
            thread::spawn(move || lock.increment())
        };
        lock.increment();
        other.join().unwrap();
        lock.increment();
        assert_eq!(lock.value(), 3);
    });
}

/// Cancel racing expiry: `cancel` returns true and the callback never runs,
/// or false and it runs exactly once.
#[test]
fn cancel_racing_fire() {
    model(|| {
        let clock = ManualClock::new();
        let timer = Model::new(&clock, ms(1), 4);
        let runs = Arc::new(AtomicUsize::new(0));
        let counter = runs.clone();
        let scheduled = timer
            .handle()
            .schedule(ms(1), move || {
                counter.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
        clock.advance(ms(1));

        let canceller = thread::spawn(move || scheduled.cancel());
        timer.turn();
        let cancelled = canceller.join().unwrap();
        timer.turn();

        let runs = runs.load(Ordering::SeqCst);
        assert_eq!(
            runs,
            usize::from(!cancelled),
            "cancelled {cancelled}, ran {runs}"
        );
        assert_eq!(timer.handle().pending(), 0);
    });
}

/// Reset (lock-free, later) racing expiry: once the reset has returned, the
/// sleep waits for its new deadline, and then fires exactly once.
#[test]
fn reset_later_racing_fire() {
    model(|| {
        let clock = ManualClock::new();
        let timer = Model::new(&clock, ms(1), 4);
        let handle = timer.handle();
        let start = handle.now();
        let (wakes, waker) = counting_waker();
        let mut sleep = handle.sleep(ms(1));
        assert!(poll(&mut sleep, &waker).is_pending());
        clock.advance(ms(1));

        let resetter = thread::spawn(move || {
            Pin::new(&mut sleep).reset(start + ms(3));
            sleep
        });
        timer.turn();
        let mut sleep = resetter.join().unwrap();

        // Whichever won, the sleep now wants 3 ms and it is 1 ms.
        assert!(poll(&mut sleep, &waker).is_pending(), "fired early");
        let woken_before = wakes.0.load(Ordering::SeqCst);
        clock.advance(ms(2));
        timer.turn();
        assert_eq!(wakes.0.load(Ordering::SeqCst), woken_before + 1);
        assert!(poll(&mut sleep, &waker).is_ready());
        drop(sleep);
        assert_eq!(handle.pending(), 0);
    });
}

/// Reset (lock-free, later) and a re-poll by the owner, racing a driver
/// turn that finds the old deadline due. The reset is a plain store, so the
/// driver may read the old deadline and fire after the owner's poll saw the
/// entry filed: the owner is then woken, finds the entry fired for a deadline
/// it no longer wants, and files it again. Never early, never lost, woken
/// once at the new deadline.
#[test]
fn reset_later_and_poll_racing_fire() {
    model(|| {
        let clock = ManualClock::new();
        let timer = Model::new(&clock, ms(1), 4);
        let handle = timer.handle();
        let start = handle.now();
        let (wakes, waker) = counting_waker();
        let mut sleep = handle.sleep(ms(1));
        assert!(poll(&mut sleep, &waker).is_pending());
        clock.advance(ms(1));

        let owner = {
            let waker = waker.clone();
            thread::spawn(move || {
                Pin::new(&mut sleep).reset(start + ms(3));
                assert!(poll(&mut sleep, &waker).is_pending(), "fired early");
                sleep
            })
        };
        timer.turn();
        let mut sleep = owner.join().unwrap();

        // The owner polls again, as it would if the turn woke it.
        assert!(poll(&mut sleep, &waker).is_pending(), "fired early");
        assert!(!sleep.is_elapsed());
        let woken_before = wakes.0.load(Ordering::SeqCst);
        clock.advance(ms(1));
        timer.turn();
        assert_eq!(wakes.0.load(Ordering::SeqCst), woken_before, "woken early");
        clock.advance(ms(1));
        timer.turn();
        assert_eq!(wakes.0.load(Ordering::SeqCst), woken_before + 1);
        assert!(poll(&mut sleep, &waker).is_ready());
        drop(sleep);
        assert_eq!(handle.pending(), 0);
    });
}

/// Reset to an earlier deadline (the locked path) racing a driver turn.
#[test]
fn reset_earlier_racing_fire() {
    model(|| {
        let clock = ManualClock::new();
        let timer = Model::new(&clock, ms(1), 4);
        let handle = timer.handle();
        let start = handle.now();
        let (wakes, waker) = counting_waker();
        let mut sleep = handle.sleep(ms(5));
        assert!(poll(&mut sleep, &waker).is_pending());
        clock.advance(ms(2));

        let resetter = thread::spawn(move || {
            Pin::new(&mut sleep).reset(start + ms(2));
            sleep
        });
        timer.turn();
        let mut sleep = resetter.join().unwrap();
        timer.turn();

        // Due now: ready, and woken at most once (not if the reset itself
        // found it due).
        assert!(poll(&mut sleep, &waker).is_ready());
        assert!(wakes.0.load(Ordering::SeqCst) <= 1);
        drop(sleep);
        assert_eq!(handle.pending(), 0);
    });
}

/// A waker that, when woken, drops the sleep it belongs to: the timer must
/// not hold its lock while waking.
struct DropsItsSleep(Mutex<Option<Sleep>>);

impl Wake for DropsItsSleep {
    fn wake(self: Arc<Self>) {
        drop(self.0.lock().unwrap().take());
    }
}

#[test]
fn waker_drops_its_own_sleep() {
    model(|| {
        let clock = ManualClock::new();
        let timer = Model::new(&clock, ms(1), 4);
        let handle = timer.handle();
        let owner = Arc::new(DropsItsSleep(Mutex::new(None)));
        let waker = Waker::from(owner.clone());
        let mut sleep = handle.sleep(ms(1));
        assert!(poll(&mut sleep, &waker).is_pending());
        *owner.0.lock().unwrap() = Some(sleep);
        drop(waker);

        // Another thread registers meanwhile.
        let other = handle.clone();
        let registrar = thread::spawn(move || {
            let (_, waker) = counting_waker();
            let mut sleep = other.sleep(ms(1));
            let _ = poll(&mut sleep, &waker);
            drop(sleep);
        });
        clock.advance(ms(1));
        timer.turn();
        registrar.join().unwrap();

        assert!(
            owner.0.lock().unwrap().is_none(),
            "the waker ran and dropped it"
        );
        assert_eq!(handle.pending(), 0);
    });
}

/// Two threads register while the driver flushes: every sleep fires once.
#[test]
fn two_threads_insert_while_the_driver_flushes() {
    model(|| {
        let clock = ManualClock::new();
        let timer = Model::new(&clock, ms(1), 4);
        let handle = timer.handle();
        let start = handle.now();
        let mut threads = Vec::new();
        for delay in [1, 2] {
            let handle = handle.clone();
            threads.push(thread::spawn(move || {
                let (wakes, waker) = counting_waker();
                let mut sleep = handle.sleep_until(start + ms(delay));
                let first = poll(&mut sleep, &waker);
                (sleep, wakes, waker, first)
            }));
        }
        clock.advance(ms(1));
        timer.turn();
        let mut sleeps: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        clock.advance(ms(1));
        timer.turn();

        for (sleep, wakes, waker, first) in &mut sleeps {
            let woken = wakes.0.load(Ordering::SeqCst);
            assert!(woken <= 1, "woken {woken} times");
            if first.is_pending() {
                assert_eq!(woken, 1, "a registered sleep was never woken");
            }
            assert!(poll(sleep, waker).is_ready());
        }
        assert_eq!(handle.pending(), 0);
    });
}

/// Shutdown racing schedule: the callback is either refused, or accepted
/// and handed back by shutdown; never lost, never run.
#[test]
fn shutdown_racing_schedule() {
    model(|| {
        let clock = ManualClock::new();
        let timer = Model::new(&clock, ms(1), 4);
        let handle = timer.handle();
        let runs = Arc::new(AtomicUsize::new(0));
        let counter = runs.clone();
        let scheduler = thread::spawn(move || {
            handle.schedule(ms(1), move || {
                counter.fetch_add(1, Ordering::SeqCst);
            })
        });
        let unfired = timer.shutdown();
        let scheduled = scheduler.join().unwrap();
        clock.advance(ms(1));
        timer.turn();

        match scheduled {
            Ok(scheduled) => {
                assert_eq!(unfired.len(), 1, "accepted but not handed back");
                assert!(!scheduled.cancel());
                assert!(!scheduled.is_expired());
            }
            Err(error) => {
                assert_eq!(error, Error::Shutdown);
                assert!(unfired.is_empty());
            }
        }
        assert_eq!(runs.load(Ordering::SeqCst), 0, "ran after shutdown");
    });
}

/// Cancel racing shutdown: exactly one of them stops the callback.
#[test]
fn cancel_racing_shutdown() {
    model(|| {
        let clock = ManualClock::new();
        let timer = Model::new(&clock, ms(1), 4);
        let scheduled = timer.handle().schedule(ms(1), || {}).unwrap();
        let canceller = thread::spawn(move || scheduled.cancel());
        let unfired = timer.shutdown();
        let cancelled = canceller.join().unwrap();
        assert_eq!(cancelled, unfired.is_empty());
    });
}

/// A registration that makes a new earliest bucket while the driver is
/// arming: the driver ends up armed for it (or earlier), never past it.
#[test]
fn registration_racing_arming_is_not_missed() {
    model(|| {
        let clock = ManualClock::new();
        let timer = Arc::new(Model::new(&clock, ms(1), 4));
        let handle = timer.handle();
        let armer = {
            let timer = timer.clone();
            thread::spawn(move || timer.arm())
        };
        let mut sleep = handle.sleep(ms(5));
        let (_, waker) = counting_waker();
        assert!(poll(&mut sleep, &waker).is_pending());
        armer.join().unwrap();
        let armed = timer.armed_for();
        assert!(
            armed.is_some_and(|tick| tick <= 5),
            "driver armed for {armed:?}, entry due at tick 5"
        );
    });
}
