//! A cron spec and the civil date-times it matches: the small parser
//! under [`Recurrence::cron`](crate::Recurrence::cron). Time zones and
//! daylight saving are `recurrence.rs`'s; this file knows civil time only.
//!
//! Six fields, `sec min hour day-of-month month day-of-week`, or five
//! without the seconds (then 0), or a macro (`@yearly`, `@annually`,
//! `@monthly`, `@weekly`, `@daily`, `@midnight`, `@hourly`). A field is a
//! list (`,`) of `*`, a number, a range `a-b`, each with an optional step
//! `/n` (`a/n` is `a-max/n`); months may be `JAN`..`DEC`, days of the week
//! `SUN`..`SAT` or `0`..`7` (both 0 and 7 are Sunday), in any case.
//!
//! Days follow Vixie cron: when both day fields are restricted (neither
//! starts with `*`), a day matches if either does (`0 0 0 1,15 * MON` is
//! the 1st, the 15th and every Monday); otherwise both must.
//!
//! The search for the next match is a walk over the fields from the year
//! down, each jumping to its next allowed value (a bit mask each), so a
//! match a year away costs a few dozen steps, not one per second.

use jiff::civil::{self, DateTime};

/// How far ahead a search looks before it says "never" (a spec that
/// matches some day matches one within 8 years: Feb 29 in a century
/// that skips a leap year is the worst case; construction refuses specs
/// that match no day at all).
const SEARCH_YEARS: i16 = 30;

/// A parsed cron spec: one bit mask per field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cron {
    seconds: u64,
    minutes: u64,
    hours: u32,
    /// Bits 1..=31.
    days: u32,
    /// Bits 1..=12.
    months: u16,
    /// Bits 0..=6, Sunday 0.
    weekdays: u8,
    /// Whether the day-of-month field starts with `*` (Vixie's rule).
    days_star: bool,
    /// Whether the day-of-week field starts with `*`.
    weekdays_star: bool,
}

/// One field's name, range and names, in order.
struct Field {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

const FIELDS: [Field; 6] = [
    Field {
        name: "second",
        min: 0,
        max: 59,
        names: &[],
    },
    Field {
        name: "minute",
        min: 0,
        max: 59,
        names: &[],
    },
    Field {
        name: "hour",
        min: 0,
        max: 23,
        names: &[],
    },
    Field {
        name: "day of month",
        min: 1,
        max: 31,
        names: &[],
    },
    Field {
        name: "month",
        min: 1,
        max: 12,
        names: &[
            "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
        ],
    },
    Field {
        name: "day of week",
        min: 0,
        max: 7,
        names: &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"],
    },
];

impl Cron {
    /// Parses a spec (see the module docs).
    ///
    /// # Errors
    ///
    /// What is wrong with it, naming the field.
    pub(crate) fn parse(spec: &str) -> Result<Cron, String> {
        let expanded = match spec.trim() {
            "@yearly" | "@annually" => "0 0 0 1 1 *",
            "@monthly" => "0 0 0 1 * *",
            "@weekly" => "0 0 0 * * 0",
            "@daily" | "@midnight" => "0 0 0 * * *",
            "@hourly" => "0 0 * * * *",
            other if other.starts_with('@') => {
                return Err(format!(
                    "unknown macro {other:?}: @yearly, @monthly, @weekly, @daily or @hourly"
                ))
            }
            other => other,
        };
        let mut fields: Vec<&str> = expanded.split_whitespace().collect();
        match fields.len() {
            6 => {}
            5 => fields.insert(0, "0"),
            0 => return Err("the spec is empty".to_owned()),
            n => {
                return Err(format!(
                "{n} fields: a cron spec has six (sec min hour day-of-month month day-of-week), \
                     or five without the seconds"
            ))
            }
        }
        let mut masks = [0u64; 6];
        for ((mask, text), field) in masks.iter_mut().zip(&fields).zip(&FIELDS) {
            *mask = parse_field(text, field)?;
        }
        // Day of week 7 is Sunday, as 0.
        let weekdays = (masks[5] | (masks[5] >> 7)) & 0x7f;
        let cron = Cron {
            seconds: masks[0],
            minutes: masks[1],
            hours: masks[2] as u32,
            days: masks[3] as u32,
            months: masks[4] as u16,
            weekdays: weekdays as u8,
            days_star: fields[3].starts_with('*'),
            weekdays_star: fields[5].starts_with('*'),
        };
        cron.check_some_day_matches()?;
        Ok(cron)
    }

    /// Refuses a spec whose days match no date at all (`0 0 0 30 2 *`):
    /// it would never run, which is a mistake, not a schedule.
    fn check_some_day_matches(&self) -> Result<(), String> {
        // With the day of week restricted too, its days match (Vixie's
        // "either"); with it `*`, the days of the month decide alone.
        if !self.weekdays_star && !self.days_star {
            return Ok(());
        }
        if self.weekdays == 0 {
            return Err("no day of the week matches".to_owned());
        }
        // The longest each month can be (February in a leap year).
        const LONGEST: [u32; 12] = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
        let some = (1..=12).any(|m| {
            self.months & (1 << m) != 0
                && (1..=LONGEST[m as usize - 1]).any(|d| self.days & (1 << d) != 0)
        });
        if some {
            Ok(())
        } else {
            Err("the day of month never occurs in the months given".to_owned())
        }
    }

    /// Whether `date` matches the day fields.
    fn day_matches(&self, date: civil::Date) -> bool {
        let day = self.days & (1 << date.day()) != 0;
        let weekday = self.weekdays & (1 << date.weekday().to_sunday_zero_offset()) != 0;
        if self.days_star || self.weekdays_star {
            day && weekday
        } else {
            day || weekday
        }
    }

    /// The first civil date-time at or after `from` (whole seconds) that
    /// matches, within [`SEARCH_YEARS`]; `None` past that or past the
    /// calendar's end.
    pub(crate) fn next_civil(&self, from: DateTime) -> Option<DateTime> {
        let limit = from.year().saturating_add(SEARCH_YEARS).min(9999);
        let (mut y, mut mo, mut d) = (from.year(), from.month(), from.day());
        let (mut h, mut mi, mut s) = (from.hour(), from.minute(), from.second());
        loop {
            if y > limit {
                return None;
            }
            // Month.
            match next_bit(u64::from(self.months), mo as u32, 12) {
                Some(m) if m == mo as u32 => {}
                Some(m) => {
                    (mo, d, h, mi, s) = (m as i8, 1, 0, 0, 0);
                }
                None => {
                    (y, mo, d, h, mi, s) = (y + 1, 1, 1, 0, 0, 0);
                    continue;
                }
            }
            // Day.
            let date = civil::date(y, mo, 1);
            let days_in = date.days_in_month();
            let mut day = None;
            for candidate in d..=days_in {
                if self.day_matches(date.with().day(candidate).build().ok()?) {
                    day = Some(candidate);
                    break;
                }
            }
            match day {
                Some(found) if found == d => {}
                Some(found) => (d, h, mi, s) = (found, 0, 0, 0),
                None => {
                    (d, h, mi, s) = (1, 0, 0, 0);
                    if mo == 12 {
                        (y, mo) = (y + 1, 1);
                    } else {
                        mo += 1;
                    }
                    continue;
                }
            }
            // Hour, minute, second: each carries into the one above.
            match next_bit(u64::from(self.hours), h as u32, 23) {
                Some(found) if found == h as u32 => {}
                Some(found) => (h, mi, s) = (found as i8, 0, 0),
                None => {
                    (h, mi, s) = (0, 0, 0);
                    (y, mo, d) = next_day(y, mo, d, days_in);
                    continue;
                }
            }
            match next_bit(self.minutes, mi as u32, 59) {
                Some(found) if found == mi as u32 => {}
                Some(found) => (mi, s) = (found as i8, 0),
                None => {
                    (mi, s) = (0, 0);
                    if h == 23 {
                        h = 0;
                        (y, mo, d) = next_day(y, mo, d, days_in);
                    } else {
                        h += 1;
                    }
                    continue;
                }
            }
            match next_bit(self.seconds, s as u32, 59) {
                Some(found) => {
                    return civil::DateTime::new(y, mo, d, h, mi, found as i8, 0).ok();
                }
                None => {
                    s = 0;
                    if mi == 59 {
                        mi = 0;
                        if h == 23 {
                            h = 0;
                            (y, mo, d) = next_day(y, mo, d, days_in);
                        } else {
                            h += 1;
                        }
                    } else {
                        mi += 1;
                    }
                }
            }
        }
    }
}

/// The day after `y-mo-d` (a month of `days_in` days).
fn next_day(y: i16, mo: i8, d: i8, days_in: i8) -> (i16, i8, i8) {
    if d < days_in {
        (y, mo, d + 1)
    } else if mo < 12 {
        (y, mo + 1, 1)
    } else {
        (y + 1, 1, 1)
    }
}

/// The lowest set bit of `mask` at or above `from`, up to `max`.
fn next_bit(mask: u64, from: u32, max: u32) -> Option<u32> {
    if from > max {
        return None;
    }
    let above = mask >> from << from;
    let bit = above.trailing_zeros();
    (bit <= max).then_some(bit)
}

/// One field's bit mask.
fn parse_field(text: &str, field: &Field) -> Result<u64, String> {
    let mut mask = 0u64;
    for item in text.split(',') {
        let bad = |why: String| format!("the {} field {text:?}: {why}", field.name);
        let (range, step) = match item.split_once('/') {
            Some((range, step)) => {
                let step: u32 = step
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| bad(format!("step {step:?} is not a number above 0")))?;
                (range, Some(step))
            }
            None => (item, None),
        };
        let (low, high) = if range == "*" {
            (field.min, field.max)
        } else if let Some((a, b)) = range.split_once('-') {
            (value(a, field).map_err(bad)?, value(b, field).map_err(bad)?)
        } else {
            let a = value(range, field).map_err(bad)?;
            // `a/n` runs from a to the end of the field.
            (a, if step.is_some() { field.max } else { a })
        };
        if low > high {
            return Err(bad(format!("the range {range} runs backwards")));
        }
        let mut v = low;
        while v <= high {
            mask |= 1 << v;
            v += step.unwrap_or(1);
        }
    }
    Ok(mask)
}

/// One value of a field: a number within its range, or a name.
fn value(text: &str, field: &Field) -> Result<u32, String> {
    let upper = text.to_ascii_uppercase();
    if let Some(at) = field.names.iter().position(|&name| name == upper) {
        return Ok(at as u32 + if field.min == 1 { 1 } else { 0 });
    }
    let n: u32 = text.parse().map_err(|_| {
        if text.is_empty() {
            "an empty value".to_owned()
        } else {
            format!("{text:?} is not a number")
        }
    })?;
    if n < field.min || n > field.max {
        return Err(format!("{n} is out of range {}-{}", field.min, field.max));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn next(spec: &str, from: &str) -> String {
        let from: DateTime = from.parse().unwrap();
        Cron::parse(spec)
            .unwrap()
            .next_civil(from)
            .map_or("none".to_owned(), |dt| dt.to_string())
    }

    #[test]
    fn fields_and_their_forms() {
        assert_eq!(
            next("0 30 2 * * *", "2026-01-01T00:00:00"),
            "2026-01-01T02:30:00"
        );
        assert_eq!(
            next("0 30 2 * * *", "2026-01-01T02:30:01"),
            "2026-01-02T02:30:00"
        );
        assert_eq!(
            next("*/15 * * * * *", "2026-01-01T00:00:16"),
            "2026-01-01T00:00:30"
        );
        assert_eq!(
            next("0 0 9-17/4 * * *", "2026-01-01T10:00:00"),
            "2026-01-01T13:00:00"
        );
        assert_eq!(
            next("0 0 0 1 jan,Jul *", "2026-02-01T00:00:00"),
            "2026-07-01T00:00:00"
        );
        assert_eq!(
            next("0 0 0 * * SUN", "2026-01-01T00:00:00"),
            "2026-01-04T00:00:00"
        );
        assert_eq!(
            next("0 0 0 * * 7", "2026-01-01T00:00:00"),
            "2026-01-04T00:00:00"
        );
        assert_eq!(
            next("30 2 * * *", "2026-01-01T03:00:00"),
            "2026-01-02T02:30:00"
        );
        assert_eq!(
            next("@monthly", "2026-01-15T00:00:00"),
            "2026-02-01T00:00:00"
        );
        assert_eq!(
            next("5/20 * * * * *", "2026-01-01T00:00:06"),
            "2026-01-01T00:00:25"
        );
        // The end of a year carries into the next.
        assert_eq!(
            next("59 59 23 31 12 *", "2026-12-31T23:59:59"),
            "2026-12-31T23:59:59"
        );
        assert_eq!(
            next("0 0 0 1 1 *", "2026-12-31T23:59:59"),
            "2027-01-01T00:00:00"
        );
    }

    #[test]
    fn days_follow_vixie() {
        // Both restricted: either matches (the 13th, and every Friday).
        assert_eq!(
            next("0 0 0 13 * FRI", "2026-02-01T00:00:00"),
            "2026-02-06T00:00:00"
        );
        assert_eq!(
            next("0 0 0 13 * FRI", "2026-02-07T00:00:00"),
            "2026-02-13T00:00:00"
        );
        // A `*` step counts as `*`: both must match.
        assert_eq!(
            next("0 0 0 */2 * MON", "2026-01-01T00:00:00"),
            "2026-01-05T00:00:00"
        );
    }

    #[test]
    fn feb_29_comes_every_four_years() {
        assert_eq!(
            next("0 0 12 29 2 *", "2026-03-01T00:00:00"),
            "2028-02-29T12:00:00"
        );
        assert_eq!(
            next("0 0 12 29 2 *", "2096-03-01T00:00:00"),
            "2104-02-29T12:00:00"
        );
        // The last day of February, leap year or not, is two specs.
        assert_eq!(
            next("0 0 0 28 2 *", "2028-02-28T00:00:01"),
            "2029-02-28T00:00:00"
        );
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        for (spec, says) in [
            ("", "empty"),
            ("* * *", "3 fields"),
            (
                "60 * * * * *",
                "second field \"60\": 60 is out of range 0-59",
            ),
            ("0 0 24 * * *", "hour field"),
            ("0 0 0 0 * *", "day of month field"),
            ("0 0 0 * 13 *", "month field"),
            ("0 0 0 * * 8", "day of week field"),
            ("0 0 0 * FOO *", "\"FOO\" is not a number"),
            ("*/0 * * * * *", "step \"0\" is not a number above 0"),
            ("0 0 5-1 * * *", "runs backwards"),
            ("0 0 0 30 2 *", "never occurs"),
            ("0 0 0 31 4,6,9,11 *", "never occurs"),
            ("@often", "unknown macro"),
            ("1,,2 * * * * *", "an empty value"),
        ] {
            let error = Cron::parse(spec).unwrap_err();
            assert!(error.contains(says), "{spec:?}: {error}");
        }
        // Feb 30 with a day of the week restricted too matches that day.
        assert!(Cron::parse("0 0 0 30 2 MON").is_ok());
    }
}
