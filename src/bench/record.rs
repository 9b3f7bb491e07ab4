//! One JSON line of `msc bench`: what was measured on one size of one workload, and the
//! per-kernel shares of a profiled step.

use super::workload::WorldScene;
use super::{Backend, BenchOptions, Workload, FLOPS_PER_INTERACTION};
use crate::gpu::AdapterSummary;

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

/// One kernel's share of a profiled step, over the profiled steps.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct KernelRecord {
    pub kernel: &'static str,
    pub dispatches_per_step: f64,
    /// Median over the profiled steps of this kernel's summed time in a step.
    pub ms_per_step: f64,
    pub ms_per_step_min: f64,
    pub ms_per_step_max: f64,
    /// `ms_per_step` / `dispatches_per_step`, in microseconds.
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
    /// Mesh workload: the file, and the seconds reading it into a mesh took.
    pub mesh: Option<String>,
    pub mesh_load_seconds: Option<f64>,
    pub springs: usize,
    pub charged: usize,
    pub integrator: &'static str,
    /// Linear solver (cloth) or null (explicit Coulomb workload).
    pub solver: Option<&'static str>,
    /// Jacobi sweeps per step (cloth).
    pub sweeps: Option<u32>,
    /// Timed steps per repeat.
    pub steps: u64,
    /// Timed blocks of `steps` steps (the samples of `ms_per_step`).
    pub repeats: u32,
    /// Steps the warm-up ran: at least `--warmup`, and as many as `warmup_ms` took.
    pub warmup_steps: u64,
    /// The warm-up's asked minimum wall time, and the wall time it took.
    pub warmup_ms: f64,
    pub warmup_seconds: Option<f64>,
    /// Building the solver (buffers, pipelines).
    pub setup_seconds: Option<f64>,
    /// Wall time of all timed steps (every repeat), GPU completion included.
    pub timed_seconds: Option<f64>,
    /// Median over the repeats of a block's wall time / `steps`; its smallest and largest,
    /// and every repeat's value in order.
    pub ms_per_step: Option<f64>,
    pub ms_per_step_min: Option<f64>,
    pub ms_per_step_max: Option<f64>,
    pub ms_per_step_samples: Vec<f64>,
    /// GPU: the host's time recording and submitting a block (until `step` returns, less
    /// its waits for an earlier batch) / `steps`: median, smallest, largest over repeats.
    pub host_ms_per_step: Option<f64>,
    pub host_ms_per_step_min: Option<f64>,
    pub host_ms_per_step_max: Option<f64>,
    /// Median over repeats of (block wall time - host time) / `steps`: waiting on the GPU.
    pub wait_ms_per_step: Option<f64>,
    /// Sum of every kernel's timestamp time in a profiled step: median, min, max.
    pub kernel_ms_per_step: Option<f64>,
    pub kernel_ms_per_step_min: Option<f64>,
    pub kernel_ms_per_step_max: Option<f64>,
    /// NVIDIA adapters with nvidia-smi: the SM clock just before and just after the timed
    /// steps, and its maximum (MHz).
    pub sm_clock_mhz_before: Option<f64>,
    pub sm_clock_mhz_after: Option<f64>,
    pub sm_clock_max_mhz: Option<f64>,
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
    /// Bytes one Jacobi sweep must move (see [`bytes`](super::bytes)).
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
    /// DDEF: whether m came from the `auto` rule (`--samples auto`) at this size.
    pub ddef_samples_auto: Option<bool>,
    pub ddef_rebuild_every: Option<u32>,
    pub ddef_rebuilds: Option<u64>,
    /// DDEF workload rows: the variant (`--ddef-variant`).
    pub ddef_variant: Option<String>,
    /// Coulomb and DDEF rows: where the charges lie (`--cloud`).
    pub cloud: Option<super::Cloud>,
    /// DDEF rows: the near gather's and the far field's shapes on a GPU (`--ddef-gather`,
    /// `--ddef-far`); on the GPU backend the gather's is the shape that ran, with
    /// `ddef_gather_auto` true when `auto` picked it.
    pub ddef_gather: Option<String>,
    pub ddef_gather_auto: Option<bool>,
    pub ddef_far: Option<String>,
    /// GPU rows of a development build (`kernel-files` feature) run with
    /// `MSC_KERNEL_FILES`: the folder and the kernels its files replaced ("DIR: a, b").
    pub kernel_files: Option<String>,
    /// DDEF on the GPU: host seconds per evaluation over the timed steps, in ms (0:
    /// every stage runs on the device, nothing is read back or uploaded per step).
    pub ddef_host_ms_per_eval: Option<f64>,
    /// DDEF on the GPU: bytes of its device structures (counts, sorted sources, far
    /// field, tables) and of the largest one (what one binding must hold).
    pub ddef_structure_bytes: Option<u64>,
    pub ddef_largest_binding_bytes: Option<u64>,
    /// DDEF rows: the near field's load at the initial positions (the f64 reference's
    /// structure, same plan): the mean sources in a target's near tetrahedra S(tau), its
    /// own included, and the most charges in one lattice cell (`--cloud` crowds them).
    pub ddef_near_per_target: Option<f64>,
    pub ddef_busiest_cell: Option<u32>,
    /// DDEF: relative force error |F - F_exact| / |F_exact| at the first evaluation,
    /// over `force_error_targets` charges, against the exact f64 all-pairs sum.
    pub force_error_mean: Option<f64>,
    pub force_error_max: Option<f64>,
    pub force_error_targets: Option<usize>,
    /// Worlds workload: W (the row's `n` is one world's particles), what each world is,
    /// and how many GPU batches held the W worlds (more than 1 when one batch would
    /// exceed the device's limits; they are stepped in turn). `ms_per_step` and its
    /// spread are the batched step of all W worlds.
    pub worlds: Option<usize>,
    pub world_scene: Option<WorldScene>,
    pub batches: Option<usize>,
    /// Worlds workload: the same W worlds stepped one after another, each on its own
    /// solver on the same device: ms per step of all W (median over the repeats, each
    /// timed right before a batched block), smallest, largest, every repeat's value.
    pub sequential_ms_per_step: Option<f64>,
    pub sequential_ms_per_step_min: Option<f64>,
    pub sequential_ms_per_step_max: Option<f64>,
    pub sequential_ms_per_step_samples: Vec<f64>,
    /// Building the W solvers of the sequential run (`setup_seconds`: the batches).
    pub sequential_setup_seconds: Option<f64>,
    /// W x 1000 / `ms_per_step`: world-steps per second batched; the same over
    /// `sequential_ms_per_step`; and their ratio (batched over sequential).
    pub world_steps_per_second: Option<f64>,
    pub sequential_world_steps_per_second: Option<f64>,
    pub batch_speedup: Option<f64>,
    pub adapter: Option<AdapterSummary>,
    /// CPU backend: the rayon worker threads (RAYON_NUM_THREADS, else one per core).
    pub threads: Option<usize>,
    /// Why a field is null, one "field: reason" each.
    pub notes: Vec<String>,
    pub msc_version: &'static str,
}

impl Record {
    pub(super) fn new(
        workload: Workload,
        n: usize,
        samples: Option<usize>,
        opts: &BenchOptions,
    ) -> Self {
        Self {
            workload,
            backend: opts.backend,
            status: Status::Ok,
            reason: None,
            n_requested: n,
            n,
            grid: None,
            mesh: None,
            mesh_load_seconds: None,
            springs: 0,
            charged: 0,
            integrator: match workload {
                Workload::Cloth | Workload::Worlds | Workload::Mesh => "imex",
                Workload::Coulomb | Workload::Ddef => "symplectic_euler",
            },
            solver: match workload {
                Workload::Cloth | Workload::Worlds | Workload::Mesh => Some("jacobi"),
                Workload::Coulomb | Workload::Ddef => None,
            },
            sweeps: match workload {
                Workload::Cloth | Workload::Worlds | Workload::Mesh => Some(opts.sweeps),
                Workload::Coulomb | Workload::Ddef => None,
            },
            steps: opts.steps,
            repeats: opts.repeats,
            warmup_steps: 0,
            warmup_ms: opts.warmup_ms,
            warmup_seconds: None,
            setup_seconds: None,
            timed_seconds: None,
            ms_per_step: None,
            ms_per_step_min: None,
            ms_per_step_max: None,
            ms_per_step_samples: Vec::new(),
            host_ms_per_step: None,
            host_ms_per_step_min: None,
            host_ms_per_step_max: None,
            wait_ms_per_step: None,
            kernel_ms_per_step: None,
            kernel_ms_per_step_min: None,
            kernel_ms_per_step_max: None,
            sm_clock_mhz_before: None,
            sm_clock_mhz_after: None,
            sm_clock_max_mhz: None,
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
            ddef_samples_auto: None,
            ddef_rebuild_every: samples.map(|_| opts.ddef_rebuild_every),
            ddef_variant: samples.map(|_| opts.ddef_variant.name().to_string()),
            cloud: matches!(workload, Workload::Coulomb | Workload::Ddef).then_some(opts.cloud),
            ddef_gather: samples.map(|_| opts.ddef_gather.to_string()),
            ddef_gather_auto: None,
            ddef_far: samples.map(|_| opts.ddef_far.to_string()),
            kernel_files: None,
            ddef_rebuilds: None,
            ddef_host_ms_per_eval: None,
            ddef_structure_bytes: None,
            ddef_largest_binding_bytes: None,
            ddef_near_per_target: None,
            ddef_busiest_cell: None,
            force_error_mean: None,
            force_error_max: None,
            force_error_targets: None,
            worlds: None,
            world_scene: None,
            batches: None,
            sequential_ms_per_step: None,
            sequential_ms_per_step_min: None,
            sequential_ms_per_step_max: None,
            sequential_ms_per_step_samples: Vec::new(),
            sequential_setup_seconds: None,
            world_steps_per_second: None,
            sequential_world_steps_per_second: None,
            batch_speedup: None,
            adapter: None,
            threads: None,
            notes: Vec::new(),
            msc_version: env!("CARGO_PKG_VERSION"),
        }
    }

    pub(super) fn note(&mut self, field: &str, reason: impl std::fmt::Display) {
        self.notes.push(format!("{field}: {reason}"));
    }

    /// A record taken with checked kernels says so: they are slower than a default run's.
    pub(super) fn note_shader_checks(&mut self) {
        if crate::gpu::shader::shader_checks() {
            self.note(
                "ms_per_step",
                "kernels built with naga's runtime checks (MSC_SHADER_CHECKS=1), slower than by default",
            );
        }
    }
}
