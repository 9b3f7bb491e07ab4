//! The forward-sensitivity driver: steps the forward simulation and every tangent
//! together, and hands each requested frame (state and tangents) to a consumer.

use super::params::{Direction, ParamSet};
use super::step::{tangent_step, Forward, TangentScratch, TangentSolve};
use super::GradError;
use crate::config::{SolverConfig, SolverMethod};
use crate::model::State;
use glam::DVec3;
use rayon::prelude::*;

/// Where the forward run and its tangents are computed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GradBackend {
    /// The f64 CPU reference (tangent solves by CG to `tangent_solve`'s tolerance).
    #[default]
    Cpu,
    /// The GPU solver ([`super::GpuTangents`], f32): every integrator, tangent solves
    /// with the scene's solver and fixed iteration count, no `window`, no `exact_forward`.
    /// `allow_software` accepts software adapters (lavapipe). States and tangents are
    /// read back, and checked for non-finite values, at the frames only; the forward
    /// residual is not reported (the tangents reuse its right-hand side buffer).
    Gpu { allow_software: bool },
}

/// How gradients are computed.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GradOptions {
    /// The tangents' linear solves (CG to a tight tolerance).
    pub tangent_solve: TangentSolve,
    /// Replace the configured forward linear solver by CG to `tangent_solve`'s tolerance,
    /// so that the trajectory is (to that tolerance) the one whose exact derivative the
    /// tangents are. Off: the forward runs as configured (as `msc run` would).
    pub exact_forward: bool,
    /// Truncation: each frame's tangent is propagated through its last `window` steps
    /// only (the state `window` steps before the frame is held fixed). `None` = full history.
    pub window: Option<u64>,
    /// CPU reference or GPU; the frames and tangents handed on are the same either way.
    pub backend: GradBackend,
}

/// Totals over one run with tangents.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct GradStats {
    pub steps: u64,
    /// Tangents propagated (parameter components x windows).
    pub tangents: usize,
    /// CG iterations over every tangent solve.
    pub tangent_iterations: u64,
    /// Largest relative residual any tangent solve ended with.
    pub worst_tangent_residual: f64,
    /// Largest relative residual of a forward linear solve (implicit integrators).
    pub worst_forward_residual: Option<f64>,
}

/// One tangent: dx/dtheta_p and dv/dtheta_p.
#[derive(Clone, Debug)]
pub struct Tangent {
    pub dx: Vec<DVec3>,
    pub dv: Vec<DVec3>,
}

struct Live {
    tangent: Tangent,
    scratch: TangentScratch,
}

/// Tangents started at one step (the full history starts at 0).
struct TangentSet {
    start: u64,
    /// Last frame step this set serves; dropped after it.
    until: u64,
    live: Vec<Live>,
}

/// The configuration the forward runs with under `options`.
pub(crate) fn forward_config(
    config: &crate::config::Config,
    options: &GradOptions,
) -> crate::config::Config {
    let mut c = config.clone();
    if options.exact_forward && c.integrator.is_implicit() {
        c.solver = SolverConfig {
            method: SolverMethod::Cg,
            iterations: options.tangent_solve.max_iterations,
            omega: c.solver.omega,
            tolerance: options.tangent_solve.tolerance,
            rho: None,
        };
    }
    c
}

/// Checks that frame steps increase strictly.
pub(crate) fn check_frames(frames: &[u64]) -> Result<(), GradError> {
    if frames.is_empty() {
        return Err(GradError::Frames("no frame requested".into()));
    }
    if let Some(w) = frames.windows(2).find(|w| w[1] <= w[0]) {
        return Err(GradError::Frames(format!(
            "frame steps must increase: {} is followed by {}",
            w[0], w[1]
        )));
    }
    Ok(())
}

/// Runs the simulation described by `theta` to the last of `frames` (steps, increasing)
/// and calls `on_frame(k, state, tangents)` at each frame k; `tangents[p]` is the
/// derivative with respect to theta_p (under `options.window`, the windowed one). With
/// `with_tangents` false only the forward runs (tangents are empty).
pub(crate) fn drive(
    set: &ParamSet,
    theta: &[f64],
    frames: &[u64],
    options: &GradOptions,
    with_tangents: bool,
    mut on_frame: impl FnMut(usize, &State, &[Tangent]) -> Result<(), GradError>,
) -> Result<GradStats, GradError> {
    if let GradBackend::Gpu { allow_software } = options.backend {
        return super::gpu_tangent::drive(
            set,
            theta,
            frames,
            options,
            with_tangents,
            allow_software,
            on_frame,
        );
    }
    check_frames(frames)?;
    if options.window == Some(0) {
        return Err(GradError::Frames(
            "the window must be at least 1 step".into(),
        ));
    }
    let (system, config) = set.instantiate(theta)?;
    let config = forward_config(&config, options);
    let dirs: Vec<Direction> = if with_tangents {
        set.directions()
    } else {
        Vec::new()
    };
    let names = set.component_names();
    let n = system.len();
    let starts: Vec<u64> = frames
        .iter()
        .map(|&s| options.window.map_or(0, |w| s.saturating_sub(w)))
        .collect();
    let mut fwd = Forward::new(&system, &config)?;
    let mut sets: Vec<TangentSet> = Vec::new();
    let mut stats = GradStats::default();
    let zero = Tangent {
        dx: vec![DVec3::ZERO; n],
        dv: vec![DVec3::ZERO; n],
    };
    let last = *frames.last().unwrap_or(&0);
    let mut next_frame = 0;
    loop {
        let step = fwd.state().step;
        // Frames at this step.
        while next_frame < frames.len() && frames[next_frame] == step {
            let tangents: Vec<Tangent> = match sets.iter().find(|s| s.start == starts[next_frame]) {
                Some(s) => s.live.iter().map(|l| l.tangent.clone()).collect(),
                // A frame at its own start step (step 0) has zero tangents.
                None => vec![zero.clone(); dirs.len()],
            };
            on_frame(next_frame, fwd.state(), &tangents)?;
            next_frame += 1;
        }
        sets.retain(|s| s.until > step);
        if step >= last {
            break;
        }
        // Start the tangent sets that begin here.
        if with_tangents {
            for (k, &b) in starts.iter().enumerate() {
                if b != step || frames[k] == step {
                    continue;
                }
                if let Some(s) = sets.iter_mut().find(|s| s.start == b) {
                    s.until = s.until.max(frames[k]);
                    continue;
                }
                sets.push(TangentSet {
                    start: b,
                    until: frames[k],
                    live: (0..dirs.len())
                        .map(|_| Live {
                            tangent: zero.clone(),
                            scratch: TangentScratch::default(),
                        })
                        .collect(),
                });
                stats.tangents += dirs.len();
            }
        }
        let record = fwd.step()?;
        stats.steps += 1;
        if let Some(s) = fwd.last_solve {
            let w = stats.worst_forward_residual.unwrap_or(0.0);
            stats.worst_forward_residual = Some(w.max(s.residual));
        }
        if !fwd.state().is_finite() {
            return Err(GradError::NonFiniteState {
                step: fwd.state().step,
                time: fwd.state().t,
            });
        }
        let mut jobs: Vec<(usize, &mut Live)> = sets
            .iter_mut()
            .flat_map(|s| s.live.iter_mut().enumerate())
            .collect();
        let solve = options.tangent_solve;
        let results: Vec<(usize, crate::sim::SolveStats, bool)> = jobs
            .par_iter_mut()
            .with_max_len(1)
            .map(|(p, live)| {
                let Live { tangent, scratch } = &mut **live;
                let s = tangent_step(
                    &fwd,
                    &record,
                    &dirs[*p],
                    &mut tangent.dx,
                    &mut tangent.dv,
                    &solve,
                    scratch,
                );
                let finite = tangent.dx.iter().chain(&tangent.dv).all(|v| v.is_finite());
                (*p, s, finite)
            })
            .collect();
        for (p, s, finite) in results {
            if !finite {
                return Err(GradError::NonFiniteTangent {
                    step: fwd.state().step,
                    param: names[p].clone(),
                });
            }
            stats.tangent_iterations += u64::from(s.iterations);
            stats.worst_tangent_residual = stats.worst_tangent_residual.max(s.residual);
        }
    }
    Ok(stats)
}

/// A frame of [`simulate_with_tangents`]: the state and d(state)/d(theta_p) per component.
#[derive(Clone, Debug)]
pub struct TangentFrame {
    pub step: u64,
    pub t: f64,
    pub x: Vec<DVec3>,
    pub v: Vec<DVec3>,
    /// One per component of theta.
    pub tangents: Vec<Tangent>,
}

/// A trajectory with its tangents at the requested frames.
#[derive(Clone, Debug)]
pub struct TangentRun {
    pub frames: Vec<TangentFrame>,
    pub stats: GradStats,
}

/// Simulates the system `set` describes at `theta` and returns, at each of `frames`
/// (steps, strictly increasing), the state and its derivatives with respect to every
/// component of theta (see the module documentation for what the derivative is).
pub fn simulate_with_tangents(
    set: &ParamSet,
    theta: &[f64],
    frames: &[u64],
    options: &GradOptions,
) -> Result<TangentRun, GradError> {
    let mut out = Vec::with_capacity(frames.len());
    let stats = drive(set, theta, frames, options, true, |_, state, tangents| {
        out.push(TangentFrame {
            step: state.step,
            t: state.t,
            x: state.x.clone(),
            v: state.v.clone(),
            tangents: tangents.to_vec(),
        });
        Ok(())
    })?;
    Ok(TangentRun { frames: out, stats })
}

/// The trajectory alone (no tangents) at `frames`: the forward map the tangents differentiate.
pub fn simulate(
    set: &ParamSet,
    theta: &[f64],
    frames: &[u64],
    options: &GradOptions,
) -> Result<Vec<State>, GradError> {
    let mut out = Vec::with_capacity(frames.len());
    drive(set, theta, frames, options, false, |_, state, _| {
        out.push(state.clone());
        Ok(())
    })?;
    Ok(out)
}
