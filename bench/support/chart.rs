//! Benchmark charts as SVG files, drawn with `plotters` (SVG backend only, no font crates).
//!
//! Text is written as SVG `<text>` elements and shaped by whatever renders the SVG (a browser,
//! rsvg-convert), so its width is only estimated here when laying out margins and the legend.
//!
//! Log axes are drawn by plotting log10 of the values on a linear axis whose ticks are labelled
//! with the real values; points and bars whose value is not positive (or not finite) cannot be
//! placed on a log axis and are left out. On a log value axis bars start at the axis minimum.

use std::path::Path;

use plotters::coord::CoordTranslate;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// One line of a [`line_chart`]: `(x, y)` points, joined in the order given.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// One colour of bars in [`grouped_bars`]: one value per group, `None` for a missing bar.
#[derive(Debug, Clone, PartialEq)]
pub struct Series2 {
    pub name: String,
    pub values: Vec<Option<f64>>,
}

const SIZE: (u32, u32) = (800, 480);
const FONT: &str = "sans-serif";
// plotters' SVG backend writes font-size = size / 1.24; these give about 19, 15, 13, 13 and 11 px.
const TITLE_SIZE: f64 = 24.0;
const DESC_SIZE: f64 = 18.0;
const TICK_SIZE: f64 = 16.0;
const LEGEND_SIZE: f64 = 16.0;
const VALUE_SIZE: f64 = 14.0;
const TITLE_HEIGHT: u32 = 36;
const LEGEND_ROW: u32 = 24;
const SIDE_MARGIN: u32 = 16;

/// Tableau 10: distinct, and still distinct for the common forms of colour blindness.
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

fn colour(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// Draws one line (with markers and a legend entry) per series into the SVG file `path`.
pub fn line_chart(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    log_x: bool,
    log_y: bool,
    series: &[Series],
) -> Result<(), String> {
    let xs = series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let ys = series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
    let x = Axis::new(xs, log_x, Fit::Padded);
    // A linear value axis starts at zero; a log one just below the smallest value.
    let y_fit = if log_y { Fit::Padded } else { Fit::Base(0.06) };
    let y = Axis::new(ys, log_y, y_fit);

    create_parent(path)?;
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let names: Vec<&str> = series.iter().map(|s| s.name.as_str()).collect();
    let plot_area = header(&root, title, &names, Swatch::LineAndMarker)?;

    let x_fmt = |v: &f64| x.label(*v);
    let y_fmt = |v: &f64| y.label(*v);
    let mut chart = ChartBuilder::on(&plot_area)
        .margin_left(SIDE_MARGIN)
        .margin_right(SIDE_MARGIN + 14) // room for half of the last x tick label
        .margin_top(8)
        .margin_bottom(6)
        .x_label_area_size(50)
        .y_label_area_size(y.label_area_width())
        .build_cartesian_2d(x.coord(), y.coord())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .x_desc(x_label)
        .y_desc(y_label)
        .label_style((FONT, TICK_SIZE))
        .axis_desc_style((FONT, DESC_SIZE))
        .bold_line_style(RGBColor(215, 215, 215))
        .light_line_style(RGBColor(240, 240, 240))
        .axis_style(RGBColor(90, 90, 90))
        .draw()
        .map_err(err)?;

    for (i, s) in series.iter().enumerate() {
        let c = colour(i);
        let points: Vec<(f64, f64)> = s
            .points
            .iter()
            .filter_map(|&(px, py)| Some((x.to_plot(px)?, y.to_plot(py)?)))
            .collect();
        chart
            .draw_series(LineSeries::new(points.iter().copied(), c.stroke_width(2)))
            .map_err(err)?;
        for &p in &points {
            draw_marker(chart.plotting_area(), p, i, c)?;
        }
    }
    root.present().map_err(err)
}

/// Draws grouped vertical bars (one colour per series, one group per entry of `groups`) with a
/// legend and the value above each bar into the SVG file `path`.
pub fn grouped_bars(
    path: &Path,
    title: &str,
    y_label: &str,
    log_y: bool,
    groups: &[String],
    series: &[Series2],
) -> Result<(), String> {
    if let Some(s) = series.iter().find(|s| s.values.len() > groups.len()) {
        return Err(format!(
            "series {:?} has {} values for {} groups",
            s.name,
            s.values.len(),
            groups.len()
        ));
    }
    let values = series
        .iter()
        .flat_map(|s| s.values.iter().flatten().copied());
    let y = Axis::new(values, log_y, Fit::Base(0.12));
    let n = groups.len().max(1);
    let x = Axis::categories(n);

    create_parent(path)?;
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let names: Vec<&str> = series.iter().map(|s| s.name.as_str()).collect();
    let plot_area = header(&root, title, &names, Swatch::Block)?;

    let x_fmt = |v: &f64| {
        let i = v.round();
        if (v - i).abs() < 1e-6 && i >= 0.0 {
            groups.get(i as usize).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    let y_fmt = |v: &f64| y.label(*v);
    let mut chart = ChartBuilder::on(&plot_area)
        .margin_left(SIDE_MARGIN)
        .margin_right(SIDE_MARGIN)
        .margin_top(8)
        .margin_bottom(6)
        .x_label_area_size(32)
        .y_label_area_size(y.label_area_width())
        .build_cartesian_2d(x.coord(), y.coord())
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .y_desc(y_label)
        .label_style((FONT, TICK_SIZE))
        .axis_desc_style((FONT, DESC_SIZE))
        .bold_line_style(RGBColor(215, 215, 215))
        .light_line_style(RGBColor(240, 240, 240))
        .axis_style(RGBColor(90, 90, 90))
        .draw()
        .map_err(err)?;

    // Each group takes 80% of its slot; its bars share that equally.
    let slots = series.len().max(1) as f64;
    let bar = 0.8 / slots;
    let (plot_w, _) = chart.plotting_area().dim_in_pixel();
    let bar_px = f64::from(plot_w) / n as f64 * bar;
    let base = if y.log {
        y.lo
    } else {
        0.0_f64.clamp(y.lo, y.hi)
    };
    // Values above the bars, only when every one of them fits in a bar's width.
    let show_values = series
        .iter()
        .flat_map(|s| s.values.iter().flatten())
        .all(|&v| text_width(&fmt_value(v), VALUE_SIZE) <= bar_px + 4.0);
    let value_style = TextStyle::from((FONT, VALUE_SIZE))
        .color(&RGBColor(60, 60, 60))
        .pos(Pos::new(HPos::Center, VPos::Bottom));
    for (si, s) in series.iter().enumerate() {
        let c = colour(si);
        // (left, right, top in plotting space, value)
        let bars: Vec<(f64, f64, f64, f64)> = s
            .values
            .iter()
            .enumerate()
            .filter_map(|(g, v)| {
                let v = (*v)?;
                let left = g as f64 - 0.4 + si as f64 * bar;
                Some((left, left + bar, y.to_plot(v)?, v))
            })
            .collect();
        chart
            .draw_series(bars.iter().map(|&(l, r, top, _)| {
                let mut rect = Rectangle::new([(l, base), (r, top)], c.filled());
                rect.set_margin(0, 0, 1, 1);
                rect
            }))
            .map_err(err)?;
        if show_values {
            chart
                .draw_series(bars.iter().map(|&(l, r, top, v)| {
                    EmptyElement::at(((l + r) / 2.0, top))
                        + Text::new(fmt_value(v), (0, -3), value_style.clone())
                }))
                .map_err(err)?;
        }
    }
    root.present().map_err(err)
}

#[derive(Clone, Copy)]
enum Swatch {
    LineAndMarker,
    Block,
}

/// Draws the title and a legend (wrapped over as many rows as it needs) across the top of
/// `root`, and returns the area left below them for the chart.
fn header<'a>(
    root: &DrawingArea<SVGBackend<'a>, plotters::coord::Shift>,
    title: &str,
    names: &[&str],
    swatch: Swatch,
) -> Result<DrawingArea<SVGBackend<'a>, plotters::coord::Shift>, String> {
    let (width, _) = root.dim_in_pixel();
    let (title_area, rest) = root.split_vertically(TITLE_HEIGHT);
    // Bold glyphs are wider: shrink a title that would not fit.
    let room = f64::from(width - 2 * SIDE_MARGIN);
    let title_size = TITLE_SIZE.min(TITLE_SIZE * room / (text_width(title, TITLE_SIZE) * 1.1));
    let title_style = TextStyle::from((FONT, title_size).into_font().style(FontStyle::Bold))
        .color(&BLACK)
        .pos(Pos::new(HPos::Center, VPos::Center));
    title_area
        .draw(&Text::new(
            title.to_owned(),
            ((width / 2) as i32, (TITLE_HEIGHT / 2 + 4) as i32),
            title_style,
        ))
        .map_err(err)?;

    // Lay the entries out in rows, each row centred.
    const SWATCH_W: f64 = 28.0;
    const GAP: f64 = 6.0;
    const SPACING: f64 = 22.0;
    let mut rows: Vec<Vec<(usize, f64)>> = vec![];
    let mut row_w = 0.0;
    for (i, name) in names.iter().enumerate() {
        let w = SWATCH_W + GAP + text_width(name, LEGEND_SIZE);
        match rows.last_mut() {
            Some(row) if row_w + SPACING + w <= room => {
                row.push((i, w));
                row_w += SPACING + w;
            }
            _ => {
                rows.push(vec![(i, w)]);
                row_w = w;
            }
        }
    }
    let legend_h = rows.len() as u32 * LEGEND_ROW + if rows.is_empty() { 0 } else { 4 };
    let (legend, chart_area) = rest.split_vertically(legend_h);
    let text_style = TextStyle::from((FONT, LEGEND_SIZE))
        .color(&RGBColor(30, 30, 30))
        .pos(Pos::new(HPos::Left, VPos::Center));
    for (r, row) in rows.iter().enumerate() {
        let total: f64 = row.iter().map(|(_, w)| w).sum::<f64>() + SPACING * (row.len() - 1) as f64;
        let mut left = (f64::from(width) - total) / 2.0;
        let cy = (r as u32 * LEGEND_ROW + LEGEND_ROW / 2) as i32;
        for &(i, w) in row {
            let c = colour(i);
            let x0 = left.round() as i32;
            let sw = SWATCH_W as i32;
            match swatch {
                Swatch::LineAndMarker => {
                    legend
                        .draw(&PathElement::new(
                            vec![(x0, cy), (x0 + sw, cy)],
                            c.stroke_width(2),
                        ))
                        .map_err(err)?;
                    draw_marker(&legend, (x0 + sw / 2, cy), i, c)?;
                }
                Swatch::Block => {
                    legend
                        .draw(&Rectangle::new(
                            [(x0 + 4, cy - 7), (x0 + sw - 4, cy + 7)],
                            c.filled(),
                        ))
                        .map_err(err)?;
                }
            }
            legend
                .draw(&Text::new(
                    names[i].to_owned(),
                    (x0 + sw + GAP as i32, cy + 1),
                    text_style.clone(),
                ))
                .map_err(err)?;
            left += w + SPACING;
        }
    }
    Ok(chart_area)
}

/// Draws the marker of series `i` at `at`: circle, triangle, square, diamond, in turn.
fn draw_marker<DB, CT>(
    area: &DrawingArea<DB, CT>,
    at: CT::From,
    i: usize,
    c: RGBColor,
) -> Result<(), String>
where
    DB: DrawingBackend,
    CT: CoordTranslate,
    CT::From: Clone,
{
    let style = c.filled();
    let e = EmptyElement::at(at);
    match i % 4 {
        0 => area.draw(&(e + Circle::new((0, 0), 4, style))),
        1 => area.draw(&(e + TriangleMarker::new((0, 0), 6, style))),
        2 => area.draw(&(e + Rectangle::new([(-4, -4), (4, 4)], style))),
        _ => area.draw(&(e + Polygon::new(vec![(0, -6), (5, 0), (0, 6), (-5, 0)], style))),
    }
    .map_err(err)
}

/// How an axis range is fitted around the data.
#[derive(Clone, Copy)]
enum Fit {
    /// 5% padding at both ends, so that markers at the ends are not cut.
    Padded,
    /// An axis for bars to stand on: a linear one starts at zero (or a tick below negative data)
    /// and ends at a tick, a log one starts at a power of ten below the smallest value. The
    /// value is the headroom above the largest value, as a fraction of the span (for labels).
    Base(f64),
}

/// An axis in plotting space (log10 of the values for a log axis), with its ticks.
struct Axis {
    log: bool,
    lo: f64,
    hi: f64,
    /// Labelled ticks and grid lines, with their labels.
    ticks: Vec<(f64, String)>,
    /// Unlabelled, lighter grid lines.
    minor: Vec<f64>,
}

impl Axis {
    fn new(values: impl Iterator<Item = f64>, log: bool, fit: Fit) -> Axis {
        let to_plot = |v: f64| plot_value(v, log);
        let (mut lo, mut hi) = values
            .filter_map(to_plot)
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
                (lo.min(v), hi.max(v))
            });
        if lo > hi {
            (lo, hi) = (0.0, 1.0);
        }
        if hi - lo < 1e-9 {
            let half = if log { 0.5 } else { (lo.abs() * 0.5).max(0.5) };
            (lo, hi) = (lo - half, hi + half);
        }
        match fit {
            Fit::Padded => {
                let pad = (hi - lo) * 0.05;
                (lo, hi) = (lo - pad, hi + pad);
                // On a log axis, reach a power of ten that is close, so that it is labelled.
                if log && lo - lo.floor() < 0.35 {
                    lo = lo.floor();
                }
                if log && hi.ceil() - hi < 0.35 {
                    hi = hi.ceil();
                }
            }
            Fit::Base(head) if log => {
                lo = (lo - 0.05 * (hi - lo).max(1.0)).floor();
                hi += (hi - lo) * head;
            }
            Fit::Base(head) => {
                lo = lo.min(0.0);
                hi = hi.max(0.0);
                hi += (hi - lo) * head;
            }
        }
        let mut axis = Axis {
            log,
            lo,
            hi,
            ticks: vec![],
            minor: vec![],
        };
        if log {
            axis.log_ticks();
        } else {
            let snap = matches!(fit, Fit::Base(_));
            axis.linear_ticks(snap);
        }
        axis
    }

    /// A category axis: groups 0..n at integer positions, one slot wide each.
    fn categories(n: usize) -> Axis {
        Axis {
            log: false,
            lo: -0.5,
            hi: n as f64 - 0.5,
            ticks: (0..n).map(|i| (i as f64, String::new())).collect(),
            minor: vec![],
        }
    }

    fn linear_ticks(&mut self, snap: bool) {
        let raw = (self.hi - self.lo) / 6.0;
        let mag = 10f64.powf(raw.log10().floor());
        let step = [1.0, 2.0, 5.0, 10.0]
            .into_iter()
            .map(|m| m * mag)
            .find(|s| *s >= raw)
            .unwrap_or(10.0 * mag);
        if snap {
            self.hi = (self.hi / step - 1e-9).ceil() * step;
            if self.lo < 0.0 {
                self.lo = (self.lo / step + 1e-9).floor() * step;
            }
        }
        let scale = if self.hi.abs().max(self.lo.abs()) >= 1e6 {
            1e6
        } else {
            1.0
        };
        let first = (self.lo / step - 1e-9).ceil() as i64;
        let last = (self.hi / step + 1e-9).floor() as i64;
        for k in first..=last {
            let v = k as f64 * step;
            self.ticks.push((v, fmt_number(v, step, scale)));
            let mid = v + step / 2.0;
            if mid < self.hi {
                self.minor.push(mid);
            }
        }
    }

    fn log_ticks(&mut self) {
        let (lo, hi) = (self.lo - 1e-9, self.hi + 1e-9);
        let decades = (lo.floor() as i32)..=(hi.ceil() as i32);
        let at = |m: f64, d: i32| (m.log10() + f64::from(d), m * 10f64.powi(d));
        let mut major: Vec<(f64, f64, i32)> = vec![];
        let mut all: Vec<(f64, f64, i32)> = vec![];
        for d in decades {
            for m in 1..10 {
                let (p, v) = at(f64::from(m), d);
                if (lo..=hi).contains(&p) {
                    all.push((p, v, d));
                    if m == 1 {
                        major.push((p, v, d));
                    }
                }
            }
        }
        // Too few decades in view: label 2 and 5 as well, or failing that every mantissa.
        if major.len() < 3 {
            major = all
                .iter()
                .copied()
                .filter(|&(_, v, d)| {
                    let m = (v / 10f64.powi(d)).round();
                    m == 1.0 || m == 2.0 || m == 5.0
                })
                .collect();
        }
        if major.len() < 2 {
            major = all.clone();
        }
        // Too many decades: label every second (third, ...) one, and draw no lines between.
        if major.len() > 10 {
            let every = major.len().div_ceil(8);
            all.retain(|&(_, v, d)| (v / 10f64.powi(d)).round() == 1.0);
            major = major.into_iter().step_by(every).collect();
        }
        self.ticks = major
            .iter()
            .map(|&(p, v, d)| {
                let label = if !(-4..9).contains(&d) {
                    format!("{}e{d}", (v / 10f64.powi(d)).round())
                } else if v >= 1e6 {
                    fmt_number(v, 10f64.powi(d), 1e6)
                } else {
                    fmt_number(v, 10f64.powi(d), 1.0)
                };
                (p, label)
            })
            .collect();
        self.minor = all
            .iter()
            .map(|&(p, _, _)| p)
            .filter(|p| !major.iter().any(|m| (m.0 - p).abs() < 1e-9))
            .collect();
    }

    fn to_plot(&self, v: f64) -> Option<f64> {
        plot_value(v, self.log)
    }

    fn coord(&self) -> Ticked {
        Ticked {
            lo: self.lo,
            hi: self.hi,
            bold: self.ticks.iter().map(|t| t.0).collect(),
            light: self.minor.clone(),
        }
    }

    /// The label of the tick at plotting position `v`.
    fn label(&self, v: f64) -> String {
        self.ticks
            .iter()
            .find(|t| (t.0 - v).abs() < 1e-9)
            .map(|t| t.1.clone())
            .unwrap_or_default()
    }

    /// Room left of the y axis for the tick labels and the rotated axis description.
    fn label_area_width(&self) -> u32 {
        let widest = self
            .ticks
            .iter()
            .map(|t| text_width(&t.1, TICK_SIZE))
            .fold(0.0, f64::max);
        (widest + px(DESC_SIZE) + 24.0).ceil() as u32
    }
}

/// A linear plotters coordinate with our own tick positions (labelled by `Axis::label`).
struct Ticked {
    lo: f64,
    hi: f64,
    bold: Vec<f64>,
    light: Vec<f64>,
}

impl Ranged for Ticked {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let t = (value - self.lo) / (self.hi - self.lo);
        let t = if t.is_finite() { t } else { 0.5 };
        limit.0 + (f64::from(limit.1 - limit.0) * t).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            self.light.clone()
        } else {
            self.bold.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

fn plot_value(v: f64, log: bool) -> Option<f64> {
    match (log, v.is_finite()) {
        (_, false) => None,
        (true, _) if v <= 0.0 => None,
        (true, _) => Some(v.log10()),
        (false, _) => Some(v),
    }
}

/// A tick value with as many decimals as `step` needs, with thousands separators, in millions
/// ("1.5M") when `scale` is 1e6.
fn fmt_number(v: f64, step: f64, scale: f64) -> String {
    if v.abs() < step * 1e-6 {
        return "0".to_owned();
    }
    let decimals = (-(step / scale).log10().floor()).clamp(0.0, 9.0) as usize;
    let text = group_thousands(&format!("{:.*}", decimals, v / scale));
    if scale == 1e6 { text + "M" } else { text }
}

/// A measured value for a bar label: about three significant digits, no trailing zeros.
fn fmt_value(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        fmt_number(v, 1e4, 1e6)
    } else if a >= 100.0 || a == 0.0 {
        fmt_number(v, 1.0, 1.0)
    } else {
        let decimals = (2.0 - a.log10().floor()).clamp(0.0, 9.0) as usize;
        let text = format!("{v:.decimals$}");
        let text = text.trim_end_matches('0').trim_end_matches('.');
        text.to_owned()
    }
}

/// "12345.6" -> "12,345.6"
fn group_thousands(s: &str) -> String {
    let (sign, rest) = s.strip_prefix('-').map_or(("", s), |r| ("-", r));
    let (int, frac) = rest.split_at(rest.find('.').unwrap_or(rest.len()));
    let mut out = String::with_capacity(s.len() + int.len() / 3);
    out.push_str(sign);
    for (i, ch) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out.push_str(frac);
    out
}

/// The pixel font size the SVG backend writes for a plotters font size.
fn px(size: f64) -> f64 {
    size / 1.24
}

/// A generous estimate of the rendered width of `text` in a sans-serif font.
fn text_width(text: &str, size: f64) -> f64 {
    text.chars().count() as f64 * px(size) * 0.6
}

fn create_parent(path: &Path) -> Result<(), String> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display())),
        _ => Ok(()),
    }
}

fn err(e: impl std::fmt::Display) -> String {
    format!("drawing chart: {e}")
}

#[cfg(test)]
mod tests {
    // Only #[test] functions here, each with its own imports: a bench target with
    // `harness = false` is checked with `--cfg test` but without its #[test] functions, and
    // anything else in this module would then be unused.

    #[test]
    fn line_chart_has_series_and_labels() {
        use super::{Series, line_chart};
        let dir = std::env::temp_dir().join(format!("chart-test-{}-line", std::process::id()));
        let path = dir.join("latency.svg");
        let series = vec![
            Series {
                name: "audit-receiver (Rust)".into(),
                points: vec![(10.0, 0.21), (100.0, 1.3), (1000.0, 11.8), (10000.0, 121.0)],
            },
            Series {
                name: "peer (Python)".into(),
                points: vec![
                    (10.0, 2.4),
                    (100.0, 19.0),
                    (1000.0, 180.0),
                    (10000.0, 1900.0),
                ],
            },
            Series {
                name: "peer (Node)".into(),
                points: vec![(10.0, 1.1), (100.0, 0.0), (1000.0, 95.0), (10000.0, 990.0)],
            },
        ];
        line_chart(
            &path,
            "Batch latency by batch size",
            "batch size (records)",
            "latency (ms)",
            true,
            true,
            &series,
        )
        .unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.contains("<svg"));
        for s in &series {
            assert!(svg.contains(&s.name), "missing {}", s.name);
        }
        for label in [
            "Batch latency by batch size",
            "batch size (records)",
            "latency (ms)",
            "10,000",
        ] {
            assert!(svg.contains(label), "missing {label}");
        }

        // Linear axes too.
        let linear = dir.join("linear.svg");
        line_chart(&linear, "linear", "x", "y", false, false, &series).unwrap();
        assert!(std::fs::read_to_string(&linear).unwrap().contains("<svg"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn grouped_bars_have_series_groups_and_values() {
        use super::{Series2, grouped_bars};
        let dir = std::env::temp_dir().join(format!("chart-test-{}-bars", std::process::id()));
        let path = dir.join("nested").join("throughput.svg");
        let groups: Vec<String> = ["128 MB", "256 MB", "512 MB", "1769 MB"]
            .into_iter()
            .map(String::from)
            .collect();
        let series = vec![
            Series2 {
                name: "ours".into(),
                values: vec![Some(1800.0), Some(3700.0), Some(7400.0), Some(10000.0)],
            },
            Series2 {
                name: "peer: Python".into(),
                values: vec![Some(31.5), Some(64.0), Some(130.0), Some(450.0)],
            },
            Series2 {
                name: "peer: Node".into(),
                values: vec![None, Some(300.0), Some(610.0), Some(2100.0)],
            },
        ];
        for log_y in [true, false] {
            grouped_bars(
                &path,
                "Records per second by memory size",
                "records / s",
                log_y,
                &groups,
                &series,
            )
            .unwrap();
            let svg = std::fs::read_to_string(&path).unwrap();
            assert!(svg.contains("<svg"));
            for s in &series {
                assert!(svg.contains(&s.name), "missing {}", s.name);
            }
            for g in &groups {
                assert!(svg.contains(g.as_str()), "missing {g}");
            }
            for label in ["records / s", "10,000", "31.5"] {
                assert!(svg.contains(label), "missing {label}");
            }
        }

        let bad = vec![Series2 {
            name: "too long".into(),
            values: vec![Some(1.0); 5],
        }];
        assert!(grouped_bars(&path, "t", "y", false, &groups, &bad).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn number_formats() {
        use super::{fmt_number, fmt_value};
        assert_eq!(fmt_number(10000.0, 1000.0, 1.0), "10,000");
        assert_eq!(fmt_number(0.25, 0.05, 1.0), "0.25");
        assert_eq!(fmt_number(1_500_000.0, 500_000.0, 1e6), "1.5M");
        assert_eq!(fmt_number(-1234.0, 1.0, 1.0), "-1,234");
        assert_eq!(fmt_value(31.5), "31.5");
        assert_eq!(fmt_value(0.01234), "0.0123");
        assert_eq!(fmt_value(64.0), "64");
        assert_eq!(fmt_value(0.5), "0.5");
        assert_eq!(fmt_value(9876.4), "9,876");
    }
}
