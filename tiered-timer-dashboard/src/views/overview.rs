//! The overview: every queue with its counts (per partition on click) and
//! its depth chart.

use maud::{html, Markup};
use tiered_timer_jobs::Stats;

use super::{chart, layout, stats_cells, stats_head, Crumb};
use crate::app::{App, Listed, Sample};
use crate::human;
use crate::respond::Visit;

/// One queue on the overview.
pub(crate) struct Row {
    pub(crate) queue: Listed,
    pub(crate) stats: Stats,
    pub(crate) samples: Vec<Sample>,
}

pub(crate) fn page(app: &App, visit: &Visit, rows: &[Row]) -> Markup {
    let body = html! {
        h1 { "Queues" }
        p.sub {
            (rows.len()) " queue(s)"
            @if let Some(store) = app.store_label() { " on " (store) }
            " · refreshed every " (human::duration(app.settings.refresh))
        }
        @if rows.is_empty() {
            p.note #empty {
                "No queues found. A queue is registered by its first schedule call; an older \
                 producer's queue is found by its keys."
            }
        } @else {
            (table(visit, rows))
            div.charts {
                @for row in rows {
                    (chart::depth(&row.queue.name, row.stats.redis_time, &row.samples))
                }
            }
        }
    };
    layout(app, visit, &[Crumb::here("Queues")], true, body)
}

fn table(visit: &Visit, rows: &[Row]) -> Markup {
    html! {
        table #queues {
            thead { tr { th { "Queue" } th { "Partitions" } (stats_head()) } }
            tbody {
                @for row in rows {
                    tr data-queue=(row.queue.name) {
                        td { a href=(visit.queue_url(&row.queue.name)) { (row.queue.name) } }
                        td { (partitions(row)) }
                        (stats_cells(&row.stats))
                    }
                }
            }
        }
    }
}

/// The partition count, unfolding into each partition's counts.
fn partitions(row: &Row) -> Markup {
    html! {
        @if row.queue.partitions > 1 {
            details {
                summary { (row.queue.partitions) }
                table {
                    thead { tr { th { "#" } (stats_head()) } }
                    tbody {
                        @for p in &row.stats.partitions {
                            @let n = p.partition.unwrap_or(0);
                            tr data-partition=(n) { td { (n) } (stats_cells(p)) }
                        }
                    }
                }
            }
        } @else {
            "1"
        }
    }
}
