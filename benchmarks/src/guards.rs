//! The guard workload's pieces: a deadline armed around a request that
//! finishes first, so that every guard is filed in its timer and then
//! cancelled, the common case of a request deadline. Shared by `compare`
//! (1a, 1b, 1c, 1f), `lock_quota` (`guard-tasks`, `guard-busy`) and the
//! criterion benches `guard` and `tower_timeout`.

use std::future::Future;
use std::hint::black_box;
use std::pin::{pin, Pin};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::timers::{boxed_sleep, sleep_until, Imp};

/// The request a guard is armed around: pending on its first poll, ready
/// (with its value) on the second. [`in_task`](PendingOnce::in_task) wakes
/// its task on the first poll, so it can run as one;
/// [`by_hand`](PendingOnce::by_hand) is for polling with a no-op waker.
///
/// # Examples
///
/// ```
/// use std::future::Future;
/// use std::pin::pin;
/// use std::task::{Context, Waker};
/// use tiered_timer_benchmarks::guards::PendingOnce;
///
/// let mut cx = Context::from_waker(Waker::noop());
/// let mut request = pin!(PendingOnce::by_hand());
/// assert!(request.as_mut().poll(&mut cx).is_pending());
/// assert!(request.as_mut().poll(&mut cx).is_ready());
/// ```
#[derive(Debug)]
pub struct PendingOnce<T = ()> {
    polled: bool,
    wake: bool,
    value: Option<T>,
}

impl PendingOnce {
    /// For polling by hand: does not wake on its first poll.
    pub fn by_hand() -> PendingOnce {
        PendingOnce {
            polled: false,
            wake: false,
            value: Some(()),
        }
    }

    /// For a task: wakes it on its first poll.
    pub fn in_task() -> PendingOnce {
        PendingOnce {
            wake: true,
            ..PendingOnce::by_hand()
        }
    }
}

impl<T> PendingOnce<T> {
    /// As [`in_task`](PendingOnce::in_task), ready with `value`.
    pub fn in_task_then(value: T) -> PendingOnce<T> {
        PendingOnce {
            polled: false,
            wake: true,
            value: Some(value),
        }
    }
}

impl<T: Unpin> Future for PendingOnce<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        if std::mem::replace(&mut self.polled, true) {
            Poll::Ready(self.value.take().expect("polled after it was ready"))
        } else {
            if self.wake {
                cx.waker().wake_by_ref();
            }
            Poll::Pending
        }
    }
}

/// `timeout` for the peers that have none (futures-timer, async-io): the
/// future first, then the delay, as tokio's `Timeout` does.
#[derive(Debug)]
pub struct Guard<F, D> {
    pub future: F,
    pub delay: D,
}

impl<F: Future + Unpin, D: Future + Unpin> Future for Guard<F, D> {
    type Output = Option<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Poll::Ready(v) = Pin::new(&mut self.future).poll(cx) {
            return Poll::Ready(Some(v));
        }
        match Pin::new(&mut self.delay).poll(cx) {
            Poll::Ready(_) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Arms and cancels `n` guards made by `make` on this thread, polling by
/// hand; ns per guard.
///
/// # Panics
///
/// If a guard is ready on its first poll or pending on its second.
pub fn guards_by_hand<G: Future>(make: impl Fn() -> G, n: u32) -> f64 {
    let mut cx = Context::from_waker(Waker::noop());
    let start = Instant::now();
    for _ in 0..n {
        let mut guard = pin!(make());
        assert!(guard.as_mut().poll(&mut cx).is_pending());
        assert!(black_box(guard.as_mut().poll(&mut cx).is_ready()));
    }
    start.elapsed().as_nanos() as f64 / f64::from(n)
}

/// `tasks` tasks on `rt`, each arming and cancelling `per_task` guards made
/// by `make` in turn (with [`PendingOnce::in_task`] inside, each guard's
/// task is woken once); wall-clock ns per guard.
///
/// # Panics
///
/// If a task panics.
pub fn guards_in_tasks<G>(
    make: impl Fn() -> G + Copy + Send + 'static,
    rt: &tokio::runtime::Runtime,
    tasks: u32,
    per_task: u32,
) -> f64
where
    G: Future + Send,
{
    let start = Instant::now();
    rt.block_on(async move {
        let handles: Vec<_> = (0..tasks)
            .map(|_| {
                tokio::spawn(async move {
                    for _ in 0..per_task {
                        black_box(make().await);
                    }
                })
            })
            .collect();
        for h in handles {
            h.await.unwrap();
        }
    });
    start.elapsed().as_nanos() as f64 / f64::from(tasks * per_task)
}

/// Other timers pending in the busy server.
pub const BUSY_OTHERS: u64 = 100_000;

/// The busy server's guard: later than every other timer pending, so it is
/// never the earliest.
pub const BUSY_GUARD_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs `body` on this thread in the context of a busy server: a
/// [server runtime](crate::runtime::server) of `workers` workers with
/// [`BUSY_OTHERS`] other timers of `imp` pending (due 20..30 s out, none
/// due during the run even under callgrind), parked once (`block_on` of a
/// 1 ms sleep) so that tokio's driver sleeps until the earliest of them.
///
/// # Panics
///
/// If one of the other timers is ready at once.
pub fn in_busy_server<T>(imp: Imp, workers: usize, body: impl FnOnce() -> T) -> T {
    let rt = crate::runtime::server(workers);
    let _in_rt = rt.enter();
    let mut cx = Context::from_waker(Waker::noop());
    let mut others: Vec<_> = (0..BUSY_OTHERS)
        .map(|i| {
            boxed_sleep(
                imp,
                Duration::from_secs(20) + Duration::from_micros(i * 100),
            )
        })
        .collect();
    for other in &mut others {
        assert!(other.as_mut().poll(&mut cx).is_pending());
    }
    rt.block_on(sleep_until(imp, Instant::now() + Duration::from_millis(1)));
    let result = body();
    drop(others);
    result
}
