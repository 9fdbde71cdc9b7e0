//! Real Postgres servers for the tests: each test starts its own
//! `postgres` (Debian's `postgresql` package, `/usr/lib/postgresql/*/bin`)
//! on a free port of 127.0.0.1, its socket and data in a temporary
//! directory, and stops it on drop. The data directory is made by
//! `initdb` once per test process and copied for each server (a copy
//! takes a few ms, an `initdb` a second or more). As root, `initdb` and
//! the server run as the unprivileged `postgres` user (Postgres refuses
//! to run as root). Without the binaries the test fails, saying how to
//! install them: never a silent skip.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use sqlx::{Connection, Row};

use super::{free_port, temp_dir};

/// The directory of the newest installed Postgres' binaries.
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
    match found.pop() {
        Some((_, bin)) => bin,
        None => panic!(
            "no Postgres server binaries under /usr/lib/postgresql/*/bin: these tests need a \
             real Postgres. Install it with `apt-get install -y postgresql` (Debian/Ubuntu) and \
             run again."
        ),
    }
}

/// The user and group ids the server runs as: the `postgres` user as
/// root, else the current user.
fn run_as() -> Option<(u32, u32)> {
    let id = |args: &[&str]| -> String {
        let output = Command::new("id").args(args).output().expect("run id");
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    };
    if id(&["-u"]) != "0" {
        return None;
    }
    let uid = id(&["-u", "postgres"]).parse().unwrap_or_else(|_| {
        panic!("running as root, the tests start Postgres as the user `postgres`, which does not exist (the `postgresql` package creates it)")
    });
    let gid = id(&["-g", "postgres"])
        .parse()
        .expect("the postgres user's group");
    Some((uid, gid))
}

/// A command that runs as the server's user, without libfaketime.
fn command(program: PathBuf) -> Command {
    let mut command = Command::new(program);
    if let Some((uid, gid)) = run_as() {
        command.uid(uid).gid(gid);
    }
    command
        .env_remove("LD_PRELOAD")
        .env_remove("FAKETIME")
        .stdin(Stdio::null());
    command
}

/// Gives `path` (and what is in it) to the server's user.
fn hand_over(path: &Path) {
    if run_as().is_some() {
        let status = Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(path)
            .status()
            .expect("run chown");
        assert!(status.success(), "chown {}", path.display());
    }
}

/// A data directory made by `initdb` once per machine (per Postgres
/// version and user), kept in the temporary directory and copied for
/// each server; made under another name and renamed, so concurrent test
/// processes never see half of one.
fn template() -> &'static Path {
    static TEMPLATE: OnceLock<PathBuf> = OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let bin = bin_dir();
        let version = bin
            .parent()
            .and_then(|p| p.file_name())
            .map(|v| v.to_string_lossy().into_owned())
            .unwrap_or_default();
        let user = run_as().map_or("self".to_owned(), |(uid, _)| uid.to_string());
        let data = std::env::temp_dir().join(format!("ttr-pg-template-{version}-{user}"));
        if data.join("PG_VERSION").exists() {
            return data;
        }
        let dir = temp_dir("pg-template");
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
            "initdb failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        // Another process may have made it meanwhile: either is fine.
        let _ = std::fs::rename(&made, &data);
        let _ = std::fs::remove_dir_all(&dir);
        data
    })
}

/// One `postgres` server.
pub struct PostgresServer {
    pub port: u16,
    pub dir: PathBuf,
    args: Vec<String>,
    child: Option<Child>,
}

impl PostgresServer {
    /// Starts a server on a free port, with a fresh copy of the template.
    pub fn start() -> PostgresServer {
        PostgresServer::start_with(&[])
    }

    /// Starts a server with extra `-c name=value` settings.
    pub fn start_with(settings: &[&str]) -> PostgresServer {
        let dir = temp_dir("postgres");
        let status = Command::new("cp")
            .arg("-a")
            .arg(template())
            .arg(dir.join("data"))
            .status()
            .expect("run cp");
        assert!(status.success(), "copy the template data directory");
        hand_over(&dir);
        let mut server = PostgresServer {
            port: free_port(),
            dir,
            args: settings.iter().map(|s| s.to_string()).collect(),
            child: None,
        };
        server.spawn();
        server
    }

    fn spawn(&mut self) {
        let log = std::fs::File::create(self.dir.join("log")).expect("create the server log");
        hand_over(&self.dir.join("log"));
        let child = command(bin_dir().join("postgres"))
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["-p", &self.port.to_string()])
            .arg("-k")
            .arg(&self.dir)
            .args(["-c", "listen_addresses=127.0.0.1"])
            // Tests cut no power: a commit need not reach the disk.
            .args(["-c", "fsync=off", "-c", "full_page_writes=off"])
            .args(["-c", "max_connections=200"])
            .args(
                self.args
                    .iter()
                    .flat_map(|setting| ["-c", setting.as_str()]),
            )
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start postgres");
        self.child = Some(child);
        self.wait_ready();
    }

    /// Waits until the server accepts connections.
    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ready = command(bin_dir().join("pg_isready"))
                .args([
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &self.port.to_string(),
                    "-U",
                    "postgres",
                ])
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|status| status.success());
            if ready {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "postgres on port {} did not start: {}",
                self.port,
                std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The URL a queue connects to (the `postgres` database, the default
    /// schema).
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// A connection of the test's own.
    pub async fn connect(&self) -> sqlx::PgConnection {
        sqlx::PgConnection::connect(&self.url())
            .await
            .expect("connect to the test's postgres")
    }

    /// A pool of the test's own (for transactions).
    pub async fn pool(&self) -> sqlx::PgPool {
        sqlx::PgPool::connect(&self.url())
            .await
            .expect("connect to the test's postgres")
    }

    /// The database's clock in ms (`clock_timestamp()`): the clock the
    /// queue decides by.
    pub async fn now_ms(&self) -> u64 {
        let mut conn = self.connect().await;
        let row = sqlx::query("SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint")
            .fetch_one(&mut conn)
            .await
            .unwrap();
        row.get::<i64, _>(0) as u64
    }

    /// One number from a query of the test's own.
    pub async fn number(&self, sql: &str) -> i64 {
        let mut conn = self.connect().await;
        let row = sqlx::query(sql).fetch_one(&mut conn).await.unwrap();
        row.get::<i64, _>(0)
    }

    /// The server's log (with `log_statement=all`, every statement).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
    }

    /// How many statements containing `text` the server ran, by its log
    /// (started with `log_statement=all`).
    pub fn statements_with(&self, text: &str) -> usize {
        self.log().matches(text).count()
    }

    /// How many rows the jobs table holds (every state, every queue).
    pub async fn job_rows(&self) -> i64 {
        self.number("SELECT count(*) FROM tiered_timer_jobs.jobs")
            .await
    }

    /// Stops the server: a fast shutdown (SIGINT: transactions roll back,
    /// committed work is kept), or a kill if that does not work.
    pub fn stop(&mut self) {
        self.signal_and_wait("-INT");
    }

    /// Kills the server (SIGKILL of every process of it: a crash).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            // The backends are the postmaster's children: they go with it
            // once it is gone and they notice, which SIGQUIT makes at once.
            let _ = Command::new("kill")
                .args(["-QUIT", &child.id().to_string()])
                .status();
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn signal_and_wait(&mut self, signal: &str) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .args([signal, &child.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port and data.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "stop the server first");
        self.spawn();
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        self.signal_and_wait("-QUIT");
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
