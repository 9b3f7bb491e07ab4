//! Reverse mode on the GPU: [`evaluate`] is `super::adjoint::evaluate` on a
//! [`GpuAdjoint`] (the forward run, the kept states and the reversed steps all on the
//! device, f32), carried out by the same checkpointing [`Plan`]; the cotangents and the
//! frames' losses are read back once, at the end. Advances run in chunks and reversals
//! step by step, each checking for a stop request.

use super::adjoint::check_supported;
use super::checkpoint::{CheckpointStats, Plan, Tape};
use super::cotangent::{Cotangent, Wants};
use super::loss::{check_targets, frame_loss, Evaluation, FrameReport, Target};
use super::params::ParamSet;
use super::sensitivity::{check_frames, GradOptions, GradStats};
use super::stop_check;
use super::GradError;
use crate::gpu::{adjoint_state_bytes, AdjointSetup, GpuAdjoint, HeadlessOptions};
use crate::interrupt::Chunks;
use std::collections::HashMap;

/// The GPU adjoint as a [`Tape`]: each reversed step first seeds the frame at its end.
struct GpuTape<'a> {
    gpu: GpuAdjoint,
    targets: &'a [Target],
    frame_at: HashMap<u64, usize>,
    chunks: Chunks,
}

impl Tape for GpuTape<'_> {
    fn save(&mut self, slot: usize) -> Result<(), GradError> {
        Ok(self.gpu.save(slot)?)
    }

    fn restore(&mut self, slot: usize) -> Result<(), GradError> {
        Ok(self.gpu.restore(slot)?)
    }

    fn advance(&mut self, n: u64, record: bool) -> Result<(), GradError> {
        // Chunks keep each step's start as one call would (`record` applies to each step).
        let gpu = &mut self.gpu;
        self.chunks.run(n, |k| {
            stop_check()?;
            Ok(gpu.advance(k, record)?)
        })
    }

    fn reverse(&mut self, n: u64) -> Result<(), GradError> {
        for _ in 0..n {
            stop_check()?;
            let step = self.gpu.latest_kept().expect("a plan reverses kept steps");
            if let Some(&k) = self.frame_at.get(&(step + 1)) {
                self.gpu.seed(k, &self.targets[k].positions)?;
            }
            self.gpu.reverse()?;
        }
        Ok(())
    }
}

/// L(theta) and dL/dtheta by one reverse sweep on the GPU (`allow_software`: software
/// adapters too). The adjoint solves run the scene's solver for its iteration count, or
/// CG for `options.adjoint_cg_iterations`.
pub(crate) fn evaluate(
    set: &ParamSet,
    theta: &[f64],
    targets: &[Target],
    options: &GradOptions,
    allow_software: bool,
) -> Result<Evaluation, GradError> {
    check_supported(options)?;
    if options.exact_forward {
        return Err(GradError::Param(
            "exact forward solves (CG to a tolerance) are not supported by the GPU, which runs \
             a fixed iteration count (use --backend cpu)"
                .into(),
        ));
    }
    let steps = check_targets(set, targets)?;
    check_frames(&steps)?;
    let (system, config) = set.instantiate(theta)?;
    let n = system.len();
    let scale = 1.0 / (targets.len() * n) as f64;
    let last = *steps.last().unwrap_or(&0);
    let bytes = adjoint_state_bytes(n);
    let plan = Plan::new(last, bytes, &options.checkpoint)?;
    let wants = Wants::of(set);
    let setup = AdjointSetup {
        stiffnesses: wants.stiffnesses,
        masses: wants.masses,
        charges: wants.charges,
        externals: wants.externals,
        frames: targets.len(),
        scale,
        cg_iterations: options.adjoint_cg_iterations,
    };
    let start = std::time::Instant::now();
    let gpu = GpuAdjoint::headless(
        &system,
        &config,
        &setup,
        &HeadlessOptions { allow_software },
    )?;
    let setup_seconds = start.elapsed().as_secs_f64();
    let mut tape = GpuTape {
        gpu,
        targets,
        frame_at: steps.iter().enumerate().map(|(k, &s)| (s, k)).collect(),
        chunks: Chunks::new(),
    };
    plan.execute(&mut tape)?;
    // An adjoint's solver keeps its set-up DDEF plan, drift or not (reads::ddef_records_with).
    debug_assert_eq!(tape.gpu.solver().ddef_rebuilds().unwrap_or(1), 1);
    let read = tape.gpu.read()?;
    let sweep_seconds = start.elapsed().as_secs_f64() - setup_seconds;
    let mut cot = Cotangent::zeros(
        wants,
        n,
        system.springs().len(),
        config.external_charges.len(),
    );
    cot.stiffnesses = read.stiffnesses;
    cot.masses = read.masses;
    cot.charges = read.charges;
    cot.external_charges = read.external_charges;
    cot.external_positions = read.external_positions;
    let mut frames = Vec::with_capacity(targets.len());
    let mut loss = 0.0;
    for (k, t) in targets.iter().enumerate() {
        let l = if t.step == 0 {
            frame_loss(system.positions(), &t.positions, scale)
        } else {
            read.losses[k]
        };
        loss += l;
        frames.push(FrameReport {
            step: t.step,
            time: crate::measures::time_at(t.step, config.dt),
            loss: l,
            gradient_norm: None,
            tangent_norm: None,
        });
    }
    if !loss.is_finite() {
        return Err(GradError::NonFiniteLoss);
    }
    let gradient = set.pullback(&cot, theta)?;
    if !gradient.iter().all(|g| g.is_finite()) {
        return Err(GradError::NonFiniteGradient);
    }
    let stats = GradStats {
        steps: last,
        checkpoint: Some(CheckpointStats {
            setup_seconds,
            sweep_seconds,
            ..CheckpointStats::of(&plan, bytes, cot.bytes())
        }),
        ..GradStats::default()
    };
    Ok(Evaluation {
        loss,
        penalty: 0.0,
        jtr: gradient.iter().map(|g| 0.5 * g).collect(),
        gradient,
        jtj: Vec::new(),
        frames,
        stats,
    })
}
