//! The pages, as strings. Every value from Redis or from the request goes
//! through [`esc`] (text and attributes) or [`url`] (links) where it is
//! written; numbers and this file's own words are the only other content.

use std::fmt::Write;
use std::time::{Duration, SystemTime};

use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use tiered_timer_jobs::{JobInfo, JobState, Lateness, Listing, Page, QueueInfo, Stats};

use super::chart::{self, Series};
use super::{Action, App, Sample, WINDOW};
use crate::commands::relative;
use crate::text::redacted;
use crate::{human, text};

/// Text or an attribute value, escaped for HTML.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A path segment or query value, percent-encoded.
fn url(s: &str) -> String {
    utf8_percent_encode(s, NON_ALPHANUMERIC).to_string()
}

/// What every page needs to know about the request.
pub(crate) struct View<'a> {
    pub(crate) app: &'a App,
    pub(crate) nonce: &'a str,
    pub(crate) signed_in: bool,
    pub(crate) actions_allowed: bool,
}

const STYLE: &str = r#"
:root { --ink:#1d2330; --muted:#667085; --line:#e3e6ea; --bg:#f6f7f9; --card:#fff; --accent:#3367d6; --bad:#c8362b; --warn:#b7791f; --ok:#2f855a; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif; color:var(--ink); background:var(--bg); }
header { display:flex; align-items:center; gap:16px; padding:10px 24px; background:#1d2330; color:#fff; }
header a { color:#fff; text-decoration:none; }
header .brand { font-weight:700; letter-spacing:.3px; }
header .who { margin-left:auto; color:#c9cfda; display:flex; gap:10px; align-items:center; }
header form { margin:0; }
main { padding:20px 24px; max-width:1200px; }
h1 { font-size:20px; margin:0 0 4px; }
.sub { color:var(--muted); margin:0 0 16px; }
table { border-collapse:collapse; width:100%; background:var(--card); border:1px solid var(--line); border-radius:6px; }
th, td { padding:7px 10px; border-bottom:1px solid var(--line); text-align:left; vertical-align:top; }
th { font-size:12px; text-transform:uppercase; letter-spacing:.4px; color:var(--muted); background:#fafbfc; }
td.n, th.n { text-align:right; font-variant-numeric:tabular-nums; }
td.id { font-family:ui-monospace,SFMono-Regular,Menlo,monospace; word-break:break-all; max-width:320px; }
td.err { color:var(--bad); max-width:320px; word-break:break-word; }
.hot { color:var(--bad); font-weight:600; }
.warm { color:var(--warn); font-weight:600; }
.cards { display:grid; grid-template-columns:repeat(6,1fr); gap:10px; margin:12px 0 16px; }
.card { background:var(--card); border:1px solid var(--line); border-radius:6px; padding:10px 12px; }
.card .k { font-size:12px; color:var(--muted); text-transform:uppercase; letter-spacing:.4px; }
.card .v { font-size:22px; font-weight:650; font-variant-numeric:tabular-nums; }
.charts { display:grid; grid-template-columns:repeat(auto-fill,minmax(420px,1fr)); gap:12px; margin:16px 0; }
figure { margin:0; background:var(--card); border:1px solid var(--line); border-radius:6px; padding:10px 12px; }
figcaption { font-weight:600; margin-bottom:4px; }
svg.chart { width:100%; height:auto; display:block; }
svg .axis { font-size:10px; fill:var(--muted); }
.legend { display:flex; gap:14px; color:var(--muted); font-size:12px; margin-top:2px; }
.legend i { display:inline-block; width:10px; height:10px; border-radius:2px; margin-right:4px; vertical-align:-1px; }
.tabs { display:flex; gap:4px; margin:16px 0 0; }
.tabs a { padding:7px 14px; border:1px solid var(--line); border-bottom:none; border-radius:6px 6px 0 0; background:#eef0f3; color:var(--ink); text-decoration:none; }
.tabs a.on { background:var(--card); font-weight:600; }
.bar { display:flex; gap:8px; align-items:center; margin:10px 0; flex-wrap:wrap; }
button, .button { font:inherit; padding:5px 11px; border-radius:5px; border:1px solid #c5cad3; background:#fff; cursor:pointer; color:var(--ink); text-decoration:none; }
button.danger { border-color:#e6b4b0; color:var(--bad); }
button.primary { background:var(--accent); border-color:var(--accent); color:#fff; }
input[type=search], input[type=password] { font:inherit; padding:5px 9px; border:1px solid #c5cad3; border-radius:5px; min-width:260px; }
pre { background:#f3f4f6; padding:10px; border-radius:5px; white-space:pre-wrap; word-break:break-all; max-height:320px; overflow:auto; margin:0; }
.note { color:var(--muted); }
.pager { display:flex; gap:10px; align-items:center; margin:10px 0; color:var(--muted); }
details summary { cursor:pointer; color:var(--accent); }
details table { margin-top:6px; font-size:12px; }
a { color:var(--accent); }
"#;

fn layout(view: &View<'_>, title: &str, refresh: bool, body: &str) -> String {
    let who = if !view.actions_allowed {
        r#"<span title="start ttr serve with --token to allow actions">read-only</span>"#.to_owned()
    } else if view.signed_in {
        r#"<span>signed in</span><form method="post" action="/logout"><button>Log out</button></form>"#
            .to_owned()
    } else {
        r#"<a href="/login">Log in to act</a>"#.to_owned()
    };
    let script = if refresh {
        let ms = view.app.refresh.as_millis();
        format!(
            r#"<script nonce="{nonce}">
(function () {{
  var ms = {ms};
  function busy() {{
    var a = document.activeElement;
    return document.querySelector('input[type=checkbox]:checked') || (a && a.tagName === 'INPUT');
  }}
  function tick() {{ if (busy()) {{ setTimeout(tick, ms); }} else {{ location.reload(); }} }}
  setTimeout(tick, ms);
  var all = document.getElementById('select-all');
  if (all) all.addEventListener('change', function () {{
    document.querySelectorAll('input[name=id]').forEach(function (b) {{ b.checked = all.checked; }});
  }});
}})();
</script>"#,
            nonce = esc(view.nonce)
        )
    } else {
        String::new()
    };
    format!(
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} · ttr</title><style nonce="{nonce}">{STYLE}</style></head>
<body><header><a class="brand" href="/">ttr</a><a href="/">Queues</a><a href="/metrics">Metrics</a><div class="who">{who}</div></header>
<main>{body}</main>{script}</body></html>"#,
        title = esc(title),
        nonce = esc(view.nonce),
    )
}

/// A page without a [`View`] (refusals, errors).
pub(crate) fn message_page(nonce: &str, title: &str, text: &str) -> String {
    format!(
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{t} · ttr</title><style nonce="{n}">{STYLE}</style></head>
<body><header><a class="brand" href="/">ttr</a><a href="/">Queues</a></header><main><h1>{t}</h1><p id="message">{m}</p><p><a href="/">Back to the queues</a></p></main></body></html>"#,
        t = esc(title),
        n = esc(nonce),
        m = esc(text)
    )
}

/// One queue on the overview.
pub(crate) struct QueueRow {
    pub(crate) info: QueueInfo,
    pub(crate) stats: Stats,
    pub(crate) samples: Vec<Sample>,
}

fn overdue_cell(stats: &Stats) -> String {
    if stats.due_now == 0 {
        return "-".to_owned();
    }
    let class = if stats.overdue >= Duration::from_secs(60) {
        "hot"
    } else if stats.overdue >= Duration::from_secs(5) {
        "warm"
    } else {
        ""
    };
    format!(
        r#"<span class="{class}">{}</span>"#,
        human::duration(stats.overdue)
    )
}

fn count_cell(key: &str, n: u64, alarm: bool) -> String {
    let class = if alarm && n > 0 { " hot" } else { "" };
    format!(r#"<td class="n{class}" data-k="{key}">{n}</td>"#)
}

fn stats_cells(stats: &Stats) -> String {
    format!(
        "{}{}<td class=\"n\" data-k=\"overdue\">{}</td>{}{}{}",
        count_cell("pending", stats.pending, false),
        count_cell("due", stats.due_now, false),
        overdue_cell(stats),
        count_cell("leased", stats.leased, false),
        count_cell("expired", stats.expired_leases, true),
        count_cell("dead", stats.dead, true),
    )
}

const STATS_HEAD: &str = r#"<th class="n">Pending</th><th class="n">Due now</th><th class="n">Most overdue</th><th class="n">Leased</th><th class="n">Expired leases</th><th class="n">Dead</th>"#;

/// The depth chart over the samples kept: the last hour, or since this
/// process began sampling (at least a minute), whichever is shorter.
fn depth_chart(title: &str, now: SystemTime, samples: &[Sample]) -> String {
    let window = samples
        .first()
        .map_or(WINDOW, |s| now.duration_since(s.at).unwrap_or_default())
        .clamp(Duration::from_secs(60), WINDOW);
    let title = format!("{title} · last {} min", window.as_secs().div_ceil(60));
    let series = [
        Series {
            label: "pending",
            color: "#5b8def",
            points: samples.iter().map(|s| (s.at, s.pending)).collect(),
        },
        Series {
            label: "due now",
            color: "#e0812f",
            points: samples.iter().map(|s| (s.at, s.due_now)).collect(),
        },
        Series {
            label: "leased",
            color: "#3aa17e",
            points: samples.iter().map(|s| (s.at, s.leased)).collect(),
        },
    ];
    chart::lines(&title, now, window, &series)
}

pub(crate) fn overview(view: &View<'_>, rows: &[QueueRow]) -> String {
    let mut body = format!(
        r#"<h1>Queues</h1><p class="sub">{} queue(s) on {} · refreshed every {}</p>"#,
        rows.len(),
        esc(&redacted(&view.app.redis.url)),
        human::duration(view.app.refresh)
    );
    if rows.is_empty() {
        body.push_str(
            r#"<p class="note" id="empty">No queues found. A queue is registered by its first schedule call; an older producer's queue is found by its keys.</p>"#,
        );
        return layout(view, "Queues", true, &body);
    }
    let _ = write!(
        body,
        r#"<table id="queues"><thead><tr><th>Queue</th><th>Partitions</th>{STATS_HEAD}</tr></thead><tbody>"#
    );
    for row in rows {
        let name = &row.info.name;
        let partitions = if row.info.partitions > 1 {
            let mut inner = format!(
                r#"<details><summary>{}</summary><table><thead><tr><th>#</th>{STATS_HEAD}</tr></thead><tbody>"#,
                row.info.partitions
            );
            for p in &row.stats.partitions {
                let _ = write!(
                    inner,
                    r#"<tr data-partition="{}"><td>{}</td>{}</tr>"#,
                    p.partition.unwrap_or(0),
                    p.partition.unwrap_or(0),
                    stats_cells(p)
                );
            }
            inner.push_str("</tbody></table></details>");
            inner
        } else {
            "1".to_owned()
        };
        let _ = write!(
            body,
            r#"<tr data-queue="{}"><td><a href="/queue/{}">{}</a></td><td>{partitions}</td>{}</tr>"#,
            esc(name),
            url(name),
            esc(name),
            stats_cells(&row.stats)
        );
    }
    body.push_str("</tbody></table>");
    body.push_str(r#"<div class="charts">"#);
    for row in rows {
        body.push_str(&depth_chart(
            &esc(&row.info.name),
            row.stats.redis_time,
            &row.samples,
        ));
    }
    body.push_str("</div>");
    layout(view, "Queues", true, &body)
}

/// Everything the queue page shows.
pub(crate) struct QueuePage<'a> {
    pub(crate) view: View<'a>,
    pub(crate) name: &'a str,
    pub(crate) partitions: u32,
    pub(crate) stats: &'a Stats,
    pub(crate) samples: &'a [Sample],
    pub(crate) lateness: Option<&'a Lateness>,
    pub(crate) listing: Listing,
    pub(crate) page_no: usize,
    pub(crate) page: Option<&'a Page>,
    /// A searched id and what was found.
    pub(crate) job: Option<(&'a str, Option<&'a JobInfo>)>,
}

fn card(key: &str, label: &str, value: String) -> String {
    format!(
        r#"<div class="card" data-k="{key}"><div class="k">{label}</div><div class="v">{value}</div></div>"#
    )
}

fn csrf_field(app: &App) -> String {
    format!(
        r#"<input type="hidden" name="csrf" value="{}">"#,
        esc(&app.csrf)
    )
}

pub(crate) fn queue_page(q: &QueuePage<'_>) -> String {
    let view = &q.view;
    let name = q.name;
    let s = q.stats;
    let mut body = format!(
        r#"<p class="sub"><a href="/">Queues</a> / </p><h1>{}</h1><p class="sub">{} partition(s) · {} {}</p>"#,
        esc(name),
        q.partitions,
        crate::commands::clock_name(&view.app.redis.url),
        human::utc(s.redis_time)
    );
    body.push_str(r#"<div class="cards">"#);
    body.push_str(&card("pending", "Pending", s.pending.to_string()));
    body.push_str(&card("due", "Due now", s.due_now.to_string()));
    body.push_str(&card("overdue", "Most overdue", overdue_cell(s)));
    body.push_str(&card("leased", "Leased", s.leased.to_string()));
    body.push_str(&card(
        "expired",
        "Expired leases",
        s.expired_leases.to_string(),
    ));
    body.push_str(&card("dead", "Dead", s.dead.to_string()));
    body.push_str("</div>");

    body.push_str(r#"<div class="charts">"#);
    body.push_str(&depth_chart("Depth", s.redis_time, q.samples));
    match q.lateness {
        Some(l) if l.total() > 0 => body.push_str(&chart::histogram(
            "Lateness of recent claims · last hour",
            l,
        )),
        _ => body.push_str(&chart::histogram(
            "Lateness of recent claims · last hour",
            &Lateness::default(),
        )),
    }
    body.push_str("</div>");

    let _ = write!(
        body,
        r#"<form class="bar" method="get" action="/queue/{}"><input type="search" name="job" placeholder="job id" value="{}" id="search"><button>Find job</button></form>"#,
        url(name),
        esc(q.job.map_or("", |(id, _)| id))
    );
    if let Some((id, found)) = q.job {
        body.push_str(&job_card(view, name, id, found));
    }

    let tabs = [
        (Listing::Waiting, "Waiting", s.pending),
        (Listing::Due, "Due now", s.due_now),
        (Listing::Leased, "Leased", s.leased),
        (Listing::Dead, "Dead", s.dead),
    ];
    body.push_str(r#"<nav class="tabs">"#);
    for (listing, label, n) in tabs {
        let on = if listing == q.listing { " on" } else { "" };
        let _ = write!(
            body,
            r#"<a class="tab{on}" id="tab-{l}" href="/queue/{}?tab={l}">{label} ({n})</a>"#,
            url(name),
            l = listing.as_str()
        );
    }
    body.push_str("</nav>");
    if let Some(page) = q.page {
        body.push_str(&listing_table(q, page));
    }
    layout(view, name, q.job.is_none(), &body)
}

fn can_act_note(view: &View<'_>) -> &'static str {
    if !view.actions_allowed {
        r#"<p class="note" id="read-only">Read-only dashboard: start <code>ttr serve</code> with <code>--token</code> to requeue, purge, cancel or promote.</p>"#
    } else if !view.signed_in {
        r#"<p class="note" id="log-in"><a href="/login">Log in</a> to requeue, purge, cancel or promote.</p>"#
    } else {
        ""
    }
}

/// Action buttons: what each does and its label.
type Buttons = &'static [(Action, &'static str)];

fn listing_table(q: &QueuePage<'_>, page: &Page) -> String {
    let view = &q.view;
    let act = view.signed_in;
    let name = q.name;
    let tab = q.listing.as_str();
    let (row_actions, bulk): (Buttons, Buttons) = match q.listing {
        Listing::Waiting | Listing::Due => (
            &[(Action::Promote, "Promote"), (Action::Cancel, "Cancel")],
            &[
                (Action::Promote, "Promote selected"),
                (Action::Cancel, "Cancel selected"),
            ],
        ),
        Listing::Dead => (
            &[(Action::Requeue, "Requeue"), (Action::Purge, "Purge")],
            &[
                (Action::Requeue, "Requeue selected"),
                (Action::Purge, "Purge selected"),
                (Action::RequeueAll, "Requeue all"),
                (Action::PurgeAll, "Purge all"),
            ],
        ),
        Listing::Leased => (&[], &[]),
    };
    let when = match q.listing {
        Listing::Waiting | Listing::Due => "Due",
        Listing::Leased => "Lease until",
        Listing::Dead => "Died",
    };
    let mut out = format!(
        r#"<form method="post" action="/queue/{}/action" id="jobs">{}<input type="hidden" name="tab" value="{tab}">"#,
        url(name),
        csrf_field(view.app)
    );
    out.push_str(can_act_note(view));
    if act && !bulk.is_empty() {
        out.push_str(r#"<div class="bar">"#);
        for (a, label) in bulk {
            let class = if matches!(a, Action::Purge | Action::PurgeAll | Action::Cancel) {
                "danger"
            } else {
                ""
            };
            let _ = write!(
                out,
                r#"<button class="{class}" name="action" value="{}" id="bulk-{}">{label}</button>"#,
                a.as_str(),
                a.as_str()
            );
        }
        out.push_str("</div>");
    }
    let select_all = if act && !row_actions.is_empty() {
        r#"<th><input type="checkbox" id="select-all" title="select all"></th>"#
    } else {
        ""
    };
    let _ = write!(
        out,
        r#"<table id="listing" data-listing="{tab}"><thead><tr>{select_all}<th>Id</th><th class="n">Partition</th><th class="n">Attempts</th><th>{when}</th><th>Payload</th><th>Last error</th>{}</tr></thead><tbody>"#,
        if act && !row_actions.is_empty() {
            "<th></th>"
        } else {
            ""
        }
    );
    for job in &page.jobs {
        let id = job.id.as_str();
        let check = if act && !row_actions.is_empty() {
            format!(
                r#"<td><input type="checkbox" name="id" value="{}"></td>"#,
                esc(id)
            )
        } else {
            String::new()
        };
        let mut buttons = String::new();
        if act && !row_actions.is_empty() {
            buttons.push_str("<td>");
            for (a, label) in row_actions {
                let _ = write!(
                    buttons,
                    r#"<button name="do" value="{}:{}" data-action="{}">{label}</button> "#,
                    a.as_str(),
                    esc(id),
                    a.as_str()
                );
            }
            buttons.push_str("</td>");
        }
        let _ = write!(
            out,
            r#"<tr data-id="{}">{check}<td class="id"><a href="/queue/{}?tab={tab}&amp;job={}">{}</a></td><td class="n">{}</td><td class="n">{}</td><td>{}</td><td>{}</td><td class="err">{}</td>{buttons}</tr>"#,
            esc(id),
            url(name),
            url(id),
            esc(id),
            job.partition,
            job.attempts,
            esc(&relative(job.at, page.redis_time)),
            esc(&text::payload(&job.payload_preview, job.payload_len, 40)),
            esc(job.last_error.as_deref().unwrap_or("")),
        );
    }
    out.push_str("</tbody></table></form>");
    if page.jobs.is_empty() {
        out.push_str(r#"<p class="note" id="none">Nothing here.</p>"#);
    }
    let first = page.offset + 1;
    let last = page.offset + page.jobs.len();
    let mut pager = format!(
        r#"<div class="pager"><span>{}–{} of {}</span>"#,
        first.min(last.max(1)),
        last,
        page.total
    );
    if q.page_no > 0 {
        let _ = write!(
            pager,
            r#"<a class="button" href="/queue/{}?tab={tab}&amp;page={}">Previous</a>"#,
            url(name),
            q.page_no - 1
        );
    }
    if (last as u64) < page.total {
        let _ = write!(
            pager,
            r#"<a class="button" href="/queue/{}?tab={tab}&amp;page={}">Next</a>"#,
            url(name),
            q.page_no + 1
        );
    }
    pager.push_str("</div>");
    out.push_str(&pager);
    out
}

fn job_card(view: &View<'_>, name: &str, id: &str, found: Option<&JobInfo>) -> String {
    let Some(job) = found else {
        return format!(
            r#"<div class="card" id="job"><p>No job <code>{}</code> in this queue: done, cancelled, purged or never scheduled.</p></div>"#,
            esc(id)
        );
    };
    let now = job.redis_time;
    let at = |t: SystemTime| format!("{} ({})", human::utc(t), relative(t, now));
    let mut rows = format!(
        r#"<tr><th>Id</th><td class="id">{}</td></tr><tr><th>State</th><td data-k="state">{}</td></tr><tr><th>Partition</th><td>{}</td></tr>"#,
        esc(id),
        job.state,
        job.partition
    );
    if let Some(due) = job.due {
        let _ = write!(rows, "<tr><th>Due</th><td>{}</td></tr>", esc(&at(due)));
    }
    if let Some(expiry) = job.lease_expiry {
        let _ = write!(
            rows,
            "<tr><th>Lease until</th><td>{}</td></tr>",
            esc(&at(expiry))
        );
    }
    if let Some(died) = job.died_at {
        let _ = write!(rows, "<tr><th>Died</th><td>{}</td></tr>", esc(&at(died)));
    }
    let _ = write!(
        rows,
        r#"<tr><th>Attempts</th><td>{}</td></tr><tr><th>Last error</th><td class="err">{}</td></tr><tr><th>Payload ({})</th><td><pre>{}</pre></td></tr>"#,
        job.attempts,
        esc(job.last_error.as_deref().unwrap_or("-")),
        human::bytes(job.payload.len() as u64),
        esc(&text::payload(&job.payload, job.payload.len() as u64, 4096))
    );
    let mut actions = String::new();
    let possible: &[(Action, &str)] = match job.state {
        JobState::Waiting => &[
            (Action::Promote, "Promote: due now"),
            (Action::Cancel, "Cancel"),
        ],
        JobState::Dead => &[(Action::Requeue, "Requeue"), (Action::Purge, "Purge")],
        _ => &[],
    };
    if view.signed_in && !possible.is_empty() {
        let _ = write!(
            actions,
            r#"<form class="bar" method="post" action="/queue/{}/action">{}<input type="hidden" name="id" value="{}">"#,
            url(name),
            csrf_field(view.app),
            esc(id)
        );
        for (a, label) in possible {
            let _ = write!(
                actions,
                r#"<button name="action" value="{}">{label}</button>"#,
                a.as_str()
            );
        }
        actions.push_str("</form>");
    }
    format!(r#"<div class="card" id="job"><table>{rows}</table>{actions}</div>"#)
}

pub(crate) fn confirm_page(
    app: &App,
    nonce: &str,
    name: &str,
    action: Action,
    ids: &[String],
    back: &str,
) -> String {
    let view = View {
        app,
        nonce,
        signed_in: true,
        actions_allowed: true,
    };
    let mut hidden = format!(
        r#"{}<input type="hidden" name="action" value="{}"><input type="hidden" name="confirm" value="yes"><input type="hidden" name="tab" value="{}">"#,
        csrf_field(app),
        action.as_str(),
        esc(back)
    );
    let mut list = String::new();
    for (i, id) in ids.iter().enumerate() {
        let _ = write!(
            hidden,
            r#"<input type="hidden" name="id" value="{}">"#,
            esc(id)
        );
        if i < 50 {
            let _ = write!(list, "<li><code>{}</code></li>", esc(id));
        }
    }
    if ids.len() > 50 {
        let _ = write!(list, "<li>and {} more</li>", ids.len() - 50);
    }
    let body = format!(
        r#"<h1>Confirm</h1><p id="question">{} in queue <b>{}</b>?</p><ul id="ids">{list}</ul>
<form method="post" action="/queue/{}/action" class="bar">{hidden}<button class="primary" id="confirm">Yes, {}</button><a class="button" href="/queue/{}?tab={}">No, go back</a></form>"#,
        esc(&action.describe(ids.len())),
        esc(name),
        url(name),
        action.as_str().replace('-', " "),
        url(name),
        url(back)
    );
    layout(&view, "Confirm", false, &body)
}

pub(crate) fn done_page(
    app: &App,
    nonce: &str,
    name: &str,
    action: Action,
    changed: u64,
    unchanged: u64,
    back: &str,
) -> String {
    let view = View {
        app,
        nonce,
        signed_in: true,
        actions_allowed: true,
    };
    let verb = match action {
        Action::Requeue | Action::RequeueAll => "Requeued",
        Action::Purge | Action::PurgeAll => "Purged",
        Action::Cancel => "Cancelled",
        Action::Promote => "Promoted",
    };
    let skipped = if unchanged > 0 {
        format!(" ({unchanged} had moved on meanwhile and were left alone)")
    } else {
        String::new()
    };
    let body = format!(
        r#"<h1>Done</h1><p id="done" data-changed="{changed}">{verb} {changed} job(s) in <b>{}</b>{skipped}.</p><p><a class="button" id="back" href="/queue/{}?tab={}">Back to {}</a></p>"#,
        esc(name),
        url(name),
        url(back),
        esc(name)
    );
    layout(&view, "Done", false, &body)
}

pub(crate) fn login_page(app: &App, nonce: &str, error: Option<&str>) -> String {
    let view = View {
        app,
        nonce,
        signed_in: false,
        actions_allowed: app.token.is_some(),
    };
    let error = error.map_or(String::new(), |e| {
        format!(r#"<p class="hot" id="error">{}</p>"#, esc(e))
    });
    let body = format!(
        r#"<h1>Log in</h1><p class="sub">The token given to <code>ttr serve --token</code> allows requeue, purge, cancel and promote.</p>{error}
<form method="post" action="/login" class="bar">{}<input type="password" name="token" id="token" placeholder="token" autocomplete="current-password"><button class="primary" id="login">Log in</button></form>"#,
        csrf_field(app)
    );
    layout(&view, "Log in", false, &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_is_escaped() {
        assert_eq!(
            esc(r#"<script>alert("1")</script> & 'x'"#),
            "&lt;script&gt;alert(&quot;1&quot;)&lt;/script&gt; &amp; &#39;x&#39;"
        );
        assert_eq!(url("a b/<c>?&"), "a%20b%2F%3Cc%3E%3F%26");
    }

    #[test]
    fn passwords_stay_out_of_pages() {
        assert_eq!(redacted("redis://:secret@h:6379/0"), "redis://***@h:6379/0");
        assert_eq!(
            redacted("redis://127.0.0.1:6379/"),
            "redis://127.0.0.1:6379/"
        );
    }
}
