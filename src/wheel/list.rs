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
///
/// Stored as `u32` (every timer carries two), so a wheel holds fewer than
/// `u32::MAX` entries; see [`MAX_ENTRIES`].
#[derive(Debug, Clone, Copy)]
pub(super) struct Links {
    prev: u32,
    next: u32,
}

/// Most entries a wheel holds: far more than fit in memory at about a
/// hundred bytes each.
pub(crate) const MAX_ENTRIES: usize = u32::MAX as usize;

/// Stores a link in 32 bits (`NIL` as `u32::MAX`).
fn narrow(link: Link) -> u32 {
    if link == NIL {
        u32::MAX
    } else {
        debug_assert!(link < MAX_ENTRIES);
        link as u32
    }
}

fn widen(link: u32) -> Link {
    if link == u32::MAX {
        NIL
    } else {
        link as Link
    }
}

impl Links {
    pub(super) const UNLINKED: Links = Links {
        prev: u32::MAX,
        next: u32::MAX,
    };

    fn new(prev: Link, next: Link) -> Links {
        Links {
            prev: narrow(prev),
            next: narrow(next),
        }
    }

    fn prev(self) -> Link {
        widen(self.prev)
    }

    fn next(self) -> Link {
        widen(self.next)
    }
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
    #[inline]
    pub(super) fn push_back<T>(&mut self, entries: &mut Slab<Entry<T>>, key: Link) {
        entries[key].links = self.link_back(entries, key);
    }

    /// Appends `key`, which must not be in any list, writing only its
    /// neighbour's links and the list's ends; returns the links `key`
    /// must carry. `key` need not be in the slab yet: the wheel links a
    /// new entry before inserting it, so the entry is written once.
    #[inline]
    pub(super) fn link_back<T>(&mut self, entries: &mut Slab<Entry<T>>, key: Link) -> Links {
        let old_tail = self.tail;
        if old_tail == NIL {
            self.head = key;
        } else {
            entries[old_tail].links.next = narrow(key);
        }
        self.tail = key;
        Links::new(old_tail, NIL)
    }

    /// The first key, if any.
    pub(super) fn front(&self) -> Option<Link> {
        (self.head != NIL).then_some(self.head)
    }

    /// The key after `key`, which must be in this list.
    pub(super) fn next<T>(&self, entries: &Slab<Entry<T>>, key: Link) -> Option<Link> {
        let next = entries[key].links.next();
        (next != NIL).then_some(next)
    }

    /// The keys in order, first to last.
    pub(super) fn iter<'a, T>(
        &self,
        entries: &'a Slab<Entry<T>>,
    ) -> impl Iterator<Item = Link> + 'a {
        let mut next = self.head;
        std::iter::from_fn(move || {
            if next == NIL {
                return None;
            }
            let key = next;
            next = entries[key].links.next();
            Some(key)
        })
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

    /// The last key, if any.
    pub(super) fn back(&self) -> Option<Link> {
        (self.tail != NIL).then_some(self.tail)
    }

    /// The key before `key`, which must be in this list.
    pub(super) fn prev<T>(&self, entries: &Slab<Entry<T>>, key: Link) -> Option<Link> {
        let prev = entries[key].links.prev();
        (prev != NIL).then_some(prev)
    }

    /// Removes `key`, which must be in this list, in O(1).
    #[inline]
    pub(super) fn unlink<T>(&mut self, entries: &mut Slab<Entry<T>>, key: Link) {
        let links = entries[key].links;
        self.unlink_neighbours(entries, key, links);
        entries[key].links = Links::UNLINKED;
    }

    /// Removes `key`, whose links are `links`, from this list, writing only
    /// its neighbours and the list's ends (for an entry already taken out of
    /// the slab).
    #[inline]
    pub(super) fn unlink_neighbours<T>(
        &mut self,
        entries: &mut Slab<Entry<T>>,
        key: Link,
        links: Links,
    ) {
        let (prev, next) = (links.prev(), links.next());
        if prev == NIL {
            debug_assert_eq!(self.head, key, "unlinking a key from the wrong list");
            self.head = next;
        } else {
            entries[prev].links.next = narrow(next);
        }
        if next == NIL {
            debug_assert_eq!(self.tail, key, "unlinking a key from the wrong list");
            self.tail = prev;
        } else {
            entries[next].links.prev = narrow(prev);
        }
    }
}
