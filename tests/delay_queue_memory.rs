//! Memory after a burst, measured with a counting allocator: a
//! `DelayQueue` that took a burst of values and let them all out gives its
//! memory back, by itself or through `shrink_to_fit`, without invalidating
//! the keys of values still in it.
//!
//! In a file of its own: the `#[global_allocator]` counts every allocation
//! of this test binary, so it holds one test only.

#![cfg(not(loom))]

use std::future::poll_fn;
use std::time::Duration;

use tiered_timer::DelayQueue;

#[path = "support/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::live_bytes as live;

const BURST: u64 = 200_000;

/// Inserts a burst of values due within `spread`, lets them all out, and
/// returns the live bytes at the peak.
async fn burst_and_drain(queue: &mut DelayQueue<u64>, spread: Duration) -> isize {
    for i in 0..BURST {
        queue.insert(i, spread * (i % 1000) as u32 / 1000);
    }
    let peak = live();
    tokio::time::advance(spread).await;
    let before = queue.len() as u64 - BURST;
    for _ in 0..BURST {
        let expired = poll_fn(|cx| queue.poll_expired(cx)).await.unwrap();
        assert!(expired.into_inner() < BURST);
    }
    assert_eq!(queue.len() as u64, before);
    peak
}

#[test]
fn memory_comes_back_after_a_drained_burst() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut queue = DelayQueue::new();
        // Warm up: the default timer, its driver, the queue's sleep and a
        // first level of wheel all exist from here on.
        queue.insert(0, Duration::from_millis(1));
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(poll_fn(|cx| queue.poll_expired(cx)).await.is_some());
        let baseline = live();

        // 1. A burst drained to empty gives its memory back by itself.
        let peak = burst_and_drain(&mut queue, Duration::from_secs(1)).await;
        let after = live();
        println!("baseline {baseline} B, peak {peak} B, after drain {after} B");
        assert!(peak > baseline + BURST as isize * 16, "the burst was not measured");
        assert!(
            after <= baseline + baseline / 10,
            "after a drained burst: {after} B live, baseline {baseline} B"
        );

        // 2. A burst over a queue that keeps a value (in the lowest slot):
        // draining does not empty the queue, so nothing is freed by itself;
        // `shrink_to_fit` frees the room above the survivor, whose key stays
        // valid. ("Where it started" is the queue holding that one value,
        // with the wheel levels its one-hour deadline needs.)
        let low = queue.insert(u64::MAX, Duration::from_secs(3600));
        let started = live();
        let _ = burst_and_drain(&mut queue, Duration::from_secs(1)).await;
        let with_one = live();
        queue.shrink_to_fit();
        let shrunk = live();
        println!("one value kept: {started} B before, {with_one} B after the burst, {shrunk} B after shrink_to_fit");
        assert!(with_one > started + BURST as isize * 16, "the burst was not measured");
        assert!(
            shrunk <= started + started / 10,
            "shrink_to_fit kept {shrunk} B, {started} B before the burst"
        );
        assert_eq!(queue.remove(&low).into_inner(), u64::MAX);
    });
}
