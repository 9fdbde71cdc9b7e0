//! The bucket queue: a min-heap of non-empty bucket expirations.
//!
//! This is Kafka's `DelayQueue` trick. The driver never turns the wheel tick
//! by tick; it asks this queue for the earliest bucket and sleeps until then.
//! A bucket is pushed once per expiration (when its expiration changes), so
//! the queue holds at most one item per bucket and rotation.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Where a bucket lives: its level and its slot in that level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct BucketId {
    /// At most 64 levels: a wheel of size 2 covers `u64` in 64.
    pub(super) level: u8,
    pub(super) slot: u32,
}

/// Min-heap of `(expiration, bucket)`.
#[derive(Debug, Default)]
pub(super) struct BucketQueue {
    heap: BinaryHeap<Reverse<(u64, BucketId)>>,
}

impl BucketQueue {
    pub(super) fn push(&mut self, expiration: u64, bucket: BucketId) {
        self.heap.push(Reverse((expiration, bucket)));
    }

    /// The earliest expiration and its bucket, if any.
    pub(super) fn peek(&self) -> Option<(u64, BucketId)> {
        self.heap.peek().map(|Reverse(item)| *item)
    }

    /// Returns the heap's spare room.
    pub(super) fn shrink_to_fit(&mut self) {
        self.heap.shrink_to_fit();
    }

    pub(super) fn pop(&mut self) -> Option<(u64, BucketId)> {
        let item = self.heap.pop().map(|Reverse(item)| item);
        if self.heap.is_empty() && self.heap.capacity() > 1024 {
            self.heap = BinaryHeap::new();
        }
        item
    }
}
