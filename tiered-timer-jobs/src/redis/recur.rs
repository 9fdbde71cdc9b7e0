//! Recurrences on Redis: the calls of the contract (`recur.lua`,
//! `recurrences.lua`), and the duties a claim hands its claimer
//! (`recur_claim.lua`, answered by `recur_refill.lua`).
//!
//! # Design
//!
//! Lua has no time zones, so the occurrences are computed here and
//! stored with the recurrence (the next [`TIMES`] after its waiting one);
//! the claim script takes the next from that list in the same script
//! that claims the waiting one (see `recur_claim.lua`). A claim leaves the
//! claimer a duty in the occurrence's payload (one line, stripped here
//! before anyone sees the payload) when the list runs low (more
//! occurrences) or cannot answer (after a gap longer than the list: what
//! follows the claim, decided here by [`Recurrence::advance`]). The duty
//! rides on the occurrence's job: if this process dies before it is done,
//! the job's lease runs out and its next claimer gets the duty again. A
//! job whose "decide" duty fails is released (it comes back at once, with
//! its duty), never handed out without it; one the decision skips is
//! removed by the answer's script.

use std::time::{Duration, SystemTime};

use redis::Value;

use super::backend::RedisBackend;
use super::conn::Conn;
use super::keys::{partition_of_name, Keys};
use super::reply::{arg, parse, token_text, unexpected_reply};
use super::scripts;
use crate::contract::{Claimed, NewRecurrence};
use crate::data::error::Error;
use crate::data::limits::at_ms;
use crate::data::recurrence::{
    occurrence_suffix, parse_occurrence_id, LastRun, Missed, Recurrence, RecurrenceInfo,
};
use crate::targets;

/// How many occurrences a recurrence keeps computed ahead (the claim
/// script asks for more when fewer than 8 are left).
const TIMES: usize = 32;

/// How far before this host's clock the first list starts, so that it
/// covers Redis' now when the clocks differ by less (the script says when
/// it does not, with its now, and the list is computed again from there).
const SKEW: Duration = Duration::from_secs(60);

/// Occurrences as the scripts take them: `ms:suffix`.
fn times_args(times: &[u64]) -> impl Iterator<Item = Vec<u8>> + '_ {
    times
        .iter()
        .map(|&ms| arg(&format!("{ms}:{}", occurrence_suffix(ms))))
}

/// A recurrence's definition as `recur.lua` stores it: `version paused
/// policy zone`, a newline, the spec.
struct Definition {
    paused: bool,
    policy: String,
    zone: String,
    spec: String,
}

impl Definition {
    fn parse(text: &str) -> Option<Definition> {
        let (head, spec) = text.split_once('\n')?;
        let mut fields = head.split(' ');
        let _version = fields.next()?;
        let paused = fields.next()? == "1";
        let policy = fields.next()?.to_owned();
        let zone = fields.next()?.to_owned();
        Some(Definition {
            paused,
            policy,
            zone,
            spec: spec.to_owned(),
        })
    }
}

/// `ms:suffix` or `-`, as the state stores an occurrence.
fn occurrence_ms(text: &str) -> Option<u64> {
    text.split_once(':')?.0.parse().ok()
}

/// The most occurrences one registration sends (a short period over the
/// skew window: the script asks again from its now if they fall short).
const MAX_SENT: usize = 512;

/// The local clock in ms.
fn local_now() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The occurrences of `recurrence` after `from` (ms) up to [`TIMES`] past
/// `until` (at most [`MAX_SENT`]): a list that covers Redis' now if it
/// lies between the two.
fn covering(recurrence: &Recurrence, from: i64, until: i64) -> Vec<u64> {
    let mut times = Vec::new();
    let mut at = from;
    let mut past = 0;
    while past < TIMES && times.len() < MAX_SENT {
        let Some(next) = recurrence.next_after_ms(at) else {
            break;
        };
        times.push(next);
        if next as i64 > until {
            past += 1;
        }
        at = next as i64;
    }
    times
}

impl RedisBackend {
    /// The keys of recurrence `name`'s partition.
    fn recurrence_keys(&self, name: &str) -> &Keys {
        &self.partitions[partition_of_name(name, self.partitions.len() as u32) as usize]
    }

    /// Runs `recur.lua` with the occurrences of `recurrence` after a point
    /// that covers Redis' now: from the local clock less [`SKEW`] to
    /// [`TIMES`] past the local clock plus [`SKEW`], or, if the
    /// script says that starts too late, its now.
    async fn with_times(
        &self,
        keys: &Keys,
        recurrence: &Recurrence,
        head: Vec<Vec<u8>>,
    ) -> Result<bool, Error> {
        let skew = SKEW.as_millis() as i64;
        let (mut from, mut until) = (local_now() - skew, local_now() + skew);
        for _ in 0..3 {
            let times = covering(recurrence, from, until);
            let mut args = head.clone();
            args.push(arg(&from.to_string()));
            args.extend(times_args(&times));
            let (status, now): (i64, i64) = self.eval(&scripts::RECUR_SCRIPT, keys, args).await?;
            if status != -1 {
                return Ok(status == 1);
            }
            (from, until) = (now, now);
        }
        Err(unexpected_reply(
            "recur: Redis' clock moved past every occurrence given",
        ))
    }

    pub(super) async fn recur_one(&self, new: NewRecurrence) -> Result<bool, Error> {
        let keys = self.recurrence_keys(&new.name);
        let r = &new.recurrence;
        let head = vec![
            arg("r"),
            arg(&new.name),
            arg(&r.spec()),
            arg(r.time_zone_name()),
            arg(&r.missed_policy().to_string()),
            new.payload,
        ];
        self.with_times(keys, r, head).await
    }

    pub(super) async fn unrecur_one(&self, name: &str) -> Result<bool, Error> {
        let keys = self.recurrence_keys(name);
        let (status, _): (i64, i64) = self
            .eval(&scripts::RECUR_SCRIPT, keys, vec![arg("x"), arg(name)])
            .await?;
        Ok(status == 1)
    }

    pub(super) async fn pause_one(&self, name: &str, paused: bool) -> Result<bool, Error> {
        let keys = self.recurrence_keys(name);
        if paused {
            let (status, _): (i64, i64) = self
                .eval(&scripts::RECUR_SCRIPT, keys, vec![arg("p"), arg(name)])
                .await?;
            return Ok(status == 1);
        }
        // Resuming needs the occurrences after now: from its definition.
        let text: Option<String> = self
            .query(redis::cmd("HGET").arg(keys.recur()).arg(format!("d{name}")))
            .await?;
        let Some(definition) = text.as_deref().and_then(Definition::parse) else {
            return Ok(false);
        };
        let recurrence =
            Recurrence::parse_stored(&definition.spec, &definition.zone, &definition.policy)?;
        self.with_times(keys, &recurrence, vec![arg("u"), arg(name)])
            .await
    }

    pub(super) async fn list_recurrences(&self) -> Result<Vec<RecurrenceInfo>, Error> {
        let mut all = Vec::new();
        for keys in &self.partitions {
            let reply: Vec<Value> = self
                .eval(&scripts::RECURRENCES_SCRIPT, keys, Vec::new())
                .await?;
            let mut fields = reply.into_iter();
            let _now: i64 = parse(fields.next())?;
            while let Some(name) = fields.next() {
                let name: String = parse(Some(name))?;
                let definition: String = parse(fields.next())?;
                let state: String = parse(fields.next())?;
                let fate: String = parse(fields.next())?;
                let error: String = parse(fields.next())?;
                let definition = Definition::parse(&definition)
                    .ok_or_else(|| unexpected_reply("a recurrence's definition"))?;
                // version pending last run flag policy
                let state: Vec<&str> = state.split(' ').collect();
                let pending = state.get(1).and_then(|p| occurrence_ms(p));
                let last = state.get(2).and_then(|l| occurrence_ms(l));
                let last_run = last.map(|_| match fate.as_str() {
                    "leased" => LastRun::Running,
                    "waiting" => LastRun::Retrying,
                    "dead" => LastRun::Dead,
                    _ => LastRun::Done,
                });
                all.push(RecurrenceInfo {
                    name,
                    spec: definition.spec,
                    time_zone: definition.zone,
                    missed: Missed::parse(&definition.policy).unwrap_or_default(),
                    paused: definition.paused,
                    next: pending.filter(|_| !definition.paused).map(at_ms),
                    last: last.map(at_ms),
                    last_run,
                    last_error: (!error.is_empty()).then_some(error),
                });
            }
        }
        all.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(all)
    }
}

/// A duty a claim left with an occurrence (see `recur_claim.lua`).
enum Duty {
    /// More occurrences after `after`.
    Append {
        version: String,
        after: i64,
        stored: [String; 3],
    },
    /// What follows the claim at `now` of the occurrence at `at`.
    Decide {
        version: String,
        at: u64,
        now: u64,
        run: u32,
        stored: [String; 3],
    },
}

impl Duty {
    /// The line before an occurrence's payload; `None` for `-`.
    fn parse(line: &str) -> Option<Duty> {
        let mut fields = line.splitn(8, ' ');
        match fields.next()? {
            "a" => {
                let mut rest = line.splitn(6, ' ').skip(1);
                let version = rest.next()?.to_owned();
                let after = rest.next()?.parse().ok()?;
                let (zone, policy, spec) = (rest.next()?, rest.next()?, rest.next()?);
                Some(Duty::Append {
                    version,
                    after,
                    stored: [spec.to_owned(), zone.to_owned(), policy.to_owned()],
                })
            }
            "d" => {
                let version = fields.next()?.to_owned();
                let at = fields.next()?.parse().ok()?;
                let now = fields.next()?.parse().ok()?;
                let run = fields.next()?.parse().ok()?;
                let (zone, policy, spec) = (fields.next()?, fields.next()?, fields.next()?);
                Some(Duty::Decide {
                    version,
                    at,
                    now,
                    run,
                    stored: [spec.to_owned(), zone.to_owned(), policy.to_owned()],
                })
            }
            _ => None,
        }
    }
}

/// Strips the duty line from the claimed occurrences' payloads and does
/// each duty: the jobs to hand out (a skipped occurrence is not one; one
/// whose decision could not be written is released, and comes back with
/// its duty). Never fails the claim: what went wrong is traced.
pub(crate) async fn fulfil_duties(
    conn: &Conn,
    keys: &Keys,
    queue: &str,
    jobs: Vec<Claimed>,
) -> Vec<Claimed> {
    let mut kept = Vec::with_capacity(jobs.len());
    for mut job in jobs {
        let Some((name, _)) = parse_occurrence_id(job.id.as_str()) else {
            kept.push(job);
            continue;
        };
        let Some(end) = job.payload.iter().position(|&b| b == b'\n') else {
            kept.push(job);
            continue;
        };
        let line = String::from_utf8_lossy(&job.payload[..end]).into_owned();
        job.payload.drain(..=end);
        let Some(duty) = Duty::parse(&line) else {
            kept.push(job);
            continue;
        };
        let name = name.to_owned();
        match fulfil(conn, keys, &name, &job, duty).await {
            Ok(true) => kept.push(job),
            Ok(false) => {
                tracing::debug!(target: targets::JOB, queue, job = %job.id, "occurrence skipped: the next one had come (Missed::Skip)");
            }
            Err((error, decided)) => {
                tracing::warn!(target: targets::JOB, queue, job = %job.id, %error, "could not move a recurrence's chain on; the occurrence is handed back and brings the duty to its next claim");
                if decided {
                    let args = vec![arg(job.id.as_str()), arg(token_text(&job.token))];
                    let release = conn
                        .eval::<i64>(
                            &scripts::RELEASE_SCRIPT,
                            &keys.ordered,
                            args,
                            scripts::durability(&scripts::RELEASE_SCRIPT),
                        )
                        .await;
                    if let Err(error) = release {
                        tracing::warn!(target: targets::JOB, queue, job = %job.id, %error, "could not hand the occurrence back; it comes back when its lease runs out");
                    }
                } else {
                    kept.push(job);
                }
            }
        }
    }
    kept
}

/// Does one duty: `Ok(false)` if the occurrence was skipped. On an error,
/// whether it was a decision (the job must not go out without it).
async fn fulfil(
    conn: &Conn,
    keys: &Keys,
    name: &str,
    job: &Claimed,
    duty: Duty,
) -> Result<bool, (Error, bool)> {
    let parsed = |[spec, zone, policy]: &[String; 3]| Recurrence::parse_stored(spec, zone, policy);
    let refill = |args: Vec<Vec<u8>>| async move {
        conn.eval::<i64>(
            &scripts::RECUR_REFILL_SCRIPT,
            &keys.ordered,
            args,
            scripts::durability(&scripts::RECUR_REFILL_SCRIPT),
        )
        .await
    };
    match duty {
        Duty::Append {
            version,
            after,
            stored,
        } => {
            let recurrence = parsed(&stored).map_err(|e| (e, false))?;
            let times = recurrence.occurrences_after(after, TIMES);
            let mut args = vec![arg("a"), arg(name), arg(&version)];
            args.extend(times_args(&times));
            refill(args).await.map_err(|e| (e, false))?;
            Ok(true)
        }
        Duty::Decide {
            version,
            at,
            now,
            run,
            stored,
        } => {
            // A definition this build cannot read (a zone this host lacks):
            // the occurrence is delivered and the chain stops there, as on
            // the embedded store.
            let (deliver, times, run) = match parsed(&stored) {
                Ok(recurrence) => {
                    let advance = recurrence.advance(at, now, run);
                    let mut times = Vec::with_capacity(TIMES);
                    if let Some(next) = advance.next {
                        times.push(next);
                        times.extend(recurrence.occurrences_after(next as i64, TIMES - 1));
                    }
                    (advance.deliver, times, advance.run)
                }
                Err(error) => {
                    tracing::warn!(target: targets::JOB, job = %job.id, %error, "a recurrence this build cannot read: its chain stops after this occurrence");
                    (true, Vec::new(), 0)
                }
            };
            let mut args = vec![
                arg("d"),
                arg(name),
                arg(&version),
                arg(job.id.as_str()),
                arg(token_text(&job.token)),
                arg(if deliver { "1" } else { "0" }),
                arg(&run.to_string()),
            ];
            args.extend(times_args(&times));
            refill(args).await.map_err(|e| (e, true))?;
            Ok(deliver)
        }
    }
}
