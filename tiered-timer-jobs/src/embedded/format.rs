//! The delay log's format: a file header, then frames of records.
//!
//! ```text
//! file   := header frame*
//! header := "ttrjobs\0" version:u32 crc:u32            (16 bytes; crc of the first 12)
//! frame  := magic:u32 len:u32 body_crc:u32 head_crc:u32 body   (head_crc of the first 12)
//! body   := record+
//! ```
//!
//! Integers are little-endian. One frame is one group commit: written with
//! one `write`, made durable with one `fdatasync`, so it is on disk whole
//! or, after a crash in the middle, torn; its records take effect together
//! or not at all (a [`Queue::schedule_many`](crate::Queue::schedule_many)
//! chunk is one frame's records, so it is all or nothing).
//!
//! Records name a job by its *slot* (its place in the in-memory index,
//! stable for the job's life and kept by compaction) and the slot's
//! *generation* (bumped each time the slot takes a new job), so replay
//! never compares ids and a record that names the wrong job is caught:
//!
//! | tag | record | fields | effect |
//! |---|---|---|---|
//! | 1 | `New` | slot, gen, due, id, payload | a job, waiting until `due` (ms since the epoch) |
//! | 2 | `Wait` | slot, gen, due, attempts | the job waits again (retry, release, promote, requeue) |
//! | 3 | `Lease` | slot, gen, attempts, at, redelivery | the job was claimed at `at` (its `attempts`-th delivery) |
//! | 4 | `Dead` | slot, gen, at, attempts | the job died at `at` |
//! | 5 | `Error` | slot, gen, reason | its last error (empty: none) |
//! | 6 | `Remove` | slot, gen | the job is gone (cancel, purge; an ack in version 1) |
//! | 7 | `Lateness` | 20 counters | the lateness histogram as compaction found it |
//! | 16 | `RecurDefine` | name, version, paused, spec, zone, policy, payload | a recurrence registered, replaced, paused or resumed |
//! | 17 | `RecurState` | name, pending (at, slot, gen), last, run | where its chain is: the occurrence waiting (0: none), the last delivered, missed ones delivered in a row |
//! | 18 | `RecurRemove` | name | the recurrence is gone |
//!
//! Recurrence records name a recurrence by its name (their tags start at
//! 16, leaving the low ones to jobs' records). A claim that takes a
//! recurrence's waiting occurrence writes, in its frame, the occurrence's
//! `Lease` (or `Remove`, if skipped), the next occurrence's `New` and the
//! recurrence's `RecurState`: the chain moves in one frame or not at all.
//! | 8 | `New` (v2) | as 1, then created | as 1, and when it was created |
//! | 9 | `Lease` (v2) | as 3, then holder (u8 length) | as 3, and who claimed it |
//! | 10 | `Wait` (v2) | as 2, then at, why | as 2, and when, and what ended the attempt (0: nothing, 1 retried, 2 failed, 3 released) |
//! | 11 | `Acked` | slot, gen, at | the job was acked at `at`: gone |
//! | 12 | `History` | slot, gen, ended attempts | the job's ended attempts as compaction found them |
//! | 13 | `Throughput` | minutes | the counts per minute as compaction found them |
//!
//! A job's history and the queue's counts per minute are derived from
//! these as they are replayed (a claim starts an attempt; the wait, death,
//! redelivery or ack that follows ends it), so they cost a few bytes per
//! record, and compaction keeps them with `History` and `Throughput`.
//!
//! # Versions
//!
//! Version 2 (records 8 to 13) records the holder of a claim, when an
//! attempt ended and how, when a job was created and when it was acked;
//! version 1 had records 1 to 7. This code reads both and writes version 2
//! records only: opening a version 1 log to write rewrites its header to
//! version 2 first (one write inside its first sector, synced), so a build
//! that reads version 1 only says so instead of taking the new records
//! for damage. What a version 1 log did not record (holders, the end of a
//! retried or released attempt, creation times, acks' minutes) is missing
//! from the histories and counts derived from it.
//!
//! Lease expiries and tokens are not logged: a store is open in one
//! process at a time (its lock), so when it opens every lease found is a
//! dead process' and has run out (see `index.rs`).
//!
//! # Torn writes and damage
//!
//! Reading stops at the first frame that is not whole and valid. If whole
//! frames follow it anywhere (at any byte offset), it is damage to data
//! that was acknowledged: an error naming the file and the byte offset.
//! Otherwise it is the log's tail, and one of two things ([`Tail`]):
//!
//! * **Torn**: a write a crash cut short. Frames are written one at a
//!   time, each synced before the next, so only the last can be torn, and
//!   a power cut tears it at sector granularity: the lost sectors read
//!   back as zeros (the file grew there; a length can reach the disk
//!   without its data) or are missing (the file is short). So a tail too
//!   short for a frame header, a frame that runs past the end of the file,
//!   or a frame (or a damaged header) with a sector-sized part of zeros is
//!   torn. It was never acknowledged, and opening the store cuts it off,
//!   with a warning.
//! * **Damaged**: a whole frame (its length fits in the file) whose
//!   checksum fails with no part of zeros, or a damaged header that is not
//!   zeros. It was written whole, maybe synced and acknowledged, and
//!   damaged since (bit rot, a bad disk, an editor). It is never cut
//!   silently: opening the store refuses ([`StoreError::Corrupt`] naming
//!   `ttr repair`), a read-only look leaves it where it is, and a repair
//!   moves its bytes to a quarantine file beside the log.
//!
//! A damaged frame that happens to hold a sector-sized part of zeros of
//! its own is taken for a torn one: the format cannot tell them apart.

use std::io::{self, Read};
use std::path::Path;

use super::error::StoreError;
use super::fs::LogFile;

/// The file's first bytes.
pub(crate) const FILE_MAGIC: [u8; 8] = *b"ttrjobs\0";
/// The format version this code writes (see the module docs).
pub(crate) const VERSION: u32 = 2;
/// The oldest format version this code reads.
pub(crate) const OLDEST_VERSION: u32 = 1;
/// The file header's length.
pub(crate) const FILE_HEADER: usize = 16;
/// A frame's first four bytes ("TTRF" read as little-endian bytes).
pub(crate) const FRAME_MAGIC: u32 = u32::from_le_bytes(*b"TTRF");
/// A frame header's length.
pub(crate) const FRAME_HEADER: usize = 16;
/// The largest frame body: far above a group commit's (a chunk of
/// `schedule_many` is at most about 4 MiB of payload).
pub(crate) const MAX_FRAME: u32 = 1 << 30;
/// Counters in a [`Record::Lateness`].
pub(crate) const LATENESS_BUCKETS: usize = 20;
/// Where a `New` record's id starts, from the record's first byte (in
/// both versions of the record: the creation time follows the payload).
pub(crate) const NEW_ID_AT: usize = 1 + 4 + 4 + 8 + 2 + 4;

const NEW: u8 = 1;
const WAIT: u8 = 2;
const LEASE: u8 = 3;
const DEAD: u8 = 4;
const ERROR: u8 = 5;
const REMOVE: u8 = 6;
const LATENESS: u8 = 7;
const RECUR_DEFINE: u8 = 16;
const RECUR_STATE: u8 = 17;
const RECUR_REMOVE: u8 = 18;
// Version 2.
const NEW_AT: u8 = 8;
const CLAIM: u8 = 9;
const WAIT_AT: u8 = 10;
const ACKED: u8 = 11;
const HISTORY: u8 = 12;
const THROUGHPUT: u8 = 13;

/// Why a job waits again, in a version 2 [`Record::Wait`]: what ended the
/// attempt it was leased for, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Why {
    /// Not the end of an attempt (promote, requeue, compaction), or not
    /// recorded (version 1).
    Other = 0,
    Retried = 1,
    Failed = 2,
    Released = 3,
}

impl Why {
    fn from_u8(b: u8) -> Option<Why> {
        Some(match b {
            0 => Why::Other,
            1 => Why::Retried,
            2 => Why::Failed,
            3 => Why::Released,
            _ => return None,
        })
    }
}

/// One change to one job (or the lateness histogram, or the counts per
/// minute).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Record<'a> {
    /// A job, waiting until `due`; `created` is 0 in version 1.
    New {
        slot: u32,
        gen: u32,
        due: u64,
        id: &'a [u8],
        payload: &'a [u8],
        created: u64,
    },
    /// The job waits again: `at` and `why` are 0 and [`Why::Other`] in
    /// version 1.
    Wait {
        slot: u32,
        gen: u32,
        due: u64,
        attempts: u32,
        at: u64,
        why: Why,
    },
    /// The job was claimed at `at` for `holder` (empty in version 1).
    Lease {
        slot: u32,
        gen: u32,
        attempts: u32,
        at: u64,
        redelivery: bool,
        holder: &'a [u8],
    },
    Dead {
        slot: u32,
        gen: u32,
        at: u64,
        attempts: u32,
    },
    Error {
        slot: u32,
        gen: u32,
        reason: &'a [u8],
    },
    /// The job is gone (cancel, purge; an ack in version 1).
    Remove {
        slot: u32,
        gen: u32,
    },
    Lateness {
        counts: [u64; LATENESS_BUCKETS],
    },
    RecurDefine {
        name: &'a [u8],
        version: u32,
        paused: bool,
        spec: &'a [u8],
        zone: &'a [u8],
        missed: &'a [u8],
        payload: &'a [u8],
    },
    RecurState {
        name: &'a [u8],
        /// The waiting occurrence's time (0: none), slot and generation.
        pending: u64,
        slot: u32,
        gen: u32,
        /// The last delivered occurrence's time (0: none).
        last: u64,
        run: u32,
    },
    RecurRemove {
        name: &'a [u8],
    },
    /// The job was acked at `at`: gone (version 2).
    Acked {
        slot: u32,
        gen: u32,
        at: u64,
    },
    /// The job's ended attempts, as compaction found them (version 2):
    /// see [`encode_history`].
    History {
        slot: u32,
        gen: u32,
        attempts: &'a [u8],
    },
    /// The counts per minute, as compaction found them (version 2): see
    /// [`encode_throughput`].
    Throughput {
        minutes: &'a [u8],
    },
}

impl Record<'_> {
    /// Appends the record to `out` (in the version this code writes).
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        match *self {
            Record::New {
                slot,
                gen,
                due,
                id,
                payload,
                created,
            } => {
                out.push(NEW_AT);
                put_slot(out, slot, gen);
                out.extend_from_slice(&due.to_le_bytes());
                out.extend_from_slice(&(id.len() as u16).to_le_bytes());
                out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
                out.extend_from_slice(id);
                out.extend_from_slice(payload);
                out.extend_from_slice(&created.to_le_bytes());
            }
            Record::Wait {
                slot,
                gen,
                due,
                attempts,
                at,
                why,
            } => {
                out.push(WAIT_AT);
                put_slot(out, slot, gen);
                out.extend_from_slice(&due.to_le_bytes());
                out.extend_from_slice(&attempts.to_le_bytes());
                out.extend_from_slice(&at.to_le_bytes());
                out.push(why as u8);
            }
            Record::Lease {
                slot,
                gen,
                attempts,
                at,
                redelivery,
                holder,
            } => {
                out.push(CLAIM);
                put_slot(out, slot, gen);
                out.extend_from_slice(&attempts.to_le_bytes());
                out.extend_from_slice(&at.to_le_bytes());
                out.push(u8::from(redelivery));
                put_short(out, holder);
            }
            Record::Dead {
                slot,
                gen,
                at,
                attempts,
            } => {
                out.push(DEAD);
                put_slot(out, slot, gen);
                out.extend_from_slice(&at.to_le_bytes());
                out.extend_from_slice(&attempts.to_le_bytes());
            }
            Record::Error { slot, gen, reason } => {
                out.push(ERROR);
                put_slot(out, slot, gen);
                out.extend_from_slice(&(reason.len() as u32).to_le_bytes());
                out.extend_from_slice(reason);
            }
            Record::Remove { slot, gen } => {
                out.push(REMOVE);
                put_slot(out, slot, gen);
            }
            Record::Lateness { counts } => {
                out.push(LATENESS);
                for count in counts {
                    out.extend_from_slice(&count.to_le_bytes());
                }
            }
            Record::RecurDefine {
                name,
                version,
                paused,
                spec,
                zone,
                missed,
                payload,
            } => {
                out.push(RECUR_DEFINE);
                put_bytes16(out, name);
                out.extend_from_slice(&version.to_le_bytes());
                out.push(u8::from(paused));
                put_bytes16(out, spec);
                put_bytes16(out, zone);
                put_bytes16(out, missed);
                out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
                out.extend_from_slice(payload);
            }
            Record::RecurState {
                name,
                pending,
                slot,
                gen,
                last,
                run,
            } => {
                out.push(RECUR_STATE);
                put_bytes16(out, name);
                out.extend_from_slice(&pending.to_le_bytes());
                put_slot(out, slot, gen);
                out.extend_from_slice(&last.to_le_bytes());
                out.extend_from_slice(&run.to_le_bytes());
            }
            Record::RecurRemove { name } => {
                out.push(RECUR_REMOVE);
                put_bytes16(out, name);
            }
            Record::Acked { slot, gen, at } => {
                out.push(ACKED);
                put_slot(out, slot, gen);
                out.extend_from_slice(&at.to_le_bytes());
            }
            Record::History {
                slot,
                gen,
                attempts,
            } => {
                out.push(HISTORY);
                put_slot(out, slot, gen);
                out.extend_from_slice(&(attempts.len() as u32).to_le_bytes());
                out.extend_from_slice(attempts);
            }
            Record::Throughput { minutes } => {
                out.push(THROUGHPUT);
                out.extend_from_slice(&(minutes.len() as u32).to_le_bytes());
                out.extend_from_slice(minutes);
            }
        }
    }

    /// The record as version 1 wrote it, for the tests of old logs; `None`
    /// for a record version 1 did not have.
    #[cfg(test)]
    pub(crate) fn encode_v1(&self, out: &mut Vec<u8>) -> Option<()> {
        let start = out.len();
        match *self {
            Record::New { created: 0, .. } => {
                self.encode(out);
                out[start] = NEW;
                out.truncate(out.len() - 8);
            }
            Record::Wait {
                slot,
                gen,
                due,
                attempts,
                at: 0,
                why: Why::Other,
            } => {
                out.push(WAIT);
                put_slot(out, slot, gen);
                out.extend_from_slice(&due.to_le_bytes());
                out.extend_from_slice(&attempts.to_le_bytes());
            }
            Record::Lease { holder: b"", .. } => {
                self.encode(out);
                out[start] = LEASE;
                out.pop();
            }
            Record::Dead { .. }
            | Record::Error { .. }
            | Record::Remove { .. }
            | Record::Lateness { .. } => self.encode(out),
            _ => return None,
        }
        Some(())
    }
}

/// A length (u16) and the bytes.
fn put_bytes16(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
    out.extend_from_slice(bytes);
}

fn put_slot(out: &mut Vec<u8>, slot: u32, gen: u32) {
    out.extend_from_slice(&slot.to_le_bytes());
    out.extend_from_slice(&gen.to_le_bytes());
}

/// At most 255 bytes, after their length.
fn put_short(out: &mut Vec<u8>, bytes: &[u8]) {
    let bytes = &bytes[..bytes.len().min(255)];
    out.push(bytes.len() as u8);
    out.extend_from_slice(bytes);
}

/// One ended attempt in a [`Record::History`]: its number, when it was
/// claimed and ended (ms; 0: not recorded), how it ended (an
/// [`Outcome`](crate::data::history::Outcome) code: see
/// `index::history`), its holder (empty: not recorded) and its error
/// (`None`: none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EndedEntry<'a> {
    pub(crate) attempt: u32,
    pub(crate) claimed: u64,
    pub(crate) ended: u64,
    pub(crate) outcome: u8,
    pub(crate) holder: &'a [u8],
    pub(crate) error: Option<&'a [u8]>,
}

/// The body of a [`Record::History`]: per attempt `attempt:u32 claimed:u64
/// ended:u64 outcome:u8 holder_len:u8 holder error_len:i32 error`
/// (`error_len` -1: none).
pub(crate) fn encode_history<'a>(attempts: impl IntoIterator<Item = EndedEntry<'a>>) -> Vec<u8> {
    let mut out = Vec::new();
    for a in attempts {
        out.extend_from_slice(&a.attempt.to_le_bytes());
        out.extend_from_slice(&a.claimed.to_le_bytes());
        out.extend_from_slice(&a.ended.to_le_bytes());
        out.push(a.outcome);
        put_short(&mut out, a.holder);
        match a.error {
            Some(error) => {
                out.extend_from_slice(&(error.len() as i32).to_le_bytes());
                out.extend_from_slice(error);
            }
            None => out.extend_from_slice(&(-1i32).to_le_bytes()),
        }
    }
    out
}

/// The attempts of a [`Record::History`]'s body, or what is wrong with it.
pub(crate) fn decode_history(body: &[u8]) -> Result<Vec<EndedEntry<'_>>, &'static str> {
    let mut read = Records::new(body);
    let mut all = Vec::new();
    while read.at < body.len() {
        let attempt = read.u32()?;
        let claimed = read.u64()?;
        let ended = read.u64()?;
        let outcome = read.u8()?;
        let holder_len = read.u8()?;
        let holder = read.bytes(usize::from(holder_len))?;
        let error_len = read.u32()? as i32;
        let error = match usize::try_from(error_len) {
            Ok(n) => Some(read.bytes(n)?),
            Err(_) => None,
        };
        all.push(EndedEntry {
            attempt,
            claimed,
            ended,
            outcome,
            holder,
            error,
        });
    }
    Ok(all)
}

/// The body of a [`Record::Throughput`]: per minute `minute:u64
/// processed:u64 failed:u64`.
pub(crate) fn encode_throughput(minutes: impl IntoIterator<Item = (u64, u64, u64)>) -> Vec<u8> {
    let mut out = Vec::new();
    for (minute, processed, failed) in minutes {
        for n in [minute, processed, failed] {
            out.extend_from_slice(&n.to_le_bytes());
        }
    }
    out
}

/// The minutes of a [`Record::Throughput`]'s body.
pub(crate) fn decode_throughput(body: &[u8]) -> Result<Vec<(u64, u64, u64)>, &'static str> {
    if body.len() % 24 != 0 {
        return Err("a throughput record's length is not a whole number of minutes");
    }
    let mut read = Records::new(body);
    let mut all = Vec::with_capacity(body.len() / 24);
    while read.at < body.len() {
        all.push((read.u64()?, read.u64()?, read.u64()?));
    }
    Ok(all)
}

/// Reads the records of a frame's body in order.
pub(crate) struct Records<'a> {
    body: &'a [u8],
    at: usize,
}

impl<'a> Records<'a> {
    pub(crate) fn new(body: &'a [u8]) -> Records<'a> {
        Records { body, at: 0 }
    }

    /// Where the next record starts in the body.
    pub(crate) fn position(&self) -> usize {
        self.at
    }

    /// The next record, `None` at the end of the body, or what is wrong
    /// with it.
    pub(crate) fn next_record(&mut self) -> Option<Result<Record<'a>, &'static str>> {
        if self.at >= self.body.len() {
            return None;
        }
        let start = self.at;
        let record = self.read();
        if record.is_err() {
            self.at = start;
        }
        Some(record)
    }

    fn read(&mut self) -> Result<Record<'a>, &'static str> {
        let tag = self.u8()?;
        match tag {
            LATENESS => {
                let mut counts = [0u64; LATENESS_BUCKETS];
                for count in &mut counts {
                    *count = self.u64()?;
                }
                return Ok(Record::Lateness { counts });
            }
            THROUGHPUT => {
                let len = self.u32()? as usize;
                return Ok(Record::Throughput {
                    minutes: self.bytes(len)?,
                });
            }
            _ => {}
        }
        match tag {
            RECUR_DEFINE => {
                let name = self.bytes16()?;
                let version = self.u32()?;
                let paused = match self.u8()? {
                    0 => false,
                    1 => true,
                    _ => return Err("a recurrence record's paused flag is neither 0 nor 1"),
                };
                let (spec, zone, missed) = (self.bytes16()?, self.bytes16()?, self.bytes16()?);
                let len = self.u32()? as usize;
                return Ok(Record::RecurDefine {
                    name,
                    version,
                    paused,
                    spec,
                    zone,
                    missed,
                    payload: self.bytes(len)?,
                });
            }
            RECUR_STATE => {
                return Ok(Record::RecurState {
                    name: self.bytes16()?,
                    pending: self.u64()?,
                    slot: self.u32()?,
                    gen: self.u32()?,
                    last: self.u64()?,
                    run: self.u32()?,
                })
            }
            RECUR_REMOVE => {
                return Ok(Record::RecurRemove {
                    name: self.bytes16()?,
                })
            }
            _ => {}
        }
        let slot = self.u32()?;
        let gen = self.u32()?;
        Ok(match tag {
            NEW | NEW_AT => {
                let due = self.u64()?;
                let id_len = self.u16()? as usize;
                let payload_len = self.u32()? as usize;
                let id = self.bytes(id_len)?;
                let payload = self.bytes(payload_len)?;
                let created = if tag == NEW_AT { self.u64()? } else { 0 };
                Record::New {
                    slot,
                    gen,
                    due,
                    id,
                    payload,
                    created,
                }
            }
            WAIT | WAIT_AT => {
                let due = self.u64()?;
                let attempts = self.u32()?;
                let (at, why) = if tag == WAIT_AT {
                    let at = self.u64()?;
                    let why = Why::from_u8(self.u8()?)
                        .ok_or("a wait record's reason is not one of 0 to 3")?;
                    (at, why)
                } else {
                    (0, Why::Other)
                };
                Record::Wait {
                    slot,
                    gen,
                    due,
                    attempts,
                    at,
                    why,
                }
            }
            LEASE | CLAIM => {
                let attempts = self.u32()?;
                let at = self.u64()?;
                let redelivery = match self.u8()? {
                    0 => false,
                    1 => true,
                    _ => return Err("a lease record's redelivery flag is neither 0 nor 1"),
                };
                let holder = if tag == CLAIM {
                    let len = self.u8()?;
                    self.bytes(usize::from(len))?
                } else {
                    &[]
                };
                Record::Lease {
                    slot,
                    gen,
                    attempts,
                    at,
                    redelivery,
                    holder,
                }
            }
            DEAD => Record::Dead {
                slot,
                gen,
                at: self.u64()?,
                attempts: self.u32()?,
            },
            ERROR => {
                let len = self.u32()? as usize;
                Record::Error {
                    slot,
                    gen,
                    reason: self.bytes(len)?,
                }
            }
            REMOVE => Record::Remove { slot, gen },
            ACKED => Record::Acked {
                slot,
                gen,
                at: self.u64()?,
            },
            HISTORY => {
                let len = self.u32()? as usize;
                let attempts = self.bytes(len)?;
                decode_history(attempts)?;
                Record::History {
                    slot,
                    gen,
                    attempts,
                }
            }
            _ => return Err("unknown record type"),
        })
    }

    /// A u16 length and that many bytes.
    fn bytes16(&mut self) -> Result<&'a [u8], &'static str> {
        let len = self.u16()? as usize;
        self.bytes(len)
    }

    fn bytes(&mut self, n: usize) -> Result<&'a [u8], &'static str> {
        let end = self.at.checked_add(n).ok_or("a length past the frame")?;
        let bytes = self
            .body
            .get(self.at..end)
            .ok_or("a record runs past the end of its frame")?;
        self.at = end;
        Ok(bytes)
    }

    fn u8(&mut self) -> Result<u8, &'static str> {
        Ok(self.bytes(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, &'static str> {
        Ok(u16::from_le_bytes(
            self.bytes(2)?.try_into().expect("2 bytes"),
        ))
    }

    fn u32(&mut self) -> Result<u32, &'static str> {
        Ok(u32::from_le_bytes(
            self.bytes(4)?.try_into().expect("4 bytes"),
        ))
    }

    fn u64(&mut self) -> Result<u64, &'static str> {
        Ok(u64::from_le_bytes(
            self.bytes(8)?.try_into().expect("8 bytes"),
        ))
    }
}

/// The file header.
pub(crate) fn file_header() -> [u8; FILE_HEADER] {
    file_header_of(VERSION)
}

/// The file header of format `version`.
pub(crate) fn file_header_of(version: u32) -> [u8; FILE_HEADER] {
    let mut header = [0u8; FILE_HEADER];
    header[..8].copy_from_slice(&FILE_MAGIC);
    header[8..12].copy_from_slice(&version.to_le_bytes());
    let crc = crc32fast::hash(&header[..12]);
    header[12..].copy_from_slice(&crc.to_le_bytes());
    header
}

/// A frame's header for `body`.
pub(crate) fn frame_header(body: &[u8]) -> [u8; FRAME_HEADER] {
    let mut header = [0u8; FRAME_HEADER];
    header[..4].copy_from_slice(&FRAME_MAGIC.to_le_bytes());
    header[4..8].copy_from_slice(&(body.len() as u32).to_le_bytes());
    header[8..12].copy_from_slice(&crc32fast::hash(body).to_le_bytes());
    let crc = crc32fast::hash(&header[..12]);
    header[12..].copy_from_slice(&crc.to_le_bytes());
    header
}

/// A frame header whose own checksum holds: (body length, body crc).
fn parse_frame_header(header: &[u8]) -> Option<(u32, u32)> {
    let word = |at: usize| u32::from_le_bytes(header[at..at + 4].try_into().expect("4 bytes"));
    if header.len() < FRAME_HEADER
        || word(0) != FRAME_MAGIC
        || crc32fast::hash(&header[..12]) != word(12)
    {
        return None;
    }
    let len = word(4);
    (len <= MAX_FRAME).then_some((len, word(8)))
}

/// How a log file ends after its last whole frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tail {
    /// Nothing after it.
    Clean,
    /// A write a crash cut short (see the module docs): never
    /// acknowledged, cut off when the store opens.
    Torn {
        /// How many bytes follow the last whole frame.
        len: u64,
    },
    /// A last frame that is whole (its length fits in the file) but
    /// damaged, with no whole frame after it: written (and maybe synced
    /// and acknowledged) and damaged since. Never cut silently.
    Damaged {
        /// How many bytes follow the last whole frame.
        len: u64,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// How a log file ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Scanned {
    /// Where the last whole frame ends.
    pub(crate) end: u64,
    /// What follows it.
    pub(crate) tail: Tail,
}

/// A sector: the smallest unit a power cut tears a write at (a lost one
/// reads back as zeros where the file grew).
const SECTOR: u64 = 512;

/// Reads the log at `path` (open as `file`, `len` bytes long) from byte
/// `from` (0: the file header first, else where a whole frame begins) and
/// calls `frame(offset, body)` for each whole frame in order; `offset` is
/// where the frame's body starts in the file.
///
/// # Errors
///
/// [`StoreError::Corrupt`] for a bad file header, or a bad frame followed
/// by whole ones (see the module docs); the first error of `frame`;
/// [`StoreError::Io`] if reading fails.
pub(crate) fn scan(
    path: &Path,
    file: &LogFile,
    from: u64,
    len: u64,
    mut frame: impl FnMut(u64, &[u8]) -> Result<(), StoreError>,
) -> Result<Scanned, StoreError> {
    let read_err = |e: io::Error| StoreError::io(path, "reading the job log", e);
    let mut at = from;
    if at == 0 {
        check_file_header(path, file)?;
        at = FILE_HEADER as u64;
    }
    let mut reader = io::BufReader::with_capacity(1 << 20, ReadFrom { file, at });
    let mut body = Vec::new();
    loop {
        let left = len - at;
        if left == 0 {
            return Ok(Scanned {
                end: at,
                tail: Tail::Clean,
            });
        }
        let mut head = [0u8; FRAME_HEADER];
        let header = if left < FRAME_HEADER as u64 {
            None
        } else {
            reader.read_exact(&mut head).map_err(read_err)?;
            parse_frame_header(&head)
        };
        let whole = header.and_then(|(body_len, body_crc)| {
            let end = at + FRAME_HEADER as u64 + u64::from(body_len);
            (end <= len).then_some((end, body_len, body_crc))
        });
        if let Some((end, body_len, body_crc)) = whole {
            body.resize(body_len as usize, 0);
            reader.read_exact(&mut body).map_err(read_err)?;
            if crc32fast::hash(&body) == body_crc {
                frame(at + FRAME_HEADER as u64, &body)?;
                at = end;
                continue;
            }
        }
        drop(reader);
        let tail = classify_tail(file, at, len, whole.map(|(end, ..)| end)).map_err(read_err)?;
        if valid_frame_after(file, at + 1, len).map_err(read_err)? {
            return Err(StoreError::corrupt(
                path,
                at,
                if header.is_some() {
                    "a frame's checksum does not match, and whole frames follow it"
                } else {
                    "a frame header is damaged, and whole frames follow it"
                },
            ));
        }
        return Ok(Scanned { end: at, tail });
    }
}

/// Reads a file on from a position.
struct ReadFrom<'a> {
    file: &'a LogFile,
    at: u64,
}

impl Read for ReadFrom<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.file.read_at(buf, self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

/// Checks the file header.
fn check_file_header(path: &Path, file: &LogFile) -> Result<(), StoreError> {
    let mut header = [0u8; FILE_HEADER];
    file.read_exact_at(&mut header, 0)
        .map_err(|e| StoreError::io(path, "reading the job log", e))?;
    if header[..8] != FILE_MAGIC {
        return Err(StoreError::corrupt(path, 0, "not a job log (bad magic)"));
    }
    if crc32fast::hash(&header[..12]) != u32::from_le_bytes(header[12..].try_into().expect("4")) {
        return Err(StoreError::corrupt(
            path,
            0,
            "the file header's checksum does not match",
        ));
    }
    let version = u32::from_le_bytes(header[8..12].try_into().expect("4 bytes"));
    if !(OLDEST_VERSION..=VERSION).contains(&version) {
        return Err(StoreError::corrupt(
            path,
            8,
            format!("format version {version}, this build reads {OLDEST_VERSION} to {VERSION}"),
        ));
    }
    Ok(())
}

/// The format version in a log's header (one whose header
/// [`scan`] checked).
pub(crate) fn version_of(file: &LogFile) -> io::Result<u32> {
    let mut version = [0u8; 4];
    file.read_exact_at(&mut version, 8)?;
    Ok(u32::from_le_bytes(version))
}

/// What the bytes from `at` (where a bad frame starts) to `len` are: a
/// torn write, or damage. `whole_end`: where the frame ends if its header
/// is valid and it fits in the file.
///
/// A power cut tears the one write in flight at sector granularity: what
/// it loses reads back as zeros (the file grew there) or is missing (the
/// file is short). So a frame that runs past the end of the file, a
/// header that does not fit, or a frame with a sector-sized part of
/// zeros, is torn. A whole frame with no such part (or a damaged header
/// with none) was written whole and damaged since: bit rot, a bad disk,
/// an editor.
fn classify_tail(file: &LogFile, at: u64, len: u64, whole_end: Option<u64>) -> io::Result<Tail> {
    let rest = len - at;
    let torn = Ok(Tail::Torn { len: rest });
    if rest < FRAME_HEADER as u64 {
        return torn;
    }
    let (checked_end, reason) = match whole_end {
        Some(end) => (
            end,
            "the last frame is whole but its checksum does not match: damaged after it \
             was written, not a torn write",
        ),
        None => {
            let mut head = [0u8; FRAME_HEADER];
            file.read_exact_at(&mut head, at)?;
            if parse_frame_header(&head).is_some() {
                return torn; // runs past the end of the file: cut short
            }
            (
                at + FRAME_HEADER as u64,
                "the last frame's header is damaged (not zeros): not a torn write",
            )
        }
    };
    if has_zero_sector_part(file, at, checked_end)? {
        return torn;
    }
    Ok(Tail::Damaged { len: rest, reason })
}

/// Whether some part of `[from, to)` that one sector holds is all zeros.
fn has_zero_sector_part(file: &LogFile, from: u64, to: u64) -> io::Result<bool> {
    let mut bytes = vec![0u8; (to - from) as usize];
    file.read_exact_at(&mut bytes, from)?;
    let mut part_start = from;
    while part_start < to {
        let part_end = ((part_start / SECTOR + 1) * SECTOR).min(to);
        let part = &bytes[(part_start - from) as usize..(part_end - from) as usize];
        if part.iter().all(|&b| b == 0) {
            return Ok(true);
        }
        part_start = part_end;
    }
    Ok(false)
}

/// Whether a whole, valid frame starts at any byte offset from `from` on:
/// the test that tells damage (acknowledged frames follow) from a torn
/// last write (nothing valid follows).
fn valid_frame_after(file: &LogFile, from: u64, len: u64) -> io::Result<bool> {
    if from >= len {
        return Ok(false);
    }
    let mut rest = vec![0u8; (len - from) as usize];
    file.read_exact_at(&mut rest, from)?;
    for start in 0..rest.len() {
        let Some((body_len, body_crc)) = parse_frame_header(&rest[start..]) else {
            continue;
        };
        let body_at = start + FRAME_HEADER;
        if let Some(body) = rest.get(body_at..body_at + body_len as usize) {
            if crc32fast::hash(body) == body_crc {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let history = encode_history([
            EndedEntry {
                attempt: 1,
                claimed: 5,
                ended: 6,
                outcome: 2,
                holder: b"web-1:42",
                error: Some(b"boom"),
            },
            EndedEntry {
                attempt: 2,
                claimed: 7,
                ended: 0,
                outcome: 3,
                holder: b"",
                error: None,
            },
        ]);
        let minutes = encode_throughput([(28_000_000, 5, 1), (28_000_001, 0, 2)]);
        let records = [
            Record::New {
                slot: 7,
                gen: 2,
                due: 1_700_000_000_123,
                id: b"order-42",
                payload: b"close it",
                created: 1_700_000_000_001,
            },
            Record::Wait {
                slot: 7,
                gen: 2,
                due: 5,
                attempts: 3,
                at: 4,
                why: Why::Released,
            },
            Record::Lease {
                slot: u32::MAX - 1,
                gen: 9,
                attempts: 4,
                at: 77,
                redelivery: true,
                holder: b"web-1:42",
            },
            Record::Acked {
                slot: 3,
                gen: 5,
                at: 99,
            },
            Record::History {
                slot: 3,
                gen: 5,
                attempts: &history,
            },
            Record::Throughput { minutes: &minutes },
            Record::Dead {
                slot: 1,
                gen: 1,
                at: 8,
                attempts: 10,
            },
            Record::Error {
                slot: 1,
                gen: 1,
                reason: "card declined: é".as_bytes(),
            },
            Record::Remove { slot: 3, gen: 4 },
            Record::Lateness {
                counts: std::array::from_fn(|i| i as u64 * 1000),
            },
            Record::RecurDefine {
                name: b"nightly",
                version: 3,
                paused: true,
                spec: b"0 30 2 * * *",
                zone: b"Europe/Berlin",
                missed: b"run-all:5",
                payload: b"{}",
            },
            Record::RecurState {
                name: b"nightly",
                pending: 1_774_746_000_000,
                slot: 12,
                gen: 3,
                last: 0,
                run: 2,
            },
            Record::RecurRemove { name: b"nightly" },
        ];
        let mut body = Vec::new();
        for record in &records {
            record.encode(&mut body);
        }
        let mut read = Records::new(&body);
        for record in &records {
            assert_eq!(read.next_record(), Some(Ok(record.clone())));
        }
        assert_eq!(read.next_record(), None);
        // The id of a `New` record is where NEW_ID_AT says.
        assert_eq!(&body[NEW_ID_AT..NEW_ID_AT + 8], b"order-42");
        let entries = decode_history(&history).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].error, Some(&b"boom"[..]));
        assert_eq!(entries[1].holder, b"");
        assert_eq!(
            decode_throughput(&minutes).unwrap(),
            [(28_000_000, 5, 1), (28_000_001, 0, 2)]
        );
    }

    #[test]
    fn version_1_records_read_with_what_they_lack_empty() {
        let v1 = [
            Record::New {
                slot: 7,
                gen: 2,
                due: 9,
                id: b"order-42",
                payload: b"close it",
                created: 0,
            },
            Record::Wait {
                slot: 7,
                gen: 2,
                due: 5,
                attempts: 3,
                at: 0,
                why: Why::Other,
            },
            Record::Lease {
                slot: 7,
                gen: 2,
                attempts: 4,
                at: 77,
                redelivery: false,
                holder: b"",
            },
            Record::Remove { slot: 7, gen: 2 },
        ];
        let mut body = Vec::new();
        for record in &v1 {
            record.encode_v1(&mut body).unwrap();
        }
        // Tags 1, 2, 3 and 6, of the lengths version 1 wrote.
        assert_eq!(body[0], NEW);
        assert_eq!(body.len(), (NEW_ID_AT + 16) + 21 + 22 + 9);
        let mut read = Records::new(&body);
        for record in &v1 {
            assert_eq!(read.next_record(), Some(Ok(record.clone())));
        }
        assert_eq!(read.next_record(), None);
    }

    #[test]
    fn damaged_records_are_errors_not_panics() {
        let mut body = Vec::new();
        Record::New {
            slot: 1,
            gen: 1,
            due: 1,
            id: b"abc",
            payload: b"payload",
            created: 1,
        }
        .encode(&mut body);
        for cut in 0..body.len() {
            let mut read = Records::new(&body[..cut]);
            match read.next_record() {
                None => assert_eq!(cut, 0),
                Some(result) => assert!(result.is_err(), "cut at {cut}"),
            }
        }
        let mut bad = body.clone();
        bad[0] = 99;
        assert_eq!(
            Records::new(&bad).next_record(),
            Some(Err("unknown record type"))
        );
    }

    #[test]
    fn frame_headers_check_themselves() {
        let header = frame_header(b"body");
        assert_eq!(
            parse_frame_header(&header),
            Some((4, crc32fast::hash(b"body")))
        );
        for byte in 0..FRAME_HEADER {
            let mut bad = header;
            bad[byte] ^= 0x10;
            assert_eq!(parse_frame_header(&bad), None, "byte {byte}");
        }
        assert_eq!(parse_frame_header(&[0u8; FRAME_HEADER]), None);
    }

    /// A log of a header and frames with these bodies, as a file.
    fn log_of(
        bodies: &[Vec<u8>],
    ) -> (crate::embedded::tests::TempDir, std::path::PathBuf, Vec<u8>) {
        let dir = crate::embedded::tests::TempDir::new("format");
        let path = dir.path().join("q.log");
        let mut bytes = file_header().to_vec();
        for body in bodies {
            bytes.extend_from_slice(&frame_header(body));
            bytes.extend_from_slice(body);
        }
        std::fs::write(&path, &bytes).unwrap();
        (dir, path, bytes)
    }

    fn scan_bytes(path: &Path, bytes: &[u8]) -> Result<Scanned, StoreError> {
        std::fs::write(path, bytes).unwrap();
        let file = crate::embedded::fs::open(path, crate::embedded::fs::Mode::Write).unwrap();
        scan(path, &file, 0, bytes.len() as u64, |_, _| Ok(()))
    }

    #[test]
    fn torn_tails_are_told_from_damaged_ones() {
        let small = vec![7u8; 40];
        let big: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8 + 1).collect();
        let (_dir, path, good) = log_of(&[small.clone(), big.clone()]);
        let last = (FILE_HEADER + FRAME_HEADER + small.len()) as u64;
        let len = good.len() as u64;
        let tail = |bytes: &[u8]| scan_bytes(&path, bytes).unwrap();
        let torn = |rest: u64| Scanned {
            end: last,
            tail: Tail::Torn { len: rest },
        };
        assert_eq!(tail(&good).tail, Tail::Clean);
        // Short: a header cut, a body cut.
        assert_eq!(tail(&good[..last as usize + 9]), torn(9));
        assert_eq!(tail(&good[..len as usize - 1]), torn(len - last - 1));
        // A lost sector inside the frame (zeros), or the header's sector.
        let mut lost = good.clone();
        lost[1024..1536].fill(0);
        assert_eq!(tail(&lost), torn(len - last));
        let mut lost = good.clone();
        lost[last as usize..512].fill(0);
        assert_eq!(tail(&lost), torn(len - last));
        // A length that reached the disk without its data: all zeros.
        let mut zeros = good[..last as usize].to_vec();
        zeros.resize(len as usize + 100, 0);
        assert_eq!(tail(&zeros), torn(len - last + 100));
        // Bytes flipped in a whole frame, in its body or its header: damage.
        for at in [len as usize - 8, last as usize + 5] {
            let mut rotten = good.clone();
            rotten[at] ^= 0x5a;
            match tail(&rotten).tail {
                Tail::Damaged { len: n, .. } => assert_eq!(n, len - last, "byte {at}"),
                other => panic!("byte {at}: {other:?}"),
            }
        }
        // Damage before a whole frame is an error, not a tail.
        let mut rotten = good.clone();
        rotten[FILE_HEADER + FRAME_HEADER + 3] ^= 1;
        assert!(matches!(
            scan_bytes(&path, &rotten),
            Err(StoreError::Corrupt { offset, .. }) if offset == FILE_HEADER as u64
        ));
    }
}
