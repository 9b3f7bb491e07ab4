//! Drawing a line chart into a PNG with plotters (bitmap backend, embedded font).

use super::PlotError;
use crate::output::write_atomic;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

/// The embedded font (a subset of DejaVu Sans; licence in `assets/fonts/`).
static FONT_BYTES: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans-subset.ttf");
const FONT: &str = "sans-serif";

fn register_font() -> Result<(), PlotError> {
    static REGISTERED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        plotters::style::register_font(FONT, FontStyle::Normal, FONT_BYTES).is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err(PlotError::Draw(
            "the embedded font could not be loaded".into(),
        ))
    }
}

/// One curve: its legend label and its points, cut into pieces where values are missing.
#[derive(Clone, Debug)]
pub struct Series {
    pub label: String,
    pub segments: Vec<Vec<(f64, f64)>>,
    /// Draw a dot at every point (for charts with few points).
    pub markers: bool,
    /// Vertical bars (x, low, high), e.g. a standard deviation.
    pub bars: Vec<(f64, f64, f64)>,
}

impl Series {
    /// Splits `points` into runs of drawable points: finite, and positive on a log axis.
    pub fn new(label: impl Into<String>, points: &[(f64, f64)], log_y: bool) -> Self {
        Self::clipped(label, points, log_y, f64::INFINITY)
    }

    /// As [`Series::new`], and a curve that rises above `cap` is cut where it crosses it
    /// (interpolated, in log space on a log axis), so it leaves the chart at its top edge
    /// instead of stretching the axis (a run blowing up to 1e230).
    pub fn clipped(label: impl Into<String>, points: &[(f64, f64)], log_y: bool, cap: f64) -> Self {
        let drawable = |(x, y): (f64, f64)| x.is_finite() && y.is_finite() && (!log_y || y > 0.0);
        let f = |y: f64| if log_y { y.log10() } else { y };
        let crossing = |a: (f64, f64), b: (f64, f64)| {
            let w = (f(cap) - f(a.1)) / (f(b.1) - f(a.1));
            (a.0 + w * (b.0 - a.0), cap)
        };
        let mut segments = vec![];
        let mut current: Vec<(f64, f64)> = vec![];
        let mut prev: Option<(f64, f64)> = None;
        for &p in points {
            if !drawable(p) {
                if !current.is_empty() {
                    segments.push(std::mem::take(&mut current));
                }
                prev = None;
                continue;
            }
            let above = p.1 > cap;
            match prev {
                Some(q) if q.1 <= cap && above => {
                    current.push(crossing(q, p));
                    segments.push(std::mem::take(&mut current));
                }
                Some(q) if q.1 > cap && !above => {
                    current.push(crossing(q, p));
                    current.push(p);
                }
                _ if !above => current.push(p),
                _ => {}
            }
            prev = Some(p);
        }
        if !current.is_empty() {
            segments.push(current);
        }
        Self {
            label: label.into(),
            segments,
            markers: false,
            bars: vec![],
        }
    }
    pub fn points(&self) -> impl Iterator<Item = &(f64, f64)> {
        self.segments.iter().flatten()
    }
    pub fn is_empty(&self) -> bool {
        self.segments.is_empty()
    }
}

/// Where the legend goes.
#[derive(Clone, Copy, Debug)]
pub enum Legend {
    UpperLeft,
    UpperRight,
    LowerRight,
}

/// A chart to draw.
#[derive(Clone, Debug)]
pub struct Chart {
    pub title: String,
    pub x_desc: String,
    pub y_desc: String,
    pub x_log: bool,
    pub y_log: bool,
    pub legend: Legend,
    pub series: Vec<Series>,
    pub size: (u32, u32),
    /// The x axis's span; `None`: the data's.
    pub x_range: Option<(f64, f64)>,
}

/// The tab10 palette: distinct on white, and readable by most colour-blind viewers.
const PALETTE: [(u8, u8, u8); 10] = [
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
    (188, 189, 34),
    (23, 190, 207),
];

fn color(i: usize) -> RGBColor {
    let (r, g, b) = PALETTE[i % PALETTE.len()];
    RGBColor(r, g, b)
}

fn draw_err<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> PlotError {
    PlotError::Draw(e.to_string())
}

/// Tick labels on a log axis: up to 3 significant digits, `1e-3`, `2.5e-2`.
fn log_tick(v: f64) -> String {
    if (1e-2..1e4).contains(&v.abs()) {
        let s = format!("{:.3}", v);
        let s = s.trim_end_matches('0').trim_end_matches('.');
        return s.to_string();
    }
    let s = format!("{v:.2e}");
    match s.split_once('e') {
        Some((m, e)) => {
            let m = m.trim_end_matches('0').trim_end_matches('.');
            format!("{m}e{e}")
        }
        None => s,
    }
}

/// The data range of an axis, padded; on a log axis whole decades around the data.
/// [`PlotError::Span`] when the range (padded, or rounded out to decades) is wider than
/// an f64 holds: no chart can be drawn on it.
fn axis_range(
    axis: &'static str,
    values: impl Iterator<Item = f64>,
    log: bool,
    pad: bool,
) -> Result<(f64, f64), PlotError> {
    let (data_lo, data_hi) = values
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    if data_lo > data_hi {
        return Ok(if log { (0.1, 1.0) } else { (0.0, 1.0) });
    }
    let (mut lo, mut hi) = (data_lo, data_hi);
    if log {
        // At most 14 decades below the top: rounding noise of 1e-300 would flatten the rest.
        lo = lo.max(hi * 1e-14);
        let (a, b) = (lo.log10().floor(), hi.log10().ceil());
        let b = if b <= a { a + 1.0 } else { b };
        // A hair below the lowest decade, so that its tick is inside and labelled.
        (lo, hi) = (10f64.powf(a) * 0.999, 10f64.powf(b));
    } else if hi - lo <= 0.0 {
        let d = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
        lo -= d;
        hi += d;
    } else if pad {
        let d = 0.05 * (hi - lo);
        lo -= d;
        hi += d;
    }
    if (hi - lo).is_finite() {
        Ok((lo, hi))
    } else {
        Err(PlotError::Span {
            axis,
            lo: data_lo,
            hi: data_hi,
        })
    }
}

macro_rules! draw_chart {
    ($root:expr, $c:expr, $x:expr, $y:expr) => {{
        let c: &Chart = $c;
        let mut chart = ChartBuilder::on($root)
            .caption(c.title.as_str(), (FONT, 22))
            .margin(18)
            .x_label_area_size(52)
            .y_label_area_size(92)
            .build_cartesian_2d($x, $y)
            .map_err(draw_err)?;
        let xf = |v: &f64| log_tick(*v);
        let yf = |v: &f64| log_tick(*v);
        let mut mesh = chart.configure_mesh();
        mesh.y_labels(12)
            .x_desc(c.x_desc.as_str())
            .y_desc(c.y_desc.as_str())
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 16))
            .light_line_style(RGBColor(235, 235, 235));
        if c.x_log {
            mesh.x_label_formatter(&xf);
        }
        if c.y_log {
            mesh.y_label_formatter(&yf);
        }
        mesh.draw().map_err(draw_err)?;
        for (i, s) in c.series.iter().enumerate() {
            let col = color(i);
            for (k, seg) in s.segments.iter().enumerate() {
                let drawn = chart
                    .draw_series(LineSeries::new(seg.iter().copied(), col.stroke_width(2)))
                    .map_err(draw_err)?;
                if k == 0 {
                    drawn.label(s.label.as_str()).legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 24, y)], col.stroke_width(2))
                    });
                }
            }
            if s.markers {
                chart
                    .draw_series(s.points().map(|&p| Circle::new(p, 4, col.filled())))
                    .map_err(draw_err)?;
            }
            for &(x, lo, hi) in &s.bars {
                chart
                    .draw_series(LineSeries::new([(x, lo), (x, hi)], col.stroke_width(1)))
                    .map_err(draw_err)?;
            }
        }
        let position = match c.legend {
            Legend::UpperLeft => SeriesLabelPosition::UpperLeft,
            Legend::UpperRight => SeriesLabelPosition::UpperRight,
            Legend::LowerRight => SeriesLabelPosition::LowerRight,
        };
        chart
            .configure_series_labels()
            .position(position)
            .background_style(WHITE.mix(0.9))
            .border_style(RGBColor(160, 160, 160))
            .label_font((FONT, 14))
            .draw()
            .map_err(draw_err)?;
    }};
}

fn draw(root: &DrawingArea<BitMapBackend<'_>, Shift>, c: &Chart) -> Result<(), PlotError> {
    root.fill(&WHITE).map_err(draw_err)?;
    let xs = c.series.iter().flat_map(|s| s.points().map(|p| p.0));
    let ys = c
        .series
        .iter()
        .flat_map(|s| s.points().map(|p| p.1).chain(s.bars.iter().map(|b| b.2)));
    let (x0, x1) = match c.x_range {
        Some((a, b)) if a < b && (b - a).is_finite() && !(c.x_log && a <= 0.0) => (a, b),
        _ => axis_range("x", xs, c.x_log, c.x_log)?,
    };
    let (y0, y1) = axis_range("y", ys, c.y_log, true)?;
    match (c.x_log, c.y_log) {
        (false, false) => draw_chart!(root, c, x0..x1, y0..y1),
        (false, true) => draw_chart!(root, c, x0..x1, (y0..y1).log_scale()),
        (true, false) => draw_chart!(root, c, (x0..x1).log_scale(), y0..y1),
        (true, true) => draw_chart!(root, c, (x0..x1).log_scale(), (y0..y1).log_scale()),
    }
    root.present().map_err(draw_err)
}

/// Draws `chart` and writes it to `out` as a PNG, atomically.
pub fn render_png(chart: &Chart, out: &Path) -> Result<(), PlotError> {
    register_font()?;
    let (w, h) = chart.size;
    let mut rgb = vec![0u8; w as usize * h as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
        draw(&root, chart)?;
    }
    let mut png_bytes = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut png_bytes, w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        // Plots are mostly flat colour: the strongest settings keep them small.
        enc.set_compression(png::Compression::High);
        enc.set_filter(png::Filter::Adaptive);
        let mut writer = enc
            .write_header()
            .map_err(|e| PlotError::Draw(format!("PNG encoding failed: {e}")))?;
        writer
            .write_image_data(&rgb)
            .map_err(|e| PlotError::Draw(format!("PNG encoding failed: {e}")))?;
    }
    write_atomic(out, &png_bytes)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_break_at_missing_points() {
        let pts = [
            (0.0, 1.0),
            (1.0, 0.0),
            (2.0, 2.0),
            (3.0, f64::NAN),
            (4.0, 3.0),
        ];
        let log = Series::new("a", &pts, true);
        assert_eq!(
            log.segments,
            vec![vec![(0.0, 1.0)], vec![(2.0, 2.0)], vec![(4.0, 3.0)]]
        );
        let lin = Series::new("a", &pts, false);
        assert_eq!(lin.segments.len(), 2);
        // A curve rising through the cap is cut at the crossing (log space: 1e0 -> 1e4
        // crosses 1e2 half-way) and resumes where it comes back.
        let up = [(0.0, 1.0), (1.0, 1e4), (2.0, 1e6), (3.0, 1.0)];
        let c = Series::clipped("b", &up, true, 1e2);
        assert_eq!(c.segments.len(), 2);
        assert_eq!(c.segments[0][0], (0.0, 1.0));
        let (x, y) = c.segments[0][1];
        assert!((x - 0.5).abs() < 1e-12 && y == 1e2, "{x} {y}");
        assert_eq!(c.segments[1].last(), Some(&(3.0, 1.0)));
        assert!(c.points().all(|p| p.1 <= 1e2));
    }

    /// A span wider than an f64 holds is refused (plotters would never finish laying out
    /// its ticks); a non-finite value is left out of the range.
    #[test]
    fn an_axis_wider_than_a_float_is_refused() {
        for (values, log) in [
            (vec![-1e308, 1e308], false),
            (vec![0.0, 1.7e308], false),
            (vec![1.7e308, 1.7e308], false),
            (vec![1.0, 1.5e308], true),
        ] {
            let e = axis_range("y", values.iter().copied(), log, true).unwrap_err();
            assert_eq!(e.exit_code(), 2);
            assert!(e.to_string().contains("y axis"), "{e}");
        }
        let r = axis_range(
            "x",
            [0.0, f64::INFINITY, 3.0, f64::NAN].into_iter(),
            false,
            false,
        );
        assert_eq!(r.unwrap(), (0.0, 3.0));
    }

    #[test]
    fn log_axes_span_whole_decades() {
        let (lo, hi) = axis_range("y", [3e-5, 0.2].into_iter(), true, true).unwrap();
        assert!(
            (lo - 0.999e-5).abs() < 1e-20 && (hi - 1.0).abs() < 1e-12,
            "{lo} {hi}"
        );
        assert_eq!(log_tick(0.015), "0.015");
        assert_eq!(log_tick(1e-5), "1e-5");
        assert_eq!(log_tick(2.5e-7), "2.5e-7");
    }
}
