//! `msc bench`: the standard performance workloads and what is measured on them.
//!
//! Workloads ([`workload`]): a cloth grid (structural + shear springs, IMEX, a fixed count
//! of Jacobi sweeps, optionally a fraction of charged particles) and a pure all-pairs
//! Coulomb cloud (random charges in a cube, no springs, symplectic Euler: a step is the
//! Coulomb evaluation plus two O(n) kernels). Per size, [`run`] builds the workload,
//! warms up, times `steps` steps (wall time of `step(k)` plus a wait for the GPU to finish,
//! divided by k), profiles a few more steps per kernel with timestamp queries when the
//! adapter has them, and derives:
//! - Coulomb interactions per second: n_targets x n_charged per evaluation (the kernel
//!   runs over the charged particles only, so n_targets = n_charged, self pair included
//!   as the n-body convention counts it) over the time of `coulomb_sources` +
//!   `coulomb_tiled` per evaluation from the timestamps, else (Coulomb workload only)
//!   over a whole step; as a fraction of the FP32 peak at 20 flops per interaction;
//! - Jacobi sweep bytes per second: [`bytes::jacobi_sweep_bytes`] (compulsory) over the
//!   `jacobi_sweep` kernel's time per dispatch, as a fraction of memory bandwidth.
//!
//! Peaks come from `--peak-tflops` / `--bandwidth-gbs` or the known-device table
//! ([`device`]); a value that cannot be had is `null` with the reason in `notes`.

pub mod bytes;
pub mod device;
pub mod workload;

use crate::cpu::CpuSimulation;
use crate::gpu::{AdapterSummary, GpuDdef, GpuError, GpuSolver, HeadlessOptions, KernelTime};
use crate::output::OutputError;
use crate::sim::{SimError, Simulator};
use std::time::Instant;
pub use workload::Workload;

/// Flop count convention per Coulomb interaction (DESIGN section 4).
pub const FLOPS_PER_INTERACTION: f64 = 20.0;
/// The default sizes: 1K to 1M on the GPU, 1K and 4K on the CPU reference.
pub const GPU_SIZES: [usize; 6] = [1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20];
pub const CPU_SIZES: [usize; 2] = [1 << 10, 1 << 12];
/// The default DDEF sample counts m.
pub const DDEF_SAMPLES: [usize; 2] = [1000, 10_000];
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
    /// Timed steps per size.
    pub steps: u64,
    /// Untimed steps before timing (pipelines, caches, clocks).
    pub warmup: u64,
    /// Steps profiled per kernel after timing (GPU with timestamp queries; 0: none).
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
    /// DDEF workload: the sample counts m measured at every size.
    pub ddef_samples: Vec<usize>,
    /// DDEF workload: evaluations between tetrahedralizations (1: every step).
    pub ddef_rebuild_every: u32,
}

impl Default for BenchOptions {
    fn default() -> Self {
        Self {
            workloads: vec![Workload::Cloth, Workload::Coulomb],
            sizes: GPU_SIZES.to_vec(),
            sweeps: 20,
            steps: 20,
            warmup: 3,
            profile_steps: 2,
            charged_fraction: 0.0,
            peak_tflops: None,
            bandwidth_gbs: None,
            backend: Backend::Gpu,
            max_seconds: 60.0,
            ddef_samples: DDEF_SAMPLES.to_vec(),
            ddef_rebuild_every: 1,
        }
    }
}

/// Whether a size was measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    /// Not run: beyond the adapter's limits or memory, or past `--max-seconds`.
    Skipped,
    /// Started but a GPU or configuration error stopped it.
    Failed,
}

/// One kernel's share of a profiled step.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct KernelRecord {
    pub kernel: &'static str,
    pub dispatches_per_step: f64,
    pub ms_per_step: f64,
    pub us_per_dispatch: f64,
}

/// One size of one workload: a JSON line of `msc bench`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Record {
    pub workload: Workload,
    pub backend: Backend,
    pub status: Status,
    /// Why the size was skipped or failed.
    pub reason: Option<String>,
    /// The size asked for; `n` is the particle count built (a cloth grid may round).
    pub n_requested: usize,
    pub n: usize,
    /// Cloth: vertices along x and y.
    pub grid: Option<[u32; 2]>,
    pub springs: usize,
    pub charged: usize,
    pub integrator: &'static str,
    /// Linear solver (cloth) or null (explicit Coulomb workload).
    pub solver: Option<&'static str>,
    /// Jacobi sweeps per step (cloth).
    pub sweeps: Option<u32>,
    pub steps: u64,
    pub warmup_steps: u64,
    /// Building the solver (buffers, pipelines).
    pub setup_seconds: Option<f64>,
    /// Wall time of the timed steps, GPU completion included.
    pub timed_seconds: Option<f64>,
    pub ms_per_step: Option<f64>,
    /// Energies finite after the run.
    pub finite: Option<bool>,
    /// Everything this size took, setup to last readback.
    pub total_seconds: f64,
    /// n_targets x n_charged (n_targets = n_charged: only charged particles are targets).
    pub coulomb_interactions_per_eval: u64,
    pub coulomb_ms_per_eval: Option<f64>,
    /// "timestamps" (coulomb_sources + coulomb_tiled) or "whole_step".
    pub coulomb_time_source: Option<&'static str>,
    pub interactions_per_second: Option<f64>,
    pub flops_per_interaction: f64,
    /// Achieved TFLOP/s at `flops_per_interaction`.
    pub tflops: Option<f64>,
    pub peak_tflops: Option<f64>,
    /// "--peak-tflops" or the known device's name.
    pub peak_source: Option<String>,
    pub percent_of_fp32_peak: Option<f64>,
    /// Bytes one Jacobi sweep must move (see [`bytes`]).
    pub jacobi_sweep_bytes: Option<u64>,
    /// Bytes its loads and stores add up to without any cache reuse.
    pub jacobi_sweep_bytes_issued: Option<u64>,
    pub jacobi_sweep_ms: Option<f64>,
    /// `jacobi_sweep_bytes` / `jacobi_sweep_ms`, in GB/s (1e9 B/s).
    pub jacobi_sweep_gb_per_s: Option<f64>,
    pub bandwidth_gbs: Option<f64>,
    pub bandwidth_source: Option<String>,
    pub percent_of_bandwidth: Option<f64>,
    /// Steps profiled for `kernel_times`.
    pub profile_steps: u32,
    pub kernel_times: Option<Vec<KernelRecord>>,
    pub dispatches_per_step: Option<usize>,
    /// Queue submissions of the timed steps per step (the host batches whole steps).
    pub submissions_per_step: Option<f64>,
    /// Compute passes of the timed steps per step.
    pub compute_passes_per_step: Option<f64>,
    /// DDEF: the sample count m, the grid's rebuild interval and the rebuilds made over
    /// the warm-up and timed steps.
    pub ddef_samples: Option<usize>,
    pub ddef_rebuild_every: Option<u32>,
    pub ddef_rebuilds: Option<u64>,
    /// DDEF on the GPU: the host stage's share of an evaluation (grid, location, lists,
    /// upload, after the positions are back), averaged over the timed steps.
    pub ddef_host_ms_per_eval: Option<f64>,
    /// DDEF: relative force error |F - F_exact| / |F_exact| at the first evaluation,
    /// over `force_error_targets` charges, against the exact f64 all-pairs sum.
    pub force_error_mean: Option<f64>,
    pub force_error_max: Option<f64>,
    pub force_error_targets: Option<usize>,
    pub adapter: Option<AdapterSummary>,
    /// CPU backend: the rayon worker threads (RAYON_NUM_THREADS, else one per core).
    pub threads: Option<usize>,
    /// Why a field is null, one "field: reason" each.
    pub notes: Vec<String>,
    pub msc_version: &'static str,
}

impl Record {
    fn new(workload: Workload, n: usize, samples: Option<usize>, opts: &BenchOptions) -> Self {
        Self {
            workload,
            backend: opts.backend,
            status: Status::Ok,
            reason: None,
            n_requested: n,
            n,
            grid: None,
            springs: 0,
            charged: 0,
            integrator: match workload {
                Workload::Cloth => "imex",
                Workload::Coulomb | Workload::Ddef => "symplectic_euler",
            },
            solver: match workload {
                Workload::Cloth => Some("jacobi"),
                Workload::Coulomb | Workload::Ddef => None,
            },
            sweeps: match workload {
                Workload::Cloth => Some(opts.sweeps),
                Workload::Coulomb | Workload::Ddef => None,
            },
            steps: opts.steps,
            warmup_steps: opts.warmup,
            setup_seconds: None,
            timed_seconds: None,
            ms_per_step: None,
            finite: None,
            total_seconds: 0.0,
            coulomb_interactions_per_eval: 0,
            coulomb_ms_per_eval: None,
            coulomb_time_source: None,
            interactions_per_second: None,
            flops_per_interaction: FLOPS_PER_INTERACTION,
            tflops: None,
            peak_tflops: None,
            peak_source: None,
            percent_of_fp32_peak: None,
            jacobi_sweep_bytes: None,
            jacobi_sweep_bytes_issued: None,
            jacobi_sweep_ms: None,
            jacobi_sweep_gb_per_s: None,
            bandwidth_gbs: None,
            bandwidth_source: None,
            percent_of_bandwidth: None,
            profile_steps: 0,
            kernel_times: None,
            dispatches_per_step: None,
            submissions_per_step: None,
            compute_passes_per_step: None,
            ddef_samples: samples,
            ddef_rebuild_every: samples.map(|_| opts.ddef_rebuild_every),
            ddef_rebuilds: None,
            ddef_host_ms_per_eval: None,
            force_error_mean: None,
            force_error_max: None,
            force_error_targets: None,
            adapter: None,
            threads: None,
            notes: Vec::new(),
            msc_version: env!("CARGO_PKG_VERSION"),
        }
    }

    fn note(&mut self, field: &str, reason: impl std::fmt::Display) {
        self.notes.push(format!("{field}: {reason}"));
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
}

fn sim_gpu_error(e: SimError) -> GpuError {
    match e {
        SimError::Gpu(g) => g,
        SimError::Config(c) => GpuError::Config(c),
        SimError::Ddef(d) => GpuError::Ddef(d),
    }
}

/// Waits until the GPU has finished everything submitted.
fn wait(solver: &GpuSolver) -> Result<(), GpuError> {
    solver
        .device()
        .poll(wgpu::PollType::wait_indefinitely())
        .map(|_| ())
        .map_err(|e| GpuError::DeviceLost(format!("waiting for the GPU failed: {e}")))
}

/// Runs every workload at every size; each record goes to `on` as soon as it is made.
pub fn run(
    opts: &BenchOptions,
    on: &mut dyn FnMut(Event<'_>) -> Result<(), OutputError>,
) -> Result<Vec<Record>, BenchError> {
    let mut sizes = opts.sizes.clone();
    sizes.sort_unstable();
    sizes.dedup();
    let mut records = Vec::new();
    let mut adapter: Option<AdapterSummary> = None;
    let mut samples = opts.ddef_samples.clone();
    samples.sort_unstable();
    samples.dedup();
    for &workload in &opts.workloads {
        // Rows in size order; DDEF has one per m at each size, and each m grows alone.
        let cases: Vec<(usize, Option<usize>)> = match workload {
            Workload::Ddef => sizes
                .iter()
                .flat_map(|&n| samples.iter().map(move |&m| (n, Some(m))))
                .collect(),
            _ => sizes.iter().map(|&n| (n, None)).collect(),
        };
        let mut stops: Vec<(Option<usize>, String)> = Vec::new();
        for &(n, m) in &cases {
            let stop = stops.iter().find(|(k, _)| *k == m).map(|(_, why)| why);
            let mut rec = Record::new(workload, n, m, opts);
            if let Some(why) = stop {
                rec.status = Status::Skipped;
                rec.reason = Some(why.clone());
                rec.adapter = adapter.clone();
            } else {
                let start = Instant::now();
                measure(&mut rec, opts, on)?;
                rec.total_seconds = start.elapsed().as_secs_f64();
                if rec.adapter.is_some() {
                    adapter = rec.adapter.clone();
                } else if rec.status != Status::Ok {
                    rec.adapter = adapter.clone();
                }
                if rec.total_seconds > opts.max_seconds && n != *sizes.last().unwrap_or(&n) {
                    let what = match m {
                        Some(m) => format!("{} (m = {m})", workload.name()),
                        None => workload.name().to_string(),
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
                    stops.push((m, why));
                }
            }
            derive(&mut rec, opts);
            on(Event::Record(&rec))?;
            records.push(rec);
        }
    }
    Ok(records)
}

/// Builds and measures one size into `rec`; only a missing adapter is an error.
fn measure(
    rec: &mut Record,
    opts: &BenchOptions,
    on: &mut dyn FnMut(Event<'_>) -> Result<(), OutputError>,
) -> Result<(), BenchError> {
    let (workload, n) = (rec.workload, rec.n_requested);
    let mut stage = |s: &'static str| {
        on(Event::Stage {
            workload,
            n,
            stage: s,
        })
    };
    stage("building")?;
    let built = match (workload, rec.ddef_samples) {
        (Workload::Cloth, _) => workload::cloth(n, opts.sweeps, opts.charged_fraction),
        (Workload::Ddef, Some(m)) => workload::ddef(n, m, opts.ddef_rebuild_every),
        _ => workload::coulomb(n),
    };
    let built = match built {
        Ok(b) => b,
        Err(e) => {
            rec.status = Status::Failed;
            rec.reason = Some(e.to_string());
            return Ok(());
        }
    };
    let system = &built.system;
    rec.n = system.len();
    rec.grid = built.grid;
    rec.springs = system.springs().len();
    rec.charged = system.charged_count();
    // DDEF's work is not a count of pair interactions; its rows report time per evaluation.
    if workload != Workload::Ddef {
        rec.coulomb_interactions_per_eval = (rec.charged as u64).pow(2);
    }
    if workload == Workload::Cloth && opts.backend == Backend::Gpu {
        let b = bytes::jacobi_sweep_bytes(system.len(), system.springs(), system.pinned());
        rec.jacobi_sweep_bytes = Some(b.compulsory);
        rec.jacobi_sweep_bytes_issued = Some(b.issued);
    }
    let result = match opts.backend {
        Backend::Gpu => measure_gpu(rec, &built, opts, &mut stage),
        Backend::Cpu => measure_cpu(rec, &built, opts, &mut stage),
    };
    // The GPU path measures its error on the solver's own device (in `measure_gpu`).
    let result = result.and_then(|()| match (workload, opts.backend) {
        (Workload::Ddef, Backend::Cpu) => ddef_error(rec, &built, None, &mut stage),
        _ => Ok(()),
    });
    match result {
        Ok(()) => Ok(()),
        Err(Stop::Output(e)) => Err(BenchError::Output(e)),
        Err(Stop::Gpu(e @ GpuError::NoAdapter(_))) => Err(BenchError::Gpu(e)),
        Err(Stop::Gpu(e)) => {
            rec.status = match e {
                GpuError::LimitExceeded { .. } | GpuError::OutOfMemory(_) => Status::Skipped,
                _ => Status::Failed,
            };
            rec.reason = Some(e.to_string());
            Ok(())
        }
    }
}

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

fn measure_gpu(
    rec: &mut Record,
    built: &workload::Built,
    opts: &BenchOptions,
    stage: &mut StageFn<'_>,
) -> Result<(), Stop> {
    stage("setup")?;
    let t = Instant::now();
    let mut solver = GpuSolver::headless(
        &built.system,
        &built.config,
        &HeadlessOptions {
            allow_software: true,
        },
    )?;
    rec.setup_seconds = Some(t.elapsed().as_secs_f64());
    rec.adapter = solver.adapter().cloned();
    rec.dispatches_per_step = Some(solver.dispatches_per_step());

    stage("warm-up")?;
    solver.step(opts.warmup)?;
    wait(&solver)?;

    stage("timing")?;
    let before = solver.host_counts();
    let host_before = (solver.ddef_host_seconds(), solver.ddef_evaluations());
    let t = Instant::now();
    solver.step(opts.steps)?;
    wait(&solver)?;
    let wall = t.elapsed().as_secs_f64();
    if let ((Some(h0), Some(e0)), Some(h1), Some(e1)) = (
        host_before,
        solver.ddef_host_seconds(),
        solver.ddef_evaluations(),
    ) {
        if e1 > e0 {
            rec.ddef_host_ms_per_eval = Some((h1 - h0) * 1e3 / (e1 - e0) as f64);
        }
    }
    let after = solver.host_counts();
    let k = opts.steps as f64;
    rec.timed_seconds = Some(wall);
    rec.ms_per_step = Some(wall * 1e3 / k);
    rec.submissions_per_step = Some((after.submissions - before.submissions) as f64 / k);
    rec.compute_passes_per_step = Some((after.compute_passes - before.compute_passes) as f64 / k);

    let timestamps = rec.adapter.as_ref().is_some_and(|a| a.timestamp_queries);
    if opts.profile_steps == 0 {
        rec.note("kernel_times", "--profile-steps 0");
    } else if !solver.supports_recording() {
        rec.note(
            "kernel_times",
            "DDEF steps pause for a host stage, so they cannot be profiled per kernel",
        );
    } else if !timestamps {
        rec.note(
            "kernel_times",
            "the adapter does not offer timestamp queries",
        );
    } else {
        stage("profiling")?;
        let times = solver.profile(opts.profile_steps)?;
        rec.profile_steps = opts.profile_steps;
        rec.kernel_times = Some(kernel_records(&times, opts.profile_steps));
    }

    rec.ddef_rebuilds = solver.ddef_rebuilds();
    stage("energies")?;
    rec.finite = Some(solver.energies()?.is_finite());
    if rec.workload == Workload::Ddef {
        ddef_error(rec, built, Some((solver.device(), solver.queue())), stage)?;
    }
    Ok(())
}

fn measure_cpu(
    rec: &mut Record,
    built: &workload::Built,
    opts: &BenchOptions,
    stage: &mut StageFn<'_>,
) -> Result<(), Stop> {
    stage("setup")?;
    let t = Instant::now();
    let mut sim = CpuSimulation::new(&built.system, &built.config).map_err(GpuError::Config)?;
    rec.setup_seconds = Some(t.elapsed().as_secs_f64());
    stage("warm-up")?;
    sim.step(opts.warmup)?;
    stage("timing")?;
    let t = Instant::now();
    sim.step(opts.steps)?;
    let wall = t.elapsed().as_secs_f64();
    rec.timed_seconds = Some(wall);
    rec.ms_per_step = Some(wall * 1e3 / opts.steps as f64);
    rec.threads = Some(rayon::current_num_threads());
    if rec.workload == Workload::Cloth {
        stage("sweeps")?;
        rec.jacobi_sweep_ms = Some(cpu_sweep_seconds(&sim, opts.sweeps) * 1e3);
    }
    rec.note("kernel_times", "the CPU reference has no kernels");
    rec.note("dispatches_per_step", "the CPU reference has no kernels");
    rec.note("submissions_per_step", "the CPU reference submits nothing");
    rec.ddef_rebuilds = sim.ddef().map(|d| d.rebuilds());
    stage("energies")?;
    rec.finite = Some(sim.energies()?.is_finite());
    Ok(())
}

/// Seconds per weighted Jacobi sweep of the CPU reference on the last step's operator,
/// over `sweeps` sweeps (as many as a step runs), right-hand side A v.
fn cpu_sweep_seconds(sim: &CpuSimulation, sweeps: u32) -> f64 {
    use crate::cpu::solvers::{diagonal_inverse, jacobi_sweep};
    let op = sim.operator();
    let v = &sim.current().v;
    let mut b = vec![glam::DVec3::ZERO; v.len()];
    op.apply(v, &mut b);
    let mut diag_inv = Vec::new();
    diagonal_inverse(op, &mut diag_inv);
    let (mut cur, mut next) = (v.clone(), v.clone());
    let t = Instant::now();
    for _ in 0..sweeps {
        std::hint::black_box(jacobi_sweep(op, &b, &diag_inv, 0.5, &cur, &mut next));
        std::mem::swap(&mut cur, &mut next);
    }
    t.elapsed().as_secs_f64() / f64::from(sweeps)
}

/// A DDEF row's force error at the workload's initial positions: the first evaluation of
/// the timed backend (the GPU kernels on `gpu`'s device, else the CPU reference) against
/// the exact f64 all-pairs sum, over up to [`DDEF_ERROR_TARGETS`] evenly strided charges.
fn ddef_error(
    rec: &mut Record,
    built: &workload::Built,
    gpu: Option<(&wgpu::Device, &wgpu::Queue)>,
    stage: &mut StageFn<'_>,
) -> Result<(), Stop> {
    let Some(ddef_config) = built.config.coulomb.method.ddef() else {
        return Ok(());
    };
    stage("error")?;
    let system = &built.system;
    let (x, q) = (system.positions(), system.charges());
    let softening = built.config.coulomb.softening;
    let forces = match gpu {
        None => {
            let mut out = vec![glam::DVec3::ZERO; x.len()];
            crate::ddef::DdefSolver::new(ddef_config, softening)
                .forces_into(x, q, &mut out)
                .map_err(GpuError::from)?;
            out
        }
        Some((device, queue)) => {
            // Same first-evaluation grid as the solver's (DdefSolver's policy), evaluated
            // by the GPU kernels.
            let mut policy = crate::ddef::DdefSolver::new(ddef_config, softening);
            let ddef = policy
                .prepare(x, q)
                .map_err(GpuError::from)?
                .ok_or_else(|| GpuError::Unsupported("no charged particle".into()))?;
            let mut gpu = GpuDdef::new(device, queue, softening)?;
            gpu.forces(&ddef, x, q, ddef_config.variant)?
        }
    };
    let charged: Vec<usize> = (0..x.len()).filter(|&i| q[i] != 0.0).collect();
    let stride = charged.len().div_ceil(DDEF_ERROR_TARGETS).max(1);
    let targets: Vec<usize> = charged.iter().copied().step_by(stride).collect();
    let points: Vec<glam::DVec3> = targets.iter().map(|&i| x[i]).collect();
    let exact = crate::ddef::exact_fields_at(&points, Some(&targets), x, q, softening);
    let exact: Vec<glam::DVec3> = exact
        .iter()
        .zip(&targets)
        .map(|(e, &i)| *e * q[i])
        .collect();
    let approx: Vec<glam::DVec3> = targets.iter().map(|&i| forces[i]).collect();
    let stats = crate::ddef::error_study::ErrorStats::of(&approx, &exact);
    rec.force_error_mean = Some(stats.mean);
    rec.force_error_max = Some(stats.max);
    rec.force_error_targets = Some(stats.count);
    Ok(())
}

fn kernel_records(times: &[KernelTime], steps: u32) -> Vec<KernelRecord> {
    let s = f64::from(steps.max(1));
    times
        .iter()
        .map(|t| KernelRecord {
            kernel: t.kernel,
            dispatches_per_step: t.dispatches as f64 / s,
            ms_per_step: t.seconds * 1e3 / s,
            us_per_dispatch: if t.dispatches > 0 {
                t.seconds * 1e6 / t.dispatches as f64
            } else {
                0.0
            },
        })
        .collect()
}

/// Seconds per evaluation summed over `kernels`, with the evaluation count taken from
/// the first kernel's dispatches.
fn seconds_per_dispatch(times: &[KernelRecord], kernels: &[&str]) -> Option<f64> {
    let first = times.iter().find(|t| t.kernel == kernels[0])?;
    if first.dispatches_per_step <= 0.0 {
        return None;
    }
    let ms: f64 = times
        .iter()
        .filter(|t| kernels.contains(&t.kernel))
        .map(|t| t.ms_per_step)
        .sum();
    Some(ms * 1e-3 / first.dispatches_per_step)
}

/// The adapter's known-device entry, if any.
fn known(rec: &Record) -> Option<device::KnownDevice> {
    rec.adapter
        .as_ref()
        .and_then(|a| device::known_device(&a.name))
}

/// Fills the derived rates and fractions, with a note for every one left null.
fn derive(rec: &mut Record, opts: &BenchOptions) {
    if rec.status != Status::Ok {
        return;
    }
    let device = known(rec);
    let unknown_device = match &rec.adapter {
        Some(a) => format!("'{}' is not in the known-device table", a.name),
        None => "no GPU adapter".to_string(),
    };

    // Coulomb.
    if rec.workload == Workload::Ddef {
        // One DDEF evaluation per symplectic Euler step: the CPU stage, the transfers and
        // the kernels, which is what a user's step pays.
        rec.coulomb_ms_per_eval = rec.ms_per_step;
        rec.coulomb_time_source = rec.ms_per_step.map(|_| "whole_step");
        rec.note(
            "interactions_per_second",
            "DDEF is not a pair sum; compare coulomb_ms_per_eval with the coulomb rows",
        );
    } else if rec.charged == 0 {
        rec.note(
            "interactions_per_second",
            "no charged particles (see --charged-fraction)",
        );
    } else {
        let timed = rec
            .kernel_times
            .as_deref()
            .and_then(|t| seconds_per_dispatch(t, &["coulomb_tiled", "coulomb_sources"]));
        let (seconds, source) = match (timed, rec.workload, rec.ms_per_step) {
            (Some(s), _, _) => (Some(s), Some("timestamps")),
            // One Coulomb evaluation per symplectic Euler step.
            (None, Workload::Coulomb, Some(ms)) => (Some(ms * 1e-3), Some("whole_step")),
            _ => (None, None),
        };
        match seconds {
            Some(s) if s > 0.0 => {
                rec.coulomb_ms_per_eval = Some(s * 1e3);
                rec.coulomb_time_source = source;
                let ips = rec.coulomb_interactions_per_eval as f64 / s;
                rec.interactions_per_second = Some(ips);
                let tflops = ips * FLOPS_PER_INTERACTION * 1e-12;
                rec.tflops = Some(tflops);
                match ceiling(
                    opts.peak_tflops,
                    "--peak-tflops",
                    device.map(|d| (d.fp32_tflops, d.name)),
                ) {
                    Ok((p, source)) => {
                        rec.peak_tflops = Some(p);
                        rec.peak_source = Some(source);
                        rec.percent_of_fp32_peak = Some(100.0 * tflops / p);
                    }
                    Err(flag) => {
                        let why = format!("{unknown_device}; give {flag}");
                        rec.note("percent_of_fp32_peak", why);
                    }
                }
            }
            _ => rec.note(
                "interactions_per_second",
                "the Coulomb kernels' time needs per-kernel timestamps (a cloth step also \
                 holds the spring solve)",
            ),
        }
    }

    // Jacobi sweep bandwidth.
    if matches!(rec.workload, Workload::Coulomb | Workload::Ddef) {
        rec.note(
            "jacobi_sweep_gb_per_s",
            "the Coulomb and DDEF workloads have no springs",
        );
    } else {
        if opts.backend == Backend::Cpu {
            rec.note(
                "jacobi_sweep_gb_per_s",
                "bytes are counted for the GPU kernel's buffers; the CPU reference's differ",
            );
            return;
        }
        let sweep = rec
            .kernel_times
            .as_deref()
            .and_then(|t| seconds_per_dispatch(t, &["jacobi_sweep"]));
        match (sweep, rec.jacobi_sweep_bytes) {
            (Some(s), Some(b)) if s > 0.0 => {
                rec.jacobi_sweep_ms = Some(s * 1e3);
                let gbs = b as f64 / s * 1e-9;
                rec.jacobi_sweep_gb_per_s = Some(gbs);
                let known = device.map(|d| (d.bandwidth_gbs, d.name));
                match ceiling(opts.bandwidth_gbs, "--bandwidth-gbs", known) {
                    Ok((bw, source)) => {
                        rec.bandwidth_gbs = Some(bw);
                        rec.bandwidth_source = Some(source);
                        rec.percent_of_bandwidth = Some(100.0 * gbs / bw);
                    }
                    Err(flag) => {
                        let why = format!("{unknown_device}; give {flag}");
                        rec.note("percent_of_bandwidth", why);
                    }
                }
            }
            _ => rec.note(
                "jacobi_sweep_gb_per_s",
                "the sweep's time needs per-kernel timestamps",
            ),
        }
    }
}

/// A hardware ceiling and where it came from: the command-line `flag` wins over the known
/// device's datasheet value; with neither, the flag to give.
fn ceiling(
    given: Option<f64>,
    flag: &'static str,
    known: Option<(f64, &'static str)>,
) -> Result<(f64, String), &'static str> {
    match (given, known) {
        (Some(v), _) => Ok((v, flag.to_string())),
        (None, Some((v, name))) => Ok((v, name.to_string())),
        (None, None) => Err(flag),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok_record(workload: Workload, charged: usize) -> Record {
        let opts = BenchOptions::default();
        let mut r = Record::new(workload, 1000, None, &opts);
        r.charged = charged;
        r.coulomb_interactions_per_eval = (charged as u64).pow(2);
        r.ms_per_step = Some(10.0);
        r
    }

    #[test]
    fn coulomb_rate_from_timestamps_and_peak_from_the_known_device() {
        let mut r = ok_record(Workload::Cloth, 1000);
        r.adapter = Some(AdapterSummary {
            name: "NVIDIA H100 PCIe".into(),
            backend: "vulkan".into(),
            device_type: "DiscreteGpu".into(),
            driver: String::new(),
            driver_info: String::new(),
            max_storage_buffer_binding_size: 0,
            max_buffer_size: 0,
            max_compute_workgroup_storage_size: 0,
            max_compute_invocations_per_workgroup: 0,
            max_storage_buffers_per_shader_stage: 0,
            timestamp_queries: true,
        });
        r.jacobi_sweep_bytes = Some(2_000_000);
        // 2 steps: Coulomb 1.5 ms + 0.5 ms per evaluation, 20 sweeps of 0.1 ms each.
        let times = [
            KernelTime {
                kernel: "coulomb_sources",
                dispatches: 2,
                seconds: 1e-3,
            },
            KernelTime {
                kernel: "coulomb_tiled",
                dispatches: 2,
                seconds: 3e-3,
            },
            KernelTime {
                kernel: "jacobi_sweep",
                dispatches: 40,
                seconds: 4e-3,
            },
        ];
        r.kernel_times = Some(kernel_records(&times, 2));
        derive(&mut r, &BenchOptions::default());
        // 1e6 interactions in 2 ms.
        let ips = r.interactions_per_second.unwrap();
        assert!((ips - 5e8).abs() < 1.0, "{ips}");
        assert_eq!(r.coulomb_time_source, Some("timestamps"));
        assert_eq!(r.peak_source.as_deref(), Some("H100 PCIe"));
        let pct = r.percent_of_fp32_peak.unwrap();
        // 5e8 x 20 = 1e10 flop/s of 51e12.
        assert!((pct - 100.0 * 1e10 / 51e12).abs() < 1e-9, "{pct}");
        // 2e6 B in 0.1 ms = 20 GB/s of 2000.
        let gbs = r.jacobi_sweep_gb_per_s.unwrap();
        assert!((gbs - 20.0).abs() < 1e-9, "{gbs}");
        assert!((r.percent_of_bandwidth.unwrap() - 1.0).abs() < 1e-9);
        assert!(r.notes.is_empty(), "{:?}", r.notes);
    }

    #[test]
    fn without_timestamps_only_the_coulomb_workload_gets_a_rate_and_nulls_say_why() {
        let opts = BenchOptions {
            peak_tflops: Some(10.0),
            ..Default::default()
        };
        let mut c = ok_record(Workload::Coulomb, 1000);
        derive(&mut c, &opts);
        // 1e6 interactions per 10 ms step.
        assert_eq!(c.coulomb_time_source, Some("whole_step"));
        assert!((c.interactions_per_second.unwrap() - 1e8).abs() < 1e-3);
        assert_eq!(c.peak_source.as_deref(), Some("--peak-tflops"));
        assert!((c.percent_of_fp32_peak.unwrap() - 100.0 * 2e9 / 1e13).abs() < 1e-12);

        let mut cloth = ok_record(Workload::Cloth, 1000);
        cloth.jacobi_sweep_bytes = Some(1000);
        derive(&mut cloth, &opts);
        assert_eq!(cloth.interactions_per_second, None);
        assert_eq!(cloth.jacobi_sweep_gb_per_s, None);
        let notes = cloth.notes.join("\n");
        assert!(notes.contains("interactions_per_second:"), "{notes}");
        assert!(notes.contains("jacobi_sweep_gb_per_s:"), "{notes}");
    }

    #[test]
    fn ceilings_prefer_the_flag_then_the_known_device() {
        let h100 = Some((66.9, "H100 SXM"));
        assert_eq!(
            ceiling(Some(50.0), "--peak-tflops", h100),
            Ok((50.0, "--peak-tflops".into()))
        );
        assert_eq!(
            ceiling(None, "--peak-tflops", h100),
            Ok((66.9, "H100 SXM".into()))
        );
        assert_eq!(ceiling(None, "--peak-tflops", None), Err("--peak-tflops"));
    }
}
