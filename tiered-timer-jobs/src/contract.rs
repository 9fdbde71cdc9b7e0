//! The backend contract: the one trait every backend implements
//! ([`Backend`]), and the backend-neutral values it speaks.
//!
//! # Design
//!
//! The API (`src/api/`) checks every input once, then makes one call of
//! this trait; a backend (`src/redis/`, `src/embedded/`) receives plain
//! settings ([`Settings`]) and checked values ([`Due`] in whole
//! milliseconds, a [`LeaseToken`], ids that passed the id check) and
//! answers with the crate's data types (`src/data/`): never the API's
//! handle, never a reply shaped for another backend. So both backends give
//! the same answer to the same bad input (they never see it), and the
//! compiler checks that each implements every call with the same
//! signature.
//!
//! Which backend a queue is on is decided in one place, `src/backends.rs`,
//! by the URL's scheme; that file is also the only one that names the
//! backends and their features. A new backend is a folder that implements
//! this trait, and one line there.
//!
//! What a backend cannot do is said in one place each: a setting it lacks
//! by the [`Capabilities`] its line in `src/backends.rs` declares, refused
//! by [`Capabilities::check`] before it opens ([`Error::Unsupported`], in
//! the same words for every setting and backend, and in a build without
//! that backend too); a call it lacks by the trait's provided method,
//! which answers for every backend that does not override it
//! ([`Backend::repair`]).
//!
//! The trait sits below the backends in the import graph (they implement
//! it), and the list that chooses among them above: so the backends import
//! nothing from the API, and the API nothing from a backend (see
//! CONTRIBUTING.md, "Architecture of the jobs crate").

use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::data::clock::Clock;
use crate::data::error::Error;
use crate::data::history::Throughput;
use crate::data::id::JobId;
use crate::data::lateness::Lateness;
use crate::data::limits::{millis_up, MAX_DEADLINE_MS, MAX_SPAN_MS};
use crate::data::listing::{JobInfo, Listing, Page, QueueInfo};
use crate::data::recurrence::{Recurrence, RecurrenceInfo};
use crate::data::repaired::Repaired;
use crate::data::stats::{DeadLetter, Stats};

/// A queue handle's settings, as [`Builder`](crate::Builder) collects them
/// and checks them before a backend opens the queue.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) url: String,
    pub(crate) name: String,
    pub(crate) lease: Duration,
    pub(crate) max_attempts: u32,
    pub(crate) max_payload: usize,
    pub(crate) command_timeout: Duration,
    pub(crate) health_check: Duration,
    pub(crate) replicas: u32,
    pub(crate) replica_timeout: Duration,
    pub(crate) prefetch: usize,
    pub(crate) register: bool,
    pub(crate) read_only: bool,
    /// `None`: the count recorded for the queue (1 for a new one).
    pub(crate) partitions: Option<u32>,
    pub(crate) cluster: bool,
    /// The wall clock a store decides by ([`Clock::system`] unless a test
    /// gave a manual one).
    pub(crate) clock: Clock,
    /// Who this handle's claims are recorded as held by (checked).
    pub(crate) holder: String,
}

impl Settings {
    /// The lease a claim grants, in whole milliseconds (rounded up).
    pub(crate) fn lease_ms(&self) -> u64 {
        millis_up(self.lease)
    }
}

/// What a backend has beyond the common contract, as its line in
/// `src/backends.rs` declares it. A setting it lacks is
/// [`Error::Unsupported`], from [`Capabilities::check`] or
/// [`unsupported`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Capabilities {
    /// More than one partition ([`Builder::partitions`](crate::Builder::partitions)).
    pub(crate) partitions: bool,
    /// A cluster of nodes ([`Builder::cluster`](crate::Builder::cluster),
    /// [`find_queues`](crate::find_queues)' `cluster`).
    pub(crate) cluster: bool,
    /// Writes that wait for replicas ([`Builder::replicas`](crate::Builder::replicas)).
    pub(crate) replicas: bool,
    /// Handles that only look ([`Builder::read_only`](crate::Builder::read_only)).
    pub(crate) read_only: bool,
    /// A wall clock a test moves ([`Builder::clock`](crate::Builder::clock)).
    pub(crate) clock: bool,
    /// Recurring jobs ([`Queue::recur`](crate::Queue::recur) and the
    /// calls after it).
    pub(crate) recurrences: bool,
}

impl Capabilities {
    /// Nothing beyond the common contract.
    pub(crate) const NONE: Capabilities = Capabilities {
        partitions: false,
        cluster: false,
        replicas: false,
        read_only: false,
        clock: false,
        recurrences: false,
    };

    /// Refuses the settings `backend` does not have, where they would
    /// change what the queue promises. (Settings that only tune a backend,
    /// such as the command timeout, are accepted and ignored by the
    /// others.)
    pub(crate) fn check(self, settings: &Settings, backend: &'static str) -> Result<(), Error> {
        let lacks = [
            (
                "partitions",
                settings.partitions.is_some_and(|n| n != 1) && !self.partitions,
            ),
            ("cluster", settings.cluster && !self.cluster),
            ("replicas", settings.replicas > 0 && !self.replicas),
            ("read_only", settings.read_only && !self.read_only),
            ("clock", settings.clock.is_manual() && !self.clock),
        ];
        match lacks.into_iter().find(|&(_, lacking)| lacking) {
            Some((setting, _)) => Err(unsupported(setting, backend)),
            None => Ok(()),
        }
    }
}

/// The one way to say that `backend` has no `setting` (or call).
pub(crate) fn unsupported(setting: &'static str, backend: &'static str) -> Error {
    Error::Unsupported { setting, backend }
}

/// When a checked job is due: a delay counted from the deciding clock's
/// now, or a time on that clock, in whole milliseconds (rounded up, so
/// never early), within the limits every backend keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Due {
    /// This many ms after the backend's now.
    After(u64),
    /// At this many ms since the Unix epoch.
    At(u64),
}

impl Due {
    /// A delay, if it is at most 2^51 ms.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidDeadline`] beyond that.
    pub(crate) fn after(delay: Duration) -> Result<Due, Error> {
        Ok(Due::After(delay_ms(delay)?))
    }

    /// A time, if it is between the Unix epoch and 2^52 ms after it.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidDeadline`] otherwise.
    pub(crate) fn at(at: SystemTime) -> Result<Due, Error> {
        let ms = at
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(millis_up)
            .map_err(|_| Error::InvalidDeadline)?;
        if ms > MAX_DEADLINE_MS {
            return Err(Error::InvalidDeadline);
        }
        Ok(Due::At(ms))
    }

    /// Whether this counts from the backend's now.
    pub(crate) fn is_delay(self) -> bool {
        matches!(self, Due::After(_))
    }

    /// The delay or the time, in ms.
    pub(crate) fn ms(self) -> u64 {
        match self {
            Due::After(ms) | Due::At(ms) => ms,
        }
    }
}

/// A delay (a retry's, a schedule's) in whole ms, if at most 2^51 ms: it
/// is added to the clock's now and must stay below 2^52 ms.
///
/// # Errors
///
/// [`Error::InvalidDeadline`] beyond that.
pub(crate) fn delay_ms(delay: Duration) -> Result<u64, Error> {
    let ms = millis_up(delay);
    if ms > MAX_SPAN_MS {
        return Err(Error::InvalidDeadline);
    }
    Ok(ms)
}

/// A job to schedule, checked.
#[derive(Debug, Clone)]
pub(crate) struct NewJob {
    pub(crate) id: JobId,
    pub(crate) due: Due,
    pub(crate) payload: Vec<u8>,
}

/// A recurrence to register, checked: its name passed the name check,
/// its policy [`Recurrence::check`], its payload the queue's limit.
#[derive(Debug, Clone)]
pub(crate) struct NewRecurrence {
    pub(crate) name: String,
    pub(crate) recurrence: Recurrence,
    pub(crate) payload: Vec<u8>,
}

/// A lease's fencing token, as the backend that granted the lease wrote
/// it: every call under the lease is checked against it, so a delivery
/// that lost its lease changes nothing. Each backend reads the kind it
/// writes; the other kind holds no lease there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LeaseToken {
    /// A number (the embedded store's; 0 holds no lease).
    Number(u64),
    /// Text (Redis': a handle's random prefix, a claim counter and the
    /// job's place in its claim).
    // A build with one backend never makes the other kind.
    #[allow(dead_code)]
    Text(String),
}

impl LeaseToken {
    /// A token that holds no lease anywhere (what a finished job keeps).
    pub(crate) const NONE: LeaseToken = LeaseToken::Number(0);
}

/// The lease a call is made under: the job and its delivery's token.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lease<'a> {
    pub(crate) partition: u32,
    pub(crate) id: &'a JobId,
    pub(crate) token: &'a LeaseToken,
}

/// A job claimed by a backend, not yet handed to a worker.
#[derive(Debug)]
pub(crate) struct Claimed {
    pub(crate) partition: u32,
    pub(crate) id: JobId,
    pub(crate) payload: Vec<u8>,
    pub(crate) deadline_ms: u64,
    pub(crate) attempt: u32,
    pub(crate) token: LeaseToken,
    pub(crate) lease: Duration,
    /// When the claim was sent: the lease started no earlier.
    pub(crate) sent: Instant,
    /// Taken back from a lease that ran out (a redelivery).
    pub(crate) expired: bool,
    /// The deciding clock's now at the claim (ms).
    pub(crate) claimed_ms: u64,
}

/// What an ack sent with the next claim did.
#[derive(Debug)]
pub(crate) struct AckAndClaim {
    /// Whether the lease still held the job (it is gone now).
    pub(crate) acked: bool,
    /// Whether the ack reached the replicas asked for (it is done either
    /// way).
    pub(crate) replicated: Result<(), Error>,
    /// What the claim took (none if the ack lost its lease).
    pub(crate) jobs: Vec<Claimed>,
}

/// How a job given up on a failed attempt goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// Delivered again this many ms from now (or dead, on its last
    /// attempt).
    Retry(u64),
    /// Dead at once.
    Bury,
}

/// What became of a job given back under its lease with a retry or a
/// failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GaveUp {
    /// The lease was lost: nothing changed.
    Lost,
    /// Waiting again, for its next attempt.
    Rescheduled,
    /// Dead.
    Buried,
}

/// A store of durable delayed jobs: every call a queue handle makes on its
/// backend. Inputs are checked by the caller; ids passed the id check,
/// dues and delays are within the limits, pages within theirs.
///
/// Each change is atomic and durable by the backend's rules (one Lua
/// script; one fsync'd record frame) before its call returns `Ok`, claims
/// excepted where the backend says so.
pub(crate) trait Backend: Sized + Send + Sync + 'static {
    // A store, before any queue.

    /// Checks the rest of a URL of one of this backend's schemes, before
    /// anything is opened (the URL is not repeated: it may hold a
    /// password).
    fn check_url(_url: &str) -> Result<(), Error> {
        Ok(())
    }

    /// Opens (or creates, with `register`) the queue `settings.name`.
    async fn open(settings: &Settings) -> Result<Self, Error>;

    /// The queues of the store at `url` (`cluster` only if the backend
    /// has clusters; `timeout` bounds each command, if it sends any).
    async fn find_queues(
        url: &str,
        cluster: bool,
        timeout: Duration,
    ) -> Result<Vec<QueueInfo>, Error>;

    /// Repairs the end of a queue's log, for a backend that keeps one;
    /// the others' URLs are not a repair's ([`Error::InvalidUrl`]).
    async fn repair(_url: &str, _queue: &str) -> Result<Repaired, Error> {
        Err(Error::InvalidUrl {
            reason: "repair is for stores that keep a log (file:// URLs)".to_owned(),
        })
    }

    // Scheduling.

    /// How many partitions the queue has.
    fn partitions(&self) -> u32;

    /// Schedules one job unless its id is waiting or leased.
    async fn schedule(&self, job: NewJob) -> Result<(), Error>;

    /// Schedules checked jobs whose dues are all delays or all times,
    /// every delay counted from one now, in chunks each all or nothing;
    /// returns how many were new.
    async fn schedule_many(&self, jobs: Vec<NewJob>) -> Result<usize, Error>;

    /// Cancels a waiting job; `true` if it was waiting.
    async fn cancel(&self, id: &JobId) -> Result<bool, Error>;

    // Claims.

    /// Waits until a job is due, then claims between one and `max`.
    async fn claim(&self, max: usize) -> Result<Vec<Claimed>, Error>;

    /// A job claimed earlier for this handle and not handed out yet.
    fn take_claimed(&self) -> Option<Claimed>;

    /// Jobs claimed for a caller that cannot take them: for the next
    /// claims of this handle.
    fn give_back(&self, jobs: Vec<Claimed>);

    /// Acks `lease` and claims the next job in the same step if the
    /// backend can; the claim may take nothing (the caller then claims as
    /// [`claim`](Backend::claim) does).
    async fn ack_and_claim(&self, lease: Lease<'_>) -> Result<AckAndClaim, Error>;

    /// Stops handing out jobs on this handle: waiting claims fail with
    /// [`Error::Closed`]; returns the jobs claimed and not handed out (for
    /// the caller to hand back).
    fn close(&self) -> Vec<Claimed>;

    // Calls under a lease.

    /// Removes the job if `lease` still holds it.
    async fn ack(&self, lease: Lease<'_>) -> Result<bool, Error>;

    /// Acks many jobs of one partition (at most
    /// [`CHUNK_JOBS`](crate::data::limits::CHUNK_JOBS)); returns the ids
    /// whose lease was lost.
    async fn ack_many(
        &self,
        partition: u32,
        leases: &[(JobId, LeaseToken)],
    ) -> Result<Vec<JobId>, Error>;

    /// Delivers the job again `delay_ms` from now (dead on its last
    /// attempt).
    async fn retry(&self, lease: Lease<'_>, delay_ms: u64) -> Result<GaveUp, Error>;

    /// Gives up on an attempt with a reason.
    async fn fail(&self, lease: Lease<'_>, failure: Failure, reason: &str)
        -> Result<GaveUp, Error>;

    /// Renews the lease for `lease_ms` from now; `false` if it was lost.
    async fn extend(&self, lease: Lease<'_>, lease_ms: u64) -> Result<bool, Error>;

    /// Hands the job back, due now, the attempt not counted; `false` if
    /// the lease was lost.
    async fn release(&self, lease: Lease<'_>) -> Result<bool, Error>;

    // Looks and the operator's changes.

    /// How many jobs are waiting.
    async fn pending(&self) -> Result<u64, Error>;

    /// How many jobs are leased.
    async fn leased(&self) -> Result<u64, Error>;

    /// The queue's numbers.
    async fn stats(&self) -> Result<Stats, Error>;

    /// How late claims were.
    async fn lateness(&self) -> Result<Lateness, Error>;

    /// Jobs processed and failed per minute, from the minute holding
    /// `since_ms` (or the oldest kept) to now.
    async fn throughput(&self, since_ms: u64) -> Result<Throughput, Error>;

    /// Up to `limit` (at least 1) dead letters, newest death first.
    async fn dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>, Error>;

    /// Moves a dead letter back to the waiting jobs.
    async fn requeue(&self, id: &JobId) -> Result<bool, Error>;

    /// Moves every dead letter back; returns how many.
    async fn requeue_all(&self) -> Result<u64, Error>;

    /// Deletes a dead letter.
    async fn purge(&self, id: &JobId) -> Result<bool, Error>;

    /// Deletes every dead letter; returns how many.
    async fn purge_all(&self) -> Result<u64, Error>;

    /// Everything stored about one job.
    async fn job(&self, id: &JobId) -> Result<Option<JobInfo>, Error>;

    /// A page of a listing (`limit` within [`MAX_PAGE`](crate::MAX_PAGE),
    /// the page's end within what the queue's partitions allow).
    async fn list(&self, listing: Listing, offset: usize, limit: usize) -> Result<Page, Error>;

    /// Makes a waiting job due now.
    async fn promote(&self, id: &JobId) -> Result<bool, Error>;

    // Recurrences (`src/data/recurrence.rs`): a backend that has them says
    // so in its `Capabilities` (`recurrences`), and keeps, per
    // recurrence, one waiting occurrence whose claim schedules the next
    // in the same atomic step. The provided bodies answer for a backend
    // without them (never reached: its capabilities refuse first).

    /// Registers a recurrence, or replaces one of that name with another
    /// spec, policy or payload (its waiting occurrence with it); `true`
    /// if anything changed.
    async fn recur(&self, _recurrence: NewRecurrence) -> Result<bool, Error> {
        Err(unsupported("recurrences", "this"))
    }

    /// Removes a recurrence and its waiting occurrence; `true` if there
    /// was one.
    async fn unrecur(&self, _name: &str) -> Result<bool, Error> {
        Err(unsupported("recurrences", "this"))
    }

    /// Pauses (its waiting occurrence removed) or resumes (the next
    /// occurrence after now scheduled) a recurrence; `true` if there is
    /// one of that name.
    async fn pause_recurrence(&self, _name: &str, _paused: bool) -> Result<bool, Error> {
        Err(unsupported("recurrences", "this"))
    }

    /// Every recurrence of the queue, by name.
    async fn recurrences(&self) -> Result<Vec<RecurrenceInfo>, Error> {
        Err(unsupported("recurrences", "this"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dues_are_checked_once_for_every_backend() {
        let epoch = SystemTime::UNIX_EPOCH;
        assert_eq!(
            Due::after(Duration::from_micros(1500)).unwrap(),
            Due::After(2)
        );
        assert_eq!(
            Due::after(Duration::from_millis(MAX_SPAN_MS)).unwrap(),
            Due::After(MAX_SPAN_MS)
        );
        assert!(matches!(
            Due::after(Duration::from_millis(MAX_SPAN_MS + 1)),
            Err(Error::InvalidDeadline)
        ));
        assert!(matches!(
            Due::after(Duration::MAX),
            Err(Error::InvalidDeadline)
        ));
        assert_eq!(
            Due::at(epoch + Duration::from_millis(7)).unwrap(),
            Due::At(7)
        );
        assert!(matches!(
            Due::at(epoch - Duration::from_millis(1)),
            Err(Error::InvalidDeadline)
        ));
        assert!(matches!(
            Due::at(epoch + Duration::from_millis(MAX_DEADLINE_MS + 1)),
            Err(Error::InvalidDeadline)
        ));
    }

    #[test]
    fn a_lacking_capability_is_unsupported_in_one_sentence() {
        let none = Capabilities::NONE;
        let settings = Settings {
            url: "x://".to_owned(),
            name: "q".to_owned(),
            lease: Duration::from_secs(1),
            max_attempts: 1,
            max_payload: 1,
            command_timeout: Duration::from_secs(1),
            health_check: Duration::from_secs(1),
            replicas: 0,
            replica_timeout: Duration::from_secs(1),
            prefetch: 0,
            register: true,
            read_only: false,
            partitions: Some(1),
            cluster: false,
            clock: Clock::system(),
            holder: "h".to_owned(),
        };
        assert!(none.check(&settings, "b").is_ok());
        let with = |change: fn(&mut Settings)| {
            let mut settings = settings.clone();
            change(&mut settings);
            none.check(&settings, "b").unwrap_err().to_string()
        };
        assert_eq!(
            with(|s| s.partitions = Some(2)),
            "partitions is not a setting of the b backend"
        );
        assert_eq!(
            with(|s| s.cluster = true),
            "cluster is not a setting of the b backend"
        );
        assert_eq!(
            with(|s| s.replicas = 1),
            "replicas is not a setting of the b backend"
        );
        assert_eq!(
            with(|s| s.read_only = true),
            "read_only is not a setting of the b backend"
        );
        assert_eq!(
            with(|s| s.clock = Clock::manual(SystemTime::UNIX_EPOCH)),
            "clock is not a setting of the b backend"
        );
    }
}
