//! A queue's page: its counts, charts, its recurring jobs (with pause and
//! resume), a search by id, and its jobs by listing (waiting, due,
//! leased, dead), paged, with their actions.

use maud::{html, Markup};
use tiered_timer_jobs::{JobSummary, Lateness, Listing, Page, RecurrenceInfo, Stats, Throughput};

use super::{can_act_note, chart, csrf_field, layout, overdue, Crumb};
use crate::actions::Action;
use crate::app::{App, Sample};
use crate::human::{self, relative};
use crate::respond::{Can, Visit};
use crate::text;

/// Everything the queue page shows.
pub(crate) struct QueuePage<'a> {
    pub(crate) name: &'a str,
    pub(crate) stats: &'a Stats,
    pub(crate) samples: &'a [Sample],
    /// The store's lateness counters: every claim it counted.
    pub(crate) lateness: &'a Lateness,
    /// The claims counted while this dashboard watched (its window).
    pub(crate) recent: &'a Lateness,
    /// The store's counts per minute over the window.
    pub(crate) throughput: &'a Throughput,
    pub(crate) listing: Listing,
    pub(crate) page_no: usize,
    pub(crate) page: &'a Page,
    /// Its recurring jobs, by name (none on a backend without them).
    pub(crate) recurrences: &'a [RecurrenceInfo],
}

pub(crate) fn page(app: &App, visit: &Visit, q: &QueuePage<'_>) -> Markup {
    let s = q.stats;
    let body = html! {
        h1 { (q.name) }
        p.sub {
            (s.partitions.len()) " partition(s) · " (app.clock_of(q.name)) " " (human::utc(s.redis_time))
        }
        div.cards {
            (card("pending", "Pending", html! { (s.pending) }))
            (card("due", "Due now", html! { (s.due_now) }))
            (card("overdue", "Most overdue", overdue(s)))
            (card("leased", "Leased", html! { (s.leased) }))
            (card("expired", "Expired leases", html! { (s.expired_leases) }))
            (card("dead", "Dead", html! { (s.dead) }))
        }
        div.charts {
            (chart::throughput("Processed and failed per minute", q.throughput))
            (chart::depth("Depth", s.redis_time, q.samples))
            (chart::histogram("Claim lateness · every claim the store counted", q.lateness))
        }
        @if let (Some(p50), Some(p99)) = (q.recent.quantile(0.5), q.recent.quantile(0.99)) {
            p.note #recent-lateness {
                "Claims while this dashboard watched: " (q.recent.total()) "; half within "
                (human::duration(p50)) ", 99% within " (human::duration(p99)) "."
            }
        }
        (recurrences(app, visit, q))
        form.bar method="get" action=(visit.find_url(q.name)) {
            input #search type="search" name="id" placeholder="job id";
            button { "Find job" }
        }
        nav.tabs {
            @for (listing, label, n) in [
                (Listing::Waiting, "Waiting", s.pending),
                (Listing::Due, "Due now", s.due_now),
                (Listing::Leased, "Leased", s.leased),
                (Listing::Dead, "Dead", s.dead),
            ] {
                a.tab.on[listing == q.listing] id={ "tab-" (listing) }
                    href=(visit.tab_url(q.name, listing, 0)) { (label) " (" (n) ")" }
            }
        }
        (listing(app, visit, q))
    };
    let crumbs = [Crumb::link("Queues", visit.root_url()), Crumb::here(q.name)];
    layout(app, visit, &crumbs, true, body)
}

fn card(key: &str, label: &str, value: Markup) -> Markup {
    html! {
        div.card data-k=(key) { div.k { (label) } div.v { (value) } }
    }
}

/// The actions on one job of a listing: a waiting job not yet due may be
/// promoted (one already due would gain nothing), and cancelled; a dead
/// letter requeued or purged.
fn row_actions(listing: Listing, job: &JobSummary, now: std::time::SystemTime) -> Vec<Action> {
    match listing {
        Listing::Waiting if job.at > now => vec![Action::Promote, Action::Cancel],
        Listing::Waiting | Listing::Due => vec![Action::Cancel],
        Listing::Dead => vec![Action::Requeue, Action::Purge],
        Listing::Leased => Vec::new(),
    }
}

/// The buttons over the whole listing.
fn bulk_actions(listing: Listing) -> &'static [Action] {
    match listing {
        Listing::Waiting => &[Action::Promote, Action::Cancel],
        Listing::Due => &[Action::Cancel],
        Listing::Dead => &[
            Action::Requeue,
            Action::Purge,
            Action::RequeueAll,
            Action::PurgeAll,
        ],
        Listing::Leased => &[],
    }
}

/// What an action's button sends: its form field and value, and its id.
pub(crate) struct Field<'a> {
    pub(crate) name: &'a str,
    pub(crate) value: &'a str,
    pub(crate) id: Option<String>,
}

/// An action's button: enabled for a visitor who may act, disabled with
/// the hint for one who must log in first, absent on a read-only
/// dashboard.
pub(crate) fn button(visit: &Visit, action: Action, field: Field<'_>, label: &str) -> Markup {
    html! {
        @match visit.can {
            Can::Look => {},
            can => button class=[action.is_destructive().then_some("danger")] id=[field.id] name=(field.name)
                value=(field.value) data-action=(action.as_str()) disabled[can != Can::Act]
                title=[(can != Can::Act).then_some("Log in to act")] { (label) },
        }
    }
}

fn listing(app: &App, visit: &Visit, q: &QueuePage<'_>) -> Markup {
    let page = q.page;
    let tab = q.listing.as_str();
    let when = match q.listing {
        Listing::Waiting | Listing::Due => "Due",
        Listing::Leased => "Lease until",
        Listing::Dead => "Died",
    };
    let bulk = bulk_actions(q.listing);
    let ticks = visit.can == Can::Act && !bulk.is_empty();
    let buttons_column = visit.can != Can::Look && !bulk.is_empty();
    html! {
        form #jobs method="post" action=(visit.action_url(q.name)) {
            (csrf_field(app))
            input type="hidden" name="tab" value=(tab);
            (can_act_note(app, visit))
            @if buttons_column {
                div.bar {
                    @for action in bulk {
                        @let field = Field {
                            name: "action",
                            value: action.as_str(),
                            id: Some(format!("bulk-{}", action.as_str())),
                        };
                        (button(visit, *action, field, action.bulk_label()))
                    }
                }
            }
            table #listing data-listing=(tab) {
                thead {
                    tr {
                        @if ticks { th { input #select-all type="checkbox" title="select all"; } }
                        th { "Id" } th.n { "Partition" } th.n { "Attempts" } th { (when) }
                        th { "Payload" } th { "Last error" }
                        @if buttons_column { th {} }
                    }
                }
                tbody {
                    @for job in &page.jobs {
                        @let id = job.id.as_str();
                        tr data-id=(id) {
                            @if ticks { td { input type="checkbox" name="id" value=(id); } }
                            td.id { a href=(visit.job_url(q.name, id)) { (id) } }
                            td.n { (job.partition) }
                            td.n { (job.attempts) }
                            td { (relative(job.at, page.redis_time)) }
                            td { (text::payload(&job.payload_preview, job.payload_len, 40)) }
                            td.err { (job.last_error.as_deref().unwrap_or("")) }
                            @if buttons_column {
                                td {
                                    @for action in row_actions(q.listing, job, page.redis_time) {
                                        @let value = format!("{}:{id}", action.as_str());
                                        @let field = Field { name: "do", value: &value, id: None };
                                        (button(visit, action, field, action.label()))
                                        " "
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        @if page.jobs.is_empty() {
            p.note #none { "Nothing here." }
        }
        (pager(visit, q))
    }
}

fn pager(visit: &Visit, q: &QueuePage<'_>) -> Markup {
    let page = q.page;
    let first = page.offset + 1;
    let last = page.offset + page.jobs.len();
    html! {
        div.pager {
            span { (first.min(last.max(1))) "–" (last) " of " (page.total) }
            @if q.page_no > 0 {
                a.button href=(visit.tab_url(q.name, q.listing, q.page_no - 1)) { "Previous" }
            }
            @if (last as u64) < page.total {
                a.button href=(visit.tab_url(q.name, q.listing, q.page_no + 1)) { "Next" }
            }
        }
    }
}

/// The recurring jobs, if any: name, spec, time zone, next and last
/// occurrence (by the store's clock), the last one's outcome, and a
/// pause or resume button each (confirmed, as every action).
fn recurrences(app: &App, visit: &Visit, q: &QueuePage<'_>) -> Markup {
    let now = q.stats.redis_time;
    let when = |t: Option<std::time::SystemTime>| {
        t.map_or_else(String::new, |t| {
            format!("{} ({})", human::utc(t), relative(t, now))
        })
    };
    let buttons = visit.can != Can::Look;
    html! {
        @if !q.recurrences.is_empty() {
            h2 { "Recurring jobs" }
            form #recurrences-form method="post" action=(visit.action_url(q.name)) {
                (csrf_field(app))
                input type="hidden" name="tab" value=(q.listing.as_str());
                table #recurrences {
                    thead {
                        tr {
                            th { "Name" } th { "Spec" } th { "Time zone" } th { "Next" }
                            th { "Last" } th { "Last outcome" }
                            @if buttons { th {} }
                        }
                    }
                    tbody {
                        @for r in q.recurrences {
                            tr data-recurrence=(r.name) {
                                td.id { (r.name) }
                                td { code { (r.spec) } }
                                td { (r.time_zone) }
                                td data-k="next" {
                                    @if r.paused { "paused" } @else { (when(r.next)) }
                                }
                                td data-k="last" { (when(r.last)) }
                                td.err data-k="outcome" {
                                    (r.last_run.map_or("", |l| l.as_str()))
                                    @if let Some(error) = &r.last_error { ": " (error) }
                                }
                                @if buttons {
                                    td {
                                        @let action = if r.paused {
                                            Action::ResumeRecurrence
                                        } else {
                                            Action::PauseRecurrence
                                        };
                                        @let value = format!("{}:{}", action.as_str(), r.name);
                                        @let field = Field { name: "do", value: &value, id: None };
                                        (button(visit, action, field, action.label()))
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
