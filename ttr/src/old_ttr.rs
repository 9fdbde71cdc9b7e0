//! `ttr`: look after a `tiered-timer-redis` queue from a shell.
//!
//! ```text
//! ttr --url redis://127.0.0.1:6379/ stats orders
//! ttr dead orders --limit 50
//! ttr requeue orders order-17        # or --all
//! ttr purge orders order-17          # or --all
//! ```
//!
//! Built only on the library's public API ([`Queue::stats`],
//! [`Queue::dead_letters`], ...). Exit status: 0 done, 1 Redis could not
//! be reached or the job was not a dead letter, 2 bad arguments.

use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use tiered_timer_redis::{DeadLetter, Error, JobId, Queue, Stats};

#[path = "../human.rs"]
#[allow(dead_code)]
mod human;

const USAGE: &str = "\
ttr: look after a tiered-timer-redis queue

Usage:
  ttr [options] stats <queue>            jobs waiting, due, leased and dead; how late the oldest is
  ttr [options] dead <queue> [--limit N] dead letters, newest first, with their last error (N: 20)
  ttr [options] requeue <queue> <id>     move a dead letter back to the waiting jobs, due now
  ttr [options] requeue <queue> --all    ... every dead letter
  ttr [options] purge <queue> <id>       delete a dead letter for good
  ttr [options] purge <queue> --all      ... every dead letter

Options (anywhere on the line):
  --url URL         the Redis (default: $REDIS_URL, else redis://127.0.0.1:6379/)
  --partitions N    the queue's partitions, as its workers set them (default 1)
  --cluster         URL is a node of a Redis Cluster
  --timeout SECS    how long to wait for Redis (default 5)
  -h, --help        this text

Exit status: 0 done; 1 Redis unreachable, or the job is not a dead letter; 2 bad arguments.
";

/// What went wrong, and the exit status that says so.
enum Failure {
    /// Bad arguments: status 2, with a pointer to `--help`.
    Usage(String),
    /// Something in the world: status 1.
    Runtime(String),
}

/// The parsed command line.
#[derive(Debug, PartialEq)]
struct Args {
    url: String,
    partitions: u32,
    cluster: bool,
    timeout: Duration,
    command: Command,
}

#[derive(Debug, PartialEq)]
enum Command {
    Help,
    Stats { queue: String },
    Dead { queue: String, limit: usize },
    Requeue { queue: String, target: Target },
    Purge { queue: String, target: Target },
}

#[derive(Debug, PartialEq)]
enum Target {
    One(String),
    All,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let default_url =
        std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".to_owned());
    let result = parse(&args, default_url).and_then(|args| {
        if args.command == Command::Help {
            print!("{USAGE}");
            return Ok(());
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Failure::Runtime(format!("cannot start the runtime: {e}")))?;
        runtime.block_on(run(args))
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(message)) => {
            eprintln!("ttr: {message}\nRun `ttr --help` for usage.");
            ExitCode::from(2)
        }
        Err(Failure::Runtime(message)) => {
            eprintln!("ttr: {message}");
            ExitCode::from(1)
        }
    }
}

fn parse(args: &[String], default_url: String) -> Result<Args, Failure> {
    let mut url = default_url;
    let mut partitions = 1;
    let mut cluster = false;
    let mut timeout = Duration::from_secs(5);
    let mut limit = None;
    let mut all = false;
    let mut words = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if arg.starts_with("--") => (flag, Some(value.to_owned())),
            _ => (arg.as_str(), None),
        };
        let mut value = |name: &str| {
            inline
                .clone()
                .or_else(|| rest.next().cloned())
                .ok_or_else(|| Failure::Usage(format!("{name} needs a value")))
        };
        match flag {
            "-h" | "--help" => return Ok(help_args()),
            "--url" => url = value("--url")?,
            "--partitions" => partitions = number(&value("--partitions")?, "--partitions")?,
            "--limit" => limit = Some(number(&value("--limit")?, "--limit")?),
            "--timeout" => {
                let text = value("--timeout")?;
                timeout = text
                    .parse::<f64>()
                    .ok()
                    .filter(|secs| *secs > 0.0)
                    .and_then(|secs| Duration::try_from_secs_f64(secs).ok())
                    .ok_or_else(|| {
                        Failure::Usage(format!("--timeout wants seconds above 0, not {text:?}"))
                    })?;
            }
            "--cluster" => cluster = true,
            "--all" => all = true,
            _ if flag.starts_with('-') && flag.len() > 1 => {
                return Err(Failure::Usage(format!("unknown option {flag}")))
            }
            _ => words.push(arg.clone()),
        }
    }
    if partitions == 0 || partitions > 1024 {
        return Err(Failure::Usage("--partitions must be 1 to 1024".to_owned()));
    }
    let command = command(&words, limit, all)?;
    Ok(Args {
        url,
        partitions,
        cluster,
        timeout,
        command,
    })
}

fn help_args() -> Args {
    Args {
        url: String::new(),
        partitions: 1,
        cluster: false,
        timeout: Duration::from_secs(5),
        command: Command::Help,
    }
}

fn command(words: &[String], limit: Option<usize>, all: bool) -> Result<Command, Failure> {
    let Some((name, rest)) = words.split_first() else {
        return usage("which command? stats, dead, requeue or purge");
    };
    let Some((queue, rest)) = rest.split_first() else {
        return usage(&format!("{name}: which queue?"));
    };
    let queue = queue.clone();
    if limit.is_some() && name != "dead" {
        return usage("--limit is for `dead`");
    }
    if all && !matches!(name.as_str(), "requeue" | "purge") {
        return usage("--all is for `requeue` and `purge`");
    }
    let target = || match (rest, all) {
        ([], true) => Ok(Target::All),
        ([id], false) => Ok(Target::One(id.clone())),
        ([], false) => usage(&format!("{name}: which job? give its id, or --all")),
        (_, true) => usage(&format!("{name}: give an id or --all, not both")),
        (_, false) => usage(&format!("{name}: one id at a time (or --all)")),
    };
    let extra = || usage(&format!("{name}: unexpected {:?}", rest[0]));
    match name.as_str() {
        "stats" if rest.is_empty() => Ok(Command::Stats { queue }),
        "dead" if rest.is_empty() => Ok(Command::Dead {
            queue,
            limit: limit.unwrap_or(20),
        }),
        "stats" | "dead" => extra(),
        "requeue" => Ok(Command::Requeue {
            queue,
            target: target()?,
        }),
        "purge" => Ok(Command::Purge {
            queue,
            target: target()?,
        }),
        other => usage(&format!(
            "unknown command {other:?}: stats, dead, requeue or purge"
        )),
    }
}

fn usage<T>(message: &str) -> Result<T, Failure> {
    Err(Failure::Usage(message.to_owned()))
}

fn number<T: std::str::FromStr>(text: &str, flag: &str) -> Result<T, Failure> {
    text.parse()
        .map_err(|_| Failure::Usage(format!("{flag} wants a whole number, not {text:?}")))
}

async fn run(args: Args) -> Result<(), Failure> {
    let queue_name = match &args.command {
        Command::Help => return Ok(()),
        Command::Stats { queue }
        | Command::Dead { queue, .. }
        | Command::Requeue { queue, .. }
        | Command::Purge { queue, .. } => queue.clone(),
    };
    let mut builder = Queue::builder(&args.url, &queue_name)
        .partitions(args.partitions)
        .command_timeout(args.timeout);
    if args.cluster {
        builder = builder.cluster();
    }
    // `connect` checks its input before it goes near Redis, so polled
    // first it reports a bad queue name at once; meanwhile the probe
    // reports a Redis that is not there at once, not after the timeout.
    let connect = builder.connect();
    tokio::pin!(connect);
    let queue = tokio::select! {
        biased;
        queue = &mut connect => queue,
        probed = probe(&args.url, args.timeout) => {
            probed?;
            connect.await
        }
    }
    .map_err(|e| failure(&args.url, e))?;
    let fail = |e| failure(&args.url, e);
    match args.command {
        Command::Help => {}
        Command::Stats { .. } => {
            let stats = queue.stats().await.map_err(fail)?;
            print!("{}", show_stats(&queue_name, &stats));
        }
        Command::Dead { limit, .. } => {
            let dead = queue.dead_letters(limit).await.map_err(fail)?;
            let total = queue.stats().await.map_err(fail)?.dead;
            print!("{}", show_dead(&queue_name, &dead, total));
        }
        Command::Requeue { target, .. } => match target {
            Target::All => {
                let n = queue.requeue_all().await.map_err(fail)?;
                println!("requeued {n} dead letter(s) of {queue_name}: due now");
            }
            Target::One(id) => {
                if !queue
                    .requeue(&JobId::from(id.as_str()))
                    .await
                    .map_err(fail)?
                {
                    return Err(not_dead(&id, &queue_name));
                }
                println!("requeued {id} in {queue_name}: due now, attempts reset");
            }
        },
        Command::Purge { target, .. } => match target {
            Target::All => {
                let n = queue.purge_all().await.map_err(fail)?;
                println!("purged {n} dead letter(s) of {queue_name}");
            }
            Target::One(id) => {
                if !queue.purge(&JobId::from(id.as_str())).await.map_err(fail)? {
                    return Err(not_dead(&id, &queue_name));
                }
                println!("purged {id} from {queue_name}");
            }
        },
    }
    Ok(())
}

/// One PING on a plain connection, so that a Redis that is not there is
/// reported at once, with the operating system's reason ("Connection
/// refused"), rather than as the timeout of a connection that keeps
/// retrying.
async fn probe(url: &str, timeout: Duration) -> Result<(), Failure> {
    let client = redis::Client::open(url)
        .map_err(|e| Failure::Usage(format!("invalid Redis URL {url:?}: {e}")))?;
    let ping = async {
        let mut conn = client.get_multiplexed_async_connection().await?;
        redis::cmd("PING").query_async::<()>(&mut conn).await
    };
    match tokio::time::timeout(timeout, ping).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(Failure::Runtime(format!(
            "cannot reach Redis at {url}: {e}"
        ))),
        Err(_) => Err(Failure::Runtime(format!(
            "cannot reach Redis at {url}: no answer within {}",
            human::duration(timeout)
        ))),
    }
}

/// Bad input is a usage error; anything else means Redis.
fn failure(url: &str, error: Error) -> Failure {
    match error {
        Error::InvalidUrl { .. }
        | Error::InvalidQueueName { .. }
        | Error::InvalidJobId { .. }
        | Error::InvalidConfig { .. } => Failure::Usage(error.to_string()),
        error => Failure::Runtime(format!("cannot reach Redis at {url}: {error}")),
    }
}

fn not_dead(id: &str, queue: &str) -> Failure {
    Failure::Runtime(format!(
        "{id} is not a dead letter of {queue} (nothing changed; `ttr dead {queue}` lists them)"
    ))
}

/// How long from `from` to `to`, as "in 3m" or "3m ago".
fn relative(to: SystemTime, from: SystemTime) -> String {
    match to.duration_since(from) {
        Ok(ahead) => format!("in {}", human::duration(ahead)),
        Err(behind) => format!("{} ago", human::duration(behind.duration())),
    }
}

fn show_stats(name: &str, stats: &Stats) -> String {
    let n = stats.partitions.len();
    let now = stats.redis_time;
    let mut out = format!(
        "queue {name} ({n} partition{}), Redis time {}\n\n",
        if n == 1 { "" } else { "s" },
        human::utc(now)
    );
    let pending_note = if stats.due_now > 0 {
        format!(
            "{} due now, the oldest {} overdue",
            stats.due_now,
            human::duration(stats.overdue)
        )
    } else if let Some(due) = stats.earliest_due {
        format!("none due yet; next due {}", relative(due, now))
    } else {
        "none".to_owned()
    };
    let leased_note = match stats.earliest_lease_expiry {
        Some(expiry) if stats.expired_leases > 0 => format!(
            "{} expired lease(s), the oldest {}, not reclaimed yet (worker gone?)",
            stats.expired_leases,
            relative(expiry, now)
        ),
        Some(expiry) => format!("next lease runs out {}", relative(expiry, now)),
        None => String::new(),
    };
    let dead_note = match stats.latest_death {
        Some(death) => format!(
            "latest died {}; see `ttr dead {name}`",
            relative(death, now)
        ),
        None => String::new(),
    };
    let width = [stats.pending, stats.leased, stats.dead]
        .iter()
        .map(|v| v.to_string().len())
        .max()
        .unwrap_or(1);
    for (label, value, note) in [
        ("pending", stats.pending, pending_note),
        ("leased", stats.leased, leased_note),
        ("dead", stats.dead, dead_note),
    ] {
        let line = format!("{label:<8} {value:>width$}   {note}");
        out.push_str(line.trim_end());
        out.push('\n');
    }
    if n > 1 {
        out.push('\n');
        let mut rows = vec![[
            "partition".to_owned(),
            "pending".to_owned(),
            "due now".to_owned(),
            "most overdue".to_owned(),
            "leased".to_owned(),
            "expired".to_owned(),
            "dead".to_owned(),
        ]];
        for p in &stats.partitions {
            rows.push([
                format!("{name}#{}", p.partition.unwrap_or(0)),
                p.pending.to_string(),
                p.due_now.to_string(),
                if p.due_now > 0 {
                    human::duration(p.overdue)
                } else {
                    "-".to_owned()
                },
                p.leased.to_string(),
                p.expired_leases.to_string(),
                p.dead.to_string(),
            ]);
        }
        out.push_str(&table(&rows, &[false, true, true, true, true, true, true]));
    }
    if stats.pending + stats.leased + stats.dead == 0 && n == 1 {
        out.push_str(
            "\n(empty. If the queue's workers use --partitions N, pass the same N here.)\n",
        );
    }
    out
}

fn show_dead(name: &str, dead: &[DeadLetter], total: u64) -> String {
    if dead.is_empty() {
        return format!("no dead letters in {name}\n");
    }
    let mut rows = vec![[
        "id".to_owned(),
        "attempts".to_owned(),
        "died".to_owned(),
        "payload".to_owned(),
        "last error".to_owned(),
    ]];
    for d in dead {
        rows.push([
            d.id.to_string(),
            d.attempts.to_string(),
            format!("{} ago", human::duration(d.dead_for)),
            human::bytes(d.payload_len),
            d.last_error
                .as_deref()
                .unwrap_or("-")
                .replace(['\r', '\n'], " "),
        ]);
    }
    let mut out = table(&rows, &[false, true, true, true, false]);
    out.push_str(&format!(
        "\n{} of {total} dead letter(s) in {name}, newest first. \
         `ttr requeue {name} <id>|--all` retries, `ttr purge {name} <id>|--all` deletes.\n",
        dead.len()
    ));
    out
}

/// Rows as aligned columns, two spaces apart; `right[i]` aligns column
/// `i` to the right (numbers, durations). Trailing spaces are trimmed.
fn table<const N: usize>(rows: &[[String; N]], right: &[bool; N]) -> String {
    let mut widths = [0; N];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            let pad = widths[i] - cell.chars().count();
            if right[i] {
                line.extend(std::iter::repeat_n(' ', pad));
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Result<Args, String> {
        let words: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
        parse(&words, "redis://default/".to_owned()).map_err(|f| match f {
            Failure::Usage(m) | Failure::Runtime(m) => m,
        })
    }

    #[test]
    fn options_go_anywhere() {
        let a =
            args("stats orders --url redis://h:1/ --partitions=3 --cluster --timeout 0.5").unwrap();
        assert_eq!(a.url, "redis://h:1/");
        assert_eq!(a.partitions, 3);
        assert!(a.cluster);
        assert_eq!(a.timeout, Duration::from_millis(500));
        assert_eq!(
            a.command,
            Command::Stats {
                queue: "orders".into()
            }
        );
        let a = args("--limit 5 dead orders").unwrap();
        assert_eq!(a.url, "redis://default/");
        assert_eq!(
            a.command,
            Command::Dead {
                queue: "orders".into(),
                limit: 5
            }
        );
        assert_eq!(
            args("purge orders --all").unwrap().command,
            Command::Purge {
                queue: "orders".into(),
                target: Target::All
            }
        );
        assert_eq!(
            args("requeue orders order-17").unwrap().command,
            Command::Requeue {
                queue: "orders".into(),
                target: Target::One("order-17".into())
            }
        );
        assert_eq!(args("stats -h").unwrap().command, Command::Help);
    }

    #[test]
    fn bad_arguments_say_what_is_wrong() {
        let err = |line| args(line).unwrap_err();
        assert!(err("").contains("which command"));
        assert!(err("stats").contains("which queue"));
        assert!(err("frobnicate orders").contains("unknown command"));
        assert!(err("stats orders --frob").contains("unknown option --frob"));
        assert!(err("stats orders --partitions x").contains("whole number"));
        assert!(err("stats orders --partitions 0").contains("1 to 1024"));
        assert!(err("stats orders --timeout 0").contains("above 0"));
        assert!(err("stats orders --url").contains("needs a value"));
        assert!(err("requeue orders").contains("which job"));
        assert!(err("requeue orders a --all").contains("not both"));
        assert!(err("purge orders a b").contains("one id at a time"));
        assert!(err("stats orders extra").contains("unexpected"));
        assert!(err("stats orders --limit 3").contains("--limit is for"));
        assert!(err("dead orders --all").contains("--all is for"));
    }

    #[test]
    fn tables_align() {
        let rows = [
            ["id".to_owned(), "n".to_owned()],
            ["a".to_owned(), "100".to_owned()],
            ["long-id".to_owned(), "7".to_owned()],
        ];
        assert_eq!(
            table(&rows, &[false, true]),
            "id         n\na        100\nlong-id    7\n"
        );
    }
}
