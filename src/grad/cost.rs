//! What one adjoint gradient costs against one forward run of the same scene (`msc bench
//! --workload adjoint`): wall time of the gradient's sweeps over that of a plain forward
//! run of the same steps on the same backend, the states the checkpointing kept, the
//! bytes they and the per-element accumulators take, and the process's peak resident
//! memory, for parameter sets of any size on one scene.
//!
//! The forward baseline is the backend's own simulator advanced T steps and read back
//! once (its set-up untimed); the gradient's time is its sweeps (`sweep_seconds`: every
//! forward, recomputed and reversed step, the seeds and the final reads), its set-up
//! (device, pipelines, buffers) reported apart. Both are repeated, interleaved; the
//! medians are compared.

use super::checkpoint::CheckpointOptions;
use super::loss::Target;
use super::objective::evaluate;
use super::params::{Param, ParamSet};
use super::sensitivity::{GradBackend, GradMode, GradOptions};
use super::trajectory::simulate;
use super::GradError;
use crate::config::{Config, CoulombMethod};
use crate::cpu::CpuSimulation;
use crate::gpu::{AdapterSummary, GpuSolver, HeadlessOptions};
use crate::model::System;
use crate::simulator::Simulator;
use std::time::Instant;

/// One row: a parameter set's gradient against the forward run.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct CostRecord {
    pub backend: &'static str,
    /// The GPU adapter's name and driver (None on the CPU).
    pub adapter: Option<String>,
    pub driver_info: Option<String>,
    pub particles: usize,
    pub springs: usize,
    pub steps: u64,
    /// The parameters (`stiffness_scale`, `stiffness_blocks[1000]`, `stiffnesses`, ...).
    pub params: String,
    /// The Coulomb sum the scene runs: `none` (no charged particle), `all_pairs`, or
    /// `ddef m=M`.
    pub coulomb: String,
    /// Components of theta.
    pub components: usize,
    pub policy: &'static str,
    /// The CPU adjoint's CG tolerance (the GPU's solves run the scene's solver).
    pub adjoint_tolerance: Option<f64>,
    /// The CPU adjoint's solves: `exact` (CG to `adjoint_tolerance`) or `scene`.
    pub adjoint_solve: Option<&'static str>,
    /// Forward run: median, smallest and largest wall time over the repeats (s).
    pub forward_seconds: [f64; 3],
    /// Gradient sweeps: median, smallest and largest (s), and the set-up's median.
    pub gradient_seconds: [f64; 3],
    pub setup_seconds: f64,
    /// Median gradient over median forward.
    pub ratio: f64,
    /// Forward steps the gradient ran (the first run and the recomputations).
    pub forward_steps: u64,
    /// States kept at once at most (snapshots and kept steps), their bytes, and the
    /// bound 2 sqrt(T) + 2 of the memory target.
    pub peak_states: u64,
    pub kept_bytes: u64,
    pub state_bound: f64,
    pub accumulator_bytes: u64,
    /// The process's peak resident set so far (Linux; None elsewhere).
    pub peak_rss_bytes: Option<u64>,
}

/// How [`measure`] runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CostOptions {
    pub backend: GradBackend,
    pub checkpoint: CheckpointOptions,
    pub repeats: u32,
    /// Target frames, evenly spread over the T steps.
    pub frames: u64,
    /// The CPU adjoint's solves (CG to this tolerance, when `adjoint_solve` is exact).
    pub tangent_solve: super::step::TangentSolve,
    pub adjoint_solve: super::step::AdjointSolve,
}

/// The process's peak resident set size (VmHWM), where the platform says it.
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// [`CostRecord::coulomb`] of `config` on `system`.
fn coulomb_name(system: &System, config: &Config) -> String {
    let charged = system.charged_count();
    match config.coulomb.method {
        _ if charged == 0 => "none".into(),
        CoulombMethod::None => "none".into(),
        CoulombMethod::AllPairs => "all_pairs".into(),
        CoulombMethod::Ddef(d) => format!("ddef m={}", d.samples.resolve(charged)),
    }
}

fn median(v: &mut [f64]) -> [f64; 3] {
    v.sort_by(f64::total_cmp);
    [v[v.len() / 2], v[0], v[v.len() - 1]]
}

/// Seconds of one forward run of `steps` steps on `backend` (set-up untimed), and the
/// GPU adapter it ran on.
fn forward_seconds(
    system: &System,
    config: &Config,
    steps: u64,
    backend: GradBackend,
) -> Result<(f64, Option<AdapterSummary>), GradError> {
    let (mut sim, adapter): (Box<dyn Simulator>, _) = match backend {
        GradBackend::Cpu => (Box::new(CpuSimulation::new(system, config)?), None),
        GradBackend::Gpu { allow_software } => {
            let gpu = GpuSolver::headless(system, config, &HeadlessOptions { allow_software })?;
            let adapter = gpu.adapter().cloned();
            (Box::new(gpu), adapter)
        }
    };
    let start = Instant::now();
    let run = sim.step(steps).and_then(|_| sim.state());
    let seconds = start.elapsed().as_secs_f64();
    run.map_err(|e| GradError::Frames(format!("the forward run failed: {e}")))?;
    Ok((seconds, adapter))
}

/// Measures each parameter set of `param_sets` on `system` under `config` over `steps`
/// steps; `on_record` sees each row as it is made.
pub fn measure(
    system: &System,
    config: &Config,
    steps: u64,
    param_sets: &[Vec<Param>],
    options: &CostOptions,
    mut on_record: impl FnMut(&CostRecord),
) -> Result<Vec<CostRecord>, GradError> {
    let grad = GradOptions {
        mode: GradMode::Adjoint,
        backend: options.backend,
        checkpoint: options.checkpoint,
        tangent_solve: options.tangent_solve,
        adjoint_solve: options.adjoint_solve,
        ..GradOptions::default()
    };
    let every = (steps / options.frames.max(1)).max(1);
    let frames: Vec<u64> = (1..=steps / every).map(|k| k * every).collect();
    let mut out = Vec::new();
    for params in param_sets {
        let set = ParamSet::new(system, config, params)?;
        // Targets from a run 1% stiffer and more charged, so the loss is well above 0.
        let truth: Vec<f64> = set.initial().iter().map(|t| t * 1.01).collect();
        let targets: Vec<Target> = simulate(&set, &truth, &frames, &grad)?
            .into_iter()
            .map(|s| Target {
                step: s.step,
                positions: s.x,
            })
            .collect();
        let theta = set.initial();
        let (mut fwd, mut sweep, mut setup) = (Vec::new(), Vec::new(), Vec::new());
        let (mut last, mut adapter) = (None, None);
        for _ in 0..options.repeats.max(1) {
            let (seconds, a) = forward_seconds(system, config, steps, options.backend)?;
            fwd.push(seconds);
            adapter = adapter.or(a);
            let e = evaluate(&set, &theta, &targets, &grad, true, false)?;
            let ck = e
                .stats
                .checkpoint
                .expect("the adjoint reports its checkpointing");
            sweep.push(ck.sweep_seconds);
            setup.push(ck.setup_seconds);
            last = Some(ck);
        }
        let ck = last.expect("at least one repeat");
        let (f, g) = (median(&mut fwd), median(&mut sweep));
        let record = CostRecord {
            backend: match options.backend {
                GradBackend::Cpu => "cpu",
                GradBackend::Gpu { .. } => "gpu",
            },
            adapter: adapter.as_ref().map(|a| a.name.clone()),
            driver_info: adapter.map(|a| a.driver_info),
            particles: system.len(),
            springs: system.springs().len(),
            steps,
            params: params.iter().map(Param::name).collect::<Vec<_>>().join(","),
            coulomb: coulomb_name(system, config),
            components: set.len(),
            policy: ck.policy,
            adjoint_tolerance: (options.backend == GradBackend::Cpu)
                .then_some(options.tangent_solve.tolerance),
            adjoint_solve: (options.backend == GradBackend::Cpu).then_some(
                match options.adjoint_solve {
                    super::step::AdjointSolve::Exact => "exact",
                    super::step::AdjointSolve::Scene => "scene",
                },
            ),
            forward_seconds: f,
            gradient_seconds: g,
            setup_seconds: median(&mut setup)[0],
            ratio: g[0] / f[0],
            forward_steps: ck.forward_steps,
            peak_states: ck.peak_states,
            kept_bytes: ck.peak_states * ck.state_bytes,
            state_bound: 2.0 * (steps as f64).sqrt() + 2.0,
            accumulator_bytes: ck.accumulator_bytes,
            peak_rss_bytes: peak_rss(),
        };
        on_record(&record);
        out.push(record);
    }
    Ok(out)
}
