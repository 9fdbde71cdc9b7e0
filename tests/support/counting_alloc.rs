//! A global allocator that counts the live heap, for the memory tests
//! (`tests/soak.rs`, `tests/delay_queue_memory.rs`). The benchmark member
//! has its own (`tiered_timer_benchmarks::alloc`): this crate's tests must
//! build from the published package alone.
//!
//! Including this file makes `Counting` the global allocator of that whole
//! binary, so it goes in a test or example of its own, with
//! `#[path = ".../support/counting_alloc.rs"] mod counting_alloc;` (not
//! through `support/mod.rs`, which every test shares).

#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};

struct Counting;

/// Whether allocations are counted: on unless switched off, so that a
/// benchmark that times other things pays one relaxed load per allocation
/// and no shared counter.
static COUNTING: AtomicBool = AtomicBool::new(true);
static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: delegates to `System`, only adding bookkeeping of the sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-(layout.size() as isize));
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size as isize - layout.size() as isize);
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

fn count(bytes: isize) {
    if COUNTING.load(Ordering::Relaxed) {
        LIVE.fetch_add(bytes, Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Bytes allocated and not yet freed while counting was on (only
/// differences between two readings mean anything).
pub fn live_bytes() -> isize {
    LIVE.load(Ordering::SeqCst)
}

/// Switches counting on or off (it starts on).
pub fn set_counting(on: bool) {
    COUNTING.store(on, Ordering::SeqCst);
}
