//! A trajectory and its tangents at requested frames ([`simulate_with_tangents`],
//! [`simulate`]), on the backend the options pick: the CPU reference's driver
//! (`sensitivity`) or the GPU's (`gpu_tangent`).

use super::params::ParamSet;
use super::sensitivity::{drive_cpu, GradBackend, GradOptions, GradStats, Tangent};
use super::GradError;
use crate::model::State;
use glam::DVec3;

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
    on_frame: impl FnMut(usize, &State, &[Tangent]) -> Result<(), GradError>,
) -> Result<GradStats, GradError> {
    match options.backend {
        GradBackend::Gpu { allow_software } => super::gpu_tangent::drive(
            set,
            theta,
            frames,
            options,
            with_tangents,
            allow_software,
            on_frame,
        ),
        GradBackend::Cpu => drive_cpu(set, theta, frames, options, with_tangents, on_frame),
    }
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
