//! Headless batches of runs (`msc sweep`, `msc batch`).
//!
//! A [`Plan`] lists the runs: the cartesian product of a sweep's `--vary` values
//! ([`plan::sweep`]) or the entries of a manifest file ([`plan::manifest`]).
//! [`run_batch`] runs them one after another, or on the GPU in chunks stepped together as
//! batches of worlds, each into its own folder with exactly the outputs of `msc run` (the
//! same code writes them), sharing one GPU device (or one per worker with [`Devices`]),
//! and keeps `runs.csv` up to date after every run. A
//! [`Shard`] runs every N-th run only, with its own table and `plan.json`; [`merge`](fn@merge)
//! joins the shards; [`slurm`] writes and submits array job scripts that run them. A
//! batch is planned once before anything runs: every run's scene is loaded (so a bad key
//! fails the whole plan at once), judged against what an earlier batch left in its folder
//! and keyed for the batch of worlds it may join; the workers run those records. An
//! interrupted batch resumes: runs that their `summary.json` vouches for (every input and
//! output unchanged) are not redone.

mod batched;
pub mod exec;
mod gpu;
pub mod merge;
pub mod options;
pub mod plan;
pub mod planfile;
mod planned;
pub mod record;
mod resume;
pub mod shard;
pub mod slurm;

pub use exec::{run_batch, BatchReport};
pub use merge::{merge, MergeReport};
pub use options::{BatchOptions, Devices, ShardRun};
pub use plan::{Plan, RunSpec, Vary};
pub use planfile::{PlanFile, Rerun};
pub use planned::{check_input, check_plan, MAX_CHUNK_WORLDS};
pub use record::{RunRecord, RunStatus, SummaryRecord};
pub use shard::Shard;

use crate::output::OutputError;
use std::path::PathBuf;

/// The batch's table, in the batch folder.
pub const RUNS_CSV: &str = "runs.csv";

/// The batch folder's own files and folders, which no run may be named (a shard's table,
/// `runs.shard-K-of-N.csv`, too).
const OWN_NAMES: [&str; 4] = [
    RUNS_CSV,
    planfile::PLAN_FILE,
    slurm::SCRIPT_FILE,
    slurm::LOG_DIR,
];

/// A run name as a case-insensitive file system that drops trailing dots (macOS,
/// Windows) sees it: two names with one key share one folder there, so a plan keeps
/// run names distinct by this key, not by their bytes alone.
fn folder_key(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// Whether Windows takes `name` for a device (`CON`, `PRN`, `AUX`, `NUL`, `COM0`-`COM9`,
/// `LPT0`-`LPT9` in any case, also with an extension: `nul.txt`): such a folder cannot be
/// created or copied there, and batch folders travel between clusters and laptops.
fn windows_device(name: &str) -> bool {
    let base = name.split('.').next().unwrap_or(name).to_ascii_lowercase();
    match base.as_bytes() {
        b"con" | b"prn" | b"aux" | b"nul" => true,
        [b'c', b'o', b'm', d] | [b'l', b'p', b't', d] => d.is_ascii_digit(),
        _ => false,
    }
}

/// What stops a batch, or ends it with a failure status.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BatchError {
    #[error("--vary {arg}: {message}")]
    Vary { arg: String, message: String },
    #[error("cannot read manifest {}", path.display())]
    ReadManifest {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("manifest {}: {message}", path.display())]
    Manifest { path: PathBuf, message: String },
    /// A planned run's scene does not load with its overrides (an unknown key, a bad
    /// value, a missing file): checked for every run before any runs.
    #[error("run '{run}' of the plan cannot start, so nothing was run")]
    Plan {
        run: String,
        #[source]
        source: Box<crate::run::RunError>,
    },
    #[error(transparent)]
    Output(#[from] OutputError),
    /// A bad `--shard`, or Slurm array variables that name no shard.
    #[error("shard {arg}: {message}")]
    Shard { arg: String, message: String },
    /// `plan.json` is missing or unreadable (`msc merge`).
    #[error("cannot read the plan {}: {message}", path.display())]
    ReadPlan { path: PathBuf, message: String },
    /// A shard's plan is not the one its folder's shards run.
    #[error(
        "{} holds another plan ({message}); use another --out folder, or the same \
         command and shard count as the other shards",
        path.display()
    )]
    PlanMismatch { path: PathBuf, message: String },
    /// A planned run's folder exists and holds what no msc run wrote (the user's own
    /// files): it is neither trusted nor cleared, and nothing runs.
    #[error(
        "the run '{run}' would write into {}, which holds files msc did not write ({found}); \
         move them away, or use another --out folder or run name",
        path.display()
    )]
    ForeignFolder {
        run: String,
        path: PathBuf,
        found: String,
    },
    /// `msc merge`: the batch folder, moved since its shards ran, is at a path that is
    /// not UTF-8, which the commands that rerun its shards (text) cannot name.
    #[error(
        "{}",
        planfile::not_utf8(path, "the commands that rerun this batch's shards")
    )]
    FolderNotUtf8 { path: PathBuf },
    /// `--devices` found no device to run on.
    #[error("--devices: {0}")]
    Devices(String),
    /// `--slurm` or `--submit`: the script could not be written or submitted.
    #[error(transparent)]
    Slurm(#[from] slurm::SlurmError),
    /// `msc merge`: some planned runs are missing or failed; the table lists them.
    #[error(
        "{missing} of {total} planned runs are missing or failed; {} lists them, and the \
         commands above rerun them",
        csv.display()
    )]
    Incomplete {
        missing: usize,
        total: usize,
        csv: PathBuf,
    },
    /// The batch ran to the end, but not every run finished cleanly.
    #[error(
        "{} of {total} runs did not finish cleanly ({failed} failed, {diverged} diverged); see {}",
        failed + diverged,
        csv.display()
    )]
    RunsFailed {
        failed: usize,
        diverged: usize,
        total: usize,
        csv: PathBuf,
    },
    /// SIGINT or SIGTERM: the run under way stopped with its outputs written and the
    /// batch stopped after it; rerunning the same command finishes the batch.
    #[error(
        "interrupted after {done} of {total} runs; {} lists them ({}); run the same \
         command again to finish the batch",
        csv.display(),
        match interrupted {
            0 => "none was under way".to_string(),
            1 => "the one under way is marked interrupted".to_string(),
            n => format!("the {n} under way are marked interrupted"),
        }
    )]
    Interrupted {
        done: usize,
        /// Of those, the runs stopped midway (a batch of worlds stops several at once).
        interrupted: usize,
        total: usize,
        csv: PathBuf,
    },
}

impl BatchError {
    /// 2 for a bad `--vary`, manifest, planned scene or `--shard`, a folder with another
    /// plan, or a run folder holding the user's files (nothing ran), 1 for failed or missing runs or output errors.
    pub fn exit_code(&self) -> i32 {
        match self {
            Self::Vary { .. }
            | Self::ReadManifest { .. }
            | Self::Manifest { .. }
            | Self::Plan { .. }
            | Self::Shard { .. }
            | Self::ReadPlan { .. }
            | Self::PlanMismatch { .. }
            | Self::ForeignFolder { .. }
            | Self::FolderNotUtf8 { .. }
            | Self::Output(OutputError::WouldOverwriteInput { .. }) => 2,
            Self::Slurm(e) => e.exit_code(),
            Self::Output(_)
            | Self::RunsFailed { .. }
            | Self::Devices(_)
            | Self::Incomplete { .. } => 1,
            Self::Interrupted { .. } => crate::interrupt::EXIT_CODE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch of worlds stops several runs at once: the message counts them.
    #[test]
    fn an_interrupt_says_how_many_runs_it_stopped() {
        let said = |interrupted| {
            BatchError::Interrupted {
                done: 3,
                interrupted,
                total: 5,
                csv: PathBuf::from("o/runs.csv"),
            }
            .to_string()
        };
        assert!(
            said(3).contains("the 3 under way are marked interrupted"),
            "{}",
            said(3)
        );
        assert!(
            said(1).contains("the one under way is marked interrupted"),
            "{}",
            said(1)
        );
        assert!(said(0).contains("none was under way"), "{}", said(0));
    }
}
