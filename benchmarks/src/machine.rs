//! What the numbers were measured on, for the lines under the tables and
//! the notes under the plots: the CPU, the load, the date.

/// The CPU model, the cores this process may use and the OS, as
/// `Intel(R) Xeon(R) Processor, 2 cores, linux`.
///
/// # Examples
///
/// ```
/// let machine = tiered_timer_benchmarks::machine::describe();
/// assert!(machine.contains(" cores, "));
/// ```
pub fn describe() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    format!("{model}, {} cores, {}", cores(), std::env::consts::OS)
}

/// The cores this process may use (0 if unknown).
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(0, |n| n.get())
}

/// The load averages over 1, 5 and 15 minutes, as `/proc/loadavg` has them
/// (`0.52 0.61 0.70`); empty where there is no such file.
///
/// # Examples
///
/// ```
/// let load = tiered_timer_benchmarks::machine::load_average();
/// assert!(load.is_empty() || load.split(' ').count() == 3);
/// ```
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Today's date (UTC) as `YYYY-MM-DD`.
///
/// # Examples
///
/// ```
/// let date = tiered_timer_benchmarks::machine::utc_date();
/// assert_eq!(date.len(), 10);
/// assert!(date.starts_with("20"));
/// ```
pub fn utc_date() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    // Howard Hinnant's days-to-civil algorithm.
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}
