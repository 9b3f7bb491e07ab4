//! `msc sweep`: one scene run for every combination of `--vary` values.

use super::scale::{self, ScaleArgs};
use super::scene_args::SceneArgs;
use super::CliError;
use crate::batch::{plan, BatchReport, Vary};
use crate::run::BackendArg;
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
    /// Which solver runs the scenes (one GPU device serves every run; on the GPU, runs that can share a batch step together)
    #[arg(long, value_enum, default_value_t = BackendArg::Auto)]
    pub backend: BackendArg,
    /// Number of steps of every run, overriding the scene's `steps` or `duration`
    #[arg(long, value_name = "N")]
    pub steps: Option<u64>,
    /// No progress bar and no per-run lines (failed runs are still reported)
    #[arg(long, short)]
    pub quiet: bool,
    /// On the GPU, run one scene at a time instead of stepping runs that can share a
    /// batch (same integrator, solver and Coulomb method) together
    #[arg(long)]
    pub no_batch: bool,
    #[command(flatten)]
    pub scale: ScaleArgs,
}

impl SweepArgs {
    /// The arguments that run this sweep again (without the scale options).
    fn rerun_args(&self) -> Vec<String> {
        let mut a = vec!["sweep".to_string(), self.scene.scene.clone()];
        for s in &self.scene.set {
            a.extend(["--set".to_string(), s.clone()]);
        }
        for v in &self.vary {
            a.extend(["--vary".to_string(), v.clone()]);
        }
        a.extend(scale::common_args(
            &self.out,
            self.backend,
            self.steps,
            self.quiet,
            self.no_batch,
        ));
        a
    }
}

/// Runs the sweep. Exits 2 before anything runs when a variant's scene does not load
/// ([`crate::batch::BatchError::Plan`]), 1 ([`crate::batch::BatchError::RunsFailed`])
/// when a run failed or diverged, after every run was tried. `None` when it wrote (and
/// submitted) a Slurm script instead of running.
pub fn execute(args: &SweepArgs) -> Result<Option<BatchReport>, CliError> {
    let varies = args
        .vary
        .iter()
        .map(|a| Vary::parse(a))
        .collect::<Result<Vec<_>, _>>()?;
    // The base scene must load: a typo here is a usage error, not N failed runs.
    args.scene.load(args.steps)?;
    let plan = plan::sweep(&args.scene.scene, &args.scene.set, &varies)?;
    let job = scale::Job {
        command: "sweep",
        plan: &plan,
        manifest: None,
        out: &args.out,
        backend: args.backend,
        steps: args.steps,
        quiet: args.quiet,
        no_batch: args.no_batch,
        args: args.rerun_args(),
    };
    let report = scale::execute(job, &args.scale)?;
    if let Some(report) = &report {
        scale::finish(report, args.quiet)?;
    }
    Ok(report)
}
