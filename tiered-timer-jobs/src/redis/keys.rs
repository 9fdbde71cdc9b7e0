//! Key layout: every key a queue uses, in one place.
//!
//! A queue of one partition keeps everything under the hash tag `{name}`;
//! partition `p` of a queue of `n > 1` partitions under `{name#p}`. A hash
//! tag is what Redis Cluster hashes, so the keys of one partition always
//! live in one slot and a Lua script may touch all of them at once. `#`,
//! `{` and `}` are not allowed in queue names, so two queues never share
//! a tag.
//!
//! Per partition (`T` is the tag):
//!
//! | key | type | holds |
//! |---|---|---|
//! | `ttr:T:timeline` | sorted set | every waiting job, scored by its due time (ms since the Unix epoch, Redis' clock), and every leased job, scored by 2^52 + its lease expiry: one `ZRANGE` finds the next due jobs, one `ZADD` moves a job between the two ranges |
//! | `ttr:T:job` | hash | per job `p<id>` → payload; `c<id>` → when it was scheduled (ms, Redis' clock); `l<id>` → `attempts token deadline claimed holder` while leased (`attempts token deadline` if claimed by an earlier version: no claim time or holder), `attempts` for a job delivered before that waits again or is dead (absent for a job never delivered); `e<id>` → its last error (a worker's reason, or why it died); `h<id>` → its ended attempts, oldest first, at most 16 (absent for a job none of whose attempts ended; see `src/redis/lua/history.lua`). And `m` → the partition's `armed lease_lb` (see below) |
//! | `ttr:T:dead` | sorted set | dead letters, scored by when they died |
//! | `ttr:T:marker` | sorted set | wake-up batons, each named and scored by the time its holder is to claim (usually one; see `src/redis/wake/`) |
//! | `ttr:T:lateness` | string (`BITFIELD`) | how late claims were: one saturating `u32` counter per bucket of [`LATENESS_BOUNDS_MS`], written with one `BITFIELD` per claim batch (see `src/redis/lua/record_lateness.lua`) |
//! | `ttr:T:recur` | hash | the partition's recurrences: per recurrence `d<name>` its definition, `p<name>` its payload, `s<name>` where its chain is, `t<name>` its next occurrences, computed by clients (see `src/redis/lua/recur_lib.lua`) |
//! | `ttr:T:throughput` | hash | jobs processed (`p<minute>`) and attempts failed (`f<minute>`) per minute since the epoch, by Redis' clock, one `HINCRBY` in the script that acks or ends the attempt; `c` → the oldest minute that may still have counts: minutes more than a day old are deleted by the first count of a minute (see `src/redis/lua/throughput.lua`) |
//!
//! A recurrence lives in the partition of its name, and so do its
//! occurrences, whose ids (`name@2026-03-29T01:00:00Z`) are placed by the
//! name they start with ([`partition_of`]): the claim of one schedules the
//! next in the same script.
//!
//! A waiting job is one timeline member and its `p` and `c` fields,
//! nothing more (memory per pending job). `m` holds the time of the baton that is the
//! head of the partition's wake-up chain (`armed`) and a lower bound of the
//! lease expiries (`lease_lb`), so a claim looks for expired leases only
//! when one may exist.
//!
//! And one key for all queues, outside any hash tag:
//!
//! | key | type | holds |
//! |---|---|---|
//! | [`QUEUES`] (`ttr:queues`) | hash | queue name → its partition count, recorded by the queue's first connect (every later handle adopts it, or must ask for the same count), so that `ttr` and its dashboard find every queue and how it is partitioned |

use crate::data::recurrence::parse_occurrence_id;

/// The registry of queues: name → partition count (see the module docs).
pub(crate) const QUEUES: &str = "ttr:queues";

/// The keys of one partition, in the order the scripts expect them
/// (`KEYS[1]` .. `KEYS[7]`; the fifth, the lateness histogram, is for the
/// claim script's `record_lateness`; the sixth, the recurrences, for the
/// claim's, cancel's and the recurrence scripts; the seventh, the counts
/// per minute, for the scripts that ack or end attempts).
#[derive(Debug, Clone)]
pub(crate) struct Keys {
    pub(crate) ordered: [String; 7],
}

impl Keys {
    /// The keys of partition `partition` of `partitions` of queue `name`.
    pub(crate) fn new(name: &str, partition: u32, partitions: u32) -> Keys {
        let tag = if partitions == 1 {
            format!("{{{name}}}")
        } else {
            format!("{{{name}#{partition}}}")
        };
        let key = |what: &str| format!("ttr:{tag}:{what}");
        Keys {
            ordered: [
                key("timeline"),
                key("job"),
                key("dead"),
                key("marker"),
                key("lateness"),
                key("recur"),
                key("throughput"),
            ],
        }
    }

    /// The waiting and leased jobs' sorted set.
    pub(crate) fn timeline(&self) -> &str {
        &self.ordered[0]
    }

    /// The job hash.
    pub(crate) fn job(&self) -> &str {
        &self.ordered[1]
    }

    /// The dead letters' sorted set.
    pub(crate) fn dead(&self) -> &str {
        &self.ordered[2]
    }

    /// The wake-up baton's sorted set.
    pub(crate) fn marker(&self) -> &str {
        &self.ordered[3]
    }

    /// The lateness histogram (`KEYS[5]`).
    pub(crate) fn lateness(&self) -> &str {
        &self.ordered[4]
    }

    /// The recurrences' hash (`KEYS[6]`).
    pub(crate) fn recur(&self) -> &str {
        &self.ordered[5]
    }
}

/// A leased job's score in the timeline is this plus its lease expiry.
pub(crate) const LEASED: u64 = 1 << 52;

/// The Redis Cluster slot of `key`: CRC16 (XMODEM) of its hash tag (or of
/// the whole key without one) modulo 16384, as Redis computes it.
pub(crate) fn slot_of(key: &str) -> u16 {
    let bytes = key.as_bytes();
    let hashed = match bytes.iter().position(|&b| b == b'{') {
        Some(open) => match bytes[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &bytes[open + 1..open + 1 + len],
            _ => bytes,
        },
        None => bytes,
    };
    let mut crc: u16 = 0;
    for &byte in hashed {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
}

/// The partition of a job id: FNV-1a (stable across processes, versions
/// and platforms, unlike std's hasher) modulo the partition count. A
/// recurrence's occurrence is placed by the recurrence's name, as the
/// recurrence itself ([`partition_of_name`]).
pub(crate) fn partition_of(id: &str, partitions: u32) -> u32 {
    match parse_occurrence_id(id) {
        Some((name, _)) => partition_of_name(name, partitions),
        None => partition_of_name(id, partitions),
    }
}

/// FNV-1a of `name` modulo the partition count: a plain job's partition
/// by its id, a recurrence's by its name.
pub(crate) fn partition_of_name(name: &str, partitions: u32) -> u32 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in name.as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    (hash % u64::from(partitions)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_partition_shares_the_queue_tag() {
        let keys = Keys::new("orders", 0, 1);
        for key in &keys.ordered {
            assert!(key.starts_with("ttr:{orders}:"), "{key}");
        }
    }

    #[test]
    fn partitions_have_their_own_tags() {
        let a = Keys::new("orders", 0, 4);
        let b = Keys::new("orders", 3, 4);
        assert!(a.timeline().starts_with("ttr:{orders#0}:"));
        assert!(b.marker().starts_with("ttr:{orders#3}:"));
        assert_eq!(b.recur(), "ttr:{orders#3}:recur");
    }

    #[test]
    fn slots_are_redis_cluster_slots() {
        // Values from `CLUSTER KEYSLOT` of Redis 7.
        assert_eq!(slot_of("foo"), 12182);
        assert_eq!(slot_of("{user1000}.following"), slot_of("user1000"));
        assert_eq!(slot_of("ttr:{orders}:due"), slot_of("orders"));
        assert_eq!(slot_of("{}x"), slot_of("{}x")); // empty tag: the whole key
        assert_ne!(slot_of("{}x"), slot_of(""));
    }

    #[test]
    fn partition_is_stable_and_spread() {
        // FNV-1a of "order-42" is fixed: a change of hash would move ids
        // of existing queues to other partitions.
        // (Reference values from an independent FNV-1a: 0x7d1deb86a05662d4.)
        assert_eq!(partition_of("order-42", 1), 0);
        assert_eq!(partition_of("order-42", 8), 4);
        assert_eq!(partition_of("order-42", 1024), 724);
        assert_eq!(partition_of("", 7), 2);
        let mut seen = [0u32; 4];
        for i in 0..4000 {
            seen[partition_of(&format!("job-{i}"), 4) as usize] += 1;
        }
        assert!(seen.iter().all(|&n| n > 800), "{seen:?}");
    }

    #[test]
    fn occurrences_live_with_their_recurrence() {
        for n in [2, 8, 1024] {
            let home = partition_of_name("nightly", n);
            for at in ["2026-03-29T01:00:00Z", "2031-12-31T23:59:59.999Z"] {
                assert_eq!(partition_of(&format!("nightly@{at}"), n), home);
            }
        }
        // Ids that only look alike are plain jobs.
        assert_eq!(
            partition_of("user@example.com", 8),
            partition_of_name("user@example.com", 8)
        );
    }
}
