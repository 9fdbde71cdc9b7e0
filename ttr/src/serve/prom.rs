//! `GET /metrics`: every queue's numbers in Prometheus' text format
//! (version 0.0.4), per queue and partition, read when scraped.

use std::fmt::Write;

use tiered_timer_jobs::{Lateness, Stats};

/// A label value, escaped as the format asks: `\\`, `\"`, `\n`.
fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The gauges, one family each, a sample per queue and partition.
const GAUGES: &[(&str, &str)] = &[
    (
        "ttr_queue_pending",
        "Waiting jobs: scheduled, not leased, not dead.",
    ),
    (
        "ttr_queue_due",
        "Waiting jobs whose due time has passed (by Redis' clock).",
    ),
    (
        "ttr_queue_most_overdue_seconds",
        "Redis' now minus the earliest due time of a due job; 0 when none is due.",
    ),
    (
        "ttr_queue_leased",
        "Jobs leased to workers, expired leases included.",
    ),
    (
        "ttr_queue_expired_leases",
        "Leased jobs whose lease ran out and that no worker has reclaimed yet.",
    ),
    ("ttr_queue_dead", "Dead letters."),
];

fn value(stats: &Stats, family: &str) -> String {
    match family {
        "ttr_queue_pending" => stats.pending.to_string(),
        "ttr_queue_due" => stats.due_now.to_string(),
        "ttr_queue_most_overdue_seconds" => format!("{:.3}", stats.overdue.as_secs_f64()),
        "ttr_queue_leased" => stats.leased.to_string(),
        "ttr_queue_expired_leases" => stats.expired_leases.to_string(),
        _ => stats.dead.to_string(),
    }
}

/// The whole exposition for these queues (name, stats, lateness).
pub(crate) fn render(queues: &[(String, Stats, Lateness)]) -> String {
    let mut out = String::new();
    for (family, help) in GAUGES {
        let _ = writeln!(out, "# HELP {family} {help}\n# TYPE {family} gauge");
        for (name, stats, _) in queues {
            for p in &stats.partitions {
                let _ = writeln!(
                    out,
                    "{family}{{queue=\"{}\",partition=\"{}\"}} {}",
                    label(name),
                    p.partition.unwrap_or(0),
                    value(p, family)
                );
            }
        }
    }
    // The claim-lateness histogram the workers keep in Redis, per queue.
    // Buckets are cumulative, as Prometheus wants; there is no _sum (the
    // workers keep counts per bucket only).
    let family = "ttr_queue_claim_lateness_seconds";
    let _ = writeln!(
        out,
        "# HELP {family} How late jobs were claimed (Redis' now minus the due time), as recorded by the workers.\n# TYPE {family} histogram"
    );
    for (name, _, lateness) in queues {
        let mut cumulative = 0;
        for (bound, count) in lateness.buckets() {
            cumulative += count;
            let le = bound.map_or("+Inf".to_owned(), |b| format!("{}", b.as_secs_f64()));
            let _ = writeln!(
                out,
                "{family}_bucket{{queue=\"{}\",le=\"{le}\"}} {cumulative}",
                label(name)
            );
        }
        let _ = writeln!(
            out,
            "{family}_count{{queue=\"{}\"}} {cumulative}",
            label(name)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(label(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(label("a\nb"), "a\\nb");
    }
}
