//! Hostile inputs and lifecycle edge cases, each with a defined outcome:
//!
//! | input | outcome |
//! | --- | --- |
//! | `sleep(Duration::MAX)`, a deadline `Instant` cannot represent, or one past the timer's last tick | clamped to about 30 years from now, as tokio does (`deadline()` says so); counted by `pending()`; completes there (paused auto-advance reaches it), never before |
//! | `schedule` with such a delay | `Ok`, clamped the same way; counted by `pending()`; runs at the clamped deadline unless cancelled or handed back by shutdown |
//! | `sleep(Duration::ZERO)`, a past deadline | ready on the first poll |
//! | `Instant` near its maximum | clamped as above; `reset` to a near one works |
//! | `interval` with a huge or `Duration::MAX` period | first tick at once, the next one at the clamped far future, no overflow panic |
//! | runtime shut down with a million timers pending | no hang, no panic; `schedule` then returns `Err(Shutdown)` |
//! | a waker that drops sleeps (its own, others) | no deadlock, no panic |
//! | `Timer` dropped while handles and sleeps live | polling a sleep panics naming the cause; `reset` does not; `schedule` returns `Err(Shutdown)` |
//! | a sleep polled on another real-time runtime | completes by its own timer, not before its deadline |
//! | tokio's 1 ms sleep grid vs a sub-ms origin or 1.5 ms tick | never early, at most one tick + 1 ms late |
//!
//! Hangs are caught by a watchdog thread: the case runs on its own thread
//! and the test fails if it has not finished in a generous time.

mod support;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use support::{ms, panic_message};
use tiered_timer::{Error, Handle, Instant, Sleep, Timer};
use tokio_test::task::spawn;

/// Runs `f` on its own thread; fails if it panics or takes over `limit`.
fn with_watchdog<F: FnOnce() + Send + 'static>(limit: Duration, f: F) {
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    match rx.recv_timeout(limit) {
        Ok(()) => worker.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            let panic = worker.join().unwrap_err();
            panic!("the case panicked: {}", panic_message(&*panic));
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("the case hung for {limit:?}"),
    }
}

fn poll_once(sleep: &mut Sleep) -> Poll<()> {
    let mut cx = Context::from_waker(Waker::noop());
    Pin::new(sleep).poll(&mut cx)
}

const YEAR: Duration = Duration::from_secs(365 * 24 * 3600);

/// Where tokio clamps a deadline it cannot represent: `now + 30 years`.
fn tokio_far_future() -> Instant {
    tokio::time::sleep(Duration::MAX).deadline()
}

#[tokio::test(start_paused = true)]
async fn duration_max_is_clamped_counted_and_completes_there() {
    let handle = Handle::current();
    let far = tokio_far_future();
    let mut sleep = spawn(handle.sleep(Duration::MAX));
    assert_eq!(sleep.deadline(), far);
    assert!(sleep.poll().is_pending());
    assert_eq!(handle.pending(), 1);
    tokio::time::advance(far - Instant::now() - ms(1)).await;
    assert!(!sleep.is_woken());
    assert!(sleep.poll().is_pending());
    assert!(!sleep.is_elapsed());
    // A reset to an ordinary deadline works.
    let soon = Instant::now() + ms(5);
    sleep.enter(|_, sleep| sleep.reset(soon));
    assert!(sleep.poll().is_pending());
    assert_eq!(handle.pending(), 1);
    tokio::time::advance(ms(5)).await;
    assert!(sleep.is_woken());
    assert!(sleep.poll().is_ready());
    assert_eq!(handle.pending(), 0);
}

#[tokio::test(start_paused = true)]
async fn zero_and_past_deadlines_are_ready_at_once() {
    let handle = Handle::current();
    tokio::time::advance(ms(10)).await;
    let mut zero = handle.sleep(Duration::ZERO);
    assert!(poll_once(&mut zero).is_ready());
    let past = Instant::now().checked_sub(ms(5)).unwrap();
    let mut sleep = handle.sleep_until(past);
    assert!(poll_once(&mut sleep).is_ready());
    // Far in the past (before the timer was built) too.
    let long_ago = Instant::now().checked_sub(YEAR).unwrap_or(past);
    let mut sleep = handle.sleep_until(long_ago);
    assert!(poll_once(&mut sleep).is_ready());
    assert_eq!(handle.pending(), 0);
}

#[tokio::test(start_paused = true)]
async fn instant_near_its_maximum() {
    let handle = Handle::current();
    let now = Instant::now();
    for far in [
        now.checked_add(Duration::from_secs(u64::MAX / 4)),
        now.checked_add(Duration::from_secs(i64::MAX as u64 / 2)),
        // Just past the default timer's range of u64::MAX ms.
        now.checked_add(Duration::from_secs(u64::MAX / 100)),
    ]
    .into_iter()
    .flatten()
    {
        let clamped = tokio_far_future();
        let mut sleep = spawn(handle.sleep_until(far));
        assert!(sleep.poll().is_pending());
        assert_eq!(
            handle.pending(),
            1,
            "past the timer's range: clamped, counted"
        );
        assert_eq!(sleep.deadline(), clamped);
        tokio::time::advance(YEAR).await;
        assert!(sleep.poll().is_pending());
        let soon = Instant::now() + ms(1);
        sleep.enter(|_, sleep| sleep.reset(soon));
        assert!(sleep.poll().is_pending());
        tokio::time::advance(ms(1)).await;
        assert!(sleep.poll().is_ready());
    }
    // A timeout with such a deadline passes a ready future on.
    if let Some(far) = now.checked_add(Duration::from_secs(u64::MAX / 4)) {
        assert_eq!(handle.timeout_at(far, async { 7 }).await, Ok(7));
    }
    assert_eq!(handle.timeout(Duration::MAX, async { 8 }).await, Ok(8));
}

#[tokio::test(start_paused = true)]
async fn intervals_with_huge_periods_do_not_overflow() {
    let handle = Handle::current();
    for period in [
        Duration::MAX,
        Duration::from_secs(u64::MAX / 2),
        Duration::from_secs(u64::MAX / 1000),
        200 * YEAR,
    ] {
        let start = Instant::now();
        let mut interval = handle.interval(period);
        assert_eq!(interval.tick().await, start, "the first tick is at once");
        // The next tick is at `start + period`, or at the clamped far
        // future (about 30 years) if that is past the timer's range.
        let mut second = spawn(interval.tick());
        assert!(second.poll().is_pending());
        tokio::time::advance(YEAR).await;
        assert!(second.poll().is_pending());
        drop(second);
        // Every missed-tick behaviour and reset path survives the period.
        for behavior in [
            tiered_timer::MissedTickBehavior::Burst,
            tiered_timer::MissedTickBehavior::Delay,
            tiered_timer::MissedTickBehavior::Skip,
        ] {
            interval.set_missed_tick_behavior(behavior);
            interval.reset();
            interval.reset_after(Duration::MAX);
            interval.reset_immediately();
            interval.tick().await;
            assert!(spawn(interval.tick()).poll().is_pending());
        }
    }
    // interval_at with a start near the end of time.
    if let Some(far) = Instant::now().checked_add(Duration::from_secs(u64::MAX / 4)) {
        let mut interval = handle.interval_at(far, Duration::MAX);
        assert!(spawn(interval.tick()).poll().is_pending());
    }
}

#[tokio::test(start_paused = true)]
async fn schedule_with_huge_delays_runs_at_the_clamped_deadline() {
    let timer = Timer::new();
    let handle = timer.handle();
    let ran = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    let now = Instant::now();
    let far = tokio_far_future();
    for delay in [
        Duration::MAX,
        Duration::from_secs(u64::MAX / 4),
        Duration::from_millis(u64::MAX),
    ] {
        let ran = ran.clone();
        tasks.push(
            handle
                .schedule(delay, move || {
                    ran.fetch_add(1, Ordering::SeqCst);
                })
                .unwrap(),
        );
    }
    if let Some(far) = now.checked_add(Duration::from_secs(u64::MAX / 4)) {
        let ran = ran.clone();
        tasks.push(
            handle
                .schedule_at(far, move || {
                    ran.fetch_add(1, Ordering::SeqCst);
                })
                .unwrap(),
        );
    }
    for task in &tasks {
        assert_eq!(task.deadline(), far, "clamped as tokio clamps a sleep");
    }
    assert_eq!(handle.pending(), tasks.len());
    tokio::time::advance(far - Instant::now() - ms(1)).await;
    tokio::task::yield_now().await;
    assert_eq!(ran.load(Ordering::SeqCst), 0, "ran before its deadline");
    assert!(tasks[0].cancel(), "cancelling a far callback stops it");
    assert_eq!(handle.pending(), tasks.len() - 1);
    // The rest run at the clamped deadline.
    tokio::time::sleep(ms(2)).await;
    assert_eq!(ran.load(Ordering::SeqCst), tasks.len() - 1);
    assert_eq!(handle.pending(), 0);
    assert!(timer.shutdown().is_empty());
}

#[test]
fn runtime_shutdown_with_a_million_timers_pending() {
    with_watchdog(Duration::from_secs(120), || {
        const N: usize = 1_000_000;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        let (timer, handle, sleeps) = rt.block_on(async {
            let timer = Timer::new();
            let handle = timer.handle();
            for i in 0..N - 1000 {
                let ran = ran.clone();
                handle
                    .schedule(Duration::from_secs(3600 + (i % 5000) as u64), move || {
                        ran.fetch_add(1, Ordering::SeqCst);
                    })
                    .unwrap();
            }
            // Sleeps too, registered by a first poll.
            let mut sleeps: Vec<Sleep> = (0..1000)
                .map(|i| handle.sleep(Duration::from_secs(60 + i)))
                .collect();
            for sleep in &mut sleeps {
                assert!(poll_once(sleep).is_pending());
            }
            assert_eq!(handle.pending(), N);
            (timer, handle, sleeps)
        });
        drop(rt);
        assert_eq!(
            handle.schedule(Duration::from_secs(1), || {}).unwrap_err(),
            Error::Shutdown
        );
        drop(sleeps);
        drop(timer);
        drop(handle);
        assert_eq!(ran.load(Ordering::SeqCst), 0);
    });
}

/// A waker that drops the sleeps it holds when woken.
struct DroppingWaker {
    held: Mutex<Vec<Sleep>>,
    woken: AtomicUsize,
}

impl Wake for DroppingWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.fetch_add(1, Ordering::SeqCst);
        let sleeps = std::mem::take(&mut *self.held.lock().unwrap());
        drop(sleeps);
    }
}

#[test]
fn sleeps_dropped_from_inside_a_waker() {
    with_watchdog(Duration::from_secs(60), || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let handle = Handle::current();
            let wakers: Vec<Arc<DroppingWaker>> = (0..50)
                .map(|i| {
                    let waker = Arc::new(DroppingWaker {
                        held: Mutex::new(Vec::new()),
                        woken: AtomicUsize::new(0),
                    });
                    let as_waker = Waker::from(waker.clone());
                    let mut cx = Context::from_waker(&as_waker);
                    // Its own sleep, registered with this waker...
                    let mut own = handle.sleep(ms(1 + i % 7));
                    assert!(Pin::new(&mut own).poll(&mut cx).is_pending());
                    // ...and others, due at the same time, later or never.
                    let mut same = handle.sleep(ms(1 + i % 7));
                    let mut later = handle.sleep(ms(100));
                    let mut never = handle.sleep(Duration::MAX);
                    for other in [&mut same, &mut later, &mut never] {
                        assert!(poll_once(other).is_pending());
                    }
                    waker.held.lock().unwrap().extend([own, same, later, never]);
                    waker
                })
                .collect();
            tokio::time::advance(ms(10)).await;
            tokio::task::yield_now().await;
            for waker in &wakers {
                assert_eq!(waker.woken.load(Ordering::SeqCst), 1);
                assert!(waker.held.lock().unwrap().is_empty());
            }
            assert_eq!(handle.pending(), 0);
            // The timer still works afterwards.
            handle.sleep(ms(3)).await;
        });
    });
}

#[tokio::test(start_paused = true)]
async fn timer_shut_down_while_handles_and_sleeps_live() {
    let timer = Timer::new();
    let handle = timer.handle();
    let mut polled = handle.sleep(ms(10));
    assert!(poll_once(&mut polled).is_pending());
    let mut unpolled = handle.sleep(ms(10));
    drop(timer.shutdown());
    tokio::task::yield_now().await;

    assert_eq!(handle.schedule(ms(1), || {}).unwrap_err(), Error::Shutdown);
    assert_eq!(
        handle.schedule_at(Instant::now(), || {}).unwrap_err(),
        Error::Shutdown
    );
    // Resetting does not panic; polling does, naming the cause.
    Pin::new(&mut polled).reset(Instant::now() + ms(1));
    let mut made_after = handle.sleep(ms(1));
    for sleep in [&mut polled, &mut unpolled, &mut made_after] {
        let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| poll_once(sleep)))
            .expect_err("polling a sleep of a shut-down timer panics");
        let message = panic_message(&*panic);
        assert!(
            message.contains("timer has shut down"),
            "unhelpful message: {message}"
        );
    }
    // Dropping them afterwards is fine.
    drop((polled, unpolled, made_after));
    assert_eq!(handle.pending(), 0);
}

#[test]
fn polled_from_another_real_time_runtime() {
    with_watchdog(Duration::from_secs(60), || {
        // The timer's driver runs on `home` (its own worker thread).
        let home = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_time()
            .build()
            .unwrap();
        let other = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let (timer, sleep, interval) = home.block_on(async {
            let timer = Timer::new();
            let handle = timer.handle();
            (timer, handle.sleep(ms(50)), handle.interval(ms(20)))
        });
        let deadline = sleep.deadline();
        let mut interval = interval;
        other.block_on(async {
            sleep.await;
            assert!(Instant::now() >= deadline, "completed before its deadline");
            let first = interval.tick().await;
            let second = interval.tick().await;
            assert!(Instant::now() >= second);
            assert!(second >= first + ms(20));
            // Generous: the machine is shared, only gross errors fail.
            assert!(deadline.elapsed() < Duration::from_secs(20));
        });
        drop(timer);
    });
}

/// Decided outcome (1): tokio's own sleeps, which the driver waits on, fall
/// on tokio's 1 ms grid. A timer built off that grid, or with a tick that is
/// not a whole number of milliseconds, fires up to 1 ms after its tick
/// boundary: never early, at most one tick + 1 ms late.
async fn off_grid_bound(tick: Duration) {
    let timer = Timer::builder().tick(tick).build();
    let handle = timer.handle();
    let origin = Instant::now();
    let tick_ns = tick.as_nanos();
    for delay_us in [
        0u64, 1, 400, 999, 1000, 1001, 1500, 2600, 7_777, 64_123, 250_001,
    ] {
        let start = Instant::now();
        let deadline = start + Duration::from_micros(delay_us);
        handle.sleep_until(deadline).await;
        let fired = Instant::now();
        assert!(fired >= deadline, "early: {delay_us} us (tick {tick:?})");
        // The tick boundary the never-early rule names.
        let since = (deadline - origin).as_nanos();
        let boundary = origin + Duration::from_nanos((since.div_ceil(tick_ns) * tick_ns) as u64);
        assert!(
            fired <= boundary + ms(1),
            "{delay_us} us: fired {:?} after its boundary (tick {tick:?})",
            fired - boundary
        );
        assert!(fired - deadline <= tick + ms(1));
    }
}

#[tokio::test(start_paused = true)]
async fn sub_millisecond_origin_is_never_early_and_at_most_1ms_late() {
    tokio::time::advance(Duration::from_micros(400)).await;
    off_grid_bound(ms(1)).await;
}

#[tokio::test(start_paused = true)]
async fn fractional_millisecond_tick_is_never_early_and_at_most_1ms_late() {
    off_grid_bound(Duration::from_micros(1500)).await;
    tokio::time::advance(Duration::from_micros(400)).await;
    off_grid_bound(Duration::from_micros(1500)).await;
}

/// Decided outcome (2): a timer's range is `u64` ticks from its creation
/// (~146 million years at the default 250 µs). A deadline past its last
/// tick is clamped like `Duration::MAX`, to about 30 years from now, and
/// then filed and counted like any other deadline.
#[tokio::test(start_paused = true)]
async fn deadline_past_the_last_tick_is_clamped_like_duration_max() {
    let timer = Timer::new();
    let handle = timer.handle();
    let origin = Instant::now();
    // u64::MAX ticks of 1 ms, and beyond.
    let candidates = [
        Duration::from_millis(u64::MAX),
        Duration::from_millis(u64::MAX - 1),
        Duration::from_secs(u64::MAX / 500),
    ];
    let mut tested = 0;
    for past_range in candidates {
        let Some(deadline) = origin.checked_add(past_range) else {
            continue;
        };
        tested += 1;
        let far = tokio_far_future();
        let mut sleep = spawn(handle.sleep_until(deadline));
        assert_eq!(sleep.deadline(), far);
        assert!(sleep.poll().is_pending());
        assert_eq!(handle.pending(), 1, "a sleep past the range is counted");
        tokio::time::advance(YEAR).await;
        assert!(sleep.poll().is_pending());
        drop(sleep);
        assert_eq!(handle.pending(), 0);

        let scheduled = handle.schedule_at(deadline, || panic!("ran")).unwrap();
        assert_eq!(scheduled.deadline(), tokio_far_future());
        assert_eq!(handle.pending(), 1, "a callback past the range counts");
        assert!(scheduled.cancel());
        assert_eq!(handle.pending(), 0);
    }
    assert!(
        tested > 0,
        "Instant cannot represent any deadline past the range here"
    );
    // Within the range, far out: an ordinary deadline, kept as it is.
    let mut within = spawn(handle.sleep_until(origin + 500 * YEAR));
    assert_eq!(within.deadline(), origin + 500 * YEAR);
    assert!(within.poll().is_pending());
    assert_eq!(handle.pending(), 1);
}

/// A passed deadline registered while the driver is due (a stale coarse
/// bucket waits to cascade after an idle stretch) is ready on its first
/// poll, as with `tokio::time`; found by the model test.
#[tokio::test(start_paused = true)]
async fn a_past_deadline_while_the_driver_is_due_is_ready_on_first_poll() {
    let timer = Timer::builder().tick(ms(10)).wheel_size(2).build();
    let handle = timer.handle();
    tokio::time::advance(ms(11)).await;
    tokio::time::advance(Duration::from_secs(5000)).await;
    // Filed in a coarse bucket that starts before now: the driver is due.
    let mut later = spawn(handle.sleep_until(Instant::now() + ms(1)));
    assert!(later.poll().is_pending());
    let mut past = spawn(handle.sleep_until(Instant::now() - ms(3)));
    assert!(
        past.poll().is_ready(),
        "a passed deadline must be ready at once"
    );
    assert!(later.poll().is_pending(), "the later sleep fired early");
}

/// The same through a reset: a fired sleep reset after an idle stretch must
/// not leave the wheel behind the clock, or a passed deadline registered
/// next waits for the driver's turn. Found by the model test.
#[tokio::test(start_paused = true)]
async fn a_reset_after_an_idle_stretch_files_against_the_present() {
    let timer = Timer::builder().tick(ms(1)).wheel_size(2).build();
    let handle = timer.handle();
    let mut fired = spawn(handle.sleep(ms(1)));
    // Not polled, so not registered yet.
    let mut unpolled = spawn(handle.sleep(Duration::from_secs(3600)));
    assert!(fired.poll().is_pending());
    tokio::time::advance(ms(1)).await;
    assert!(fired.poll().is_ready());
    tokio::time::advance(ms(65_691)).await;
    let now = Instant::now();
    // The locked path of a reset: the sleep has fired.
    fired.enter(|_, sleep| sleep.reset(now + ms(1)));
    // Registered on its next poll, with its deadline passed.
    unpolled.enter(|_, sleep| sleep.reset(now));
    assert!(
        unpolled.poll().is_ready(),
        "a passed deadline must be ready at once"
    );
    assert!(fired.poll().is_pending(), "fired early");
    tokio::time::advance(ms(1)).await;
    assert!(fired.poll().is_ready());
}
