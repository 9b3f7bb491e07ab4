//! PNG plots of runs' energy logs (`msc plot`).
//!
//! - one run: every energy term that is not zero throughout, over time;
//! - several runs: one term (default total) of each, over time;
//! - `--drift`: |E(t) - E(0)| / |E(0)| of each run (log scale);
//! - `--relative-error --reference REF`: |E(t) - E_ref(t)| / |E_ref(0)|, the metric of
//!   the paper's Figure 4 (the reference interpolated linearly in time when the steps
//!   differ; log scale);
//! - `--relative-error --by-dt`: the mean and standard deviation of that error over
//!   t >= `--from` against each run's time step, one curve per integrator (the paper's
//!   Figure 5).
//!
//! Drawn with plotters into memory, text with an embedded font, written atomically.

pub mod chart;
pub mod data;

pub use chart::{render_png, Chart, Legend, Series};
pub use data::{EnergyTable, Term};

use crate::output::OutputError;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlotError {
    #[error("cannot read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: line {line}: {message}", path.display())]
    Parse {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("nothing to plot: {what}")]
    NoData { what: String },
    #[error("{0}")]
    Usage(String),
    /// An axis whose data span more than an f64 can hold (a run that blew up to 1e308).
    #[error(
        "the {axis} axis would span {lo:e} to {hi:e}, wider than a number can hold; \
         leave out the run whose energy log holds these values"
    )]
    Span {
        axis: &'static str,
        lo: f64,
        hi: f64,
    },
    #[error("cannot draw the plot: {0}")]
    Draw(String),
    #[error(transparent)]
    Output(#[from] OutputError),
}

impl PlotError {
    /// 2 for bad input (missing or malformed energy.csv, bad options, data no axis can
    /// span), 1 for drawing and
    /// writing failures.
    pub fn exit_code(&self) -> i32 {
        match self {
            Self::Read { .. }
            | Self::Parse { .. }
            | Self::NoData { .. }
            | Self::Usage(_)
            | Self::Span { .. } => 2,
            Self::Draw(_) | Self::Output(_) => 1,
        }
    }
}

/// What to plot.
#[derive(Clone, Debug, PartialEq)]
pub enum Mode {
    /// Every term of one run (the default for one run).
    Terms,
    /// One term of each run (the default for several).
    Overlay,
    /// |E(t) - E(0)| / |E(0)| of each run.
    Drift,
    /// |E(t) - E_ref(t)| / |E_ref(0)| of each run.
    RelativeError { reference: PathBuf },
    /// Mean and standard deviation of the relative error over t >= `from`, against the
    /// time step, one curve per integrator.
    ErrorByDt { reference: PathBuf, from: f64 },
}

/// A plot request.
#[derive(Clone, Debug)]
pub struct PlotRequest {
    /// Run folders (or `energy.csv` files).
    pub runs: Vec<PathBuf>,
    /// Legend labels, in the order of `runs` (default: the run folders' names).
    pub labels: Vec<String>,
    pub mode: Mode,
    pub term: Term,
    pub title: Option<String>,
    pub size: (u32, u32),
    pub out: PathBuf,
}

/// What was drawn: the curves and how many points each has.
#[derive(Clone, Debug)]
pub struct Plotted {
    pub out: PathBuf,
    pub curves: Vec<(String, usize)>,
    /// Runs left out, with why (no drawable points, diverged in the window).
    pub left_out: Vec<String>,
}

/// Relative errors and drifts above this (1000 %) mean nothing: the curve is cut where it
/// crosses it and leaves the chart at the top, and the axis stops there.
pub const RELATIVE_CAP: f64 = 10.0;

/// The run's name for legends: its folder's name.
pub fn run_label(run: &Path) -> String {
    let dir = if run.is_dir() {
        Some(run)
    } else {
        run.parent()
    };
    dir.and_then(|d| {
        let abs = std::path::absolute(d).unwrap_or_else(|_| d.to_path_buf());
        abs.file_name().map(|n| n.to_string_lossy().into_owned())
    })
    .unwrap_or_else(|| run.display().to_string())
}

/// The integrator a run used, from its `summary.json` (`None` without one).
fn integrator_of(run: &Path) -> Option<String> {
    let dir = if run.is_dir() { run } else { run.parent()? };
    let text = std::fs::read_to_string(dir.join(crate::output::run_dir::SUMMARY_FILE)).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v.get("integrator")?.as_str().map(str::to_string)
}

/// (time step, mean error, standard deviation) of one run in `--by-dt`.
type DtPoint = (f64, f64, f64);

/// Draws the requested plot into `request.out`.
pub fn plot(request: &PlotRequest) -> Result<Plotted, PlotError> {
    let r = request;
    if r.runs.is_empty() {
        return Err(PlotError::Usage("give at least one run folder".into()));
    }
    if !r.labels.is_empty() && r.labels.len() != r.runs.len() {
        return Err(PlotError::Usage(format!(
            "{} --label values for {} runs; give one per run or none",
            r.labels.len(),
            r.runs.len()
        )));
    }
    if r.mode == Mode::Terms && r.runs.len() != 1 {
        return Err(PlotError::Usage(
            "the energy-terms plot takes one run".into(),
        ));
    }
    let tables = r
        .runs
        .iter()
        .map(|p| EnergyTable::read(p))
        .collect::<Result<Vec<_>, _>>()?;
    let label = |i: usize| {
        r.labels
            .get(i)
            .cloned()
            .unwrap_or_else(|| run_label(&r.runs[i]))
    };
    let term = r.term.name();
    let time = "time t (s)".to_string();
    // Time axes span every run from its first row (t = 0 included even where a log axis
    // cannot show the point); an infinite time (a run whose step overflowed) is left out,
    // as its points are.
    let span = (tables.iter().flat_map(|t| &t.times))
        .filter(|t| t.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &t| {
            (a.min(t), b.max(t))
        });
    let mut left_out = Vec::new();
    let (chart, series) = match &r.mode {
        Mode::Terms => {
            let t = &tables[0];
            let series: Vec<Series> = Term::ALL
                .iter()
                .filter(|&&k| t.column(k).iter().any(|v| *v != 0.0))
                .map(|&k| {
                    let pts: Vec<(f64, f64)> = t.times.iter().copied().zip(t.column(k)).collect();
                    Series::new(k.name(), &pts, false)
                })
                .collect();
            let chart = Chart {
                title: format!("{}: energy terms", label(0)),
                x_desc: time,
                y_desc: "energy (J)".into(),
                x_log: false,
                y_log: false,
                legend: Legend::UpperRight,
                series: vec![],
                size: r.size,
                x_range: Some(span),
            };
            (chart, series)
        }
        Mode::Overlay => {
            let series = tables
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let pts: Vec<(f64, f64)> =
                        t.times.iter().copied().zip(t.column(r.term)).collect();
                    Series::new(label(i), &pts, false)
                })
                .collect();
            let chart = Chart {
                title: format!("{term} energy"),
                x_desc: time,
                y_desc: format!("{term} energy E (J)"),
                x_log: false,
                y_log: false,
                legend: Legend::UpperRight,
                series: vec![],
                size: r.size,
                x_range: Some(span),
            };
            (chart, series)
        }
        Mode::Drift => {
            let mut series = Vec::new();
            for (i, t) in tables.iter().enumerate() {
                series.push(Series::clipped(
                    label(i),
                    &data::drift(t, r.term)?,
                    true,
                    RELATIVE_CAP,
                ));
            }
            let chart = Chart {
                title: format!("Relative drift of the {term} energy"),
                x_desc: time,
                y_desc: "|E(t) − E(0)| / |E(0)|".into(),
                x_log: false,
                y_log: true,
                legend: Legend::UpperRight,
                series: vec![],
                size: r.size,
                x_range: Some(span),
            };
            (chart, series)
        }
        Mode::RelativeError { reference } => {
            let reference_table = EnergyTable::read(reference)?;
            let mut series = Vec::new();
            for (i, t) in tables.iter().enumerate() {
                let pts = data::relative_error(t, &reference_table, r.term)?;
                series.push(Series::clipped(label(i), &pts, true, RELATIVE_CAP));
            }
            let chart = Chart {
                title: format!(
                    "Relative error of the {term} energy against {}",
                    run_label(reference)
                ),
                x_desc: time,
                y_desc: "|E(t) − E_ref(t)| / |E_ref(0)|".into(),
                x_log: false,
                y_log: true,
                legend: Legend::UpperRight,
                series: vec![],
                size: r.size,
                x_range: Some(span),
            };
            (chart, series)
        }
        Mode::ErrorByDt { reference, from } => {
            if !from.is_finite() {
                return Err(PlotError::Usage(format!(
                    "--from {from}: the window's start must be a finite time in s"
                )));
            }
            let reference_table = EnergyTable::read(reference)?;
            // Group by integrator, keeping the order of first appearance.
            let mut groups: Vec<(String, Vec<DtPoint>)> = Vec::new();
            for (i, t) in tables.iter().enumerate() {
                let name = label(i);
                let Some(dt) = t.dt() else {
                    left_out.push(format!("{name}: no step after 0"));
                    continue;
                };
                let pts = data::relative_error(t, &reference_table, r.term)?;
                let Some((mean, sd)) = data::window_stats(&pts, *from) else {
                    left_out.push(format!(
                        "{name}: no finite error at t >= {from} s (diverged or too short)"
                    ));
                    continue;
                };
                if mean > RELATIVE_CAP {
                    left_out.push(format!(
                        "{name}: mean relative error {mean:.1e} (blew up), above the axis"
                    ));
                    continue;
                }
                let group = integrator_of(&r.runs[i]).unwrap_or_else(|| "runs".into());
                match groups.iter_mut().find(|(g, _)| *g == group) {
                    Some((_, v)) => v.push((dt, mean, sd)),
                    None => groups.push((group, vec![(dt, mean, sd)])),
                }
            }
            let series = groups
                .into_iter()
                .map(|(g, mut v)| {
                    v.sort_by(|a, b| a.0.total_cmp(&b.0));
                    let pts: Vec<(f64, f64)> = v.iter().map(|p| (p.0, p.1)).collect();
                    let mut s = Series::new(g, &pts, true);
                    s.markers = true;
                    // Bars of one standard deviation, cut at the axis floor on a log scale.
                    s.bars = v
                        .iter()
                        .filter(|p| p.1 > 0.0)
                        .map(|&(dt, m, sd)| {
                            (dt, (m - sd).max(m * 1e-3), (m + sd).min(RELATIVE_CAP))
                        })
                        .collect();
                    s
                })
                .collect();
            let chart = Chart {
                title: format!(
                    "Relative error of the {term} energy over t >= {from} s, against {}",
                    run_label(reference)
                ),
                x_desc: "time step h (s)".into(),
                y_desc: "mean |E − E_ref| / |E_ref(0)| (bars: ±1 s.d.)".into(),
                x_log: true,
                y_log: true,
                legend: Legend::UpperLeft,
                series: vec![],
                size: r.size,
                x_range: None,
            };
            (chart, series)
        }
    };
    let mut kept = Vec::new();
    for s in series {
        if s.is_empty() {
            left_out.push(format!("{}: no drawable points", s.label));
        } else {
            kept.push(s);
        }
    }
    if kept.is_empty() {
        return Err(PlotError::NoData {
            what: format!("no curve has drawable points ({})", left_out.join("; ")),
        });
    }
    let curves = kept
        .iter()
        .map(|s| (s.label.clone(), s.points().count()))
        .collect();
    let chart = Chart {
        title: r.title.clone().unwrap_or(chart.title),
        series: kept,
        ..chart
    };
    render_png(&chart, &r.out)?;
    Ok(Plotted {
        out: r.out.clone(),
        curves,
        left_out,
    })
}
