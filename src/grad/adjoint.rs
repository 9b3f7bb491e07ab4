//! Reverse mode on the CPU: the loss and its gradient with respect to every component of
//! theta from one forward run and one reverse sweep, whatever the number of components.
//!
//! The forward run is the CPU reference (as for the tangents, so the map differentiated is
//! the same exact-solve discrete map; see the module documentation of [`crate::grad`]),
//! with the states a [`Plan`] keeps; the reverse sweep seeds the cotangent of x at each
//! target frame with dL/dx = 2 (x - xhat) / (F n), reverses the steps one by one
//! ([`super::reverse::reverse_step`]: the adjoint solves by CG to `tangent_solve`'s
//! tolerance, warm-started from the previous step's solution) and accumulates the
//! physical parameters' cotangents, which [`ParamSet::pullback`] maps to dL/dtheta.

use super::checkpoint::{CheckpointStats, Checkpointing, Plan, Tape};
use super::cotangent::{Cotangent, Wants};
use super::loss::{check_targets, frame_loss, Evaluation, FrameReport, Target};
use super::params::ParamSet;
use super::reverse::{reverse_step, Adjoint, ReverseScratch};
use super::sensitivity::{forward_config, GradOptions, GradStats};
use super::step::{AdjointSolve, Forward, Record, TangentSolve};
use super::stop_check;
use super::GradError;
use crate::config::Integrator;
use crate::model::State;
use std::collections::HashMap;

impl CheckpointStats {
    /// What `plan` keeps and runs, with `state_bytes` per state and `accumulators` bytes
    /// of parameter cotangents.
    pub(crate) fn of(plan: &Plan, state_bytes: u64, accumulators: usize) -> Self {
        Self {
            policy: match plan.policy {
                Checkpointing::TwoLevel { .. } => "two_level",
                Checkpointing::Binomial { .. } => "binomial",
                _ => "store_all",
            },
            slots: plan.slots,
            forward_steps: plan.forward_steps,
            peak_states: plan.peak_states,
            state_bytes,
            accumulator_bytes: accumulators as u64,
            setup_seconds: 0.0,
            sweep_seconds: 0.0,
        }
    }
}

/// Refuses what the adjoint does not differentiate, before any run.
pub(crate) fn check_supported(options: &GradOptions) -> Result<(), GradError> {
    if options.window.is_some() {
        return Err(GradError::Unsupported {
            what: "a truncation window",
            reason: "the adjoint has one reverse sweep for all frames; use forward gradients",
        });
    }
    Ok(())
}

/// Bytes of one kept step record of `integrator` over `n` particles (x_t and v_t; Verlet
/// also its half-step velocity; local-global iterates are recomputed, not kept).
pub(crate) fn record_bytes(integrator: Integrator, n: usize) -> u64 {
    let vectors = if integrator == Integrator::Verlet {
        3
    } else {
        2
    };
    (vectors * 24 * n) as u64
}

/// L(theta) and dL/dtheta by one reverse sweep (see the module documentation).
pub(crate) fn evaluate(
    set: &ParamSet,
    theta: &[f64],
    targets: &[Target],
    options: &GradOptions,
) -> Result<Evaluation, GradError> {
    sweep(set, theta, targets, options).map(|(e, _)| e)
}

/// [`evaluate`], and the most states the tape held at once (its own count, which the
/// tests compare with the plan's).
fn sweep(
    set: &ParamSet,
    theta: &[f64],
    targets: &[Target],
    options: &GradOptions,
) -> Result<(Evaluation, u64), GradError> {
    check_supported(options)?;
    if options.adjoint_solve == AdjointSolve::Exact || options.exact_forward {
        options.tangent_solve.check()?;
    }
    let steps = check_targets(set, targets)?;
    super::sensitivity::check_frames(&steps)?;
    let (system, config) = set.instantiate(theta)?;
    let config = forward_config(&config, options);
    let n = system.len();
    let scale = 1.0 / (targets.len() * n) as f64;
    let last = *steps.last().unwrap_or(&0);
    let bytes = record_bytes(config.integrator, n);
    let plan = Plan::new(last, bytes, &options.checkpoint)?;
    let wants = Wants::of(set);
    let cot = Cotangent::zeros(
        wants,
        n,
        system.springs().len(),
        config.external_charges.len(),
    );
    let start = std::time::Instant::now();
    let mut tape = CpuTape {
        fwd: Forward::new(&system, &config)?,
        slots: vec![None; plan.slots],
        kept_slots: 0,
        peak_held: 0,
        records: Vec::new(),
        after: None,
        stale: false,
        adj: Adjoint::zeros(n),
        cot,
        ws: ReverseScratch::default(),
        solve: options.tangent_solve,
        mode: options.adjoint_solve,
        targets,
        frame_at: steps.iter().enumerate().map(|(k, &s)| (s, k)).collect(),
        scale,
        losses: vec![None; targets.len()],
        stats: GradStats::default(),
    };
    if let Some(&k) = tape.frame_at.get(&0) {
        let x0 = system.positions();
        tape.losses[k] = Some(frame_loss(x0, &targets[k].positions, scale));
    }
    let setup_seconds = start.elapsed().as_secs_f64();
    plan.execute(&mut tape)?;
    let sweep_seconds = start.elapsed().as_secs_f64() - setup_seconds;
    let mut loss = 0.0;
    let mut frames = Vec::with_capacity(targets.len());
    for (k, t) in targets.iter().enumerate() {
        let l = tape.losses[k].expect("every frame is seeded once by the reverse sweep");
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
    let gradient = set.pullback(&tape.cot, theta)?;
    let mut stats = tape.stats;
    stats.steps = last;
    stats.checkpoint = Some(CheckpointStats {
        setup_seconds,
        sweep_seconds,
        ..CheckpointStats::of(&plan, bytes, tape.cot.bytes())
    });
    let evaluation = Evaluation {
        loss,
        penalty: 0.0,
        jtr: gradient.iter().map(|g| 0.5 * g).collect(),
        gradient,
        jtj: Vec::new(),
        frames,
        stats,
    };
    Ok((evaluation, tape.peak_held))
}

/// The CPU reference as a [`Tape`]: snapshots and records are f64 states.
struct CpuTape<'a> {
    fwd: Forward,
    slots: Vec<Option<State>>,
    /// Slots holding a state, and the most states (snapshots, records, the state after
    /// a reversed step) held at once so far.
    kept_slots: u64,
    peak_held: u64,
    /// Kept records (step, record), the latest last.
    records: Vec<(u64, Record)>,
    /// The state after the latest record once the forward has moved on (after a reverse).
    after: Option<State>,
    /// The forward's state is not the current one (`after` is).
    stale: bool,
    adj: Adjoint,
    cot: Cotangent,
    ws: ReverseScratch,
    solve: TangentSolve,
    mode: AdjointSolve,
    targets: &'a [Target],
    frame_at: HashMap<u64, usize>,
    scale: f64,
    losses: Vec<Option<f64>>,
    stats: GradStats,
}

impl CpuTape<'_> {
    /// Notes the states held now, and `extra` ones out of the tape's fields.
    fn note(&mut self, extra: u64) {
        let held = self.kept_slots + self.records.len() as u64 + u64::from(self.after.is_some());
        self.peak_held = self.peak_held.max(held + extra);
    }

    fn sync(&mut self) {
        if self.stale {
            if let Some(s) = &self.after {
                self.fwd.restore(s);
            }
            self.stale = false;
        }
    }
}

impl Tape for CpuTape<'_> {
    fn save(&mut self, slot: usize) -> Result<(), GradError> {
        self.sync();
        let state = self.fwd.state().clone();
        // The copy exists beside the slot's old state until it replaces it.
        self.note(1);
        if self.slots[slot].replace(state).is_none() {
            self.kept_slots += 1;
        }
        self.note(0);
        Ok(())
    }

    fn restore(&mut self, slot: usize) -> Result<(), GradError> {
        let s = self.slots[slot]
            .as_ref()
            .expect("a plan restores saved slots");
        self.fwd.restore(s);
        self.after = None;
        self.stale = false;
        Ok(())
    }

    fn advance(&mut self, n: u64, record: bool) -> Result<(), GradError> {
        self.sync();
        self.after = None;
        let lg = self.fwd.config().integrator == Integrator::LocalGlobal;
        for _ in 0..n {
            // A long horizon stops within a step of a stop request.
            stop_check()?;
            let step = self.fwd.state().step;
            if record {
                let mut r = self.fwd.step()?;
                if lg {
                    // Recomputed when reversed: the iterates would multiply the memory.
                    r.iterates = Vec::new();
                }
                self.records.push((step, r));
                self.note(0);
            } else {
                self.fwd.step_plain();
            }
            if let Some(s) = self.fwd.last_solve {
                let w = self.stats.worst_forward_residual.unwrap_or(0.0);
                self.stats.worst_forward_residual = Some(w.max(s.residual));
            }
            let state = self.fwd.state();
            if !state.is_finite() {
                return Err(GradError::NonFiniteState {
                    step: state.step,
                    time: state.t,
                });
            }
        }
        Ok(())
    }

    fn reverse(&mut self, n: u64) -> Result<(), GradError> {
        for _ in 0..n {
            stop_check()?;
            let (step, mut record) = self.records.pop().expect("a plan reverses kept records");
            let after = match self.after.take() {
                Some(s) => s,
                None => self.fwd.state().clone(),
            };
            // The record being reversed and the state after it.
            self.note(2);
            if let Some(&k) = self.frame_at.get(&(step + 1)) {
                let target = &self.targets[k].positions;
                self.losses[k] = Some(frame_loss(&after.x, target, self.scale));
                for ((l, x), t) in self.adj.lx.iter_mut().zip(&after.x).zip(target) {
                    *l += (*x - *t) * (2.0 * self.scale);
                }
            }
            if record.iterates.is_empty() && self.fwd.config().integrator == Integrator::LocalGlobal
            {
                let h = self.fwd.config().dt;
                self.fwd.restore(&State {
                    x: std::mem::take(&mut record.x0),
                    v: std::mem::take(&mut record.v0),
                    t: crate::measures::time_at(step, h),
                    step,
                });
                record = self.fwd.step()?;
            }
            // DDEF: the reversed step's evaluations, with the structure the step had.
            self.fwd.ddef_for_step(&record.x0, Some(&after.x))?;
            let s = reverse_step(
                &self.fwd,
                &record,
                &after.x,
                &after.v,
                step,
                &mut self.adj,
                &mut self.cot,
                &self.solve,
                self.mode,
                &mut self.ws,
            );
            self.stats.tangent_iterations += u64::from(s.iterations);
            self.stats.worst_tangent_residual = self.stats.worst_tangent_residual.max(s.residual);
            if !self
                .adj
                .lx
                .iter()
                .chain(&self.adj.lv)
                .all(|v| v.is_finite())
            {
                return Err(GradError::NonFiniteAdjoint { step });
            }
            let h = self.fwd.config().dt;
            self.after = Some(State {
                x: record.x0,
                v: record.v0,
                t: crate::measures::time_at(step, h),
                step,
            });
            self.stale = true;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "adjoint_tests.rs"]
mod tests;
