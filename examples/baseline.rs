//! A quick baseline of the two hot paths against `tokio::time`, in one
//! process, alternating implementations, median of 7 rounds:
//!
//! 1. a guard armed then cancelled: `timeout(5 s, f)` where `f` is pending on
//!    the first poll and ready on the second, polled by hand;
//! 2. a registered sleep reset to a later deadline and polled again.
//!
//! Run with `cargo run --release --example baseline`. Single-threaded and
//! rough: a sanity check of the design, not the benchmark suite.

use std::future::Future;
use std::hint::black_box;
use std::pin::{pin, Pin};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// Pending on the first poll, ready on the second.
struct PendingOnce(bool);

impl Future for PendingOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if std::mem::replace(&mut self.0, true) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

const GUARDS: u32 = 200_000;
const RESETS: u32 = 500_000;

fn guard_tokio(cx: &mut Context<'_>) -> Duration {
    let start = Instant::now();
    for _ in 0..GUARDS {
        let mut guard = pin!(tokio::time::timeout(
            Duration::from_secs(5),
            PendingOnce(false)
        ));
        assert!(guard.as_mut().poll(cx).is_pending());
        assert!(guard.as_mut().poll(cx).is_ready());
    }
    start.elapsed() / GUARDS
}

fn guard_ours(cx: &mut Context<'_>) -> Duration {
    let start = Instant::now();
    for _ in 0..GUARDS {
        let mut guard = tiered_timer::timeout(Duration::from_secs(5), PendingOnce(false));
        assert!(Pin::new(&mut guard).poll(cx).is_pending());
        assert!(Pin::new(&mut guard).poll(cx).is_ready());
    }
    start.elapsed() / GUARDS
}

fn reset_tokio(cx: &mut Context<'_>) -> Duration {
    let mut sleep = pin!(tokio::time::sleep(Duration::from_secs(5)));
    assert!(sleep.as_mut().poll(cx).is_pending());
    let base = tokio::time::Instant::now() + Duration::from_secs(5);
    let start = Instant::now();
    for i in 0..RESETS {
        sleep
            .as_mut()
            .reset(base + Duration::from_micros(u64::from(i)));
        black_box(sleep.as_mut().poll(cx).is_pending());
    }
    start.elapsed() / RESETS
}

fn reset_ours(cx: &mut Context<'_>) -> Duration {
    let mut sleep = tiered_timer::sleep(Duration::from_secs(5));
    assert!(Pin::new(&mut sleep).poll(cx).is_pending());
    let base = tokio::time::Instant::now() + Duration::from_secs(5);
    let start = Instant::now();
    for i in 0..RESETS {
        Pin::new(&mut sleep).reset(base + Duration::from_micros(u64::from(i)));
        black_box(Pin::new(&mut sleep).poll(cx).is_pending());
    }
    start.elapsed() / RESETS
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let _in_runtime = runtime.enter();
    let mut cx = Context::from_waker(Waker::noop());
    let mut rows = Vec::new();
    type Bench = fn(&mut Context<'_>) -> Duration;
    let workloads: [(&str, Bench, Bench); 2] = [
        ("guard armed then cancelled", guard_tokio, guard_ours),
        ("reset later + re-poll", reset_tokio, reset_ours),
    ];
    for (name, tokio_run, ours_run) in workloads {
        let (mut tokio_ns, mut ours_ns) = (Vec::new(), Vec::new());
        for _ in 0..7 {
            tokio_ns.push(tokio_run(&mut cx));
            ours_ns.push(ours_run(&mut cx));
        }
        rows.push((name, median(tokio_ns), median(ours_ns)));
    }
    println!("| workload | tokio::time | tiered-timer | ours/tokio |");
    println!("|---|---|---|---|");
    for (name, tokio, ours) in rows {
        println!(
            "| {name} | {} ns | {} ns | {:.2} |",
            tokio.as_nanos(),
            ours.as_nanos(),
            ours.as_secs_f64() / tokio.as_secs_f64()
        );
    }
}
