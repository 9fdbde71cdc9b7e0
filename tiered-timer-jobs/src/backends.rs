//! Where backends are chosen: the one list of them ([`with_backends`]),
//! and [`AnyBackend`], the enum a queue handle holds, whose every method
//! makes one call of the [`Backend`] contract on the backend inside.
//!
//! This is the only file that names the backends, and the only place
//! their cargo features appear: the API above it calls [`AnyBackend`] and
//! never asks which backend it has. A third backend is a folder that
//! implements [`Backend`] (`src/postgres/`, say) and one line in the list
//! below: its feature, its variant and type, the URL schemes it opens.
//!
//! Dispatch is a `match` generated from the list (no trait objects: the
//! contract's `async fn`s need none, and each call's future stays one
//! concrete, `Send` type).

use std::time::Duration;

use crate::contract::{
    unsupported, AckAndClaim, Backend, Capabilities, Claimed, Failure, GaveUp, Lease, LeaseToken,
    NewJob, NewRecurrence, Settings,
};
use crate::data::error::Error;
use crate::data::history::Throughput;
use crate::data::id::JobId;
use crate::data::lateness::Lateness;
use crate::data::listing::{JobInfo, Listing, Page, QueueInfo};
use crate::data::recurrence::RecurrenceInfo;
use crate::data::repaired::Repaired;
use crate::data::stats::{DeadLetter, Stats};

/// The backends, one line each: `"name" Variant(type) = [URL schemes]
/// "how its URLs look" needs "what a URL names after the scheme" "an
/// example" has [the capabilities it has]` (the texts are for error
/// messages; see [`Capabilities`]; its name is also the cargo feature that
/// builds it). Passes the list to the macro `$then`, after `$args`.
macro_rules! with_backends {
    ($then:ident ! ($($args:tt)*)) => {
        $then! { $($args)* [
            "embedded" Embedded(crate::embedded::EmbeddedBackend) = ["file"] "file:///path/to/dir (an embedded store)" needs "the store's directory" "file:///var/lib/app/jobs" has [read_only, clock, recurrences],
            "redis" Redis(crate::redis::RedisBackend) = ["redis", "rediss", "redis+unix", "unix", "valkey", "valkeys", "valkey+unix"] "redis://, rediss://, redis+unix://, unix://, valkey://, valkeys:// or valkey+unix://" needs "the server's address" "redis://127.0.0.1:6379/ or redis+unix:///run/redis.sock" has [partitions, cluster, replicas, recurrences],
            "postgres" Postgres(crate::postgres::PostgresBackend) = ["postgres", "postgresql"] "postgres:// or postgresql://" needs "the server's address and database" "postgres://app@127.0.0.1:5432/app" has [recurrences],
        ] }
    };
}

/// The enum of the backends this build has, and every URL scheme of every
/// backend, built or not.
macro_rules! declare_backends {
    (() [ $( $feature:literal $variant:ident($ty:ty) = [$($scheme:literal),*] $shown:literal needs $needs:literal $example:literal has [$($has:ident),*], )* ]) => {
        /// The backend of a queue handle.
        pub(crate) enum AnyBackend {
            $( #[cfg(feature = $feature)] $variant($ty), )*
        }

        /// Every backend, built in this build or not.
        const LISTED: &[Listed] = &[ $(
            Listed {
                name: $feature,
                schemes: &[$($scheme),*],
                shown: $shown,
                needs: ($needs, $example),
                has: Capabilities { $($has: true,)* ..Capabilities::NONE },
            },
        )* ];

        impl AnyBackend {
            /// The backend's name (`"redis"`, `"embedded"`).
            pub(crate) fn name(&self) -> &'static str {
                match self {
                    $( #[cfg(feature = $feature)] AnyBackend::$variant(_) => $feature, )*
                }
            }
        }
    };
}
with_backends!(declare_backends!(()));

/// A backend as the list declares it, whether this build has it or not:
/// so a URL or setting of a backend this build lacks gets the answer it
/// gets in a build that has it, or says which feature builds it.
struct Listed {
    /// Its name, and the cargo feature that builds it.
    name: &'static str,
    /// The URL schemes it opens.
    schemes: &'static [&'static str],
    /// How its URLs look, for error messages.
    shown: &'static str,
    /// What its URLs name after the scheme, and an example.
    needs: (&'static str, &'static str),
    /// What it has beyond the common contract.
    has: Capabilities,
}

/// The backend that opens URLs of `scheme`.
fn listed(scheme: &str) -> Option<&'static Listed> {
    LISTED
        .iter()
        .find(|backend| backend.schemes.contains(&scheme))
}

/// `$call` on the backend inside `$any`, bound to `$b`.
macro_rules! dispatch {
    ($any:expr, $b:ident => $call:expr) => {
        with_backends!(dispatch_arms!(($any, $b, $call)))
    };
}
macro_rules! dispatch_arms {
    (($any:expr, $b:ident, $call:expr) [ $( $feature:literal $variant:ident($ty:ty) = [$($scheme:literal),*] $shown:literal needs $needs:literal $example:literal has [$($has:ident),*], )* ]) => {
        match $any {
            $( #[cfg(feature = $feature)] AnyBackend::$variant($b) => $call, )*
        }
    };
}

/// `$call` with `$B` the type of the backend that opens URL scheme
/// `$scheme` and `$wrap` its variant of [`AnyBackend`]; `$none` if no
/// backend of this build does.
macro_rules! by_scheme {
    ($scheme:expr, $B:ident, $wrap:ident => $call:expr, else $none:expr) => {
        with_backends!(by_scheme_arms!(($scheme, $B, $wrap, $call, $none)))
    };
}
macro_rules! by_scheme_arms {
    (($scheme:expr, $B:ident, $wrap:ident, $call:expr, $none:expr) [ $( $feature:literal $variant:ident($ty:ty) = [$($s:literal),*] $shown:literal needs $needs:literal $example:literal has [$($has:ident),*], )* ]) => {
        match $scheme {
            $(
                #[cfg(feature = $feature)]
                $($s)|* => {
                    type $B = $ty;
                    #[allow(unused_variables)]
                    let $wrap = AnyBackend::$variant;
                    $call
                }
            )*
            _ => $none,
        }
    };
}

/// The URLs a queue can be at, for error messages: every scheme of every
/// backend, built in this build or not.
fn accepted() -> String {
    let shown: Vec<&str> = LISTED.iter().map(|backend| backend.shown).collect();
    shown.join(", ")
}

/// The scheme of `url`, if it names a store of some backend, and that
/// backend's own check of the rest if this build has it (a backend this
/// build lacks is reported when a store is opened, naming its feature).
/// The URL itself is not repeated in errors: it may hold a password.
///
/// # Errors
///
/// [`Error::InvalidUrl`], saying which schemes are accepted.
pub(crate) fn check_url(url: &str) -> Result<&str, Error> {
    let invalid = |reason: String| Err(Error::InvalidUrl { reason });
    let Some((scheme, rest)) = url.split_once("://") else {
        return invalid(format!("not a URL; use {}", accepted()));
    };
    let looks_like_a_scheme = !scheme.is_empty()
        && scheme.len() <= 16
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !looks_like_a_scheme {
        return invalid(format!("not a URL; use {}", accepted()));
    }
    let Some(backend) = listed(scheme) else {
        return invalid(format!(
            "{scheme}:// is not a job store's scheme; use {}",
            accepted()
        ));
    };
    if rest.is_empty() {
        let (needs, example) = backend.needs;
        return invalid(format!(
            "{scheme}:// needs {needs} after it, as in {example}"
        ));
    }
    by_scheme!(scheme, B, _wrap => B::check_url(url).map(|()| scheme), else Ok(scheme))
}

/// The error for a URL whose backend this build lacks.
fn not_built(scheme: &str) -> Error {
    let feature = listed(scheme).map_or("?", |backend| backend.name);
    Error::InvalidUrl {
        reason: format!("{scheme}:// URLs need the crate's `{feature}` feature"),
    }
}

/// The scheme of `url` and its backend, as [`check_url`].
fn check_backend(url: &str) -> Result<(&str, &'static Listed), Error> {
    let scheme = check_url(url)?;
    let backend = listed(scheme).expect("check_url knows the scheme");
    Ok((scheme, backend))
}

impl AnyBackend {
    /// Opens the queue of `settings` on the backend its URL names, once
    /// the backend is known to have every setting asked for.
    pub(crate) async fn open(settings: &Settings) -> Result<AnyBackend, Error> {
        let (scheme, backend) = check_backend(&settings.url)?;
        backend.has.check(settings, backend.name)?;
        by_scheme!(scheme, B, wrap => B::open(settings).await.map(wrap),
            else Err(not_built(scheme)))
    }

    /// The queues of the store at `url` (see [`crate::find_queues`]).
    pub(crate) async fn find_queues(
        url: &str,
        cluster: bool,
        timeout: Duration,
    ) -> Result<Vec<QueueInfo>, Error> {
        let (scheme, backend) = check_backend(url)?;
        if cluster && !backend.has.cluster {
            return Err(unsupported("cluster", backend.name));
        }
        by_scheme!(scheme, B, _wrap => B::find_queues(url, cluster, timeout).await,
            else Err(not_built(scheme)))
    }

    /// Repairs a queue's log (see [`crate::repair`]).
    pub(crate) async fn repair(url: &str, queue: &str) -> Result<Repaired, Error> {
        let scheme = check_url(url)?;
        by_scheme!(scheme, B, _wrap => B::repair(url, queue).await, else Err(not_built(scheme)))
    }

    pub(crate) fn partitions(&self) -> u32 {
        dispatch!(self, b => b.partitions())
    }

    pub(crate) async fn schedule(&self, job: NewJob) -> Result<(), Error> {
        dispatch!(self, b => b.schedule(job).await)
    }

    pub(crate) async fn schedule_many(&self, jobs: Vec<NewJob>) -> Result<usize, Error> {
        dispatch!(self, b => b.schedule_many(jobs).await)
    }

    pub(crate) async fn cancel(&self, id: &JobId) -> Result<bool, Error> {
        dispatch!(self, b => b.cancel(id).await)
    }

    pub(crate) async fn claim(&self, max: usize) -> Result<Vec<Claimed>, Error> {
        dispatch!(self, b => b.claim(max).await)
    }

    pub(crate) fn take_claimed(&self) -> Option<Claimed> {
        dispatch!(self, b => b.take_claimed())
    }

    pub(crate) fn give_back(&self, jobs: Vec<Claimed>) {
        dispatch!(self, b => b.give_back(jobs))
    }

    pub(crate) async fn ack_and_claim(&self, lease: Lease<'_>) -> Result<AckAndClaim, Error> {
        dispatch!(self, b => b.ack_and_claim(lease).await)
    }

    pub(crate) fn close(&self) -> Vec<Claimed> {
        dispatch!(self, b => b.close())
    }

    pub(crate) async fn ack(&self, lease: Lease<'_>) -> Result<bool, Error> {
        dispatch!(self, b => b.ack(lease).await)
    }

    pub(crate) async fn ack_many(
        &self,
        partition: u32,
        leases: &[(JobId, LeaseToken)],
    ) -> Result<Vec<JobId>, Error> {
        dispatch!(self, b => b.ack_many(partition, leases).await)
    }

    pub(crate) async fn retry(&self, lease: Lease<'_>, delay_ms: u64) -> Result<GaveUp, Error> {
        dispatch!(self, b => b.retry(lease, delay_ms).await)
    }

    pub(crate) async fn fail(
        &self,
        lease: Lease<'_>,
        failure: Failure,
        reason: &str,
    ) -> Result<GaveUp, Error> {
        dispatch!(self, b => b.fail(lease, failure, reason).await)
    }

    pub(crate) async fn extend(&self, lease: Lease<'_>, lease_ms: u64) -> Result<bool, Error> {
        dispatch!(self, b => b.extend(lease, lease_ms).await)
    }

    pub(crate) async fn release(&self, lease: Lease<'_>) -> Result<bool, Error> {
        dispatch!(self, b => b.release(lease).await)
    }

    pub(crate) async fn pending(&self) -> Result<u64, Error> {
        dispatch!(self, b => b.pending().await)
    }

    pub(crate) async fn leased(&self) -> Result<u64, Error> {
        dispatch!(self, b => b.leased().await)
    }

    pub(crate) async fn stats(&self) -> Result<Stats, Error> {
        dispatch!(self, b => b.stats().await)
    }

    pub(crate) async fn lateness(&self) -> Result<Lateness, Error> {
        dispatch!(self, b => b.lateness().await)
    }

    pub(crate) async fn throughput(&self, since_ms: u64) -> Result<Throughput, Error> {
        dispatch!(self, b => b.throughput(since_ms).await)
    }

    pub(crate) async fn dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>, Error> {
        dispatch!(self, b => b.dead_letters(limit).await)
    }

    pub(crate) async fn requeue(&self, id: &JobId) -> Result<bool, Error> {
        dispatch!(self, b => b.requeue(id).await)
    }

    pub(crate) async fn requeue_all(&self) -> Result<u64, Error> {
        dispatch!(self, b => b.requeue_all().await)
    }

    pub(crate) async fn purge(&self, id: &JobId) -> Result<bool, Error> {
        dispatch!(self, b => b.purge(id).await)
    }

    pub(crate) async fn purge_all(&self) -> Result<u64, Error> {
        dispatch!(self, b => b.purge_all().await)
    }

    pub(crate) async fn job(&self, id: &JobId) -> Result<Option<JobInfo>, Error> {
        dispatch!(self, b => b.job(id).await)
    }

    pub(crate) async fn list(
        &self,
        listing: Listing,
        offset: usize,
        limit: usize,
    ) -> Result<Page, Error> {
        dispatch!(self, b => b.list(listing, offset, limit).await)
    }

    pub(crate) async fn promote(&self, id: &JobId) -> Result<bool, Error> {
        dispatch!(self, b => b.promote(id).await)
    }

    /// Refuses the recurrence calls on a backend whose line lacks
    /// `recurrences`.
    fn has_recurrences(&self) -> Result<(), Error> {
        let name = self.name();
        let listed = LISTED.iter().find(|b| b.name == name);
        match listed {
            Some(backend) if backend.has.recurrences => Ok(()),
            _ => Err(unsupported("recurrences", name)),
        }
    }

    pub(crate) async fn recur(&self, recurrence: NewRecurrence) -> Result<bool, Error> {
        self.has_recurrences()?;
        dispatch!(self, b => b.recur(recurrence).await)
    }

    pub(crate) async fn unrecur(&self, name: &str) -> Result<bool, Error> {
        self.has_recurrences()?;
        dispatch!(self, b => b.unrecur(name).await)
    }

    pub(crate) async fn pause_recurrence(&self, name: &str, paused: bool) -> Result<bool, Error> {
        self.has_recurrences()?;
        dispatch!(self, b => b.pause_recurrence(name, paused).await)
    }

    pub(crate) async fn recurrences(&self) -> Result<Vec<RecurrenceInfo>, Error> {
        self.has_recurrences()?;
        dispatch!(self, b => b.recurrences().await)
    }
}

/// The calls in the caller's own transaction: Postgres' alone (the
/// others answer [`Error::Unsupported`] for `within`).
#[cfg(feature = "postgres")]
impl AnyBackend {
    /// The Postgres backend inside, or the error for the others.
    fn postgres(&self) -> Result<&crate::postgres::PostgresBackend, Error> {
        match self {
            AnyBackend::Postgres(b) => Ok(b),
            #[allow(unreachable_patterns)]
            other => Err(unsupported("within", other.name())),
        }
    }

    pub(crate) async fn schedule_in<'c, E: sqlx::PgExecutor<'c>>(
        &self,
        executor: E,
        job: NewJob,
    ) -> Result<(), Error> {
        self.postgres()?.schedule_in(executor, job).await
    }

    pub(crate) async fn cancel_in<'c, E: sqlx::PgExecutor<'c>>(
        &self,
        executor: E,
        id: &JobId,
    ) -> Result<bool, Error> {
        self.postgres()?.cancel_in(executor, id).await
    }

    pub(crate) async fn ack_in<'c, E: sqlx::PgExecutor<'c>>(
        &self,
        executor: E,
        lease: Lease<'_>,
    ) -> Result<bool, Error> {
        self.postgres()?.ack_in(executor, lease).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_by_scheme_without_repeating_them() {
        for good in [
            "file:///var/lib/jobs",
            "file://rel/dir",
            "redis://127.0.0.1:6379/",
            "rediss://h/",
            "redis+unix:///run/redis.sock",
            "unix:///run/redis.sock",
            "valkey://h/",
        ] {
            assert!(check_url(good).is_ok(), "{good}");
        }
        // Which directory a file:// URL names is the embedded backend's to
        // check: a build without it says so when a store is opened.
        let localhost_only = if cfg!(feature = "embedded") {
            "file:// needs the store's directory"
        } else {
            "file:// URLs need the crate's `embedded` feature"
        };
        for (bad, says) in [
            (
                "http://user:secret@localhost/",
                "http:// is not a job store's scheme; use file:///",
            ),
            ("file://", "file:// needs the store's directory"),
            ("file://localhost/", localhost_only),
            ("not a url", "not a URL; use file:///"),
            ("\x1b[2J://x", "not a URL"),
        ] {
            let error = match check_url(bad) {
                Ok(scheme) => not_built(scheme),
                Err(error) => error,
            }
            .to_string();
            assert!(error.contains(says), "{bad}: {error}");
            assert!(
                error.contains("redis://") || bad.starts_with("file"),
                "{error}"
            );
            assert!(!error.contains("secret"), "{error}");
        }
    }
}
