//! What a batch records per run, and `runs.csv`.

use super::plan::{Plan, RunSpec};
use crate::digest::FileDigest;
use crate::output::{write_atomic, OutputError};
use std::path::Path;

/// How a run ended.
#[derive(Clone, Debug, PartialEq)]
pub enum RunStatus {
    /// Finished with finite energies.
    Ok,
    /// Stopped on non-finite energies; its outputs up to there are written.
    Diverged,
    /// Did not run to the end: bad scene, GPU or write error. The reason, one line.
    Failed(String),
    /// A stop request (SIGINT, SIGTERM) ended it; its outputs up to there are written,
    /// and a rerun of the batch redoes it.
    Interrupted,
    /// `msc merge`: no shard completed it (not run yet, or its outputs do not check
    /// out). Why, one line.
    Missing(String),
}

impl RunStatus {
    /// `ok`, `diverged`, `failed` or `interrupted`, as in `runs.csv`.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Diverged => "diverged",
            Self::Failed(_) => "failed",
            Self::Interrupted => "interrupted",
            Self::Missing(_) => "missing",
        }
    }
}

/// The final energy terms of `summary.json` (`null` when non-finite).
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize)]
pub struct FinalEnergy {
    pub kinetic: Option<f64>,
    pub elastic: Option<f64>,
    pub coulomb: Option<f64>,
    pub gravity: Option<f64>,
    pub external: Option<f64>,
    pub total: Option<f64>,
}

/// The fields of a run's `summary.json` that a batch reports (the file has more).
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
pub struct SummaryRecord {
    /// The msc that made the run: a batch trusts only its own version's runs.
    pub msc_version: String,
    pub scene: String,
    pub backend: String,
    pub integrator: String,
    pub dt: f64,
    pub steps_requested: u64,
    pub steps: u64,
    pub time: f64,
    pub setup_seconds: f64,
    pub wall_seconds: f64,
    pub ms_per_step: f64,
    pub finite: bool,
    pub interrupted: bool,
    pub final_energy: FinalEnergy,
    pub solver_residual: Option<f64>,
    pub solver_iterations: Option<u32>,
    pub frames: u64,
    /// What the run read and wrote (see [`crate::output::Summary`]). A summary written
    /// before these were recorded does not parse as a record, so it is never trusted.
    pub scene_sha256: String,
    pub inputs: Vec<FileDigest>,
    pub outputs: Vec<FileDigest>,
}

impl SummaryRecord {
    /// Reads a complete `summary.json`; `None` when missing, truncated or not a summary.
    pub fn read(path: &Path) -> Option<Self> {
        let text = std::fs::read_to_string(path).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// The record of a summary just written (through its JSON form, so it reads exactly
    /// as the file does: non-finite numbers become `None`).
    pub fn from_summary(s: &crate::output::Summary) -> Option<Self> {
        serde_json::to_value(s)
            .ok()
            .and_then(|v| serde_json::from_value(v).ok())
    }
}

/// One row of `runs.csv`.
#[derive(Clone, Debug, PartialEq)]
pub struct RunRecord {
    pub name: String,
    /// Values of the plan's columns.
    pub columns: Vec<String>,
    pub status: RunStatus,
    /// `None` when the run failed before writing a summary.
    pub summary: Option<SummaryRecord>,
    /// True when a complete earlier run was found and this one was not redone.
    pub skipped: bool,
}

/// Columns after the run's name, status and the plan's columns.
pub const RESULT_COLUMNS: [&str; 18] = [
    "steps",
    "steps_requested",
    "time",
    "dt",
    "ms_per_step",
    "wall_seconds",
    "setup_seconds",
    "finite",
    "kinetic",
    "elastic",
    "coulomb",
    "gravity",
    "external",
    "total",
    "solver_residual",
    "solver_iterations",
    "backend",
    "skipped",
];

/// The header of `runs.csv` for a plan.
pub fn header(plan: &Plan) -> Vec<String> {
    let mut h = vec!["run".to_string(), "status".to_string()];
    h.extend(plan.columns.iter().cloned());
    h.extend(RESULT_COLUMNS.iter().map(|s| s.to_string()));
    h.push("reason".into());
    h
}

fn sci(v: Option<f64>) -> String {
    v.map(|x| format!("{x:e}")).unwrap_or_default()
}

impl RunRecord {
    /// A run that could not run (or whose outcome cannot be read), and why.
    pub(super) fn failed(spec: &RunSpec, why: String) -> Self {
        Self {
            name: spec.name.clone(),
            columns: spec.columns.clone(),
            status: RunStatus::Failed(why),
            summary: None,
            skipped: false,
        }
    }

    /// A run that wrote `summary`; `skipped`: by an earlier batch, not redone.
    pub(super) fn from_summary(spec: &RunSpec, summary: SummaryRecord, skipped: bool) -> Self {
        Self {
            name: spec.name.clone(),
            columns: spec.columns.clone(),
            status: if summary.interrupted {
                RunStatus::Interrupted
            } else if summary.finite {
                RunStatus::Ok
            } else {
                RunStatus::Diverged
            },
            summary: Some(summary),
            skipped,
        }
    }
}

impl RunRecord {
    /// The row's fields, in [`header`]'s order.
    pub fn fields(&self) -> Vec<String> {
        let mut f = vec![self.name.clone(), self.status.label().to_string()];
        f.extend(self.columns.iter().cloned());
        match &self.summary {
            Some(s) => {
                let e = &s.final_energy;
                f.extend([
                    s.steps.to_string(),
                    s.steps_requested.to_string(),
                    s.time.to_string(),
                    s.dt.to_string(),
                    s.ms_per_step.to_string(),
                    s.wall_seconds.to_string(),
                    s.setup_seconds.to_string(),
                    s.finite.to_string(),
                    sci(e.kinetic),
                    sci(e.elastic),
                    sci(e.coulomb),
                    sci(e.gravity),
                    sci(e.external),
                    sci(e.total),
                    sci(s.solver_residual),
                    s.solver_iterations
                        .map(|i| i.to_string())
                        .unwrap_or_default(),
                    s.backend.clone(),
                ]);
            }
            None => f.extend(std::iter::repeat_n(String::new(), RESULT_COLUMNS.len() - 1)),
        }
        f.push(self.skipped.to_string());
        f.push(match &self.status {
            RunStatus::Failed(reason) | RunStatus::Missing(reason) => reason.clone(),
            _ => String::new(),
        });
        f
    }
}

/// One CSV field: quoted when it holds a comma, quote or line break (RFC 4180).
fn csv_field(s: &str) -> String {
    let s = s.replace(['\r', '\n'], " ");
    if s.contains([',', '"']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

/// The fields of one line of a table [`runs_csv`] wrote (no line breaks inside fields).
pub fn parse_csv_line(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        let field = fields.last_mut().expect("never empty");
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (false, '"') if field.is_empty() => quoted = true,
            (false, ',') => fields.push(String::new()),
            _ => field.push(c),
        }
    }
    fields
}

/// `runs.csv` for the records so far, as text.
pub fn runs_csv(plan: &Plan, records: &[RunRecord]) -> String {
    let line = |fields: Vec<String>| {
        let mut l = fields
            .iter()
            .map(|f| csv_field(f))
            .collect::<Vec<_>>()
            .join(",");
        l.push('\n');
        l
    };
    let mut text = line(header(plan));
    for r in records {
        text.push_str(&line(r.fields()));
    }
    text
}

/// Writes `runs.csv` atomically.
pub fn write_runs_csv(path: &Path, plan: &Plan, records: &[RunRecord]) -> Result<(), OutputError> {
    write_atomic(path, runs_csv(plan, records).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::plan::RunSpec;

    #[test]
    fn rows_line_up_with_the_header_and_quote_what_needs_it() {
        let plan = Plan {
            columns: vec!["mesh.resolution".into()],
            runs: vec![RunSpec {
                name: "r".into(),
                scene: "s".into(),
                set: vec![],
                columns: vec!["[8, 8]".into()],
            }],
        };
        let failed = RunRecord {
            name: "r".into(),
            columns: vec!["[8, 8]".into()],
            status: RunStatus::Failed("bad \"x\", line 2\nmore".into()),
            summary: None,
            skipped: false,
        };
        assert_eq!(failed.fields().len(), header(&plan).len());
        let text = runs_csv(&plan, std::slice::from_ref(&failed));
        let row = text.lines().nth(1).unwrap();
        assert!(row.starts_with("r,failed,\"[8, 8]\","), "{row}");
        assert!(
            row.ends_with(",false,\"bad \"\"x\"\", line 2 more\""),
            "{row}"
        );
        assert_eq!(text.lines().count(), 2);
        // Read back as written; the line break became a space.
        let mut want = failed.fields();
        *want.last_mut().unwrap() = "bad \"x\", line 2 more".into();
        assert_eq!(parse_csv_line(row), want);
        assert_eq!(parse_csv_line(text.lines().next().unwrap()), header(&plan));
    }
}
