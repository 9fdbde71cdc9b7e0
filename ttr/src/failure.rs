//! What went wrong, for people: each of the library's typed errors as a
//! sentence in `ttr`'s words (its flags, never the library's builder
//! calls), the exit status that goes with it, and, with `--json`, the same
//! as one JSON object on stderr.
//!
//! Ground rules:
//!
//! * Exit status 2 is bad usage (the command line, or a flag the store
//!   does not have), 1 anything about the world (the store cannot be
//!   reached, the queue or the job is not there, the operator said no), 0
//!   done.
//! * A URL is shown without its credentials ([`shown_url`]), and every name
//!   that came from the user through [`safe`].
//! * With `--json`, an error is `{"error": {"kind", "message", "status"}}`
//!   on stderr, so that stdout holds only documents; `kind` is one of the
//!   words below, for scripts to tell failures apart without parsing
//!   sentences.

use std::process::ExitCode;

use serde_json::json;
use tiered_timer_jobs::Error;

use crate::human;
use crate::text::{redacted, safe};

/// What went wrong, and the exit status that says so.
#[derive(Debug)]
pub(crate) enum Failure {
    /// Bad arguments: status 2, kind `usage`.
    Usage(String),
    /// Something in the world: status 1, kind `failed`.
    Runtime(String),
    /// Something in the world that scripts may want to tell apart: status
    /// 1, with its own kind (`no_such_queue`, `unreachable`, ...).
    Known {
        /// The `--json` error's `kind`.
        kind: &'static str,
        /// The sentence for people.
        message: String,
    },
}

impl Failure {
    pub(crate) fn known(kind: &'static str, message: impl Into<String>) -> Failure {
        Failure::Known {
            kind,
            message: message.into(),
        }
    }

    fn status(&self) -> u8 {
        match self {
            Failure::Usage(_) => 2,
            Failure::Runtime(_) | Failure::Known { .. } => 1,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Failure::Usage(_) => "usage",
            Failure::Runtime(_) => "failed",
            Failure::Known { kind, .. } => kind,
        }
    }

    fn message(&self) -> &str {
        match self {
            Failure::Usage(message) | Failure::Runtime(message) => message,
            Failure::Known { message, .. } => message,
        }
    }

    /// Prints the failure on stderr (text, or one JSON object) and returns
    /// its exit status.
    pub(crate) fn report(&self, json: bool) -> ExitCode {
        if json {
            eprintln!("{}", self.json());
        } else if matches!(self, Failure::Usage(_)) {
            eprintln!("ttr: {}\nRun `ttr --help` for usage.", self.message());
        } else {
            eprintln!("ttr: {}", self.message());
        }
        ExitCode::from(self.status())
    }

    fn json(&self) -> serde_json::Value {
        json!({"error": {"kind": self.kind(), "message": self.message(), "status": self.status()}})
    }
}

/// A command-line error from clap (not `--help` or `--version`) as a
/// usage failure, for `--json`: clap's own text, without its `error: `.
pub(crate) fn from_clap(error: &clap::Error) -> Failure {
    let text = error.render().to_string();
    let text = text.trim().strip_prefix("error: ").unwrap_or(text.trim());
    Failure::Usage(text.to_owned())
}

/// `url` for a terminal: without the credentials it may hold, and
/// [`safe`].
pub(crate) fn shown_url(url: &str) -> String {
    safe(&redacted(url))
}

/// Whether `url` names an embedded store.
fn is_store(url: &str) -> bool {
    url.starts_with("file://")
}

/// Whether `url` names a Postgres.
pub(crate) fn is_postgres(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// The library's error, in `ttr`'s words.
pub(crate) fn failure(url: &str, error: Error) -> Failure {
    let at = shown_url(url);
    match error {
        Error::InvalidUrl { reason } => Failure::Usage(format!("invalid --url: {reason}")),
        Error::InvalidQueueName { .. }
        | Error::InvalidJobId { .. }
        | Error::InvalidConfig { .. }
        | Error::InvalidArgument { .. } => Failure::Usage(error.to_string()),
        Error::Unsupported { setting, .. } if is_postgres(url) => Failure::Usage(format!(
            "--{setting} is for Redis: a Postgres store has no {setting}"
        )),
        Error::Unsupported { setting, .. } => Failure::Usage(format!(
            "--{setting} is for Redis: a file:// store has no {setting}"
        )),
        Error::NoSuchQueue { queue } => Failure::known(
            "no_such_queue",
            format!(
                "no queue named {} at {at} (`ttr queues` lists the queues there)",
                safe(&queue)
            ),
        ),
        Error::PartitionMismatch {
            queue,
            recorded,
            configured,
        } => Failure::known(
            "partition_mismatch",
            format!(
                "queue {} has {recorded} partition(s), not {configured}: pass --partitions \
                 {recorded}, or leave --partitions out",
                safe(&queue)
            ),
        ),
        Error::Timeout { after } if is_postgres(url) => Failure::known(
            "unreachable",
            format!(
                "cannot reach Postgres at {at}: no answer within {}",
                human::duration(after)
            ),
        ),
        Error::Postgres(error) if is_unreachable_postgres(&error) => Failure::known(
            "unreachable",
            format!("cannot reach Postgres at {at}: {error}"),
        ),
        Error::Postgres(error) => Failure::known(
            "postgres",
            format!("Postgres at {at} answered with an error: {error}"),
        ),
        Error::Timeout { after } => Failure::known(
            "unreachable",
            format!(
                "cannot reach Redis at {at}: no answer within {}",
                human::duration(after)
            ),
        ),
        Error::NotRedis(_) => Failure::known(
            "not_redis",
            format!(
                "the server at {at} does not speak the Redis protocol: is another server (HTTP?) \
                 on that port, or does it want TLS (rediss://)?"
            ),
        ),
        Error::Redis(error) if is_unreachable(&error) => Failure::known(
            "unreachable",
            format!("cannot reach Redis at {at}: {error}"),
        ),
        Error::Redis(error) => Failure::known(
            "redis",
            format!("Redis at {at} answered with an error: {error}"),
        ),
        Error::Locked { path } => Failure::known(
            "locked",
            format!(
                "the job store at {} is open in another process: a store belongs to one \
                 process at a time, so look at it while its service is stopped",
                safe(&path.display().to_string())
            ),
        ),
        error if is_store(url) => Failure::known(
            "store",
            format!("cannot use the job store at {at}: {error}"),
        ),
        error => Failure::Runtime(format!("Redis at {at}: {error}")),
    }
}

/// Whether a Redis error means the server was not reached (as opposed to
/// an error reply from it).
fn is_unreachable(error: &redis::RedisError) -> bool {
    error.is_connection_refusal()
        || error.is_io_error()
        || error.is_connection_dropped()
        || error.is_timeout()
}

/// Whether a Postgres error means the server was not reached.
fn is_unreachable_postgres(error: &tiered_timer_jobs::sqlx::Error) -> bool {
    matches!(
        error,
        tiered_timer_jobs::sqlx::Error::Io(_) | tiered_timer_jobs::sqlx::Error::PoolTimedOut
    )
}

/// The schemes `--url` takes, for messages.
const ACCEPTED: &str = "file:///path/to/dir (an embedded store), redis://, rediss://, \
                        redis+unix://, unix://, postgres:// or postgresql://";

/// Checks `--url` before anything connects: a scheme that names a store,
/// and `file://` with a directory. The URL is not repeated (it may hold a
/// password).
pub(crate) fn check_url(url: &str) -> Result<(), Failure> {
    let invalid = |why: String| Err(Failure::Usage(format!("invalid --url: {why}")));
    match url.split_once("://") {
        Some(("file", "" | "localhost" | "localhost/")) => invalid(
            "file:// needs the store's directory after it, as in file:///var/lib/app/jobs"
                .to_owned(),
        ),
        Some((
            "file" | "redis" | "rediss" | "redis+unix" | "unix" | "valkey" | "valkeys"
            | "valkey+unix" | "postgres" | "postgresql",
            _,
        )) => Ok(()),
        Some((scheme, _))
            if !scheme.is_empty()
                && scheme.len() <= 16
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')) =>
        {
            invalid(format!("{scheme}:// is not a job store; use {ACCEPTED}"))
        }
        _ => invalid(format!("not a URL; use {ACCEPTED}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_not_shown() {
        assert_eq!(
            shown_url("redis://:hunter2@127.0.0.1:6379/"),
            "redis://***@127.0.0.1:6379/"
        );
        assert_eq!(shown_url("redis://ops:hunter2@h/0"), "redis://***@h/0");
        assert_eq!(shown_url("redis://h/\x1b[2J"), "redis://h/\\e[2J");
        assert_eq!(shown_url("redis://h:6379/"), "redis://h:6379/");
        assert_eq!(shown_url("file:///var/jobs"), "file:///var/jobs");
    }

    #[test]
    fn urls_are_checked_by_scheme() {
        for good in ["file:///x", "redis://h/", "rediss://h/", "redis+unix:///s"] {
            assert!(check_url(good).is_ok(), "{good}");
        }
        for (bad, says) in [
            (
                "http://u:hunter2@localhost/",
                "http:// is not a job store; use file:///",
            ),
            ("file://", "needs the store's directory"),
            ("localhost:6379", "not a URL; use file:///"),
        ] {
            let Err(Failure::Usage(message)) = check_url(bad) else {
                panic!("{bad} was accepted");
            };
            assert!(message.contains(says), "{message}");
            assert!(!message.contains("hunter2"), "{message}");
        }
    }

    #[test]
    fn json_errors_name_their_kind_and_status() {
        let failure = Failure::known("no_such_queue", "no queue named x");
        assert_eq!(
            failure.json(),
            json!({"error": {"kind": "no_such_queue", "message": "no queue named x", "status": 1}})
        );
        assert_eq!(Failure::Usage("bad".into()).json()["error"]["status"], 2);
    }
}
