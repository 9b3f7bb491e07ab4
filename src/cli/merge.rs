//! `msc merge`: one `runs.csv` from the shards of a sharded sweep or batch.

use super::CliError;
use crate::batch::{merge, MergeReport};
use std::path::PathBuf;

#[derive(Clone, Debug, clap::Args)]
pub struct MergeArgs {
    /// The batch folder the shards wrote into (their --out)
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

/// Writes `DIR/runs.csv`; exits 1 when runs are missing or failed (naming each with the
/// command that reruns its shard) or diverged, 2 when `DIR` holds no plan.
pub fn execute(args: &MergeArgs) -> Result<MergeReport, CliError> {
    let report = merge(&args.dir)?;
    for (shard, runs, command) in &report.reruns {
        eprintln!(
            "shard {}: {} run(s) missing or failed: {}",
            shard.arg(),
            runs.len(),
            runs.join(", ")
        );
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
