//! Measuring one size: building the workload, warming up, timing the steps, profiling
//! the kernels and (DDEF) the force error, on the GPU solver or the CPU reference.

use super::clock;
use super::record::{Record, Status};
use super::shared_device::SharedDevice;
use super::timing;
use super::DDEF_ERROR_TARGETS;
use super::{bytes, workload, Backend, BenchError, BenchOptions, Event, StageFn, Stop, Workload};
use crate::cpu::CpuSimulation;
use crate::gpu::{GatherChoice, GpuError, GpuSolver, Tuning};
use crate::output::OutputError;
use crate::simulator::Simulator;
use std::time::Instant;

/// Builds and measures one size into `rec`; only a missing adapter is an error.
pub(super) fn measure(
    rec: &mut Record,
    opts: &BenchOptions,
    on: &mut dyn FnMut(Event<'_>) -> Result<(), OutputError>,
    gpu: &mut SharedDevice,
) -> Result<(), BenchError> {
    let (workload, n) = (rec.workload, rec.n_requested);
    let mut stage = |s: &'static str| {
        on(Event::Stage {
            workload,
            n,
            stage: s,
        })
    };
    if workload == Workload::Worlds {
        let result = super::worlds::measure(rec, opts, &mut stage, gpu);
        return finish(rec, result);
    }
    stage("building")?;
    let built = match (workload, rec.ddef_samples, &opts.mesh) {
        (Workload::Mesh, _, Some(path)) => {
            rec.mesh = Some(path.display().to_string());
            workload::mesh_file(path, opts.sweeps, opts.charged_fraction).map(|(b, s)| {
                rec.mesh_load_seconds = Some(s);
                b
            })
        }
        (Workload::Mesh, _, None) => Err(workload::WorkloadError::NoMeshFile),
        (Workload::Cloth, ..) => workload::cloth(n, opts.sweeps, opts.charged_fraction),
        (Workload::Ddef, Some(m), _) => {
            workload::ddef(n, m, opts.ddef_rebuild_every, opts.ddef_variant, opts.cloud)
        }
        _ => workload::coulomb_on(n, opts.cloud),
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
    if matches!(workload, Workload::Cloth | Workload::Mesh) && opts.backend == Backend::Gpu {
        let b = bytes::jacobi_sweep_bytes(system.len(), system.springs(), system.pinned());
        rec.jacobi_sweep_bytes = Some(b.compulsory);
        rec.jacobi_sweep_bytes_issued = Some(b.issued);
    }
    let result = match opts.backend {
        Backend::Gpu => measure_gpu(rec, &built, opts, &mut stage, gpu),
        Backend::Cpu => measure_cpu(rec, &built, opts, &mut stage),
    };
    // The GPU path measures its error on the solver's own device (in `measure_gpu`).
    let result = result.and_then(|()| match (workload, opts.backend) {
        (Workload::Ddef, Backend::Cpu) => ddef_error(rec, &built, None, &mut stage),
        _ => Ok(()),
    });
    finish(rec, result)
}

/// A size's outcome: only a missing adapter or an output error ends the benchmark; any
/// other GPU error is the record's status and reason.
fn finish(rec: &mut Record, result: Result<(), Stop>) -> Result<(), BenchError> {
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

fn measure_gpu(
    rec: &mut Record,
    built: &workload::Built,
    opts: &BenchOptions,
    stage: &mut StageFn<'_>,
    gpu: &mut SharedDevice,
) -> Result<(), Stop> {
    stage("setup")?;
    let hd = gpu.get()?;
    let t = Instant::now();
    let tuning = Tuning {
        ddef_gather: opts.ddef_gather,
        ddef_far: opts.ddef_far,
        ..Tuning::default()
    };
    let mut solver =
        GpuSolver::new_tuned(&hd.device, &hd.queue, &built.system, &built.config, tuning)?;
    rec.setup_seconds = Some(t.elapsed().as_secs_f64());
    rec.adapter = solver.adapter().cloned();
    rec.kernel_files = crate::gpu::shader::kernel_files::label();
    rec.dispatches_per_step = Some(solver.dispatches_per_step());
    if let Some(g) = solver.ddef_gather() {
        rec.ddef_gather = Some(g.to_string());
        rec.ddef_gather_auto = Some(opts.ddef_gather == GatherChoice::Auto);
    }
    if let Some((total, largest)) = solver.ddef_structure_bytes() {
        rec.ddef_structure_bytes = Some(total);
        rec.ddef_largest_binding_bytes = Some(largest);
    }
    rec.note_shader_checks();

    stage("warm-up")?;
    let warm = timing::warm_up(
        opts.warmup,
        opts.warmup_ms * 1e-3,
        |k| -> Result<(), Stop> {
            solver.step(k)?;
            timing::wait(&solver)?;
            Ok(())
        },
    )?;
    rec.warmup_steps = warm.steps;
    rec.warmup_seconds = Some(warm.seconds);

    stage("timing")?;
    let info = solver.device().adapter_info();
    clock::read(rec, &info, |r, mhz, max| {
        r.sm_clock_mhz_before = Some(mhz);
        r.sm_clock_max_mhz = Some(max);
    });
    let before = solver.host_counts();
    let host_before = (solver.ddef_host_seconds(), solver.ddef_evaluations());
    let samples = timing::time_gpu(&mut solver, opts.steps, opts.repeats)?;
    clock::read(rec, &info, |r, mhz, _| r.sm_clock_mhz_after = Some(mhz));
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
    timing::fill(rec, &samples, opts.steps);
    let k = (opts.steps * u64::from(opts.repeats)) as f64;
    rec.submissions_per_step = Some((after.submissions - before.submissions) as f64 / k);
    rec.compute_passes_per_step = Some((after.compute_passes - before.compute_passes) as f64 / k);

    let timestamps = rec.adapter.as_ref().is_some_and(|a| a.timestamp_queries);
    if opts.profile_steps == 0 {
        rec.note("kernel_times", "--profile-steps 0");
    } else if !timestamps {
        rec.note(
            "kernel_times",
            "the adapter does not offer timestamp queries",
        );
    } else {
        stage("profiling")?;
        timing::profile(rec, &mut solver, opts.profile_steps)?;
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
    let warm = timing::warm_up(opts.warmup, opts.warmup_ms * 1e-3, |k| sim.step(k))?;
    rec.warmup_steps = warm.steps;
    rec.warmup_seconds = Some(warm.seconds);
    stage("timing")?;
    let samples = timing::time_blocking(&mut sim, opts.steps, opts.repeats)?;
    timing::fill(rec, &samples, opts.steps);
    rec.threads = Some(rayon::current_num_threads());
    if matches!(rec.workload, Workload::Cloth | Workload::Mesh) {
        stage("sweeps")?;
        rec.jacobi_sweep_ms = Some(cpu_sweep_seconds(&sim, opts.sweeps) * 1e3);
    }
    rec.note("kernel_times", "the CPU reference has no kernels");
    rec.note("dispatches_per_step", "the CPU reference has no kernels");
    rec.note("submissions_per_step", "the CPU reference submits nothing");
    rec.note(
        "host_ms_per_step",
        "the CPU reference computes while step runs (ms_per_step is all host time)",
    );
    rec.note("sm_clock_mhz", "the CPU backend has no GPU clock");
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

/// A DDEF row's near-field load at the initial positions, from the f64 reference's
/// structure under the same plan (its far field is not computed): the mean near sources
/// per target and the busiest lattice cell, which say how crowded the cells are.
fn near_load(
    rec: &mut Record,
    config: crate::config::DdefConfig,
    x: &[glam::DVec3],
    q: &[f64],
    softening: f64,
) -> Result<(), GpuError> {
    let lattice = crate::ddef::DdefSolver::reference_for(config, x, q, softening)?;
    rec.ddef_near_per_target = Some(lattice.mean_near_count());
    rec.ddef_busiest_cell = Some(lattice.busiest_cell());
    Ok(())
}

/// A DDEF row's force error at the workload's initial positions (and, first, its
/// [`near_load`]): the first evaluation of the timed backend (the GPU kernels on `gpu`'s
/// device, else the CPU reference) against the exact f64 all-pairs sum, over up to
/// [`DDEF_ERROR_TARGETS`] evenly strided charges.
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
            // A fresh solver at the initial positions: its field forces are the DDEF
            // forces (the workload has no other field).
            let mut solver = GpuSolver::new(device, queue, system, &built.config)?;
            solver.field_forces()?.0
        }
    };
    near_load(rec, ddef_config, x, q, softening)?;
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
