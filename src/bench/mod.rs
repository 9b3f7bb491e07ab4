//! `msc bench`: the standard performance workloads and what is measured on them.
//!
//! Workloads ([`workload`]): a cloth grid (structural + shear springs, IMEX, a fixed count
//! of Jacobi sweeps, optionally a fraction of charged particles) and a pure all-pairs
//! Coulomb cloud (random charges in a cube, no springs, symplectic Euler: a step is the
//! Coulomb evaluation plus two O(n) kernels). Per size, [`run`] builds the workload (on
//! the GPU, its solvers on the one device all rows share, `shared_device`),
//! warms up for a minimum wall time (`timing`), times `repeats` blocks of `steps` steps
//! (wall time of `step(k)` plus a wait for the GPU to finish, divided by k; the host's
//! recording and submission apart from the wait), reads the SM clock around them where
//! the platform reports it (`clock`), profiles a few more steps one at a time per kernel
//! with timestamp queries when the adapter has them, and derives:
//! - Coulomb interactions per second: n_targets x n_charged per evaluation (the kernel
//!   runs over the charged particles only, so n_targets = n_charged, self pair included
//!   as the n-body convention counts it) over the time of `coulomb_sources` +
//!   `coulomb_tiled` per evaluation from the timestamps, else (Coulomb workload only)
//!   over a whole step; as a fraction of the FP32 peak at 20 flops per interaction;
//! - Jacobi sweep bytes per second: [`bytes::jacobi_sweep_bytes`] (compulsory) over the
//!   `jacobi_sweep` kernel's time per dispatch, as a fraction of memory bandwidth.
//!
//! The worlds workload (`worlds`) times W small worlds with varied parameters stepped
//! as one GPU batch against the same worlds stepped one after another, each on its own
//! solver on the same device, and reports world-steps per second for both and their ratio.
//!
//! Peaks come from `--peak-tflops` / `--bandwidth-gbs` or the known-device table
//! ([`device`]); a value that cannot be had is `null` with the reason in `notes`.

pub mod bytes;
mod clock;
mod derive;
pub mod device;
mod measure;
mod record;
mod shared_device;
mod timing;
pub mod workload;
mod worlds;

use crate::config::{DdefSamples, DdefVariant};
use crate::gpu::{AdapterSummary, DdefFar, GatherChoice, GpuError};
use crate::output::OutputError;
use crate::simulator::SimError;
use derive::derive;
use measure::measure;
pub use record::{KernelRecord, Record, Status};
use shared_device::SharedDevice;
use std::time::Instant;
pub use workload::{Cloud, Workload, WorldScene};

/// Flop count convention per Coulomb interaction: the n-body one (GPU Gems 3 ch. 31).
pub const FLOPS_PER_INTERACTION: f64 = 20.0;
/// The default sizes: 1K to 1M on the GPU, 1K and 4K on the CPU reference.
pub const GPU_SIZES: [usize; 6] = [1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20];
pub const CPU_SIZES: [usize; 2] = [1 << 10, 1 << 12];
/// The default warm-up: 0.5 s of wall time, long enough for a GPU's clock to leave idle
/// and for many steps of a small size, while a large size's single step exceeds it.
pub const DEFAULT_WARMUP_MS: f64 = 500.0;
/// The default Jacobi sweeps per cloth step (`msc bench --sweeps`, `msc.bench_workload`).
pub const DEFAULT_SWEEPS: u32 = 20;
/// The default number of timed blocks and of steps profiled per kernel.
pub const DEFAULT_REPEATS: u32 = 5;
pub const DEFAULT_PROFILE_STEPS: u32 = 5;
/// The default DDEF sample counts m.
pub const DDEF_SAMPLES: [DdefSamples; 2] = [DdefSamples::Count(1000), DdefSamples::Count(10_000)];
/// The default world counts W of the worlds workload.
pub const DEFAULT_WORLDS: [usize; 5] = [1, 16, 64, 256, 1024];
/// Charges at which a DDEF row's force error is measured (evenly strided): the exact
/// f64 sum over all sources at this many targets stays cheap at n = 1M.
pub const DDEF_ERROR_TARGETS: usize = 1000;

/// Which solver is measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// The wgpu solver on any adapter (software ones included).
    Gpu,
    /// The f64 CPU reference.
    Cpu,
}

/// What to run.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchOptions {
    pub workloads: Vec<Workload>,
    /// Particles (cloth) or charges (Coulomb); run in increasing order.
    pub sizes: Vec<usize>,
    /// Jacobi sweeps per cloth step.
    pub sweeps: u32,
    /// Timed steps per repeat.
    pub steps: u64,
    /// Timed blocks of `steps` steps per size: the samples of the time per step.
    pub repeats: u32,
    /// Untimed steps before timing, at least (pipelines, first dispatches).
    pub warmup: u64,
    /// The warm-up goes on until this much wall time has passed (clocks, caches).
    pub warmup_ms: f64,
    /// Steps profiled one at a time per kernel after timing (GPU with timestamp queries;
    /// 0: none): the samples of each kernel's time.
    pub profile_steps: u32,
    /// Fraction of the cloth's particles that carry a charge.
    pub charged_fraction: f64,
    /// FP32 peak in TFLOP/s, overriding the known-device table.
    pub peak_tflops: Option<f64>,
    /// Memory bandwidth in GB/s, overriding the known-device table.
    pub bandwidth_gbs: Option<f64>,
    pub backend: Backend,
    /// A size that takes longer than this (seconds, setup included) ends its workload's
    /// growth: the larger sizes are recorded as skipped.
    pub max_seconds: f64,
    /// DDEF workload: the sample counts m measured at every size; `Auto` is the scenes'
    /// default rule, resolved at each size.
    pub ddef_samples: Vec<DdefSamples>,
    /// DDEF workload: evaluations between tetrahedralizations (1: every step).
    pub ddef_rebuild_every: u32,
    /// DDEF workload: the variant (the adjoint workload's DDEF rows keep the default).
    pub ddef_variant: DdefVariant,
    /// Coulomb and DDEF workloads: where the charges lie.
    pub cloud: Cloud,
    /// DDEF workload on a GPU: the near gather's and the far field's shapes (`Tuning`;
    /// the same results).
    pub ddef_gather: GatherChoice,
    pub ddef_far: DdefFar,
    /// Worlds workload: the world counts W, run in increasing order.
    pub worlds: Vec<usize>,
    /// Mesh workload: the mesh file.
    pub mesh: Option<std::path::PathBuf>,
}

impl Default for BenchOptions {
    fn default() -> Self {
        Self {
            workloads: vec![Workload::Cloth, Workload::Coulomb],
            sizes: GPU_SIZES.to_vec(),
            sweeps: DEFAULT_SWEEPS,
            steps: 20,
            repeats: DEFAULT_REPEATS,
            warmup: 1,
            warmup_ms: DEFAULT_WARMUP_MS,
            profile_steps: DEFAULT_PROFILE_STEPS,
            charged_fraction: 0.0,
            peak_tflops: None,
            bandwidth_gbs: None,
            backend: Backend::Gpu,
            max_seconds: 60.0,
            ddef_samples: DDEF_SAMPLES.to_vec(),
            ddef_rebuild_every: 1,
            ddef_variant: DdefVariant::default(),
            cloud: Cloud::default(),
            ddef_gather: GatherChoice::default(),
            ddef_far: DdefFar::default(),
            worlds: DEFAULT_WORLDS.to_vec(),
            mesh: None,
        }
    }
}

/// What [`run`] reports as it goes.
#[derive(Debug)]
pub enum Event<'a> {
    /// A size enters a stage ("setup", "warm-up", "timing", "profiling", "energies").
    Stage {
        workload: Workload,
        n: usize,
        stage: &'static str,
    },
    /// A size is done (measured, skipped or failed).
    Record(&'a Record),
    /// Something the user should know (e.g. sizes given up past `--max-seconds`).
    Note(String),
}

/// Errors that end a whole benchmark (a size's own trouble is recorded instead).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// No adapter at all: nothing can be measured on the GPU.
    #[error("cannot start the GPU solver")]
    Gpu(#[source] GpuError),
    #[error(transparent)]
    Output(#[from] OutputError),
    /// A size too large for this machine (its host memory), found before any row runs.
    #[error(transparent)]
    Workload(workload::WorkloadError),
}

/// One row to measure: the size (W for the worlds workload), DDEF's m, the world scene.
type Case = (usize, Option<DdefSamples>, Option<WorldScene>);
/// What grows alone within a workload: DDEF's m, or the world scene.
type Growth = (Option<DdefSamples>, Option<WorldScene>);

/// Why a measurement stopped.
enum Stop {
    Gpu(GpuError),
    Output(OutputError),
}

impl From<GpuError> for Stop {
    fn from(e: GpuError) -> Self {
        Self::Gpu(e)
    }
}
impl From<OutputError> for Stop {
    fn from(e: OutputError) -> Self {
        Self::Output(e)
    }
}
impl From<SimError> for Stop {
    fn from(e: SimError) -> Self {
        Self::Gpu(sim_gpu_error(e))
    }
}

type StageFn<'a> = dyn FnMut(&'static str) -> Result<(), OutputError> + 'a;

fn sim_gpu_error(e: SimError) -> GpuError {
    match e {
        SimError::Gpu(g) => g,
        SimError::Config(c) => GpuError::Config(c),
        SimError::Ddef(d) => GpuError::Ddef(d),
        SimError::Model(m) => GpuError::Model(m),
        SimError::Unsupported(u) => GpuError::Unsupported(u),
        SimError::World {
            world,
            name,
            source,
        } => GpuError::World {
            world: crate::simulator::world_label(world, name.as_deref()),
            error: Box::new(sim_gpu_error(*source)),
        },
    }
}

/// Runs every workload at every size; each record goes to `on` as soon as it is made.
/// The GPU rows all run on one device, opened at the first of them (`SharedDevice`).
pub fn run(
    opts: &BenchOptions,
    on: &mut dyn FnMut(Event<'_>) -> Result<(), OutputError>,
) -> Result<Vec<Record>, BenchError> {
    run_on(opts, on, &mut SharedDevice::default())
}

/// [`run`] with the GPU rows on `gpu`.
fn run_on(
    opts: &BenchOptions,
    on: &mut dyn FnMut(Event<'_>) -> Result<(), OutputError>,
    gpu: &mut SharedDevice,
) -> Result<Vec<Record>, BenchError> {
    // A development build's kernel files are refused before any row, not at the first
    // kernel a row compiles (`gpu::kernels::check_files`).
    crate::gpu::kernels::check_files().map_err(BenchError::Gpu)?;
    // Every size's host memory before any row: one too large is refused by its size, not
    // by a failed allocation aborting the process after the smaller rows ran.
    for &w in &opts.workloads {
        for &n in &opts.sizes {
            workload::check_host_memory(w, n).map_err(BenchError::Workload)?;
        }
    }
    let mut sizes = opts.sizes.clone();
    sizes.sort_unstable();
    sizes.dedup();
    let mut records = Vec::new();
    let mut adapter: Option<AdapterSummary> = None;
    // `auto` first, then the counts in increasing order.
    let mut samples = opts.ddef_samples.clone();
    samples.sort_unstable_by_key(|s| s.count());
    samples.dedup();
    let mut counts = opts.worlds.clone();
    counts.sort_unstable();
    counts.dedup();
    for &workload in &opts.workloads {
        // Rows in size order; DDEF has one per m at each size, and each m grows alone;
        // the worlds workload has one per W for each world scene, each growing alone.
        let cases: Vec<Case> = match workload {
            // An `auto` row resolves m at each size, and grows as one row.
            Workload::Ddef => sizes
                .iter()
                .flat_map(|&n| samples.iter().map(move |&m| (n, Some(m), None)))
                .collect(),
            Workload::Worlds => WorldScene::ALL
                .iter()
                .flat_map(|&s| counts.iter().map(move |&w| (w, None, Some(s))))
                .collect(),
            // One row: the file is the size.
            Workload::Mesh => vec![(0, None, None)],
            _ => sizes.iter().map(|&n| (n, None, None)).collect(),
        };
        let last = cases.iter().map(|c| c.0).max().unwrap_or(0);
        // Each (m, world scene) grows alone: its stop, with the reason.
        let mut stops: Vec<(Growth, String)> = Vec::new();
        for &(n, m, scene) in &cases {
            let stop = stops
                .iter()
                .find(|(k, _)| *k == (m, scene))
                .map(|(_, why)| why);
            let mut rec = Record::new(workload, n, m.map(|s| s.resolve(n) as usize), opts);
            rec.ddef_samples_auto = m.map(|s| s == DdefSamples::Auto);
            if let Some(s) = scene {
                rec.worlds = Some(n);
                rec.world_scene = Some(s);
            }
            if let Some(why) = stop {
                rec.status = Status::Skipped;
                rec.reason = Some(why.clone());
                rec.adapter = adapter.clone();
            } else {
                let start = Instant::now();
                let measured = measure(&mut rec, opts, on, gpu);
                gpu.release();
                measured?;
                rec.total_seconds = start.elapsed().as_secs_f64();
                if rec.adapter.is_some() {
                    adapter = rec.adapter.clone();
                } else if rec.status != Status::Ok {
                    rec.adapter = adapter.clone();
                }
                if rec.total_seconds > opts.max_seconds && n != last {
                    let what = match (m, scene) {
                        (Some(m), _) => format!("{} (m = {m})", workload.name()),
                        (_, Some(s)) => format!("{} ({})", workload.name(), s.name()),
                        _ => workload.name().to_string(),
                    };
                    let why = format!(
                        "not run: the {what} size {n} took {:.1} s, more than --max-seconds {}",
                        rec.total_seconds, opts.max_seconds
                    );
                    on(Event::Note(format!(
                        "{what}: stopping at size {n} ({:.1} s > --max-seconds {}); larger sizes are recorded as skipped",
                        rec.total_seconds,
                        opts.max_seconds
                    )))?;
                    stops.push(((m, scene), why));
                }
            }
            derive(&mut rec, opts);
            on(Event::Record(&rec))?;
            records.push(rec);
        }
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every GPU row of a benchmark (solver rows, DDEF rows with their error solver,
    /// worlds rows) runs on one device: a device per row exhausted a driver's resources.
    #[test]
    fn a_benchmark_opens_one_gpu_device_for_all_its_rows() {
        let opts = BenchOptions {
            workloads: vec![
                Workload::Cloth,
                Workload::Coulomb,
                Workload::Ddef,
                Workload::Worlds,
            ],
            sizes: vec![16, 64],
            steps: 1,
            repeats: 1,
            warmup_ms: 0.0,
            profile_steps: 1,
            ddef_samples: vec![DdefSamples::Count(8)],
            worlds: vec![1, 2],
            ..BenchOptions::default()
        };
        let mut gpu = SharedDevice::default();
        let records = match run_on(&opts, &mut |_| Ok(()), &mut gpu) {
            Ok(r) => r,
            Err(BenchError::Gpu(GpuError::NoAdapter(why))) => {
                assert!(
                    std::env::var("MSC_REQUIRE_GPU").as_deref() != Ok("1"),
                    "MSC_REQUIRE_GPU=1 but no adapter{why}"
                );
                eprintln!("skipping: no GPU adapter{why}");
                return;
            }
            Err(e) => panic!("{e}"),
        };
        assert_eq!(records.len(), 2 + 2 + 2 + 4);
        for r in &records {
            assert_eq!(r.status, Status::Ok, "{r:?}");
        }
        assert_eq!(gpu.opened(), 1);
    }
}
