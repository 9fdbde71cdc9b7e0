//! The pages around an action: the confirmation, what was done, and the
//! token's login.

use maud::{html, Markup};
use tiered_timer_jobs::Listing;

use super::{csrf_field, layout, Crumb};
use crate::actions::Action;
use crate::app::App;
use crate::respond::Visit;

/// How many ids a confirmation lists before "and N more".
const LISTED: usize = 50;

/// Where an action's pages lead back to: the listing it came from, or the
/// job's page.
#[derive(Debug, Clone)]
pub(crate) struct Back {
    pub(crate) listing: Listing,
    pub(crate) job: Option<String>,
}

impl Back {
    fn url(&self, visit: &Visit, name: &str) -> String {
        match &self.job {
            Some(id) => visit.job_url(name, id),
            None => visit.tab_url(name, self.listing, 0),
        }
    }

    fn label(&self, name: &str) -> String {
        match &self.job {
            Some(id) => format!("Back to {id}"),
            None => format!("Back to {name}"),
        }
    }
}

/// What an action will do, with the button that does it (a second POST,
/// `confirm=yes`).
pub(crate) fn confirm(
    app: &App,
    visit: &Visit,
    name: &str,
    action: Action,
    ids: &[String],
    back: &Back,
) -> Markup {
    let body = html! {
        h1 { "Confirm" }
        p #question { (action.describe(ids.len())) " in queue " b { (name) } "?" }
        ul #ids {
            @for id in ids.iter().take(LISTED) { li { code { (id) } } }
            @if ids.len() > LISTED { li { "and " (ids.len() - LISTED) " more" } }
        }
        form.bar method="post" action=(visit.action_url(name)) {
            (csrf_field(app))
            input type="hidden" name="action" value=(action.as_str());
            input type="hidden" name="confirm" value="yes";
            input type="hidden" name="tab" value=(back.listing.as_str());
            @if let Some(job) = &back.job { input type="hidden" name="job" value=(job); }
            @for id in ids { input type="hidden" name="id" value=(id); }
            button.primary #confirm { "Yes, " (action.as_str().replace('-', " ")) }
            a.button href=(back.url(visit, name)) { "No, go back" }
        }
    };
    let crumbs = [
        Crumb::link("Queues", visit.root_url()),
        Crumb::link(name, visit.queue_url(name)),
        Crumb::here("Confirm"),
    ];
    layout(app, visit, &crumbs, false, body)
}

/// What an action did.
pub(crate) fn done(
    app: &App,
    visit: &Visit,
    name: &str,
    action: Action,
    (changed, unchanged): (u64, u64),
    back: &Back,
) -> Markup {
    let body = html! {
        h1 { "Done" }
        p #done data-changed=(changed) {
            (action.past()) " " (changed) " job(s) in " b { (name) }
            @if unchanged > 0 {
                " (" (unchanged) " had moved on meanwhile and were left alone)"
            }
            "."
        }
        p { a.button #back href=(back.url(visit, name)) { (back.label(name)) } }
    };
    let crumbs = [
        Crumb::link("Queues", visit.root_url()),
        Crumb::link(name, visit.queue_url(name)),
        Crumb::here("Done"),
    ];
    layout(app, visit, &crumbs, false, body)
}

/// The token's login form, with why the last try failed.
pub(crate) fn login(app: &App, visit: &Visit, error: Option<&str>) -> Markup {
    let body = html! {
        h1 { "Log in" }
        p.sub { "The dashboard's token allows requeue, purge, cancel and promote, and pausing and resuming recurring jobs." }
        @if let Some(error) = error { p.hot #error { (error) } }
        form.bar method="post" action={ (visit.mount) "/login" } {
            (csrf_field(app))
            input #token type="password" name="token" placeholder="token" autocomplete="current-password";
            button.primary #login { "Log in" }
        }
    };
    let crumbs = [
        Crumb::link("Queues", visit.root_url()),
        Crumb::here("Log in"),
    ];
    layout(app, visit, &crumbs, false, body)
}
