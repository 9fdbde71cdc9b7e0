//! The callback API (`Handle::schedule`, `Scheduled`, `Timer::shutdown`),
//! each case run twice: on tokio's paused clock and on a `ManualClock`.

mod support;

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::{ms, panic_message};
use tiered_timer::clock::ManualClock;
use tiered_timer::{Error, Handle, Instant, Timer};

/// A timer and the way its clock is moved.
struct Harness {
    timer: Timer,
    manual: Option<ManualClock>,
}

impl Harness {
    fn new(manual: bool, tick: Duration) -> Harness {
        Harness::with(manual, Timer::builder().tick(tick))
    }

    fn with(manual: bool, builder: tiered_timer::Builder) -> Harness {
        match manual {
            false => Harness {
                timer: builder.build(),
                manual: None,
            },
            true => {
                let clock = ManualClock::new();
                Harness {
                    timer: builder.clock(clock.clone()).build(),
                    manual: Some(clock),
                }
            }
        }
    }

    fn handle(&self) -> Handle {
        self.timer.handle()
    }

    fn now(&self) -> Instant {
        self.timer.handle().now()
    }

    /// Moves the clock by `by`, then lets the driver task run the callbacks
    /// that became due.
    async fn advance(&self, by: Duration) {
        match &self.manual {
            None => tokio::time::advance(by).await,
            Some(clock) => clock.advance(by),
        }
        settle().await;
    }
}

/// Lets other tasks (the driver) run; on the current-thread runtime one
/// yield is enough, a few make it independent of how `advance` yields.
async fn settle() {
    for _ in 0..4 {
        tokio::task::yield_now().await;
    }
}

/// Records when (by the timer's clock) and in which order callbacks ran.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<(&'static str, Instant)>>>);

impl Log {
    fn callback(&self, h: &Harness, name: &'static str) -> impl FnOnce() + Send + 'static {
        let log = self.clone();
        let handle = h.handle();
        move || log.0.lock().unwrap().push((name, handle.now()))
    }

    fn names(&self) -> Vec<&'static str> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|(name, _)| *name)
            .collect()
    }

    fn time_of(&self, name: &str) -> Option<Instant> {
        let log = self.0.lock().unwrap();
        log.iter().find(|(n, _)| *n == name).map(|(_, at)| *at)
    }
}

/// Runs each case on the paused tokio clock and on a manual clock.
macro_rules! both_clocks {
    ($($case:ident),* $(,)?) => {
        mod paused {
            $(
                #[tokio::test(start_paused = true)]
                async fn $case() {
                    super::$case(false).await;
                }
            )*
        }
        mod manual {
            $(
                #[tokio::test]
                async fn $case() {
                    super::$case(true).await;
                }
            )*
        }
    };
}

both_clocks!(
    runs_at_its_deadline_never_before,
    coarse_tick_rounds_up_to_the_next_boundary,
    zero_and_past_deadlines_run_on_the_next_turn_not_inside_schedule,
    cancel_before_expiry_prevents_the_run,
    cancel_after_expiry_returns_false,
    dropping_scheduled_does_not_cancel,
    capacity_refuses_then_frees_on_cancel_and_run,
    a_callback_can_reschedule_itself_and_cancel_others,
    cancel_from_a_callback_due_in_the_same_turn_has_one_outcome,
    a_panicking_callback_does_not_stop_the_timer,
    due_callbacks_run_in_deadline_order,
    callbacks_keep_deadline_order_through_a_flush_of_many_batches,
    shutdown_hands_back_unfired_in_deadline_order,
    dropping_the_last_owner_drops_unfired_callbacks_without_running_them,
    unrepresentable_delay_never_runs_but_stays_pending,
    pending_counts_callbacks_and_sleeps,
    sleeps_and_callbacks_share_the_clock,
);

async fn runs_at_its_deadline_never_before(manual: bool) {
    let h = Harness::new(manual, ms(1));
    let log = Log::default();
    let start = h.now();
    let scheduled = h.handle().schedule(ms(10), log.callback(&h, "a")).unwrap();
    assert_eq!(scheduled.deadline(), start + ms(10));
    h.advance(ms(9)).await;
    assert!(log.names().is_empty(), "ran a millisecond early");
    assert!(!scheduled.is_expired());
    h.advance(ms(1)).await;
    assert_eq!(log.names(), ["a"]);
    assert_eq!(log.time_of("a"), Some(start + ms(10)));
    assert!(scheduled.is_expired());
    h.advance(ms(100)).await;
    assert_eq!(log.names(), ["a"], "ran twice");
}

async fn coarse_tick_rounds_up_to_the_next_boundary(manual: bool) {
    let h = Harness::new(manual, ms(10));
    let log = Log::default();
    h.handle().schedule(ms(25), log.callback(&h, "a")).unwrap();
    h.advance(ms(29)).await;
    assert!(log.names().is_empty(), "ran before the 30 ms boundary");
    h.advance(ms(1)).await;
    assert_eq!(log.names(), ["a"]);
}

async fn zero_and_past_deadlines_run_on_the_next_turn_not_inside_schedule(manual: bool) {
    let h = Harness::new(manual, ms(1));
    let log = Log::default();
    let start = h.now();
    h.handle()
        .schedule(Duration::ZERO, log.callback(&h, "zero"))
        .unwrap();
    assert!(log.names().is_empty(), "ran inside schedule");
    settle().await;
    assert_eq!(log.names(), ["zero"]);

    h.advance(ms(5)).await;
    let past = h
        .handle()
        .schedule_at(start, log.callback(&h, "past"))
        .unwrap();
    assert!(past.is_expired(), "a past deadline is due at once");
    assert!(!past.cancel(), "already committed to run");
    assert_eq!(log.names(), ["zero"], "ran inside schedule_at");
    settle().await;
    assert_eq!(log.names(), ["zero", "past"]);
    assert_eq!(log.time_of("past"), Some(start + ms(5)));
}

async fn cancel_before_expiry_prevents_the_run(manual: bool) {
    let h = Harness::new(manual, ms(1));
    let log = Log::default();
    let scheduled = h.handle().schedule(ms(10), log.callback(&h, "a")).unwrap();
    assert_eq!(h.handle().pending(), 1);
    h.advance(ms(9)).await;
    assert!(scheduled.cancel());
    assert!(scheduled.is_cancelled());
    assert!(!scheduled.is_expired());
    assert!(!scheduled.cancel(), "a second cancel prevents nothing");
    assert_eq!(h.handle().pending(), 0);
    h.advance(ms(100)).await;
    assert!(log.names().is_empty());
}

async fn cancel_after_expiry_returns_false(manual: bool) {
    let h = Harness::new(manual, ms(1));
    let log = Log::default();
    let scheduled = h.handle().schedule(ms(10), log.callback(&h, "a")).unwrap();
    h.advance(ms(10)).await;
    assert_eq!(log.names(), ["a"]);
    assert!(!scheduled.cancel());
    assert!(!scheduled.is_cancelled());
    assert!(scheduled.is_expired());
}

async fn dropping_scheduled_does_not_cancel(manual: bool) {
    let h = Harness::new(manual, ms(1));
    let log = Log::default();
    drop(h.handle().schedule(ms(10), log.callback(&h, "a")).unwrap());
    assert_eq!(h.handle().pending(), 1);
    h.advance(ms(10)).await;
    assert_eq!(log.names(), ["a"]);
}

async fn capacity_refuses_then_frees_on_cancel_and_run(manual: bool) {
    let h = Harness::with(manual, Timer::builder().max_pending(2));
    let log = Log::default();
    let first = h.handle().schedule(ms(10), log.callback(&h, "a")).unwrap();
    h.handle().schedule(ms(20), log.callback(&h, "b")).unwrap();
    let refused = h.handle().schedule(ms(5), log.callback(&h, "c"));
    assert_eq!(refused.unwrap_err(), Error::AtCapacity);

    assert!(first.cancel());
    h.handle().schedule(ms(5), log.callback(&h, "d")).unwrap();
    assert_eq!(
        h.handle().schedule(ms(5), || {}).unwrap_err(),
        Error::AtCapacity
    );

    h.advance(ms(5)).await;
    assert_eq!(log.names(), ["d"]);
    h.handle().schedule(ms(5), log.callback(&h, "e")).unwrap();

    // Sleeps count too (they are never refused).
    let mut sleep = h.handle().sleep(ms(50));
    assert!(tokio_test::task::spawn(&mut sleep).poll().is_pending());
    assert_eq!(h.handle().pending(), 3);
    assert_eq!(
        h.handle().schedule(ms(5), || {}).unwrap_err(),
        Error::AtCapacity
    );
    h.advance(ms(20)).await;
    assert_eq!(log.names(), ["d", "e", "b"]);
    assert_eq!(h.handle().pending(), 1);
    assert!(h.handle().schedule(ms(5), || {}).is_ok());
}

async fn a_callback_can_reschedule_itself_and_cancel_others(manual: bool) {
    let h = Harness::new(manual, ms(1));
    let runs = Arc::new(AtomicUsize::new(0));

    fn rearm(handle: Handle, runs: Arc<AtomicUsize>) {
        let again = handle.clone();
        handle
            .schedule(ms(10), move || {
                if runs.fetch_add(1, Ordering::SeqCst) + 1 < 3 {
                    rearm(again, runs);
                }
            })
            .unwrap();
    }
    rearm(h.handle(), runs.clone());

    let log = Log::default();
    let victim = h
        .handle()
        .schedule(ms(25), log.callback(&h, "victim"))
        .unwrap();
    let cancelled = Arc::new(Mutex::new(None));
    let (victim2, result) = (victim.clone(), cancelled.clone());
    h.handle()
        .schedule(ms(15), move || {
            *result.lock().unwrap() = Some(victim2.cancel());
        })
        .unwrap();

    for _ in 0..5 {
        h.advance(ms(10)).await;
    }
    assert_eq!(runs.load(Ordering::SeqCst), 3);
    assert_eq!(*cancelled.lock().unwrap(), Some(true));
    assert!(victim.is_cancelled());
    assert!(log.names().is_empty());
    assert_eq!(h.handle().pending(), 0);
}

async fn cancel_from_a_callback_due_in_the_same_turn_has_one_outcome(manual: bool) {
    let h = Harness::new(manual, ms(1));
    let log = Log::default();
    let victim = Arc::new(Mutex::new(None::<tiered_timer::Scheduled>));
    let result = Arc::new(Mutex::new(None));
    let (slot, out) = (victim.clone(), result.clone());
    // Earlier deadline in the same tick: runs first, and tries to cancel a
    // callback that is already found due.
    h.handle()
        .schedule_at(h.now() + Duration::from_micros(9_200), move || {
            let cancelled = slot.lock().unwrap().as_ref().unwrap().cancel();
            *out.lock().unwrap() = Some(cancelled);
        })
        .unwrap();
    let scheduled = h
        .handle()
        .schedule_at(
            h.now() + Duration::from_micros(9_800),
            log.callback(&h, "v"),
        )
        .unwrap();
    *victim.lock().unwrap() = Some(scheduled);
    h.advance(ms(10)).await;
    let cancelled = result.lock().unwrap().expect("the canceller ran");
    let ran = log.names() == ["v"];
    assert_ne!(
        cancelled, ran,
        "cancel returned {cancelled} and the callback ran: {ran}"
    );
}

async fn a_panicking_callback_does_not_stop_the_timer(manual: bool) {
    let h = Harness::new(manual, ms(1));
    let log = Log::default();
    h.handle()
        .schedule(ms(1), || panic!("deliberate panic in a callback"))
        .unwrap();
    h.handle()
        .schedule(ms(1), log.callback(&h, "same tick"))
        .unwrap();
    h.handle()
        .schedule(ms(2), log.callback(&h, "later"))
        .unwrap();
    h.advance(ms(1)).await;
    h.advance(ms(1)).await;
    assert_eq!(log.names(), ["same tick", "later"]);
    // And it still serves futures.
    let start = h.now();
    let sleep = h.handle().sleep(ms(3));
    let waiter = tokio::spawn(sleep);
    h.advance(ms(3)).await;
    waiter.await.unwrap();
    assert_eq!(h.now(), start + ms(3));
}

async fn due_callbacks_run_in_deadline_order(manual: bool) {
    // Within one 10 ms tick, and across ticks passed by one advance.
    let h = Harness::new(manual, ms(10));
    let log = Log::default();
    let start = h.now();
    for (name, at) in [
        ("7", 7),
        ("3", 3),
        ("5", 5),
        ("30", 30),
        ("12", 12),
        ("20", 20),
    ] {
        h.handle()
            .schedule_at(start + ms(at), log.callback(&h, name))
            .unwrap();
    }
    h.advance(ms(10)).await;
    assert_eq!(log.names(), ["3", "5", "7"]);
    h.advance(ms(50)).await;
    assert_eq!(log.names(), ["3", "5", "7", "12", "20", "30"]);
}

/// Regression guard for issue 18's cascade-storm fix: between the
/// driver's batches, sleeps that came due meanwhile go ahead of the rest
/// of a large flush, but callbacks never do. 3 000 callbacks due at once
/// take three batches; one due a tick later must still run after all.
async fn callbacks_keep_deadline_order_through_a_flush_of_many_batches(manual: bool) {
    const AT_ONCE: u64 = 3_000;
    let h = Harness::new(manual, ms(1));
    let ran = Arc::new(Mutex::new(Vec::new()));
    let start = h.now();
    let schedule = |at: u64| {
        let ran = ran.clone();
        h.handle()
            .schedule_at(start + ms(at), move || ran.lock().unwrap().push(at))
            .unwrap();
    };
    (0..AT_ONCE).for_each(|_| schedule(10));
    schedule(11);
    h.advance(ms(11)).await;
    while ran.lock().unwrap().len() < AT_ONCE as usize + 1 {
        tokio::task::yield_now().await;
    }
    let ran = ran.lock().unwrap();
    let first_late = ran.iter().position(|&at| at == 11);
    assert_eq!(first_late, Some(AT_ONCE as usize), "ran out of order");
}

async fn shutdown_hands_back_unfired_in_deadline_order(manual: bool) {
    let h = Harness::new(manual, ms(1));
    let log = Log::default();
    h.handle().schedule(ms(5), log.callback(&h, "ran")).unwrap();
    let b = h.handle().schedule(ms(30), log.callback(&h, "b")).unwrap();
    let a = h.handle().schedule(ms(20), log.callback(&h, "a")).unwrap();
    let never = h
        .handle()
        .schedule(Duration::MAX, log.callback(&h, "never"))
        .unwrap();
    let mut sleep = h.handle().sleep(ms(50));
    assert!(tokio_test::task::spawn(&mut sleep).poll().is_pending());
    h.advance(ms(5)).await;

    let unfired = h.timer.shutdown();
    let deadlines: Vec<Instant> = unfired.iter().map(|u| u.deadline()).collect();
    assert_eq!(deadlines, [a.deadline(), b.deadline(), never.deadline()]);
    assert!(
        h.timer.shutdown().is_empty(),
        "a second shutdown hands back nothing"
    );
    assert_eq!(h.handle().pending(), 0);
    for scheduled in [&a, &b, &never] {
        assert!(!scheduled.cancel(), "the timer stopped it, not cancel");
        assert!(!scheduled.is_cancelled());
        assert!(!scheduled.is_expired());
    }
    assert_eq!(
        h.handle().schedule(ms(1), || {}).unwrap_err(),
        Error::Shutdown
    );
    h.advance(ms(100)).await;
    assert_eq!(log.names(), ["ran"], "nothing runs after shutdown");
    unfired.into_iter().for_each(|u| u.run());
    assert_eq!(log.names(), ["ran", "a", "b", "never"]);

    let poll = std::panic::catch_unwind(AssertUnwindSafe(|| {
        tokio_test::task::spawn(&mut sleep).poll()
    }));
    let panic = poll.expect_err("a sleep on a shut-down timer must not hang silently");
    assert!(panic_message(&*panic).contains("shut down"));
}

async fn dropping_the_last_owner_drops_unfired_callbacks_without_running_them(manual: bool) {
    struct Dropped(Arc<AtomicUsize>);
    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let h = Harness::new(manual, ms(1));
    let dropped = Arc::new(AtomicUsize::new(0));
    let ran = Arc::new(AtomicUsize::new(0));
    let handle = h.handle();
    for _ in 0..3 {
        let guard = Dropped(dropped.clone());
        let ran = ran.clone();
        handle
            .schedule(ms(10), move || {
                let _guard = guard;
                ran.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
    }
    // A handle keeps the timer, and its callbacks, alive.
    drop(h.timer);
    assert_eq!(dropped.load(Ordering::SeqCst), 0);
    assert_eq!(handle.pending(), 3);
    // The last owner gone, the callbacks go without running.
    drop(handle);
    assert_eq!(dropped.load(Ordering::SeqCst), 3);
    assert_eq!(ran.load(Ordering::SeqCst), 0);
}

async fn unrepresentable_delay_never_runs_but_stays_pending(manual: bool) {
    let h = Harness::new(manual, ms(1));
    let log = Log::default();
    let start = h.now();
    let scheduled = h
        .handle()
        .schedule(Duration::MAX, log.callback(&h, "never"))
        .unwrap();
    assert!(scheduled.deadline() > start + Duration::from_secs(86_400 * 365));
    assert_eq!(h.handle().pending(), 1);
    h.advance(Duration::from_secs(86_400 * 365 * 10)).await;
    assert!(log.names().is_empty());
    assert!(scheduled.cancel());
    assert_eq!(h.handle().pending(), 0);
}

async fn pending_counts_callbacks_and_sleeps(manual: bool) {
    let h = Harness::new(manual, ms(1));
    let handle = h.handle();
    let a = handle.schedule(ms(10), || {}).unwrap();
    handle.schedule(ms(20), || {}).unwrap();
    let mut sleep = handle.sleep(ms(15));
    assert!(tokio_test::task::spawn(&mut sleep).poll().is_pending());
    assert_eq!(handle.pending(), 3);
    a.cancel();
    assert_eq!(handle.pending(), 2);
    h.advance(ms(15)).await;
    assert_eq!(handle.pending(), 1);
    h.advance(ms(5)).await;
    assert_eq!(handle.pending(), 0);
}

async fn sleeps_and_callbacks_share_the_clock(manual: bool) {
    let h = Harness::new(manual, ms(1));
    let log = Log::default();
    let start = h.now();
    let handle = h.handle();
    let (tx, rx) = tokio::sync::oneshot::channel();
    handle
        .schedule(ms(40), move || {
            let _ = tx.send(());
        })
        .unwrap();
    handle.schedule(ms(20), log.callback(&h, "a")).unwrap();
    let sleeper = tokio::spawn(handle.sleep(ms(30)));
    for _ in 0..4 {
        h.advance(ms(10)).await;
    }
    sleeper.await.unwrap();
    rx.await.unwrap();
    assert_eq!(log.time_of("a"), Some(start + ms(20)));
    assert_eq!(h.now(), start + ms(40));
}

// ----- ManualClock specifics ---------------------------------------------

#[tokio::test]
async fn manual_clock_wakes_due_sleeps_before_advance_returns() {
    let clock = ManualClock::new();
    let timer = Timer::builder().clock(clock.clone()).build();
    let handle = timer.handle();
    let mut sleeps: Vec<_> = (1..=5)
        .map(|n| tokio_test::task::spawn(handle.sleep(ms(n * 10))))
        .collect();
    for sleep in &mut sleeps {
        assert!(sleep.poll().is_pending());
    }
    // Let the driver see the registrations and wait on the clock.
    settle().await;
    clock.advance(ms(30));
    // No await in between: the advance itself fired them.
    let woken: Vec<bool> = sleeps.iter().map(|s| s.is_woken()).collect();
    assert_eq!(woken, [true, true, true, false, false]);
    let ready: Vec<bool> = sleeps.iter_mut().map(|s| s.poll().is_ready()).collect();
    assert_eq!(ready, [true, true, true, false, false]);
}

#[tokio::test]
async fn manual_clock_advanced_before_the_driver_ran_fires_on_the_next_await() {
    let clock = ManualClock::new();
    let timer = Timer::builder().clock(clock.clone()).build();
    let mut sleep = tokio_test::task::spawn(timer.handle().sleep(ms(10)));
    assert!(sleep.poll().is_pending());
    clock.advance(ms(10));
    tokio::task::yield_now().await;
    assert!(sleep.is_woken());
    assert!(sleep.poll().is_ready());
}

#[tokio::test]
async fn manual_clock_does_not_move_with_real_time() {
    let clock = ManualClock::new();
    let timer = Timer::builder().clock(clock.clone()).build();
    let log = Log::default();
    let h = Harness {
        timer,
        manual: Some(clock.clone()),
    };
    h.handle().schedule(ms(1), log.callback(&h, "a")).unwrap();
    tokio::time::sleep(ms(20)).await;
    assert!(log.names().is_empty(), "ran by real time");
    clock.set(clock_now(&clock) + ms(1));
    settle().await;
    assert_eq!(log.names(), ["a"]);
}

fn clock_now(clock: &ManualClock) -> Instant {
    use tiered_timer::clock::Clock;
    clock.now()
}

#[test]
fn manual_clock_refuses_to_go_backwards() {
    let clock = ManualClock::new();
    let now = clock_now(&clock);
    clock.advance(ms(10));
    let panic = std::panic::catch_unwind(|| clock.set(now)).unwrap_err();
    assert!(panic_message(&*panic).contains("never goes backwards"));
    assert_eq!(clock_now(&clock), now + ms(10));
}

#[test]
fn manual_clock_refuses_to_overflow() {
    let clock = ManualClock::new();
    let panic = std::panic::catch_unwind(|| clock.advance(Duration::MAX)).unwrap_err();
    assert!(panic_message(&*panic).contains("overflows"));
}

// ----- Errors --------------------------------------------------------------

#[test]
fn errors_say_what_happened() {
    fn is_error<E: std::error::Error + Send + Sync + 'static>(_: &E) {}
    is_error(&Error::AtCapacity);
    assert!(Error::AtCapacity.to_string().contains("capacity"));
    assert!(Error::Shutdown.to_string().contains("shut down"));
    assert_eq!(format!("{:?}", Error::Shutdown), "Shutdown");
}

#[tokio::test(start_paused = true)]
async fn the_default_timer_schedules_too() {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let start = Instant::now();
    Handle::current()
        .schedule(ms(100), move || {
            let _ = tx.send(Instant::now());
        })
        .unwrap();
    assert_eq!(rx.await.unwrap(), start + ms(100));
}

// ----- Real threads, real time ---------------------------------------------

/// Cancel racing expiry on two workers: every callback either ran once or
/// was cancelled (cancel returned true), never both, never neither.
#[test]
fn cancel_racing_expiry_has_exactly_one_outcome() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        const N: usize = 20_000;
        let timer = Timer::new();
        let handle = timer.handle();
        let runs: Arc<Vec<AtomicUsize>> = Arc::new((0..N).map(|_| AtomicUsize::new(0)).collect());
        let mut scheduled = Vec::with_capacity(N);
        for i in 0..N {
            let runs = runs.clone();
            let delay = Duration::from_micros((i % 3000) as u64);
            let s = handle
                .schedule(delay, move || {
                    runs[i].fetch_add(1, Ordering::SeqCst);
                })
                .unwrap();
            scheduled.push(s);
        }
        // Cancel from another worker while they come due.
        let cancelled = tokio::spawn(async move {
            let mut cancelled = vec![false; N];
            for (i, s) in scheduled.iter().enumerate() {
                cancelled[i] = s.cancel();
                if i % 500 == 0 {
                    tokio::task::yield_now().await;
                }
            }
            cancelled
        })
        .await
        .unwrap();
        // Let everything due run.
        tokio::time::sleep(ms(20)).await;
        while handle.pending() > 0 {
            tokio::time::sleep(ms(5)).await;
        }
        tokio::time::sleep(ms(5)).await;
        let mut ran_count = 0;
        for i in 0..N {
            let ran = runs[i].load(Ordering::SeqCst);
            assert!(ran <= 1, "callback {i} ran {ran} times");
            assert!(
                (ran == 1) != cancelled[i],
                "callback {i}: ran {ran}, cancel returned {}",
                cancelled[i]
            );
            ran_count += ran;
        }
        // Both outcomes happen, or the race was not exercised.
        eprintln!("{ran_count} ran, {} cancelled", N - ran_count);
    });
}

/// The real-time case: 100 000 callbacks scheduled 125 ms out all
/// run within [125 ms, 650 ms) of being scheduled.
#[test]
fn hundred_thousand_callbacks_in_real_time() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        const N: usize = 100_000;
        let timer = Timer::new();
        let handle = timer.handle();
        let late: Arc<Mutex<Vec<Duration>>> = Arc::new(Mutex::new(Vec::with_capacity(N)));
        let (tx, rx) = tokio::sync::oneshot::channel();
        let tx = Arc::new(Mutex::new(Some(tx)));
        for _ in 0..N {
            let scheduled_at = std::time::Instant::now();
            let (late, tx) = (late.clone(), tx.clone());
            handle
                .schedule(ms(125), move || {
                    let mut late = late.lock().unwrap();
                    late.push(scheduled_at.elapsed());
                    if late.len() == N {
                        let _ = tx.lock().unwrap().take().unwrap().send(());
                    }
                })
                .unwrap();
        }
        tokio::time::timeout(Duration::from_secs(30), rx)
            .await
            .expect("not all callbacks ran within 30 s")
            .unwrap();
        let late = late.lock().unwrap();
        let min = late.iter().min().unwrap();
        let max = late.iter().max().unwrap();
        eprintln!("100 000 callbacks: earliest {min:?}, latest {max:?} after scheduling");
        assert!(*min >= ms(125), "a callback ran early: {min:?}");
        assert!(*max < ms(650), "a callback ran at {max:?}");
    });
}
