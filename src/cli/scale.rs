//! What `msc sweep` and `msc batch` share: the options for going beyond one process and
//! one device (`--shard`, `--devices`, `--slurm`/`--submit` and the array job's
//! settings), their common arguments as a rerun command line, and the closing report.

use super::CliError;
use crate::batch::planfile::path_text;
use crate::batch::slurm::{self, SlurmJob};
use crate::batch::{
    run_batch, BatchError, BatchOptions, BatchReport, Devices, Plan, PlanFile, Rerun, Shard,
    ShardRun,
};
use crate::run::BackendArg;
use clap::ValueEnum;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, clap::Args)]
pub struct ScaleArgs {
    /// Run only shard K of N (from 0): the plan's runs i with i mod N = K, with the table
    /// runs.shard-K-of-N.csv; `msc merge DIR` joins the shards. Inside a Slurm array task
    /// the shard comes from SLURM_ARRAY_TASK_ID when this is not given
    #[arg(long, value_name = "K/N")]
    pub shard: Option<String>,
    /// Run on several GPU devices at once, one worker per device, runs dealt round-robin
    /// in plan order: `all` (every device wgpu reports, each physical device once) or a
    /// number of workers (more than the devices share them)
    #[arg(long, value_name = "all|N", default_value = "1", value_parser = parse_devices)]
    pub devices: Devices,
    /// Write a Slurm array job script (DIR/slurm-array.sh) that runs this command as
    /// --shards tasks, instead of running it
    #[arg(long)]
    pub slurm: bool,
    /// As --slurm, then submit the script with sbatch and print the job id
    #[arg(long)]
    pub submit: bool,
    /// --slurm: the number of array tasks (shards); default one per run
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub shards: Option<u64>,
    /// --slurm: the generic resources of each task; `none` leaves the line out
    #[arg(long, value_name = "SPEC", default_value = "gpu:1")]
    pub gres: String,
    /// --slurm: each task's time limit (Slurm's format, e.g. 02:00:00)
    #[arg(long, value_name = "TIME")]
    pub time: Option<String>,
    /// --slurm: the partition
    #[arg(long, value_name = "NAME")]
    pub partition: Option<String>,
    /// --slurm: the job's name (default `msc-<out folder name>`, with characters other than
    /// letters, digits, '-', '_' and '.' replaced by '_')
    #[arg(long, value_name = "NAME")]
    pub job_name: Option<String>,
}

fn parse_devices(s: &str) -> Result<Devices, String> {
    match s.trim() {
        "all" => Ok(Devices::All),
        n => match n.parse::<usize>() {
            Ok(0) | Err(_) => Err(format!(
                "expected all or a number of devices from 1, got '{s}'"
            )),
            Ok(1) => Ok(Devices::One),
            Ok(n) => Ok(Devices::Count(n)),
        },
    }
}

/// Everything of a sweep or batch command but its scale options.
pub(super) struct Job<'a> {
    /// `sweep` or `batch`.
    pub command: &'static str,
    pub plan: &'a Plan,
    /// `msc batch`'s manifest (a sweep's scene is text already).
    pub manifest: Option<&'a Path>,
    pub out: &'a Path,
    pub backend: BackendArg,
    pub steps: Option<u64>,
    pub quiet: bool,
    /// `--no-batch`.
    pub no_batch: bool,
    /// The command's own arguments (with `--devices` when given), to rerun it.
    pub args: Vec<String>,
}

/// Runs the job as the scale options say: writes (and submits) a Slurm script and
/// returns `None`, or runs the whole plan or one shard of it.
pub(super) fn execute(job: Job, scale: &ScaleArgs) -> Result<Option<BatchReport>, CliError> {
    let mut args = job.args.clone();
    if scale.devices != Devices::One {
        args.push("--devices".into());
        args.push(match scale.devices {
            Devices::Count(n) => n.to_string(),
            _ => "all".into(),
        });
    }
    let rerun = Rerun {
        cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
        program: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("msc")),
        args,
    };
    let backend = job
        .backend
        .to_possible_value()
        .map(|v| v.get_name().to_string())
        .unwrap_or_default();
    if scale.slurm || scale.submit {
        if scale.shard.is_some() {
            return Err(CliError::Batch(BatchError::Shard {
                arg: "--shard".into(),
                message: "--slurm writes a script whose tasks take their shards from Slurm; \
                          leave --shard out"
                    .into(),
            }));
        }
        // The job script names the manifest in text (the rest: `SlurmJob::script`).
        if let Some(Err(message)) = job.manifest.map(|m| path_text(m, "the job script")) {
            return Err(BatchError::from(slurm::SlurmError::Option {
                option: "the manifest",
                message,
            })
            .into());
        }
        // A plan that cannot run must not reach the cluster's queue.
        crate::batch::check_plan(job.plan, job.steps, job.out)?;
        let shards = scale
            .shards
            .map_or(job.plan.runs.len(), |n| n as usize)
            .min(job.plan.runs.len());
        let slurm_job = SlurmJob {
            shards,
            gres: (scale.gres != "none").then(|| scale.gres.clone()),
            time: scale.time.clone(),
            partition: scale.partition.clone(),
            job_name: scale
                .job_name
                .clone()
                .unwrap_or_else(|| slurm::default_job_name(job.out)),
            command: rerun.clone(),
        };
        // Every value is checked before the folder is created.
        slurm_job.script(job.out).map_err(BatchError::from)?;
        std::fs::create_dir_all(job.out).map_err(|source| {
            BatchError::Output(crate::output::OutputError::CreateDir {
                path: job.out.to_path_buf(),
                source,
            })
        })?;
        // The tasks will write the same plan; a folder with another one is refused now,
        // not by every task on the cluster.
        PlanFile::new(job.command, job.plan, shards, &backend, job.steps, rerun)
            .write_or_check(job.out)?;
        let script = slurm_job.write(job.out).map_err(BatchError::from)?;
        println!(
            "wrote {} ({} runs in an array of {shards} tasks)",
            script.display(),
            job.plan.runs.len()
        );
        if scale.submit {
            let id = slurm::submit(&script).map_err(BatchError::from)?;
            println!(
                "submitted job {id}; when it ends, `msc merge {}` builds runs.csv",
                job.out.display()
            );
        }
        return Ok(None);
    }
    let shard = match &scale.shard {
        Some(s) => Some(Shard::parse(s)?),
        None => {
            let s = Shard::from_env()?;
            if let Some(s) = s {
                println!(
                    "shard {} (from SLURM_ARRAY_TASK_ID={})",
                    s.arg(),
                    std::env::var("SLURM_ARRAY_TASK_ID").unwrap_or_default()
                );
            }
            s
        }
    };
    if let Some(s) = &shard {
        check_text_paths(&job, &rerun, s)?;
    }
    let options = BatchOptions {
        out: job.out.to_path_buf(),
        backend: job.backend,
        steps: job.steps,
        quiet: job.quiet,
        shard: shard.map(|shard| ShardRun {
            shard,
            plan_file: PlanFile::new(
                job.command,
                job.plan,
                shard.count,
                &backend,
                job.steps,
                rerun,
            ),
        }),
        devices: scale.devices,
        no_batch: job.no_batch,
    };
    Ok(Some(run_batch(job.plan, &options)?))
}

/// A shard's plan.json holds its command as text, for the rerun commands `msc merge`
/// prints: every path in it must be UTF-8, checked before anything is created.
fn check_text_paths(job: &Job, rerun: &Rerun, shard: &Shard) -> Result<(), BatchError> {
    let paths = [
        ("the manifest", job.manifest),
        ("--out", Some(job.out)),
        ("the working folder", Some(rerun.cwd.as_path())),
        ("the msc executable", Some(rerun.program.as_path())),
    ];
    for (what, path) in paths {
        if let Some(Err(message)) = path.map(|p| path_text(p, "plan.json's rerun commands")) {
            return Err(BatchError::Shard {
                arg: shard.arg(),
                message: format!("{what} {message}"),
            });
        }
    }
    Ok(())
}

/// `--out`, `--backend`, `--steps`, `--quiet` and `--no-batch` as arguments.
pub(super) fn common_args(
    out: &std::path::Path,
    backend: BackendArg,
    steps: Option<u64>,
    quiet: bool,
    no_batch: bool,
) -> Vec<String> {
    let mut a = vec!["--out".to_string(), out.to_string_lossy().into_owned()];
    if let Some(v) = backend.to_possible_value() {
        a.extend(["--backend".to_string(), v.get_name().to_string()]);
    }
    if let Some(n) = steps {
        a.extend(["--steps".to_string(), n.to_string()]);
    }
    if quiet {
        a.push("--quiet".into());
    }
    if no_batch {
        a.push("--no-batch".into());
    }
    a
}

/// The closing line, then the batch's status.
pub(super) fn finish(report: &BatchReport, quiet: bool) -> Result<(), CliError> {
    if !quiet {
        let skipped = report.records.iter().filter(|r| r.skipped).count();
        let earlier = if skipped > 0 {
            format!(", {skipped} complete from an earlier batch")
        } else {
            String::new()
        };
        println!(
            "{} runs: {} ok, {} diverged, {} failed{earlier}; wrote {}",
            report.records.len(),
            report.count("ok"),
            report.count("diverged"),
            report.count("failed"),
            report.runs_csv.display()
        );
    }
    report.check().map_err(CliError::from)
}
