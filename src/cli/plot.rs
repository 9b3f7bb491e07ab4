//! `msc plot`: PNG plots of runs' energy logs.

use super::CliError;
use crate::output::inputs::refuse_overwrite;
use crate::output::run_dir::{ENERGY_FILE, FRAMES_DIR, SCENE_FILE, SUMMARY_FILE};
use crate::plot::{self, Mode, PlotRequest, Plotted, Term};
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, clap::Args)]
pub struct PlotArgs {
    /// Run folders (or energy.csv files). One run: all its energy terms; several: one
    /// term of each (--term), or their --drift or --relative-error
    #[arg(value_name = "RUN", required = true)]
    pub runs: Vec<PathBuf>,
    /// The PNG to write [default: RUN/energy.png for one run; required for several]
    #[arg(long, short, value_name = "FILE.png")]
    pub out: Option<PathBuf>,
    /// Plot |E(t) - E_ref(t)| / |E_ref(0)| against --reference (log scale; the reference
    /// is interpolated linearly in time when the time steps differ)
    #[arg(long, requires = "reference")]
    pub relative_error: bool,
    /// The reference run for --relative-error, e.g. Verlet at a fine time step
    #[arg(long, value_name = "RUN", requires = "relative_error")]
    pub reference: Option<PathBuf>,
    /// With --relative-error: plot its mean and standard deviation over t >= --from
    /// against each run's time step, one curve per integrator
    #[arg(long, requires = "relative_error")]
    pub by_dt: bool,
    /// Start of the --by-dt window, in s
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 0.0,
        requires = "by_dt"
    )]
    pub from: f64,
    /// Plot |E(t) - E(0)| / |E(0)| of each run (log scale)
    #[arg(long, conflicts_with = "relative_error")]
    pub drift: bool,
    /// The energy term overlaid or compared [default: total]
    #[arg(long, value_enum)]
    pub term: Option<Term>,
    /// Legend label of each run, in order [default: the run folders' names]
    #[arg(long = "label", value_name = "TEXT")]
    pub labels: Vec<String>,
    /// Chart title
    #[arg(long)]
    pub title: Option<String>,
    /// Image size in pixels
    #[arg(long, value_name = "WxH", default_value = "1024x640", value_parser = parse_size)]
    pub size: (u32, u32),
}

fn parse_size(s: &str) -> Result<(u32, u32), String> {
    let parsed = s
        .split_once(['x', 'X'])
        .and_then(|(w, h)| Some((w.trim().parse().ok()?, h.trim().parse().ok()?)));
    match parsed {
        Some((w, h)) if (200..=8192).contains(&w) && (150..=8192).contains(&h) => Ok((w, h)),
        _ => Err(format!(
            "expected WIDTHxHEIGHT in pixels (200..8192 x 150..8192), got '{s}'"
        )),
    }
}

/// Draws the plot; prints where it went unless nothing should be printed.
pub fn execute(args: &PlotArgs) -> Result<Plotted, CliError> {
    let mode = match (&args.reference, args.relative_error, args.by_dt, args.drift) {
        (Some(r), true, true, _) => Mode::ErrorByDt {
            reference: r.clone(),
            from: args.from,
        },
        (Some(r), true, false, _) => Mode::RelativeError {
            reference: r.clone(),
        },
        (_, _, _, true) => Mode::Drift,
        _ if args.runs.len() == 1 => Mode::Terms,
        _ => Mode::Overlay,
    };
    // One run's plot draws every term: a --term would be ignored without a word.
    if let (Mode::Terms, Some(term)) = (&mode, args.term) {
        return Err(plot::PlotError::Usage(format!(
            "--term {}: the plot of one run shows all its energy terms; --term picks the \
             term of several runs, or of --drift or --relative-error",
            term.name()
        ))
        .into());
    }
    // A missing run is named before anything else (not mistaken for a missing --out).
    if let Some(missing) = args.runs.iter().find(|r| !r.exists()) {
        return Err(plot::PlotError::Read {
            path: missing.clone(),
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no such run folder or energy.csv file",
            ),
        }
        .into());
    }
    let out = match &args.out {
        Some(o) => o.clone(),
        None if args.runs.len() == 1 && args.runs[0].is_dir() => args.runs[0].join("energy.png"),
        None => {
            return Err(plot::PlotError::Usage(
                "--out FILE.png is needed when plotting several runs or a file".into(),
            )
            .into())
        }
    };
    // The PNG must not replace what the plot reads (an energy log, a summary), nor
    // another file of a run it plots: its scene copy or a frame.
    let mut inputs: Vec<(PathBuf, &'static str)> = Vec::new();
    for run in args.runs.iter().chain(&args.reference) {
        if run.is_dir() {
            inputs.push((run.join(ENERGY_FILE), "energy log"));
            inputs.push((run.join(SUMMARY_FILE), "run summary"));
            inputs.push((run.join(SCENE_FILE), "run's scene"));
            if crate::output::inputs::inside(&out, &run.join(FRAMES_DIR)) {
                inputs.push((out.clone(), "run's frames folder"));
            }
        } else {
            inputs.push((run.clone(), "energy log"));
        }
    }
    let inputs: Vec<(&Path, &'static str)> =
        inputs.iter().map(|(p, w)| (p.as_path(), *w)).collect();
    refuse_overwrite(&out, "--out", &inputs)?;
    let done = plot::plot(&PlotRequest {
        runs: args.runs.clone(),
        labels: args.labels.clone(),
        mode,
        term: args.term.unwrap_or(Term::Total),
        title: args.title.clone(),
        size: args.size,
        out,
    })?;
    for why in &done.left_out {
        eprintln!("note: left out {why}");
    }
    println!("wrote {}", done.out.display());
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_within_bounds() {
        assert_eq!(parse_size("800x600"), Ok((800, 600)));
        assert!(parse_size("800").is_err());
        assert!(parse_size("10x10").is_err());
        assert!(parse_size("100000x600").is_err());
    }
}
