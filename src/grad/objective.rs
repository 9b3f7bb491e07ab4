//! The fit's objective L(theta) and its gradient, by the mode the options pick: forward
//! sensitivities (`loss`), or one reverse sweep on the CPU (`adjoint`) or the GPU
//! (`gpu_adjoint`). Every optimizer step and the cost benchmark evaluate through here.

use super::loss::{evaluate_forward, Evaluation, Target};
use super::params::ParamSet;
use super::sensitivity::{GradBackend, GradMode, GradOptions};
use super::GradError;

/// L(theta) and, when `with_gradient`, dL/dtheta, J^T r and (when `with_jtj`) J^T J.
/// With [`GradMode::Adjoint`] the gradient comes from one reverse sweep and J^T J is not
/// available (a [`GradError::Unsupported`]).
pub fn evaluate(
    set: &ParamSet,
    theta: &[f64],
    targets: &[Target],
    options: &GradOptions,
    with_gradient: bool,
    with_jtj: bool,
) -> Result<Evaluation, GradError> {
    if !(with_gradient && options.mode == GradMode::Adjoint) {
        return evaluate_forward(set, theta, targets, options, with_gradient, with_jtj);
    }
    if with_jtj {
        return Err(GradError::Unsupported {
            what: "the Gauss-Newton matrix J^T J",
            reason: "reverse mode gives the gradient only; use forward gradients for \
                     Levenberg-Marquardt",
        });
    }
    match options.backend {
        GradBackend::Cpu => super::adjoint::evaluate(set, theta, targets, options),
        GradBackend::Gpu { allow_software } => {
            super::gpu_adjoint::evaluate(set, theta, targets, options, allow_software)
        }
    }
}
