//! How to run a plan ([`BatchOptions`]): the batch folder, the backend, shards and the
//! devices the runs spread over.

use super::planfile::PlanFile;
use super::shard::Shard;
use crate::run::BackendArg;
use std::path::PathBuf;

/// How to run a plan.
#[derive(Clone, Debug)]
pub struct BatchOptions {
    /// The batch folder: one sub-folder per run, and `runs.csv`.
    pub out: PathBuf,
    pub backend: BackendArg,
    /// Overrides every run's step count, as `msc run --steps`.
    pub steps: Option<u64>,
    /// No per-run lines and no progress bar (failures are still reported on stderr).
    pub quiet: bool,
    /// Run only this shard's runs, with its own table, after writing (or checking)
    /// `plan.json`.
    pub shard: Option<ShardRun>,
    /// How many GPU devices run the batch at once.
    pub devices: Devices,
    /// `--no-batch`: on the GPU too, one run at a time (else runs that can share a batch
    /// of worlds step together).
    pub no_batch: bool,
}

/// A sharded batch: the shard, and the plan file every shard writes.
#[derive(Clone, Debug)]
pub struct ShardRun {
    pub shard: Shard,
    pub plan_file: PlanFile,
}

/// `--devices`: one worker per device, runs dealt round-robin in plan order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Devices {
    /// One device (the best adapter), the default.
    #[default]
    One,
    /// Every usable device of [`crate::gpu::device_adapters`].
    All,
    /// N workers on the usable devices, worker `w` on device `w mod D` (more workers
    /// than devices share them).
    Count(usize),
}
