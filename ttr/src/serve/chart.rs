//! Charts as inline SVG, drawn on the server: no script, no library.
//! Numbers only (every label is formatted here), so nothing from Redis
//! reaches the markup unescaped.

use std::fmt::Write;
use std::time::{Duration, SystemTime};

use tiered_timer_jobs::Lateness;

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

/// Lines over the last `window` up to `now`: x is time, y from 0 to the
/// largest value; the legend names each line with its latest value.
pub(crate) fn lines(
    title: &str,
    now: SystemTime,
    window: Duration,
    series: &[Series<'_>],
) -> String {
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
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{title}">"#
    );
    // Axes and grid: 0, half, max.
    for (value, label) in [
        (0, "0".to_owned()),
        (max / 2, (max / 2).to_string()),
        (max, max.to_string()),
    ] {
        let yy = y(value);
        let _ = write!(
            svg,
            r##"<line x1="{LEFT}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#e3e6ea"/><text x="{:.1}" y="{:.1}" text-anchor="end" class="axis">{label}</text>"##,
            WIDTH - 8.0,
            LEFT - 4.0,
            yy + 4.0
        );
    }
    let minutes = window.as_secs().div_ceil(60);
    let _ = write!(
        svg,
        r#"<text x="{LEFT}" y="{:.1}" class="axis">-{minutes} min</text><text x="{:.1}" y="{:.1}" text-anchor="end" class="axis">now</text>"#,
        HEIGHT - 4.0,
        WIDTH - 8.0,
        HEIGHT - 4.0
    );
    for s in series {
        if s.points.is_empty() {
            continue;
        }
        let mut path = String::new();
        for (t, v) in &s.points {
            let _ = write!(path, "{:.1},{:.1} ", x(*t), y(*v));
        }
        let _ = write!(
            svg,
            r#"<polyline fill="none" stroke="{}" stroke-width="2" points="{}"/>"#,
            s.color,
            path.trim_end()
        );
        if let Some((t, v)) = s.points.last() {
            let _ = write!(
                svg,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{}"/>"#,
                x(*t),
                y(*v),
                s.color
            );
        }
    }
    svg.push_str("</svg>");
    let mut legend = String::from(r#"<div class="legend">"#);
    for s in series {
        let latest = s.points.last().map_or("-".to_owned(), |p| p.1.to_string());
        let _ = write!(
            legend,
            r#"<span><i style="background:{}"></i>{} <b>{latest}</b></span>"#,
            s.color, s.label
        );
    }
    legend.push_str("</div>");
    format!(r#"<figure><figcaption>{title}</figcaption>{svg}{legend}</figure>"#)
}

/// The lateness histogram as bars, one per bucket, with the count above
/// each non-empty bar and the bucket's bound below.
pub(crate) fn histogram(title: &str, lateness: &Lateness) -> String {
    let buckets = lateness.buckets();
    let max = buckets.iter().map(|b| b.1).max().unwrap_or(0).max(1);
    let plot_w = WIDTH - 16.0;
    let plot_h = HEIGHT - TOP - BOTTOM - 10.0;
    let bar = plot_w / buckets.len() as f64;
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{title}">"#
    );
    for (i, (bound, count)) in buckets.iter().enumerate() {
        let h = plot_h * (*count as f64 / max as f64);
        let x = 8.0 + i as f64 * bar;
        let y = TOP + 10.0 + plot_h - h;
        let label = match bound {
            Some(d) if d.is_zero() => "0".to_owned(),
            Some(d) => short(*d),
            None => ">1h".to_owned(),
        };
        let _ = write!(
            svg,
            r##"<rect x="{:.1}" y="{y:.1}" width="{:.1}" height="{h:.1}" fill="#5b8def"><title>{label}: {count}</title></rect>"##,
            x + 1.0,
            bar - 2.0
        );
        if *count > 0 {
            let _ = write!(
                svg,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" class="axis">{count}</text>"#,
                x + bar / 2.0,
                y - 2.0
            );
        }
        if i % 2 == 0 || bound.is_none() {
            let _ = write!(
                svg,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" class="axis">{label}</text>"#,
                x + bar / 2.0,
                HEIGHT - 4.0
            );
        }
    }
    svg.push_str("</svg>");
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
    format!(
        r#"<figure><figcaption>{title}</figcaption>{svg}<div class="legend">{summary}</div></figure>"#
    )
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
        );
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
    }

    #[test]
    fn bucket_labels_are_short() {
        assert_eq!(short(Duration::from_millis(500)), "500ms");
        assert_eq!(short(Duration::from_secs(30)), "30s");
        assert_eq!(short(Duration::from_secs(900)), "15m");
        assert_eq!(short(Duration::from_secs(3600)), "1h");
    }
}
