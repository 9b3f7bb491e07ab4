//! `msc sweep`: one scene run for every combination of `--vary` values.

use super::backend::BackendArg;
use super::scene_args::{self, SceneArgs};
use super::CliError;
use crate::batch::{plan, run_batch, BatchOptions, BatchReport, Vary};
use std::path::PathBuf;

#[derive(Clone, Debug, clap::Args)]
pub struct SweepArgs {
    #[command(flatten)]
    pub scene: SceneArgs,
    /// Run the scene with each value of KEY (TOML values, as --set takes them; commas
    /// inside [...] or quotes stay in the value). Repeat for several keys: every
    /// combination runs
    #[arg(long, value_name = "KEY=V1,V2,...", required = true)]
    pub vary: Vec<String>,
    /// Batch folder: one sub-folder per run, named after its values, and runs.csv
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Which solver runs the scenes (one GPU device serves every run)
    #[arg(long, value_enum, default_value_t = BackendArg::Auto)]
    pub backend: BackendArg,
    /// Number of steps of every run, overriding the scene's `steps` or `duration`
    #[arg(long, value_name = "N")]
    pub steps: Option<u64>,
    /// No progress bar and no per-run lines (failed runs are still reported)
    #[arg(long, short)]
    pub quiet: bool,
}

/// Runs the sweep. Exits 2 before anything runs when a variant's scene does not load
/// ([`crate::batch::BatchError::Plan`]), 1 ([`crate::batch::BatchError::RunsFailed`])
/// when a run failed or diverged, after every run was tried.
pub fn execute(args: &SweepArgs) -> Result<BatchReport, CliError> {
    let varies = args
        .vary
        .iter()
        .map(|a| Vary::parse(a))
        .collect::<Result<Vec<_>, _>>()?;
    // The base scene must load: a typo here is a usage error, not N failed runs.
    scene_args::load(&args.scene, args.steps)?;
    let plan = plan::sweep(&args.scene.scene, &args.scene.set, &varies)?;
    let options = BatchOptions {
        out: args.out.clone(),
        backend: args.backend,
        steps: args.steps,
        quiet: args.quiet,
    };
    let report = run_batch(&plan, &options)?;
    super::batch::finish(&report, args.quiet)?;
    Ok(report)
}
