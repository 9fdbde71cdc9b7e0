//! The request `tests/tower.rs` sends through the layer a thousand times at
//! once (as the benchmark member's `benches/tower_timeout.rs` does, with
//! its own copy from `tiered_timer_benchmarks::guards`), included with
//! `#[path = ...] mod pending_once;`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tower::BoxError;

/// Pending on the first poll (waking itself), ready with `Ok(1)` on the
/// second: every deadline around it is armed, then cancelled.
pub struct PendingOnce(pub bool);

impl Future for PendingOnce {
    type Output = Result<u8, BoxError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if std::mem::replace(&mut self.0, true) {
            Poll::Ready(Ok(1))
        } else {
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}
