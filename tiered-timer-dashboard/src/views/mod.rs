//! The pages, as maud templates: every value goes through maud's escaping
//! (text and attributes alike); the only unescaped text is this crate's
//! own [`STYLE`] and [`SCRIPT`]. Links are built by [`Visit`]'s methods,
//! from the mount point and percent-encoded path segments ([`segment`]).
//!
//! SVG elements are always written with a body (`line ... {}`): in HTML an
//! SVG element is not void, so `<line ...>` without its end tag would swallow
//! the elements after it.

pub(crate) mod chart;
pub(crate) mod forms;
pub(crate) mod job;
pub(crate) mod overview;
pub(crate) mod queue;

use std::time::Duration;

use maud::{html, Markup, PreEscaped, DOCTYPE};
use percent_encoding::{utf8_percent_encode, AsciiSet, CONTROLS};
use tiered_timer_jobs::{Listing, Stats};

use crate::app::{Access, App};
use crate::human;
use crate::respond::{Can, Visit};

/// What a path segment must not hold as it is: the URL's own delimiters,
/// what browsers rewrite (`\` is a `/` to them) and what HTML or a shell
/// would trip on. Everything else (letters, digits, `-`, `_`, `.`, `:`,
/// `@`...) stays readable; bytes beyond ASCII are always encoded.
const SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'/')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'[')
    .add(b'\\')
    .add(b']')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}');

/// `s` as one path segment: readable where it can be (`order-710` stays
/// `order-710`), percent-encoded where it must be; `.` and `..` (which a
/// browser would resolve away) as `%2E`.
pub(crate) fn segment(s: &str) -> String {
    match s {
        "." => "%2E".to_owned(),
        ".." => "%2E%2E".to_owned(),
        _ => utf8_percent_encode(s, SEGMENT).to_string(),
    }
}

impl Visit {
    /// The overview: the mount point itself (axum's `nest("/ops", ..)`
    /// serves `/ops`, not `/ops/`), or `/` at the root.
    pub(crate) fn root_url(&self) -> String {
        if self.mount.is_empty() {
            "/".to_owned()
        } else {
            self.mount.clone()
        }
    }

    /// A queue's page.
    pub(crate) fn queue_url(&self, queue: &str) -> String {
        format!("{}/queues/{}", self.mount, segment(queue))
    }

    /// A queue's page on a listing and page of it.
    pub(crate) fn tab_url(&self, queue: &str, listing: Listing, page_no: usize) -> String {
        let base = self.queue_url(queue);
        match page_no {
            0 => format!("{base}?tab={listing}"),
            n => format!("{base}?tab={listing}&page={n}"),
        }
    }

    /// A job's page.
    pub(crate) fn job_url(&self, queue: &str, id: &str) -> String {
        format!("{}/jobs/{}", self.queue_url(queue), segment(id))
    }

    /// Where the search by id goes (`?id=` redirects to the job's page).
    pub(crate) fn find_url(&self, queue: &str) -> String {
        format!("{}/jobs", self.queue_url(queue))
    }

    /// Where a queue's action forms post.
    pub(crate) fn action_url(&self, queue: &str) -> String {
        format!("{}/action", self.queue_url(queue))
    }

    pub(crate) fn metrics_url(&self) -> String {
        format!("{}/metrics", self.mount)
    }

    pub(crate) fn logout_url(&self) -> String {
        format!("{}/logout", self.mount)
    }

    /// Where "log in to act" points: the token's login page, or the
    /// application's (if it gave one).
    pub(crate) fn login_url(&self, app: &App) -> Option<String> {
        match &app.access {
            Access::Token { .. } => Some(format!("{}/login", self.mount)),
            Access::Check { login_url, .. } => login_url.clone(),
            Access::ReadOnly { .. } => None,
        }
    }
}

/// One step of the breadcrumb: the pages above link, the last is this page.
pub(crate) struct Crumb {
    pub(crate) label: String,
    pub(crate) href: Option<String>,
}

impl Crumb {
    pub(crate) fn link(label: impl Into<String>, href: String) -> Crumb {
        Crumb {
            label: label.into(),
            href: Some(href),
        }
    }

    pub(crate) fn here(label: impl Into<String>) -> Crumb {
        Crumb {
            label: label.into(),
            href: None,
        }
    }
}

/// The dashboard's own style sheet.
const STYLE: &str = include_str!("style.css");

/// The dashboard's own script: reload every `data-refresh-ms` of the body
/// (not while a box is ticked or a field typed in), and the select-all box.
const SCRIPT: &str = include_str!("script.js");

/// A whole page around `body`: header, breadcrumb, style and script.
pub(crate) fn layout(
    app: &App,
    visit: &Visit,
    crumbs: &[Crumb],
    refresh: bool,
    body: Markup,
) -> Markup {
    let title = crumbs.last().map_or("", |c| c.label.as_str());
    let refresh_ms = refresh.then_some(app.settings.refresh.as_millis());
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · " (app.settings.title) }
                style nonce=(visit.nonce) { (PreEscaped(STYLE)) }
            }
            body data-refresh-ms=[refresh_ms] {
                header {
                    a.brand href=(visit.root_url()) { (app.settings.title) }
                    a href=(visit.root_url()) { "Queues" }
                    a href=(visit.metrics_url()) { "Metrics" }
                    div.who { (who(app, visit)) }
                }
                main {
                    nav.crumbs aria-label="Breadcrumb" {
                        ol {
                            @for crumb in crumbs {
                                li {
                                    @if let Some(href) = &crumb.href {
                                        a href=(href) { (crumb.label) }
                                    } @else {
                                        span aria-current="page" { (crumb.label) }
                                    }
                                }
                            }
                        }
                    }
                    (body)
                }
                script nonce=(visit.nonce) { (PreEscaped(SCRIPT)) }
            }
        }
    }
}

/// The header's corner: read-only, signed in, or the way to log in.
fn who(app: &App, visit: &Visit) -> Markup {
    html! {
        @match (visit.can, &app.access) {
            (Can::Look, Access::ReadOnly { note }) => span title=(note) { "read-only" },
            (Can::Look, _) => span { "read-only" },
            (Can::Act, Access::Token { .. }) => {
                span { "signed in" }
                form method="post" action=(visit.logout_url()) { button { "Log out" } }
            }
            (Can::Act, _) => span { "signed in" },
            (Can::LogInToAct, _) => (log_in_link(app, visit, "Log in to act")),
        }
    }
}

/// "Log in to act", as a link where there is a login page.
pub(crate) fn log_in_link(app: &App, visit: &Visit, label: &str) -> Markup {
    html! {
        @if let Some(login) = visit.login_url(app) {
            a href=(login) { (label) }
        } @else {
            span { (label) }
        }
    }
}

/// What a visitor who cannot act (now) is told above the actions.
pub(crate) fn can_act_note(app: &App, visit: &Visit) -> Markup {
    html! {
        @match (visit.can, &app.access) {
            (Can::Look, Access::ReadOnly { note }) => p.note #read-only { (note) },
            (Can::Look, _) => p.note #read-only { "This dashboard is read-only." },
            (Can::LogInToAct, _) => p.note #log-in {
                (log_in_link(app, visit, "Log in")) " to requeue, purge, cancel or promote."
            },
            (Can::Act, _) => {},
        }
    }
}

/// This dashboard's CSRF token, as a form field.
pub(crate) fn csrf_field(app: &App) -> Markup {
    html! { input type="hidden" name="csrf" value=(app.csrf); }
}

/// A page without queue data (refusals, the store's errors).
pub(crate) fn message(app: &App, visit: &Visit, title: &str, text: &str) -> Markup {
    let body = html! {
        h1 { (title) }
        p #message { (text) }
        p { a href=(visit.root_url()) { "Back to the queues" } }
    };
    layout(
        app,
        visit,
        &[Crumb::link("Queues", visit.root_url()), Crumb::here(title)],
        false,
        body,
    )
}

/// How overdue the most overdue job is, coloured from 5 s and 1 min.
pub(crate) fn overdue(stats: &Stats) -> Markup {
    let class = if stats.overdue >= Duration::from_secs(60) {
        "hot"
    } else if stats.overdue >= Duration::from_secs(5) {
        "warm"
    } else {
        ""
    };
    html! {
        @if stats.due_now == 0 {
            "-"
        } @else {
            span class=(class) { (human::duration(stats.overdue)) }
        }
    }
}

/// The headings of [`stats_cells`].
pub(crate) fn stats_head() -> Markup {
    html! {
        th.n { "Pending" } th.n { "Due now" } th.n { "Most overdue" }
        th.n { "Leased" } th.n { "Expired leases" } th.n { "Dead" }
    }
}

/// A queue's or partition's counts as table cells, keyed by `data-k`;
/// expired leases and dead letters in red when there are any.
pub(crate) fn stats_cells(stats: &Stats) -> Markup {
    let count = |key: &str, n: u64, alarm: bool| {
        html! { td.n.hot[alarm && n > 0] data-k=(key) { (n) } }
    };
    html! {
        (count("pending", stats.pending, false))
        (count("due", stats.due_now, false))
        td.n data-k="overdue" { (overdue(stats)) }
        (count("leased", stats.leased, false))
        (count("expired", stats.expired_leases, true))
        (count("dead", stats.dead, true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_stay_readable_and_cannot_escape_their_place() {
        assert_eq!(segment("order-710"), "order-710");
        assert_eq!(segment("a:b@c.d_e~f"), "a:b@c.d_e~f");
        assert_eq!(segment("a/b"), "a%2Fb");
        assert_eq!(segment("a\\b"), "a%5Cb");
        assert_eq!(segment("a b?c#d%e"), "a%20b%3Fc%23d%25e");
        assert_eq!(
            segment("<script>alert(1)</script>"),
            "%3Cscript%3Ealert(1)%3C%2Fscript%3E"
        );
        assert_eq!(segment("."), "%2E");
        assert_eq!(segment(".."), "%2E%2E");
        assert_eq!(segment("..."), "...");
        assert_eq!(segment("é"), "%C3%A9");
    }

    #[test]
    fn values_are_escaped_in_text_and_attributes() {
        let hostile = r#"<script>alert("1")</script> & 'x'"#;
        let page = html! { p title=(hostile) { (hostile) } }.into_string();
        assert_eq!(
            page,
            "<p title=\"&lt;script&gt;alert(&quot;1&quot;)&lt;/script&gt; &amp; 'x'\">\
             &lt;script&gt;alert(&quot;1&quot;)&lt;/script&gt; &amp; 'x'</p>"
        );
    }
}
