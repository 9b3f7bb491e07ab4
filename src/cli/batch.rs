//! `msc batch`: the runs listed in a manifest file.

use super::scale::{self, ScaleArgs};
use super::CliError;
use crate::batch::{plan, BatchReport};
use crate::run::BackendArg;
use std::path::PathBuf;

#[derive(Clone, Debug, clap::Args)]
pub struct BatchArgs {
    /// The manifest (TOML): `[[runs]]` entries with scene = "file.toml" (relative to the
    /// manifest) or a built-in name, and optional name = "folder" and set = ["KEY=VALUE"]
    #[arg(value_name = "MANIFEST")]
    pub manifest: PathBuf,
    /// Batch folder: one sub-folder per run, and runs.csv
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Which solver runs the scenes (one GPU device serves every run; on the GPU, runs that can share a batch step together)
    #[arg(long, value_enum, default_value_t = BackendArg::Auto)]
    pub backend: BackendArg,
    /// Override one scene value in every run, after the manifest's own overrides;
    /// repeatable
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Number of steps of every run, overriding the scenes' `steps` or `duration`
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

/// Runs the manifest. Exits 2 before anything runs when a run's scene does not load with
/// its overrides, 1 when a run failed or diverged, after every run was tried. `None`
/// when it wrote (and submitted) a Slurm script instead of running.
pub fn execute(args: &BatchArgs) -> Result<Option<BatchReport>, CliError> {
    let plan = plan::manifest(&args.manifest, &args.set)?;
    crate::batch::check_input(&plan, &args.out, &args.manifest, "manifest")?;
    let mut rerun = vec![
        "batch".to_string(),
        args.manifest.to_string_lossy().into_owned(),
    ];
    for s in &args.set {
        rerun.extend(["--set".to_string(), s.clone()]);
    }
    rerun.extend(scale::common_args(
        &args.out,
        args.backend,
        args.steps,
        args.quiet,
        args.no_batch,
    ));
    let job = scale::Job {
        command: "batch",
        plan: &plan,
        manifest: Some(&args.manifest),
        out: &args.out,
        backend: args.backend,
        steps: args.steps,
        quiet: args.quiet,
        no_batch: args.no_batch,
        args: rerun,
    };
    let report = scale::execute(job, &args.scale)?;
    if let Some(report) = &report {
        scale::finish(report, args.quiet)?;
    }
    Ok(report)
}
