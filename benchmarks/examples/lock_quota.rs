//! The lock question of issue 28 §2, measured in one command: our timer
//! built with its default `std::sync::Mutex` shards and with the opt-in
//! `spin-lock` feature, with `tokio::time` as a reference, on 2 runtime
//! workers, with no CPU limit and under a CFS quota of 1 and of 0.5 CPU (a
//! cgroup v1 `cpu` group, as a container gets).
//!
//! ```sh
//! # as root, on a host with cgroup v1's `cpu` controller (/sys/fs/cgroup/cpu):
//! cargo run --release -p tiered-timer-benchmarks --example lock_quota              # all, ~5 min
//! cargo run --release -p tiered-timer-benchmarks --example lock_quota mass blocked # some workloads
//! # from a user account:
//! sudo -E "$(command -v cargo)" run --release -p tiered-timer-benchmarks --example lock_quota
//! ```
//!
//! Not root, or no cgroup v1 `cpu` controller: an error saying so (exit
//! status 2), never a silent run without the quota.
//!
//! What it does:
//! 1. builds this example twice in the same target directory, with default
//!    features (std `Mutex`) and with `--features spin-lock`, and copies the
//!    two binaries to `<target>/lock-quota/` (each is asked which lock it
//!    has before it is used);
//! 2. for each CPU limit, makes a cgroup `tiered-timer-lock-quota-<pid>`
//!    with `cpu.cfs_period_us` 100000 and `cpu.cfs_quota_us` 100000 per CPU
//!    (-1 for none); then, for each run and workload, runs a fresh child
//!    process of each build (ours with its lock; tokio from the std build),
//!    the next one first in each run; the child waits on its stdin until
//!    this process has moved it into the group (all its threads are made
//!    after that), then prints one JSON line of results;
//! 3. reads the group's `cpu.stat` before and after each child, so each
//!    result carries the periods it was throttled in and the time it was
//!    stopped;
//! 4. prints a markdown table per CPU limit (medians of the runs, and the
//!    ratio spin/std), and writes into `<target>/lock-quota/`: `table.md`,
//!    `results.jsonl` (every child's line, with its limit, run and
//!    throttling) and SVG plots of the 1 ms ticker's lateness per limit,
//!    `ticker-mass-<limit>.svg` and `ticker-blocked-<limit>.svg` (see
//!    `tiered_timer_benchmarks::plot`).
//!
//! Workloads, each in a fresh process, as in `examples/compare.rs`:
//! - `guard-tasks` (compare's 1b): 1 000 tasks arm and cancel guards in
//!   turn, 1 000 000 in all; wall ns per guard and process CPU;
//! - `guard-busy` (1c): one thread arms and cancels guards by hand among
//!   100 000 other pending timers; ns per guard;
//! - `mass` (3): 200 000 tasks sleeping 1..=1000 ms, plus a 1 ms ticker (a
//!   task sleeping to each next millisecond, skipping missed ones) from the
//!   first spawn to the last wake; lateness p50/p99/max of both, CPU;
//! - `blocked` (7): 1 000 tasks sleeping 5..54 ms in turn while a 100 ms
//!   CPU-bound request arrives every 250 ms, plus the ticker, for 3 s;
//!   lateness p50/p99/max of both, CPU.
//!
//! Knobs (environment): `QUOTA_CPUS`, the limits, default `none,1,0.5`;
//! `QUOTA_RUNS`, runs per limit, default 3; `QUOTA_WORKERS`, runtime
//! workers, default 2; `QUOTA_GUARDS`, guards per guard run, default
//! 1 000 000; `QUOTA_BLOCKED_MS`, length of `blocked`, default 3000.

use std::future::Future;
use std::hint::black_box;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::pin::{pin, Pin};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use tiered_timer_benchmarks::plot::{self, Curve, LatenessHistogram};
use tiered_timer_benchmarks::quota::{self, CpuGroup};
use tiered_timer_benchmarks::{process_cpu, target_dir, utc_date};

// ---------------------------------------------------------------------------
// What is compared, and how it is reported.

/// The lock this binary's timer was built with.
const LOCK: &str = if cfg!(feature = "spin-lock") {
    "spin"
} else {
    "std-mutex"
};

/// A column of the tables: a build of this example and the timer it runs.
struct Column {
    label: &'static str,
    /// The lock of the binary it runs (`LOCK` of that build).
    lock: &'static str,
    imp: Imp,
}

const COLUMNS: [Column; 3] = [
    Column {
        label: "ours, std Mutex",
        lock: "std-mutex",
        imp: Imp::Ours,
    },
    Column {
        label: "ours, spin lock",
        lock: "spin",
        imp: Imp::Ours,
    },
    // tokio has no lock of ours: run from the default build.
    Column {
        label: "tokio (reference)",
        lock: "std-mutex",
        imp: Imp::Tokio,
    },
];

#[derive(Clone, Copy)]
enum Unit {
    Ns,
    Ms,
    Count,
}

struct Workload {
    key: &'static str,
    name: &'static str,
    /// (JSON key, row label, unit); the throttling rows follow.
    metrics: &'static [(&'static str, &'static str, Unit)],
}

const LATENESS_OF_BOTH: &[(&str, &str, Unit)] = &[
    ("late_p50_ms", "lateness p50", Unit::Ms),
    ("late_p99_ms", "lateness p99", Unit::Ms),
    ("late_max_ms", "lateness max", Unit::Ms),
    ("ticker_p50_ms", "1 ms ticker lateness p50", Unit::Ms),
    ("ticker_p99_ms", "1 ms ticker lateness p99", Unit::Ms),
    ("ticker_max_ms", "1 ms ticker lateness max", Unit::Ms),
    ("cpu_ms", "process CPU", Unit::Ms),
];

const WORKLOADS: [Workload; 4] = [
    Workload {
        key: "guard-tasks",
        name: "1b guard armed then cancelled, 1 000 tasks",
        metrics: &[
            ("ns_per_guard", "per guard (wall)", Unit::Ns),
            ("cpu_ms", "process CPU", Unit::Ms),
        ],
    },
    Workload {
        key: "guard-busy",
        name: "1c guard armed then cancelled, by hand, 100 000 other timers",
        metrics: &[
            ("ns_per_guard", "per guard", Unit::Ns),
            ("cpu_ms", "process CPU", Unit::Ms),
        ],
    },
    Workload {
        key: "mass",
        name: "3 mass expiry: 200 000 tasks sleeping 1..1000 ms + 1 ms ticker",
        metrics: LATENESS_OF_BOTH,
    },
    Workload {
        key: "blocked",
        name: "7 blocked worker: 1 000 tasks sleeping 5..54 ms, 100 ms CPU-bound request every 250 ms + 1 ms ticker",
        metrics: LATENESS_OF_BOTH,
    },
];

impl Unit {
    fn show(self, v: f64) -> String {
        match self {
            _ if v.is_nan() => "n/a".into(),
            Unit::Ns => format!("{v:.0} ns"),
            Unit::Ms if v < 10.0 => format!("{v:.2} ms"),
            Unit::Ms => format!("{v:.1} ms"),
            Unit::Count => format!("{v:.0}"),
        }
    }
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--child") {
        child(&args[1..]);
        return;
    }
    if let Err(e) = compare(&args) {
        eprintln!("lock_quota: error: {e}");
        std::process::exit(2);
    }
}

// ---------------------------------------------------------------------------
// The parent: builds, cgroups, children, the table.

/// A CPU limit: `None` for none, else CPUs.
fn parse_limits(text: &str) -> Result<Vec<Option<f64>>, String> {
    text.split(',')
        .map(|l| match l.trim() {
            "none" => Ok(None),
            cpus => cpus.parse::<f64>().map(Some).map_err(|_| {
                format!("QUOTA_CPUS: {cpus:?} is neither `none` nor a number of CPUs")
            }),
        })
        .collect()
}

fn limit_label(limit: Option<f64>) -> String {
    limit.map_or("no CPU limit".into(), |c| format!("{c} CPU"))
}

fn limit_slug(limit: Option<f64>) -> String {
    limit.map_or("none".into(), |c| format!("{c}cpu"))
}

fn compare(args: &[String]) -> Result<(), String> {
    // Before building anything: no quota, no comparison.
    let hierarchy = quota::cpu_hierarchy()?;
    let limits =
        parse_limits(&std::env::var("QUOTA_CPUS").unwrap_or_else(|_| "none,1,0.5".into()))?;
    let runs = env_or("QUOTA_RUNS", 3usize);
    let workloads: Vec<&Workload> = WORKLOADS
        .iter()
        .filter(|w| args.is_empty() || args.iter().any(|a| w.key.starts_with(a.as_str())))
        .collect();
    if workloads.is_empty() {
        return Err(format!(
            "no workload matches {args:?} (workloads: guard-tasks, guard-busy, mass, blocked)"
        ));
    }
    let out_dir = target_dir().join("lock-quota");
    std::fs::create_dir_all(&out_dir)
        .map_err(|e| format!("cannot create {}: {e}", out_dir.display()))?;
    let std_bin = build(&out_dir, None)?;
    let spin_bin = build(&out_dir, Some("spin-lock"))?;
    let bin_of = |lock: &str| if lock == "spin" { &spin_bin } else { &std_bin };

    let mut jsonl = String::new();
    // results[limit][workload][column] = the runs' JSON lines.
    let mut results: Vec<Vec<Vec<Vec<Value>>>> = Vec::new();
    for &limit in &limits {
        let group = CpuGroup::create(
            &hierarchy,
            &format!("tiered-timer-lock-quota-{}", std::process::id()),
            limit,
        )?;
        let mut per_workload = vec![vec![Vec::new(); COLUMNS.len()]; workloads.len()];
        for run in 0..runs {
            for (w, workload) in workloads.iter().enumerate() {
                for c in (0..COLUMNS.len()).map(|c| (c + run) % COLUMNS.len()) {
                    let column = &COLUMNS[c];
                    eprint!(
                        "{} run {}/{runs} {:<12} {:<18}",
                        limit_label(limit),
                        run + 1,
                        workload.key,
                        column.label
                    );
                    let mut line = run_in_group(&group, bin_of(column.lock), workload.key, column)?;
                    line["limit"] = json!(limit_slug(limit));
                    line["run"] = json!(run + 1);
                    eprintln!("{}", summary(&line, workload));
                    jsonl.push_str(&line.to_string());
                    jsonl.push('\n');
                    per_workload[w][c].push(line);
                }
            }
        }
        drop(group);
        results.push(per_workload);
    }

    let table = tables(&limits, &workloads, &results);
    print!("{table}");
    write_file(&out_dir.join("table.md"), &table)?;
    write_file(&out_dir.join("results.jsonl"), &jsonl)?;
    for (l, &limit) in limits.iter().enumerate() {
        for (w, workload) in workloads.iter().enumerate() {
            if workload.metrics.iter().any(|m| m.0 == "ticker_p99_ms") {
                ticker_plot(&out_dir, limit, workload, &results[l][w])?;
            }
        }
    }
    eprintln!(
        "wrote table.md, results.jsonl and the ticker plots to {}",
        out_dir.display()
    );
    Ok(())
}

fn write_file(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Builds this example with `feature` (release, the target directory this
/// binary was built into), copies it to `out_dir`, and checks the copy
/// reports the lock it was built for.
fn build(out_dir: &Path, feature: Option<&str>) -> Result<PathBuf, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let mut command = Command::new(&cargo);
    command
        .args(["build", "--release", "--example", "lock_quota"])
        .args(["--message-format", "json-render-diagnostics"])
        .arg("--manifest-path")
        .arg(&manifest)
        .arg("--target-dir")
        .arg(target_dir())
        .stderr(Stdio::inherit());
    if let Some(feature) = feature {
        command.args(["--features", feature]);
    }
    eprintln!(
        "building lock_quota with {}",
        feature.unwrap_or("default features")
    );
    let out = command
        .output()
        .map_err(|e| format!("cannot run {}: {e}", Path::new(&cargo).display()))?;
    if !out.status.success() {
        return Err(format!("building lock_quota with {feature:?} failed"));
    }
    let built = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "lock_quota")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .ok_or("cargo reported no lock_quota executable")?;
    let lock = if feature == Some("spin-lock") {
        "spin"
    } else {
        "std-mutex"
    };
    let copy = out_dir.join(format!("lock_quota-{lock}"));
    std::fs::copy(&built, &copy)
        .map_err(|e| format!("cannot copy {} to {}: {e}", built.display(), copy.display()))?;
    let reported = Command::new(&copy)
        .args(["--child", "lock"])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", copy.display()))?;
    let reported = String::from_utf8_lossy(&reported.stdout).trim().to_string();
    if reported != lock {
        return Err(format!(
            "{} says its lock is {reported:?}, not {lock:?}",
            copy.display()
        ));
    }
    Ok(copy)
}

/// Runs `bin`'s child for `workload` and `column` inside `group`, and
/// returns its JSON line with the group's throttling over its life.
fn run_in_group(
    group: &CpuGroup,
    bin: &Path,
    workload: &str,
    column: &Column,
) -> Result<Value, String> {
    let imp = column.imp.name();
    let before = group.stat()?;
    let mut child = Command::new(bin)
        .args(["--child", workload, imp])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
    let placed = group.add(child.id());
    // Releases the child (or, on error, lets it exit at once).
    let mut stdin = child.stdin.take().expect("piped stdin");
    let go = if placed.is_ok() { "go\n" } else { "stop\n" };
    let _ = stdin.write_all(go.as_bytes());
    drop(stdin);
    let out = child
        .wait_with_output()
        .map_err(|e| format!("waiting for the {workload} child: {e}"))?;
    placed?;
    let throttling = group.stat()?.since(before);
    if !out.status.success() {
        return Err(format!(
            "the {workload} child ({imp}, {}) failed: {}",
            column.lock,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut line: Value = serde_json::from_str(stdout.trim())
        .map_err(|e| format!("the {workload} child printed no JSON line ({e}): {stdout}"))?;
    if line["lock"] != column.lock {
        return Err(format!(
            "{} reports lock {}, not {}",
            bin.display(),
            line["lock"],
            column.lock
        ));
    }
    line["throttled_periods"] = json!(throttling.throttled_periods);
    line["throttled_ms"] = json!(throttling.throttled_ns as f64 / 1e6);
    line["periods"] = json!(throttling.periods);
    Ok(line)
}

/// A one-line summary of a child's line, for stderr.
fn summary(line: &Value, workload: &Workload) -> String {
    let mut parts: Vec<String> = workload
        .metrics
        .iter()
        .filter(|m| !m.0.contains("p50"))
        .map(|&(key, _, unit)| {
            format!(
                "{key} {}",
                unit.show(line[key].as_f64().unwrap_or(f64::NAN))
            )
        })
        .collect();
    parts.push(format!(
        "throttled {} periods, {:.0} ms",
        line["throttled_periods"],
        line["throttled_ms"].as_f64().unwrap_or(f64::NAN)
    ));
    parts.join(", ")
}

fn median(mut xs: Vec<f64>) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn machine() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{model}, {cores} cores, {}", std::env::consts::OS)
}

/// The markdown tables, one per limit: medians of the runs.
fn tables(
    limits: &[Option<f64>],
    workloads: &[&Workload],
    results: &[Vec<Vec<Vec<Value>>>],
) -> String {
    let mut out = String::new();
    out.push_str(&format!("Machine: {}, {}\n", machine(), utc_date()));
    out.push_str(
        "Command: cargo run --release -p tiered-timer-benchmarks --example lock_quota (as root)\n",
    );
    out.push_str(&format!(
        "{} runtime workers; medians of {} runs; each value from a fresh process; CFS period 100 ms.\n",
        env_or("QUOTA_WORKERS", 2usize),
        env_or("QUOTA_RUNS", 3usize)
    ));
    let throttle_rows: [(&str, &str, Unit); 2] = [
        (
            "throttled_periods",
            "throttled periods (cpu.stat)",
            Unit::Count,
        ),
        ("throttled_ms", "throttled time (cpu.stat)", Unit::Ms),
    ];
    for (l, &limit) in limits.iter().enumerate() {
        let quota = limit.map_or("-1".into(), |c| {
            format!("{:.0}", c * quota::PERIOD_US as f64)
        });
        out.push_str(&format!(
            "\n### {} (cpu.cfs_quota_us {quota}, cpu.cfs_period_us {})\n\n",
            limit_label(limit),
            quota::PERIOD_US
        ));
        let labels: Vec<&str> = COLUMNS.iter().map(|c| c.label).collect();
        out.push_str(&format!(
            "| workload | metric | {} | spin/std |\n",
            labels.join(" | ")
        ));
        out.push_str(&format!("|{}\n", "---|".repeat(COLUMNS.len() + 3)));
        for (w, workload) in workloads.iter().enumerate() {
            let rows = workload.metrics.iter().chain(&throttle_rows);
            for (r, &(key, label, unit)) in rows.enumerate() {
                let medians: Vec<f64> = results[l][w]
                    .iter()
                    .map(|runs| median(runs.iter().filter_map(|line| line[key].as_f64()).collect()))
                    .collect();
                let cells: Vec<String> = medians.iter().map(|&v| unit.show(v)).collect();
                let ratio = medians[1] / medians[0];
                let ratio = if ratio.is_finite() {
                    format!("{ratio:.2}")
                } else {
                    "n/a".into()
                };
                let name = if r == 0 { workload.name } else { "" };
                out.push_str(&format!(
                    "| {name} | {label} | {} | {ratio} |\n",
                    cells.join(" | ")
                ));
            }
        }
    }
    out
}

/// The ticker's lateness of every run of `workload` under `limit`, one
/// curve per column.
fn ticker_plot(
    out_dir: &Path,
    limit: Option<f64>,
    workload: &Workload,
    runs: &[Vec<Value>],
) -> Result<(), String> {
    let curves: Vec<Curve> = COLUMNS
        .iter()
        .zip(runs)
        .map(|(column, runs)| {
            let mut lateness = LatenessHistogram::new();
            for line in runs {
                let text = line["lateness"]["ticker"].as_str().unwrap_or_default();
                lateness.merge(&LatenessHistogram::from_text(text)?);
            }
            Ok(Curve {
                series: column.label.to_string(),
                lateness,
            })
        })
        .collect::<Result<_, String>>()?;
    let path = out_dir.join(format!("ticker-{}-{}.svg", workload.key, limit_slug(limit)));
    let title = format!(
        "1 ms ticker during {} ({}), {} workers, {}",
        if workload.key == "mass" {
            "mass expiry"
        } else {
            "the blocked worker"
        },
        limit_label(limit),
        env_or("QUOTA_WORKERS", 2usize),
        match runs.first().map_or(0, Vec::len) {
            1 => "1 run".to_string(),
            n => format!("{n} runs pooled"),
        }
    );
    let note = format!("{} · {} · lock_quota", machine(), utc_date());
    plot::lateness_chart(&path, &title, &note, &curves)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

// ---------------------------------------------------------------------------
// The child: one workload, one JSON line.

#[derive(Clone, Copy, PartialEq, Eq)]
enum Imp {
    Ours,
    Tokio,
}

impl Imp {
    fn name(self) -> &'static str {
        match self {
            Imp::Ours => "ours",
            Imp::Tokio => "tokio",
        }
    }
}

fn child(args: &[String]) {
    if args.first().map(String::as_str) == Some("lock") {
        println!("{LOCK}");
        return;
    }
    let [workload, imp] = args else {
        panic!("usage: lock_quota --child <workload> <ours|tokio>");
    };
    let imp = match imp.as_str() {
        "ours" => Imp::Ours,
        "tokio" => Imp::Tokio,
        other => panic!("unknown implementation {other:?}"),
    };
    // Wait until the parent has put this process in its cgroup: every
    // thread made after this is in it too.
    let mut go = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut go)
        .expect("read the go line");
    if go.trim() != "go" {
        std::process::exit(1);
    }
    let (values, lateness) = match workload.as_str() {
        "guard-tasks" => (guard_tasks(imp), Map::new()),
        "guard-busy" => (guard_busy(imp), Map::new()),
        "mass" => mass_with_ticker(imp),
        "blocked" => blocked_with_ticker(imp),
        other => panic!("unknown workload {other:?}"),
    };
    let mut line = json!({ "workload": workload, "imp": imp.name(), "lock": LOCK });
    for (key, value) in values {
        line[key] = json!(value);
    }
    line["lateness"] = Value::Object(lateness);
    println!("{line}");
}

fn runtime(all: bool) -> tokio::runtime::Runtime {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.worker_threads(env_or("QUOTA_WORKERS", 2));
    if all {
        builder.enable_all();
    } else {
        builder.enable_time();
    }
    builder.build().expect("tokio runtime")
}

async fn sleep_until(imp: Imp, deadline: Instant) {
    match imp {
        Imp::Ours => tiered_timer::sleep_until(deadline.into()).await,
        Imp::Tokio => tokio::time::sleep_until(deadline.into()).await,
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// p50, p99 and max in ms of `samples` (ns), sorted here.
fn percentiles(samples: &mut [u64]) -> [f64; 3] {
    samples.sort_unstable();
    let at = |p: f64| {
        let idx = ((samples.len() as f64 - 1.0) * p).round() as usize;
        samples.get(idx).map_or(f64::NAN, |&ns| ns as f64 / 1e6)
    };
    [at(0.5), at(0.99), at(1.0)]
}

/// Pending on the first poll, ready on the second; wakes itself when
/// `wake` so it can run as a task (as compare's).
struct PendingOnce {
    polled: bool,
    wake: bool,
}

impl Future for PendingOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if std::mem::replace(&mut self.polled, true) {
            Poll::Ready(())
        } else {
            if self.wake {
                cx.waker().wake_by_ref();
            }
            Poll::Pending
        }
    }
}

fn guards() -> u32 {
    env_or("QUOTA_GUARDS", 1_000_000)
}

impl PendingOnce {
    fn new(wake: bool) -> PendingOnce {
        PendingOnce {
            polled: false,
            wake,
        }
    }
}

/// compare's 1b: 1 000 tasks each arming and cancelling guards in turn.
fn guard_tasks(imp: Imp) -> Vec<(&'static str, f64)> {
    let timeout = Duration::from_secs(5);
    match imp {
        Imp::Ours => {
            guards_in_tasks(move || tiered_timer::timeout(timeout, PendingOnce::new(true)))
        }
        Imp::Tokio => {
            guards_in_tasks(move || tokio::time::timeout(timeout, PendingOnce::new(true)))
        }
    }
}

fn guards_in_tasks<G>(make: impl Fn() -> G + Copy + Send + 'static) -> Vec<(&'static str, f64)>
where
    G: Future + Send,
{
    const TASKS: u32 = 1000;
    let per_task = (guards() / TASKS).max(1);
    let rt = runtime(false);
    let cpu = process_cpu();
    let start = Instant::now();
    rt.block_on(async move {
        let handles: Vec<_> = (0..TASKS)
            .map(|_| {
                tokio::spawn(async move {
                    for _ in 0..per_task {
                        black_box(make().await);
                    }
                })
            })
            .collect();
        for h in handles {
            h.await.unwrap();
        }
    });
    let wall = start.elapsed();
    let cpu = process_cpu() - cpu;
    vec![
        (
            "ns_per_guard",
            wall.as_nanos() as f64 / f64::from(TASKS * per_task),
        ),
        ("cpu_ms", ms(cpu)),
    ]
}

/// compare's 1c: guards by hand on this thread in a server runtime with
/// 100 000 other timers pending, parked once.
fn guard_busy(imp: Imp) -> Vec<(&'static str, f64)> {
    let rt = runtime(true);
    let _in_rt = rt.enter();
    let mut cx = Context::from_waker(Waker::noop());
    let mut others: Vec<Pin<Box<dyn Future<Output = ()> + Send>>> = (0..100_000u64)
        .map(|i| {
            let d = Duration::from_secs(20) + Duration::from_micros(i * 100);
            match imp {
                Imp::Ours => {
                    Box::pin(tiered_timer::sleep(d)) as Pin<Box<dyn Future<Output = ()> + Send>>
                }
                Imp::Tokio => Box::pin(tokio::time::sleep(d)),
            }
        })
        .collect();
    for other in &mut others {
        assert!(other.as_mut().poll(&mut cx).is_pending());
    }
    rt.block_on(sleep_until(imp, Instant::now() + Duration::from_millis(1)));
    let timeout = Duration::from_secs(60);
    let values = match imp {
        Imp::Ours => guards_by_hand(|| tiered_timer::timeout(timeout, PendingOnce::new(false))),
        Imp::Tokio => guards_by_hand(|| tokio::time::timeout(timeout, PendingOnce::new(false))),
    };
    drop(others);
    values
}

fn guards_by_hand<G: Future>(make: impl Fn() -> G) -> Vec<(&'static str, f64)> {
    let n = guards();
    let mut cx = Context::from_waker(Waker::noop());
    let cpu = process_cpu();
    let start = Instant::now();
    for _ in 0..n {
        let mut guard = pin!(make());
        assert!(guard.as_mut().poll(&mut cx).is_pending());
        assert!(black_box(guard.as_mut().poll(&mut cx).is_ready()));
    }
    let wall = start.elapsed();
    let cpu = process_cpu() - cpu;
    vec![
        ("ns_per_guard", wall.as_nanos() as f64 / f64::from(n)),
        ("cpu_ms", ms(cpu)),
    ]
}

/// A task sleeping to each next 1 ms boundary until `stop`, skipping
/// ticks already missed (as `MissedTickBehavior::Skip`); returns each
/// tick's lateness in ns.
fn spawn_ticker(imp: Imp, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<Vec<u64>> {
    tokio::spawn(async move {
        let start = Instant::now();
        let mut late = Vec::new();
        let mut k = 0u64;
        while !stop.load(Ordering::Relaxed) {
            k += 1;
            let next = start + Duration::from_millis(k);
            sleep_until(imp, next).await;
            let now = Instant::now();
            late.push(now.duration_since(next).as_nanos() as u64);
            while start + Duration::from_millis(k + 1) < now {
                k += 1;
            }
        }
        late
    })
}

type Lateness = Map<String, Value>;

/// The lateness maps of the JSON line: histograms for the plots.
fn lateness_map(of: &[(&str, &[u64])]) -> Lateness {
    of.iter()
        .map(|&(name, samples)| {
            (
                name.to_string(),
                Value::String(LatenessHistogram::from_samples(samples).to_text()),
            )
        })
        .collect()
}

fn both_lateness(late: &mut [u64], ticker: &mut [u64], cpu: Duration) -> Vec<(&'static str, f64)> {
    let [p50, p99, max] = percentiles(late);
    let [t50, t99, tmax] = percentiles(ticker);
    vec![
        ("late_p50_ms", p50),
        ("late_p99_ms", p99),
        ("late_max_ms", max),
        ("ticker_p50_ms", t50),
        ("ticker_p99_ms", t99),
        ("ticker_max_ms", tmax),
        ("ticker_ticks", ticker.len() as f64),
        ("cpu_ms", ms(cpu)),
    ]
}

/// compare's 3 with a 1 ms ticker from the first spawn to the last wake.
fn mass_with_ticker(imp: Imp) -> (Vec<(&'static str, f64)>, Lateness) {
    const TASKS: usize = 200_000;
    let rt = runtime(false);
    let cpu = process_cpu();
    let (mut late, mut ticker) = rt.block_on(async move {
        let stop = Arc::new(AtomicBool::new(false));
        let ticker = spawn_ticker(imp, stop.clone());
        let handles: Vec<_> = (0..TASKS)
            .map(|i| {
                let d = Duration::from_millis(1 + (i as u64 * 7919) % 1000);
                tokio::spawn(async move {
                    let deadline = Instant::now() + d;
                    sleep_until(imp, deadline).await;
                    Instant::now().duration_since(deadline).as_nanos() as u64
                })
            })
            .collect();
        let mut late = Vec::with_capacity(TASKS);
        for h in handles {
            late.push(h.await.unwrap());
        }
        stop.store(true, Ordering::Relaxed);
        (late, ticker.await.unwrap())
    });
    let cpu = process_cpu() - cpu;
    drop(rt);
    let values = both_lateness(&mut late, &mut ticker, cpu);
    let lateness = lateness_map(&[("sleeps", &late), ("ticker", &ticker)]);
    (values, lateness)
}

/// compare's 7 with a 1 ms ticker over the same length.
fn blocked_with_ticker(imp: Imp) -> (Vec<(&'static str, f64)>, Lateness) {
    const SLEEPERS: u64 = 1000;
    let length = Duration::from_millis(env_or("QUOTA_BLOCKED_MS", 3000));
    let rt = runtime(false);
    let stop = Arc::new(AtomicBool::new(false));
    let requests = std::thread::spawn({
        let (handle, stop) = (rt.handle().clone(), stop.clone());
        move || {
            let start = Instant::now();
            let mut k = 1;
            while !stop.load(Ordering::Relaxed) {
                let next = start + Duration::from_millis(250) * k;
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
                k += 1;
                drop(handle.spawn(async {
                    let until = Instant::now() + Duration::from_millis(100);
                    while Instant::now() < until {
                        std::hint::spin_loop();
                    }
                }));
            }
        }
    });
    let cpu = process_cpu();
    let (mut late, mut ticker) = rt.block_on({
        let stop = stop.clone();
        async move {
            let ticker = spawn_ticker(imp, stop.clone());
            let end = Instant::now() + length;
            let handles: Vec<_> = (0..SLEEPERS)
                .map(|i| {
                    tokio::spawn(async move {
                        let mut late = Vec::new();
                        let mut n = i;
                        while Instant::now() < end {
                            n = n.wrapping_mul(31).wrapping_add(7);
                            let deadline = Instant::now() + Duration::from_millis(5 + n % 50);
                            sleep_until(imp, deadline).await;
                            late.push(Instant::now().duration_since(deadline).as_nanos() as u64);
                        }
                        late
                    })
                })
                .collect();
            let mut late = Vec::new();
            for h in handles {
                late.extend(h.await.unwrap());
            }
            stop.store(true, Ordering::Relaxed);
            (late, ticker.await.unwrap())
        }
    });
    let cpu = process_cpu() - cpu;
    requests.join().unwrap();
    drop(rt);
    let values = both_lateness(&mut late, &mut ticker, cpu);
    let lateness = lateness_map(&[("sleeps", &late), ("ticker", &ticker)]);
    (values, lateness)
}
