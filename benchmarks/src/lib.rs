//! Benchmarks of `tiered-timer` and `tiered-timer-jobs` against their
//! peers; not published.
//!
//! The peers (tokio's timers, tokio-util's `DelayQueue`, pingora-timeout,
//! futures-timer, async-io, tokio-io-timeout, tower's timeout,
//! apalis-redis, RSMQ, sqlxmq, underway) are dependencies of this crate only, so the
//! published crates' examples stay tutorials and build none of them. The
//! root crate's own criterion benches, ours alone, are in its `benches/`
//! (`cargo bench` at the root); the side-by-side comparisons are here.
//!
//! ```sh
//! cargo run --release -p tiered-timer-benchmarks --example compare              # the timer
//! cargo run --release -p tiered-timer-benchmarks --example compare_delay_queue  # DelayQueue
//! cargo run --release -p tiered-timer-benchmarks --example lock_quota           # the lock under a CPU quota (root)
//! cargo run --release -p tiered-timer-benchmarks --example peers                # Redis queues
//! cargo run --release -p tiered-timer-benchmarks --example stores               # file:// against Redis
//! cargo run --release -p tiered-timer-benchmarks --example bench                # Redis: the poller
//! cargo run --release -p tiered-timer-benchmarks --example ops_cost             # Redis: operator reads
//! cargo run --release -p tiered-timer-benchmarks --example herd                 # Redis: cost per job by workers
//! cargo run --release -p tiered-timer-benchmarks --example postgres             # Postgres queues
//! cargo bench -p tiered-timer-benchmarks                                        # criterion, HTML in target/criterion
//! cargo test -p tiered-timer-benchmarks                                         # tests run against a peer
//! ```
//!
//! Every program takes `--help`: its knobs are options, each also read from
//! the environment variable named there (`COMPARE_RUNS=3` is
//! `--runs 3`). Each program's own documentation says what it measures and
//! how.
//!
//! This library holds what several of them share:
//!
//! - [`stats`]: medians and quantiles, one definition for every table;
//! - [`machine`]: the machine, load and date under a table;
//! - [`child`]: measurements in a fresh process (a JSON request, a JSON
//!   result), optionally gated until the parent has placed it;
//! - [`runtime`]: the tokio runtimes the timer benchmarks run on;
//! - [`timers`]: our timer and its peers behind one [`timers::Imp`];
//! - [`guards`], [`expiry`]: the timer workloads two programs run;
//! - [`alloc`]: a counting global allocator, for the memory workloads;
//! - [`plot`]: the SVG figures; [`quota`]: cgroup v1 CPU quotas;
//! - [`redis_support`]: redis-servers and clusters started here;
//! - [`pg_support`]: Postgres servers started here;
//! - [`process_cpu`]: this process's CPU time.

pub mod alloc;
pub mod child;
pub mod expiry;
pub mod guards;
pub mod machine;
pub mod pg_support;
pub mod plot;
pub mod quota;
pub mod redis_support;
pub mod runtime;
pub mod stats;
pub mod timers;

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
