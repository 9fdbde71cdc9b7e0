//! `POST /queues/{queue}/action`: requeue, purge, cancel, promote; pause
//! and resume a recurring job (its name where a job's id goes). Each
//! is checked first (same origin, CSRF, the right to act), then shown as
//! what it will do (a confirmation page), and done only when posted again
//! with `confirm=yes`.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::Response;
use tiered_timer_jobs::{Error, JobId, Listing, Queue};

use crate::respond::{failed, field, fields, page, refuse, Shared, Visit};
use crate::views::forms::{self, Back};

/// The actions a form may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    Requeue,
    Purge,
    RequeueAll,
    PurgeAll,
    Cancel,
    Promote,
    /// Pause a recurring job (named in place of an id).
    PauseRecurrence,
    /// Resume a paused recurring job.
    ResumeRecurrence,
}

impl Action {
    fn parse(s: &str) -> Option<Action> {
        Some(match s {
            "requeue" => Action::Requeue,
            "purge" => Action::Purge,
            "requeue-all" => Action::RequeueAll,
            "purge-all" => Action::PurgeAll,
            "cancel" => Action::Cancel,
            "promote" => Action::Promote,
            "pause-recurrence" => Action::PauseRecurrence,
            "resume-recurrence" => Action::ResumeRecurrence,
            _ => return None,
        })
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Action::Requeue => "requeue",
            Action::Purge => "purge",
            Action::RequeueAll => "requeue-all",
            Action::PurgeAll => "purge-all",
            Action::Cancel => "cancel",
            Action::Promote => "promote",
            Action::PauseRecurrence => "pause-recurrence",
            Action::ResumeRecurrence => "resume-recurrence",
        }
    }

    /// Its button on one job.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Action::Requeue => "Requeue",
            Action::Purge => "Purge",
            Action::RequeueAll => "Requeue all",
            Action::PurgeAll => "Purge all",
            Action::Cancel => "Cancel",
            Action::Promote => "Promote",
            Action::PauseRecurrence => "Pause",
            Action::ResumeRecurrence => "Resume",
        }
    }

    /// Its button over a listing's ticked jobs.
    pub(crate) fn bulk_label(self) -> &'static str {
        match self {
            Action::Requeue => "Requeue selected",
            Action::Purge => "Purge selected",
            Action::Cancel => "Cancel selected",
            Action::Promote => "Promote selected",
            Action::RequeueAll
            | Action::PurgeAll
            | Action::PauseRecurrence
            | Action::ResumeRecurrence => self.label(),
        }
    }

    /// Whether it loses jobs for good (its button is red).
    pub(crate) fn is_destructive(self) -> bool {
        matches!(self, Action::Purge | Action::PurgeAll | Action::Cancel)
    }

    fn takes_ids(self) -> bool {
        !matches!(self, Action::RequeueAll | Action::PurgeAll)
    }

    /// What it does, for the confirmation: "Requeue 3 dead letter(s)...".
    pub(crate) fn describe(self, n: usize) -> String {
        match self {
            Action::Requeue => format!("Requeue {n} dead letter(s): due now, attempts reset"),
            Action::Purge => format!("Delete {n} dead letter(s) for good"),
            Action::RequeueAll => "Requeue every dead letter: due now, attempts reset".to_owned(),
            Action::PurgeAll => "Delete every dead letter for good".to_owned(),
            Action::Cancel => format!("Cancel {n} waiting job(s): they will never be delivered"),
            Action::Promote => format!("Make {n} waiting job(s) due now"),
            Action::PauseRecurrence => format!(
                "Pause {n} recurring job(s): the waiting occurrence is cancelled, none \
                 follows until resumed"
            ),
            Action::ResumeRecurrence => {
                format!("Resume {n} recurring job(s) at their next occurrence after now")
            }
        }
    }

    /// What was done, for the result: "Requeued".
    pub(crate) fn past(self) -> &'static str {
        match self {
            Action::Requeue | Action::RequeueAll => "Requeued",
            Action::Purge | Action::PurgeAll => "Purged",
            Action::Cancel => "Cancelled",
            Action::Promote => "Promoted",
            Action::PauseRecurrence => "Paused",
            Action::ResumeRecurrence => "Resumed",
        }
    }
}

/// An action and the jobs it names.
struct Asked {
    action: Action,
    ids: Vec<String>,
}

/// What a form asks: a row's own button names its action and job
/// (`do=requeue:ID`); the bulk buttons name the action, and the ticked
/// boxes (or a job page's hidden field) the jobs.
fn asked(form: &[(String, String)]) -> Result<Asked, &'static str> {
    let (action, ids) = match field(form, "do").and_then(|d| d.split_once(':')) {
        Some((action, id)) => (Action::parse(action), vec![id.to_owned()]),
        None => (
            field(form, "action").and_then(Action::parse),
            form.iter()
                .filter(|(k, _)| k == "id")
                .map(|(_, v)| v.clone())
                .collect(),
        ),
    };
    let action = action.ok_or("unknown action")?;
    if action.takes_ids() && ids.is_empty() {
        return Err("select at least one job");
    }
    Ok(Asked { action, ids })
}

pub(crate) async fn act(
    State(app): State<Shared>,
    visit: Visit,
    Path(name): Path<String>,
    request: Parts,
    body: Bytes,
) -> Response {
    let form = fields(&body);
    if let Err((status, why)) = app
        .access
        .authorize(&request, &app.csrf, field(&form, "csrf"))
    {
        return refuse(&app, &visit, status, why);
    }
    let Asked { action, ids } = match asked(&form) {
        Ok(asked) => asked,
        Err(why) => return refuse(&app, &visit, StatusCode::BAD_REQUEST, why),
    };
    match app.exists(&name).await {
        Ok(true) => {}
        Ok(false) => return refuse(&app, &visit, StatusCode::NOT_FOUND, "no such queue here"),
        Err(e) => return failed(&app, &visit, &e),
    }
    let back = Back {
        listing: field(&form, "tab")
            .and_then(|t| t.parse().ok())
            .unwrap_or(Listing::Waiting),
        job: field(&form, "job")
            .filter(|j| !j.is_empty())
            .map(str::to_owned),
    };
    if field(&form, "confirm") != Some("yes") {
        let body = forms::confirm(&app, &visit, &name, action, &ids, &back);
        return page(StatusCode::OK, &visit.nonce, body);
    }
    let queue = match app.queue_to_change(&name).await {
        Ok(q) => q,
        Err(e) => return failed(&app, &visit, &e),
    };
    match run(&queue, action, &ids).await {
        Ok(counts) => {
            let body = forms::done(&app, &visit, &name, action, counts, &back);
            page(StatusCode::OK, &visit.nonce, body)
        }
        Err(Error::InvalidJobId { .. } | Error::InvalidArgument { .. }) => refuse(
            &app,
            &visit,
            StatusCode::BAD_REQUEST,
            "not a job id this store accepts",
        ),
        Err(Error::InvalidRecurrence { .. }) => refuse(
            &app,
            &visit,
            StatusCode::BAD_REQUEST,
            "not a recurring job's name",
        ),
        Err(e) => failed(&app, &visit, &e.to_string()),
    }
}

/// Does the action: how many jobs changed, and how many had moved on
/// (not in the state the action needs) and were left alone. Stops at the
/// first error.
async fn run(queue: &Queue, action: Action, ids: &[String]) -> Result<(u64, u64), Error> {
    match action {
        Action::RequeueAll => return Ok((queue.requeue_all().await?, 0)),
        Action::PurgeAll => return Ok((queue.purge_all().await?, 0)),
        _ => {}
    }
    let mut changed = 0;
    for id in ids {
        let done = match action {
            Action::PauseRecurrence => queue.pause_recurrence(id).await?,
            Action::ResumeRecurrence => queue.resume_recurrence(id).await?,
            _ => on_job(queue, action, &JobId::from(id.as_str())).await?,
        };
        changed += u64::from(done);
    }
    Ok((changed, ids.len() as u64 - changed))
}

/// Does an action on one job: whether it changed.
async fn on_job(queue: &Queue, action: Action, id: &JobId) -> Result<bool, Error> {
    Ok(match action {
        Action::Requeue => queue.requeue(id).await?,
        Action::Purge => queue.purge(id).await?,
        Action::Cancel => queue.cancel(id).await?,
        _ => queue.promote(id).await?,
    })
}
