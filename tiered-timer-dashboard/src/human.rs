//! Numbers for people: durations ("3m 12s"), byte sizes ("1.2 KiB"), UTC
//! times ("2026-11-24 22:31:05 UTC") and times relative to a store's now
//! ("in 5s", "3m ago"), the same on the pages and in `ttr`'s output. (`duration` is the library's,
//! which uses it for `Stats`' `Display`: the two must agree.)

use std::time::{Duration, SystemTime};

/// A duration in its two largest units, rounded down: `850ms`, `42s`,
/// `3m 12s`, `2h 5m`, `3d 4h`. The second unit is left out when zero.
pub fn duration(d: Duration) -> String {
    const MINUTE: u64 = 60;
    const HOUR: u64 = 60 * MINUTE;
    const DAY: u64 = 24 * HOUR;
    let secs = d.as_secs();
    let two = |big: u64, big_unit: &str, small: u64, small_unit: &str| {
        if small == 0 {
            format!("{big}{big_unit}")
        } else {
            format!("{big}{big_unit} {small}{small_unit}")
        }
    };
    if secs == 0 {
        format!("{}ms", d.subsec_millis())
    } else if secs < MINUTE {
        format!("{secs}s")
    } else if secs < HOUR {
        two(secs / MINUTE, "m", secs % MINUTE, "s")
    } else if secs < DAY {
        two(secs / HOUR, "h", secs % HOUR / MINUTE, "m")
    } else {
        two(secs / DAY, "d", secs % DAY / HOUR, "h")
    }
}

/// A size in bytes: `42 B`, `1.2 KiB`, `3.4 MiB`.
pub fn bytes(n: u64) -> String {
    const KIB: u64 = 1024;
    if n < KIB {
        format!("{n} B")
    } else if n < KIB * KIB {
        format!("{:.1} KiB", n as f64 / KIB as f64)
    } else {
        format!("{:.1} MiB", n as f64 / (KIB * KIB) as f64)
    }
}

/// A time as a UTC date and time to the second, `2026-11-24 22:31:05 UTC`
/// (times before 1970 as `before 1970`).
pub fn utc(time: SystemTime) -> String {
    let Ok(since) = time.duration_since(SystemTime::UNIX_EPOCH) else {
        return "before 1970".to_owned();
    };
    let secs = since.as_secs();
    let (year, month, day) = civil_from_days(secs / 86_400);
    let of_day = secs % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60
    )
}

/// `to` relative to `from`: `in 5s`, `3m 12s ago`.
pub fn relative(to: SystemTime, from: SystemTime) -> String {
    match to.duration_since(from) {
        Ok(ahead) => format!("in {}", duration(ahead)),
        Err(behind) => format!("{} ago", duration(behind.duration())),
    }
}

/// Whose clock a store's times are by: Redis' `TIME`, Postgres'
/// `clock_timestamp()`, or on an embedded store (`file://`) the host's
/// wall clock.
pub fn clock_name(url: &str) -> &'static str {
    if url.starts_with("file://") {
        "host time"
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        "Postgres time"
    } else {
        "Redis time"
    }
}

/// The proleptic Gregorian date of a day count since 1970-01-01, by
/// counting 400-year eras of 146 097 days with years that start on
/// 1 March (so the leap day is the last day of its year; Howard
/// Hinnant's well-known method).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let shifted = days + 719_468; // days from 0000-03-01
    let era = shifted / 146_097;
    let day_of_era = shifted % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = era * 400 + year_of_era + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_at_a_glance() {
        let s = Duration::from_secs;
        assert_eq!(duration(Duration::ZERO), "0ms");
        assert_eq!(duration(Duration::from_millis(850)), "850ms");
        assert_eq!(duration(s(42)), "42s");
        assert_eq!(duration(s(60)), "1m");
        assert_eq!(duration(s(3 * 60 + 12)), "3m 12s");
        assert_eq!(duration(s(2 * 3600 + 5 * 60 + 59)), "2h 5m");
        assert_eq!(duration(s(3 * 86_400 + 4 * 3600)), "3d 4h");
        assert_eq!(duration(Duration::MAX), "213503982334601d 7h");
    }

    #[test]
    fn sizes() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1229), "1.2 KiB");
        assert_eq!(bytes(5 * 1024 * 1024), "5.0 MiB");
    }

    #[test]
    fn utc_dates() {
        let at = |secs| SystemTime::UNIX_EPOCH + Duration::from_secs(secs);
        assert_eq!(utc(at(0)), "1970-01-01 00:00:00 UTC");
        // `date -u -d @951782400`: the leap day of a year divisible by 400.
        assert_eq!(utc(at(951_782_400)), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc(at(1_795_559_465)), "2026-11-24 22:31:05 UTC");
        assert_eq!(utc(at(4_107_542_399)), "2100-02-28 23:59:59 UTC");
        assert_eq!(utc(at(4_107_542_400)), "2100-03-01 00:00:00 UTC");
        assert_eq!(
            utc(SystemTime::UNIX_EPOCH - Duration::from_secs(1)),
            "before 1970"
        );
    }
}
