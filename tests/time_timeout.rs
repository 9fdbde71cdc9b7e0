//! `timeout` and `timeout_at`, in the style of tokio's `time_timeout` tests.

mod support;

use std::future::{pending, ready, Future};
use std::time::Duration;

use support::ms;
use tiered_timer::error::Elapsed;
use tiered_timer::{timeout, timeout_at, Handle, Instant, Timeout};
use tokio::sync::oneshot;
use tokio::time;
use tokio_test::{assert_pending, assert_ready_err, assert_ready_ok, task};

#[tokio::test(start_paused = true)]
async fn simultaneous_deadline_and_completion_prefers_the_value() {
    // The future is polled before the deadline is looked at.
    let mut fut = task::spawn(timeout_at(Instant::now(), ready(())));
    assert_ready_ok!(fut.poll());
}

#[tokio::test(start_paused = true)]
async fn completed_future_past_deadline() {
    let mut fut = task::spawn(timeout_at(Instant::now() - ms(1000), ready(())));
    assert_ready_ok!(fut.poll());
}

#[tokio::test(start_paused = true)]
async fn future_and_deadline_in_future() {
    let (tx, rx) = oneshot::channel();
    let mut fut = task::spawn(timeout_at(Instant::now() + ms(100), rx));
    assert_pending!(fut.poll());
    time::advance(ms(90)).await;
    assert!(!fut.is_woken());
    assert_pending!(fut.poll());
    tx.send(()).unwrap();
    assert!(fut.is_woken());
    assert_ready_ok!(fut.poll()).unwrap();
}

#[tokio::test(start_paused = true)]
async fn deadline_now_elapses() {
    let mut fut = task::spawn(timeout_at(Instant::now(), pending::<()>()));
    // The deadline is now: the first poll reports it.
    assert_ready_err!(fut.poll());
}

#[tokio::test(start_paused = true)]
async fn deadline_future_elapses() {
    let now = Instant::now();
    let mut fut = task::spawn(timeout_at(now + ms(300), pending::<()>()));
    assert_pending!(fut.poll());
    time::advance(ms(299)).await;
    assert!(!fut.is_woken());
    assert_pending!(fut.poll());
    time::advance(ms(1)).await;
    assert!(fut.is_woken());
    let _: Elapsed = assert_ready_err!(fut.poll());
}

#[tokio::test(start_paused = true)]
async fn timeout_await_elapses_exactly() {
    let now = Instant::now();
    let result = timeout(ms(250), pending::<()>()).await;
    assert!(result.is_err());
    assert_elapsed!(now, 250);
}

/// As with tokio: a `Duration::MAX` timeout is a deadline 30 years away;
/// a value that comes before then wins, and paused time can reach it.
#[tokio::test(start_paused = true)]
async fn duration_max_timeout_elapses_only_after_thirty_years() {
    let thirty_years = Duration::from_secs(86_400 * 365 * 30);
    let (tx, rx) = oneshot::channel();
    let mut fut = task::spawn(timeout(Duration::MAX, rx));
    assert_pending!(fut.poll());
    time::advance(thirty_years - Duration::from_millis(1)).await;
    assert_pending!(fut.poll());
    tx.send(5).unwrap();
    assert_eq!(assert_ready_ok!(fut.poll()).unwrap(), 5);

    let (_tx, rx) = oneshot::channel::<()>();
    let start = Instant::now();
    assert!(timeout(Duration::MAX, rx).await.is_err());
    assert_eq!(start.elapsed(), thirty_years);
}

#[tokio::test(start_paused = true)]
async fn ready_future_registers_no_timer() {
    let handle = Handle::current();
    let mut fut = task::spawn(timeout(ms(10), ready(1)));
    assert_eq!(assert_ready_ok!(fut.poll()), 1);
    assert_eq!(
        handle.pending(),
        0,
        "a future ready at once must not register"
    );
}

#[tokio::test(start_paused = true)]
async fn armed_then_cancelled_guard_leaves_nothing_behind() {
    let handle = Handle::current();
    // Unconstrained: a thousand completions in one turn would otherwise run
    // out of tokio's cooperative budget.
    tokio::task::unconstrained(async {
        for _ in 0..1_000 {
            let (tx, rx) = oneshot::channel::<()>();
            let mut fut = task::spawn(timeout(Duration::from_secs(5), rx));
            assert_pending!(fut.poll());
            assert_eq!(handle.pending(), 1);
            tx.send(()).unwrap();
            assert_ready_ok!(fut.poll()).unwrap();
            drop(fut);
            assert_eq!(handle.pending(), 0);
        }
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn timeout_is_unpin_when_the_future_is() {
    fn assert_unpin<T: Unpin>(_: &T) {}
    let t = timeout(ms(10), ready(()));
    assert_unpin(&t);
    // And works in a select loop without pinning.
    let (tx, rx) = oneshot::channel::<u8>();
    let mut guarded: Timeout<oneshot::Receiver<u8>> = timeout(ms(100), rx);
    tokio::select! {
        _ = &mut guarded => panic!("nothing sent yet"),
        _ = time::sleep(ms(10)) => {}
    }
    tx.send(9).unwrap();
    assert_eq!(guarded.await.unwrap().unwrap(), 9);
}

#[tokio::test(start_paused = true)]
async fn accessors() {
    let t = timeout(ms(10), ready(3));
    let _: &std::future::Ready<i32> = t.get_ref();
    let mut t = timeout(ms(10), ready(4));
    assert_eq!(t.get_mut().await, 4);
    let t = timeout(ms(10), ready(5));
    assert_eq!(t.into_inner().await, 5);
}

#[tokio::test(start_paused = true)]
async fn elapsed_converts_to_io_timed_out() {
    let err = timeout(ms(1), pending::<()>()).await.unwrap_err();
    assert_eq!(err.to_string(), "deadline has elapsed");
    let io: std::io::Error = err.into();
    assert_eq!(io.kind(), std::io::ErrorKind::TimedOut);
}

/// A future that is always ready to make progress but never completes,
/// spending tokio's budget the way a busy stream does.
struct Busy;

impl Future for Busy {
    type Output = ();
    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        // Each poll spends one unit of budget, like a channel with data.
        let coop = std::task::ready!(tokio::task::coop::poll_proceed(cx));
        coop.made_progress();
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}

// Real time: a task that never idles would stop paused time from advancing.
#[tokio::test]
async fn timeout_fires_around_a_future_that_spends_the_budget() {
    let result = timeout(ms(10), async {
        loop {
            Busy.await;
        }
    })
    .await;
    assert!(result.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_thread_timeouts_from_many_tasks() {
    let tasks: Vec<_> = (0..500)
        .map(|i| {
            tokio::spawn(async move {
                let (tx, rx) = oneshot::channel::<()>();
                if i % 2 == 0 {
                    tx.send(()).unwrap();
                    assert!(timeout(Duration::from_secs(10), rx).await.is_ok());
                } else {
                    let start = Instant::now();
                    assert!(timeout(ms(5), rx).await.is_err());
                    assert!(start.elapsed() >= ms(5));
                    drop(tx);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
}
