//! Measurements in a fresh process: the program runs an executable (itself,
//! or another build of itself) with `--child <request>`, where the request
//! is one JSON value; the child does that one measurement and prints its
//! result as one JSON line on stdout, which the parent reads back.
//!
//! Why a fresh process: a peer's background thread (pingora's clock ticks
//! every 10 ms forever) would otherwise be charged to whoever is measured
//! after it; live heap and resident size mean something only in a process
//! that holds nothing else; a process can be put in a cgroup before it
//! makes its first thread.
//!
//! That last case is a *gated* child ([`run_gated`]): the parent starts it,
//! places it (in a CPU-quota group, say), then writes `go` on its stdin;
//! the child calls [`wait_for_go`] before it starts anything.
//!
//! In the parent:
//!
//! ```no_run
//! # #[derive(serde::Serialize)] struct Request { tasks: usize }
//! let cpu_ms: f64 = tiered_timer_benchmarks::child::run_self(&Request { tasks: 1000 });
//! ```
//!
//! In the child, first thing in `main`:
//!
//! ```no_run
//! # #[derive(serde::Deserialize)] struct Request { tasks: usize }
//! # fn measure(tasks: usize) -> f64 { 0.0 }
//! use tiered_timer_benchmarks::child;
//!
//! if let Some(request) = child::request::<Request>() {
//!     child::reply(&measure(request.tasks));
//!     return;
//! }
//! ```
//!
//! Numbers that may be NaN ("n/a": a count only our timer has) go in a
//! [`Numbers`], which JSON carries as `null`.

use std::io::{BufRead, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The argument that makes a program a child; the request follows it.
pub const FLAG: &str = "--child";

/// This process's request, if it was started as a child (`FLAG` then the
/// request as its first two arguments); `None` otherwise, and the program
/// goes on as itself.
///
/// # Panics
///
/// If the request is not a `Q` (a parent of another version, say).
pub fn request<Q: DeserializeOwned>() -> Option<Q> {
    let mut args = std::env::args().skip(1);
    if args.next().as_deref() != Some(FLAG) {
        return None;
    }
    let text = args.next().unwrap_or_default();
    let request = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{FLAG} {text:?}: not a request this program knows ({e})"));
    Some(request)
}

/// Prints `result` as the child's one JSON line for the parent.
///
/// # Panics
///
/// If stdout is closed.
pub fn reply<R: Serialize>(result: &R) {
    let line = serde_json::to_string(result).expect("a result JSON can carry");
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{line}").expect("write the result to stdout");
    stdout.flush().expect("flush stdout");
}

/// In a gated child: waits for the parent's word. Returns `true` on `go`,
/// `false` if the parent said anything else or closed stdin (it could not
/// place the child: the child should exit at once).
pub fn wait_for_go() -> bool {
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).is_ok() && line.trim() == "go"
}

/// Runs this program as a child for `request` and returns its result.
///
/// # Panics
///
/// If the child cannot be run, fails, or prints no result of type `R`: a
/// benchmark has nothing to report then. The message carries the child's
/// stderr.
#[track_caller]
pub fn run_self<Q: Serialize, R: DeserializeOwned>(request: &Q) -> R {
    let exe = std::env::current_exe().expect("the path of this program");
    run(&exe, request).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs `program` as a child for `request` and returns its result.
///
/// # Errors
///
/// A message if the child cannot be started, exits with a failure (its
/// stderr included) or prints no result of type `R`.
pub fn run<Q: Serialize, R: DeserializeOwned>(program: &Path, request: &Q) -> Result<R, String> {
    run_gated(program, request, None)
}

/// As [`run`], for a gated child: `place` is called with the child's
/// process id once it has started, before it is told to `go` (it is told to
/// stop instead if `place` fails, and that error is returned).
///
/// # Errors
///
/// As [`run`], and `place`'s error.
pub fn run_gated<Q: Serialize, R: DeserializeOwned>(
    program: &Path,
    request: &Q,
    place: Option<&dyn Fn(u32) -> Result<(), String>>,
) -> Result<R, String> {
    let request = serde_json::to_string(request).map_err(|e| format!("a request: {e}"))?;
    let mut child = Command::new(program)
        .args([FLAG, &request])
        .stdin(if place.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", program.display()))?;
    let placed = place.map_or(Ok(()), |place| place(child.id()));
    if let Some(mut stdin) = child.stdin.take() {
        // Releases the child, or on error lets it exit at once; a child
        // that already died says why below.
        let word = if placed.is_ok() { "go\n" } else { "stop\n" };
        let _ = stdin.write_all(word.as_bytes());
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("waiting for the child {request}: {e}"))?;
    placed?;
    if !out.status.success() {
        return Err(format!(
            "the child {request} of {} failed ({}): {}",
            program.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().rev().find(|l| !l.trim().is_empty());
    serde_json::from_str(line.unwrap_or_default())
        .map_err(|e| format!("the child {request} printed no result ({e}): {stdout}"))
}

/// Numbers as a child reports them, NaN included: JSON has no NaN, so it
/// travels as `null`.
///
/// # Examples
///
/// ```
/// use tiered_timer_benchmarks::child::Numbers;
///
/// let text = serde_json::to_string(&Numbers(vec![1.5, f64::NAN])).unwrap();
/// assert_eq!(text, "[1.5,null]");
/// let back: Numbers = serde_json::from_str(&text).unwrap();
/// assert!(back.0[0] == 1.5 && back.0[1].is_nan());
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Numbers(pub Vec<f64>);

impl Serialize for Numbers {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let finite: Vec<Option<f64>> = self.0.iter().map(|v| v.is_finite().then_some(*v)).collect();
        finite.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Numbers {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let values = Vec::<Option<f64>>::deserialize(deserializer)?;
        Ok(Numbers(
            values.into_iter().map(|v| v.unwrap_or(f64::NAN)).collect(),
        ))
    }
}
