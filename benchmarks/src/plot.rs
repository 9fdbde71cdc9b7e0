//! SVG plots of the benchmarks' results, drawn by the benchmark programs
//! themselves (`compare`, `lock_quota`) so that
//! BENCHMARKS.md can show the numbers of the run it quotes.
//!
//! plotters' SVG backend only, with its naive font metrics (no system
//! fonts read): every figure is 800x450 on white, with labelled axes (units
//! included) and a legend, readable on GitHub in light and dark mode.
//!
//! Two kinds of figure:
//! - [`bar_chart`]: a value per implementation in groups (a workload each),
//!   the median of the runs as the bar, the runs' min..max as a whisker;
//! - [`lateness_chart`]: the lateness distribution of sleeps per
//!   implementation, as the share of sleeps at least `x` late (the
//!   complementary CDF) on log-log axes: the median is where a curve
//!   crosses 50%, the p99 where it crosses 1%, the maximum where it ends.
//!
//! Lateness samples are binned into a [`LatenessHistogram`] (50 log-spaced
//! bins per decade, 1 µs to 100 s, about 5% wide), so that samples of every
//! run can be pooled in a few kilobytes and sent from a child process as one
//! line of text.

use std::error::Error;
use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// The width of a bar chart's group in x coordinates.
const GROUP: i32 = 1_000;

/// The size of every figure, in pixels.
pub const SIZE: (u32, u32) = (800, 450);

const BINS_PER_DECADE: f64 = 50.0;
/// The lower edge of the first bin above the zero bin: 1 µs.
const FIRST_EDGE_NS: f64 = 1_000.0;
/// Bins from 1 µs up: 8 decades, to 100 s (later samples go in the last).
const DECADES: usize = 8;
const BINS: usize = 1 + DECADES * BINS_PER_DECADE as usize;

/// Lateness samples (in ns) binned on a log scale: bin 0 holds those under
/// 1 µs, bin `i >= 1` those in `[1 µs * 10^((i-1)/50), 1 µs * 10^(i/50))`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LatenessHistogram {
    counts: Vec<u64>,
}

impl Default for LatenessHistogram {
    fn default() -> Self {
        LatenessHistogram::new()
    }
}

impl LatenessHistogram {
    /// An empty histogram.
    pub fn new() -> LatenessHistogram {
        LatenessHistogram {
            counts: vec![0; BINS],
        }
    }

    /// A histogram of `samples`, in ns.
    pub fn from_samples(samples: &[u64]) -> LatenessHistogram {
        let mut hist = LatenessHistogram::new();
        for &ns in samples {
            hist.record(ns);
        }
        hist
    }

    /// Counts one sample of `ns` nanoseconds.
    pub fn record(&mut self, ns: u64) {
        self.counts[bin_of(ns)] += 1;
    }

    /// Adds `other`'s samples to these.
    pub fn merge(&mut self, other: &LatenessHistogram) {
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
    }

    /// Samples counted.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The non-empty bins as `bin:count` words separated by spaces, for
    /// one line of a child process's output or a JSON string.
    pub fn to_text(&self) -> String {
        let words: Vec<String> = self
            .counts
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(i, c)| format!("{i}:{c}"))
            .collect();
        words.join(" ")
    }

    /// Reads what [`to_text`](Self::to_text) wrote.
    ///
    /// # Errors
    ///
    /// A word that is not `bin:count` with a bin in range.
    pub fn from_text(text: &str) -> Result<LatenessHistogram, String> {
        let mut hist = LatenessHistogram::new();
        for word in text.split_whitespace() {
            let parsed = word
                .split_once(':')
                .and_then(|(i, c)| Some((i.parse::<usize>().ok()?, c.parse::<u64>().ok()?)));
            match parsed {
                Some((i, c)) if i < BINS => hist.counts[i] += c,
                _ => return Err(format!("not a histogram bin: {word:?}")),
            }
        }
        Ok(hist)
    }

    /// The share of samples at least `x` ms late at each bin's lower edge
    /// from 1 µs to the last non-empty bin: points of the complementary
    /// CDF, all with a share above zero.
    pub fn tail(&self) -> Vec<(f64, f64)> {
        let total = self.count() as f64;
        let mut at_least = self.count();
        let mut points = Vec::new();
        for (bin, &count) in self.counts.iter().enumerate() {
            if bin > 0 && at_least > 0 {
                points.push((lower_edge_ns(bin) / 1e6, at_least as f64 / total));
            }
            at_least -= count;
        }
        points
    }
}

fn bin_of(ns: u64) -> usize {
    let ns = ns as f64;
    if ns < FIRST_EDGE_NS {
        return 0;
    }
    // The small nudge keeps exact edges (1 µs, 10 µs, ...) in the bin they
    // open despite the logarithm's rounding.
    let above = ((ns / FIRST_EDGE_NS).log10() * BINS_PER_DECADE + 1e-9).floor();
    (1 + above as usize).min(BINS - 1)
}

fn lower_edge_ns(bin: usize) -> f64 {
    if bin == 0 {
        0.0
    } else {
        FIRST_EDGE_NS * 10f64.powf((bin - 1) as f64 / BINS_PER_DECADE)
    }
}

/// The colour of a series, the same in every figure: by implementation
/// name (`ours`, `tokio`, ...), then by lock for `lock_quota`'s series.
pub fn color_of(series: &str) -> RGBColor {
    let known = [
        ("ours, spin", RGBColor(214, 39, 40)),
        ("ours", RGBColor(31, 119, 180)),
        ("tokio-alt", RGBColor(148, 103, 189)),
        ("tokio", RGBColor(255, 127, 14)),
        ("pingora", RGBColor(44, 160, 44)),
        ("futures-timer", RGBColor(227, 119, 194)),
        ("async-io", RGBColor(140, 86, 75)),
    ];
    known
        .iter()
        .find(|(name, _)| series.starts_with(name))
        .map_or(RGBColor(127, 127, 127), |&(_, color)| color)
}

/// One bar: a series' median over runs and the runs' spread.
#[derive(Clone, Debug)]
pub struct Bar {
    /// The series (implementation) it belongs to, as in the legend.
    pub series: String,
    /// The bar's height: the median of the runs.
    pub median: f64,
    /// The whisker's bottom: the lowest run.
    pub low: f64,
    /// The whisker's top: the highest run.
    pub high: f64,
}

impl Bar {
    /// The bar of `runs` (at least one value) for `series`.
    pub fn of_runs(series: &str, runs: &[f64]) -> Bar {
        let low = runs.iter().copied().fold(f64::INFINITY, f64::min);
        let high = runs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Bar {
            series: series.to_string(),
            median: crate::stats::median(runs.iter().copied()),
            low,
            high,
        }
    }
}

/// Bars side by side under one label on the x axis (a workload).
#[derive(Clone, Debug)]
pub struct BarGroup {
    /// The label under the group.
    pub label: String,
    /// One bar per series present in this group.
    pub bars: Vec<Bar>,
}

/// Draws grouped bars into an SVG at `path`: one colour per series, a slot
/// per series in every group (a series absent from a group leaves a gap),
/// the median written above each bar. `note` is a small line under the
/// plot (the machine, the command).
///
/// # Errors
///
/// Writing the file.
pub fn bar_chart(
    path: &Path,
    title: &str,
    y_desc: &str,
    note: &str,
    groups: &[BarGroup],
) -> Result<(), Box<dyn Error>> {
    let mut series: Vec<&str> = Vec::new();
    for bar in groups.iter().flat_map(|g| &g.bars) {
        if !series.contains(&bar.series.as_str()) {
            series.push(&bar.series);
        }
    }
    let top = groups
        .iter()
        .flat_map(|g| &g.bars)
        .map(|b| b.high.max(b.median))
        .fold(0.0, f64::max);
    // Room above the bars for their values, and for the legend (upper
    // left) above the first group's.
    let first = groups
        .first()
        .into_iter()
        .flat_map(|g| &g.bars)
        .map(|b| b.high.max(b.median))
        .fold(0.0, f64::max);
    let top = (top * 1.18).max(first / 0.6);
    let top = if top > 0.0 { top } else { 1.0 };

    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let (plot_area, note_area) = root.split_vertically(SIZE.1 - 18);
    draw_note(&note_area, note)?;
    // Integer x coordinates (plotters formats those by default): each group
    // is `GROUP` wide, its label at its centre.
    let centers: Vec<i32> = (0..groups.len() as i32)
        .map(|g| g * GROUP + GROUP / 2)
        .collect();
    let mut chart = ChartBuilder::on(&plot_area)
        .caption(title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(
            (0..groups.len() as i32 * GROUP).with_key_points(centers),
            0f64..top,
        )?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_desc(y_desc)
        .y_label_formatter(&|y| format_value(*y))
        .x_label_formatter(&|x| {
            let g = (*x / GROUP) as usize;
            groups.get(g).map_or(String::new(), |g| g.label.clone())
        })
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .draw()?;

    // Bars fill the middle 80% of their group, a slot per series.
    let slot = GROUP * 8 / 10 / series.len().max(1) as i32;
    for (s, &name) in series.iter().enumerate() {
        let color = color_of(name);
        let bars: Vec<(i32, &Bar)> = groups
            .iter()
            .enumerate()
            .filter_map(|(g, group)| {
                let bar = group.bars.iter().find(|b| b.series == name)?;
                Some((g as i32 * GROUP + GROUP / 10 + slot * s as i32, bar))
            })
            .collect();
        chart
            .draw_series(bars.iter().map(|&(x, bar)| {
                Rectangle::new(
                    [(x + slot / 12, 0.0), (x + slot - slot / 12, bar.median)],
                    color.filled(),
                )
            }))?
            .label(name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled()));
        // The runs' spread, where there was more than one run.
        chart.draw_series(
            bars.iter()
                .filter(|(_, bar)| bar.high > bar.low)
                .map(|&(x, bar)| {
                    let (mid, cap) = (x + slot / 2, slot / 5);
                    PathElement::new(
                        vec![
                            (mid - cap, bar.low),
                            (mid + cap, bar.low),
                            (mid, bar.low),
                            (mid, bar.high),
                            (mid - cap, bar.high),
                            (mid + cap, bar.high),
                        ],
                        BLACK.stroke_width(1),
                    )
                }),
        )?;
        let value_style = ("sans-serif", 12)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Center, VPos::Bottom));
        chart.draw_series(bars.iter().map(|&(x, bar)| {
            Text::new(
                format_value(bar.median),
                (x + slot / 2, bar.high.max(bar.median) + top * 0.01),
                value_style.clone(),
            )
        }))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK.mix(0.5))
        .label_font(("sans-serif", 13))
        .draw()?;
    root.present()?;
    Ok(())
}

/// One curve of a [`lateness_chart`].
#[derive(Clone, Debug)]
pub struct Curve {
    /// The series (implementation) it shows, as in the legend.
    pub series: String,
    /// Its samples.
    pub lateness: LatenessHistogram,
}

/// Draws the lateness distributions of `curves` into an SVG at `path`: the
/// share of sleeps at least `x` ms late, log-log, one line per series, with
/// guides at 50% (the median) and 1% (the p99). `note` is a small line
/// under the plot. Series with no samples are left out.
///
/// # Errors
///
/// Writing the file.
pub fn lateness_chart(
    path: &Path,
    title: &str,
    note: &str,
    curves: &[Curve],
) -> Result<(), Box<dyn Error>> {
    let tails: Vec<(&Curve, Vec<(f64, f64)>)> = curves
        .iter()
        .filter(|c| c.lateness.count() > 0)
        .map(|c| (c, c.lateness.tail()))
        .filter(|(_, tail)| !tail.is_empty())
        .collect();
    let x_max = tails
        .iter()
        .flat_map(|(_, t)| t.iter().map(|p| p.0))
        .fold(1.0, f64::max)
        * 1.5;
    let x_min = tails
        .iter()
        .flat_map(|(_, t)| t.iter().map(|p| p.0))
        .fold(x_max, f64::min)
        .min(0.1)
        / 1.5;
    let y_min = tails
        .iter()
        .flat_map(|(_, t)| t.iter().map(|p| p.1))
        .fold(0.01, f64::min)
        / 2.0;

    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let (plot_area, note_area) = root.split_vertically(SIZE.1 - 18);
    draw_note(&note_area, note)?;
    let mut chart = ChartBuilder::on(&plot_area)
        .caption(title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((x_min..x_max).log_scale(), (y_min..1.0).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("lateness (ms, log scale)")
        .y_desc("share of sleeps at least this late (log scale)")
        .x_label_formatter(&|x| format_value(*x))
        .y_label_formatter(&|y| format_share(*y))
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .light_line_style(BLACK.mix(0.05))
        .bold_line_style(BLACK.mix(0.15))
        .draw()?;
    for (share, name) in [(0.5, "p50"), (0.01, "p99")] {
        if share > y_min {
            chart.draw_series(DashedLineSeries::new(
                [(x_min, share), (x_max, share)],
                4,
                4,
                BLACK.mix(0.4).stroke_width(1),
            ))?;
            chart.draw_series([Text::new(
                name,
                (x_max / 1.05, share),
                ("sans-serif", 12)
                    .into_font()
                    .color(&BLACK.mix(0.6))
                    .pos(Pos::new(HPos::Right, VPos::Bottom)),
            )])?;
        }
    }
    for (curve, tail) in &tails {
        let color = color_of(&curve.series);
        chart
            .draw_series(LineSeries::new(tail.iter().copied(), color.stroke_width(2)))?
            .label(format!(
                "{} ({} sleeps)",
                curve.series,
                group_thousands(curve.lateness.count())
            ))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerLeft)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK.mix(0.5))
        .label_font(("sans-serif", 13))
        .draw()?;
    root.present()?;
    Ok(())
}

fn draw_note<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    note: &str,
) -> Result<(), Box<dyn Error>>
where
    DB::ErrorType: 'static,
{
    let style = ("sans-serif", 11)
        .into_font()
        .color(&BLACK.mix(0.6))
        .pos(Pos::new(HPos::Right, VPos::Top));
    area.draw(&Text::new(note.to_string(), (SIZE.0 as i32 - 10, 0), style))?;
    Ok(())
}

/// A value with about three significant digits, no exponent, no
/// trailing zeros.
fn format_value(v: f64) -> String {
    let a = v.abs();
    let text = if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        // As many decimals as it takes to show the first digit.
        let decimals = (-a.log10() - 1e-9).ceil() as usize;
        format!("{v:.decimals$}")
    };
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// A share as a percentage: 100%, 10%, 1%, 0.1%, 0.01%, ...
fn format_share(y: f64) -> String {
    let percent = y * 100.0;
    if percent >= 1.0 {
        format!("{percent:.0}%")
    } else {
        format!("{}%", format_value(percent))
    }
}

/// `n` with its thousands apart: `1 400 000`.
pub fn group_thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_split_at_their_edges() {
        assert_eq!(bin_of(0), 0);
        assert_eq!(bin_of(999), 0);
        assert_eq!(bin_of(1_000), 1);
        // 50 bins per decade: 10 µs opens bin 51, 1 ms bin 151.
        assert_eq!(bin_of(9_999), 50);
        assert_eq!(bin_of(10_000), 51);
        assert_eq!(bin_of(1_000_000), 151);
        assert_eq!(bin_of(u64::MAX), BINS - 1);
        for bin in 1..BINS {
            let edge = lower_edge_ns(bin).ceil() as u64;
            assert_eq!(bin_of(edge), bin, "lower edge of bin {bin}");
        }
    }

    #[test]
    fn text_round_trip_and_merge() {
        let a = LatenessHistogram::from_samples(&[0, 5_000, 5_000, 2_000_000]);
        let b = LatenessHistogram::from_text(&a.to_text()).unwrap();
        assert_eq!(a, b);
        let mut c = a.clone();
        c.merge(&b);
        assert_eq!(c.count(), 8);
        assert!(LatenessHistogram::from_text("3:1 9999:1").is_err());
        assert!(LatenessHistogram::from_text("x").is_err());
    }

    #[test]
    fn tail_is_the_share_at_least_this_late() {
        // Half the samples at 1 ms, half at 10 ms.
        let hist = LatenessHistogram::from_samples(&[1_000_000, 1_000_000, 10_000_000, 10_000_000]);
        let tail = hist.tail();
        let share_at = |ms: f64| tail.iter().find(|p| p.0 >= ms * 0.999).unwrap().1;
        assert_eq!(share_at(0.5), 1.0);
        assert_eq!(share_at(1.0), 1.0);
        assert_eq!(share_at(2.0), 0.5);
        assert_eq!(share_at(10.0), 0.5);
        // It ends at the last sample's bin.
        assert!((tail.last().unwrap().0 - 10.0).abs() < 0.01);
    }

    #[test]
    fn figures_are_svg_with_their_labels() {
        let dir = std::env::temp_dir().join(format!("plot-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bars = dir.join("bars.svg");
        bar_chart(
            &bars,
            "guards",
            "ns per guard",
            "a machine",
            &[BarGroup {
                label: "1a".into(),
                bars: vec![
                    Bar::of_runs("ours", &[40.0, 42.0, 45.0]),
                    Bar::of_runs("tokio", &[400.0]),
                ],
            }],
        )
        .unwrap();
        let svg = std::fs::read_to_string(&bars).unwrap();
        for text in [
            "<svg",
            "guards",
            "ns per guard",
            "ours",
            "tokio",
            "42",
            "400",
        ] {
            assert!(svg.contains(text), "{text:?} missing from the bar chart");
        }
        let late = dir.join("late.svg");
        lateness_chart(
            &late,
            "lateness",
            "a machine",
            &[Curve {
                series: "ours".into(),
                lateness: LatenessHistogram::from_samples(&[1_000_000, 2_000_000]),
            }],
        )
        .unwrap();
        let svg = std::fs::read_to_string(&late).unwrap();
        for text in ["<svg", "lateness (ms, log scale)", "ours (2 sleeps)", "p50"] {
            assert!(
                svg.contains(text),
                "{text:?} missing from the lateness chart"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn numbers_read_well() {
        assert_eq!(format_value(420.4), "420");
        assert_eq!(format_value(42.44), "42.4");
        assert_eq!(format_value(4.244), "4.24");
        assert_eq!(format_value(10.0), "10");
        assert_eq!(format_value(3500.0), "3500");
        assert_eq!(format_value(0.01), "0.01");
        assert_eq!(format_value(0.002), "0.002");
        assert_eq!(format_share(0.5), "50%");
        assert_eq!(format_share(0.001), "0.1%");
        assert_eq!(group_thousands(1_400_000), "1 400 000");
    }
}
