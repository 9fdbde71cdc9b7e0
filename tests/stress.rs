//! Stress tests for the async layer: real time, multi-thread runtimes, many
//! tasks, and the races between registering, resetting, cancelling and
//! firing.
//!
//! Every test is deterministic in what it asks for (a seeded xorshift, not an
//! external crate; set `STRESS_SEED` to try other seeds) though not in how
//! the threads interleave. No test asserts on wall-clock time except "never
//! early": a sleep or timeout completes no sooner than its deadline. Each runs
//! under a watchdog thread, so a deadlock or a livelock holding the timer lock
//! fails the test instead of hanging it.

mod support;

use std::future::{poll_fn, Future};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use support::{ms, panic_message};
use tiered_timer::{Handle, Instant, Sleep, Timer};
use tokio::runtime::Runtime;
use tokio::sync::oneshot;
use tokio::task::{yield_now, JoinHandle};

/// How long a test may run before the watchdog calls it hung. Each test takes
/// well under a second or two when healthy.
const HANG: Duration = Duration::from_secs(20);
/// How long an awaited sleep may take past its deadline before it counts as
/// lost. Generous: only a wakeup that never comes should trip it.
const LOST: Duration = Duration::from_secs(5);

fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

/// A xorshift64 generator, seeded through splitmix64.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng((z ^ (z >> 31)) | 1)
    }

    /// The generator for stream `stream` of this test run.
    fn stream(stream: u64) -> Rng {
        let base = std::env::var("STRESS_SEED")
            .ok()
            .and_then(|seed| seed.parse().ok())
            .unwrap_or(0x0071_53ED);
        Rng::new(base ^ stream.wrapping_mul(0x2545_F491_4F6C_DD1D))
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }
}

fn multi_thread() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn current_thread() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Runs `body` on its own thread and fails if it has not finished within
/// `HANG`. A hung body is leaked (dropping its runtime or timer could block
/// on the very lock that is stuck).
fn watchdog<T: Send + 'static>(name: &str, body: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let thread = std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            let _ = tx.send(body());
        })
        .unwrap();
    match rx.recv_timeout(HANG) {
        Ok(value) => {
            thread.join().unwrap();
            value
        }
        Err(RecvTimeoutError::Disconnected) => match thread.join() {
            Err(panic) => resume_unwind(panic),
            Ok(()) => unreachable!("the body returned without sending"),
        },
        Err(RecvTimeoutError::Timeout) => {
            panic!("{name}: still running after {HANG:?}: deadlock, livelock or lost wakeup")
        }
    }
}

/// Polls `future` once with the current task's context.
async fn poll_once<F: Future + Unpin>(future: &mut F) -> Poll<F::Output> {
    poll_fn(|cx| Poll::Ready(Pin::new(&mut *future).poll(cx))).await
}

/// Polls `sleep` once with a waker that does nothing.
fn poll_noop(sleep: &mut Sleep) -> Poll<()> {
    Pin::new(sleep).poll(&mut Context::from_waker(Waker::noop()))
}

/// Yields until the clock reads `at` or later.
async fn yield_until(at: Instant) {
    while Instant::now() < at {
        yield_now().await;
    }
}

/// `deadline` moved by a signed number of microseconds.
fn shifted(deadline: Instant, offset_us: i64) -> Instant {
    if offset_us >= 0 {
        deadline + us(offset_us.unsigned_abs())
    } else {
        deadline
            .checked_sub(us(offset_us.unsigned_abs()))
            .unwrap_or(deadline)
    }
}

/// Awaits `sleep` to completion and checks it completed no earlier than the
/// deadline it had then, and within `LOST` of it.
async fn await_never_early(sleep: &mut Sleep, what: &str) {
    let deadline = sleep.deadline();
    let patience = deadline.max(Instant::now()) + LOST;
    if tokio::time::timeout_at(patience, &mut *sleep)
        .await
        .is_err()
    {
        panic!("{what}: lost wakeup: deadline {deadline:?} passed {LOST:?} ago");
    }
    let now = Instant::now();
    assert!(
        now >= deadline,
        "{what}: completed {:?} early",
        deadline - now
    );
    assert!(sleep.is_elapsed(), "{what}: complete but not is_elapsed");
}

/// Joins a task that must have finished or been cancelled, never panicked.
async fn join_quietly<T>(task: JoinHandle<T>) {
    if let Err(error) = task.await {
        if error.is_panic() {
            resume_unwind(error.into_panic());
        }
    }
}

/// One task's worth of random work on `handle`: sleeps, resets in every
/// direction, timeouts racing a sender, sleeps dropped mid-flight, sleeps
/// handed to another task, never-ending sleeps brought back, intervals.
/// Durations are multiples of `unit`, up to about 20 units.
async fn mixed_work(handle: Handle, mut rng: Rng, ops: usize, unit: Duration, name: String) {
    let units = |rng: &mut Rng, max: u64| unit * rng.below(max) as u32;
    for op in 0..ops {
        let what = format!("{name} op {op}");
        match rng.below(8) {
            // A plain sleep, by duration or by deadline.
            0 => {
                let mut sleep = if rng.one_in(2) {
                    handle.sleep(units(&mut rng, 20))
                } else {
                    handle.sleep_until(Instant::now() + units(&mut rng, 20))
                };
                await_never_early(&mut sleep, &what).await;
            }
            // Reset later, earlier and into the past, from the same task.
            1 | 2 => {
                let mut sleep = handle.sleep(units(&mut rng, 20));
                let _ = poll_once(&mut sleep).await;
                for _ in 0..1 + rng.below(5) {
                    match rng.below(4) {
                        0 => yield_now().await,
                        1 => handle.sleep(units(&mut rng, 3)).await,
                        _ => {}
                    }
                    let now = Instant::now();
                    let target = match rng.below(4) {
                        // Later than wanted: the lock-free path.
                        0 | 1 => sleep.deadline().max(now) + units(&mut rng, 15),
                        // Earlier than wanted, still ahead.
                        2 => now + (sleep.deadline().max(now) - now) / 2,
                        // Already passed.
                        _ => now.checked_sub(units(&mut rng, 5)).unwrap_or(now),
                    };
                    Pin::new(&mut sleep).reset(target);
                    if rng.one_in(2) {
                        let _ = poll_once(&mut sleep).await;
                    }
                }
                await_never_early(&mut sleep, &what).await;
                if rng.one_in(3) {
                    // Reset after completing: files it again.
                    Pin::new(&mut sleep).reset(Instant::now() + units(&mut rng, 5));
                    await_never_early(&mut sleep, &what).await;
                }
            }
            // A timeout around a oneshot that another task completes (or
            // abandons) at a random moment, racing the deadline.
            3 => {
                let (tx, rx) = oneshot::channel::<usize>();
                let deadline = Instant::now() + units(&mut rng, 20);
                let delay = unit * 20 * rng.below(1000) as u32 / 1000;
                let abandon = rng.one_in(8);
                let sent = Arc::new(AtomicBool::new(false));
                let sender = tokio::spawn({
                    let sent = sent.clone();
                    async move {
                        tokio::time::sleep(delay).await;
                        if !abandon {
                            sent.store(true, Ordering::SeqCst);
                            let _ = tx.send(op);
                        }
                    }
                });
                match handle.timeout_at(deadline, rx).await {
                    Ok(Ok(value)) => {
                        assert_eq!(value, op, "{what}: wrong value");
                        assert!(sent.load(Ordering::SeqCst), "{what}: Ok before send");
                    }
                    Ok(Err(_)) => assert!(abandon, "{what}: sender vanished"),
                    Err(_) => {
                        let now = Instant::now();
                        assert!(
                            now >= deadline,
                            "{what}: timed out {:?} early",
                            deadline - now
                        );
                    }
                }
                sender.await.unwrap();
            }
            // Dropped mid-flight: after a poll, losing a select!, or with
            // its task aborted from another one.
            4 => match rng.below(3) {
                0 => {
                    let mut sleep = handle.sleep(units(&mut rng, 20));
                    let _ = poll_once(&mut sleep).await;
                    if rng.one_in(2) {
                        handle.sleep(units(&mut rng, 10)).await;
                    }
                    drop(sleep);
                }
                1 => {
                    let mut a = handle.sleep(units(&mut rng, 20));
                    let mut b = handle.sleep(units(&mut rng, 20));
                    let (a_deadline, b_deadline) = (a.deadline(), b.deadline());
                    tokio::select! {
                        () = &mut a => assert!(Instant::now() >= a_deadline, "{what}: a early"),
                        () = &mut b => assert!(Instant::now() >= b_deadline, "{what}: b early"),
                    }
                }
                _ => {
                    let sleep = handle.sleep(units(&mut rng, 20));
                    let deadline = sleep.deadline();
                    let task = tokio::spawn(async move {
                        sleep.await;
                        assert!(Instant::now() >= deadline, "aborted sleep fired early");
                    });
                    tokio::time::sleep(units(&mut rng, 20)).await;
                    task.abort();
                    join_quietly(task).await;
                }
            },
            // Registered here, awaited by another task (a new waker).
            5 => {
                let mut sleep = handle.sleep(units(&mut rng, 20));
                let _ = poll_once(&mut sleep).await;
                let what = what.clone();
                tokio::spawn(async move { await_never_early(&mut sleep, &what).await })
                    .await
                    .unwrap();
            }
            // A sleep that never completes, brought back to a real deadline.
            6 => {
                let mut sleep = handle.sleep(Duration::MAX);
                assert!(poll_once(&mut sleep).await.is_pending());
                if rng.one_in(2) {
                    Pin::new(&mut sleep).reset(Instant::now() + Duration::from_secs(3600));
                    let _ = poll_once(&mut sleep).await;
                }
                Pin::new(&mut sleep).reset(Instant::now() + units(&mut rng, 10));
                await_never_early(&mut sleep, &what).await;
            }
            // An interval: no tick before its instant.
            _ => {
                let period = unit * (1 + rng.below(5)) as u32;
                let mut interval = handle.interval(period);
                for _ in 0..3 {
                    let at = interval.tick().await;
                    assert!(Instant::now() >= at, "{what}: interval ticked early");
                }
            }
        }
    }
}

/// Runs `tasks` tasks of `mixed_work` on `handle` and checks that nothing is
/// left registered.
async fn mixed_load(handle: Handle, tasks: u64, ops: usize, unit: Duration, stream: u64) {
    let workers: Vec<_> = (0..tasks)
        .map(|task| {
            let rng = Rng::stream(stream << 32 | task);
            let name = format!("task {task}");
            tokio::spawn(mixed_work(handle.clone(), rng, ops, unit, name))
        })
        .collect();
    for worker in workers {
        worker.await.unwrap();
    }
    assert_eq!(handle.pending(), 0, "registrations leaked");
}

/// 1. Thousands of tasks doing a random mix of everything, on the default
///    timer of a two-worker runtime.
#[test]
fn mixed_load_on_the_default_timer() {
    watchdog("mixed_load_on_the_default_timer", || {
        multi_thread().block_on(async {
            mixed_load(Handle::current(), 2_000, 4, ms(1), 1).await;
        });
    });
}

/// 2. Sleeps cancelled at about the moment they fire: their tasks aborted
///    from another task, or the sleeps themselves dropped on another worker.
#[test]
fn cancel_racing_fire() {
    watchdog("cancel_racing_fire", || {
        multi_thread().block_on(async {
            let handle = Handle::current();
            let mut rng = Rng::stream(2);
            for round in 0..300 {
                let deadline = Instant::now() + ms(1);
                let awaiting: Vec<JoinHandle<()>> = (0..8)
                    .map(|_| {
                        let sleep = handle.sleep_until(deadline);
                        tokio::spawn(async move {
                            sleep.await;
                            assert!(Instant::now() >= deadline, "round {round}: early");
                        })
                    })
                    .collect();
                let mut polled: Vec<Sleep> = (0..8).map(|_| handle.sleep_until(deadline)).collect();
                for (i, sleep) in polled.iter_mut().enumerate() {
                    if i % 2 == 0 {
                        let _ = poll_noop(sleep);
                    } else {
                        let _ = poll_once(sleep).await;
                    }
                }
                let drop_at = shifted(deadline, rng.below(600) as i64 - 300);
                let dropper = tokio::spawn(async move {
                    yield_until(drop_at).await;
                    drop(polled);
                });
                yield_until(shifted(deadline, rng.below(600) as i64 - 300)).await;
                for task in &awaiting {
                    task.abort();
                }
                for task in awaiting {
                    join_quietly(task).await;
                }
                dropper.await.unwrap();
            }
            assert_eq!(handle.pending(), 0, "cancelled registrations leaked");
        });
    });
}

/// 3. A task resets its own sleep to later (the lock-free path) right around
///    the moment the old deadline fires. The sleep must complete once, never
///    before the latest deadline, and never be lost.
#[test]
fn reset_racing_fire() {
    watchdog("reset_racing_fire", || {
        multi_thread().block_on(async {
            let handle = Handle::current();
            let tasks: Vec<_> = (0..8)
                .map(|task| {
                    let handle = handle.clone();
                    let mut rng = Rng::stream(3 << 32 | task);
                    tokio::spawn(async move {
                        for round in 0..150 {
                            let what = format!("task {task} round {round}");
                            let first = Instant::now() + ms(1);
                            let mut sleep = handle.sleep_until(first);
                            let _ = poll_once(&mut sleep).await;
                            yield_until(shifted(first, rng.below(800) as i64 - 400)).await;
                            for _ in 0..1 + rng.below(3) {
                                let later = (Instant::now() + us(200 + rng.below(1500)))
                                    .max(sleep.deadline());
                                Pin::new(&mut sleep).reset(later);
                                // Never complete before the deadline just set.
                                let elapsed = sleep.is_elapsed();
                                let now = Instant::now();
                                assert!(!elapsed || now >= later, "{what}: elapsed early");
                                if rng.one_in(2) {
                                    yield_now().await;
                                }
                            }
                            await_never_early(&mut sleep, &what).await;
                            // Complete stays complete (outside the coop budget,
                            // which could otherwise say Pending).
                            let mut again = tokio::task::unconstrained(&mut sleep);
                            assert!(poll_once(&mut again).await.is_ready(), "{what}");
                        }
                    })
                })
                .collect();
            for task in tasks {
                task.await.unwrap();
            }
            assert_eq!(handle.pending(), 0);
        });
    });
}

/// 3b. A reset back to an earlier deadline after the driver re-filed a
///     lock-free extension (the driver met the entry at its first deadline
///     and filed it again at the extended one) must take effect: it used to
///     fire only at the extended deadline, here an hour away.
#[test]
fn reset_back_after_a_lazy_refile_is_not_lost() {
    watchdog("reset_back_after_a_lazy_refile_is_not_lost", || {
        multi_thread().block_on(async {
            let handle = Handle::current();
            let tasks: Vec<_> = (0..4)
                .map(|task| {
                    let handle = handle.clone();
                    let mut rng = Rng::stream(4 << 32 | task);
                    tokio::spawn(async move {
                        for round in 0..40 {
                            let what = format!("task {task} round {round}");
                            let first = Instant::now() + ms(1);
                            let mut sleep = handle.sleep_until(first);
                            let _ = poll_once(&mut sleep).await;
                            Pin::new(&mut sleep).reset(first + Duration::from_secs(3600));
                            // Past the first deadline: the driver has met the
                            // entry there and re-filed it an hour on.
                            tokio::time::sleep_until(first + ms(1) + us(rng.below(1000))).await;
                            let back = Instant::now() + us(rng.below(2000));
                            Pin::new(&mut sleep).reset(back);
                            await_never_early(&mut sleep, &what).await;
                        }
                    })
                })
                .collect();
            for task in tasks {
                task.await.unwrap();
            }
            assert_eq!(handle.pending(), 0);
        });
    });
}

/// A waker that, when woken, first re-arms its sleep a few times from inside
/// `wake` (a reset after firing files it again, with this waker), then takes
/// the sleep out of its mutex and drops it, right there in `wake`; every
/// other one also drops its neighbour's sleep.
struct DropOnWake {
    own: Mutex<Option<Sleep>>,
    rearms: AtomicUsize,
    next: Option<Arc<DropOnWake>>,
    /// Whether wakes come from firing (not from a shutdown).
    fires: bool,
    counts: Arc<WakeCounts>,
}

#[derive(Default)]
struct WakeCounts {
    /// Sleeps taken out and dropped.
    dropped: AtomicUsize,
    /// Woken for a sleep that had not completed, or before its deadline.
    bad: AtomicUsize,
}

impl DropOnWake {
    fn take_and_drop(&self) {
        // The sleep is dropped while our mutex is still held.
        let mut own = self.own.lock().unwrap();
        if let Some(sleep) = own.take() {
            drop(sleep);
            self.counts.dropped.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn on_wake(&self) {
        let mut own = self.own.lock().unwrap();
        let Some(sleep) = own.as_mut() else {
            return; // a neighbour dropped it already
        };
        if self.fires && (!sleep.is_elapsed() || Instant::now() < sleep.deadline()) {
            self.counts.bad.fetch_add(1, Ordering::SeqCst);
        }
        let rearms = self.rearms.load(Ordering::SeqCst);
        if rearms > 0 {
            self.rearms.store(rearms - 1, Ordering::SeqCst);
            let to = Instant::now() + us(1000 + 500 * rearms as u64);
            Pin::new(&mut *sleep).reset(to);
            if !sleep.is_elapsed() {
                return; // it will wake us again
            }
        }
        drop(own);
        self.take_and_drop();
    }
}

impl Wake for DropOnWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.on_wake();
        if let Some(next) = &self.next {
            next.take_and_drop();
        }
    }
}

/// Registers `count` sleeps on `handle`, each held by its own `DropOnWake`
/// waker, with deadlines `deadline(i)` and `rearms(i)` re-arms; `fires` says
/// whether the wakes to expect are firings. Returns the wakers.
///
/// Call it through [`unconstrained`](tokio::task::unconstrained): each sleep
/// is polled with its waker's mutex held, and a sleep that finds tokio's
/// cooperative budget spent wakes its waker at once from inside `poll` (as
/// tokio's own sleep does), which would then wait for that same mutex.
fn drop_on_wake_sleeps(
    handle: &Handle,
    count: usize,
    deadline: impl Fn(usize) -> Instant,
    rearms: impl Fn(usize) -> usize,
    fires: bool,
    counts: &Arc<WakeCounts>,
) -> Vec<Arc<DropOnWake>> {
    let mut wakers: Vec<Arc<DropOnWake>> = Vec::with_capacity(count);
    for i in (0..count).rev() {
        let waker = Arc::new(DropOnWake {
            own: Mutex::new(Some(handle.sleep_until(deadline(i)))),
            rearms: AtomicUsize::new(rearms(i)),
            next: (i % 2 == 0).then(|| wakers.last().cloned()).flatten(),
            fires,
            counts: counts.clone(),
        });
        wakers.push(waker);
    }
    for waker in &wakers {
        let as_waker = Waker::from(waker.clone());
        let mut own = waker.own.lock().unwrap();
        let ready = own.as_mut().is_some_and(|sleep| {
            Pin::new(sleep)
                .poll(&mut Context::from_waker(&as_waker))
                .is_ready()
        });
        if ready {
            own.take();
            counts.dropped.fetch_add(1, Ordering::SeqCst);
        }
    }
    wakers
}

/// 4. Wakers that re-arm and then drop their own sleep (and a neighbour's)
///    inside `wake`: when the sleep fires, and when its timer shuts down.
fn wakers_drop_their_sleeps(runtime: Runtime, stream: u64) {
    runtime.block_on(async {
        let handle = Handle::current();
        let mut rng = Rng::stream(stream);
        for round in 0..20 {
            let counts = Arc::new(WakeCounts::default());
            let now = Instant::now();
            let offsets: Vec<u64> = (0..300).map(|_| rng.below(3000)).collect();
            let wakers = tokio::task::unconstrained(async {
                drop_on_wake_sleeps(
                    &handle,
                    300,
                    |i| now + us(offsets[i]),
                    |i| i % 3,
                    true,
                    &counts,
                )
            })
            .await;
            let patience = Instant::now() + LOST;
            while counts.dropped.load(Ordering::SeqCst) < wakers.len() {
                assert!(
                    Instant::now() < patience,
                    "round {round}: only {} of {} sleeps fired",
                    counts.dropped.load(Ordering::SeqCst),
                    wakers.len()
                );
                tokio::time::sleep(ms(1)).await;
            }
            assert_eq!(counts.bad.load(Ordering::SeqCst), 0, "round {round}");
            assert_eq!(handle.pending(), 0, "round {round}");
        }

        // Shutdown wakes every pending sleep: these drop theirs in the wake.
        let timer = Timer::new();
        let counts = Arc::new(WakeCounts::default());
        let far = Instant::now() + Duration::from_secs(3600);
        let wakers = tokio::task::unconstrained(async {
            drop_on_wake_sleeps(&timer.handle(), 300, |_| far, |_| 0, false, &counts)
        })
        .await;
        assert_eq!(timer.handle().pending(), 300);
        drop(timer.shutdown());
        assert_eq!(counts.dropped.load(Ordering::SeqCst), wakers.len());
    });
}

#[test]
fn wakers_drop_their_sleeps_current_thread() {
    watchdog("wakers_drop_their_sleeps_current_thread", || {
        wakers_drop_their_sleeps(current_thread(), 5);
    });
}

#[test]
fn wakers_drop_their_sleeps_multi_thread() {
    watchdog("wakers_drop_their_sleeps_multi_thread", || {
        wakers_drop_their_sleeps(multi_thread(), 6);
    });
}

/// 5a. The mixed load on an explicit coarse timer with tiny wheels: 10 ms
///     ticks and 4 slots, so most deadlines go through overflow levels and
///     come back down.
#[test]
fn mixed_load_on_a_coarse_explicit_timer() {
    watchdog("mixed_load_on_a_coarse_explicit_timer", || {
        multi_thread().block_on(async {
            let timer = Timer::builder().tick(ms(10)).wheel_size(4).build();
            mixed_load(timer.handle(), 500, 3, ms(5), 7).await;
        });
    });
}

/// 5b. Many expiries at one instant, more than one flush batch, while other
///     tasks keep registering and cancelling.
#[test]
fn thousands_of_simultaneous_expiries() {
    watchdog("thousands_of_simultaneous_expiries", || {
        multi_thread().block_on(async {
            let handle = Handle::current();
            let deadline = Instant::now() + ms(50);
            let stop = Arc::new(AtomicBool::new(false));
            let churn: Vec<_> = (0..2)
                .map(|task| {
                    let handle = handle.clone();
                    let stop = stop.clone();
                    let mut rng = Rng::stream(8 << 32 | task);
                    tokio::spawn(async move {
                        while !stop.load(Ordering::SeqCst) {
                            let mut sleep = handle.sleep(us(rng.below(3000)));
                            let _ = poll_once(&mut sleep).await;
                            if rng.one_in(2) {
                                await_never_early(&mut sleep, "churn").await;
                            } else {
                                yield_now().await;
                            }
                        }
                    })
                })
                .collect();
            let sleepers: Vec<_> = (0..5_000)
                .map(|i| {
                    let mut sleep = handle.sleep_until(deadline);
                    tokio::spawn(async move {
                        await_never_early(&mut sleep, &format!("sleeper {i}")).await;
                    })
                })
                .collect();
            for sleeper in sleepers {
                sleeper.await.unwrap();
            }
            stop.store(true, Ordering::SeqCst);
            for task in churn {
                task.await.unwrap();
            }
            assert_eq!(handle.pending(), 0);
        });
    });
}

/// 5c. A `Timer` dropped while tasks and plain threads keep registering,
///     resetting and awaiting sleeps on it: each of them must panic saying
///     the timer shut down, none may hang.
#[test]
fn dropping_a_timer_under_load_panics_its_users() {
    watchdog("dropping_a_timer_under_load_panics_its_users", || {
        multi_thread().block_on(async {
            let timer = Timer::new();
            let handle = timer.handle();
            let tasks: Vec<JoinHandle<()>> = (0..6)
                .map(|task| {
                    let handle = handle.clone();
                    let mut rng = Rng::stream(9 << 32 | task);
                    tokio::spawn(async move {
                        loop {
                            match rng.below(5) {
                                0 => handle.sleep(us(rng.below(2000))).await,
                                1 => {
                                    let mut sleep = handle.sleep(ms(5));
                                    let _ = poll_once(&mut sleep).await;
                                    let to = Instant::now() + us(rng.below(2000));
                                    Pin::new(&mut sleep).reset(to);
                                    sleep.await;
                                }
                                2 => {
                                    let pending = std::future::pending::<()>();
                                    let _ = handle.timeout(us(rng.below(2000)), pending).await;
                                }
                                3 => {
                                    let mut sleep = handle.sleep(Duration::MAX);
                                    let _ = poll_once(&mut sleep).await;
                                    yield_now().await;
                                }
                                _ => {
                                    let mut interval = handle.interval(us(1 + rng.below(1000)));
                                    interval.tick().await;
                                    interval.tick().await;
                                }
                            }
                        }
                    })
                })
                .collect();
            let threads: Vec<_> = (0..2)
                .map(|thread| {
                    let handle = handle.clone();
                    let mut rng = Rng::stream(10 << 32 | thread);
                    std::thread::spawn(move || {
                        catch_unwind(AssertUnwindSafe(|| loop {
                            let mut sleep = handle.sleep(us(rng.below(3000)));
                            let _ = poll_noop(&mut sleep);
                            if rng.one_in(2) {
                                let to = Instant::now() + us(rng.below(3000));
                                Pin::new(&mut sleep).reset(to);
                                let _ = poll_noop(&mut sleep);
                            }
                            std::thread::yield_now();
                        }))
                        .unwrap_err()
                    })
                })
                .collect();
            tokio::time::sleep(ms(30)).await;
            drop(timer.shutdown());
            for task in tasks {
                let error = task.await.unwrap_err();
                assert!(error.is_panic(), "a task was cancelled, not panicked");
                let panic = error.into_panic();
                let message = panic_message(&*panic);
                assert!(message.contains("shut down"), "unexpected panic: {message}");
            }
            for thread in threads {
                let panic = thread.join().unwrap();
                let message = panic_message(&*panic);
                assert!(message.contains("shut down"), "unexpected panic: {message}");
            }
            assert_eq!(handle.pending(), 0);
        });
    });
}

/// A waker that takes a while: the flush that wakes it is then long enough
/// for another flush to interleave with it.
struct SlowWake;

impl Wake for SlowWake {
    fn wake(self: Arc<Self>) {
        std::thread::sleep(us(400));
    }
}

/// 5d. Two flushes with different clock readings interleaving their chunks.
///
/// Staged so that the driver task starts a flush at tick 29 (late: it was
/// woken into the LIFO slot of a worker that then stayed busy), wakes 32
/// slow wakers outside the lock, and meanwhile tokio fires the inline flush
/// for tick 30 on the other worker, which moves the wheel to 30 and leaves
/// entries due at 30 in its due list while it wakes its own chunk. The
/// driver's next chunk then meets entries due after its reading of 29: it
/// used to re-file them straight into the due list and spin forever with the
/// lock held. (If scheduling does not line up, the test passes vacuously.)
#[test]
fn interleaved_flushes_with_different_clock_readings() {
    watchdog("interleaved_flushes_with_different_clock_readings", || {
        let runtime = multi_thread();
        let (timer, origin) = runtime.block_on(async {
            let origin = Instant::now();
            (Timer::new(), origin)
        });
        let handle = timer.handle();
        let slow = Waker::from(Arc::new(SlowWake));
        let kept = runtime.block_on(async {
            // 100 ms of slack before the staged ticks (29 and 30 ms after
            // it): a loaded machine took more than 29 ms to get from
            // `origin` to the `earlier` registrations below, which then
            // found their deadline passed (seen at load average 9.5).
            let (at_29, at_30) = (origin + ms(129), origin + ms(130));
            let mut later: Vec<Sleep> = (0..100).map(|_| handle.sleep_until(at_30)).collect();
            for sleep in &mut later {
                assert!(Pin::new(sleep)
                    .poll(&mut Context::from_waker(&slow))
                    .is_pending());
            }
            // Let the driver arm for tick 30.
            tokio::time::sleep(ms(5)).await;
            let (handle, slow) = (handle.clone(), slow.clone());
            let earlier = tokio::spawn(async move {
                // The first registration wakes the driver into this worker's
                // LIFO slot, where no other worker can steal it.
                let mut earlier: Vec<Sleep> = (0..33).map(|_| handle.sleep_until(at_29)).collect();
                for sleep in &mut earlier {
                    assert!(Pin::new(sleep)
                        .poll(&mut Context::from_waker(&slow))
                        .is_pending());
                }
                while Instant::now() < at_29 + us(300) {
                    std::hint::spin_loop();
                }
                earlier
            })
            .await
            .unwrap();
            tokio::time::sleep(ms(100)).await;
            (later, earlier)
        });
        assert!(kept.0.iter().chain(&kept.1).all(Sleep::is_elapsed));
        assert_eq!(handle.pending(), 0);
    });
}
