//! Durations for people ("3m 12s"), for [`Stats`](crate::Stats)'
//! `Display`. (The `ttr` crate has its own copy, with sizes and dates.)

use std::time::Duration;

/// A duration in its two largest units, rounded down: `850ms`, `42s`,
/// `3m 12s`, `2h 5m`, `3d 4h`. The second unit is left out when zero.
pub(crate) fn duration(d: Duration) -> String {
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
}
