//! `ttr`: look after `tiered-timer-jobs` queues from a shell, or from a
//! web dashboard (`ttr serve`) with Prometheus metrics.
//!
//! ```text
//! ttr --url redis://127.0.0.1:6379/ stats orders
//! ttr --url file:///var/lib/shop/jobs stats orders   # an embedded store
//! ttr dead orders --limit 50
//! ttr job orders order-17
//! ttr requeue orders order-17        # or --all
//! ttr purge orders --all --yes       # asks on a terminal; --yes otherwise
//! ttr serve --listen 127.0.0.1:7878 --token "$TTR_TOKEN"
//! ```
//!
//! Built only on the library's public API ([`Queue::stats`],
//! [`Queue::list`], [`Queue::job`], ...); looks open a queue with
//! `register(false)`, so a misspelled name is an error, never a new
//! queue. Exit status: 0 done; 1 the store could not be reached, the
//! queue does not exist, the job was not in the state the command needs,
//! or a confirmation was declined; 2 bad usage (`failure.rs` says how each
//! error is worded).

#![warn(missing_debug_implementations, rust_2018_idioms, unreachable_pub)]
#![forbid(unsafe_code)]

mod commands;
mod confirm;
mod embedded;
mod failure;
mod serve;
mod text;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use tiered_timer_jobs::Queue;

pub(crate) use failure::{failure, Failure};
// Numbers and times for people, the same as on the dashboard's pages.
pub(crate) use tiered_timer_dashboard::for_ttr::human;

/// Look after tiered-timer-jobs queues: counts, jobs, dead letters, a web
/// dashboard and Prometheus metrics.
#[derive(Debug, Parser)]
#[command(name = "ttr", version, propagate_version = true)]
#[command(
    after_help = "Exit status: 0 done; 1 the store cannot be reached, the queue does not \
                  exist, the job is not in the state the command needs, or a confirmation \
                  was declined; 2 bad usage. With --json, errors are one JSON object on \
                  stderr: {\"error\": {\"kind\", \"message\", \"status\"}}."
)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) redis: RedisArgs,
    /// Print JSON instead of text (one document; one line per update
    /// with `stats --watch`); errors are a JSON object on stderr.
    #[arg(long, global = true)]
    pub(crate) json: bool,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// Where the queues are: the store, a Redis, a Postgres or an embedded
/// store.
#[derive(Debug, Args, Clone)]
pub(crate) struct RedisArgs {
    /// The store: a Redis (`redis://host:port/db`, `rediss://`,
    /// `redis+unix://`), a Postgres (`postgres://user@host/db`, with
    /// `?schema=name` if its queues are not in `tiered_timer_jobs`), or an
    /// embedded store's directory (`file:///var/lib/app/jobs`; looks read
    /// it while its service runs, changes need the service stopped).
    #[arg(
        long,
        global = true,
        env = "REDIS_URL",
        hide_env_values = true,
        default_value = "redis://127.0.0.1:6379/"
    )]
    pub(crate) url: String,
    /// The queue's partitions (Redis only). Default: the count recorded
    /// at the queue's first connect; another count is an error that names
    /// it.
    #[arg(long, global = true, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub(crate) partitions: Option<u32>,
    /// The URL is a node of a Redis Cluster.
    #[arg(long, global = true)]
    pub(crate) cluster: bool,
    /// How long to wait for Redis or Postgres, connecting included, e.g.
    /// `500ms`, `5s` (not used on a file:// store).
    #[arg(long, global = true, default_value = "5s", value_parser = positive_duration)]
    pub(crate) timeout: Duration,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Every queue in the store, with its counts.
    Queues,
    /// Jobs waiting, due, leased and dead; how late the oldest is.
    Stats {
        /// The queue's name.
        queue: String,
        /// Print again every INTERVAL (default 2s) until interrupted.
        #[arg(long, value_name = "INTERVAL", num_args = 0..=1, default_missing_value = "2s", value_parser = positive_duration)]
        watch: Option<Duration>,
    },
    /// One job: state, due time or lease expiry, attempts, last error,
    /// payload.
    Job {
        /// The queue's name.
        queue: String,
        /// The job's id.
        id: String,
    },
    /// Waiting jobs, earliest due first.
    Pending(ListArgs),
    /// Waiting jobs that are due now, most overdue first.
    Due(ListArgs),
    /// Leased jobs, earliest lease expiry first.
    Leased(ListArgs),
    /// Dead letters, newest first, with their last error.
    Dead(ListArgs),
    /// Move a dead letter back to the waiting jobs, due now (`--all`
    /// asks first).
    Requeue(Target),
    /// Delete a dead letter for good (asks first).
    Purge(Target),
    /// Cancel a waiting job: it will never be delivered (asks first).
    Cancel {
        /// The queue's name.
        queue: String,
        /// The job's id.
        id: String,
        #[command(flatten)]
        confirm: Confirm,
    },
    /// Make a waiting job due now.
    Promote {
        /// The queue's name.
        queue: String,
        /// The job's id.
        id: String,
    },
    /// Serve the web dashboard and Prometheus /metrics.
    Serve(serve::ServeArgs),
    /// Embedded stores only: cut a torn write off the end of a queue's log,
    /// or move a damaged last frame to a quarantine file beside it, so
    /// that the queue opens again (with its service stopped).
    Repair {
        /// The queue's name.
        queue: String,
    },
}

impl Command {
    /// Whether the command only reads (an embedded store is then opened
    /// read-only: see `embedded.rs`).
    fn only_looks(&self) -> bool {
        matches!(
            self,
            Command::Queues
                | Command::Stats { .. }
                | Command::Job { .. }
                | Command::Pending(_)
                | Command::Due(_)
                | Command::Leased(_)
                | Command::Dead(_)
        )
    }
}

/// A listing's queue and page.
#[derive(Debug, Args)]
pub(crate) struct ListArgs {
    /// The queue's name.
    pub(crate) queue: String,
    /// How many jobs (at most 1000).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub(crate) limit: u32,
    /// Skip this many first.
    #[arg(long, default_value_t = 0)]
    pub(crate) offset: usize,
}

/// One dead letter by id, or all of them.
#[derive(Debug, Args)]
pub(crate) struct Target {
    /// The queue's name.
    pub(crate) queue: String,
    /// The job's id.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub(crate) id: Option<String>,
    /// Every dead letter.
    #[arg(long)]
    pub(crate) all: bool,
    #[command(flatten)]
    pub(crate) confirm: Confirm,
}

/// How a command that deletes jobs, or changes many, is confirmed.
#[derive(Debug, Args, Clone, Copy)]
pub(crate) struct Confirm {
    /// Do it without asking. Without it the command asks on a terminal,
    /// and refuses when stdin is not one (a script, a pipe).
    #[arg(long, short = 'y')]
    pub(crate) yes: bool,
}

fn positive_duration(text: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(text).map_err(|e| format!("{e} (try 500ms, 5s, 1m)"))?;
    if d.is_zero() {
        return Err("must be above zero".to_owned());
    }
    Ok(d)
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => return bad_command_line(&error),
    };
    let json = cli.json;
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            return Failure::Runtime(format!("cannot start the runtime: {e}")).report(json);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => failure.report(json),
    }
}

/// clap's verdict on a command line it did not run: help and version
/// print as clap prints them (status 0); a usage error as clap prints it
/// (status 2), or, with `--json` on the line, as a JSON error.
fn bad_command_line(error: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    let json = std::env::args_os()
        .take_while(|arg| arg != "--")
        .any(|arg| arg == "--json");
    match error.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => error.exit(),
        _ if json => failure::from_clap(error).report(true),
        _ => error.exit(),
    }
}

async fn run(cli: Cli) -> Result<(), Failure> {
    failure::check_url(&cli.redis.url)?;
    let out = commands::Output { json: cli.json };
    match cli.command {
        Command::Serve(args) => serve::run(cli.redis, args).await,
        Command::Queues => commands::queues(&cli.redis, out).await,
        Command::Repair { queue } => embedded::repair(&cli.redis, &queue, out).await,
        command => {
            let name = match &command {
                Command::Stats { queue, .. }
                | Command::Job { queue, .. }
                | Command::Cancel { queue, .. }
                | Command::Promote { queue, .. } => queue,
                Command::Pending(l) | Command::Due(l) | Command::Leased(l) | Command::Dead(l) => {
                    &l.queue
                }
                Command::Requeue(t) | Command::Purge(t) => &t.queue,
                Command::Serve(_) | Command::Queues | Command::Repair { .. } => {
                    unreachable!("handled above")
                }
            };
            let queue = if command.only_looks() {
                embedded::look_at(&cli.redis, name, cli.redis.partitions).await?
            } else {
                connect(&cli.redis, name).await?
            };
            commands::run(&queue, command, &cli.redis, out).await
        }
    }
}

/// Connects to one queue that exists (else a "no such queue" failure),
/// with `--partitions` if given, else the queue's recorded count. The
/// library reports a refused connection at once and a silent one after
/// the timeout, connecting included.
pub(crate) async fn connect(redis: &RedisArgs, name: &str) -> Result<Queue, Failure> {
    connect_with(redis, name, redis.partitions).await
}

/// [`connect`] with a partition count of its own (`None`: the recorded
/// one).
pub(crate) async fn connect_with(
    redis: &RedisArgs,
    name: &str,
    partitions: Option<u32>,
) -> Result<Queue, Failure> {
    // Looking at a queue does not create or register it
    // (`register(false)`): a name that is no queue is an error.
    let mut builder = Queue::builder(&redis.url, name)
        .command_timeout(redis.timeout)
        .register(false);
    if let Some(partitions) = partitions {
        builder = builder.partitions(partitions);
    }
    if redis.cluster {
        builder = builder.cluster();
    }
    builder.connect().await.map_err(|e| failure(&redis.url, e))
}

/// One PING on a plain connection (for `ttr serve`, which connects to no
/// queue at start), so that a Redis that is not there is reported at
/// once, with the operating system's reason, and a silent one after the
/// timeout (connecting included: redis-rs' own default is 1 s).
pub(crate) async fn probe(url: &str, timeout: Duration) -> Result<(), Failure> {
    if url.starts_with("file://") {
        return Ok(()); // an embedded store: each queue is opened when looked at
    }
    if failure::is_postgres(url) {
        // Reads the queues' table (nothing written): a Postgres that is not
        // there, or silent, is reported as for Redis.
        return tiered_timer_jobs::find_queues(url, false, timeout)
            .await
            .map(|_| ())
            .map_err(|e| failure(url, e));
    }
    let client = redis::Client::open(url).map_err(|e| {
        failure(
            url,
            tiered_timer_jobs::Error::InvalidUrl {
                reason: e.to_string(),
            },
        )
    })?;
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(None);
    let ping = async {
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        redis::cmd("PING").query_async::<()>(&mut conn).await
    };
    match tokio::time::timeout(timeout, ping).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) if e.is_timeout() => Err(failure(
            url,
            tiered_timer_jobs::Error::Timeout { after: timeout },
        )),
        Ok(Err(e)) => Err(failure(url, e.into())),
        Err(_) => Err(failure(
            url,
            tiered_timer_jobs::Error::Timeout { after: timeout },
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    fn parse(line: &str) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("ttr").chain(line.split_whitespace()))
    }

    #[test]
    fn options_go_anywhere_and_durations_are_human() {
        let cli = parse("stats orders --url redis://h:1/ --partitions=3 --cluster --timeout 500ms")
            .unwrap();
        assert_eq!(cli.redis.url, "redis://h:1/");
        assert_eq!(cli.redis.partitions, Some(3));
        assert_eq!(parse("stats orders").unwrap().redis.partitions, None);
        assert!(cli.redis.cluster);
        assert_eq!(cli.redis.timeout, Duration::from_millis(500));
        let cli = parse("--json stats orders --watch").unwrap();
        assert!(cli.json);
        assert!(
            matches!(cli.command, Command::Stats { watch: Some(d), .. } if d == Duration::from_secs(2))
        );
        let cli = parse("dead orders --limit 5").unwrap();
        assert!(matches!(
            cli.command,
            Command::Dead(ListArgs { limit: 5, .. })
        ));
        assert!(matches!(
            parse("purge orders --all").unwrap().command,
            Command::Purge(Target {
                all: true,
                id: None,
                confirm: Confirm { yes: false },
                ..
            })
        ));
        assert!(matches!(
            parse("purge orders --all -y").unwrap().command,
            Command::Purge(Target {
                confirm: Confirm { yes: true },
                ..
            })
        ));
        assert!(matches!(
            parse("cancel orders a --yes").unwrap().command,
            Command::Cancel {
                confirm: Confirm { yes: true },
                ..
            }
        ));
    }

    #[test]
    fn bad_usage_is_refused() {
        for line in [
            "",
            "stats",
            "frobnicate orders",
            "stats orders --frob",
            "stats orders --partitions 0",
            "stats orders --timeout 0s",
            "stats orders --timeout soon",
            "requeue orders",
            "requeue orders a --all",
            "dead orders --limit 0",
            "job orders",
        ] {
            assert!(parse(line).is_err(), "{line:?} was accepted");
        }
    }
}
