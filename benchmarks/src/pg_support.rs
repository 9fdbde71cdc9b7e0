//! Postgres for the Postgres benchmark (`examples/postgres.rs`): a
//! `postgres` server started here (Debian's `postgresql` package, the
//! newest `/usr/lib/postgresql/*/bin`), on a free port of 127.0.0.1, its
//! data and socket in a temporary directory, stopped and removed on drop;
//! and what the server says about its own work (statements logged,
//! database size).
//!
//! The data directory is made by `initdb` once per machine (kept in the
//! temporary directory) and copied for each server. As root, `initdb` and
//! the server run as the `postgres` user. The tests of
//! `tiered-timer-jobs` have their own helper; this one is the benchmarks'.

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// One `postgres` server started here.
#[derive(Debug)]
pub struct Postgres {
    /// Its port on 127.0.0.1.
    pub port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

/// The directory of the newest installed Postgres' binaries.
///
/// # Panics
///
/// If there is none (the message says how to install it).
fn bin_dir() -> PathBuf {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin).unwrap_or_else(|| {
        panic!(
            "no Postgres under /usr/lib/postgresql/*/bin: install it with \
             `apt-get install -y postgresql`"
        )
    })
}

/// The `postgres` user's ids when running as root (Postgres refuses
/// root), else `None`.
fn run_as() -> Option<(u32, u32)> {
    let id = |args: &[&str]| -> String {
        let output = Command::new("id").args(args).output().expect("run id");
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    };
    if id(&["-u"]) != "0" {
        return None;
    }
    Some((
        id(&["-u", "postgres"]).parse().expect("a `postgres` user"),
        id(&["-g", "postgres"]).parse().expect("a `postgres` group"),
    ))
}

fn command(program: PathBuf) -> Command {
    let mut command = Command::new(program);
    if let Some((uid, gid)) = run_as() {
        command.uid(uid).gid(gid);
    }
    command.stdin(Stdio::null());
    command
}

fn hand_over(path: &Path) {
    if run_as().is_some() {
        let status = Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(path)
            .status()
            .expect("run chown");
        assert!(status.success());
    }
}

/// A data directory made by `initdb`, once per machine.
fn template() -> PathBuf {
    let bin = bin_dir();
    let version = bin
        .parent()
        .and_then(|p| p.file_name())
        .map(|v| v.to_string_lossy().into_owned())
        .unwrap_or_default();
    let data = std::env::temp_dir().join(format!("ttr-bench-pg-template-{version}"));
    if data.join("PG_VERSION").exists() {
        return data;
    }
    let dir = fresh_dir("pg-template");
    hand_over(&dir);
    let made = dir.join("data");
    let output = command(bin.join("initdb"))
        .arg("-D")
        .arg(&made)
        .args(["-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"])
        .output()
        .expect("run initdb");
    assert!(
        output.status.success(),
        "initdb: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let _ = std::fs::rename(&made, &data);
    let _ = std::fs::remove_dir_all(&dir);
    data
}

fn fresh_dir(label: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "ttr-bench-{label}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    dir
}

impl Postgres {
    /// Starts a server with `-c name=value` settings (besides
    /// `fsync=off`: the benchmarks measure the queues, not the disk, and
    /// every queue pays for its commits alike).
    ///
    /// # Panics
    ///
    /// If Postgres is not installed, or does not start within 30 s.
    pub fn start(settings: &[&str]) -> Postgres {
        let dir = fresh_dir("postgres");
        let status = Command::new("cp")
            .arg("-a")
            .arg(template())
            .arg(dir.join("data"))
            .status()
            .expect("run cp");
        assert!(status.success());
        hand_over(&dir);
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let log = std::fs::File::create(dir.join("log")).expect("the server log");
        hand_over(&dir.join("log"));
        let child = command(bin_dir().join("postgres"))
            .arg("-D")
            .arg(dir.join("data"))
            .args(["-p", &port.to_string()])
            .arg("-k")
            .arg(&dir)
            .args(["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"])
            .args(["-c", "max_connections=200"])
            .args(settings.iter().flat_map(|s| ["-c", s]))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start postgres");
        let server = Postgres {
            port,
            dir,
            child: Some(child),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ready = command(bin_dir().join("pg_isready"))
                .args(["-h", "127.0.0.1", "-p", &port.to_string()])
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ready {
                return server;
            }
            assert!(Instant::now() < deadline, "postgres did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Its URL (the `postgres` database).
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// How many statements the server ran, by its log (started with
    /// `log_statement=all`): each logs one `statement:` or `execute` line.
    pub fn statements(&self) -> usize {
        let log = std::fs::read_to_string(self.dir.join("log")).unwrap_or_default();
        log.lines()
            .filter(|l| l.contains("LOG:  statement:") || l.contains("LOG:  execute"))
            .count()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-QUIT", &child.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
