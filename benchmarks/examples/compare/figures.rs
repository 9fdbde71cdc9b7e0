//! The plots: SVG figures of the table's data
//! (`tiered_timer_benchmarks::plot`), written with the table into the
//! plots' directory (`--plots`, default `target/compare/`).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tiered_timer_benchmarks::expiry::{BLOCKED_SLEEPERS, MASS_TASKS};
use tiered_timer_benchmarks::machine;
use tiered_timer_benchmarks::plot::{self, Bar, BarGroup, Curve, LatenessHistogram};
use tiered_timer_benchmarks::timers::Imp;

/// Lateness of every sleep of workloads 3 and 7, pooled over runs per
/// implementation: (workload id, implementation, runs pooled, lateness).
/// Filled by the workloads, read once by [`write`].
static LATENESS: Mutex<Vec<(&'static str, Imp, usize, LatenessHistogram)>> = Mutex::new(Vec::new());

/// Adds one run's lateness of workload `id` for `imp`.
pub fn record_lateness(id: &'static str, imp: Imp, run: LatenessHistogram) {
    let mut pooled = LATENESS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match pooled.iter_mut().find(|(w, i, ..)| *w == id && *i == imp) {
        Some((_, _, runs, lateness)) => {
            *runs += 1;
            lateness.merge(&run);
        }
        None => pooled.push((id, imp, 1, run)),
    }
}

/// One workload's first metric: each implementation's value in each run.
type RunsPerImp = Vec<(Imp, Vec<f64>)>;

/// The first metric's value of every run, per implementation, of each
/// workload run: what the bar charts show.
#[derive(Default)]
pub struct Figures {
    runs: Vec<(&'static str, RunsPerImp)>,
}

impl Figures {
    /// Keeps workload `id`'s runs (`samples[imp][metric][run]`, `None` for
    /// an implementation it does not apply to).
    pub fn add_runs(&mut self, id: &'static str, impls: &[Imp], samples: &[Option<Vec<Vec<f64>>>]) {
        let per_imp = impls
            .iter()
            .zip(samples)
            .filter_map(|(&imp, s)| {
                let runs = s.as_ref()?.first()?;
                (!runs.is_empty()).then(|| (imp, runs.clone()))
            })
            .collect();
        self.runs.push((id, per_imp));
    }

    /// A bar group of workload `id`, if it ran.
    fn group(&self, id: &str, label: &str) -> Option<BarGroup> {
        let (_, per_imp) = self.runs.iter().find(|(w, _)| *w == id)?;
        Some(BarGroup {
            label: label.to_string(),
            bars: per_imp
                .iter()
                .map(|(imp, runs)| Bar::of_runs(imp.name(), runs))
                .collect(),
        })
    }

    fn runs_of(&self, ids: &[&str]) -> usize {
        self.runs
            .iter()
            .filter(|(w, _)| ids.contains(w))
            .flat_map(|(_, per_imp)| per_imp.iter().map(|(_, runs)| runs.len()))
            .max()
            .unwrap_or(0)
    }
}

/// Writes the table and every figure whose workloads ran into `dir`, and
/// says where on stderr.
pub fn write(dir: &Path, table: &str, figures: &Figures, command: &str, workers: usize) {
    match write_all(dir, table, figures, command, workers) {
        Ok(paths) => {
            for path in paths {
                eprintln!("wrote {}", path.display());
            }
        }
        Err(e) => eprintln!(
            "could not write the table and plots to {}: {e}",
            dir.display()
        ),
    }
}

fn write_all(
    dir: &Path,
    table: &str,
    figures: &Figures,
    command: &str,
    workers: usize,
) -> Result<Vec<PathBuf>, Box<dyn std::error::Error>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    let table_path = dir.join("table.md");
    std::fs::write(&table_path, table)?;
    written.push(table_path);
    let note = format!(
        "{} · {} · {command}",
        machine::describe(),
        machine::utc_date()
    );

    let guards: Vec<BarGroup> = [
        ("1a", "1a: idle server, by hand".to_string()),
        ("1b", format!("1b: 1 000 tasks, {workers} workers (wall)")),
        ("1c", "1c: busy server, by hand".to_string()),
    ]
    .iter()
    .filter_map(|(id, label)| figures.group(id, label))
    .collect();
    if !guards.is_empty() {
        let path = dir.join("guard.svg");
        plot::bar_chart(
            &path,
            &format!(
                "Guard armed then cancelled: median of {} runs, whiskers min..max",
                figures.runs_of(&["1a", "1b", "1c"])
            ),
            "ns per guard",
            &note,
            &guards,
        )?;
        written.push(path);
    }
    if let Some(reset) = figures.group("2", "2: 10 000 sleeps, each pushed later 50 times") {
        let path = dir.join("reset.svg");
        plot::bar_chart(
            &path,
            &format!(
                "Reset to a later deadline + re-poll: median of {} runs, whiskers min..max",
                figures.runs_of(&["2"])
            ),
            "ns per reset + poll",
            &note,
            &[reset],
        )?;
        written.push(path);
    }

    let pooled = LATENESS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let lateness_figures = [
        (
            "3",
            "mass-lateness.svg",
            format!(
                "Mass expiry (3): lateness of {} sleeps per run",
                plot::group_thousands(MASS_TASKS as u64)
            ),
        ),
        (
            "7",
            "blocked-lateness.svg",
            format!(
                "Blocked worker (7): lateness of {} tasks' sleeps",
                plot::group_thousands(BLOCKED_SLEEPERS)
            ),
        ),
    ];
    for (id, file, title) in lateness_figures {
        let curves: Vec<Curve> = pooled
            .iter()
            .filter(|(w, ..)| *w == id)
            .map(|(_, imp, _, lateness)| Curve {
                series: imp.name().to_string(),
                lateness: lateness.clone(),
            })
            .collect();
        let Some(runs) = pooled.iter().filter(|(w, ..)| *w == id).map(|p| p.2).max() else {
            continue;
        };
        let path = dir.join(file);
        plot::lateness_chart(
            &path,
            &format!("{title}, {runs} runs pooled"),
            &note,
            &curves,
        )?;
        written.push(path);
    }
    Ok(written)
}
