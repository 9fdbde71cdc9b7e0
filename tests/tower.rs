//! `tiered_timer::tower`: tower's timeout middleware on this timer, tested
//! under tokio's paused clock, and side by side with `tower::timeout`.

mod support;

use std::future::pending;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use support::ms;
use tiered_timer::clock::ManualClock;
use tiered_timer::tower::{FromExtensions, RequestDeadline, Timeout, TimeoutLayer};
use tiered_timer::{Handle, Instant, Timer};
use tokio::sync::oneshot;
use tokio::time;
use tokio_test::{assert_pending, assert_ready, assert_ready_ok, task};
use tower::timeout::error::Elapsed;
use tower::{service_fn, BoxError, Layer, Service, ServiceBuilder, ServiceExt};

const NS: Duration = Duration::from_nanos(1);

/// A service whose responses never come.
fn never() -> impl Service<(), Response = (), Error = BoxError, Future: Unpin> + Clone {
    service_fn(|()| pending::<Result<(), BoxError>>())
}

fn is_elapsed(err: &BoxError) -> bool {
    err.is::<Elapsed>()
}

#[derive(Debug, PartialEq)]
struct Refused(&'static str);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "refused: {}", self.0)
    }
}

impl std::error::Error for Refused {}

#[test]
fn types_are_clone_send_sync_debug_and_unpin() {
    fn service<T: Clone + Send + Sync + std::fmt::Debug + 'static>() {}
    fn future<T: Send + Unpin + std::fmt::Debug>() {}
    service::<TimeoutLayer>();
    service::<TimeoutLayer<FromExtensions>>();
    service::<Timeout<u32>>();
    service::<Timeout<u32, FromExtensions>>();
    future::<tiered_timer::tower::ResponseFuture<std::future::Ready<Result<(), BoxError>>>>();
}

#[test]
fn layer_and_service_are_built_outside_a_runtime() {
    // Like tower's: the timer is looked up per request, not at build time.
    const LAYER: TimeoutLayer = TimeoutLayer::new(Duration::from_secs(1));
    let guarded = LAYER.layer(5u32);
    assert_eq!(*guarded.get_ref(), 5);
    assert_eq!(LAYER.timeout(), Duration::from_secs(1));
}

#[tokio::test(start_paused = true)]
async fn slow_service_times_out_exactly_at_its_deadline() {
    let handle = Handle::current();
    let mut service = Timeout::new(never(), ms(100));
    let start = Instant::now();
    let mut response = task::spawn(service.call(()));
    assert_pending!(response.poll());
    assert_eq!(handle.pending(), 1);

    time::advance(ms(100) - NS).await;
    assert_pending!(response.poll(), "never early: 1 ns before the deadline");

    time::advance(NS).await;
    assert!(response.is_woken());
    let err = assert_ready!(response.poll()).unwrap_err();
    assert!(is_elapsed(&err), "{err}");
    assert_eq!(err.to_string(), "request timed out");
    assert_eq!(start.elapsed(), ms(100));
    assert_eq!(handle.pending(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_coarse_tick_rounds_the_deadline_up_never_down() {
    let timer = Timer::builder().tick(ms(10)).build();
    let mut service = Timeout::with_handle(never(), ms(95), timer.handle());
    let mut response = task::spawn(service.call(()));
    assert_pending!(response.poll());
    assert_eq!(timer.handle().pending(), 1, "filed in the given timer");

    time::advance(ms(100) - NS).await;
    assert_pending!(
        response.poll(),
        "the deadline (95 ms) has passed, but not its tick"
    );
    time::advance(NS).await;
    let err = assert_ready!(response.poll()).unwrap_err();
    assert!(is_elapsed(&err));
}

#[tokio::test]
async fn a_manual_clock_decides_when_requests_time_out() {
    let clock = ManualClock::new();
    let timer = Timer::builder().clock(clock.clone()).build();
    let layer = TimeoutLayer::with_handle(Duration::from_secs(30), timer.handle());
    let mut service = layer.layer(never());
    let mut response = task::spawn(service.call(()));
    assert_pending!(response.poll());

    clock.advance(Duration::from_secs(30) - NS);
    tokio::task::yield_now().await;
    assert_pending!(response.poll());

    clock.advance(NS);
    tokio::task::yield_now().await;
    assert!(response.is_woken());
    assert!(is_elapsed(&assert_ready!(response.poll()).unwrap_err()));
}

#[tokio::test(start_paused = true)]
async fn fast_responses_are_untouched() {
    let handle = Handle::current();
    let mut service = Timeout::new(
        service_fn(|x: u32| async move { Ok::<_, BoxError>(x + 1) }),
        ms(100),
    );
    // Ready at once: the deadline is never even filed.
    let mut response = task::spawn(service.call(1));
    assert_eq!(assert_ready_ok!(response.poll()), 2);
    assert_eq!(handle.pending(), 0);
    assert_eq!(handle.stats().fired, 0);

    // Ready 1 ns before the deadline: the response wins, the entry goes.
    let (tx, rx) = oneshot::channel::<u32>();
    let rx = Arc::new(std::sync::Mutex::new(Some(rx)));
    let mut service = Timeout::new(
        service_fn(move |()| {
            let rx = rx.lock().unwrap().take().unwrap();
            async move { Ok::<_, BoxError>(rx.await?) }
        }),
        ms(100),
    );
    let mut response = task::spawn(service.call(()));
    assert_pending!(response.poll());
    assert_eq!(handle.pending(), 1);
    time::advance(ms(100) - NS).await;
    tx.send(7).unwrap();
    assert_eq!(assert_ready_ok!(response.poll()), 7);
    drop(response);
    assert_eq!(handle.pending(), 0);
    time::advance(ms(10)).await;
    assert_eq!(handle.stats().fired, 0, "a cancelled guard never fires");
}

#[tokio::test(start_paused = true)]
async fn a_response_ready_with_the_deadline_wins() {
    // The response is polled before the deadline is looked at.
    let (tx, rx) = oneshot::channel::<u32>();
    let rx = Arc::new(std::sync::Mutex::new(Some(rx)));
    let mut service = Timeout::new(
        service_fn(move |()| {
            let rx = rx.lock().unwrap().take().unwrap();
            async move { Ok::<_, BoxError>(rx.await?) }
        }),
        ms(100),
    );
    let mut response = task::spawn(service.call(()));
    assert_pending!(response.poll());
    time::advance(ms(100)).await;
    tx.send(3).unwrap();
    assert_eq!(assert_ready_ok!(response.poll()), 3);
}

/// A service that is not ready until told, then fails to be.
#[derive(Clone)]
struct Gate {
    polls: Arc<AtomicUsize>,
    opens_after: usize,
    refuse: bool,
}

impl Service<()> for Gate {
    type Response = &'static str;
    type Error = Refused;
    type Future = std::future::Ready<Result<&'static str, Refused>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Refused>> {
        let polls = self.polls.fetch_add(1, Ordering::SeqCst) + 1;
        if polls < self.opens_after {
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        if self.refuse {
            Poll::Ready(Err(Refused("not ready")))
        } else {
            Poll::Ready(Ok(()))
        }
    }

    fn call(&mut self, (): ()) -> Self::Future {
        std::future::ready(Err(Refused("call")))
    }
}

#[tokio::test(start_paused = true)]
async fn readiness_passes_through() {
    let polls = Arc::new(AtomicUsize::new(0));
    let gate = Gate {
        polls: polls.clone(),
        opens_after: 3,
        refuse: false,
    };
    let mut service = Timeout::new(gate.clone(), ms(100));
    let mut cx = Context::from_waker(std::task::Waker::noop());
    assert!(service.poll_ready(&mut cx).is_pending());
    assert!(service.poll_ready(&mut cx).is_pending());
    assert!(matches!(service.poll_ready(&mut cx), Poll::Ready(Ok(()))));
    assert_eq!(polls.load(Ordering::SeqCst), 3);

    // Readiness is not timed: a service that takes long to be ready is
    // waited for (as with tower's), and its error comes through as itself.
    let mut service = Timeout::new(
        Gate {
            polls: Arc::new(AtomicUsize::new(0)),
            opens_after: 1,
            refuse: true,
        },
        ms(100),
    );
    let err = match service.poll_ready(&mut cx) {
        Poll::Ready(Err(err)) => err,
        other => panic!("expected a readiness error, got {other:?}"),
    };
    assert_eq!(err.downcast_ref::<Refused>(), Some(&Refused("not ready")));
}

#[tokio::test(start_paused = true)]
async fn inner_errors_pass_through() {
    let mut service = Timeout::new(
        Gate {
            polls: Arc::new(AtomicUsize::new(0)),
            opens_after: 1,
            refuse: false,
        },
        ms(100),
    );
    let err = service.ready().await.unwrap().call(()).await.unwrap_err();
    assert!(!is_elapsed(&err));
    assert_eq!(err.downcast_ref::<Refused>(), Some(&Refused("call")));

    // Also when the error comes after a pending poll.
    let mut service = Timeout::new(
        service_fn(|()| async {
            tiered_timer::sleep(ms(10)).await;
            Err::<(), _>(Refused("late"))
        }),
        ms(100),
    );
    let start = Instant::now();
    let err = service.call(()).await.unwrap_err();
    assert_eq!(err.downcast_ref::<Refused>(), Some(&Refused("late")));
    assert_eq!(start.elapsed(), ms(10));
}

/// A request whose handler never answers, carrying `deadline` if any.
fn request(deadline: Option<Instant>) -> http::Request<()> {
    let mut request = http::Request::new(());
    if let Some(deadline) = deadline {
        request.extensions_mut().insert(RequestDeadline(deadline));
    }
    request
}

fn never_http() -> impl Service<http::Request<()>, Response = (), Error = BoxError, Future: Unpin> {
    service_fn(|_: http::Request<()>| pending::<Result<(), BoxError>>())
}

/// How long a request with its own `deadline` (from now) runs before it
/// times out, behind a layer of 100 ms.
async fn times_out_after(
    source_layer: TimeoutLayer<FromExtensions>,
    own: Option<Duration>,
) -> Duration {
    let start = Instant::now();
    let mut service = source_layer.layer(never_http());
    let err = service
        .call(request(own.map(|own| start + own)))
        .await
        .unwrap_err();
    assert!(is_elapsed(&err));
    start.elapsed()
}

#[tokio::test(start_paused = true)]
async fn a_request_deadline_wins_only_when_earlier() {
    let layer = TimeoutLayer::new(ms(100)).deadline_source(FromExtensions);
    assert_eq!(times_out_after(layer.clone(), None).await, ms(100));
    assert_eq!(times_out_after(layer.clone(), Some(ms(30))).await, ms(30));
    assert_eq!(times_out_after(layer.clone(), Some(ms(100))).await, ms(100));
    assert_eq!(
        times_out_after(layer.clone(), Some(ms(500))).await,
        ms(100),
        "a later deadline does not extend the layer's"
    );
    // Without the source, the extension is ignored.
    let mut plain = TimeoutLayer::new(ms(100)).layer(never_http());
    let start = Instant::now();
    let err = plain.call(request(Some(start + ms(30)))).await.unwrap_err();
    assert!(is_elapsed(&err));
    assert_eq!(start.elapsed(), ms(100));
}

#[tokio::test(start_paused = true)]
async fn an_earlier_request_deadline_is_never_early_either() {
    let layer = TimeoutLayer::new(ms(100)).deadline_source(FromExtensions);
    let mut service = layer.layer(never_http());
    let start = Instant::now();
    let mut response = task::spawn(service.call(request(Some(start + ms(30)))));
    assert_pending!(response.poll());
    time::advance(ms(30) - NS).await;
    assert_pending!(response.poll());
    time::advance(NS).await;
    assert!(is_elapsed(&assert_ready!(response.poll()).unwrap_err()));
}

#[tokio::test(start_paused = true)]
async fn a_passed_request_deadline_still_gives_the_response_one_poll() {
    let layer = TimeoutLayer::new(ms(100)).deadline_source(FromExtensions);
    let mut ready = layer.layer(service_fn(|_: http::Request<()>| async {
        Ok::<_, BoxError>("ready")
    }));
    let past = Instant::now() - ms(5);
    assert_eq!(ready.call(request(Some(past))).await.unwrap(), "ready");

    let mut slow = layer.layer(never_http());
    let start = Instant::now();
    let mut response = task::spawn(slow.call(request(Some(past))));
    assert!(is_elapsed(&assert_ready!(response.poll()).unwrap_err()));
    assert_eq!(start.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn a_closure_can_be_the_deadline_source() {
    // A request type with no extensions: a job with its own budget.
    let layer = TimeoutLayer::new(ms(100))
        .deadline_source(|job: &Option<Duration>| job.map(|budget| Instant::now() + budget));
    let mut service = layer.layer(service_fn(|_: Option<Duration>| {
        pending::<Result<(), BoxError>>()
    }));
    let start = Instant::now();
    assert!(is_elapsed(&service.call(Some(ms(20))).await.unwrap_err()));
    assert_eq!(start.elapsed(), ms(20));
    let start = Instant::now();
    assert!(is_elapsed(&service.call(None).await.unwrap_err()));
    assert_eq!(start.elapsed(), ms(100));
}

#[tokio::test(start_paused = true)]
async fn duration_max_is_clamped_to_the_far_future_like_sleep() {
    let handle = Handle::current();
    let far = Instant::now() + Duration::from_secs(86_400 * 365 * 30);
    let mut service = Timeout::new(never(), Duration::MAX);
    let mut response = task::spawn(service.call(()));
    assert_pending!(response.poll());
    assert_eq!(handle.pending(), 1, "filed in the wheel like any deadline");
    time::advance(far - Instant::now() - Duration::from_millis(1)).await;
    assert_pending!(response.poll());
    // Due at the first tick (and tokio millisecond) at or after `far`.
    time::advance(Duration::from_millis(2)).await;
    assert!(is_elapsed(&assert_ready!(response.poll()).unwrap_err()));
    assert_eq!(handle.pending(), 0);
}

#[tokio::test(start_paused = true)]
async fn zero_times_out_on_the_first_poll_after_the_response() {
    let mut service = Timeout::new(never(), Duration::ZERO);
    let mut response = task::spawn(service.call(()));
    assert!(is_elapsed(&assert_ready!(response.poll()).unwrap_err()));
}

#[test]
#[should_panic(expected = "no timer running")]
fn calling_outside_a_runtime_says_so() {
    let mut service = Timeout::new(never(), ms(100));
    drop(service.call(()));
}

/// The switch: the same test bodies, written against tower's timeout,
/// compiled once with `use tower::timeout::...` and once with `use
/// tiered_timer::tower::...`, and nothing else changed.
macro_rules! written_for_tower {
    ($name:ident, $module:path) => {
        mod $name {
            use std::time::Duration;

            use axum::error_handling::HandleErrorLayer;
            use axum::http::StatusCode;
            use axum::routing::get;
            use axum::Router;
            use tokio::time::Instant;
            use tower::{service_fn, BoxError, Layer, Service, ServiceBuilder, ServiceExt};
            use $module::{Timeout, TimeoutLayer};

            #[tokio::test(start_paused = true)]
            async fn service_builder() {
                let mut service = ServiceBuilder::new()
                    .layer(TimeoutLayer::new(Duration::from_millis(100)))
                    .service_fn(|delay: u64| async move {
                        tokio::time::sleep(Duration::from_millis(delay)).await;
                        Ok::<_, BoxError>(delay)
                    });
                let start = Instant::now();
                let fast = service.ready().await.unwrap().call(99).await;
                assert_eq!(fast.unwrap(), 99);
                assert_eq!(start.elapsed(), Duration::from_millis(99));

                let start = Instant::now();
                let slow = service.ready().await.unwrap().call(500).await;
                let err = slow.unwrap_err();
                assert!(err.is::<tower::timeout::error::Elapsed>());
                assert_eq!(err.to_string(), "request timed out");
                assert_eq!(start.elapsed(), Duration::from_millis(100));
            }

            #[tokio::test(start_paused = true)]
            async fn timeout_service() {
                let echo = service_fn(|x: u32| async move { Ok::<_, BoxError>(x) });
                let mut service = Timeout::new(echo, Duration::from_millis(10));
                let _: &_ = service.get_ref();
                let _: &mut _ = service.get_mut();
                assert_eq!(service.call(4).await.unwrap(), 4);
                let inner = service.into_inner();
                let mut again = TimeoutLayer::new(Duration::from_millis(10)).layer(inner);
                assert_eq!(again.call(5).await.unwrap(), 5);
                let never = service_fn(|()| std::future::pending::<Result<(), std::io::Error>>());
                let err = Timeout::new(never, Duration::from_millis(10))
                    .oneshot(())
                    .await
                    .unwrap_err();
                assert!(err.downcast::<tower::timeout::error::Elapsed>().is_ok());
            }

            async fn handle_timeout(err: BoxError) -> (StatusCode, String) {
                if err.is::<tower::timeout::error::Elapsed>() {
                    (StatusCode::REQUEST_TIMEOUT, "timed out".to_string())
                } else {
                    (StatusCode::INTERNAL_SERVER_ERROR, err.to_string())
                }
            }

            #[tokio::test(start_paused = true)]
            async fn axum_router_with_handle_error_layer() {
                let app = Router::new()
                    .route("/fast", get(|| async { "fast" }))
                    .route(
                        "/slow",
                        get(|| async {
                            tokio::time::sleep(Duration::from_secs(5)).await;
                            "slow"
                        }),
                    )
                    .layer(
                        ServiceBuilder::new()
                            .layer(HandleErrorLayer::new(handle_timeout))
                            .layer(TimeoutLayer::new(Duration::from_secs(1))),
                    );
                let get = |uri: &str| {
                    axum::http::Request::get(uri)
                        .body(axum::body::Body::empty())
                        .unwrap()
                };
                let start = Instant::now();
                let fast = app.clone().oneshot(get("/fast")).await.unwrap();
                assert_eq!(fast.status(), StatusCode::OK);
                let slow = app.oneshot(get("/slow")).await.unwrap();
                assert_eq!(slow.status(), StatusCode::REQUEST_TIMEOUT);
                assert_eq!(start.elapsed(), Duration::from_secs(1));
            }

            #[test]
            fn const_layer() {
                const LAYER: TimeoutLayer = TimeoutLayer::new(Duration::from_secs(1));
                let _ = LAYER.layer(());
            }
        }
    };
}

written_for_tower!(on_towers_timeout, tower::timeout);
written_for_tower!(on_this_timer, tiered_timer::tower);

#[path = "support/pending_once.rs"]
mod pending_once;
use pending_once::PendingOnce;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_requests_answer_and_leave_nothing_behind() {
    let handle = Handle::current();
    let service = ServiceBuilder::new()
        .layer(TimeoutLayer::new(Duration::from_secs(5)))
        .service_fn(|()| PendingOnce(false));
    let tasks: Vec<_> = (0..1000)
        .map(|_| {
            let service = service.clone();
            tokio::spawn(async move { service.oneshot(()).await.unwrap() })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.unwrap(), 1);
    }
    assert_eq!(handle.pending(), 0);
}
