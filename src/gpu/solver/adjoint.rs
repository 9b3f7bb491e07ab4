//! The reversed step on the GPU, recorded once beside the forward step: what a sweep
//! accumulates ([`AdjointSetup`]), the checks, buffer sizes and banks it adds to a
//! solver, and its recording ([`AdjointProgram`]). It is run by `adjoint_run`'s
//! `GpuAdjoint`.
//!
//! The explicit integrators' and local-global's reversed steps are `adjoint_steps`'.
//!
//! Reversing step t replays (IMEX, `grad::reverse::reverse_imex` term by term):
//! - `spring_assemble` and `rhs` at x_t: the blocks W_k and the inverse diagonal of A;
//! - `adjoint_rhs`: g = lv + h lx; the forward's own solve (same method, same fixed
//!   iteration count, same W_k, or CG when asked) into mu;
//! - `tangent_coulomb` in its transposed mode for one zero direction whose dx is mu: the
//!   field's transposed Jacobian on the charged rows;
//! - `adjoint_springs`, `adjoint_gather`: lx, lv of x_t, v_t and the stiffness cotangents;
//!   `adjoint_params`, `adjoint_charges`: the other parameter cotangents.

pub use super::adjoint_setup::AdjointSetup;
use super::adjoint_setup::{
    all_pairs_charges, cotangent_bits, field_transpose, record_field_transpose, with_adjoint_solver,
};
use super::adjoint_steps;
use super::tangent::{TangentDirection, TangentHooks};
use crate::config::{Config, Integrator, SolverMethod};
use crate::gpu::error::GpuError;
use crate::gpu::host::buffers::{Buf, Buffers, Shape};
use crate::gpu::host::range::F32_MIN_NORMAL;
use crate::gpu::host::recorder::Recorder;
use crate::gpu::host::recording::Op;
use crate::gpu::kernels::springs::SpringMode;
use crate::model::{System, F32_MAX};

/// The reversed step and the seeds, recorded once.
pub(in crate::gpu) struct AdjointProgram {
    pub(super) reverse: Vec<Op>,
    /// Replayed after `reverse` once the step's start is restored again (its end velocity
    /// kept in `AdjV1`); empty for IMEX (see `adjoint_steps`).
    pub(super) restart: Vec<Op>,
    /// Per target frame, its seed.
    pub(super) seeds: Vec<Op>,
    pub(super) setup: AdjointSetup,
    pub(super) externals: usize,
    pub(super) n_wg: u32,
}

/// Refuses what the GPU adjoint does not reverse (before a device is opened).
pub(in crate::gpu) fn check(_config: &Config, setup: &AdjointSetup) -> Result<(), GpuError> {
    if setup.frames == 0 {
        return Err(GpuError::Unsupported(
            "the adjoint needs a target frame".into(),
        ));
    }
    if setup.cg_iterations == Some(0) {
        return Err(GpuError::Unsupported(
            "the adjoint's CG needs at least one iteration".into(),
        ));
    }
    // Every cotangent is scaled by it: 0 (the default), a subnormal one (flushed to 0 in
    // f32) or a non-finite one would give a zero or NaN gradient without an error.
    let scale = setup.scale;
    if !(scale > 0.0 && (F32_MIN_NORMAL..=F32_MAX).contains(&scale)) {
        return Err(GpuError::Unsupported(format!(
            "the adjoint's loss scale (1 / (F n)) must be positive and a normal f32, got {}",
            crate::display::num(scale)
        )));
    }
    Ok(())
}

/// The buffer shape with the adjoint's buffers (one zero tangent direction holds mu).
pub(in crate::gpu) fn shape(shape: &mut Shape, config: &Config, setup: &AdjointSetup, n_wg: u32) {
    shape.directions = 1;
    shape.externals = config.external_charges.len() as u64;
    shape.adjoint_frames = setup.frames as u64;
    shape.n_wg = u64::from(n_wg);
    if config.integrator == Integrator::LocalGlobal {
        shape.lg_iterates = u64::from(config.local_global_iterations) + 1;
    }
    if setup.cg_iterations.is_some() {
        shape.cg = true;
    }
}

/// Creates the zero direction's banks (its dx slot is mu).
pub(in crate::gpu) fn banks(
    device: &wgpu::Device,
    buffers: &mut Buffers,
    system: &System,
    config: &Config,
) -> Result<(), GpuError> {
    TangentHooks::new(
        device,
        buffers,
        system,
        config,
        &[TangentDirection::default()],
    )?;
    Ok(())
}

/// Records the reversed step and one seed per target frame.
pub(in crate::gpu) fn record(
    p: &mut Recorder,
    system: &System,
    config: &Config,
    setup: &AdjointSetup,
    n_wg: u32,
) -> Result<AdjointProgram, GpuError> {
    let (reverse, restart) = match config.integrator {
        Integrator::Imex => (imex(p, system, config, setup)?, Vec::new()),
        Integrator::LocalGlobal => adjoint_steps::local_global(p, system, config, setup)?,
        Integrator::SymplecticEuler | Integrator::Verlet => {
            adjoint_steps::explicit(p, system, config, setup)?
        }
    };
    let weight = (2.0 * setup.scale) as f32;
    let seeds = (0..setup.frames as u32)
        .map(|f| p.adjoint_seed(f, weight))
        .collect::<Result<_, _>>()?;
    Ok(AdjointProgram {
        reverse,
        restart,
        seeds,
        setup: *setup,
        externals: config.external_charges.len(),
        n_wg,
    })
}

/// The reversed IMEX step.
fn imex(
    p: &mut Recorder,
    system: &System,
    config: &Config,
    setup: &AdjointSetup,
) -> Result<Vec<Op>, GpuError> {
    let mut reverse = Vec::new();
    p.springs(&mut reverse, SpringMode::Implicit)?;
    reverse.push(p.rhs()?);
    reverse.push(p.adjoint_rhs()?);
    let mu = with_adjoint_solver(p, setup, |p| {
        // mu must end in TanState (the field kernel's dx): a sweep count of odd parity
        // starts from its partner.
        let odd = p.solve.method != SolverMethod::Cg && p.solve.iterations % 2 == 1;
        let (a, s) = if odd {
            (Buf::TanS, Buf::TanState)
        } else {
            (Buf::TanState, Buf::TanS)
        };
        p.solve(&mut reverse, a, s)
    })?;
    debug_assert_eq!(mu, Buf::TanState);
    let field = field_transpose(p, system, config);
    if let Some(active) = field {
        record_field_transpose(p, &mut reverse, active, false, setup.charges)?;
    }
    let bits = cotangent_bits(setup, field.is_some());
    p.adjoint_springs(&mut reverse, mu, bits)?;
    reverse.push(p.adjoint_gather(mu, bits)?);
    if setup.masses || setup.charges || setup.externals {
        reverse.push(p.adjoint_params(mu, bits)?);
    }
    if all_pairs_charges(p, setup) {
        p.adjoint_charges(&mut reverse, mu)?;
    }
    Ok(reverse)
}
