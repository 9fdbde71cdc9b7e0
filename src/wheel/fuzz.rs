//! Fuzz harness for the wheel core: bytes in, operations out, every step
//! checked against a reference model.
//!
//! [`run`] decodes its input deterministically (a byte stream read front to
//! back; running out of bytes ends the run, so every input is valid):
//!
//! * a header picks the wheel size (2 and 3 are favoured: they force many
//!   levels and cascades) and the tick, in nanoseconds (1 ns up to about a
//!   second, including odd ticks such as 1.5 ms);
//! * then operations: insert (filed, or unfiled as for a deadline that
//!   never comes), cancel, unfile, reset earlier, reset later, and advance
//!   by small, medium, huge or near-`u64::MAX` amounts. Deadlines may lie in
//!   the past, at "now", or near `u64::MAX`.
//!
//! Time is kept in nanoseconds, as the async layer does: a deadline `d`
//! becomes tick `ceil(d / tick)` and "now" becomes `floor(now / tick)`.
//! After every step the harness checks:
//!
//! * each entry fires exactly once unless cancelled (an unfiled entry not
//!   at all until it is reset);
//! * never before its deadline (in nanoseconds, not just ticks);
//! * no later than one tick after it became due: after advancing to `now`,
//!   an entry has fired if and only if its deadline tick is at or before
//!   `now`'s tick;
//! * entries handed out by one advance come in deadline order (those
//!   already overdue when filed first, in filing order);
//! * the wheel's entry count matches the model's, and
//!   `next_expiration` is never after the earliest live deadline.
//!
//! A violation panics, which is what the fuzzer looks for. The crate's unit
//! tests replay the committed corpus (`fuzz/corpus/wheel/`) and a seeded
//! sweep through the same function.

use std::collections::BTreeMap;

use super::{Key, Wheel};

/// Reads the input front to back; `None` once it is used up.
struct Bytes<'a> {
    data: &'a [u8],
}

impl Bytes<'_> {
    fn u8(&mut self) -> Option<u8> {
        let (&first, rest) = self.data.split_first()?;
        self.data = rest;
        Some(first)
    }

    /// Up to `n` bytes, little-endian (fewer if the input ends).
    fn uint(&mut self, n: usize) -> Option<u64> {
        let mut value = 0u64;
        for i in 0..n {
            value |= u64::from(self.u8()?) << (8 * i);
        }
        Some(value)
    }
}

/// A span of nanoseconds of one of several magnitudes.
fn span(bytes: &mut Bytes<'_>, tick: u64) -> Option<u64> {
    Some(match bytes.u8()? % 8 {
        0 => 0,
        1 => bytes.uint(1)?,
        // A few ticks, off the tick grid by a random amount.
        2 => (bytes.uint(1)? % 16) * tick + bytes.uint(2)? % tick,
        3 => bytes.uint(2)? * tick,
        4 => bytes.uint(3)?.saturating_mul(tick),
        5 => bytes.uint(5)?.saturating_mul(tick),
        6 => bytes.uint(8)?,
        // Near the end of time.
        _ => u64::MAX - bytes.uint(2)?,
    })
}

/// What the model knows of a live entry.
#[derive(Debug, Clone, Copy)]
struct Live {
    key: Key,
    /// The deadline in nanoseconds.
    deadline: u64,
    /// Filed (will come due); an unfiled entry waits for a reset.
    filed: bool,
}

struct Harness {
    wheel: Wheel<u32>,
    tick: u64,
    /// "Now" in nanoseconds.
    now: u64,
    live: BTreeMap<u32, Live>,
    next_id: u32,
}

impl Harness {
    fn ticks_ceil(&self, ns: u64) -> u64 {
        ns.div_ceil(self.tick)
    }

    fn ticks_floor(&self, ns: u64) -> u64 {
        ns / self.tick
    }

    /// The `index`-th live entry, if any.
    fn pick(&self, index: u8) -> Option<u32> {
        if self.live.is_empty() {
            return None;
        }
        let n = self.live.len();
        self.live.keys().nth(usize::from(index) % n).copied()
    }

    fn insert(&mut self, deadline: u64, filed: bool) {
        let id = self.next_id;
        self.next_id += 1;
        let tick_deadline = self.ticks_ceil(deadline);
        let key = if filed {
            let (key, due_at) = self.wheel.insert(tick_deadline, id);
            assert!(
                due_at <= tick_deadline.max(self.wheel.elapsed()),
                "insert({tick_deadline}) is due at {due_at}, after its deadline"
            );
            key
        } else {
            // As the driver does for deadlines that never come.
            self.wheel.insert_unfiled(tick_deadline, id)
        };
        self.live.insert(
            id,
            Live {
                key,
                deadline,
                filed,
            },
        );
    }

    fn unfile(&mut self, id: u32) {
        let entry = self.live.get_mut(&id).expect("picked from the model");
        entry.filed = false;
        self.wheel.unfile(entry.key);
    }

    fn cancel(&mut self, id: u32) {
        let entry = self.live.remove(&id).expect("picked from the model");
        assert_eq!(
            self.wheel.remove(entry.key),
            id,
            "cancel removed another entry"
        );
    }

    fn reset(&mut self, id: u32, deadline: u64) {
        let tick_deadline = self.ticks_ceil(deadline);
        let entry = self.live.get_mut(&id).expect("picked from the model");
        entry.deadline = deadline;
        entry.filed = true;
        let key = entry.key;
        let due_at = self.wheel.reset(key, tick_deadline);
        assert!(
            due_at <= tick_deadline.max(self.wheel.elapsed()),
            "reset({tick_deadline}) is due at {due_at}, after its deadline"
        );
    }

    fn advance(&mut self, by: u64) {
        self.now = self.now.saturating_add(by);
        let now_tick = self.ticks_floor(self.now);
        // Entries already overdue when this advance starts (filed with a
        // past deadline) come first, in the order they were filed; the rest
        // in deadline order.
        let start = self.wheel.elapsed();
        let mut last_deadline = 0;
        while let Some(key) = self.wheel.poll(now_tick) {
            let id = self.wheel.remove(key);
            let entry = self
                .live
                .remove(&id)
                .unwrap_or_else(|| panic!("entry {id} fired twice, or after cancel"));
            assert_eq!(entry.key, key, "entry {id} fired under another key");
            assert!(
                entry.deadline <= self.now,
                "entry {id} fired early: deadline {} ns, now {} ns (tick {} ns)",
                entry.deadline,
                self.now,
                self.tick
            );
            let deadline_tick = self.ticks_ceil(entry.deadline).max(start);
            assert!(
                deadline_tick >= last_deadline,
                "entry {id} (tick {deadline_tick}) fired after one due at tick {last_deadline}"
            );
            last_deadline = deadline_tick;
        }
        assert!(self.wheel.elapsed() >= now_tick, "time did not reach now");
        for (id, entry) in self.live.iter().filter(|(_, entry)| entry.filed) {
            let deadline_tick = self.ticks_ceil(entry.deadline);
            assert!(
                deadline_tick > now_tick,
                "entry {id} is late: deadline {} ns (tick {deadline_tick}) not fired at {} ns \
                 (tick {now_tick}, tick size {} ns)",
                entry.deadline,
                self.now,
                self.tick
            );
            // The same in nanoseconds: not more than a tick past due.
            assert!(self.now.saturating_sub(entry.deadline) < self.tick);
        }
    }

    /// The checks that hold between any two steps.
    fn check(&mut self) {
        assert_eq!(self.wheel.len(), self.live.len(), "pending count");
        let earliest = self
            .live
            .values()
            .filter(|entry| entry.filed)
            .map(|entry| self.ticks_ceil(entry.deadline))
            .min();
        let next = self.wheel.next_expiration();
        match earliest {
            None => assert_eq!(next, None, "nothing filed, yet something is due"),
            Some(earliest) => {
                let next = next.expect("a filed entry, yet nothing is due");
                assert!(
                    next <= earliest.max(self.wheel.elapsed()),
                    "next expiration {next} is after the earliest deadline {earliest}"
                );
            }
        }
    }
}

/// Decodes `data` into a wheel configuration and operations, runs them
/// against the model, and panics on any divergence.
pub(crate) fn run(data: &[u8]) {
    let mut bytes = Bytes { data };
    let Some(size_byte) = bytes.u8() else { return };
    let wheel_size = match size_byte % 8 {
        0..=2 => 2,
        3 | 4 => 3,
        5 => 4 + usize::from(size_byte >> 3) % 61,
        6 => 64,
        _ => 512,
    };
    let Some(tick_byte) = bytes.u8() else { return };
    let tick = match tick_byte % 8 {
        0..=2 => 1,
        3 => 1_000_000,
        4 => 1_500_000,
        5 => 1 + u64::from(tick_byte >> 3),
        6 => 999_983,
        _ => 1_000_000_000,
    };
    let mut harness = Harness {
        wheel: Wheel::new(wheel_size),
        tick,
        now: 0,
        live: BTreeMap::new(),
        next_id: 0,
    };
    while let Some(op) = bytes.u8() {
        let done = (|| -> Option<()> {
            match op % 8 {
                0..=2 => {
                    let past = op & 0x80 != 0;
                    let span = span(&mut bytes, tick)?;
                    let deadline = if past {
                        harness.now.saturating_sub(span)
                    } else {
                        harness.now.saturating_add(span)
                    };
                    harness.insert(deadline, op & 0x40 == 0);
                }
                3 => {
                    if let Some(id) = harness.pick(bytes.u8()?) {
                        if op & 0x80 == 0 {
                            harness.cancel(id);
                        } else {
                            harness.unfile(id);
                        }
                    }
                }
                4 => {
                    // Reset earlier: towards now, or into the past.
                    if let Some(id) = harness.pick(bytes.u8()?) {
                        let span = span(&mut bytes, tick)?;
                        let old = harness.live[&id].deadline;
                        harness.reset(id, old.saturating_sub(span));
                    }
                }
                5 => {
                    // Reset later.
                    if let Some(id) = harness.pick(bytes.u8()?) {
                        let span = span(&mut bytes, tick)?;
                        let old = harness.live[&id].deadline.max(harness.now);
                        harness.reset(id, old.saturating_add(span));
                    }
                }
                _ => {
                    let span = span(&mut bytes, tick)?;
                    harness.advance(span);
                }
            }
            Some(())
        })();
        if done.is_none() {
            break;
        }
        harness.check();
    }
    // Everything left fires exactly once at the end of time, unless it is
    // past the last tick the wheel can name.
    harness.advance(u64::MAX);
    harness.check();
    let ids: Vec<u32> = harness.live.keys().copied().collect();
    for id in ids {
        harness.cancel(id);
    }
    harness.check();
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::run;

    /// Replays every input the fuzzer kept (`fuzz/corpus/wheel/`).
    #[test]
    fn corpus_replays_cleanly() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/wheel");
        let mut count = 0;
        for file in std::fs::read_dir(&dir).expect("the committed corpus") {
            let path = file.unwrap().path();
            let data = std::fs::read(&path).unwrap();
            let outcome = std::panic::catch_unwind(|| run(&data));
            assert!(outcome.is_ok(), "corpus input {} fails", path.display());
            count += 1;
        }
        assert!(
            count >= 100,
            "only {count} corpus inputs in {}",
            dir.display()
        );
    }

    /// A seeded sweep of pseudo-random inputs through the same harness.
    #[test]
    fn seeded_sweep() {
        // xorshift64*: deterministic, no dependency.
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            state.wrapping_mul(0x2545_F491_4F6C_DD1D)
        };
        let mut data = Vec::new();
        for _ in 0..2000 {
            let len = (next() % 300) as usize;
            data.clear();
            data.extend((0..len).map(|_| next() as u8));
            let outcome = std::panic::catch_unwind(|| run(&data));
            assert!(outcome.is_ok(), "sweep input fails: {data:?}");
        }
    }

    #[test]
    fn empty_and_tiny_inputs() {
        run(&[]);
        run(&[0]);
        run(&[0, 0]);
        run(&[0, 0, 0]);
    }
}
