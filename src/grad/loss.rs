//! The fitting loss: mean squared position error against target frames, with its gradient
//! and Gauss-Newton matrix from the tangents.
//!
//! With F target frames of n particles,
//! L(theta) = 1/(F n) sum_f sum_i |x_i(t_f; theta) - xhat_i(f)|^2.
//! Writing r = (x - xhat) / sqrt(F n) (stacked) and J = dr/dtheta = (dx/dtheta) / sqrt(F n),
//! L = r.r, dL/dtheta = 2 J^T r and the Gauss-Newton approximation of the Hessian is 2 J^T J.

use super::params::ParamSet;
use super::sensitivity::{GradOptions, GradStats};
use super::trajectory::drive;
use super::GradError;
use glam::DVec3;

/// Target positions at one step of the simulation being fitted.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    pub step: u64,
    pub positions: Vec<DVec3>,
}

/// One frame's share of the loss and of its gradient.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct FrameReport {
    pub step: u64,
    pub time: f64,
    /// This frame's term of L.
    pub loss: f64,
    /// |d(this frame's term)/dtheta| (forward mode; the adjoint's single reverse sweep
    /// gives the total only).
    pub gradient_norm: Option<f64>,
    /// |dx/dtheta| over all particles and components (Frobenius; forward mode).
    pub tangent_norm: Option<f64>,
}

/// The loss at theta with everything an optimizer needs.
#[derive(Clone, Debug)]
pub struct Evaluation {
    /// The loss (in a fit, the objective: the loss plus `penalty`).
    pub loss: f64,
    /// The smoothness penalty included in `loss` and `gradient` (0 outside a fit).
    pub penalty: f64,
    /// dL/dtheta.
    pub gradient: Vec<f64>,
    /// J^T r (= gradient / 2).
    pub jtr: Vec<f64>,
    /// J^T J, row-major P x P; empty unless asked for.
    pub jtj: Vec<f64>,
    pub frames: Vec<FrameReport>,
    pub stats: GradStats,
}

/// The steps of `targets`, after checking each frame against `set`'s particles.
pub(crate) fn check_targets(set: &ParamSet, targets: &[Target]) -> Result<Vec<u64>, GradError> {
    let n = set.base_system().len();
    for (k, t) in targets.iter().enumerate() {
        if t.positions.len() != n {
            return Err(GradError::ParticleCount {
                frame: k,
                got: t.positions.len(),
                expected: n,
            });
        }
        if let Some(i) = t.positions.iter().position(|p| !p.is_finite()) {
            return Err(GradError::Frames(format!(
                "target frame {k}: particle {i} has a non-finite position"
            )));
        }
    }
    Ok(targets.iter().map(|t| t.step).collect())
}

/// One frame's term of L: `scale` (1/(F n)) times the summed squared distances of `x`
/// from `target`. Every loss of the fit (`objective::evaluate`, `starts::batch_losses`) sums it.
pub(crate) fn frame_loss(x: &[DVec3], target: &[DVec3], scale: f64) -> f64 {
    scale
        * x.iter()
            .zip(target)
            .map(|(x, t)| (*x - *t).length_squared())
            .sum::<f64>()
}

/// L(theta) and, when `with_gradient`, dL/dtheta by forward sensitivities, J^T r and
/// (when `with_jtj`) J^T J. The fit's entry point, which picks the mode, is
/// `objective::evaluate`.
pub(crate) fn evaluate_forward(
    set: &ParamSet,
    theta: &[f64],
    targets: &[Target],
    options: &GradOptions,
    with_gradient: bool,
    with_jtj: bool,
) -> Result<Evaluation, GradError> {
    let steps = check_targets(set, targets)?;
    let p = set.len();
    let n = set.base_system().len();
    let scale = 1.0 / (targets.len() * n) as f64;
    let mut loss = 0.0;
    let mut jtr = vec![0.0; if with_gradient { p } else { 0 }];
    let mut jtj = vec![0.0; if with_gradient && with_jtj { p * p } else { 0 }];
    let mut frames = Vec::with_capacity(targets.len());
    let stats = drive(
        set,
        theta,
        &steps,
        options,
        with_gradient,
        |k, state, tangents| {
            let target = &targets[k].positions;
            let resid: Vec<DVec3> = state.x.iter().zip(target).map(|(x, t)| *x - *t).collect();
            let frame_loss = frame_loss(&state.x, target, scale);
            loss += frame_loss;
            let mut g2 = 0.0;
            let mut t2 = 0.0;
            for (a, ta) in tangents.iter().enumerate() {
                // J_a^T r for this frame (both carry 1/sqrt(F n)).
                let dot: f64 = resid
                    .iter()
                    .zip(&ta.dx)
                    .map(|(r, d)| r.dot(*d))
                    .sum::<f64>()
                    * scale;
                jtr[a] += dot;
                g2 += (2.0 * dot) * (2.0 * dot);
                t2 += ta.dx.iter().map(|d| d.length_squared()).sum::<f64>();
                if !jtj.is_empty() {
                    for (b, tb) in tangents.iter().enumerate().skip(a) {
                        let v: f64 = ta
                            .dx
                            .iter()
                            .zip(&tb.dx)
                            .map(|(x, y)| x.dot(*y))
                            .sum::<f64>()
                            * scale;
                        jtj[a * p + b] += v;
                        if b != a {
                            jtj[b * p + a] += v;
                        }
                    }
                }
            }
            frames.push(FrameReport {
                step: state.step,
                time: state.t,
                loss: frame_loss,
                gradient_norm: Some(g2.sqrt()),
                tangent_norm: Some(t2.sqrt()),
            });
            Ok(())
        },
    )?;
    if !loss.is_finite() {
        return Err(GradError::NonFiniteLoss);
    }
    Ok(Evaluation {
        loss,
        penalty: 0.0,
        gradient: jtr.iter().map(|v| 2.0 * v).collect(),
        jtr,
        jtj,
        frames,
        stats,
    })
}
