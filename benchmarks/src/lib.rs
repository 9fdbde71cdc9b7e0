//! Benchmarks of `tiered-timer` and `tiered-timer-jobs` against their
//! peers; not published.
//!
//! The peers (tokio's timers, tokio-util's `DelayQueue`, pingora-timeout,
//! futures-timer, async-io, tokio-io-timeout, apalis-redis, RSMQ) are
//! dependencies of this crate only, so the published crates' examples stay
//! tutorials and build none of them.
//!
//! ```sh
//! cargo run --release -p tiered-timer-benchmarks --example compare              # the timer
//! cargo run --release -p tiered-timer-benchmarks --example compare_delay_queue  # DelayQueue
//! cargo run --release -p tiered-timer-benchmarks --example peers                # Redis queues
//! cargo run --release -p tiered-timer-benchmarks --example bench                # Redis: the poller
//! cargo run --release -p tiered-timer-benchmarks --example ops_cost             # Redis: operator reads
//! cargo run --release -p tiered-timer-benchmarks --example herd                 # Redis: cost per job by workers
//! cargo run --release -p tiered-timer-benchmarks --example lock_quota           # the lock under a CPU quota (root)
//! cargo bench -p tiered-timer-benchmarks                                        # criterion, HTML in target/criterion
//! cargo test -p tiered-timer-benchmarks                                         # tests run against a peer
//! ```
//!
//! Each program's own documentation says what it measures and how. This
//! library holds what several of them share.

pub mod plot;
pub mod quota;
pub mod redis_support;

mod process_cpu;
pub use process_cpu::process_cpu;

/// The cargo target directory this program was built into: its executable
/// is `<target>/<profile>/examples/<name>` (`target/release/examples/compare`),
/// so `target/` unless built with another `--target-dir`; `target` (relative
/// to the current directory) if the executable is elsewhere.
pub fn target_dir() -> std::path::PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| {
            let examples = exe.parent()?;
            (examples.file_name()? == "examples")
                .then(|| examples.parent()?.parent().map(Into::into))?
        })
        .unwrap_or_else(|| "target".into())
}

/// Today's date (UTC) as `YYYY-MM-DD`, for the notes under the plots.
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
