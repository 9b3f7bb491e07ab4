//! `msc merge`: one `runs.csv` from the shards of a sharded sweep or batch.

use super::CliError;
use crate::batch::{merge, MergeReport, RunStatus};
use std::path::PathBuf;

#[derive(Clone, Debug, clap::Args)]
pub struct MergeArgs {
    /// The batch folder the shards wrote into (their --out)
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

/// Writes `DIR/runs.csv`; exits 1 when runs are missing or failed (naming each, why, and
/// the command that reruns its shard) or diverged, 2 when `DIR` holds no plan.
pub fn execute(args: &MergeArgs) -> Result<MergeReport, CliError> {
    let report = merge(&args.dir)?;
    for (shard, runs, command) in &report.reruns {
        eprintln!(
            "shard {}: {} run(s) missing or failed: {}",
            shard.arg(),
            runs.len(),
            runs.join(", ")
        );
        // Why each is left out: a half-written run is told from one never run.
        for name in runs {
            let status = report.records.iter().find(|r| &r.name == name);
            let why = match status.map(|r| &r.status) {
                Some(RunStatus::Missing(why)) => why.clone(),
                Some(RunStatus::Failed(why)) => format!("failed: {why}"),
                Some(other) => other.label().to_string(),
                None => "not in the plan".into(),
            };
            eprintln!("  {name}: {why}");
        }
        eprintln!("  rerun with: {command}");
    }
    println!(
        "{} runs: {} ok, {} diverged, {} failed, {} missing; wrote {}",
        report.records.len(),
        report.count("ok"),
        report.count("diverged"),
        report.count("failed") + report.count("interrupted"),
        report.count("missing"),
        report.runs_csv.display()
    );
    report.check()?;
    Ok(report)
}
