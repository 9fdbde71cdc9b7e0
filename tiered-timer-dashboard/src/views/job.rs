//! A job's page (`queues/{queue}/jobs/{id}`): its state and times (created,
//! due, lease, death), who holds it, its last attempts as the store keeps
//! them (who claimed each, when, how it ended and with what error), its
//! payload, and the actions its state allows.

use std::time::SystemTime;

use maud::{html, Markup};
use tiered_timer_jobs::{JobInfo, JobState, Outcome, HISTORY_LEN};

use super::queue::{button, Field};
use super::{can_act_note, csrf_field, layout, Crumb};
use crate::actions::Action;
use crate::app::App;
use crate::human::{self, relative};
use crate::respond::{Can, Visit};
use crate::text;

/// The most payload bytes the page shows (as text, or hex).
const PAYLOAD_SHOWN: usize = 64 * 1024;

/// The style of an outcome's cell: failures stand out.
fn outcome_class(outcome: Outcome) -> Option<&'static str> {
    match outcome {
        Outcome::Running => Some("run"),
        o if o.is_failure() => Some("err"),
        _ => None,
    }
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
    html! {
        h1 { (id) }
        p.sub {
            "in " a href=(visit.queue_url(name)) { (name) } " · partition " (job.partition)
            " · " (app.clock_of(name)) " " (human::utc(now))
        }
        table.facts #job {
            tr { th { "State" } td data-k="state" { (job.state) } }
            @if let Some(holder) = &job.holder {
                tr { th { "Held by" } td data-k="holder" { (holder) } }
            }
            @if let Some(created) = job.created {
                tr { th { "Created" } td data-k="created" { (when(created)) } }
            }
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
        @if job.history.is_empty() && job.attempts == 0 {
            p.note #attempts { "Not delivered yet." }
        } @else if job.history.is_empty() {
            p.note #attempts { "No attempt recorded: they were made before the store kept them." }
        } @else {
            table #attempts {
                thead {
                    tr {
                        th.n { "#" } th { "Claimed" } th { "By" } th { "Outcome" } th { "Ended" }
                        th { "Error" }
                    }
                }
                tbody {
                    @for attempt in &job.history {
                        tr data-outcome=(attempt.outcome.as_str()) {
                            td.n { (attempt.number) }
                            td { (when(attempt.claimed)) }
                            td { (attempt.holder.as_deref().unwrap_or("-")) }
                            td class=[outcome_class(attempt.outcome)] { (attempt.outcome) }
                            td { @if let Some(t) = attempt.ended { (when(t)) } @else { "-" } }
                            td.err { (attempt.error.as_deref().unwrap_or("")) }
                        }
                    }
                }
            }
            @if job.history.len() == HISTORY_LEN {
                p.note { "The last " (HISTORY_LEN) " attempts: the store keeps no more." }
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
