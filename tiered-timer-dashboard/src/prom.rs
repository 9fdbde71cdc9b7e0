//! `GET /metrics`: every queue's numbers in Prometheus' text format
//! (version 0.0.4), per queue and partition, read when scraped, written by
//! the Prometheus project's own Rust encoder (`prometheus-client`), which
//! escapes label values and help texts as the format asks.
//!
//! The numbers are read first (asynchronously, from the queues), then
//! handed to the encoder as one [`Collector`] over that snapshot: nothing
//! is kept between scrapes.

use axum::extract::State;
use axum::http::header::{self, HeaderValue};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{prometheus_text, DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use tiered_timer_jobs::{Lateness, Stats};

use crate::app::App;
use crate::respond::Shared;

/// A gauge: its name, its help, and its value in a partition's stats.
struct Gauge {
    name: &'static str,
    help: &'static str,
    value: fn(&Stats) -> Value,
}

/// A gauge's value: counts are written as integers, seconds with their
/// fraction.
enum Value {
    Count(u64),
    Seconds(f64),
}

/// The gauges, one family each, a sample per queue and partition.
const GAUGES: &[Gauge] = &[
    Gauge {
        name: "ttr_queue_pending",
        help: "Waiting jobs: scheduled, not leased, not dead.",
        value: |s| Value::Count(s.pending),
    },
    Gauge {
        name: "ttr_queue_due",
        help: "Waiting jobs whose due time has passed (by the store's clock).",
        value: |s| Value::Count(s.due_now),
    },
    Gauge {
        name: "ttr_queue_most_overdue_seconds",
        help: "The store's now minus the earliest due time of a due job; 0 when none is due.",
        value: |s| Value::Seconds(s.overdue.as_secs_f64()),
    },
    Gauge {
        name: "ttr_queue_leased",
        help: "Jobs leased to workers, expired leases included.",
        value: |s| Value::Count(s.leased),
    },
    Gauge {
        name: "ttr_queue_expired_leases",
        help: "Leased jobs whose lease ran out and that no worker has reclaimed yet.",
        value: |s| Value::Count(s.expired_leases),
    },
    Gauge {
        name: "ttr_queue_dead",
        help: "Dead letters.",
        value: |s| Value::Count(s.dead),
    },
];

const LATENESS: &str = "ttr_queue_claim_lateness_seconds";
const LATENESS_HELP: &str = "How late jobs were claimed (the store's now minus the due time), \
                             as recorded by the workers. No sum is kept: _sum is NaN.";

/// What one scrape read: per queue, its stats and lateness.
#[derive(Debug)]
struct Snapshot(Vec<(String, Stats, Lateness)>);

impl Collector for Snapshot {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        for gauge in GAUGES {
            let mut family =
                encoder.encode_descriptor(gauge.name, gauge.help, None, MetricType::Gauge)?;
            for (name, stats, _) in &self.0 {
                for p in &stats.partitions {
                    let partition = p.partition.unwrap_or(0).to_string();
                    let labels = [("queue", name.as_str()), ("partition", partition.as_str())];
                    let mut sample = family.encode_family(&labels)?;
                    match (gauge.value)(p) {
                        Value::Count(n) => sample.encode_gauge(&n)?,
                        Value::Seconds(s) => sample.encode_gauge(&s)?,
                    }
                }
            }
        }
        // The claim-lateness histogram the workers keep in the store, per
        // queue: counts per bucket only, so the sum is not known.
        let mut family =
            encoder.encode_descriptor(LATENESS, LATENESS_HELP, None, MetricType::Histogram)?;
        for (name, _, lateness) in &self.0 {
            let buckets: Vec<(f64, u64)> = lateness
                .buckets()
                .into_iter()
                .map(|(bound, count)| (bound.map_or(f64::INFINITY, |b| b.as_secs_f64()), count))
                .collect();
            family
                .encode_family(&[("queue", name.as_str())])?
                .encode_histogram::<NoLabelSet>(f64::NAN, lateness.total(), &buckets, None)?;
        }
        Ok(())
    }
}

/// The exposition of these queues' numbers.
fn render(read: Vec<(String, Stats, Lateness)>) -> Result<String, std::fmt::Error> {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Snapshot(read)));
    let mut out = String::new();
    prometheus_text::encode(&mut out, &registry)?;
    Ok(out)
}

/// Reads every queue's stats and lateness.
async fn read_all(app: &App) -> Result<Vec<(String, Stats, Lateness)>, String> {
    let mut read = Vec::new();
    for listed in app.queues().await? {
        let queue = app.queue(&listed.name).await?;
        let (stats, lateness) = app.read(&queue).await.map_err(|e| e.to_string())?;
        read.push((listed.name, stats, lateness));
    }
    Ok(read)
}

/// `GET /metrics`.
pub(crate) async fn metrics(State(app): State<Shared>) -> Response {
    App::start_sampling(&app);
    let text = match read_all(&app).await.map(render) {
        Ok(Ok(text)) => text,
        Ok(Err(e)) => return (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
        Err(e) => return (StatusCode::BAD_GATEWAY, e).into_response(),
    };
    let mut response = text.into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(prometheus_text::CONTENT_TYPE),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_scrape_still_declares_every_family() {
        let text = render(Vec::new()).unwrap();
        for gauge in GAUGES {
            assert!(
                text.contains(&format!("# TYPE {} gauge\n", gauge.name)),
                "{text}"
            );
        }
        assert!(
            text.contains(&format!("# TYPE {LATENESS} histogram\n")),
            "{text}"
        );
    }
}
