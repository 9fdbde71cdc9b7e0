//! Unit tests of the driver's shared state.

use super::*;

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
    let (shared, driver) = Shared::new(Config::default(), Arc::new(crate::clock::TokioClock), None);
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
    assert_eq!(shard.deadlines.get(key), FIRED);
    assert_eq!(shared.pending(), 0);
}
