//! Unit tests of the driver's shared state.

use std::task::Waker;
use std::time::Duration;

use super::deadlines::Status;
use super::entry::{unpack, Filing};
use super::flush::Flushed;
use super::shared::Config;
use super::shared::Slot;
use super::task::Lifetime;
use super::timer;
use crate::sync::Arc;

/// One wheel slot per pending timer: a sleep's waker and no more, so a
/// slab slot (entry, links, deadline and slot) stays at 40 bytes.
#[test]
fn a_slot_is_one_waker() {
    assert_eq!(std::mem::size_of::<Slot>(), std::mem::size_of::<Waker>());
}

/// Regression: a flush whose clock reading is older than the wheel's
/// time must not spin on an entry due between the two.
#[tokio::test]
async fn flush_with_a_stale_now_terminates() {
    let (shared, driver) = timer(
        Config::default(),
        Arc::new(crate::clock::TokioClock),
        None,
        Lifetime::Runtime,
    );
    let shard = &shared.shards[0];
    let key = {
        let mut state = shard.state.lock();
        assert_eq!(state.wheel.poll(10), None);
        // Due at 8: the wheel, at 10, puts it straight in the due list.
        let (key, _) = state.wheel.insert(8, Slot::Sleep(Waker::noop().clone()));
        state.pending += 1;
        shard.deadlines.init(key, 8);
        key
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let flusher = shared.clone();
    std::thread::spawn(move || {
        let _ = tx.send(flusher.flush_at(5, usize::MAX));
    });
    let Ok(flushed) = rx.recv_timeout(Duration::from_secs(10)) else {
        // The spinning flush holds the lock: dropping these would block.
        std::mem::forget((driver, shared));
        panic!("flush with a stale `now` never returned");
    };
    assert_eq!(flushed, Flushed::Done);
    assert_eq!(shard.deadlines.status(key), Status::Fired);
    assert_eq!(shared.pending(), 0);
}

/// Threads of separate current-thread runtimes (thread per core) sharing a
/// timer spread over its shards: tokio calls each of them worker 0.
#[test]
fn thread_per_core_runtimes_spread_over_the_shards() {
    let config = Config {
        shards: 2,
        ..Config::default()
    };
    let clock = Arc::new(crate::clock::ManualClock::new());
    let (shared, _driver) = timer(config, clock, None, Lifetime::Runtime);
    let shards: Vec<usize> = (0..2)
        .map(|_| {
            let shared = shared.clone();
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap();
                rt.block_on(async {
                    assert_eq!(tokio::runtime::worker_index(), Some(0));
                    match shared.register(1_000, Waker::noop()) {
                        Filing::Filed { key } => unpack(key).0,
                        other => panic!("not filed: {other:?}"),
                    }
                })
            })
            .join()
            .unwrap()
        })
        .collect();
    assert_ne!(shards[0], shards[1], "both threads filed into one shard");
}

/// A multi-thread runtime's workers each have their own shard.
#[test]
fn each_worker_of_a_runtime_has_its_own_shard() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let config = Config {
        shards: 2,
        ..Config::default()
    };
    let clock = Arc::new(crate::clock::ManualClock::new());
    let (shared, _driver) = timer(config, clock, None, Lifetime::Runtime);
    let (tx, rx) = std::sync::mpsc::channel();
    // Each worker files one entry, from a task that blocks it until both
    // have, so that both workers take part.
    let barrier = Arc::new(std::sync::Barrier::new(2));
    for _ in 0..2 {
        let (shared, tx, barrier) = (shared.clone(), tx.clone(), barrier.clone());
        rt.spawn(async move {
            let worker = tokio::runtime::worker_index().unwrap();
            let Filing::Filed { key } = shared.register(1_000, Waker::noop()) else {
                panic!("not filed");
            };
            tx.send((worker, unpack(key).0)).unwrap();
            barrier.wait();
        });
    }
    let mut filed: Vec<_> = (0..2).map(|_| rx.recv().unwrap()).collect();
    filed.sort_unstable();
    assert_eq!(filed, [(0, 0), (1, 1)]);
}
