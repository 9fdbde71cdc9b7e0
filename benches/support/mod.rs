//! What the root crate's benches share (not a bench itself: cargo takes
//! `benches/*.rs` and `benches/*/main.rs` as benches, and this is neither).

#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The request a guard is armed around: pending on its first poll, ready
/// with `1` on the second, so that every guard is filed in its timer and
/// then cancelled, the common case of a request deadline. Polled by hand:
/// it does not wake anyone.
pub struct PendingOnce(bool);

impl PendingOnce {
    pub fn new() -> PendingOnce {
        PendingOnce(false)
    }
}

impl Future for PendingOnce {
    type Output = u8;

    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<u8> {
        if std::mem::replace(&mut self.0, true) {
            Poll::Ready(1)
        } else {
            Poll::Pending
        }
    }
}

/// A 2-worker runtime with tokio's I/O driver as well as its time driver,
/// as a server has.
pub fn server_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}
