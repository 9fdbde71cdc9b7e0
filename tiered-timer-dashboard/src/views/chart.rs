//! Charts as inline SVG templates, drawn on the server: no script, no
//! library. Coordinates are computed here; every label goes through the
//! templates' escaping like any other value.

use std::time::{Duration, SystemTime};

use maud::{html, Markup};
use tiered_timer_jobs::{Lateness, Throughput};

use crate::app::{Sample, WINDOW};
use crate::human;

const WIDTH: f64 = 560.0;
const HEIGHT: f64 = 140.0;
const LEFT: f64 = 44.0;
const BOTTOM: f64 = 20.0;
const TOP: f64 = 10.0;

/// One line of a time chart.
pub(crate) struct Series<'a> {
    pub(crate) label: &'a str,
    pub(crate) color: &'a str,
    pub(crate) points: Vec<(SystemTime, u64)>,
}

/// A coordinate, to a tenth.
fn at(v: f64) -> String {
    format!("{v:.1}")
}

fn view_box() -> String {
    format!("0 0 {WIDTH} {HEIGHT}")
}

/// The depth chart (pending, due now, leased) over the samples kept: the
/// last hour, or since sampling began (at least a minute), whichever is
/// shorter.
pub(crate) fn depth(title: &str, now: SystemTime, samples: &[Sample]) -> Markup {
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
    lines(&title, now, window, &series)
}

/// Lines over the last `window` up to `now`: x is time, y from 0 to the
/// largest value; the legend names each line with its latest value.
pub(crate) fn lines(
    title: &str,
    now: SystemTime,
    window: Duration,
    series: &[Series<'_>],
) -> Markup {
    let max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .max()
        .unwrap_or(0)
        .max(1);
    let plot_w = WIDTH - LEFT - 8.0;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let x = |t: SystemTime| {
        let ago = now.duration_since(t).unwrap_or_default().as_secs_f64();
        LEFT + plot_w * (1.0 - (ago / window.as_secs_f64()).min(1.0))
    };
    let y = |v: u64| TOP + plot_h * (1.0 - v as f64 / max as f64);
    let points = |s: &Series<'_>| {
        s.points
            .iter()
            .map(|(t, v)| format!("{},{}", at(x(*t)), at(y(*v))))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let minutes = window.as_secs().div_ceil(60);
    html! {
        figure {
            figcaption { (title) }
            svg.chart viewBox=(view_box()) role="img" aria-label=(title) {
                // Grid and axis: 0, half, max.
                @for value in [0, max / 2, max] {
                    line x1=(LEFT) y1=(at(y(value))) x2=(WIDTH - 8.0) y2=(at(y(value))) stroke="#e3e6ea" {}
                    text x=(LEFT - 4.0) y=(at(y(value) + 4.0)) text-anchor="end" class="axis" { (value) }
                }
                text x=(LEFT) y=(HEIGHT - 4.0) class="axis" { "-" (minutes) " min" }
                text x=(WIDTH - 8.0) y=(HEIGHT - 4.0) text-anchor="end" class="axis" { "now" }
                @for s in series.iter().filter(|s| !s.points.is_empty()) {
                    polyline fill="none" stroke=(s.color) stroke-width="2" points=(points(s)) {}
                    @if let Some((t, v)) = s.points.last() {
                        circle cx=(at(x(*t))) cy=(at(y(*v))) r="3" fill=(s.color) {}
                    }
                }
            }
            div.legend {
                @for s in series {
                    span {
                        i style={ "background:" (s.color) } {}
                        (s.label) " "
                        b { @if let Some(p) = s.points.last() { (p.1) } @else { "-" } }
                    }
                }
            }
        }
    }
}

/// Jobs processed and failed per minute, as the store counted them (so
/// minutes from before the dashboard started are there): one bar per
/// minute, processed below and failed stacked on it, each minute an SVG
/// group carrying its start (seconds since the epoch) and counts.
pub(crate) fn throughput(title: &str, throughput: &Throughput) -> Markup {
    let minutes = &throughput.minutes;
    let max = minutes
        .iter()
        .map(|m| m.processed + m.failed)
        .max()
        .unwrap_or(0)
        .max(1);
    let plot_w = WIDTH - LEFT - 8.0;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let bar = plot_w / minutes.len().max(1) as f64;
    let y = |v: u64| plot_h * v as f64 / max as f64;
    let caption = format!(
        "{title} · last {} min: {} processed, {} failed",
        minutes.len(),
        throughput.processed(),
        throughput.failed()
    );
    html! {
        figure #throughput {
            figcaption { (caption) }
            svg.chart viewBox=(view_box()) role="img" aria-label=(caption) {
                @for value in [0, max / 2, max] {
                    line x1=(LEFT) y1=(at(TOP + plot_h - y(value))) x2=(WIDTH - 8.0) y2=(at(TOP + plot_h - y(value))) stroke="#e3e6ea" {}
                    text x=(LEFT - 4.0) y=(at(TOP + plot_h - y(value) + 4.0)) text-anchor="end" class="axis" { (value) }
                }
                @if let Some(first) = minutes.first() {
                    text x=(LEFT) y=(HEIGHT - 4.0) class="axis" { (human::utc(first.start)) }
                }
                text x=(WIDTH - 8.0) y=(HEIGHT - 4.0) text-anchor="end" class="axis" { "now" }
                @for (i, m) in minutes.iter().enumerate() {
                    @let left = LEFT + i as f64 * bar;
                    @let ok = y(m.processed);
                    @let bad = y(m.failed);
                    @let start = m.start.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_secs();
                    g.minute data-start=(start) data-processed=(m.processed) data-failed=(m.failed) {
                        title { (human::utc(m.start)) ": " (m.processed) " processed, " (m.failed) " failed" }
                        @if m.processed > 0 {
                            rect x=(at(left + 0.5)) y=(at(TOP + plot_h - ok)) width=(at((bar - 1.0).max(0.5))) height=(at(ok)) fill="#3aa17e" {}
                        }
                        @if m.failed > 0 {
                            rect x=(at(left + 0.5)) y=(at(TOP + plot_h - ok - bad)) width=(at((bar - 1.0).max(0.5))) height=(at(bad)) fill="#d64545" {}
                        }
                    }
                }
            }
            div.legend {
                span { i style="background:#3aa17e" {} "processed " b { (throughput.processed()) } }
                span { i style="background:#d64545" {} "failed " b { (throughput.failed()) } }
            }
        }
    }
}

/// The lateness histogram as bars, one per bucket, with the count above
/// each non-empty bar and the bucket's bound below.
pub(crate) fn histogram(title: &str, lateness: &Lateness) -> Markup {
    let buckets = lateness.buckets();
    let max = buckets.iter().map(|b| b.1).max().unwrap_or(0).max(1);
    let plot_w = WIDTH - 16.0;
    let plot_h = HEIGHT - TOP - BOTTOM - 10.0;
    let bar = plot_w / buckets.len() as f64;
    let total = lateness.total();
    let summary = match (lateness.quantile(0.5), lateness.quantile(0.99)) {
        (Some(p50), Some(p99)) => format!(
            "{total} claims; half within {}, 99% within {}",
            human::duration(p50),
            human::duration(p99)
        ),
        _ if total > 0 => format!("{total} claims"),
        _ => "no claims recorded yet".to_owned(),
    };
    html! {
        figure #lateness {
            figcaption { (title) }
            svg.chart viewBox=(view_box()) role="img" aria-label=(title) {
                @for (i, (bound, count)) in buckets.iter().enumerate() {
                    @let h = plot_h * (*count as f64 / max as f64);
                    @let left = 8.0 + i as f64 * bar;
                    @let top = TOP + 10.0 + plot_h - h;
                    @let label = bucket_label(*bound);
                    rect x=(at(left + 1.0)) y=(at(top)) width=(at(bar - 2.0)) height=(at(h)) fill="#5b8def" {
                        title { (label) ": " (count) }
                    }
                    @if *count > 0 {
                        text x=(at(left + bar / 2.0)) y=(at(top - 2.0)) text-anchor="middle" class="axis" { (count) }
                    }
                    @if i % 2 == 0 || bound.is_none() {
                        text x=(at(left + bar / 2.0)) y=(at(HEIGHT - 4.0)) text-anchor="middle" class="axis" { (label) }
                    }
                }
            }
            div.legend { (summary) }
        }
    }
}

fn bucket_label(bound: Option<Duration>) -> String {
    match bound {
        Some(d) if d.is_zero() => "0".to_owned(),
        Some(d) => short(d),
        None => ">1h".to_owned(),
    }
}

/// A bucket bound, short: `1ms`, `500ms`, `2s`, `5m`, `1h`.
fn short(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{}s", ms / 1000)
    } else if ms < 3_600_000 {
        format!("{}m", ms / 60_000)
    } else {
        format!("{}h", ms / 3_600_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_chart_places_points_by_time_and_value() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(10_000);
        let svg = lines(
            "depth",
            now,
            Duration::from_secs(3600),
            &[Series {
                label: "pending",
                color: "#123456",
                points: vec![(now - Duration::from_secs(3600), 0), (now, 10)],
            }],
        )
        .into_string();
        // The first point at the left edge and the bottom, the last at the
        // right edge and the top.
        assert!(
            svg.contains(&format!(
                r#"points="{LEFT:.1},{:.1} {:.1},{TOP:.1}""#,
                HEIGHT - BOTTOM,
                WIDTH - 8.0
            )),
            "{svg}"
        );
        assert!(svg.contains("pending <b>10</b>"), "{svg}");
        // Every SVG element is closed: none swallows the next.
        assert!(
            svg.contains("</line>") && svg.contains("</polyline>"),
            "{svg}"
        );
    }

    #[test]
    fn a_title_with_markup_is_text() {
        let svg = histogram("<b>late</b>", &Lateness::default()).into_string();
        assert!(svg.contains("&lt;b&gt;late&lt;/b&gt;"), "{svg}");
        assert!(!svg.contains("<b>late"), "{svg}");
        assert!(svg.contains("no claims recorded yet"), "{svg}");
    }

    #[test]
    fn bucket_labels_are_short() {
        assert_eq!(short(Duration::from_millis(500)), "500ms");
        assert_eq!(short(Duration::from_secs(30)), "30s");
        assert_eq!(short(Duration::from_secs(900)), "15m");
        assert_eq!(short(Duration::from_secs(3600)), "1h");
        assert_eq!(bucket_label(None), ">1h");
        assert_eq!(bucket_label(Some(Duration::ZERO)), "0");
    }
}
