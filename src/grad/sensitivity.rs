//! The forward-sensitivity driver on the CPU reference: steps the forward simulation and
//! every tangent together, and hands each requested frame (state and tangents) to a
//! consumer; and the options and totals both backends share.

use super::checkpoint::CheckpointOptions;
use super::params::{Direction, ParamSet};
use super::step::{tangent_step, AdjointSolve, Forward, TangentScratch, TangentSolve};
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

/// Forward sensitivities (one tangent per component of theta) or reverse mode (one
/// reverse sweep for all of them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GradMode {
    /// Tangents propagated with the run: gives J (so J^T J for Levenberg-Marquardt);
    /// costs one tangent solve per component per step.
    #[default]
    Forward,
    /// The adjoint (`grad::adjoint`): the gradient alone, at a cost independent of
    /// the number of components, with the states kept per [`CheckpointOptions`].
    Adjoint,
}

impl GradMode {
    /// Components above which `auto` takes the adjoint even without a per-element
    /// parameter (each forward tangent costs about a forward run).
    pub const AUTO_ADJOINT_ABOVE: usize = 8;

    /// The adjoint for per-element parameters or more than
    /// [`Self::AUTO_ADJOINT_ABOVE`] components, else forward tangents (which also give
    /// J^T J for Levenberg-Marquardt), on either backend (both differentiate DDEF).
    pub fn auto(set: &super::params::ParamSet) -> Self {
        use super::params::Param;
        let per_element = set
            .params()
            .iter()
            .any(|p| matches!(p, Param::Charges | Param::Stiffnesses | Param::Masses));
        if per_element || set.len() > Self::AUTO_ADJOINT_ABOVE {
            Self::Adjoint
        } else {
            Self::Forward
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Self::Forward => "forward",
            Self::Adjoint => "adjoint",
        }
    }
}

/// How gradients are computed.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GradOptions {
    /// Forward tangents or the adjoint.
    pub mode: GradMode,
    /// The adjoint's checkpointing (ignored by forward mode).
    pub checkpoint: CheckpointOptions,
    /// The GPU adjoint: its solves as CG with this many iterations instead of the
    /// scene's solver (None: the scene's method and iteration count, as the GPU tangents).
    pub adjoint_cg_iterations: Option<u32>,
    /// The tangents' linear solves (CG to a tight tolerance).
    pub tangent_solve: TangentSolve,
    /// The CPU adjoint's linear solves: CG to `tangent_solve`'s tolerance (exact) or the
    /// scene's solver (the GPU adjoint's way; see [`AdjointSolve`]).
    pub adjoint_solve: AdjointSolve,
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
    /// Tangents propagated (parameter components x windows; 0 for the adjoint).
    pub tangents: usize,
    /// CG iterations over every tangent (or adjoint) solve.
    pub tangent_iterations: u64,
    /// Largest relative residual any tangent (or adjoint) solve ended with.
    pub worst_tangent_residual: f64,
    /// Largest relative residual of a forward linear solve (implicit integrators).
    pub worst_forward_residual: Option<f64>,
    /// The adjoint's checkpointing (None in forward mode).
    pub checkpoint: Option<super::checkpoint::CheckpointStats>,
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

/// `trajectory::drive` on the f64 CPU reference: runs the simulation described by
/// `theta` to the last of `frames` (steps, increasing) and calls
/// `on_frame(k, state, tangents)` at each frame k; `tangents[p]` is the derivative with
/// respect to theta_p (under `options.window`, the windowed one). With `with_tangents`
/// false only the forward runs (tangents are empty).
pub(crate) fn drive_cpu(
    set: &ParamSet,
    theta: &[f64],
    frames: &[u64],
    options: &GradOptions,
    with_tangents: bool,
    mut on_frame: impl FnMut(usize, &State, &[Tangent]) -> Result<(), GradError>,
) -> Result<GradStats, GradError> {
    check_frames(frames)?;
    if with_tangents || options.exact_forward {
        options.tangent_solve.check()?;
    }
    if options.window == Some(0) {
        return Err(GradError::Frames(
            "the window must be at least 1 step".into(),
        ));
    }
    let (system, config) = set.instantiate(theta)?;
    let config = forward_config(&config, options);
    let dirs: Vec<Direction> = if with_tangents {
        set.directions_at(theta)?
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
        // A long horizon stops within a step of a stop request, not after the evaluation.
        super::stop_check()?;
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
        let results: Vec<(usize, crate::measures::SolveStats, bool)> = jobs
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
