//! Code written for `tokio::time` compiles and behaves the same with only
//! the import changed. Each function below is written the way tokio's docs
//! and common services use the API.

mod support;

use std::io;
use std::time::Duration;

// The only line that differs from a tokio program:
use tiered_timer::{self as time, Instant, MissedTickBehavior};

use support::ms;

async fn read_with_deadline(rx: tokio::sync::oneshot::Receiver<u8>) -> io::Result<u8> {
    // `?` converts `Elapsed` into `io::Error`, as with tokio.
    let value = time::timeout(Duration::from_millis(50), rx).await?;
    value.map_err(|_| io::Error::other("sender dropped"))
}

async fn heartbeat_loop(beats: usize) -> Vec<Instant> {
    let mut interval = time::interval(Duration::from_millis(10));
    interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut seen = Vec::new();
    while seen.len() < beats {
        seen.push(interval.tick().await);
    }
    seen
}

async fn idle_timeout_select(events: &mut tokio::sync::mpsc::Receiver<()>) -> usize {
    // The pinned-sleep pattern from tokio's docs works unchanged.
    let sleep = time::sleep(Duration::from_millis(100));
    tokio::pin!(sleep);
    let mut handled = 0;
    loop {
        tokio::select! {
            () = &mut sleep => return handled,
            Some(()) = events.recv() => {
                handled += 1;
                sleep.as_mut().reset(Instant::now() + Duration::from_millis(100));
            }
        }
    }
}

#[tokio::test(start_paused = true)]
async fn timeout_with_question_mark() {
    let (tx, rx) = tokio::sync::oneshot::channel();
    tx.send(7).unwrap();
    assert_eq!(read_with_deadline(rx).await.unwrap(), 7);
    let (_tx, rx) = tokio::sync::oneshot::channel();
    let err = read_with_deadline(rx).await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::TimedOut);
}

#[tokio::test(start_paused = true)]
async fn heartbeat() {
    let start = Instant::now();
    let beats = heartbeat_loop(4).await;
    let offsets: Vec<_> = beats.iter().map(|b| *b - start).collect();
    assert_eq!(offsets, vec![ms(0), ms(10), ms(20), ms(30)]);
}

#[tokio::test(start_paused = true)]
async fn idle_guard_reset_on_events() {
    let (tx, mut rx) = tokio::sync::mpsc::channel(8);
    let start = Instant::now();
    let sender = tokio::spawn(async move {
        for _ in 0..3 {
            tokio::time::sleep(Duration::from_millis(60)).await;
            tx.send(()).await.unwrap();
        }
        // Keep the channel open so only the idle timer can end the loop.
        tokio::time::sleep(Duration::from_secs(3600)).await;
    });
    assert_eq!(idle_timeout_select(&mut rx).await, 3);
    // Last event at 180 ms, then 100 ms of silence.
    assert_eq!(start.elapsed(), ms(280));
    sender.abort();
}

#[tokio::test(start_paused = true)]
async fn sleep_until_and_elapsed_checks() {
    let deadline = Instant::now() + Duration::from_millis(30);
    let mut sleep = Box::pin(time::sleep_until(deadline));
    assert!(!sleep.is_elapsed());
    assert_eq!(sleep.deadline(), deadline);
    (&mut sleep).await;
    assert!(sleep.is_elapsed());
    let result = time::timeout_at(Instant::now() + ms(5), std::future::pending::<()>()).await;
    assert!(result.is_err());
    let mut at = time::interval_at(Instant::now() + ms(3), ms(3));
    assert_eq!(at.period(), ms(3));
    at.tick().await;
}

// "Forever" deadlines under paused time. tokio clamps a deadline it cannot
// represent to `now + 30 years`, and a paused runtime auto-advances to it
// when idle, so a test that sleeps "forever" finishes. The same code on
// this crate must finish too, at the deadline `deadline()` reports and not
// before. Each case runs under a watchdog: a hang fails instead of
// blocking the suite.

/// tokio's far future: what `tokio::time::sleep(Duration::MAX)` reports.
fn tokio_far_future() -> Instant {
    tokio::time::sleep(Duration::MAX).deadline()
}

/// The latest a timer may fire a deadline: one default tick (250 µs) plus
/// tokio's 1 ms grid (see "Never early" in the crate docs).
fn at_most_late(fired: Instant, deadline: Instant) {
    assert!(fired >= deadline, "fired {:?} early", deadline - fired);
    assert!(
        fired - deadline <= Duration::from_micros(1250),
        "fired {:?} late",
        fired - deadline
    );
}

const FOREVER_LIMIT: Duration = Duration::from_secs(30);

#[test]
fn waits_out_forever() {
    // The test as written (`#[tokio::test]`, then `pause`).
    support::with_watchdog(FOREVER_LIMIT, false, || async {
        tokio::time::pause();
        time::sleep(Duration::MAX).await;
    });
}

#[test]
fn forever_sleeps_complete_at_tokios_far_future() {
    support::paused_with_watchdog(FOREVER_LIMIT, || async {
        for duration in [
            Duration::MAX,
            Duration::MAX - ms(1),
            Duration::from_secs(u64::MAX / 4),
        ] {
            let far = tokio_far_future();
            let sleep = time::sleep(duration);
            assert_eq!(sleep.deadline(), far, "{duration:?}");
            sleep.await;
            at_most_late(Instant::now(), far);
        }
    });
}

#[test]
fn sleep_until_a_far_instant_completes_at_the_clamped_deadline() {
    support::paused_with_watchdog(FOREVER_LIMIT, || async {
        let now = Instant::now();
        // Representable, but past the default timer's last tick (u64 ticks
        // of 250 µs, about 146 million years).
        let candidates = [
            Duration::from_secs(u64::MAX / 4),
            Duration::from_secs(u64::MAX / 100),
            Duration::from_millis(u64::MAX),
        ];
        let mut tested = 0;
        for past_range in candidates {
            let Some(far) = Instant::now().checked_add(past_range) else {
                continue;
            };
            tested += 1;
            let clamped = tokio_far_future();
            let sleep = time::sleep_until(far);
            assert_eq!(sleep.deadline(), clamped);
            sleep.await;
            at_most_late(Instant::now(), clamped);
        }
        assert!(tested > 0, "Instant cannot represent a far deadline here");
        // A far deadline within the range is kept as it is.
        let within = Instant::now() + Duration::from_secs(86_400 * 365 * 1000);
        let sleep = time::sleep_until(within);
        assert_eq!(sleep.deadline(), within);
        sleep.await;
        at_most_late(Instant::now(), within);
        assert!(now.elapsed() > Duration::from_secs(86_400 * 365 * 1000));
    });
}

#[test]
fn forever_timeouts_elapse_at_the_clamped_deadline() {
    support::paused_with_watchdog(FOREVER_LIMIT, || async {
        let far = tokio_far_future();
        let result = time::timeout(Duration::MAX, std::future::pending::<()>()).await;
        assert!(result.is_err());
        at_most_late(Instant::now(), far);

        let far = tokio_far_future();
        let beyond = Instant::now().checked_add(Duration::from_secs(u64::MAX / 4));
        if let Some(beyond) = beyond {
            let result = time::timeout_at(beyond, std::future::pending::<()>()).await;
            assert!(result.is_err());
            at_most_late(Instant::now(), far);
        }
        // A future that completes first still wins.
        assert_eq!(time::timeout(Duration::MAX, async { 3 }).await, Ok(3));
    });
}

#[test]
fn forever_sleeps_are_counted_and_never_early() {
    support::paused_with_watchdog(FOREVER_LIMIT, || async {
        let handle = time::Handle::current();
        let far = tokio_far_future();
        let mut sleep = tokio_test::task::spawn(time::sleep(Duration::MAX));
        assert!(sleep.poll().is_pending());
        assert_eq!(handle.pending(), 1, "a forever sleep holds a slot");
        // Just before its deadline: still pending, and not woken.
        tokio::time::advance(far - Instant::now() - ms(1)).await;
        assert!(!sleep.is_woken());
        assert!(sleep.poll().is_pending());
        assert!(!sleep.is_elapsed());
        tokio::time::advance(ms(2)).await;
        assert!(sleep.is_woken());
        assert!(sleep.poll().is_ready());
        assert_eq!(handle.pending(), 0);
    });
}

#[test]
fn reset_to_a_far_instant_clamps() {
    support::paused_with_watchdog(FOREVER_LIMIT, || async {
        let mut sleep = Box::pin(time::sleep(ms(10)));
        if let Some(beyond) = Instant::now().checked_add(Duration::from_secs(u64::MAX / 4)) {
            let far = tokio_far_future();
            sleep.as_mut().reset(beyond);
            assert_eq!(sleep.deadline(), far);
            sleep.as_mut().await;
            at_most_late(Instant::now(), far);
        }
    });
}

#[test]
fn forever_interval_ticks_at_the_far_future() {
    support::paused_with_watchdog(FOREVER_LIMIT, || async {
        let start = Instant::now();
        let mut interval = time::interval(Duration::MAX);
        assert_eq!(interval.tick().await, start);
        // tokio: the next tick after an overflowing one is the far future.
        let far = tokio_far_future();
        assert_eq!(interval.tick().await, far);
        at_most_late(Instant::now(), far);
    });
}

#[test]
fn forever_callbacks_run_at_the_clamped_deadline_and_not_before() {
    support::paused_with_watchdog(FOREVER_LIMIT, || async {
        let handle = time::Handle::current();
        let far = tokio_far_future();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut scheduled = Vec::new();
        for delay in [
            Duration::MAX,
            Duration::MAX - ms(1),
            Duration::from_millis(u64::MAX),
        ] {
            let tx = tx.clone();
            let s = handle
                .schedule(delay, move || tx.send(Instant::now()).unwrap())
                .unwrap();
            assert_eq!(s.deadline(), far, "{delay:?}");
            scheduled.push(s);
        }
        if let Some(beyond) = Instant::now().checked_add(Duration::from_secs(u64::MAX / 4)) {
            let tx = tx.clone();
            let s = handle
                .schedule_at(beyond, move || tx.send(Instant::now()).unwrap())
                .unwrap();
            assert_eq!(s.deadline(), far);
            scheduled.push(s);
        }
        drop(tx);
        assert_eq!(handle.pending(), scheduled.len());
        tokio::time::advance(far - Instant::now() - ms(1)).await;
        tokio::task::yield_now().await;
        assert!(rx.try_recv().is_err(), "a callback ran early");
        // Waits (auto-advance) for every callback to run.
        let mut ran = 0;
        while let Some(at) = rx.recv().await {
            at_most_late(at, far);
            ran += 1;
        }
        assert_eq!(ran, scheduled.len());
        assert_eq!(handle.pending(), 0);
    });
}

// ----- The rest of tokio::time's surface, checked one by one -----------------

/// `tokio::time::Duration` is std's; so is ours, so the import line is the
/// only change.
#[test]
fn duration_is_reexported_as_tokio_does() {
    fn takes_std(d: std::time::Duration) -> std::time::Duration {
        d
    }
    let ours: time::Duration = time::Duration::from_millis(3);
    let tokios: tokio::time::Duration = ours;
    assert_eq!(takes_std(tokios), ms(3));
}

/// tokio's `timeout` and `timeout_at` take any `IntoFuture`, not only a
/// `Future`.
#[tokio::test(start_paused = true)]
async fn timeout_accepts_into_future() {
    struct Request(u8);
    impl std::future::IntoFuture for Request {
        type Output = u8;
        type IntoFuture = std::future::Ready<u8>;
        fn into_future(self) -> Self::IntoFuture {
            std::future::ready(self.0)
        }
    }
    assert_eq!(time::timeout(ms(5), Request(1)).await, Ok(1));
    assert_eq!(
        time::timeout_at(Instant::now() + ms(5), Request(2)).await,
        Ok(2)
    );
    let handle = time::Handle::current();
    assert_eq!(handle.timeout(ms(5), Request(3)).await, Ok(3));
    assert_eq!(
        handle.timeout_at(Instant::now() + ms(5), Request(4)).await,
        Ok(4)
    );
    let t: time::Timeout<std::future::Ready<u8>> = time::timeout(ms(5), Request(5));
    assert_eq!(t.into_inner().await, 5);
}

/// The auto traits and derives tokio's types have (ours are also `Unpin`).
#[test]
fn types_have_tokios_traits() {
    fn send_sync_unpin_debug<T: Send + Sync + Unpin + std::fmt::Debug>() {}
    fn send_sync<T: Send + Sync>() {}
    fn value_type<T: std::fmt::Debug + Clone + Copy + PartialEq + Eq + Default>() {}
    fn error<T: std::error::Error + Send + Sync + PartialEq + Eq + 'static>() {}
    send_sync_unpin_debug::<time::Sleep>();
    send_sync_unpin_debug::<time::Interval>();
    send_sync_unpin_debug::<time::Timeout<std::future::Ready<u8>>>();
    send_sync::<time::Timeout<tokio::sync::oneshot::Receiver<u8>>>();
    value_type::<MissedTickBehavior>();
    error::<time::error::Elapsed>();
    // As tokio's: `?` turns it into an `io::Error` of kind `TimedOut`.
    fn convert(e: time::error::Elapsed) -> std::io::Error {
        e.into()
    }
    let _ = convert;
}

/// The documented difference that can change behaviour after the switch:
/// a boxed timeout error is this crate's `Elapsed`, not tokio's, so
/// `err.is::<tokio::time::error::Elapsed>()` is false (lib.rs, "Differences
/// from tokio::time"). The `Display` text is tokio's.
#[tokio::test(start_paused = true)]
async fn elapsed_is_this_crates_own_type() {
    let ours = time::timeout(ms(1), std::future::pending::<()>())
        .await
        .unwrap_err();
    let theirs = tokio::time::timeout(ms(1), std::future::pending::<()>())
        .await
        .unwrap_err();
    assert_eq!(ours.to_string(), theirs.to_string());
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(ours);
    assert!(boxed.is::<time::error::Elapsed>());
    assert!(!boxed.is::<tokio::time::error::Elapsed>());
}

/// The other documented difference: `Interval` is a `Stream` itself, no
/// `IntervalStream` wrapper.
#[tokio::test(start_paused = true)]
async fn interval_is_a_stream() {
    fn stream<S: futures_core::Stream<Item = tokio::time::Instant> + Unpin>(_: &S) {}
    let mut ticks = time::interval(ms(10));
    stream(&ticks);
    let first = std::future::poll_fn(|cx| {
        futures_core::Stream::poll_next(std::pin::Pin::new(&mut ticks), cx)
    })
    .await;
    assert!(first.is_some());
}

/// As tokio's: a future that is ready when first polled wins whatever the
/// duration, zero or already passed; a pending one against a zero or past
/// deadline is `Err` on the first poll.
#[tokio::test(start_paused = true)]
async fn timeout_with_zero_or_past_deadlines() {
    use tokio_test::{assert_pending, assert_ready_err, assert_ready_ok, task};
    assert_eq!(time::timeout(Duration::ZERO, async { 1 }).await, Ok(1));
    let past = Instant::now() - ms(1);
    assert_eq!(time::timeout_at(past, async { 2 }).await, Ok(2));
    let mut zero = task::spawn(time::timeout(Duration::ZERO, std::future::pending::<()>()));
    assert_ready_err!(zero.poll());
    let mut passed = task::spawn(time::timeout_at(past, std::future::pending::<()>()));
    assert_ready_err!(passed.poll());
    // `sleep(0)` is ready on its first poll, and `Sleep` reports it.
    let mut now = task::spawn(time::sleep(Duration::ZERO));
    assert!(!now.is_elapsed(), "not elapsed before a poll, as tokio's");
    assert!(now.poll().is_ready());
    assert!(now.is_elapsed());
    // A ready value beats a deadline that passed while it was pending.
    let (tx, rx) = tokio::sync::oneshot::channel();
    let mut guarded = task::spawn(time::timeout(ms(10), rx));
    assert_pending!(guarded.poll());
    tokio::time::advance(ms(20)).await;
    tx.send(7).unwrap();
    assert_eq!(assert_ready_ok!(guarded.poll()), Ok(7));
}

/// Difference (deliberate): tokio caps `sleep`'s duration, `reset_after`'s
/// and an interval's period at 30 years (tokio's `safe_delay`), so
/// `sleep(100 years)` completes after 30. Here any duration the timer can
/// serve is kept exactly, so nothing completes before the duration asked
/// for; only what it cannot serve is clamped (see above).
#[tokio::test(start_paused = true)]
async fn long_durations_are_kept_where_tokio_caps_them_at_30_years() {
    let year = Duration::from_secs(86_400 * 365);
    let start = Instant::now();
    assert_eq!(tokio::time::sleep(100 * year).deadline(), start + 30 * year);
    assert_eq!(tokio::time::interval(100 * year).period(), 30 * year);

    let sleep = time::sleep(100 * year);
    assert_eq!(sleep.deadline(), start + 100 * year);
    sleep.await;
    assert_eq!(Instant::now(), start + 100 * year);

    let interval = time::interval(100 * year);
    assert_eq!(interval.period(), 100 * year);
    let mut interval = interval;
    interval.tick().await;
    interval.reset_after(100 * year);
    let at = Instant::now();
    assert_eq!(interval.tick().await, at + 100 * year);
}

/// Difference (deliberate): tokio 1.54's `timeout(Duration::MAX, f)` sets
/// no deadline at all, so a paused test awaiting it with a future that
/// never completes hangs; here it is clamped like a sleep, so the test ends
/// (`forever_timeouts_elapse_at_the_clamped_deadline` above), and the
/// deadline counts in `pending()`.
#[tokio::test(start_paused = true)]
async fn duration_max_timeout_is_a_counted_far_deadline() {
    use tokio_test::{assert_pending, task};
    let handle = time::Handle::current();
    let mut guarded = task::spawn(time::timeout(Duration::MAX, std::future::pending::<()>()));
    assert_pending!(guarded.poll());
    assert_eq!(handle.pending(), 1);
    drop(guarded);
    assert_eq!(handle.pending(), 0);
}

/// Difference (deliberate): tokio's `interval(Duration::MAX)` ticks every
/// 30 years (its period is capped); here the period stays `Duration::MAX`
/// and each next tick, which overflows, is the far future from the tick
/// before, which is the same schedule when ticks are taken on time.
#[tokio::test(start_paused = true)]
async fn duration_max_interval_ticks_every_30_years() {
    let year = Duration::from_secs(86_400 * 365);
    let start = Instant::now();
    let mut ours = time::interval(Duration::MAX);
    let mut tokios = tokio::time::interval(Duration::MAX);
    assert_eq!(ours.period(), Duration::MAX);
    assert_eq!(tokios.period(), 30 * year);
    for n in 0..3 {
        assert_eq!(ours.tick().await, start + n * 30 * year);
        assert_eq!(tokios.tick().await, start + n * 30 * year);
    }
}
