//! The index driven directly: scheduling, claims, leases and replay
//! against a log in memory.

use super::*;

/// A log in memory: frames appended as a committer would.
#[derive(Default)]
struct MemLog(Vec<u8>);

impl ReadAt for MemLog {
    fn read_at(&self, offset: u64, len: usize) -> io::Result<Vec<u8>> {
        let from = offset as usize;
        self.0
            .get(from..from + len)
            .map(<[u8]>::to_vec)
            .ok_or_else(|| io::Error::other("past the end"))
    }
}

impl MemLog {
    fn new() -> MemLog {
        MemLog(super::super::format::file_header().to_vec())
    }

    /// Writes a batch as a frame; returns the next batch.
    fn commit(&mut self, mut batch: Batch) -> Batch {
        if !batch.is_empty() {
            let header = super::super::format::frame_header(&batch.frame[FRAME_HEADER..]);
            batch.frame[..FRAME_HEADER].copy_from_slice(&header);
            assert_eq!(batch.base as usize, self.0.len());
            self.0.extend_from_slice(&batch.frame);
        }
        Batch::new(self.0.len() as u64)
    }

    /// A fresh index from the frames (as `store::replay` does).
    fn replay(&self, now: u64) -> Index {
        let mut index = Index::new(now);
        index.begin_replay();
        let mut at = super::super::format::FILE_HEADER;
        while at < self.0.len() {
            let len = u32::from_le_bytes(self.0[at + 4..at + 8].try_into().unwrap()) as usize;
            let body = &self.0[at + FRAME_HEADER..at + FRAME_HEADER + len];
            let mut records = super::super::format::Records::new(body);
            loop {
                let offset = (at + FRAME_HEADER + records.position()) as u64;
                let Some(record) = records.next_record() else {
                    break;
                };
                index
                    .apply(&record.unwrap(), offset + NEW_ID_AT as u64)
                    .unwrap();
            }
            at += FRAME_HEADER + len;
        }
        index.end_replay();
        index
    }
}

/// Everything observable, leases as a replay sees them (a dead
/// process' lease: no holder, ran out when it was taken): the jobs with
/// their histories, the lateness histogram, the counts per minute.
#[allow(clippy::type_complexity)]
fn dump(
    index: &mut Index,
    replayed: bool,
) -> (
    Vec<(u32, View)>,
    [u64; LATENESS_BUCKETS],
    u64,
    usize,
    Vec<(u64, u64, u64)>,
) {
    let mut live: Vec<(u32, View)> = index.live().collect();
    for (_, view) in &mut live {
        view.slot.timer = 0;
        view.slot.hash = 0;
        if let Some(lease) = &mut view.lease {
            if !replayed {
                lease.token = ORPHAN;
            }
            lease.expiry = 0;
        }
    }
    (
        live,
        index.lateness,
        index.waiting,
        index.dead.len(),
        index.throughput_from(0),
    )
}

/// The log compaction would write from `index` (every change written).
fn compact(index: &mut Index, log: &MemLog) -> MemLog {
    let mut out = MemLog::new();
    let mut body = Vec::new();
    Record::Lateness {
        counts: index.lateness,
    }
    .encode(&mut body);
    let minutes = super::super::format::encode_throughput(index.durable_throughput(&[]));
    Record::Throughput { minutes: &minutes }.encode(&mut body);
    let live: Vec<(u32, View)> = index.live().collect();
    for (slot, view) in live {
        let s = &view.slot;
        let bytes = log
            .read_at(s.data, usize::from(s.id_len) + s.payload_len as usize)
            .unwrap();
        let (id, payload) = bytes.split_at(usize::from(s.id_len));
        Index::rebuild(slot, &view, id, payload, &mut body);
    }
    let mut batch = Batch::new(out.0.len() as u64);
    batch.frame.extend_from_slice(&body);
    out.commit(batch);
    out
}

/// A dump without where ids and payloads are in the log.
#[allow(clippy::type_complexity)]
fn without_offsets(
    mut dump: (
        Vec<(u32, View)>,
        [u64; LATENESS_BUCKETS],
        u64,
        usize,
        Vec<(u64, u64, u64)>,
    ),
) -> (
    Vec<(u32, View)>,
    [u64; LATENESS_BUCKETS],
    u64,
    usize,
    Vec<(u64, u64, u64)>,
) {
    for (_, view) in &mut dump.0 {
        view.slot.data = 0;
    }
    dump
}

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// One random operation, like a caller's.
fn random_op(
    index: &mut Index,
    batch: &mut Batch,
    log: &MemLog,
    rng: &mut Rng,
    now: u64,
    held: &mut Vec<(Vec<u8>, u64)>,
) {
    let id = format!("j{}", rng.below(60)).into_bytes();
    let clock = Now {
        floor: now,
        ceil: now,
    };
    match rng.below(12) {
        0..=2 => {
            let due = now + rng.below(50);
            index
                .schedule(batch, log, clock, &id, Due::At(due), &id)
                .unwrap();
        }
        3 => {
            let jobs: Vec<(Vec<u8>, u64)> = (0..rng.below(5))
                .map(|_| (format!("j{}", rng.below(60)).into_bytes(), rng.below(20)))
                .collect();
            let chunk: Vec<(&[u8], u64, &[u8])> = jobs
                .iter()
                .map(|(id, d)| (id.as_slice(), *d, id.as_slice()))
                .collect();
            index
                .schedule_many(batch, log, clock, true, None, &chunk)
                .unwrap();
        }
        4 => {
            let holder: std::sync::Arc<str> = format!("worker-{}", rng.below(2)).into();
            let claim = index
                .claim(
                    batch,
                    log,
                    now,
                    1 + rng.below(3) as usize,
                    1 + rng.below(40),
                    3,
                    &holder,
                )
                .unwrap();
            for t in claim.jobs {
                let s = index.slots[t.slot as usize];
                let id = log
                    .read_at(s.data, s.id_len.into())
                    .ok()
                    .or_else(|| batch.bytes_at(s.data, s.id_len.into()).map(<[u8]>::to_vec))
                    .unwrap();
                held.push((id, t.token));
            }
        }
        5 if !held.is_empty() => {
            let (id, token) = held.swap_remove(rng.below(held.len() as u64) as usize);
            index.ack(batch, now, &id, token);
        }
        6 if !held.is_empty() => {
            let (id, token) = held.swap_remove(rng.below(held.len() as u64) as usize);
            index.retry(batch, clock, &id, token, rng.below(10), 3);
        }
        7 if !held.is_empty() => {
            let (id, token) = held.swap_remove(rng.below(held.len() as u64) as usize);
            index.fail(
                batch,
                clock,
                &id,
                token,
                rng.below(2) == 0,
                rng.below(10),
                3,
                "reason",
            );
        }
        8 if !held.is_empty() => {
            let (id, token) = held.swap_remove(rng.below(held.len() as u64) as usize);
            index.release(batch, now, &id, token);
        }
        9 => {
            index.cancel(batch, log, &id).unwrap();
        }
        10 => match rng.below(4) {
            0 => drop(index.promote(batch, log, now, &id).unwrap()),
            1 => drop(index.requeue(batch, log, now, &id).unwrap()),
            2 => drop(index.purge(batch, log, &id).unwrap()),
            _ => drop(index.requeue_all(batch, now, 2)),
        },
        _ => {
            if let Some((id, token)) = held.first() {
                index.extend(now, id, *token, 1 + rng.below(40));
            }
        }
    }
}

/// Replaying the log gives the index that wrote it (leases as a dead
/// process leaves them), after any run of operations; and a batch
/// taken back leaves the index as it was before the batch.
#[test]
fn replay_rebuilds_and_undo_takes_back() {
    for seed in 1..40u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let start = 1_700_000_000_000;
        let mut index = Index::new(start);
        let mut log = MemLog::new();
        let mut batch = Batch::new(log.0.len() as u64);
        let mut held = Vec::new();
        let mut now = start;
        for round in 0..60 {
            now += rng.below(15);
            index.advance(now);
            let before = dump(&mut index, false);
            let held_before = held.clone();
            for _ in 0..1 + rng.below(8) {
                random_op(&mut index, &mut batch, &log, &mut rng, now, &mut held);
            }
            if rng.below(4) == 0 {
                // A failed write: everything taken back.
                index.undo(std::mem::take(&mut batch.undo));
                batch = Batch::new(log.0.len() as u64);
                held = held_before;
                // Leases renewed in the batch are not logged, nor undone:
                // compare without expiries (dump drops them).
                assert_eq!(
                    dump(&mut index, false),
                    before,
                    "seed {seed} round {round}: undo"
                );
            } else {
                batch = log.commit(batch);
            }
            let mut replayed = log.replay(now);
            assert_eq!(
                dump(&mut replayed, true),
                dump(&mut index, false),
                "seed {seed} round {round}: replay"
            );
            if batch.is_empty() {
                // Compaction keeps it all: jobs, histories, lateness and
                // counts per minute.
                let mut compacted = compact(&mut index, &log).replay(now);
                assert_eq!(
                    without_offsets(dump(&mut compacted, true)),
                    without_offsets(dump(&mut index, false)),
                    "seed {seed} round {round}: compaction"
                );
            }
        }
    }
}
