//! A wake-up baton this process holds ([`Baton`], of a [`Kind`]), Redis'
//! clock against the local one ([`Offset`]), and the times that govern
//! batons (see the module docs of `mod.rs`).

use std::time::Duration;

use tokio::time::Instant;

/// A claim passes the next baton back to the claimer if the next event is
/// due within this long: a worker that comes back for its next job within
/// it claims without waiting for a baton.
pub(crate) const KEEP_HORIZON: Duration = Duration::from_millis(50);
/// A baton held while no worker of this process waits is kept if it is
/// due within this long (a worker of this process will most likely be
/// back for it), else handed back at once.
pub(crate) const HOLD: Duration = Duration::from_secs(1);
/// A held baton that comes due while no worker of this process waits is
/// kept this much longer, for a worker that comes back at once, then
/// handed back.
pub(crate) const LINGER: Duration = Duration::from_millis(2);
/// Every this many empty replies on a blocking connection, a waiting
/// worker probes one partition's chain head (one `HGET`): it is how a
/// baton lost with a dead process is found.
pub(super) const PROBE_EVERY: u32 = 3;
/// How many due jobs left behind a claim make a backlog (the scripts'
/// `BACKLOG`): then every worker of this process claims from it at once
/// instead of waiting for a baton.
pub(super) const BACKLOG: u64 = 8;
/// How long past the chain head's time the watch baton's holder checks it
/// (the scripts' `WATCH`, ms); a head unclaimed that long is taken for lost
/// with its holder.
pub(super) const WATCH_MS: u64 = 2000;
/// [`WATCH_MS`] as a duration.
pub(super) const WATCH: Duration = Duration::from_millis(WATCH_MS);
/// A waiting worker checks a chain head this long after it is due to be
/// lost (a little later than the watch's holder, which usually does it).
pub(super) const CHECK_MARGIN: Duration = Duration::from_millis(100);
/// A chain head found alive is checked again no sooner than this.
pub(super) const RECHECK: Duration = Duration::from_millis(250);

/// A baton this process holds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Baton {
    pub(super) partition: u32,
    /// Its time, on Redis' clock (ms).
    pub(super) at_ms: u64,
    pub(super) kind: Kind,
    /// Its time as a local instant (`None`: no clock offset yet; now).
    pub(super) fire_at: Option<Instant>,
    /// Kept past its time for a worker that may come back (see [`LINGER`]).
    pub(super) linger_until: Option<Instant>,
}

/// Redis' clock against the local one, from a claim's reply.
#[derive(Debug, Clone, Copy)]
pub(super) struct Offset {
    pub(super) redis_ms: u64,
    pub(super) local: Instant,
}

/// Which baton of a partition's marker set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The chain head's baton, named by its time.
    Head,
    /// The k-th extra baton a claim put in for a backlog, named `xk`.
    Extra(u16),
    /// The watch baton, named `w`: its holder checks, the scripts' `WATCH`
    /// (2 s) after the chain head's time, that someone claimed with the
    /// head's baton, and rescues the chain if not (its holder died between
    /// its `BZPOPMIN` and its claim).
    Watch,
}

impl Kind {
    /// The kind of the marker set's member `member`.
    pub(super) fn of(member: &str) -> Kind {
        if member == "w" {
            return Kind::Watch;
        }
        match member.strip_prefix('x').and_then(|k| k.parse().ok()) {
            Some(k) => Kind::Extra(k),
            None => Kind::Head,
        }
    }
}

impl Baton {
    /// Its name in the marker set.
    pub(super) fn member(&self) -> String {
        match self.kind {
            Kind::Head => self.at_ms.to_string(),
            Kind::Extra(k) => format!("x{k}"),
            Kind::Watch => "w".to_owned(),
        }
    }

    /// Its name for the claim script (the watch's carries its time, so the
    /// script tells the watch out from one that was replaced).
    pub(super) fn claim_arg(&self) -> String {
        match self.kind {
            Kind::Watch => format!("w{}", self.at_ms),
            _ => self.member(),
        }
    }
}

impl Offset {
    pub(super) fn local_at(&self, at_ms: u64) -> Instant {
        self.local + Duration::from_millis(at_ms.saturating_sub(self.redis_ms))
    }

    /// The local instant `local` on Redis' clock (ms).
    pub(super) fn redis_at(&self, local: Instant) -> u64 {
        let since = local.saturating_duration_since(self.local).as_millis();
        self.redis_ms
            .saturating_add(u64::try_from(since).unwrap_or(u64::MAX))
    }
}
