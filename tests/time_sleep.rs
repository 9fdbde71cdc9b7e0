//! `sleep` and `sleep_until`, in the style of tokio's own `time_sleep` tests:
//! paused time, exact instants, both runtime flavours.

mod support;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use support::ms;
use tiered_timer::{sleep, sleep_until, Handle, Instant, Sleep};
use tokio::time;
use tokio_test::{assert_pending, assert_ready, task};

fn poll_once(sleep: &mut Sleep) -> Poll<()> {
    Pin::new(sleep).poll(&mut Context::from_waker(Waker::noop()))
}

#[tokio::test(start_paused = true)]
async fn immediate_sleep_is_ready_at_once() {
    let now = Instant::now();
    let mut sleep = task::spawn(sleep_until(now));
    assert_ready!(sleep.poll());
    assert_elapsed!(now, 0);
}

#[tokio::test(start_paused = true)]
async fn past_deadline_is_ready_on_first_poll() {
    time::advance(ms(100)).await;
    let mut sleep = task::spawn(sleep_until(Instant::now() - ms(50)));
    assert_ready!(sleep.poll());
    assert!(sleep.is_elapsed());
}

#[tokio::test(start_paused = true)]
async fn delayed_sleep_fires_exactly_at_deadline() {
    for delay in [1, 10, 63, 64, 65, 4095, 4096, 60_000] {
        let now = Instant::now();
        sleep_until(now + ms(delay)).await;
        assert_elapsed!(now, delay);
    }
}

#[tokio::test(start_paused = true)]
async fn sub_millisecond_sleep_rounds_up_to_the_tick() {
    let now = Instant::now();
    sleep(Duration::from_nanos(1)).await;
    assert_elapsed!(now, 1);
}

#[tokio::test(start_paused = true)]
async fn advance_wakes_due_sleeps_before_returning() {
    let now = Instant::now();
    let mut sleep = task::spawn(sleep_until(now + ms(10)));
    assert_pending!(sleep.poll());

    time::advance(ms(9)).await;
    assert!(!sleep.is_woken(), "woken 1 ms early");
    assert_pending!(sleep.poll());

    time::advance(ms(1)).await;
    assert!(sleep.is_woken(), "not woken when advance returned");
    assert_ready!(sleep.poll());
}

#[tokio::test(start_paused = true)]
async fn advance_past_many_levels_wakes_everything_due() {
    let now = Instant::now();
    let mut sleeps: Vec<_> = [5u64, 70, 4_100, 300_000, 20_000_000]
        .into_iter()
        .map(|d| (d, task::spawn(sleep_until(now + ms(d)))))
        .collect();
    for (_, sleep) in &mut sleeps {
        assert_pending!(sleep.poll());
    }
    time::advance(ms(300_000)).await;
    for (delay, sleep) in &mut sleeps {
        if *delay <= 300_000 {
            assert!(sleep.is_woken(), "{delay} ms sleep not woken");
            assert_ready!(sleep.poll());
        } else {
            assert!(!sleep.is_woken());
            assert_pending!(sleep.poll());
        }
    }
}

#[tokio::test(start_paused = true)]
async fn auto_advance_jumps_to_the_next_due_timer() {
    let now = Instant::now();
    sleep(Duration::from_secs(3600)).await;
    assert_elapsed!(now, 3_600_000);
}

#[tokio::test(start_paused = true)]
async fn reset_later_before_fire_does_not_wake_early() {
    let now = Instant::now();
    let mut sleep = task::spawn(sleep_until(now + ms(100)));
    assert_pending!(sleep.poll());
    sleep.enter(|_, sleep| sleep.reset(now + ms(200)));

    time::advance(ms(150)).await;
    assert!(!sleep.is_woken(), "the old deadline must not wake the task");
    assert_pending!(sleep.poll());

    time::advance(ms(50)).await;
    assert!(sleep.is_woken());
    assert_ready!(sleep.poll());
    assert_eq!(sleep.deadline(), now + ms(200));
}

#[tokio::test(start_paused = true)]
async fn reset_earlier_before_fire() {
    let now = Instant::now();
    let mut sleep = task::spawn(sleep_until(now + ms(5_000)));
    assert_pending!(sleep.poll());
    sleep.enter(|_, sleep| sleep.reset(now + ms(10)));
    time::advance(ms(10)).await;
    assert!(sleep.is_woken());
    assert_ready!(sleep.poll());
}

#[tokio::test(start_paused = true)]
async fn reset_to_the_past_is_ready_at_once() {
    let now = Instant::now();
    let mut sleep = task::spawn(sleep_until(now + ms(100)));
    assert_pending!(sleep.poll());
    time::advance(ms(10)).await;
    sleep.enter(|_, sleep| sleep.reset(now));
    assert_ready!(sleep.poll());
}

#[tokio::test(start_paused = true)]
async fn reset_after_fire_sleeps_again() {
    let now = Instant::now();
    let mut sleep = task::spawn(sleep_until(now + ms(10)));
    assert_pending!(sleep.poll());
    time::advance(ms(10)).await;
    assert_ready!(sleep.poll());

    sleep.enter(|_, sleep| sleep.reset(now + ms(30)));
    assert!(!sleep.is_elapsed());
    assert_pending!(sleep.poll());
    time::advance(ms(19)).await;
    assert!(!sleep.is_woken());
    time::advance(ms(1)).await;
    assert!(sleep.is_woken());
    assert_ready!(sleep.poll());
}

#[tokio::test(start_paused = true)]
async fn reset_fired_but_unobserved_sleep_wakes_again() {
    // The entry fires (waking its task), the owner never sees it, then
    // resets: the new deadline must wake the same task again.
    let now = Instant::now();
    let mut sleep = task::spawn(sleep_until(now + ms(10)));
    assert_pending!(sleep.poll());
    time::advance(ms(10)).await;
    assert!(sleep.is_woken());
    sleep.enter(|_, sleep| sleep.reset(now + ms(40)));
    time::advance(ms(30)).await;
    assert!(
        sleep.is_woken(),
        "reset after an unobserved fire lost its waker"
    );
    assert_ready!(sleep.poll());
}

#[tokio::test(start_paused = true)]
async fn reset_unpolled_sleep() {
    let now = Instant::now();
    let mut sleep = Box::pin(sleep_until(now + ms(10)));
    sleep.as_mut().reset(now + ms(20));
    sleep.await;
    assert_elapsed!(now, 20);
}

#[tokio::test(start_paused = true)]
async fn many_resets_later_then_fire_once() {
    let now = Instant::now();
    let mut sleep = task::spawn(sleep_until(now + ms(10)));
    assert_pending!(sleep.poll());
    for i in 1..=50 {
        time::advance(ms(5)).await;
        assert!(!sleep.is_woken(), "woken at reset {i}");
        sleep.enter(|_, sleep| sleep.reset(Instant::now() + ms(10)));
        assert_pending!(sleep.poll());
    }
    time::advance(ms(10)).await;
    assert!(sleep.is_woken());
    assert_ready!(sleep.poll());
    assert_elapsed!(now, 260);
}

/// As with tokio: `Duration::MAX` is clamped to 30 years from now, and
/// fires there (not before), so paused time reaches it.
#[tokio::test(start_paused = true)]
async fn duration_max_fires_at_the_clamped_deadline() {
    let start = Instant::now();
    let thirty_years = Duration::from_secs(86_400 * 365 * 30);
    let mut sleep = task::spawn(sleep(Duration::MAX));
    assert_eq!(sleep.deadline(), start + thirty_years);
    assert_eq!(sleep.deadline(), time::sleep(Duration::MAX).deadline());
    assert_pending!(sleep.poll());
    time::advance(thirty_years - ms(1)).await;
    assert!(!sleep.is_woken());
    assert_pending!(sleep.poll());
    time::advance(ms(1)).await;
    assert!(sleep.is_woken());
    assert_ready!(sleep.poll());
    assert_elapsed!(start, thirty_years.as_millis() as u64);
}

#[tokio::test(start_paused = true)]
async fn far_future_instant_is_accepted() {
    let now = Instant::now();
    let far = now + Duration::from_secs(86_400 * 365 * 1_000);
    let mut sleep = task::spawn(sleep_until(far));
    assert_pending!(sleep.poll());
    time::advance(Duration::from_secs(86_400 * 365 * 999)).await;
    assert_pending!(sleep.poll());
    time::advance(far - Instant::now()).await;
    assert!(sleep.is_woken());
    assert_ready!(sleep.poll());
}

#[tokio::test(start_paused = true)]
async fn dropping_unpolled_sleep_touches_nothing() {
    let handle = Handle::current();
    let sleep = sleep(ms(10));
    assert_eq!(handle.pending(), 0);
    drop(sleep);
    assert_eq!(handle.pending(), 0);
}

#[tokio::test(start_paused = true)]
async fn drop_cancels_and_pending_follows() {
    let handle = Handle::current();
    let mut sleeps: Vec<Sleep> = (1..=100).map(|i| sleep(ms(i))).collect();
    for sleep in &mut sleeps {
        assert!(poll_once(sleep).is_pending());
    }
    assert_eq!(handle.pending(), 100);
    sleeps.truncate(40);
    assert_eq!(handle.pending(), 40);
    time::advance(ms(20)).await;
    assert_eq!(handle.pending(), 20, "20 fired, 20 left");
    drop(sleeps);
    assert_eq!(handle.pending(), 0);
}

#[tokio::test(start_paused = true)]
async fn sleep_is_unpin_and_usable_in_select_loops() {
    fn assert_unpin<T: Unpin + Send + Sync>(_: &T) {}
    let mut sleep = sleep(ms(50));
    assert_unpin(&sleep);
    let mut ticks = 0;
    loop {
        tokio::select! {
            biased;
            _ = &mut sleep => break,
            _ = time::sleep(ms(10)) => ticks += 1,
        }
    }
    assert_eq!(ticks, 4, "tokio's 10 ms sleeps at 10..40 ms, ours at 50 ms");
}

#[tokio::test(start_paused = true)]
async fn ten_thousand_simultaneous_sleeps_all_wake() {
    let deadline = Instant::now() + ms(1_000);
    let tasks: Vec<_> = (0..10_000)
        .map(|_| {
            tokio::spawn(async move {
                sleep_until(deadline).await;
                Instant::now()
            })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.unwrap(), deadline);
    }
}

/// Counts its wakes.
struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// `n` sleeps until `deadline`, registered (polled once) with one waker
/// that counts its wakes.
async fn registered_sleeps(n: usize, deadline: Instant) -> (Arc<CountingWaker>, Vec<Sleep>) {
    let counter = Arc::new(CountingWaker(AtomicUsize::new(0)));
    let waker = Waker::from(counter.clone());
    let mut sleeps: Vec<Sleep> = (0..n).map(|_| sleep_until(deadline)).collect();
    // Unconstrained: so many polls in one turn would exhaust tokio's budget.
    tokio::task::unconstrained(async {
        for sleep in &mut sleeps {
            assert!(Pin::new(sleep)
                .poll(&mut Context::from_waker(&waker))
                .is_pending());
        }
    })
    .await;
    (counter, sleeps)
}

#[tokio::test(start_paused = true)]
async fn a_large_flush_yields_to_other_tasks_between_batches() {
    const SLEEPS: usize = 5_000;
    let deadline = Instant::now() + ms(10);
    let (counter, sleeps) = registered_sleeps(SLEEPS, deadline).await;
    // A task that runs whenever the scheduler lets it, noting progress.
    let seen = {
        let counter = counter.clone();
        tokio::spawn(async move {
            let mut seen = Vec::new();
            loop {
                let woken = counter.0.load(Ordering::SeqCst);
                seen.push(woken);
                if woken == SLEEPS {
                    return seen;
                }
                tokio::task::yield_now().await;
            }
        })
    };
    time::advance(ms(10)).await;
    let seen = seen.await.unwrap();
    assert!(
        seen.iter().any(|&woken| 0 < woken && woken < SLEEPS),
        "another task never ran while {SLEEPS} sleeps were flushed: {seen:?}"
    );
    assert!(sleeps.iter().all(Sleep::is_elapsed));
    tokio::task::yield_now().await;
    assert_eq!(
        counter.0.load(Ordering::SeqCst),
        SLEEPS,
        "each sleep woken exactly once"
    );
}

/// Regression (issue 18, the cascade storm): a sleep due a tick after
/// thousands of others used to wait until the driver had handed out every
/// one of them, batch after batch, with other tasks run in between; now
/// what came due meanwhile goes ahead at the next batch.
#[tokio::test(start_paused = true)]
async fn a_sleep_due_during_a_large_flush_is_not_held_behind_it() {
    const SLEEPS: usize = 5_000;
    let deadline = Instant::now() + ms(10);
    let (counter, sleeps) = registered_sleeps(SLEEPS, deadline).await;
    // Notes how many of the others had been woken when it ran.
    let later = {
        let counter = counter.clone();
        tokio::spawn(async move {
            sleep_until(deadline + ms(1)).await;
            counter.0.load(Ordering::SeqCst)
        })
    };
    tokio::task::yield_now().await;
    time::advance(ms(11)).await;
    let woken_before = later.await.unwrap();
    // The first batch (1 024, inside `advance`) was under way before it
    // came due; it goes first in the next one, whose wakes all happen in
    // one turn of the driver task, before its own task runs.
    assert!(
        woken_before <= 2 * 1024,
        "the later sleep waited behind {woken_before} of {SLEEPS} earlier ones"
    );
    while counter.0.load(Ordering::SeqCst) < SLEEPS {
        tokio::task::yield_now().await;
    }
    assert!(sleeps.iter().all(Sleep::is_elapsed));
    tokio::task::yield_now().await;
    assert_eq!(counter.0.load(Ordering::SeqCst), SLEEPS, "each woken once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_thread_real_time_never_early() {
    let tasks: Vec<_> = (0..200u64)
        .map(|i| {
            tokio::spawn(async move {
                let delay = ms(i % 25);
                let start = Instant::now();
                sleep(delay).await;
                (delay, start.elapsed())
            })
        })
        .collect();
    for task in tasks {
        let (delay, elapsed) = task.await.unwrap();
        assert!(elapsed >= delay, "slept {elapsed:?}, asked {delay:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_thread_reset_from_another_task() {
    let mut sleep = sleep(Duration::from_secs(3600));
    let start = Instant::now();
    std::pin::Pin::new(&mut sleep).reset(start + ms(20));
    tokio::spawn(sleep).await.unwrap();
    assert!(start.elapsed() >= ms(20));
}

#[test]
#[should_panic(expected = "must be called from the context of a Tokio 1.x runtime")]
fn sleep_outside_runtime_panics() {
    drop(sleep(ms(1)));
}

/// Regression: after the driver re-filed a lazily extended entry under its
/// new deadline, a reset to a deadline between the original and the new one
/// took the lock-free path and fired late, at the re-filed deadline.
#[tokio::test(start_paused = true)]
async fn reset_back_after_lazy_refile_fires_on_time() {
    let now = Instant::now();
    let mut sleep = task::spawn(sleep_until(now + ms(100)));
    assert_pending!(sleep.poll());
    sleep.enter(|_, sleep| sleep.reset(now + ms(200)));
    // At 100 the driver finds the entry wants 200 and files it there.
    time::advance(ms(100)).await;
    assert_pending!(sleep.poll());
    sleep.enter(|_, sleep| sleep.reset(now + ms(150)));
    time::advance(ms(50)).await;
    assert!(
        sleep.is_woken(),
        "fired late: the entry was still filed at 200"
    );
    assert_ready!(sleep.poll());
}

/// Regression (found by `tests/model.rs`): after time moved with nothing
/// armed, a reset to the past was filed instead of completing, because the
/// registration trusted the driver's (stale) schedule over the clock.
#[tokio::test(start_paused = true)]
async fn reset_to_now_while_the_driver_lags_is_ready_at_once() {
    let _timer_starts_now = Handle::current();
    tokio::task::yield_now().await; // its driver runs once, then idles
    time::advance(ms(32_896)).await;
    let mut sleep = task::spawn(sleep(ms(1)));
    assert_pending!(sleep.poll());
    // The driver has been woken for the new entry but has not run yet.
    sleep.enter(|_, sleep| sleep.reset(Instant::now()));
    assert_ready!(sleep.poll());
}

/// A pending sleep is most of a timer's memory: keep it to 48 bytes,
/// against tokio's 112.
#[test]
fn sleep_fits_in_48_bytes() {
    assert!(
        std::mem::size_of::<tiered_timer::Sleep>() <= 48,
        "Sleep grew to {} bytes",
        std::mem::size_of::<tiered_timer::Sleep>()
    );
}

// ----- Scenarios of tokio's own tests/time_sleep.rs ----------------------------

/// tokio's `long_sleeps`: ten years under paused time, on time to the ms.
#[tokio::test]
async fn long_sleeps() {
    time::pause();
    let deadline = Instant::now() + Duration::from_secs(10 * 365 * 24 * 3600);
    sleep_until(deadline).await;
    assert!(Instant::now() >= deadline);
    assert!(Instant::now() <= deadline + ms(1));
}

/// tokio's `multi_long_sleeps`: a year at a time, then ten.
#[tokio::test]
async fn multi_long_sleeps() {
    time::pause();
    for _ in 0..5u32 {
        sleep(Duration::from_secs(365 * 24 * 3600)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(10 * 365 * 24 * 3600);
    sleep_until(deadline).await;
    assert!(Instant::now() >= deadline);
}

/// tokio's `greater_than_max`: five years, past tokio's old 2.2-year limit.
#[tokio::test]
async fn greater_than_max() {
    time::pause();
    sleep_until(Instant::now() + ms(5 * 365 * 24 * 60 * 60 * 1000)).await;
}

/// tokio's `short_sleeps`: a thousand zero sleeps.
#[tokio::test]
async fn short_sleeps() {
    for _ in 0..1000 {
        sleep(Duration::ZERO).await;
    }
}

/// tokio's `issue_5183`: a huge sleep loses a biased select to a 1 ns one.
#[tokio::test]
async fn issue_5183() {
    time::pause();
    let big = Duration::from_secs(u64::MAX / 10);
    tokio::select! {
        biased;
        _ = sleep(big) => panic!("the huge sleep completed first"),
        _ = sleep(Duration::from_nanos(1)) => {}
    }
}

/// tokio's `exactly_max` and `no_out_of_bounds_close_to_max`.
#[tokio::test]
async fn exactly_max_and_close_to_it() {
    time::pause();
    sleep(Duration::MAX).await;
    sleep(Duration::MAX - ms(1)).await;
}

/// tokio's `reset_after_firing`: a fired sleep stays ready, and a reset
/// moves its deadline and makes it pending again.
#[tokio::test]
async fn reset_after_firing() {
    let mut timer = Box::pin(sleep(ms(1)));
    let deadline = timer.deadline();
    timer.as_mut().await;
    assert!(poll_once(&mut timer).is_ready());
    timer
        .as_mut()
        .reset(Instant::now() + Duration::from_secs(600));
    assert_ne!(deadline, timer.deadline());
    assert!(poll_once(&mut timer).is_pending());
    assert!(poll_once(&mut timer).is_pending());
}

// ----- Side by side with tokio's own Sleep -----------------------------------

/// Random sleeps, resets (later, earlier, into the past, after firing),
/// drops and advances, applied to our sleeps and to tokio's on the same
/// paused clock. After every step each pair must agree on `poll`,
/// `is_elapsed` and `deadline`. (Deadlines fall on whole milliseconds, so
/// tokio's 1 ms grid and our 250 µs ticks name the same instants.)
#[tokio::test(start_paused = true)]
async fn sleeps_behave_like_tokios_sleeps() {
    for seed in [0x9e37_79b9_7f4a_7c15_u64, 0xdead_beef_cafe_f00d, 7] {
        tokio::task::unconstrained(side_by_side(seed)).await;
    }
}

/// One of our sleeps and tokio's, created and reset alike.
type Pair = (task::Spawn<Sleep>, task::Spawn<Pin<Box<time::Sleep>>>);

async fn side_by_side(mut seed: u64) {
    let mut next = move |bound: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % bound
    };
    let mut pairs: Vec<Pair> = Vec::new();
    for step in 0..300 {
        let op = next(10);
        match op {
            0..=2 => {
                // Duration::MAX: both clamp it to now + 30 years.
                let d = if next(10) == 0 {
                    Duration::MAX
                } else {
                    ms(next(300))
                };
                pairs.push((task::spawn(sleep(d)), task::spawn(Box::pin(time::sleep(d)))));
            }
            3..=4 if !pairs.is_empty() => {
                let i = next(pairs.len() as u64) as usize;
                let now = Instant::now();
                let at = match next(3) {
                    0 => now.checked_sub(ms(next(50))).unwrap_or(now),
                    _ => now + ms(next(300)),
                };
                let (ours, theirs) = &mut pairs[i];
                ours.enter(|_, s| s.reset(at));
                theirs.enter(|_, s| s.get_mut().as_mut().reset(at));
            }
            5 if !pairs.is_empty() => {
                let i = next(pairs.len() as u64) as usize;
                drop(pairs.swap_remove(i));
            }
            _ => time::advance(ms(next(120))).await,
        }
        for (n, (ours, theirs)) in pairs.iter_mut().enumerate() {
            assert_eq!(ours.deadline(), theirs.deadline(), "step {step}, sleep {n}");
            let ours_ready = ours.poll().is_ready();
            let theirs_ready = theirs.poll().is_ready();
            assert_eq!(
                ours_ready, theirs_ready,
                "step {step}, sleep {n}: ready, ours vs tokio's"
            );
            assert_eq!(
                ours.is_elapsed(),
                theirs.is_elapsed(),
                "step {step}, sleep {n}: is_elapsed, ours vs tokio's"
            );
        }
    }
}
