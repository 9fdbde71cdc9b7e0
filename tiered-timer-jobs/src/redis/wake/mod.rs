//! The waker: one task per [`Queue`](crate::Queue) that decides when this
//! process claims, so that each due job wakes exactly one worker however
//! many wait, and a waiting worker sends nothing while nothing is due.
//!
//! # The wake-up chain
//!
//! Each partition has a *baton*: a member of its marker sorted set
//! (`ttr:T:marker`), named and scored by the time of the partition's next
//! event (a job coming due, a lease running out), on Redis' clock. Waiting workers
//! block on the marker with `BZPOPMIN`, which hands the baton to exactly
//! one of them. The holder converts the time to a local instant, sleeps
//! until then on `tiered-timer`, and claims with the baton; the claim
//! script passes the baton on to the next event (`src/redis/lua/claim.lua`):
//! into the marker set, for another waiting worker (at once if it is due
//! already: a backlog is worked on by every idle worker), or straight back
//! to the claimer if the next event is due within [`KEEP_HORIZON`] (a
//! worker that comes back for its next job in time needs no `BZPOPMIN`).
//! Scripts that create an event before the chain head (a schedule, a
//! retry, a release) put a baton in for it. So a due job costs one
//! `BZPOPMIN` at most, one claim and one ack, whatever the number of
//! workers `W` and partitions `P`.
//!
//! A worker that is never idle pops no baton: under a backlog it claims
//! without one, on the partition with the oldest due jobs as far as the
//! claims' replies told this process (see [`fair`]), so that one busy
//! worker does not drain one partition while the others' jobs wait.
//!
//! # Ground rules
//!
//! * The waker task owns the blocking connections and the batons this
//!   process holds; [`Shared`] holds what `next` and the task exchange
//!   (waiters, prefetched jobs, held batons), under a mutex held only for
//!   bookkeeping, never across an `.await`, and nobody is woken while it
//!   is held.
//! * Every claim runs in a task of its own and reports to the waker (or to
//!   the caller that asked, falling back to the waker if the caller is
//!   gone): a `next` that is dropped never loses a claimed job (it goes to
//!   the next waiter, or is released) nor the baton a claim passed back.
//! * A baton is never dropped: it is claimed with, or handed back
//!   (`ZADD`) when this process has no worker waiting for it (at once if
//!   it is due later than [`HOLD`], else [`LINGER`] past its time),
//!   when the queue closes, and when the last handle is dropped. If a
//!   process dies holding one, the *watch baton* finds out: each chain
//!   head's baton goes into the marker set with a watch (member `w`,
//!   scored `WATCH`, 2 s, after the head's time; one per partition, moved
//!   on as the head moves), which `BZPOPMIN` hands to another waiting
//!   worker after the head's; its holder claims with it at its time, and
//!   the script rescues the chain if the head is still unclaimed. If the
//!   watch's holder died too, the first script (or any waiting worker's
//!   periodic probe of `armed`) that finds the head `GRACE` (10 s) past
//!   its time, or its watch `WATCH` overdue, re-arms it.
//! * Times on Redis' clock become local instants through the offset
//!   measured on the last claim: Redis' now as read by the script, against
//!   the local instant its reply arrived (so a baton fires no earlier than
//!   its time, up to clock drift; firing early costs one claim that finds
//!   nothing and keeps the baton). A baton that arrives late (a stalled
//!   link) fires at once.
//! * Health: every blocking call carries a reply deadline of
//!   `health_check` (Redis ends it empty a little earlier), so a
//!   connection that stops answering is noticed within `health_check`,
//!   replaced (the command connection too, its path being in doubt), and
//!   Redis is read again with a rescue claim on each of its partitions
//!   (a baton popped on a dead connection may be lost: the rescue re-arms
//!   the chain).
//! * Losing and re-establishing a blocking connection are `tracing`
//!   events (warn and info).
//!
//! # Files, in import order
//!
//! `baton.rs` (a baton, the clock offset, the times that govern batons) <-
//! `request.rs` (a claim's request and reply) <- `fair.rs` (what the
//! claims said of each partition) <- `state.rs` (what the mutex guards,
//! and the choices made under it) <- `shared.rs` (what `next` and the
//! task share: waiting, closing, handing back) <- `claim.rs` (running a
//! claim so that nothing it takes is stranded) <- `waker.rs` (the task,
//! and [`start`]).

mod baton;
mod claim;
mod fair;
mod request;
mod shared;
mod state;
mod waker;

pub(crate) use shared::{Setup, Shared};
pub(crate) use waker::start;
