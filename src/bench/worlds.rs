//! Measuring one row of the worlds workload: W worlds of one [`WorldScene`] stepped as GPU
//! batches ([`GpuWorlds`]) and, interleaved block by block, the same worlds stepped one
//! after another, each on its own [`GpuSolver`] on the same device (as a sweep without
//! batching runs them). Both are timed the same way: a warm-up by wall time, then
//! `repeats` blocks of `steps` steps of every world, each block ended by a wait for the
//! GPU.

use super::record::{Record, Status};
use super::shared_device::SharedDevice;
use super::timing::{self, Sample, Spread};
use super::{clock, workload, Backend, BenchOptions, StageFn, Stop};
use crate::config::Config;
use crate::gpu::{GpuError, GpuSolver, GpuWorlds};
use crate::model::System;
use std::time::Instant;

/// Waits until the device has finished everything submitted.
fn wait(device: &wgpu::Device) -> Result<(), GpuError> {
    device
        .poll(wgpu::PollType::wait_indefinitely())
        .map(|_| ())
        .map_err(|e| GpuError::DeviceLost(format!("waiting for the GPU failed: {e}")))
}

/// `k` steps of every world, batch after batch, then a wait.
fn step_batched(batches: &mut [GpuWorlds], device: &wgpu::Device, k: u64) -> Result<(), GpuError> {
    for b in batches.iter_mut() {
        b.advance(k)?;
    }
    wait(device)
}

/// `k` steps of each world in turn, then a wait.
fn step_sequential(
    solvers: &mut [GpuSolver],
    device: &wgpu::Device,
    k: u64,
) -> Result<(), GpuError> {
    for s in solvers.iter_mut() {
        s.advance(k)?;
    }
    wait(device)
}

/// One timed block: wall time of `run`, which ends with a wait for the GPU.
fn block(run: impl FnOnce() -> Result<(), GpuError>) -> Result<Sample, GpuError> {
    let start = Instant::now();
    run()?;
    Ok(Sample {
        total: start.elapsed().as_secs_f64(),
        host: None,
    })
}

/// Builds and measures the row `rec` names (`worlds`, `world_scene`).
pub(super) fn measure(
    rec: &mut Record,
    opts: &BenchOptions,
    stage: &mut StageFn<'_>,
    gpu: &mut SharedDevice,
) -> Result<(), Stop> {
    let (Some(count), Some(scene)) = (rec.worlds, rec.world_scene) else {
        return Ok(());
    };
    if opts.backend == Backend::Cpu {
        rec.status = Status::Skipped;
        rec.reason = Some(
            "the worlds workload compares GPU batches with GPU solvers; it has no CPU row".into(),
        );
        return Ok(());
    }
    stage("building")?;
    let built = match workload::worlds(scene, count, opts.sweeps, opts.charged_fraction) {
        Ok(b) => b,
        Err(e) => {
            rec.status = Status::Failed;
            rec.reason = Some(e.to_string());
            return Ok(());
        }
    };
    let Some(first) = built.first() else {
        rec.status = Status::Failed;
        rec.reason = Some("no world to run (W = 0)".into());
        return Ok(());
    };
    rec.n = first.system.len();
    rec.n_requested = rec.n;
    rec.grid = first.grid;
    rec.springs = first.system.springs().len();
    rec.charged = first.system.charged_count();
    rec.sweeps = Some(first.config.solver.iterations);
    rec.coulomb_interactions_per_eval = (rec.charged as u64).pow(2) * count as u64;
    let pairs: Vec<(&System, &Config)> = built.iter().map(|b| (&b.system, &b.config)).collect();

    stage("setup")?;
    let hd = gpu.get()?;
    let device = &hd.device;
    rec.adapter = Some(hd.adapter.clone());
    let t = Instant::now();
    let limits = device.limits();
    let mut batches = Vec::new();
    let mut rest = &pairs[..];
    while !rest.is_empty() {
        let k = GpuWorlds::fitting(&limits, rest).clamp(1, rest.len());
        batches.push(GpuWorlds::new(device, &hd.queue, &rest[..k])?);
        rest = &rest[k..];
    }
    rec.setup_seconds = Some(t.elapsed().as_secs_f64());
    rec.batches = Some(batches.len());
    rec.dispatches_per_step = batches.first().map(GpuWorlds::dispatches_per_step);
    rec.note_shader_checks();
    let t = Instant::now();
    let mut solvers = pairs
        .iter()
        .map(|(s, c)| GpuSolver::new(device, &hd.queue, s, c))
        .collect::<Result<Vec<_>, _>>()?;
    rec.sequential_setup_seconds = Some(t.elapsed().as_secs_f64());

    stage("warm-up")?;
    let min_seconds = opts.warmup_ms * 1e-3;
    let warm = timing::warm_up(opts.warmup, min_seconds, |k| {
        step_batched(&mut batches, device, k)
    })?;
    rec.warmup_steps = warm.steps;
    rec.warmup_seconds = Some(warm.seconds);
    timing::warm_up(opts.warmup, min_seconds, |k| {
        step_sequential(&mut solvers, device, k)
    })?;

    stage("timing")?;
    let info = device.adapter_info();
    clock::read(rec, &info, |r, mhz, max| {
        r.sm_clock_mhz_before = Some(mhz);
        r.sm_clock_max_mhz = Some(max);
    });
    let (mut batched, mut sequential) = (Vec::new(), Vec::new());
    for _ in 0..opts.repeats {
        sequential.push(block(|| step_sequential(&mut solvers, device, opts.steps))?);
        batched.push(block(|| step_batched(&mut batches, device, opts.steps))?);
    }
    clock::read(rec, &info, |r, mhz, _| r.sm_clock_mhz_after = Some(mhz));
    timing::fill(rec, &batched, opts.steps);
    let ms: Vec<f64> = sequential
        .iter()
        .map(|s| s.total * 1e3 / opts.steps as f64)
        .collect();
    if let Some(t) = Spread::of(&ms) {
        rec.sequential_ms_per_step = Some(t.median);
        rec.sequential_ms_per_step_min = Some(t.min);
        rec.sequential_ms_per_step_max = Some(t.max);
    }
    rec.sequential_ms_per_step_samples = ms;
    for (field, why) in [
        (
            "host_ms_per_step",
            "the worlds workload times whole blocks (recording, submission and the wait)",
        ),
        ("kernel_times", "batches are not profiled per kernel"),
        (
            "submissions_per_step",
            "a batch's submissions are not counted",
        ),
    ] {
        rec.note(field, why);
    }

    stage("energies")?;
    let mut finite = true;
    for b in &batches {
        finite &= b.read_energies()?.iter().all(|e| e.is_finite());
    }
    for s in &solvers {
        finite &= s.read_energies()?.is_finite();
    }
    rec.finite = Some(finite);
    Ok(())
}
