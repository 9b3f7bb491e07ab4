//! Gradients through the simulation (the paper's Section 3.2 and appendix 7.1) and
//! parameter estimation.
//!
//! # What is differentiated
//!
//! One time step is a map (x_t, v_t; theta) -> (x_{t+1}, v_{t+1}) built from the f64 CPU
//! reference's kernels ([`crate::cpu`]), for each integrator:
//! - imex: A(x_t, k) v' = b(x_t, v_t, theta), x' = x_t + h v' (docs/physics.md §4);
//! - local_global: a fixed number of alternations z <- P(k)^-1 (c + h^2 J(k) d(z)) from
//!   z = y (paper eq. 11), then x' = z, v' = (z - x_t)/h;
//! - symplectic_euler and verlet: their explicit updates.
//!
//! **The gradient computed here is the exact derivative of that discrete map when every
//! linear solve is exact** (A v' = b and P z = c + ... solved exactly), evaluated along the
//! trajectory the forward simulation computed. It is not the derivative of the ODE's
//! solution (time discretization is part of the model being fitted, as in the paper) and
//! not the derivative of the iterative solver's iterates: a Jacobi or Chebyshev solve that
//! stops at a tolerance is a piecewise map of theta (its iteration count jumps), whose
//! derivative is not useful. When the forward solve stops at relative residual tol, the
//! computed trajectory is the exact-solve one up to O(tol), and so is the gradient;
//! [`GradOptions::exact_forward`] runs the forward solves with CG to the tangent tolerance
//! instead (the validation tests do this, so finite differences of the computed trajectory
//! measure the same map). The CPU adjoint under [`AdjointSolve::Scene`] runs the same
//! adjoint equations with the scene's solver and iteration count instead of CG: an
//! approximation of this gradient, exact as that solve converges. The clamp max(0, 1 - L/l) in the IMEX blocks is differentiated on
//! the side it is evaluated on (its kink is a set of measure zero). DDEF (lattice grid) is
//! differentiated with each evaluation's discrete structure frozen
//! ([`crate::ddef::lattice_tangent`]; its transpose for the CPU adjoint,
//! [`crate::ddef::lattice_adjoint`]): its force jumps where a charge crosses a
//! tetrahedron face, so this too is the derivative almost everywhere.
//!
//! # How (forward sensitivities, hand-derived tangents)
//!
//! Tangents (dx/dtheta_p, dv/dtheta_p), one per parameter component, are propagated step
//! by step with the forward simulation (paper eqs. 12-13). For imex, differentiating
//! A v' = b gives A dv' = db - dA v' with the *same* matrix A as the forward step
//! ([`step`]): the tangent reuses the [`crate::cpu::BlockLaplacian`] that the forward step
//! assembled and the reference's CG solver, run to a tight tolerance
//! ([`TangentSolve`], relative residual 1e-12 by default). For local_global each alternation
//! is differentiated (local projection Jacobian L (I - m m^T)/|x_i - x_j| per spring, paper
//! eq. 40; the constant matrix P, whose derivative h^2 dL/dk enters the right-hand side).
//! The explicit integrators differentiate their force evaluations. The force JVPs ([`jvp`])
//! follow `crate::cpu::forces` term by term.
//!
//! Hand-derived tangents rather than forward-mode dual numbers: they reuse the matrix-free
//! operator and solvers exactly as a GPU implementation would (one extra right-hand side
//! and solve per parameter per step, same kernels), need no generic rewrite of the f64
//! reference, and keep the linear solve a linear solve (a dual-number solve would
//! differentiate the iterations of the iterative solver, which is the quantity we do not
//! want). Every JVP is checked against central differences of the reference function it
//! differentiates (unit tests here), and whole trajectories against central differences
//! of the simulation (`tests/gradients.rs`).
//!
//! [`GradBackend::Gpu`] propagates the same tangents on the GPU
//! ([`GpuTangents`], on the kernels of `gpu/solver/tangent.rs`) for every integrator, in f32: the implicit ones solve the
//! same right-hand sides with the forward step's own matrix, solver and fixed iteration
//! count; the explicit ones evaluate the same force JVPs before each kick.
//!
//! Forward mode costs one tangent per parameter component: ideal for a few global
//! parameters (charge scale, stiffness scale, an external charge), affordable for
//! per-particle or per-spring parameters on small meshes only.
//!
//! # Long horizons
//!
//! Tangents of chaotic or weakly damped runs grow with the horizon; [`FrameReport`] gives
//! the gradient norm per frame so the growth is visible, [`GradOptions::window`] truncates
//! each frame's tangent to its last N steps, and a non-finite state, tangent or loss is a
//! [`GradError`], never a silent NaN.

mod adjoint;
pub mod checkpoint;
mod continuation;
pub mod cost;
pub mod cotangent;
mod dense;
pub mod fit_job;
#[cfg(test)]
pub(crate) mod fixtures;
mod gpu_adjoint;
mod gpu_tangent;
pub mod jvp;
pub mod lbfgs;
pub mod loss;
pub mod objective;
pub mod optim;
mod outcome;
mod pair_cotangent;
mod pair_tangent;
pub mod params;
mod reverse;
pub mod sensitivity;
pub mod smooth;
pub mod starts;
pub mod step;
pub mod target;
pub mod trajectory;
pub mod vjp;

pub use checkpoint::{CheckpointOptions, CheckpointStats, Checkpointing};
pub use continuation::fit;
pub use cotangent::Cotangent;
pub use gpu_tangent::GpuTangents;
pub use loss::{Evaluation, FrameReport, Target};
pub use objective::evaluate;
pub use optim::{FitHistoryEntry, FitOptions, FitOutcome, Optimizer, StopReason};
pub use params::{Direction, Param, ParamSet};
pub use sensitivity::{GradBackend, GradMode, GradOptions, GradStats, Tangent};
pub use step::{AdjointSolve, TangentSolve};
pub use target::{TargetError, TargetFrame};
pub use trajectory::{simulate, simulate_with_tangents, TangentFrame, TangentRun};

/// `GradError::Interrupted` once a stop request has come: the forward, tangent and adjoint
/// loops check it each step (CPU) or each chunk of steps (GPU, `interrupt::Chunks`).
pub(crate) fn stop_check() -> Result<(), GradError> {
    match crate::interrupt::requested() {
        true => Err(GradError::Interrupted),
        false => Ok(()),
    }
}
/// Errors of gradient computation and fitting. Each names the step, parameter or size.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GradError {
    #[error("parameters: {0}")]
    Param(String),
    #[error("frames: {0}")]
    Frames(String),
    #[error("target frame {frame} has {got} particles, the scene has {expected}")]
    ParticleCount {
        frame: usize,
        got: usize,
        expected: usize,
    },
    #[error(transparent)]
    Model(#[from] crate::model::ModelError),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error("the simulation became non-finite at step {step} (t = {time} s)")]
    NonFiniteState { step: u64, time: f64 },
    #[error(
        "the tangent of {param} became non-finite at step {step}; \
         try a shorter horizon or a truncation window"
    )]
    NonFiniteTangent { step: u64, param: String },
    #[error("the loss is not finite")]
    NonFiniteLoss,
    #[error(
        "the adjoint became non-finite reversing step {step}; \
         try a shorter horizon or softening"
    )]
    NonFiniteAdjoint { step: u64 },
    #[error(
        "the gradient is not finite (the GPU adjoint checks it once, at the end: the run or \
         its adjoint diverged; try a shorter horizon or softening)"
    )]
    NonFiniteGradient,
    /// A request the chosen gradient method does not differentiate.
    #[error("{what} cannot be differentiated in reverse mode: {reason}")]
    Unsupported {
        what: &'static str,
        reason: &'static str,
    },
    #[error(transparent)]
    Target(#[from] TargetError),
    /// A DDEF evaluation of the forward run failed.
    #[error(transparent)]
    Ddef(#[from] crate::ddef::DdefError),
    /// The GPU backend ([`GradBackend::Gpu`]) failed or does not support the request.
    #[error(transparent)]
    Gpu(#[from] crate::gpu::GpuError),
    /// The horizon (steps simulated per evaluation) is past what can be run or planned.
    #[error("a horizon of {steps} steps: {reason}")]
    Horizon { steps: u64, reason: String },
    /// The gradient is exactly zero at the fit's start in every component
    /// ([`StopReason::NoGradient`]): the fit cannot move from there.
    #[error(
        "the gradient of the loss is exactly zero at the start for {params}: the loss does \
         not depend on them at these values (e.g. a charge of 0, where the loss is even in \
         it), so the fit cannot tell which way to go and stopped there, not converged. \
         Start from a nonzero --init"
    )]
    NoGradient { params: String },
    /// No start point of `--starts` has a loss ([`starts::no_start`]): `failures` names
    /// the first starts' errors by index; `first` is the first start's error, whose kind
    /// (a bad value, a failed run) sets `msc fit`'s exit status.
    #[error("none of the {count} start points has a loss: {failures}")]
    NoStart {
        count: usize,
        failures: String,
        first: Box<GradError>,
    },
    /// A stop request (SIGINT/SIGTERM) came before this was done (a start of
    /// [`starts::batch_losses`] not yet evaluated, an evaluation's CPU run under way).
    #[error("stopped by a stop request (Ctrl-C or SIGTERM) before it was done")]
    Interrupted,
}
