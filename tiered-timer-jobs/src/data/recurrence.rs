//! Recurring jobs' values: [`Recurrence`] (when), [`Missed`] (what a gap
//! costs), [`RecurrenceInfo`] (what an operator sees), the ids of
//! occurrences, and the one decision every backend makes when an
//! occurrence is claimed ([`Recurrence::advance`]).
//!
//! # Design
//!
//! A recurrence is stored as text (its spec, its zone's IANA name, its
//! policy for missed occurrences), so that any process, whatever it
//! registered, can compute its next occurrences: `parse_stored` reads it
//! back. Times are whole milliseconds since the Unix epoch, as every due
//! time in the crate.
//!
//! Calendar and zones are [jiff](https://docs.rs/jiff)'s: civil date-times
//! and the IANA database with every daylight-saving rule (the system's
//! `/usr/share/zoneinfo`, kept current by the OS). The cron parser is
//! ours (`cron.rs`, civil time only); this file maps civil date-times to
//! instants, with two rules for the days a zone changes its offset:
//!
//! * a local time that does not exist (skipped by a spring-forward) runs
//!   at the first instant after the gap, as Vixie cron does: `0 30 2 * * *`
//!   in Europe/Berlin runs at 03:00 CEST on 2026-03-29;
//! * a local time that happens twice (a fall-back) runs once, at its
//!   first instance: 02:30 CEST, not again at 02:30 CET, on 2026-10-25.
//!
//! The civil date-times a spec matches are walked in order and each is
//! mapped to its instant; the mapping never goes back in time, so the
//! first instant after `t` is the answer (several skipped local times may
//! map to one instant: they run once).

use std::fmt;
use std::time::{Duration, SystemTime};

use jiff::civil::DateTime;
use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::Timestamp;

use super::cron::Cron;
use super::error::Error;
use super::limits::{millis_up, MAX_SPAN_MS};

/// The most missed occurrences [`Missed::RunAll`] may deliver.
pub(crate) const MAX_RUN_ALL: u32 = 10_000;
/// The shortest [`Recurrence::every`].
const MIN_EVERY: Duration = Duration::from_secs(1);

/// When a recurring job runs: a cron spec in a time zone, or a fixed
/// period; and what to do about occurrences missed while no worker ran.
///
/// Registered with [`Queue::recur`](crate::Queue::recur). Every
/// occurrence is one ordinary job, due at the occurrence's time, whose id
/// is the recurrence's name and that time (`nightly@2026-03-29T01:00:00Z`):
/// the same in every process, so registering from many processes, or
/// again at each start-up, never doubles it.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use tiered_timer_jobs::{Missed, Recurrence};
///
/// # fn demo() -> Result<(), tiered_timer_jobs::Error> {
/// let nightly = Recurrence::cron("0 30 2 * * *")?     // sec min hour day-of-month month day-of-week
///     .time_zone("Europe/Berlin")?                   // IANA name; UTC when not given
///     .missed(Missed::RunOnce);                      // the default
/// let every = Recurrence::every(Duration::from_secs(10))?; // at :00, :10, :20... (Unix epoch)
///
/// // 2026-03-29, the spring-forward day: 02:30 does not exist in Berlin,
/// // so it runs at the first instant after the gap, 03:00 CEST (01:00 UTC).
/// let before = SystemTime::UNIX_EPOCH + Duration::from_secs(1_774_742_400); // 2026-03-29T00:00:00Z
/// let next = nightly.next_after(before).unwrap();
/// assert_eq!(next, SystemTime::UNIX_EPOCH + Duration::from_secs(1_774_746_000));
/// # Ok(())
/// # }
/// # demo().unwrap();
/// ```
#[derive(Clone)]
pub struct Recurrence {
    rule: Rule,
    zone: TimeZone,
    zone_name: String,
    missed: Missed,
}

/// What a recurrence follows.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Rule {
    /// A cron spec, as given (trimmed, single spaces).
    Cron { spec: String, cron: Cron },
    /// A period in whole ms, anchored at the Unix epoch.
    Every(u64),
}

/// What a recurrence does about occurrences that came while no worker
/// claimed them (no worker ran, the store was closed): an occurrence is
/// *missed* when the next one had come too by the time it was claimed.
///
/// A recurrence keeps one occurrence waiting at a time, so a gap piles
/// nothing up; when a worker claims the occurrence that waited, the
/// policy decides what follows. The default is [`Missed::RunOnce`].
///
/// # Examples
///
/// ```
/// use tiered_timer_jobs::{Missed, Recurrence};
///
/// # fn demo() -> Result<(), tiered_timer_jobs::Error> {
/// // An hourly export: after a night with no workers, catch up on at most
/// // 3 of the hours missed, oldest first, then go on.
/// let export = Recurrence::cron("0 0 * * * *")?.missed(Missed::RunAll { max: 3 });
/// assert_eq!(export.missed_policy(), Missed::RunAll { max: 3 });
/// assert_eq!(Missed::default(), Missed::RunOnce);
/// # Ok(())
/// # }
/// # demo().unwrap();
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Missed {
    /// Delivers none of the missed occurrences, and goes on at the next
    /// occurrence after the claim.
    Skip,
    /// Delivers one job for all of them (the first missed one's), then
    /// goes on at the next occurrence after the claim.
    #[default]
    RunOnce,
    /// Delivers the missed occurrences one after the other, oldest first,
    /// up to `max` of them (1 to 10 000), then goes on at the next
    /// occurrence after the claim (the rest are not delivered).
    RunAll {
        /// The most missed occurrences delivered after one gap.
        max: u32,
    },
}

impl fmt::Display for Missed {
    /// `skip`, `run-once` or `run-all:MAX`, as stored and as `ttr` shows it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Missed::Skip => f.write_str("skip"),
            Missed::RunOnce => f.write_str("run-once"),
            Missed::RunAll { max } => write!(f, "run-all:{max}"),
        }
    }
}

impl Missed {
    /// Reads what [`Display`](fmt::Display) wrote.
    pub(crate) fn parse(text: &str) -> Option<Missed> {
        match text {
            "skip" => Some(Missed::Skip),
            "run-once" => Some(Missed::RunOnce),
            other => {
                let max = other.strip_prefix("run-all:")?.parse().ok()?;
                Some(Missed::RunAll { max })
            }
        }
    }
}

impl fmt::Debug for Recurrence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Recurrence")
            .field("spec", &self.spec())
            .field("time_zone", &self.zone_name)
            .field("missed", &self.missed)
            .finish()
    }
}

impl PartialEq for Recurrence {
    /// Same spec, zone and policy: what [`Queue::recur`](crate::Queue::recur)
    /// compares (with the payload) to tell a registration again from a
    /// change.
    fn eq(&self, other: &Recurrence) -> bool {
        self.rule == other.rule && self.zone_name == other.zone_name && self.missed == other.missed
    }
}

impl Eq for Recurrence {}

impl Recurrence {
    /// A recurrence on a cron spec: six fields, `sec min hour
    /// day-of-month month day-of-week` (or five, without the seconds),
    /// in UTC until [`time_zone`](Recurrence::time_zone) says otherwise.
    ///
    /// A field is `*`, a number, a range `a-b`, a list `a,b,c`, each with
    /// an optional step (`*/15`, `10-30/5`); months may be `JAN`..`DEC`
    /// and days of the week `SUN`..`SAT` or `0`..`7` (0 and 7 are Sunday).
    /// The macros `@yearly`, `@monthly`, `@weekly`, `@daily` and
    /// `@hourly` are accepted. As in Vixie cron, when both day fields
    /// are restricted (neither starts with `*`) a day matches if either
    /// does.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRecurrence`] saying what is wrong: a field out of
    /// range, a bad step or name, the wrong number of fields, or days
    /// that never occur (`0 0 0 30 2 *`).
    ///
    /// # Examples
    ///
    /// ```
    /// use tiered_timer_jobs::{Error, Recurrence};
    ///
    /// let weekdays = Recurrence::cron("0 0 9 * * MON-FRI").unwrap();
    /// assert_eq!(weekdays.spec(), "0 0 9 * * MON-FRI");
    /// assert!(matches!(Recurrence::cron("0 0 25 * * *"), Err(Error::InvalidRecurrence { .. })));
    /// ```
    pub fn cron(spec: &str) -> Result<Recurrence, Error> {
        let spec = spec.split_whitespace().collect::<Vec<_>>().join(" ");
        let cron = Cron::parse(&spec).map_err(|reason| Error::InvalidRecurrence {
            reason: format!("cron spec {spec:?}: {reason}"),
        })?;
        Ok(Recurrence {
            rule: Rule::Cron { spec, cron },
            zone: TimeZone::UTC,
            zone_name: "UTC".to_owned(),
            missed: Missed::default(),
        })
    }

    /// A recurrence every `period`, anchored at the Unix epoch: every
    /// instant that is a whole number of periods since 1970-01-01T00:00:00Z
    /// (so `every(1 h)` runs on the hour, in every process alike). A time
    /// zone changes nothing here.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRecurrence`] for a period under 1 s, not a whole
    /// number of milliseconds, or beyond 2^51 ms.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use tiered_timer_jobs::Recurrence;
    ///
    /// let every = Recurrence::every(Duration::from_secs(10)).unwrap();
    /// let at = SystemTime::UNIX_EPOCH + Duration::from_millis(25_500);
    /// assert_eq!(every.next_after(at), Some(SystemTime::UNIX_EPOCH + Duration::from_secs(30)));
    /// assert_eq!(every.spec(), "every 10s");
    /// ```
    pub fn every(period: Duration) -> Result<Recurrence, Error> {
        let invalid = |reason: &str| {
            Err(Error::InvalidRecurrence {
                reason: reason.to_owned(),
            })
        };
        if period < MIN_EVERY {
            return invalid("every's period must be at least 1 s");
        }
        if period.subsec_nanos() % 1_000_000 != 0 {
            return invalid("every's period must be a whole number of milliseconds");
        }
        let ms = millis_up(period);
        if ms > MAX_SPAN_MS {
            return invalid("every's period must be at most 2^51 ms");
        }
        Ok(Recurrence {
            rule: Rule::Every(ms),
            zone: TimeZone::UTC,
            zone_name: "UTC".to_owned(),
            missed: Missed::default(),
        })
    }

    /// The time zone the cron spec is read in, by its IANA name
    /// (`Europe/Berlin`, `America/New_York`, `UTC`), with its
    /// daylight-saving rules: a local time skipped by a spring-forward
    /// runs at the first instant after the gap (Vixie cron's rule); a
    /// local time that happens twice on a fall-back runs once, at its
    /// first instance.
    ///
    /// The zones come from the system's time zone database
    /// (`/usr/share/zoneinfo`, from the `tzdata` package on Debian; a copy
    /// bundled in the binary on Windows).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidTimeZone`] if the database has no zone of that
    /// name (or there is no database).
    ///
    /// # Examples
    ///
    /// ```
    /// use tiered_timer_jobs::{Error, Recurrence};
    ///
    /// let r = Recurrence::cron("0 0 8 * * *").unwrap().time_zone("America/New_York").unwrap();
    /// assert_eq!(r.time_zone_name(), "America/New_York");
    /// let bad = Recurrence::cron("0 0 8 * * *").unwrap().time_zone("Mars/Olympus_Mons");
    /// assert!(matches!(bad, Err(Error::InvalidTimeZone { .. })));
    /// ```
    pub fn time_zone(mut self, name: &str) -> Result<Recurrence, Error> {
        self.zone = TimeZone::get(name).map_err(|e| Error::InvalidTimeZone {
            name: name.chars().take(64).collect(),
            reason: e.to_string(),
        })?;
        self.zone_name = name.to_owned();
        Ok(self)
    }

    /// What to do about missed occurrences (default [`Missed::RunOnce`]).
    /// [`Missed::RunAll`]'s `max` is checked by
    /// [`Queue::recur`](crate::Queue::recur) (1 to 10 000).
    pub fn missed(mut self, missed: Missed) -> Recurrence {
        self.missed = missed;
        self
    }

    /// The first occurrence strictly after `t`, or `None` if there is none
    /// within 30 years (a spec that matches some day always has one) or
    /// before the year 9999. Pure: for tests and tools (`ttr`).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use tiered_timer_jobs::Recurrence;
    ///
    /// let r = Recurrence::cron("0 0 12 29 2 *").unwrap(); // Feb 29, noon UTC
    /// let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_772_323_200); // 2026-03-01
    /// let next = r.next_after(t).unwrap(); // 2028-02-29T12:00:00Z
    /// assert_eq!(next, SystemTime::UNIX_EPOCH + Duration::from_secs(1_835_438_400));
    /// ```
    pub fn next_after(&self, t: SystemTime) -> Option<SystemTime> {
        let ms = match t.duration_since(SystemTime::UNIX_EPOCH) {
            Ok(since) => i64::try_from(since.as_millis()).ok()?,
            // Before the epoch: whole ms, rounded down (so "after" holds).
            Err(before) => -i64::try_from(millis_up(before.duration())).ok()?,
        };
        let next = self.next_after_ms(ms)?;
        Some(SystemTime::UNIX_EPOCH + Duration::from_millis(next))
    }

    /// The first occurrence strictly after `ms` (ms since the epoch,
    /// possibly negative), in ms.
    pub(crate) fn next_after_ms(&self, ms: i64) -> Option<u64> {
        match &self.rule {
            Rule::Every(period) => {
                let period = *period as i64;
                let next = ms.div_euclid(period).checked_add(1)?.checked_mul(period)?;
                u64::try_from(next).ok()
            }
            Rule::Cron { cron, .. } => {
                let after = Timestamp::from_millisecond(ms).ok()?;
                // The civil time of `after`, to the second below it: every
                // match from there on is mapped, and the first instant past
                // `after` wins (earlier civil times map to earlier instants).
                let mut civil = self
                    .zone
                    .to_datetime(after)
                    .with()
                    .subsec_nanosecond(0)
                    .build()
                    .ok()?;
                loop {
                    let found = cron.next_civil(civil)?;
                    let at = self.instant_of(found)?;
                    if at > after {
                        return u64::try_from(at.as_millisecond()).ok();
                    }
                    civil = found.checked_add(jiff::SignedDuration::from_secs(1)).ok()?;
                }
            }
        }
    }

    /// Up to `n` occurrences after `after` (ms), in order.
    pub(crate) fn occurrences_after(&self, after: i64, n: usize) -> Vec<u64> {
        let mut times = Vec::with_capacity(n);
        let mut at = after;
        while times.len() < n {
            let Some(next) = self.next_after_ms(at) else {
                break;
            };
            times.push(next);
            at = next as i64;
        }
        times
    }

    /// The instant a matched civil date-time runs at: itself, the first
    /// instance of a time that happens twice, the first instant after
    /// the gap for one that does not exist.
    fn instant_of(&self, civil: DateTime) -> Option<Timestamp> {
        let ambiguous = self.zone.to_ambiguous_timestamp(civil);
        let gap = matches!(ambiguous.offset(), AmbiguousOffset::Gap { .. });
        let earlier = ambiguous.earlier().ok()?;
        if !gap {
            return Some(earlier);
        }
        // In a gap, `earlier` reads the time with the offset after the
        // change, which lands before the change: the change itself is the
        // first instant after the gap.
        self.zone
            .following(earlier)
            .next()
            .map(|transition| transition.timestamp())
    }

    /// The spec as stored and shown: the cron spec (single spaces), or
    /// `every 10s` (`h`, `m`, `s` or `ms`, the largest whole unit).
    pub fn spec(&self) -> String {
        match &self.rule {
            Rule::Cron { spec, .. } => spec.clone(),
            Rule::Every(ms) => {
                let (n, unit) = [(3_600_000, "h"), (60_000, "m"), (1_000, "s"), (1, "ms")]
                    .into_iter()
                    .find(|(unit, _)| ms % unit == 0)
                    .map(|(size, unit)| (ms / size, unit))
                    .expect("1 divides everything");
                format!("every {n}{unit}")
            }
        }
    }

    /// The time zone's IANA name (`UTC` unless
    /// [`time_zone`](Recurrence::time_zone) set one).
    pub fn time_zone_name(&self) -> &str {
        &self.zone_name
    }

    /// The policy for missed occurrences.
    pub fn missed_policy(&self) -> Missed {
        self.missed
    }

    /// Reads a recurrence back from what [`spec`](Recurrence::spec),
    /// [`time_zone_name`](Recurrence::time_zone_name) and the policy's
    /// `Display` wrote (the store keeps these three texts).
    pub(crate) fn parse_stored(spec: &str, zone: &str, missed: &str) -> Result<Recurrence, Error> {
        let rule = match spec.strip_prefix("every ") {
            Some(period) => Recurrence::every(parse_period(period).ok_or_else(|| {
                Error::InvalidRecurrence {
                    reason: format!("stored period {period:?} is not one this version reads"),
                }
            })?)?,
            None => Recurrence::cron(spec)?,
        };
        let missed = Missed::parse(missed).ok_or_else(|| Error::InvalidRecurrence {
            reason: format!("stored policy {missed:?} is not one this version reads"),
        })?;
        Ok(rule.time_zone(zone)?.missed(missed))
    }

    /// Checks what only [`Queue::recur`](crate::Queue::recur) can refuse
    /// (`missed` returns no `Result`): `RunAll`'s `max`.
    pub(crate) fn check(&self) -> Result<(), Error> {
        if let Missed::RunAll { max } = self.missed {
            if max == 0 || max > MAX_RUN_ALL {
                return Err(Error::InvalidRecurrence {
                    reason: "Missed::RunAll's max must be between 1 and 10000 (Skip delivers none)"
                        .to_owned(),
                });
            }
        }
        Ok(())
    }

    /// What follows the claim of occurrence `pending` at `now` (both ms),
    /// `run` missed occurrences having been delivered in a row before it:
    /// the one decision every backend makes (see [`Missed`]).
    pub(crate) fn advance(&self, pending: u64, now: u64, run: u32) -> Advance {
        let next = self.next_after_ms(pending as i64);
        let missed = next.is_some_and(|next| next <= now);
        if !missed {
            return Advance {
                deliver: true,
                next,
                run: 0,
            };
        }
        let after_now = || self.next_after_ms(now as i64);
        match self.missed {
            Missed::Skip => Advance {
                deliver: false,
                next: after_now(),
                run: 0,
            },
            Missed::RunOnce => Advance {
                deliver: true,
                next: after_now(),
                run: 0,
            },
            Missed::RunAll { max } if run + 1 >= max => Advance {
                deliver: true,
                next: after_now(),
                run: 0,
            },
            Missed::RunAll { .. } => Advance {
                deliver: true,
                next,
                run: run + 1,
            },
        }
    }
}

/// What follows the claim of an occurrence ([`Recurrence::advance`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Advance {
    /// Whether the claimed occurrence goes to its worker (else it is
    /// removed: skipped).
    pub(crate) deliver: bool,
    /// The occurrence to wait for next (ms), if any.
    pub(crate) next: Option<u64>,
    /// Missed occurrences delivered in a row, counting this one.
    pub(crate) run: u32,
}

/// `10s`, `5m`, `2h`, `1500ms` as [`Recurrence::spec`] writes them.
fn parse_period(text: &str) -> Option<Duration> {
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (n, unit) = text.split_at(split);
    let n: u64 = n.parse().ok()?;
    let ms = match unit {
        "h" => n.checked_mul(3_600_000)?,
        "m" => n.checked_mul(60_000)?,
        "s" => n.checked_mul(1_000)?,
        "ms" => n,
        _ => return None,
    };
    Some(Duration::from_millis(ms))
}

/// The separator between a recurrence's name and an occurrence's time in
/// the occurrence's job id.
const AT: char = '@';

/// The id of a recurrence's occurrence at `ms`: `name@2026-03-29T01:00:00Z`
/// (with `.mmm` when the time is not a whole second).
pub(crate) fn occurrence_id(name: &str, ms: u64) -> String {
    format!("{name}{AT}{}", occurrence_suffix(ms))
}

/// An occurrence's time as its id writes it (RFC 3339, UTC).
pub(crate) fn occurrence_suffix(ms: u64) -> String {
    let at = Timestamp::from_millisecond(ms as i64).unwrap_or(Timestamp::UNIX_EPOCH);
    let civil = jiff::tz::Offset::UTC.to_datetime(at);
    let whole = civil.strftime("%Y-%m-%dT%H:%M:%S");
    match ms % 1000 {
        0 => format!("{whole}Z"),
        frac => format!("{whole}.{frac:03}Z"),
    }
}

/// The recurrence and occurrence (ms) of an occurrence's job id, if `id`
/// has that form exactly (ids of that form are reserved: see
/// [`Queue::schedule_with_id`](crate::Queue::schedule_with_id)).
pub(crate) fn parse_occurrence_id(id: &str) -> Option<(&str, u64)> {
    let (name, at) = id.rsplit_once(AT)?;
    let body = at.strip_suffix('Z')?;
    // YYYY-MM-DDTHH:MM:SS, then .mmm or nothing.
    let (whole, frac) = match body.len() {
        19 => (body, 0),
        23 if body.as_bytes()[19] == b'.' => {
            let frac = &body[20..];
            if !frac.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            (&body[..19], frac.parse::<u64>().ok()?)
        }
        _ => return None,
    };
    if name.is_empty() || frac == 0 && body.len() == 23 {
        return None;
    }
    let civil: DateTime = whole.parse().ok()?;
    let ms = jiff::tz::Offset::UTC
        .to_timestamp(civil)
        .ok()?
        .as_millisecond();
    let ms = u64::try_from(ms).ok()? + frac;
    // Only the form this crate writes (so one occurrence has one id).
    (occurrence_suffix(ms) == at).then_some((name, ms))
}

/// The longest recurrence name: its occurrences' ids (name, `@`, up to 24
/// bytes of time) must stay within a job id's 512 bytes.
pub(crate) const MAX_RECURRENCE_NAME: usize = 256;

/// Checks a recurrence's name: 1 to 256 bytes, no control characters.
pub(crate) fn check_recurrence_name(name: &str) -> Result<(), Error> {
    let reason = if name.is_empty() {
        "a recurrence's name must not be empty"
    } else if name.len() > MAX_RECURRENCE_NAME {
        "a recurrence's name must be at most 256 bytes"
    } else if name.chars().any(char::is_control) {
        "a recurrence's name must not contain control characters"
    } else {
        return Ok(());
    };
    Err(Error::InvalidRecurrence {
        reason: reason.to_owned(),
    })
}

/// A recurrence as [`Queue::recurrences`](crate::Queue::recurrences) lists
/// it, by the store's clock.
///
/// # Examples
///
/// ```no_run
/// # use tiered_timer_jobs::Queue;
/// # async fn demo(queue: Queue) -> Result<(), tiered_timer_jobs::Error> {
/// for r in queue.recurrences().await? {
///     println!("{} ({} in {}): next {:?}, last {:?} ({:?})",
///         r.name, r.spec, r.time_zone, r.next, r.last, r.last_run);
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecurrenceInfo {
    /// Its name.
    pub name: String,
    /// Its spec ([`Recurrence::spec`]: the cron spec, or `every 10s`).
    pub spec: String,
    /// Its time zone's IANA name.
    pub time_zone: String,
    /// What it does about missed occurrences.
    pub missed: Missed,
    /// Whether it is paused ([`Queue::pause_recurrence`](crate::Queue::pause_recurrence)).
    pub paused: bool,
    /// The occurrence waiting to be claimed (`None` while paused).
    pub next: Option<SystemTime>,
    /// The last occurrence delivered to a worker, if any.
    pub last: Option<SystemTime>,
    /// What became of that occurrence's job.
    pub last_run: Option<LastRun>,
    /// The last error its job's worker gave, if it failed.
    pub last_error: Option<String>,
}

/// What became of a recurrence's last delivered occurrence
/// ([`RecurrenceInfo::last_run`]), read from its job.
///
/// # Examples
///
/// ```
/// assert_eq!(tiered_timer_jobs::LastRun::Done.to_string(), "done");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LastRun {
    /// Its job is leased to a worker.
    Running,
    /// Its job failed and waits for another attempt.
    Retrying,
    /// Its job is a dead letter.
    Dead,
    /// Its job is gone: acked (or cancelled, or purged).
    Done,
}

impl LastRun {
    /// `running`, `retrying`, `dead` or `done`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(tiered_timer_jobs::LastRun::Dead.as_str(), "dead");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            LastRun::Running => "running",
            LastRun::Retrying => "retrying",
            LastRun::Dead => "dead",
            LastRun::Done => "done",
        }
    }
}

impl fmt::Display for LastRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An RFC 3339 time as ms.
    fn ms(text: &str) -> u64 {
        text.parse::<Timestamp>().unwrap().as_millisecond() as u64
    }

    /// The occurrences after `from`, as RFC 3339 UTC.
    fn after(r: &Recurrence, from: &str, n: usize) -> Vec<String> {
        let mut at = ms(from) as i64;
        (0..n)
            .map(|_| {
                at = r.next_after_ms(at).unwrap() as i64;
                occurrence_suffix(at as u64)
            })
            .collect()
    }

    fn zoned(spec: &str, zone: &str) -> Recurrence {
        Recurrence::cron(spec).unwrap().time_zone(zone).unwrap()
    }

    #[test]
    fn berlin_spring_forward_runs_at_the_end_of_the_gap() {
        // 2026-03-29: 02:00 CET becomes 03:00 CEST (01:00 UTC).
        let r = zoned("0 30 2 * * *", "Europe/Berlin");
        assert_eq!(
            after(&r, "2026-03-27T12:00:00Z", 4),
            [
                "2026-03-28T01:30:00Z", // 02:30 CET
                "2026-03-29T01:00:00Z", // 02:30 does not exist: 03:00 CEST
                "2026-03-30T00:30:00Z", // 02:30 CEST
                "2026-03-31T00:30:00Z",
            ]
        );
        // The sixty minutes of the skipped hour run once, at its end.
        let r = zoned("0 * 2 * * *", "Europe/Berlin");
        let got = after(&r, "2026-03-28T01:58:30Z", 3);
        assert_eq!(
            got,
            [
                "2026-03-28T01:59:00Z",
                "2026-03-29T01:00:00Z",
                "2026-03-30T00:00:00Z"
            ]
        );
    }

    #[test]
    fn berlin_fall_back_runs_once_at_the_first_instance() {
        // 2026-10-25: 03:00 CEST becomes 02:00 CET (01:00 UTC): 02:30
        // happens at 00:30 UTC and again at 01:30 UTC.
        let r = zoned("0 30 2 * * *", "Europe/Berlin");
        assert_eq!(
            after(&r, "2026-10-24T12:00:00Z", 3),
            [
                "2026-10-25T00:30:00Z",
                "2026-10-26T01:30:00Z",
                "2026-10-27T01:30:00Z"
            ]
        );
        // From inside the repeated hour, the next is the next day's.
        assert_eq!(
            after(&r, "2026-10-25T01:15:00Z", 1),
            ["2026-10-26T01:30:00Z"]
        );
        // An every-10-minutes spec in the repeated hour: once per local time.
        let r = zoned("0 */10 2 * * *", "Europe/Berlin");
        let got = after(&r, "2026-10-25T00:45:00Z", 3);
        assert_eq!(
            got,
            [
                "2026-10-25T00:50:00Z",
                "2026-10-26T01:00:00Z",
                "2026-10-26T01:10:00Z"
            ]
        );
    }

    #[test]
    fn new_york_changes_of_2026() {
        // 2026-03-08: 02:00 EST becomes 03:00 EDT (07:00 UTC).
        let r = zoned("0 30 2 * * *", "America/New_York");
        assert_eq!(
            after(&r, "2026-03-07T12:00:00Z", 3),
            [
                "2026-03-08T07:00:00Z",
                "2026-03-09T06:30:00Z",
                "2026-03-10T06:30:00Z"
            ]
        );
        // 2026-11-01: 02:00 EDT becomes 01:00 EST: 01:30 happens twice.
        let r = zoned("0 30 1 * * *", "America/New_York");
        assert_eq!(
            after(&r, "2026-10-31T12:00:00Z", 2),
            ["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"]
        );
    }

    #[test]
    fn sydney_changes_of_2026() {
        // 2026-04-05: 03:00 AEDT becomes 02:00 AEST: 02:30 happens twice
        // (15:30 and 16:30 UTC on the 4th); first instance.
        let r = zoned("0 30 2 * * *", "Australia/Sydney");
        assert_eq!(
            after(&r, "2026-04-04T00:00:00Z", 2),
            ["2026-04-04T15:30:00Z", "2026-04-05T16:30:00Z"]
        );
        // 2026-10-04: 02:00 AEST becomes 03:00 AEDT (16:00 UTC on the 3rd).
        assert_eq!(
            after(&r, "2026-10-02T00:00:00Z", 3),
            [
                "2026-10-02T16:30:00Z",
                "2026-10-03T16:00:00Z",
                "2026-10-04T15:30:00Z"
            ]
        );
    }

    #[test]
    fn feb_29() {
        let r = zoned("0 0 9 29 2 *", "Europe/Berlin");
        assert_eq!(
            after(&r, "2026-01-01T00:00:00Z", 2),
            ["2028-02-29T08:00:00Z", "2032-02-29T08:00:00Z"]
        );
        // And an every-day spec walks through Feb 29 of 2028.
        let r = Recurrence::cron("0 0 0 * 2,3 *").unwrap();
        assert_eq!(
            after(&r, "2028-02-28T00:00:00Z", 2),
            ["2028-02-29T00:00:00Z", "2028-03-01T00:00:00Z"]
        );
    }

    #[test]
    fn every_is_anchored_at_the_epoch() {
        let r = Recurrence::every(Duration::from_millis(1500)).unwrap();
        assert_eq!(r.next_after_ms(0), Some(1500));
        assert_eq!(r.next_after_ms(1499), Some(1500));
        assert_eq!(r.next_after_ms(1500), Some(3000));
        assert_eq!(r.next_after_ms(-1), Some(0));
        assert_eq!(r.spec(), "every 1500ms");
        for bad in [Duration::from_millis(999), Duration::from_micros(1_000_500)] {
            assert!(matches!(
                Recurrence::every(bad),
                Err(Error::InvalidRecurrence { .. })
            ));
        }
    }

    #[test]
    fn stored_texts_read_back() {
        for r in [
            zoned("0 30 2 * * *", "Europe/Berlin").missed(Missed::Skip),
            Recurrence::every(Duration::from_secs(7200))
                .unwrap()
                .missed(Missed::RunAll { max: 7 }),
            Recurrence::every(Duration::from_millis(2500)).unwrap(),
            Recurrence::cron("@daily").unwrap(),
        ] {
            let back = Recurrence::parse_stored(
                &r.spec(),
                r.time_zone_name(),
                &r.missed_policy().to_string(),
            )
            .unwrap();
            assert_eq!(back, r);
        }
    }

    #[test]
    fn occurrence_ids_are_exact() {
        let at = ms("2028-02-29T23:59:59.5Z");
        let id = occurrence_id("a@b", at);
        assert_eq!(id, "a@b@2028-02-29T23:59:59.500Z");
        assert_eq!(parse_occurrence_id(&id), Some(("a@b", at)));
        assert_eq!(
            parse_occurrence_id("x@2026-03-29T01:00:00Z"),
            Some(("x", ms("2026-03-29T01:00:00Z")))
        );
        for not in [
            "order-42",
            "x@2026-03-29T01:00:00",
            "@2026-03-29T01:00:00Z",
            "x@2026-03-29T01:00:00.000Z",
            "x@2026-02-30T01:00:00Z",
            "x@2026-03-29T01:00:00.5Z",
            "x@2026-03-29 01:00:00Z",
            "user@example.com",
        ] {
            assert_eq!(parse_occurrence_id(not), None, "{not}");
        }
    }

    #[test]
    fn the_decision_after_a_gap() {
        let r = Recurrence::every(Duration::from_secs(1)).unwrap();
        // On time: delivered, the next one follows.
        let on_time = r.advance(10_000, 10_400, 0);
        assert_eq!(
            (on_time.deliver, on_time.next, on_time.run),
            (true, Some(11_000), 0)
        );
        // 5 s late: 10, 11, 12, 13, 14 and 15 came.
        let at = |m| r.clone().missed(m).advance(10_000, 15_200, 0);
        let skip = at(Missed::Skip);
        assert_eq!((skip.deliver, skip.next), (false, Some(16_000)));
        let once = at(Missed::RunOnce);
        assert_eq!((once.deliver, once.next), (true, Some(16_000)));
        let all = at(Missed::RunAll { max: 3 });
        assert_eq!((all.deliver, all.next, all.run), (true, Some(11_000), 1));
        // The third in a row is the last of the run.
        let r3 = r.clone().missed(Missed::RunAll { max: 3 });
        let third = r3.advance(12_000, 15_300, 2);
        assert_eq!(
            (third.deliver, third.next, third.run),
            (true, Some(16_000), 0)
        );
    }
}
