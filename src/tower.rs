//! tower's timeout middleware on this timer (feature `tower`).
//!
//! [`TimeoutLayer`] and [`Timeout`] behave as `tower::timeout`'s do: each
//! request's response future races a deadline `timeout` after the request
//! was made, and when the deadline comes first the response future is
//! dropped and the error is tower's own [`Elapsed`], boxed into
//! [`BoxError`]. Error handling written for tower's timeout
//! (`err.is::<tower::timeout::error::Elapsed>()`, axum's `HandleErrorLayer`)
//! keeps working, and a tonic or hyper server treats the error exactly as it
//! treats tower's, so switching is a change of import:
//!
//! ```
//! // use tower::timeout::TimeoutLayer;
//! use tiered_timer::tower::TimeoutLayer;
//! # use std::time::Duration;
//! # let _ = TimeoutLayer::new(Duration::from_secs(10));
//! ```
//!
//! # Design
//!
//! The guard is this crate's [`Timeout`](crate::Timeout) future around the
//! inner service's response future, as returned by
//! [`Handle::timeout_at`](crate::Handle::timeout_at):
//!
//! * the response is polled first, so a response that is ready when first
//!   polled never touches the timer (its sleep is dropped unregistered);
//! * otherwise the sleep is filed in the wheel in O(1), and removed in O(1)
//!   when the response completes first: the armed-then-cancelled guard
//!   that a timing wheel is best at;
//! * nothing is allocated: the sleep lives inline in the response future
//!   (48 bytes against tokio's larger, `!Unpin` one), and the boxed
//!   [`Elapsed`] is zero-sized, as in tower;
//! * like every timer of this crate it never fires early: a request times
//!   out at the first tick of the timer at or after its deadline.
//!
//! The timer is the current runtime's default one, looked up when the
//! request is made (so a layer can be built outside a runtime, like
//! tower's), or the one given to [`TimeoutLayer::with_handle`], for a
//! coarser tick or a [`ManualClock`](crate::clock::ManualClock).
//!
//! # Per-request deadlines
//!
//! A request may carry a deadline of its own, such as one a client sent in a
//! `grpc-timeout` header. The layer honours it only when it is *earlier*
//! than the layer's own deadline: a client can shorten the time the server
//! spends on its request, never extend it. Where a deadline comes from is a
//! [`DeadlineSource`], chosen with [`TimeoutLayer::deadline_source`]:
//!
//! * [`DefaultOnly`] (the default): none; every request gets the layer's
//!   timeout, as with tower's. This works for any request type.
//! * [`FromExtensions`]: a [`RequestDeadline`] in an [`http::Request`]'s
//!   extensions, put there by an earlier layer or by whatever parsed the
//!   header. This is the natural place for axum, tonic and hyper services,
//!   whose requests are all `http::Request`s.
//! * any `Fn(&Request) -> Option<Instant>`, or a type of your own, for
//!   other request types.
//!
//! The choice is a type parameter (defaulting to [`DefaultOnly`]) rather
//! than a check every request pays for, because tower's middleware is
//! generic over any request type and only `http::Request` has extensions.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use ::tower::timeout::error::Elapsed;
use ::tower::{BoxError, Layer, Service};
use pin_project_lite::pin_project;

use crate::{Handle, Instant, Sleep};

/// Applies a [`Timeout`] to every request of the services it wraps: tower's
/// [`TimeoutLayer`](::tower::timeout::TimeoutLayer) on this timer.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tiered_timer::tower::TimeoutLayer;
/// use tower::{service_fn, BoxError, Service, ServiceBuilder, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let mut service = ServiceBuilder::new()
///     .layer(TimeoutLayer::new(Duration::from_secs(1)))
///     .service(service_fn(|name: &'static str| async move {
///         if name == "slow" {
///             tiered_timer::sleep(Duration::from_secs(5)).await;
///         }
///         Ok::<_, BoxError>(name)
///     }));
///
/// let fast = service.ready().await.unwrap().call("fast").await;
/// assert_eq!(fast.unwrap(), "fast");
/// let slow = service.ready().await.unwrap().call("slow").await;
/// assert!(slow.unwrap_err().is::<tower::timeout::error::Elapsed>());
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct TimeoutLayer<D = DefaultOnly> {
    config: Config<D>,
}

/// What a [`TimeoutLayer`] hands each [`Timeout`] it makes.
#[derive(Clone, Debug)]
struct Config<D> {
    timeout: Duration,
    /// The timer, or `None` for the default timer of the runtime a request
    /// is made on.
    handle: Option<Handle>,
    source: D,
}

impl TimeoutLayer {
    /// Returns a layer whose requests time out `timeout` after they are
    /// made, on the current runtime's default timer (looked up per request:
    /// the layer itself can be built anywhere).
    ///
    /// A `timeout` too large for an `Instant` (such as [`Duration::MAX`])
    /// is clamped to the far future (about 30 years), as
    /// [`sleep`](crate::sleep) does.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::tower::TimeoutLayer;
    ///
    /// let layer = TimeoutLayer::new(Duration::from_secs(30));
    /// # let _ = layer;
    /// ```
    pub const fn new(timeout: Duration) -> TimeoutLayer {
        TimeoutLayer {
            config: Config {
                timeout,
                handle: None,
                source: DefaultOnly,
            },
        }
    }

    /// Returns a layer whose requests time out `timeout` after they are
    /// made, on the timer of `handle`: one with a coarser tick, a
    /// [`ManualClock`](crate::clock::ManualClock), or a runtime of its own.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::{tower::TimeoutLayer, Timer};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// // Request deadlines need no 250 µs precision: a 10 ms tick is plenty.
    /// let timer = Timer::builder().tick(Duration::from_millis(10)).build();
    /// let layer = TimeoutLayer::with_handle(Duration::from_secs(30), timer.handle());
    /// # let _ = layer;
    /// # }
    /// ```
    pub fn with_handle(timeout: Duration, handle: Handle) -> TimeoutLayer {
        TimeoutLayer {
            config: Config {
                timeout,
                handle: Some(handle),
                source: DefaultOnly,
            },
        }
    }
}

impl<D> TimeoutLayer<D> {
    /// Honours per-request deadlines from `source` when they are earlier
    /// than the layer's timeout (see the [module docs](self)).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::tower::{FromExtensions, TimeoutLayer};
    ///
    /// let layer = TimeoutLayer::new(Duration::from_secs(30)).deadline_source(FromExtensions);
    /// # let _ = layer;
    /// ```
    pub fn deadline_source<D2>(self, source: D2) -> TimeoutLayer<D2> {
        TimeoutLayer {
            config: Config {
                timeout: self.config.timeout,
                handle: self.config.handle,
                source,
            },
        }
    }

    /// Returns the timeout every request gets (unless its own deadline is
    /// earlier).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::tower::TimeoutLayer;
    ///
    /// let layer = TimeoutLayer::new(Duration::from_secs(30));
    /// assert_eq!(layer.timeout(), Duration::from_secs(30));
    /// ```
    pub fn timeout(&self) -> Duration {
        self.config.timeout
    }
}

impl<S, D: Clone> Layer<S> for TimeoutLayer<D> {
    type Service = Timeout<S, D>;

    fn layer(&self, inner: S) -> Timeout<S, D> {
        Timeout {
            inner,
            config: self.config.clone(),
        }
    }
}

/// A service whose requests time out: tower's
/// [`Timeout`](::tower::timeout::Timeout) on this timer.
///
/// Readiness is the inner service's ([`poll_ready`](Service::poll_ready)
/// passes through, its error converted into [`BoxError`]). Each call returns
/// a [`ResponseFuture`] that resolves to the inner response, the inner error
/// converted into [`BoxError`], or tower's [`Elapsed`] boxed into
/// [`BoxError`] when the deadline comes first.
///
/// # Panics
///
/// [`call`](Service::call) panics outside a tokio runtime, unless the
/// timer was given with [`with_handle`](Timeout::with_handle).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tiered_timer::tower::Timeout;
/// use tower::{service_fn, BoxError, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let never = service_fn(|()| std::future::pending::<Result<(), BoxError>>());
/// let guarded = Timeout::new(never, Duration::from_millis(100));
/// let err = guarded.oneshot(()).await.unwrap_err();
/// assert!(err.is::<tower::timeout::error::Elapsed>());
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Timeout<S, D = DefaultOnly> {
    inner: S,
    config: Config<D>,
}

impl<S> Timeout<S> {
    /// Wraps `inner` so that its requests time out `timeout` after they are
    /// made, on the current runtime's default timer.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::tower::Timeout;
    /// use tower::{service_fn, BoxError};
    ///
    /// let echo = service_fn(|x: u32| async move { Ok::<_, BoxError>(x) });
    /// let guarded = Timeout::new(echo, Duration::from_secs(1));
    /// # let _ = guarded;
    /// ```
    pub const fn new(inner: S, timeout: Duration) -> Timeout<S> {
        Timeout {
            inner,
            config: Config {
                timeout,
                handle: None,
                source: DefaultOnly,
            },
        }
    }

    /// Wraps `inner` so that its requests time out `timeout` after they are
    /// made, on the timer of `handle`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::{tower::Timeout, Timer};
    /// use tower::{service_fn, BoxError};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let timer = Timer::builder().tick(Duration::from_millis(10)).build();
    /// let echo = service_fn(|x: u32| async move { Ok::<_, BoxError>(x) });
    /// let guarded = Timeout::with_handle(echo, Duration::from_secs(1), timer.handle());
    /// # let _ = guarded;
    /// # }
    /// ```
    pub fn with_handle(inner: S, timeout: Duration, handle: Handle) -> Timeout<S> {
        TimeoutLayer::with_handle(timeout, handle).layer(inner)
    }
}

impl<S, D> Timeout<S, D> {
    /// Gets a reference to the inner service.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::tower::Timeout;
    ///
    /// let guarded = Timeout::new(7u32, Duration::from_secs(1));
    /// assert_eq!(*guarded.get_ref(), 7);
    /// ```
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// Gets a mutable reference to the inner service.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::tower::Timeout;
    ///
    /// let mut guarded = Timeout::new(7u32, Duration::from_secs(1));
    /// *guarded.get_mut() += 1;
    /// assert_eq!(*guarded.get_ref(), 8);
    /// ```
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Consumes the `Timeout`, returning the inner service.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::tower::Timeout;
    ///
    /// let guarded = Timeout::new(7u32, Duration::from_secs(1));
    /// assert_eq!(guarded.into_inner(), 7);
    /// ```
    pub fn into_inner(self) -> S {
        self.inner
    }

    /// The sleep for a request made now whose own deadline is
    /// `request_deadline`: the earlier of it and the layer's timeout.
    #[track_caller]
    fn deadline_sleep(&self, request_deadline: Option<Instant>) -> Sleep {
        // Owned, so the sleep takes it without another reference count.
        let handle = match &self.config.handle {
            Some(handle) => handle.clone(),
            None => Handle::current(),
        };
        let now = handle.shared.now();
        let deadline = match (now.checked_add(self.config.timeout), request_deadline) {
            (Some(default), Some(own)) => Some(default.min(own)),
            (default, own) => default.or(own),
        };
        // Like `sleep`: a deadline past what the timer serves is clamped to
        // the far future (about 30 years), filed, and never fires early.
        let deadline = handle.shared.ticks().clamp(deadline, || now);
        Sleep::new(handle, deadline)
    }
}

impl<S, D, Request> Service<Request> for Timeout<S, D>
where
    S: Service<Request>,
    S::Error: Into<BoxError>,
    D: DeadlineSource<Request>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    #[track_caller]
    fn call(&mut self, request: Request) -> ResponseFuture<S::Future> {
        let request_deadline = self.config.source.deadline(&request);
        let response = self.inner.call(request);
        // Armed after the call, as tower's is: the deadline counts from the
        // moment the request was handed over.
        let sleep = self.deadline_sleep(request_deadline);
        ResponseFuture {
            guarded: crate::Timeout::new(response, sleep),
        }
    }
}

pin_project! {
    /// The response future of a [`Timeout`] service: the inner response
    /// racing the request's deadline.
    ///
    /// Resolves to the response, the inner error converted into
    /// [`BoxError`], or tower's [`Elapsed`] boxed into [`BoxError`] if the
    /// deadline comes first (the inner future is then dropped when this one
    /// is). The response is polled first, so one that is ready never times
    /// out.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer::tower::Timeout;
    /// use tower::{service_fn, BoxError, Service};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut guarded = Timeout::new(
    ///     service_fn(|x: u32| async move { Ok::<_, BoxError>(x * 2) }),
    ///     Duration::from_secs(1),
    /// );
    /// let response = guarded.call(21);
    /// assert_eq!(response.await.unwrap(), 42);
    /// # }
    /// ```
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    #[derive(Debug)]
    pub struct ResponseFuture<F> {
        #[pin]
        guarded: crate::Timeout<F>,
    }
}

impl<F, T, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
{
    type Output = Result<T, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project().guarded.poll(cx).map(|raced| match raced {
            Ok(response) => response.map_err(Into::into),
            Err(_) => Err(Box::new(Elapsed::new()) as BoxError),
        })
    }
}

/// Where a [`Timeout`] finds a request's own deadline, which it honours when
/// it is earlier than the layer's timeout.
///
/// Implemented by [`DefaultOnly`] (no request has one), [`FromExtensions`]
/// (a [`RequestDeadline`] in an [`http::Request`]'s extensions), and by
/// closures `Fn(&Request) -> Option<Instant>`.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tiered_timer::tower::{DeadlineSource, TimeoutLayer};
/// use tiered_timer::Instant;
///
/// /// A job that says how long it may take.
/// struct Job {
///     budget: Option<Duration>,
/// }
///
/// #[derive(Clone)]
/// struct JobBudget;
///
/// impl DeadlineSource<Job> for JobBudget {
///     fn deadline(&self, job: &Job) -> Option<Instant> {
///         job.budget.map(|budget| Instant::now() + budget)
///     }
/// }
///
/// let layer = TimeoutLayer::new(Duration::from_secs(30)).deadline_source(JobBudget);
/// # let _ = layer;
/// ```
pub trait DeadlineSource<Request> {
    /// Returns the request's own deadline, if it has one.
    fn deadline(&self, request: &Request) -> Option<Instant>;
}

/// The default [`DeadlineSource`]: requests have no deadline of their own,
/// each gets the layer's timeout (as with tower's).
///
/// # Examples
///
/// ```
/// use tiered_timer::tower::{DeadlineSource, DefaultOnly};
///
/// assert_eq!(DefaultOnly.deadline(&"any request"), None);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DefaultOnly;

impl<Request> DeadlineSource<Request> for DefaultOnly {
    fn deadline(&self, _: &Request) -> Option<Instant> {
        None
    }
}

/// A [`DeadlineSource`] that reads a [`RequestDeadline`] from an
/// [`http::Request`]'s extensions.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tiered_timer::tower::{DeadlineSource, FromExtensions, RequestDeadline};
/// use tiered_timer::Instant;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let deadline = Instant::now() + Duration::from_millis(50);
/// let mut request = http::Request::new(());
/// request.extensions_mut().insert(RequestDeadline(deadline));
/// assert_eq!(FromExtensions.deadline(&request), Some(deadline));
/// # }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FromExtensions;

impl<B> DeadlineSource<http::Request<B>> for FromExtensions {
    fn deadline(&self, request: &http::Request<B>) -> Option<Instant> {
        request
            .extensions()
            .get::<RequestDeadline>()
            .map(|deadline| deadline.0)
    }
}

impl<Request, F> DeadlineSource<Request> for F
where
    F: Fn(&Request) -> Option<Instant>,
{
    fn deadline(&self, request: &Request) -> Option<Instant> {
        self(request)
    }
}

/// A request's own deadline, carried in [`http::Request`] extensions and
/// honoured by a [`TimeoutLayer`] with the [`FromExtensions`] source when it
/// is earlier than the layer's timeout.
///
/// Insert it where the deadline is learnt, for example where a
/// `grpc-timeout` header is parsed; it is an absolute [`Instant`] so that
/// time spent in earlier layers counts against it.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tiered_timer::tower::RequestDeadline;
/// use tiered_timer::Instant;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let mut request = http::Request::new(());
/// let deadline = Instant::now() + Duration::from_millis(200);
/// request.extensions_mut().insert(RequestDeadline(deadline));
/// # }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestDeadline(pub Instant);
