//! A job's page (`queues/{queue}/jobs/{id}`): its state and times, its
//! attempts, its payload, and the actions its state allows.
//!
//! What the store does not keep yet has its place here, filled from what
//! [`JobInfo`] gives: the attempts are the last one only (a bounded history
//! kept with the job would fill [`attempts_of`]), and the lease's holder
//! and the job's creation time are not shown.

use std::time::SystemTime;

use maud::{html, Markup};
use tiered_timer_jobs::{JobInfo, JobState};

use super::queue::{button, Field};
use super::{can_act_note, csrf_field, layout, Crumb};
use crate::actions::Action;
use crate::app::App;
use crate::human::{self, relative};
use crate::respond::{Can, Visit};
use crate::text;

/// The most payload bytes the page shows (as text, or hex).
const PAYLOAD_SHOWN: usize = 64 * 1024;

/// One delivery of a job, as the page lists it.
struct Attempt {
    number: u32,
    /// When it ended, if it did and the store says when.
    ended: Option<SystemTime>,
    outcome: &'static str,
    error: Option<String>,
}

/// The attempts the store knows of: today the last one (its number, how
/// it ended, its error), since only the last error is kept with a job.
fn attempts_of(job: &JobInfo) -> Vec<Attempt> {
    if job.attempts == 0 {
        return Vec::new();
    }
    let (outcome, ended) = match job.state {
        JobState::Leased => ("running", None),
        JobState::Dead => ("died", job.died_at),
        JobState::Waiting if job.last_error.is_some() => ("failed; retry waiting", None),
        JobState::Waiting => ("given back", None),
    };
    vec![Attempt {
        number: job.attempts,
        ended,
        outcome,
        error: job.last_error.clone(),
    }]
}

/// What may be done to a job in its state: a waiting job not yet due may
/// be promoted, and cancelled; a dead letter requeued or purged.
fn actions_for(job: &JobInfo) -> &'static [Action] {
    match job.state {
        JobState::Waiting if job.due.is_some_and(|due| due > job.redis_time) => {
            &[Action::Promote, Action::Cancel]
        }
        JobState::Waiting => &[Action::Cancel],
        JobState::Dead => &[Action::Requeue, Action::Purge],
        JobState::Leased => &[],
    }
}

/// The page of job `id` of queue `name`; `None`: no such job.
pub(crate) fn page(
    app: &App,
    visit: &Visit,
    name: &str,
    id: &str,
    found: Option<&JobInfo>,
) -> Markup {
    let body = match found {
        Some(job) => found_job(app, visit, name, id, job),
        None => html! {
            h1 { (id) }
            p #missing {
                "No job " code { (id) } " in queue " b { (name) }
                ": done, cancelled, purged or never scheduled."
            }
            p { a href=(visit.queue_url(name)) { "Back to " (name) } }
        },
    };
    let crumbs = [
        Crumb::link("Queues", visit.root_url()),
        Crumb::link(name, visit.queue_url(name)),
        Crumb::here(id),
    ];
    layout(app, visit, &crumbs, false, body)
}

fn found_job(app: &App, visit: &Visit, name: &str, id: &str, job: &JobInfo) -> Markup {
    let now = job.redis_time;
    let when = |t: SystemTime| format!("{} ({})", human::utc(t), relative(t, now));
    let attempts = attempts_of(job);
    html! {
        h1 { (id) }
        p.sub {
            "in " a href=(visit.queue_url(name)) { (name) } " · partition " (job.partition)
            " · " (app.clock_of(name)) " " (human::utc(now))
        }
        table.facts #job {
            tr { th { "State" } td data-k="state" { (job.state) } }
            @if let Some(due) = job.due { tr { th { "Due" } td data-k="due" { (when(due)) } } }
            @if let Some(expiry) = job.lease_expiry {
                tr { th { "Lease until" } td data-k="lease" { (when(expiry)) } }
            }
            @if let Some(died) = job.died_at { tr { th { "Died" } td data-k="died" { (when(died)) } } }
            tr { th { "Attempts" } td data-k="attempts" { (job.attempts) } }
            tr { th { "Last error" } td.err data-k="error" { (job.last_error.as_deref().unwrap_or("-")) } }
        }
        (actions(app, visit, name, id, job))
        h2 { "Attempts" }
        @if attempts.is_empty() {
            p.note #attempts { "Not delivered yet." }
        } @else {
            table #attempts {
                thead { tr { th.n { "#" } th { "Outcome" } th { "Ended" } th { "Error" } } }
                tbody {
                    @for attempt in &attempts {
                        tr {
                            td.n { (attempt.number) }
                            td { (attempt.outcome) }
                            td { @if let Some(t) = attempt.ended { (when(t)) } @else { "-" } }
                            td.err { (attempt.error.as_deref().unwrap_or("")) }
                        }
                    }
                }
            }
            @if job.attempts > 1 {
                p.note { "Earlier attempts are not recorded by the store: the last error only." }
            }
        }
        h2 { "Payload (" (human::bytes(job.payload.len() as u64)) ")" }
        pre #payload { (text::payload(&job.payload, job.payload.len() as u64, PAYLOAD_SHOWN)) }
    }
}

fn actions(app: &App, visit: &Visit, name: &str, id: &str, job: &JobInfo) -> Markup {
    let possible = actions_for(job);
    html! {
        @if !possible.is_empty() {
            @if visit.can != Can::Act { (can_act_note(app, visit)) }
            @if visit.can != Can::Look {
                form.bar #job-actions method="post" action=(visit.action_url(name)) {
                    (csrf_field(app))
                    input type="hidden" name="id" value=(id);
                    input type="hidden" name="job" value=(id);
                    @for action in possible {
                        @let field = Field { name: "action", value: action.as_str(), id: None };
                        (button(visit, *action, field, action.label()))
                    }
                }
            }
        }
    }
}
