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
//! Workloads, each in a fresh process, as in `compare` (the same code:
//! `tiered_timer_benchmarks::guards` and `expiry`):
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
//! Knobs (`--help`; each also read from its old environment variable):
//! `--cpus` (`QUOTA_CPUS`), the limits, default `none,1,0.5`; `--runs`
//! (`QUOTA_RUNS`), runs per limit, default 3; `--workers`
//! (`QUOTA_WORKERS`), runtime workers, default 2; `--guards`
//! (`QUOTA_GUARDS`), guards per guard run, default 1 000 000;
//! `--blocked-ms` (`QUOTA_BLOCKED_MS`), length of `blocked`, default 3000.
//! The children get them in their request (`tiered_timer_benchmarks::child`),
//! gated: each waits for `go` until this process has placed it in the group.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use tiered_timer_benchmarks::child;
use tiered_timer_benchmarks::expiry::{blocked_sleepers, cpu_bound_requests, mass_expiry, ticker};
use tiered_timer_benchmarks::guards::{
    guards_by_hand, guards_in_tasks, in_busy_server, PendingOnce, BUSY_GUARD_TIMEOUT,
};
use tiered_timer_benchmarks::machine::{describe as machine, utc_date};
use tiered_timer_benchmarks::plot::{self, Curve, LatenessHistogram};
use tiered_timer_benchmarks::quota::{self, CpuGroup};
use tiered_timer_benchmarks::stats::{lateness_ms, median};
use tiered_timer_benchmarks::timers::Imp;
use tiered_timer_benchmarks::{process_cpu, runtime, target_dir};

/// Our timer's two locks, and tokio's timer, under CFS CPU quotas (cgroup
/// v1): a markdown table per limit, JSON lines and SVG plots. Needs root.
#[derive(Parser, Debug, Clone)]
#[command(name = "lock_quota")]
struct Args {
    /// The workloads to run, by key or its start: guard-tasks, guard-busy,
    /// mass, blocked. All by default.
    workloads: Vec<String>,
    /// The CPU limits, comma-separated: `none`, or a number of CPUs.
    #[arg(long, env = "QUOTA_CPUS", default_value = "none,1,0.5")]
    cpus: String,
    /// Runs per limit (the tables show medians).
    #[arg(long, env = "QUOTA_RUNS", default_value_t = 3)]
    runs: usize,
    /// Workers of each child's runtime.
    #[arg(long, env = "QUOTA_WORKERS", default_value_t = 2)]
    workers: usize,
    /// Guards per run of the guard workloads.
    #[arg(long, env = "QUOTA_GUARDS", default_value_t = 1_000_000)]
    guards: u32,
    /// Length of `blocked`, in ms.
    #[arg(long, env = "QUOTA_BLOCKED_MS", default_value_t = 3000)]
    blocked_ms: u64,
}

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

fn main() {
    if let Some(request) = child::request::<Request>() {
        serve(request);
        return;
    }
    if let Err(e) = compare(&Args::parse()) {
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
            cpus => cpus
                .parse::<f64>()
                .map(Some)
                .map_err(|_| format!("--cpus: {cpus:?} is neither `none` nor a number of CPUs")),
        })
        .collect()
}

fn limit_label(limit: Option<f64>) -> String {
    limit.map_or("no CPU limit".into(), |c| format!("{c} CPU"))
}

fn limit_slug(limit: Option<f64>) -> String {
    limit.map_or("none".into(), |c| format!("{c}cpu"))
}

fn compare(args: &Args) -> Result<(), String> {
    // Before building anything: no quota, no comparison.
    let hierarchy = quota::cpu_hierarchy()?;
    let limits = parse_limits(&args.cpus)?;
    let runs = args.runs;
    let workloads: Vec<&Workload> = WORKLOADS
        .iter()
        .filter(|w| {
            args.workloads.is_empty()
                || args.workloads.iter().any(|a| w.key.starts_with(a.as_str()))
        })
        .collect();
    if workloads.is_empty() {
        return Err(format!(
            "no workload matches {:?} (workloads: guard-tasks, guard-busy, mass, blocked)",
            args.workloads
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
                    let request = Request::Workload {
                        workload: workload.key.to_string(),
                        imp: column.imp,
                        settings: Settings::of(args),
                    };
                    let mut line = run_in_group(&group, bin_of(column.lock), &request, column)?;
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

    let table = tables(args, &limits, &workloads, &results);
    print!("{table}");
    write_file(&out_dir.join("table.md"), &table)?;
    write_file(&out_dir.join("results.jsonl"), &jsonl)?;
    for (l, &limit) in limits.iter().enumerate() {
        for (w, workload) in workloads.iter().enumerate() {
            if workload.metrics.iter().any(|m| m.0 == "ticker_p99_ms") {
                ticker_plot(&out_dir, args.workers, limit, workload, &results[l][w])?;
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
    let reported: String = child::run(&copy, &Request::Lock)?;
    if reported != lock {
        return Err(format!(
            "{} says its lock is {reported:?}, not {lock:?}",
            copy.display()
        ));
    }
    Ok(copy)
}

/// Runs `bin`'s child for `request` (of `column`) inside `group`, and
/// returns its JSON line with the group's throttling over its life.
fn run_in_group(
    group: &CpuGroup,
    bin: &Path,
    request: &Request,
    column: &Column,
) -> Result<Value, String> {
    let before = group.stat()?;
    let place = |pid: u32| group.add(pid);
    let mut line: Value = child::run_gated(bin, request, Some(&place))?;
    let throttling = group.stat()?.since(before);
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

/// The markdown tables, one per limit: medians of the runs.
fn tables(
    args: &Args,
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
        args.workers, args.runs
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
                    .map(|runs| median(runs.iter().filter_map(|line| line[key].as_f64())))
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
    workers: usize,
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
        workers,
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

/// What a child of this program is asked (`tiered_timer_benchmarks::child`).
#[derive(Serialize, Deserialize, Debug)]
enum Request {
    /// Which lock this build has: replies `LOCK`.
    Lock,
    /// One run of `workload` with `imp`, gated: the child waits for `go`.
    Workload {
        workload: String,
        imp: Imp,
        settings: Settings,
    },
}

/// The knobs a child's workload needs.
#[derive(Serialize, Deserialize, Debug, Clone, Copy)]
struct Settings {
    workers: usize,
    guards: u32,
    blocked_ms: u64,
}

impl Settings {
    fn of(args: &Args) -> Settings {
        Settings {
            workers: args.workers,
            guards: args.guards,
            blocked_ms: args.blocked_ms,
        }
    }
}

/// The child's side of `request`.
fn serve(request: Request) {
    let (workload, imp, settings) = match request {
        Request::Lock => return child::reply(&LOCK),
        Request::Workload {
            workload,
            imp,
            settings,
        } => (workload, imp, settings),
    };
    assert!(
        matches!(imp, Imp::Ours | Imp::Tokio),
        "lock_quota compares ours and tokio, not {}",
        imp.name()
    );
    // Wait until the parent has put this process in its cgroup: every
    // thread made after this is in it too.
    if !child::wait_for_go() {
        std::process::exit(1);
    }
    let (values, lateness) = match workload.as_str() {
        "guard-tasks" => (guard_tasks(imp, settings), Map::new()),
        "guard-busy" => (guard_busy(imp, settings), Map::new()),
        "mass" => mass_with_ticker(imp, settings),
        "blocked" => blocked_with_ticker(imp, settings),
        other => panic!("unknown workload {other:?}"),
    };
    let mut line = json!({ "workload": workload, "imp": imp.name(), "lock": LOCK });
    for (key, value) in values {
        line[key] = json!(value);
    }
    line["lateness"] = Value::Object(lateness);
    child::reply(&line);
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The guard of the guard workloads run by tasks.
const GUARD_TIMEOUT: Duration = Duration::from_secs(5);
/// Tasks of `guard-tasks`.
const GUARD_TASKS: u32 = 1000;

/// compare's 1b: 1 000 tasks each arming and cancelling guards in turn.
fn guard_tasks(imp: Imp, settings: Settings) -> Vec<(&'static str, f64)> {
    let per_task = (settings.guards / GUARD_TASKS).max(1);
    let rt = runtime::multi_thread(settings.workers);
    let cpu = process_cpu();
    let ns = match imp {
        Imp::Ours => guards_in_tasks(
            || tiered_timer::timeout(GUARD_TIMEOUT, PendingOnce::in_task()),
            &rt,
            GUARD_TASKS,
            per_task,
        ),
        _ => guards_in_tasks(
            || tokio::time::timeout(GUARD_TIMEOUT, PendingOnce::in_task()),
            &rt,
            GUARD_TASKS,
            per_task,
        ),
    };
    let cpu = process_cpu() - cpu;
    vec![("ns_per_guard", ns), ("cpu_ms", ms(cpu))]
}

/// compare's 1c: guards by hand on this thread in a server runtime with
/// 100 000 other timers pending, parked once.
fn guard_busy(imp: Imp, settings: Settings) -> Vec<(&'static str, f64)> {
    in_busy_server(imp, settings.workers, || {
        let cpu = process_cpu();
        let n = settings.guards;
        let ns = match imp {
            Imp::Ours => guards_by_hand(
                || tiered_timer::timeout(BUSY_GUARD_TIMEOUT, PendingOnce::by_hand()),
                n,
            ),
            _ => guards_by_hand(
                || tokio::time::timeout(BUSY_GUARD_TIMEOUT, PendingOnce::by_hand()),
                n,
            ),
        };
        let cpu = process_cpu() - cpu;
        vec![("ns_per_guard", ns), ("cpu_ms", ms(cpu))]
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
    let [p50, p99, max] = lateness_ms(late);
    let [t50, t99, tmax] = lateness_ms(ticker);
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
fn mass_with_ticker(imp: Imp, settings: Settings) -> (Vec<(&'static str, f64)>, Lateness) {
    let rt = runtime::multi_thread(settings.workers);
    let cpu = process_cpu();
    let (mut late, mut ticks) = rt.block_on(async move {
        let stop = Arc::new(AtomicBool::new(false));
        let ticker = ticker(imp, stop.clone());
        let late = mass_expiry(imp).await;
        stop.store(true, Ordering::Relaxed);
        (late, ticker.await.unwrap())
    });
    let cpu = process_cpu() - cpu;
    drop(rt);
    let values = both_lateness(&mut late, &mut ticks, cpu);
    let lateness = lateness_map(&[("sleeps", &late), ("ticker", &ticks)]);
    (values, lateness)
}

/// compare's 7 with a 1 ms ticker over the same length.
fn blocked_with_ticker(imp: Imp, settings: Settings) -> (Vec<(&'static str, f64)>, Lateness) {
    let length = Duration::from_millis(settings.blocked_ms);
    let rt = runtime::multi_thread(settings.workers);
    let stop = Arc::new(AtomicBool::new(false));
    let requests = cpu_bound_requests(rt.handle().clone(), stop.clone());
    let cpu = process_cpu();
    let (mut late, mut ticks) = rt.block_on({
        let stop = stop.clone();
        async move {
            let ticker = ticker(imp, stop.clone());
            let late = blocked_sleepers(imp, length).await;
            stop.store(true, Ordering::Relaxed);
            (late, ticker.await.unwrap())
        }
    });
    let cpu = process_cpu() - cpu;
    requests.join().unwrap();
    drop(rt);
    let values = both_lateness(&mut late, &mut ticks, cpu);
    let lateness = lateness_map(&[("sleeps", &late), ("ticker", &ticks)]);
    (values, lateness)
}
