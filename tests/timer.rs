//! Explicit timers and the lifecycle of timers and runtimes: the builder's
//! checks, coarse ticks, default timers across runtimes, shutdown.

mod support;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use support::{ms, panic_message};
use tiered_timer::{BuildError, Handle, Instant, Sleep, Timer};
use tokio::time;
use tokio_test::{assert_pending, assert_ready, task};

fn poll_once(sleep: &mut Sleep) -> Poll<()> {
    Pin::new(sleep).poll(&mut Context::from_waker(Waker::noop()))
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

#[tokio::test]
#[should_panic(expected = "tick must be at least 1 µs")]
async fn tick_below_one_microsecond_is_rejected() {
    let _ = Timer::builder().tick(Duration::from_nanos(999)).build();
}

#[tokio::test]
#[should_panic(expected = "wheel_size must be between 2 and")]
async fn wheel_size_one_is_rejected() {
    let _ = Timer::builder().wheel_size(1).build();
}

#[tokio::test]
#[should_panic(expected = "wheel_size must be between 2 and")]
async fn huge_wheel_size_is_rejected() {
    let _ = Timer::builder().wheel_size(usize::MAX).build();
}

#[tokio::test]
#[should_panic(expected = "tick must be at most")]
async fn huge_tick_is_rejected() {
    let _ = Timer::builder().tick(Duration::MAX).build();
}

/// `try_build` says which setting is wrong, with the message `build`
/// panics with, and builds nothing; a good configuration builds a timer
/// that works.
#[tokio::test(start_paused = true)]
async fn try_build_returns_typed_errors_instead_of_panicking() {
    for (builder, expected) in [
        (
            Timer::builder().tick(Duration::ZERO),
            BuildError::Tick(Duration::ZERO),
        ),
        (
            Timer::builder().tick(Duration::MAX),
            BuildError::Tick(Duration::MAX),
        ),
        (Timer::builder().wheel_size(0), BuildError::WheelSize(0)),
        (
            Timer::builder().wheel_size(usize::MAX),
            BuildError::WheelSize(usize::MAX),
        ),
    ] {
        let error = builder.clone().try_build().unwrap_err();
        assert_eq!(error, expected);
        let panic =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(builder.build())))
                .unwrap_err();
        assert_eq!(panic_message(&*panic), format!("tiered-timer: {error}"));
    }
    let timer = Timer::builder().tick(ms(10)).try_build().unwrap();
    let start = Instant::now();
    timer.handle().sleep(ms(25)).await;
    assert_eq!(start.elapsed(), ms(30));
}

#[test]
fn try_build_outside_a_runtime_is_an_error() {
    assert_eq!(
        Timer::builder().try_build().unwrap_err(),
        BuildError::NoRuntime
    );
}

#[test]
#[should_panic(expected = "must be called from the context of a Tokio 1.x runtime")]
fn build_outside_runtime_panics() {
    let _ = Timer::new();
}

#[test]
#[should_panic(expected = "must be called from the context of a Tokio 1.x runtime")]
fn handle_current_outside_runtime_panics() {
    Handle::current();
}

#[tokio::test(start_paused = true)]
async fn coarse_tick_rounds_up_to_the_next_boundary() {
    let timer = Timer::builder().tick(ms(10)).build();
    let handle = timer.handle();
    let start = Instant::now();
    // Each sleep starts when the previous one ended.
    for (delay, fires_at) in [(25, 30), (30, 60), (1, 70), (0, 70)] {
        handle.sleep(ms(delay)).await;
        assert_elapsed!(start, fires_at);
    }
}

#[tokio::test(start_paused = true)]
async fn coarse_tick_never_fires_early() {
    let timer = Timer::builder().tick(ms(10)).build();
    let handle = timer.handle();
    let start = Instant::now();
    let mut sleep = task::spawn(handle.sleep(ms(21)));
    assert_pending!(sleep.poll());
    time::advance(ms(21)).await;
    assert!(!sleep.is_woken(), "21 ms is not a 10 ms boundary");
    time::advance(ms(8)).await;
    assert_pending!(sleep.poll());
    time::advance(ms(1)).await;
    assert!(sleep.is_woken());
    assert_ready!(sleep.poll());
    assert_elapsed!(start, 30);
}

#[tokio::test(start_paused = true)]
async fn small_wheels_cascade_through_many_levels() {
    // Wheel size 2: a one-hour deadline sits about 22 levels up.
    let timer = Timer::builder().wheel_size(2).build();
    let handle = timer.handle();
    let start = Instant::now();
    let deadlines = [1u64, 2, 3, 1_000, 3_600_000, 3_600_001];
    let tasks: Vec<_> = deadlines
        .iter()
        .map(|&d| {
            let handle = handle.clone();
            tokio::spawn(async move {
                handle.sleep_until(start + ms(d)).await;
                Instant::now() - start
            })
        })
        .collect();
    for (task, d) in tasks.into_iter().zip(deadlines) {
        assert_eq!(task.await.unwrap(), ms(d));
    }
}

#[tokio::test(start_paused = true)]
async fn explicit_handle_has_every_constructor() {
    let timer = Timer::new();
    let handle = timer.handle();
    let start = Instant::now();
    handle.sleep_until(start + ms(3)).await;
    assert!(handle
        .timeout(ms(5), std::future::pending::<()>())
        .await
        .is_err());
    assert_eq!(handle.timeout_at(start + ms(100), async { 1 }).await, Ok(1));
    let mut interval = handle.interval(ms(10));
    assert_eq!(interval.tick().await, start + ms(8));
    let mut at = handle.interval_at(start + ms(50), ms(10));
    assert_eq!(at.tick().await, start + ms(50));
    assert_eq!(at.tick().await, start + ms(60));
}

#[tokio::test(start_paused = true)]
async fn handles_are_send_sync_clone_and_debug() {
    fn assert_traits<T: Send + Sync + Clone + std::fmt::Debug + 'static>(_: &T) {}
    let timer = Timer::new();
    assert_traits(&timer.handle());
    let debug = format!("{:?}", timer);
    assert!(debug.contains("tick"), "{debug}");
}

#[tokio::test(start_paused = true)]
async fn shutting_the_timer_down_fails_pending_sleeps_loudly() {
    let timer = Timer::new();
    let handle = timer.handle();
    let waiter = tokio::spawn({
        let handle = handle.clone();
        async move { handle.sleep(Duration::from_secs(60)).await }
    });
    tokio::task::yield_now().await; // let it register
    assert_eq!(handle.pending(), 1);
    drop(timer.shutdown());
    let err = waiter.await.unwrap_err();
    assert!(err.is_panic());
    let panic = err.into_panic();
    let message = panic_message(&*panic);
    assert!(message.contains("timer has shut down"), "{message}");
}

#[tokio::test(start_paused = true)]
async fn new_sleep_on_a_shut_down_timer_panics_on_first_poll() {
    let timer = Timer::new();
    let handle = timer.handle();
    drop(timer.shutdown());
    let mut sleep = handle.sleep(ms(1));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| poll_once(&mut sleep)));
    assert!(result.is_err());
    drop(sleep); // dropping it afterwards is fine
}

#[tokio::test(start_paused = true)]
async fn fired_sleep_stays_ready_after_its_timer_shuts_down() {
    let timer = Timer::new();
    let mut sleep = task::spawn(timer.handle().sleep(ms(5)));
    assert_pending!(sleep.poll());
    time::advance(ms(5)).await;
    drop(timer.shutdown());
    assert_ready!(sleep.poll());
}

/// A handle of a temporary `Timer` keeps it alive: this panicked before,
/// the timer being dropped at the end of the first statement.
#[tokio::test(start_paused = true)]
async fn a_handle_of_a_temporary_timer_works() {
    let handle = Timer::builder().tick(ms(1)).build().handle();
    let start = Instant::now();
    handle.sleep(ms(5)).await;
    assert!(start.elapsed() >= ms(5));
    let ran = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = ran.clone();
    handle
        .schedule(ms(5), move || {
            flag.store(true, std::sync::atomic::Ordering::SeqCst)
        })
        .unwrap();
    time::sleep(ms(6)).await;
    assert!(ran.load(std::sync::atomic::Ordering::SeqCst));
}

/// Dropping the `Timer` while its sleeps and handles live shuts nothing
/// down: sleeps fire, callbacks run, new sleeps work.
#[tokio::test(start_paused = true)]
async fn dropping_the_timer_leaves_its_handles_working() {
    let timer = Timer::new();
    let handle = timer.handle();
    let mut sleep = task::spawn(handle.sleep(ms(10)));
    assert_pending!(sleep.poll());
    let (tx, rx) = std::sync::mpsc::channel();
    handle
        .schedule(ms(10), move || tx.send(()).unwrap())
        .unwrap();
    drop(timer);
    time::advance(ms(10)).await;
    assert_ready!(sleep.poll());
    assert!(rx.try_recv().is_ok(), "the callback ran");
    handle.sleep(ms(1)).await;
}

/// With the last of its `Timer`, handles and futures dropped, a timer ends:
/// its driver task finishes and its pending callbacks are dropped unrun.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timer_ends_with_its_last_owner() {
    let metrics = tokio::runtime::Handle::current().metrics();
    // This test's own task, and the default timer's driver if one exists.
    let before = metrics.num_alive_tasks();
    let timer = Timer::new();
    let handle = timer.handle();
    let mut sleep = handle.sleep(Duration::from_secs(60));
    assert!(poll_once(&mut sleep).is_pending());
    let canary = std::sync::Arc::new(());
    let held = canary.clone();
    handle
        .schedule(Duration::from_secs(60), move || drop(held))
        .unwrap();
    assert_eq!(metrics.num_alive_tasks(), before + 1, "the driver task");
    drop(timer);
    drop(handle);
    assert_eq!(metrics.num_alive_tasks(), before + 1, "the sleep keeps it");
    drop(sleep);
    let patience = std::time::Instant::now() + Duration::from_secs(10);
    while metrics.num_alive_tasks() > before {
        assert!(
            std::time::Instant::now() < patience,
            "the driver task never ended"
        );
        tokio::task::yield_now().await;
    }
    assert_eq!(
        std::sync::Arc::strong_count(&canary),
        1,
        "the callback was dropped"
    );
}

/// A sleep of a runtime's timer polled on another runtime after the first
/// shut down can never complete: it panics, saying so, rather than hang.
#[test]
fn sleep_of_a_shut_down_runtime_panics_elsewhere() {
    let first = current_thread();
    let handle = first.block_on(async { Handle::current() });
    let mut sleep = handle.sleep(Duration::from_secs(60));
    first.block_on(async { assert!(poll_once(&mut sleep).is_pending()) });
    drop(first);
    let second = current_thread();
    let result = second.block_on(async {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| poll_once(&mut sleep)))
    });
    let panic = result.expect_err("polled outside its shut-down runtime, it panics");
    assert!(panic_message(&*panic).contains("timer has shut down"));
}

#[test]
fn default_timers_of_runtimes_in_sequence() {
    for _ in 0..5 {
        let rt = current_thread();
        rt.block_on(async {
            let start = Instant::now();
            tiered_timer::sleep(ms(2)).await;
            assert!(start.elapsed() >= ms(2));
        });
    }
}

#[test]
fn default_timers_of_runtimes_side_by_side() {
    let threads: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(|| {
                let rt = current_thread();
                rt.block_on(async {
                    for _ in 0..20 {
                        let start = Instant::now();
                        tiered_timer::sleep(ms(1)).await;
                        assert!(start.elapsed() >= ms(1));
                    }
                })
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
}

#[test]
fn each_runtime_gets_its_own_default_timer() {
    let a = current_thread();
    let b = current_thread();
    let pending_a = a.block_on(async {
        let mut sleep = tiered_timer::sleep(Duration::from_secs(60));
        assert!(poll_once(&mut sleep).is_pending());
        std::mem::forget(sleep);
        Handle::current().pending()
    });
    let pending_b = b.block_on(async { Handle::current().pending() });
    assert_eq!((pending_a, pending_b), (1, 0));
}

#[test]
fn runtime_shutdown_with_many_timers_pending_does_not_hang() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        for i in 0..10_000u64 {
            tokio::spawn(async move {
                tiered_timer::sleep(Duration::from_secs(3600 + i)).await;
                unreachable!("runtime shut down first");
            });
        }
        // Let the tasks register.
        while Handle::current().pending() < 10_000 {
            tokio::task::yield_now().await;
        }
    });
    drop(rt);
}

#[test]
fn a_new_runtime_after_shutdown_gets_a_working_timer() {
    // tokio may reuse a runtime id once a runtime is gone; the default
    // timer of the old one must not be handed out again.
    for _ in 0..3 {
        let rt = current_thread();
        let handle = rt.block_on(async { Handle::current() });
        drop(rt);
        let rt = current_thread();
        rt.block_on(async {
            tiered_timer::sleep(ms(1)).await;
        });
        drop(handle);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sleep_polled_on_another_runtime_still_fires() {
    // The driver runs on this runtime; the sleep is awaited on another.
    let handle = Handle::current();
    let deadline = Instant::now() + ms(5);
    let joined = std::thread::spawn(move || {
        current_thread().block_on(async move {
            handle.sleep_until(deadline).await;
            Instant::now()
        })
    })
    .join()
    .unwrap();
    assert!(joined >= deadline);
}

#[test]
fn runtime_without_time_gives_tokio_s_message() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let result =
        std::panic::catch_unwind(|| rt.block_on(async { tiered_timer::sleep(ms(1)).await }));
    let panic = result.unwrap_err();
    let message = panic_message(&*panic);
    assert!(message.contains("enable_time"), "{message}");
}

/// Reported by the stress tests: resetting a sleep whose timer has shut down
/// panicked in `reset`; like tokio, only polling may fail.
#[tokio::test(start_paused = true)]
async fn reset_after_shutdown_does_not_panic_but_poll_does() {
    for fire_first in [false, true] {
        let timer = Timer::new();
        let mut sleep = timer.handle().sleep(ms(10));
        assert!(poll_once(&mut sleep).is_pending());
        if fire_first {
            time::advance(ms(10)).await;
        }
        drop(timer.shutdown());
        Pin::new(&mut sleep).reset(Instant::now() + ms(20));
        let result =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| poll_once(&mut sleep)));
        let panic = result.expect_err("polling a reset sleep of a shut-down timer must panic");
        assert!(panic_message(&*panic).contains("shut down"));
    }
}

#[tokio::test(start_paused = true)]
async fn stats_count_wakeups_fires_and_cascades() {
    let timer = Timer::new();
    let handle = timer.handle();
    let before = handle.stats();
    assert_eq!((before.fired, before.cascaded, before.pending), (0, 0, 0));

    // 1 000 sleeps an hour out, all registered.
    let mut far: Vec<_> = (0..1_000u64)
        .map(|i| task::spawn(handle.sleep(Duration::from_secs(3_600) + ms(i))))
        .collect();
    for sleep in &mut far {
        assert_pending!(sleep.poll());
    }
    tokio::task::yield_now().await;
    let registered = handle.stats();
    assert_eq!(registered.pending, 1_000);

    // Idle: ten seconds with nothing due wake the driver not once.
    time::advance(Duration::from_secs(10)).await;
    tokio::task::yield_now().await;
    let idle = handle.stats();
    assert_eq!(
        idle.wakeups, registered.wakeups,
        "the driver woke while idle"
    );
    assert_eq!(idle.fired, 0);

    // When they come due they cascade down the wheels and fire.
    time::advance(Duration::from_secs(3_600)).await;
    // Polling 1 000 ready sleeps in one go exceeds tokio's coop budget.
    tokio::task::unconstrained(async {
        for sleep in &mut far {
            assert_ready!(sleep.poll());
        }
    })
    .await;
    let done = handle.stats();
    assert_eq!(done.fired, 1_000);
    assert_eq!(done.pending, 0);
    assert!(done.cascaded >= 1_000, "{done:?}");
    assert!(done.wakeups > idle.wakeups);
}

/// Whether a deadline has passed is the timer's clock's call, even for a
/// sleep polled inside another runtime whose (paused) clock is far ahead.
#[test]
fn a_foreign_runtime_s_clock_does_not_make_a_sleep_early() {
    let home = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .unwrap();
    let timer = home.block_on(async { Timer::new() });
    let handle = timer.handle();
    let deadline = handle.now() + Duration::from_secs(3600);
    let mut sleep = task::spawn(handle.sleep_until(deadline));

    let away = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    away.block_on(async {
        time::advance(Duration::from_secs(2 * 3600)).await;
        // `away`'s clock is an hour past the deadline; the timer's is not.
        assert_pending!(sleep.poll());
        // An earlier reset takes the locked path, which checks the clock.
        let mut reset = handle.sleep_until(deadline + Duration::from_secs(3600));
        assert_pending!(poll_once(&mut reset));
        Pin::new(&mut reset).reset(deadline);
        assert_pending!(poll_once(&mut reset));
    });
    assert_pending!(sleep.poll());
    assert_eq!(handle.pending(), 1);
}

/// The clock's wake re-arms the timer by itself: with a `ManualClock`,
/// timers keep firing across advances even when the runtime never gets to
/// run the driver task in between.
#[test]
fn the_clock_re_arms_the_timer_without_the_driver_task() {
    let rt = current_thread();
    let clock = tiered_timer::clock::ManualClock::new();
    let timer = rt.block_on(async { Timer::builder().clock(clock.clone()).build() });
    let handle = timer.handle();
    let mut sleeps: Vec<_> = (1..=5)
        .map(|i| task::spawn(handle.sleep(ms(10 * i))))
        .collect();
    for sleep in &mut sleeps {
        assert_pending!(sleep.poll());
    }
    // One driver turn to arm the clock for the first deadline.
    rt.block_on(tokio::task::yield_now());
    for (i, sleep) in sleeps.iter_mut().enumerate() {
        clock.advance(ms(10));
        // No runtime turn since the last advance.
        assert!(sleep.is_woken(), "sleep {i} not woken");
        assert_ready!(sleep.poll());
    }
    assert_eq!(handle.pending(), 0);
}

/// Ticks finer than a millisecond are exact on a clock without tokio's
/// 1 ms grid: the default 250 µs tick, and a 100 µs one.
#[tokio::test]
async fn sub_millisecond_ticks_fire_on_their_boundary() {
    for (tick, deadline, boundary) in [
        (None, Duration::from_micros(300), Duration::from_micros(500)),
        (
            Some(Duration::from_micros(100)),
            Duration::from_micros(150),
            Duration::from_micros(200),
        ),
    ] {
        let clock = tiered_timer::clock::ManualClock::new();
        let mut builder = Timer::builder().clock(clock.clone());
        if let Some(tick) = tick {
            builder = builder.tick(tick);
        }
        let timer = builder.build();
        let mut sleep = task::spawn(timer.handle().sleep(deadline));
        assert_pending!(sleep.poll());
        clock.advance(boundary - Duration::from_micros(1));
        tokio::task::yield_now().await;
        assert_pending!(sleep.poll(), "fired before its tick boundary");
        clock.advance(Duration::from_micros(1));
        tokio::task::yield_now().await;
        assert!(sleep.is_woken(), "not woken at its tick boundary");
        assert_ready!(sleep.poll());
    }
}

/// A dropped sleep hands its count on its timer back to the thread, for the
/// thread's next sleep: only ever for a sleep of that same timer.
#[test]
fn a_dropped_sleep_of_an_explicit_timer_never_stands_in_for_the_default_one() {
    let rt = current_thread();
    rt.block_on(async {
        let default = Handle::current();
        let explicit = Timer::new();
        for _ in 0..3 {
            let mut mine = explicit.handle().sleep(Duration::from_secs(60));
            assert!(poll_once(&mut mine).is_pending());
            drop(mine);
            let mut other = tiered_timer::sleep(Duration::from_secs(60));
            assert!(poll_once(&mut other).is_pending());
            assert_eq!((default.pending(), explicit.handle().pending()), (1, 0));
            drop(other);
        }
        // And a default sleep dropped here serves the next one.
        let mut last = tiered_timer::sleep(Duration::from_secs(60));
        assert!(poll_once(&mut last).is_pending());
        assert_eq!(default.pending(), 1);
    });
}

/// A thread that takes turns in two runtimes gives each runtime's sleeps to
/// that runtime's timer, even with a count of the other's held back.
#[test]
fn sleeps_on_a_thread_alternating_runtimes_stay_on_their_own_timers() {
    let a = current_thread();
    let b = current_thread();
    let timer_a = a.block_on(async { Handle::current() });
    let timer_b = b.block_on(async { Handle::current() });
    for round in 0..3 {
        for (rt, expected) in [(&a, (1, 0)), (&b, (0, 1))] {
            rt.block_on(async {
                // Leaves a count of this runtime's timer with the thread.
                drop(tiered_timer::sleep(ms(1)));
                let mut sleep = tiered_timer::sleep(Duration::from_secs(60));
                assert!(poll_once(&mut sleep).is_pending());
                assert_eq!(
                    (timer_a.pending(), timer_b.pending()),
                    expected,
                    "round {round}"
                );
            });
        }
    }
}

/// A `Clock` is the caller's code: the timer never reads it while holding a
/// shard's lock. This clock asks the timer how many timers are pending (which
/// takes every shard's lock) each time it is read; read under a shard's lock,
/// that would wait on the lock its own thread holds, for ever.
#[test]
fn a_clock_that_calls_back_into_its_timer_does_not_deadlock() {
    use std::sync::{Arc, OnceLock};
    use tiered_timer::clock::{Clock, ClockSleep, ManualClock};

    #[derive(Debug)]
    struct Curious {
        inner: ManualClock,
        timer: Arc<OnceLock<Handle>>,
    }

    impl Clock for Curious {
        fn now(&self) -> Instant {
            if let Some(timer) = self.timer.get() {
                std::hint::black_box(timer.pending());
            }
            self.inner.now()
        }

        fn sleep_until(&self, deadline: Instant) -> ClockSleep {
            self.inner.sleep_until(deadline)
        }
    }

    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = current_thread();
        rt.block_on(async {
            let handle = Arc::new(OnceLock::new());
            let inner = ManualClock::new();
            let timer = Timer::builder()
                .clock(Curious {
                    inner: inner.clone(),
                    timer: handle.clone(),
                })
                .build();
            handle.set(timer.handle()).unwrap();
            // The driver is not armed yet, so registering reads the clock.
            let mut sleep = timer.handle().sleep(ms(5));
            assert!(poll_once(&mut sleep).is_pending());
            assert_eq!(timer.handle().pending(), 1);
        });
        done.send(()).unwrap();
    });
    finished
        .recv_timeout(Duration::from_secs(10))
        .expect("the timer read its clock while holding a shard's lock");
}

/// A waker whose clone runs code of its own: here it formats the timer's
/// handle, whose `Debug` reports the pending count. The driver clones a
/// sleep's waker under the shard's lock, so that `Debug` must not wait for
/// the lock (it did, and the thread hung for ever).
#[test]
fn a_waker_whose_clone_formats_the_timer_does_not_hang() {
    use std::sync::OnceLock;
    use std::task::{RawWaker, RawWakerVTable};
    use tiered_timer::clock::ManualClock;

    static TIMER: OnceLock<Handle> = OnceLock::new();
    static FORMATTED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

    fn clone(_: *const ()) -> RawWaker {
        if let Some(timer) = TIMER.get() {
            FORMATTED.lock().unwrap().push(format!("{timer:?}"));
        }
        RawWaker::new(std::ptr::null(), &VTABLE)
    }
    fn noop(_: *const ()) {}
    static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, noop, noop, noop);

    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = current_thread();
        rt.block_on(async {
            let clock = ManualClock::new();
            let timer = Timer::builder().clock(clock.clone()).build();
            TIMER.set(timer.handle()).unwrap();
            // SAFETY: the vtable's functions ignore the data pointer, and
            // every waker made from it is this same stateless waker.
            let waker = unsafe { Waker::from_raw(RawWaker::new(std::ptr::null(), &VTABLE)) };
            let mut sleep = timer.handle().sleep(ms(5));
            let mut cx = Context::from_waker(&waker);
            assert!(Pin::new(&mut sleep).poll(&mut cx).is_pending());
            // Let the driver arm its clock sleep; then the sleep is due, and
            // the flush clones its waker under the shard's lock.
            tokio::task::yield_now().await;
            clock.advance(ms(5));
            for _ in 0..100 {
                if Pin::new(&mut sleep).poll(&mut cx).is_ready() {
                    return;
                }
                tokio::task::yield_now().await;
            }
            panic!("the sleep never fired");
        });
        done.send(()).unwrap();
    });
    finished
        .recv_timeout(Duration::from_secs(10))
        .expect("formatting the timer under its own lock hung");
    let formatted = FORMATTED.lock().unwrap();
    assert!(
        formatted.iter().any(|line| line.contains("pending: None")),
        "the flush never cloned the waker under the lock: {formatted:?}"
    );
}
