//! The reversed explicit and local-global steps on the GPU, recorded once beside the
//! forward step as `adjoint` records IMEX's, term by term after the CPU adjoint
//! (`grad::reverse`): what `GpuAdjoint::reverse` replays from the step's start (x_t, v_t, t)
//! with the step's end velocity in `AdjV1`, and what it replays after restoring that start
//! again (the phase that needs x_t once the step has been recomputed past it).
//!
//! Symplectic Euler (docs/physics.md §6), v' = v + h M^-1 F(x, v, t), x' = x + h v': the
//! drift and the kick reversed at (x_t, v_t, t) (`adjoint_kicks`), then the parameter
//! cotangents (the adjoint family's `adjoint_params`, whose mass cotangent with v' in
//! `AdjV1` is the kick's, and `adjoint_charges`). Nothing to restart.
//!
//! Verlet: the step's first half is recomputed with the forward's own kernels (springs,
//! field at t, the first kick and drift: x', v_half bit for bit), the second kick is
//! reversed there at t + h; then, the start restored (v_half in `AdjV1`), the drift and
//! the first kick.
//!
//! Local-global (docs/physics.md §5; the map the GPU tangents differentiate, per
//! alternation P z' = c + h^2 J(k) d(z) with P = M + h^2 L constant): the step is recomputed
//! with the forward's kernels, each iterate kept in `AdjIterates`; the end is reversed
//! (`adjoint_lg_end`), then per alternation in reverse the forward's own solve on P (the
//! scene's method and count, or CG) for mu, the transposed local step and its gather
//! (the next right-hand side, lc += h mu); after the restart at x_t, the field's transpose
//! and the parameter cotangents for lc, and `adjoint_lg_start`.

use super::adjoint_setup::{
    all_pairs_charges, cotangent_bits, field_transpose, record_field_transpose,
    with_adjoint_solver, AdjointSetup,
};
use crate::config::Config;
use crate::gpu::error::GpuError;
use crate::gpu::host::buffers::Buf;
use crate::gpu::host::recorder::Recorder;
use crate::gpu::host::recording::Op;
use crate::gpu::kernels::adjoint::AdjointBit;
use crate::gpu::kernels::adjoint_kicks::KickAdjoint;
use crate::gpu::kernels::field::ForceTime;
use crate::gpu::kernels::springs::SpringMode;
use crate::gpu::kernels::steps::KickMode;
use crate::model::System;

/// A reversed step: replayed from its start, and after its start is restored again.
type Phases = (Vec<Op>, Vec<Op>);

/// The parameter cotangents for the force cotangent h mu in `TanState` (at the time
/// `bits` say).
fn params(
    p: &mut Recorder,
    ops: &mut Vec<Op>,
    setup: &AdjointSetup,
    bits: u32,
) -> Result<(), GpuError> {
    if setup.masses || setup.charges || setup.externals {
        ops.push(p.adjoint_params(Buf::TanState, bits)?);
    }
    if all_pairs_charges(p, setup) {
        p.adjoint_charges(ops, Buf::TanState)?;
    }
    Ok(())
}

/// One explicit kick of `fraction` h reversed (with `drift`, the drift after it first), at
/// the state in (x, v), at t or (`later`) t + h.
fn kick(
    p: &mut Recorder,
    ops: &mut Vec<Op>,
    setup: &AdjointSetup,
    active: Option<u32>,
    drift: bool,
    fraction: f32,
    later: bool,
) -> Result<(), GpuError> {
    let mode = if drift {
        KickAdjoint::Drift
    } else {
        KickAdjoint::Only
    };
    ops.push(p.adjoint_kick(mode, fraction)?);
    let bit = |on: bool, b: AdjointBit| if on { b.bits() } else { 0 };
    let bits = cotangent_bits(setup, active.is_some())
        | bit(fraction != 1.0, AdjointBit::HalfKick)
        | bit(later, AdjointBit::Later);
    if let Some(active) = active {
        record_field_transpose(p, ops, active, later, setup.charges)?;
    }
    p.adjoint_kick_springs(ops, bits)?;
    ops.push(p.adjoint_kick_gather(bits)?);
    params(p, ops, setup, bits)
}

/// The reversed symplectic Euler or Verlet step.
pub(super) fn explicit(
    p: &mut Recorder,
    system: &System,
    config: &Config,
    setup: &AdjointSetup,
) -> Result<Phases, GpuError> {
    let active = field_transpose(p, system, config);
    let mut reverse = Vec::new();
    if config.integrator == crate::config::Integrator::SymplecticEuler {
        kick(p, &mut reverse, setup, active, true, 1.0, false)?;
        return Ok((reverse, Vec::new()));
    }
    // Verlet: x' and v_half recomputed as the forward's first half made them.
    p.springs(&mut reverse, SpringMode::Explicit)?;
    p.field(&mut reverse, ForceTime::T, false)?;
    reverse.push(p.explicit_step(KickMode::VerletFirst)?);
    kick(p, &mut reverse, setup, active, false, 0.5, true)?;
    let mut restart = Vec::new();
    kick(p, &mut restart, setup, active, true, 0.5, false)?;
    Ok((reverse, restart))
}

/// The reversed local-global step.
pub(super) fn local_global(
    p: &mut Recorder,
    system: &System,
    config: &Config,
    setup: &AdjointSetup,
) -> Result<Phases, GpuError> {
    let alternations = config.local_global_iterations;
    let mut reverse = Vec::new();
    // The iterates, recomputed as the forward's step made them.
    p.field(&mut reverse, ForceTime::T, false)?;
    reverse.push(p.lg_prepare()?);
    let mut cur = Buf::X;
    for a in 0..alternations {
        reverse.push(p.copy_into(cur, Buf::AdjIterates, a)?);
        reverse.push(p.lg_rhs(cur)?);
        let other = if cur == Buf::X {
            Buf::SolveScratch
        } else {
            Buf::X
        };
        cur = p.solve(&mut reverse, cur, other)?;
    }
    reverse.push(p.copy_into(cur, Buf::AdjIterates, alternations)?);
    reverse.push(p.adjoint_lg_end()?);
    let active = field_transpose(p, system, config);
    let bits = cotangent_bits(setup, active.is_some());
    with_adjoint_solver(p, setup, |p| {
        // Each solve starts from the last one's solution.
        let (mut a, mut s) = (Buf::TanU, Buf::TanS);
        for alternation in (0..alternations).rev() {
            let mu = p.solve(&mut reverse, a, s)?;
            if mu != a {
                std::mem::swap(&mut a, &mut s);
            }
            p.adjoint_lg_springs(&mut reverse, alternation, mu, bits)?;
            reverse.push(p.adjoint_lg_gather(alternation, mu, bits)?);
        }
        Ok(())
    })?;
    // At x_t again: lc's field transpose and parameter cotangents (masses are the
    // gather's), then the step's start.
    let mut restart = Vec::new();
    let no_masses = AdjointSetup {
        masses: false,
        ..*setup
    };
    if let Some(active) = active {
        record_field_transpose(p, &mut restart, active, false, setup.charges)?;
    }
    params(
        p,
        &mut restart,
        &no_masses,
        bits & !AdjointBit::Masses.bits(),
    )?;
    restart.push(p.adjoint_lg_start(bits)?);
    Ok((reverse, restart))
}
