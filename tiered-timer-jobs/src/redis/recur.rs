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
use super::duties::{times_args, TIMES};
use super::keys::{partition_of_name, Keys};
use super::reply::{arg, parse, unexpected_reply};
use super::scripts;
use crate::contract::NewRecurrence;
use crate::data::error::Error;
use crate::data::limits::at_ms;
use crate::data::recurrence::{LastRun, Missed, Recurrence, RecurrenceInfo};

/// How far before this host's clock the first list starts, so that it
/// covers Redis' now when the clocks differ by less (the script says when
/// it does not, with its now, and the list is computed again from there).
const SKEW: Duration = Duration::from_secs(60);

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
