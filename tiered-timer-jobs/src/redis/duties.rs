//! The duties a claim hands its claimer with a recurrence's occurrence
//! (`recur_claim.lua`), done here and answered by `recur_refill.lua`:
//! more precomputed occurrences, or what follows a claim the stored ones
//! could not decide (see `recur.rs` for the design). Apart from
//! `recur.rs` so that the claim (`wake/claim.rs`) reaches it without the
//! backend.

use super::conn::Conn;
use super::keys::Keys;
use super::reply::{arg, token_text};
use super::scripts;
use crate::contract::Claimed;
use crate::data::error::Error;
use crate::data::recurrence::{occurrence_suffix, parse_occurrence_id, Recurrence};
use crate::targets;

/// How many occurrences a recurrence keeps computed ahead (the claim
/// script asks for more when fewer than 8 are left).
pub(super) const TIMES: usize = 32;

/// Occurrences as the scripts take them: `ms:suffix`.
pub(super) fn times_args(times: &[u64]) -> impl Iterator<Item = Vec<u8>> + '_ {
    times
        .iter()
        .map(|&ms| arg(&format!("{ms}:{}", occurrence_suffix(ms))))
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
