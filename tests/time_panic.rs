//! Panics point at the caller, in the style of tokio's `time_panic` tests:
//! every public function that can panic is `#[track_caller]` all the way
//! down, so the panic's location is the line that called it, in this file,
//! not a line inside the crate. A panic hook records the location.
//!
//! (Polling a sleep whose timer has shut down panics too, but from
//! `Future::poll`, which cannot carry the caller's location: tokio's own
//! timer panics inside tokio in that case.)

use std::panic;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tiered_timer::clock::{Clock, ManualClock};
use tiered_timer::{
    interval, interval_at, sleep, sleep_until, timeout, timeout_at, Handle, Instant, Timer,
};

/// Runs `f`, which must panic, and returns the file its panic was located
/// in (`None` if it did not panic).
fn panic_file<F: FnOnce()>(f: F) -> Option<String> {
    // The hook is process-wide: one test at a time.
    static HOOK: Mutex<()> = Mutex::new(());
    let _guard = HOOK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let file: Arc<Mutex<Option<String>>> = Arc::default();
    let previous = panic::take_hook();
    {
        let file = file.clone();
        panic::set_hook(Box::new(move |info| {
            let location = info.location().expect("panics have a location");
            *file.lock().unwrap() = Some(location.file().to_owned());
        }));
    }
    // Nothing observes the captured state after a panic but the check.
    let result = panic::catch_unwind(panic::AssertUnwindSafe(f));
    panic::set_hook(previous);
    let file = file.lock().unwrap().take();
    result.is_err().then_some(file).flatten()
}

/// Asserts that `f` panics at a line of this file.
#[track_caller]
fn assert_panics_here<F: FnOnce()>(what: &str, f: F) {
    match panic_file(f) {
        Some(file) => assert_eq!(file, file!(), "{what} panicked inside the crate"),
        None => panic!("{what} did not panic"),
    }
}

/// A runtime without tokio's time driver: the timer cannot run on it.
fn without_time() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

fn with_time() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

/// Each case on a fresh runtime without time (so no default timer exists
/// yet), entered but not inside `block_on`: the call itself must panic.
fn on_runtime_without_time<F: FnOnce()>(f: F) {
    let rt = without_time();
    let _entered = rt.enter();
    f();
}

#[test]
fn timeout_without_time_driver() {
    assert_panics_here("timeout", || {
        on_runtime_without_time(|| {
            drop(timeout(Duration::from_millis(5), async {}));
        })
    });
}

#[test]
fn timeout_at_without_time_driver() {
    assert_panics_here("timeout_at", || {
        on_runtime_without_time(|| {
            drop(timeout_at(Instant::now(), async {}));
        })
    });
}

#[test]
fn timeout_outside_a_runtime() {
    assert_panics_here("timeout", || {
        drop(timeout(Duration::from_millis(5), async {}));
    });
    assert_panics_here("timeout_at", || {
        drop(timeout_at(Instant::now(), async {}));
    });
}

#[test]
fn sleep_without_time_driver_or_runtime() {
    assert_panics_here("sleep", || {
        on_runtime_without_time(|| drop(sleep(Duration::from_millis(5))))
    });
    assert_panics_here("sleep_until", || {
        on_runtime_without_time(|| drop(sleep_until(Instant::now())))
    });
    assert_panics_here("sleep", || drop(sleep(Duration::from_millis(5))));
    assert_panics_here("sleep_until", || drop(sleep_until(Instant::now())));
}

#[test]
fn interval_without_time_driver_or_runtime() {
    assert_panics_here("interval", || {
        on_runtime_without_time(|| drop(interval(Duration::from_millis(5))))
    });
    assert_panics_here("interval_at", || {
        on_runtime_without_time(|| drop(interval_at(Instant::now(), Duration::from_millis(5))))
    });
    assert_panics_here("interval", || drop(interval(Duration::from_millis(5))));
    assert_panics_here("interval_at", || {
        drop(interval_at(Instant::now(), Duration::from_millis(5)))
    });
}

#[test]
fn interval_with_zero_period() {
    let rt = with_time();
    let _entered = rt.enter();
    assert_panics_here("interval", || drop(interval(Duration::ZERO)));
    assert_panics_here("interval_at", || {
        drop(interval_at(Instant::now(), Duration::ZERO))
    });
    let timer = Timer::new();
    let handle = timer.handle();
    assert_panics_here("Handle::interval", || drop(handle.interval(Duration::ZERO)));
    assert_panics_here("Handle::interval_at", || {
        drop(handle.interval_at(Instant::now(), Duration::ZERO))
    });
}

#[test]
fn handle_current_without_time_driver_or_runtime() {
    assert_panics_here("Handle::current", || {
        on_runtime_without_time(|| drop(Handle::current()))
    });
    assert_panics_here("Handle::current", || drop(Handle::current()));
}

#[test]
fn timer_new_and_build_without_time_driver_or_runtime() {
    assert_panics_here("Timer::new", || {
        on_runtime_without_time(|| drop(Timer::new()))
    });
    assert_panics_here("Builder::build", || {
        on_runtime_without_time(|| drop(Timer::builder().build()))
    });
    assert_panics_here("Timer::new", || drop(Timer::new()));
    assert_panics_here("Builder::build", || drop(Timer::builder().build()));
}

#[test]
fn build_with_bad_configuration() {
    let rt = with_time();
    let _entered = rt.enter();
    assert_panics_here("tick under 1 µs", || {
        drop(Timer::builder().tick(Duration::from_nanos(999)).build())
    });
    assert_panics_here("tick over u64::MAX ns", || {
        drop(Timer::builder().tick(Duration::MAX).build())
    });
    assert_panics_here("wheel_size 1", || {
        drop(Timer::builder().wheel_size(1).build())
    });
    assert_panics_here("wheel_size 2^20 + 1", || {
        drop(Timer::builder().wheel_size((1 << 20) + 1).build())
    });
    assert_panics_here("tick zero", || {
        drop(Timer::builder().tick(Duration::ZERO).build())
    });
    assert_panics_here("wheel_size 0", || {
        drop(Timer::builder().wheel_size(0).build())
    });
}

/// `try_build` returns what `build` panics with, except the missing time
/// driver, which tokio gives no way to detect: that stays tokio's panic,
/// at the caller's line.
#[test]
fn try_build_without_time_driver() {
    assert_panics_here("Builder::try_build", || {
        on_runtime_without_time(|| drop(Timer::builder().try_build()))
    });
}

/// A custom clock without tokio's time driver: a `Timer` built on a
/// `ManualClock` needs no time driver, so this must not panic at all.
#[test]
fn manual_clock_needs_no_time_driver() {
    on_runtime_without_time(|| {
        let clock = ManualClock::new();
        let timer = Timer::builder().clock(clock.clone()).build();
        drop(timer.handle().sleep(Duration::from_millis(5)));
    });
}

#[test]
fn manual_clock_misuse() {
    let clock = ManualClock::new();
    let earlier = clock.now();
    clock.advance(Duration::from_secs(1));
    assert_panics_here("ManualClock::set backwards", || clock.set(earlier));
    assert_panics_here("ManualClock::advance overflowing", || {
        clock.advance(Duration::MAX)
    });
}

#[test]
fn timeout_stream_without_time_driver_or_runtime() {
    assert_panics_here("TimeoutStream::new", || {
        on_runtime_without_time(|| {
            let (stream, _peer) = tokio::io::duplex(8);
            drop(tiered_timer::io::TimeoutStream::new(stream));
        })
    });
    assert_panics_here("TimeoutStream::new", || {
        let (stream, _peer) = tokio::io::duplex(8);
        drop(tiered_timer::io::TimeoutStream::new(stream));
    });
}

#[cfg(feature = "hyper")]
#[test]
fn hyper_timer_without_time_driver_or_runtime() {
    assert_panics_here("HyperTimer::new", || {
        on_runtime_without_time(|| drop(tiered_timer::HyperTimer::new()))
    });
    assert_panics_here("HyperTimer::new", || drop(tiered_timer::HyperTimer::new()));
}
