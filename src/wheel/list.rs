//! Intrusive doubly linked lists threaded through the wheel's slab.
//!
//! A bucket does not own a `Vec` of its entries: each entry carries its own
//! `prev`/`next` keys, so a timer joins or leaves a bucket in O(1) and costs
//! no allocation beyond its slab slot.

use slab::Slab;

use super::Entry;

/// A slab key used as a list link; `NIL` ends the list.
pub(super) type Link = usize;

/// The "no entry" link.
pub(super) const NIL: Link = usize::MAX;

/// The links an entry carries for whichever list currently holds it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Links {
    pub(super) prev: Link,
    pub(super) next: Link,
}

impl Links {
    pub(super) const UNLINKED: Links = Links {
        prev: NIL,
        next: NIL,
    };
}

/// A FIFO list of slab keys. The list only stores its ends; the entries hold
/// the rest, so every operation needs the slab.
#[derive(Debug, Clone, Copy)]
pub(super) struct List {
    head: Link,
    tail: Link,
}

impl List {
    pub(super) const fn new() -> List {
        List {
            head: NIL,
            tail: NIL,
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.head == NIL
    }

    /// Appends `key`, which must not be in any list.
    pub(super) fn push_back<T>(&mut self, entries: &mut Slab<Entry<T>>, key: Link) {
        let old_tail = self.tail;
        entries[key].links = Links {
            prev: old_tail,
            next: NIL,
        };
        if old_tail == NIL {
            self.head = key;
        } else {
            entries[old_tail].links.next = key;
        }
        self.tail = key;
    }

    /// Removes and returns the first key.
    pub(super) fn pop_front<T>(&mut self, entries: &mut Slab<Entry<T>>) -> Option<Link> {
        if self.head == NIL {
            return None;
        }
        let key = self.head;
        self.unlink(entries, key);
        Some(key)
    }

    /// Removes `key`, which must be in this list, in O(1).
    pub(super) fn unlink<T>(&mut self, entries: &mut Slab<Entry<T>>, key: Link) {
        let Links { prev, next } = entries[key].links;
        if prev == NIL {
            debug_assert_eq!(self.head, key, "unlinking a key from the wrong list");
            self.head = next;
        } else {
            entries[prev].links.next = next;
        }
        if next == NIL {
            debug_assert_eq!(self.tail, key, "unlinking a key from the wrong list");
            self.tail = prev;
        } else {
            entries[next].links.prev = prev;
        }
        entries[key].links = Links::UNLINKED;
    }

    /// Takes the whole list, leaving this one empty.
    pub(super) fn take(&mut self) -> List {
        std::mem::replace(self, List::new())
    }
}
