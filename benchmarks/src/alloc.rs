//! A global allocator that counts the live heap, for the memory workloads
//! (`compare`'s 6, `compare_delay_queue`'s 4).
//!
//! The library only defines it: a program opts in by declaring it its
//! global allocator, so the others pay nothing:
//!
//! ```
//! use tiered_timer_benchmarks::alloc::{self, CountingAllocator};
//!
//! #[global_allocator]
//! static ALLOCATOR: CountingAllocator = CountingAllocator;
//!
//! let before = alloc::live_bytes();
//! let kept = vec![0u8; 1000];
//! assert_eq!(alloc::live_bytes() - before, 1000);
//! drop(kept);
//! ```
//!
//! Counting starts on. A program that also times things switches it off
//! ([`set_counting`]) outside its memory measurement: each allocation then
//! pays one relaxed load and shares no counter between threads.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};

/// `System`'s allocator, counting the bytes it hands out and takes back
/// while counting is on (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct CountingAllocator;

/// Whether allocations are counted.
static COUNTING: AtomicBool = AtomicBool::new(true);
static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: delegates to `System`, only adding bookkeeping of the sizes.
unsafe impl GlobalAlloc for CountingAllocator {
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

/// Bytes allocated and not yet freed while counting was on; only the
/// difference between two readings means anything (and nothing at all in
/// a program whose global allocator is not [`CountingAllocator`]).
pub fn live_bytes() -> isize {
    LIVE.load(Ordering::SeqCst)
}

/// Switches counting on or off (it starts on).
pub fn set_counting(on: bool) {
    COUNTING.store(on, Ordering::SeqCst);
}
