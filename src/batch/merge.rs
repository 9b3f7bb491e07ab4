//! `msc merge`: the one `runs.csv` of a sharded batch, from its `plan.json`, every run
//! folder's `summary.json` (trusted only as a resumed batch trusts it) and the shards'
//! tables (for the reason a run failed), and the list of runs still to do.

use super::planfile::PlanFile;
use super::planned::load;
use super::record::{header, parse_csv_line, write_runs_csv, RunRecord, RunStatus};
use super::resume::completed;
use super::shard::Shard;
use super::{BatchError, RUNS_CSV};
use crate::output::lock::{FolderLock, LockKind};
use crate::run::error::one_line;
use crate::run::BackendArg;
use clap::ValueEnum;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// What a merge found.
#[derive(Debug)]
pub struct MergeReport {
    /// One record per planned run, in plan order.
    pub records: Vec<RunRecord>,
    pub runs_csv: PathBuf,
    /// For every shard with missing or failed runs: their names, and the command that
    /// reruns the shard (which redoes only those).
    pub reruns: Vec<(Shard, Vec<String>, String)>,
}

impl MergeReport {
    pub fn count(&self, label: &str) -> usize {
        self.records
            .iter()
            .filter(|r| r.status.label() == label)
            .count()
    }

    /// [`BatchError::Incomplete`] when a run is missing, failed or interrupted;
    /// [`BatchError::RunsFailed`] when every run is there but some diverged.
    pub fn check(&self) -> Result<(), BatchError> {
        let total = self.records.len();
        let missing = self.reruns.iter().map(|(_, runs, _)| runs.len()).sum();
        if missing > 0 {
            return Err(BatchError::Incomplete {
                missing,
                total,
                csv: self.runs_csv.clone(),
            });
        }
        let diverged = self.count("diverged");
        if diverged > 0 {
            return Err(BatchError::RunsFailed {
                failed: 0,
                diverged,
                total,
                csv: self.runs_csv.clone(),
            });
        }
        Ok(())
    }
}

/// Merges the shards of the batch in `dir` into `dir/runs.csv` (written even when runs
/// are missing: they are listed with status `missing`).
pub fn merge(dir: &Path) -> Result<MergeReport, BatchError> {
    let plan_file = PlanFile::read(dir)?;
    // Beside running shards, but not beside a whole batch writing the same runs.csv.
    let _lock = FolderLock::folder(dir, LockKind::Shared)?;
    let plan_path = dir.join(super::planfile::PLAN_FILE);
    let backend =
        BackendArg::from_str(&plan_file.backend, true).map_err(|_| BatchError::ReadPlan {
            path: plan_path,
            message: format!("unknown backend '{}'", plan_file.backend),
        })?;
    let plan = plan_file.plan();
    let tables = shard_rows(dir, &plan_file, &header(&plan));
    let mut records = Vec::with_capacity(plan.runs.len());
    let mut todo: Vec<Vec<String>> = vec![Vec::new(); plan_file.shards];
    for (i, spec) in plan.runs.iter().enumerate() {
        let row = tables.get(&spec.name);
        let scene = load(spec, plan_file.steps);
        let record = match scene {
            Err(e) => crate::batch::RunRecord {
                name: spec.name.clone(),
                columns: spec.columns.clone(),
                status: RunStatus::Missing(format!(
                    "its scene does not load now: {}",
                    one_line(&e)
                )),
                summary: None,
                skipped: false,
            },
            Ok(scene) => match completed(&dir.join(&spec.name), &scene, backend) {
                Ok(s) => {
                    let skipped = row.is_some_and(|r| r.skipped == "true");
                    RunRecord::from_summary(spec, s, skipped)
                }
                Err(why) => {
                    let status = match row {
                        Some(r) if r.status == "failed" => RunStatus::Failed(r.reason.clone()),
                        _ => RunStatus::Missing(match why {
                            Some(why) => format!("incomplete: {why}"),
                            None => "not run".into(),
                        }),
                    };
                    RunRecord {
                        name: spec.name.clone(),
                        columns: spec.columns.clone(),
                        status,
                        summary: None,
                        skipped: false,
                    }
                }
            },
        };
        if !matches!(record.status, RunStatus::Ok | RunStatus::Diverged) {
            todo[i % plan_file.shards].push(spec.name.clone());
        }
        records.push(record);
    }
    // The commands name this folder, wherever it was when the shards ran; a folder they
    // cannot name is refused before runs.csv is written.
    let rerun = if todo.iter().all(Vec::is_empty) {
        plan_file.rerun.clone()
    } else {
        plan_file.rerun.for_folder(dir)?
    };
    let runs_csv = dir.join(RUNS_CSV);
    write_runs_csv(&runs_csv, &plan, &records)?;
    let reruns = todo
        .into_iter()
        .enumerate()
        .filter(|(_, runs)| !runs.is_empty())
        .map(|(k, runs)| {
            let shard = Shard {
                index: k,
                count: plan_file.shards,
            };
            let command = rerun.command(&shard.arg());
            (shard, runs, command)
        })
        .collect();
    Ok(MergeReport {
        records,
        runs_csv,
        reruns,
    })
}

/// What a shard's table says of a run.
struct Row {
    status: String,
    skipped: String,
    reason: String,
}

/// The rows of every shard table of this plan's shard count, by run name. A table that
/// is missing, or a row that does not fit the header, is ignored: the summaries decide.
fn shard_rows(dir: &Path, plan: &PlanFile, header: &[String]) -> HashMap<String, Row> {
    let mut rows = HashMap::new();
    let col = |name: &str| header.iter().position(|h| h == name);
    let (Some(status), Some(skipped), Some(reason)) =
        (col("status"), col("skipped"), col("reason"))
    else {
        return rows;
    };
    for k in 0..plan.shards {
        let name = Shard {
            index: k,
            count: plan.shards,
        }
        .table_name();
        let Ok(text) = std::fs::read_to_string(dir.join(name)) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f = parse_csv_line(line);
            if f.len() != header.len() {
                continue;
            }
            rows.insert(
                f[0].clone(),
                Row {
                    status: f[status].clone(),
                    skipped: f[skipped].clone(),
                    reason: f[reason].clone(),
                },
            );
        }
    }
    rows
}
