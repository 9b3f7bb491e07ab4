//! What a reverse sweep on the GPU accumulates and how its solves run
//! ([`AdjointSetup`]), and what every integrator's reversed step shares when it is
//! recorded (`adjoint` for IMEX, `adjoint_steps` for the others): the field transpose's
//! active particles, the cotangent bits, the adjoint solver.

use crate::config::{Config, SolverMethod};
use crate::gpu::error::GpuError;
use crate::gpu::host::recorder::{Recorder, SolveSpec};
use crate::gpu::host::recording::Op;
use crate::gpu::kernels::adjoint::AdjointBit;
use crate::model::System;

/// What the reverse sweep accumulates and how its solves run.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AdjointSetup {
    pub stiffnesses: bool,
    pub masses: bool,
    pub charges: bool,
    pub externals: bool,
    /// Target frames (their loss shares are kept apart).
    pub frames: usize,
    /// The loss's 1 / (F n).
    pub scale: f64,
    /// Run the adjoint solves as CG with this many iterations instead of the scene's
    /// solver (None: the scene's method and iteration count).
    pub cg_iterations: Option<u32>,
}

/// The active particles of the field's transpose, when it runs (some charge, and a
/// Coulomb sum, an external charge or a field to feel).
pub(super) fn field_transpose(p: &Recorder, system: &System, config: &Config) -> Option<u32> {
    let active = system.charges().iter().filter(|q| **q != 0.0).count() as u32;
    let field = active > 0
        && (p.nc > 0 || !config.external_charges.is_empty() || config.external_field.is_some());
    field.then_some(active)
}

/// The field's transpose for mu (direction 0's dx in `TanState`) into `RhsDiagonal`, at
/// t or (`later`) t + h, over its `active` particles: `tangent_coulomb` transposed (its
/// all-pairs term unless the scene runs DDEF), then with DDEF the DDEF transpose at the
/// current state (`Recorder::ddef_field_vjp`; with `charges`, its charge cotangents,
/// which `adjoint_charges` then leaves alone: see [`all_pairs_charges`]).
pub(super) fn record_field_transpose(
    p: &mut Recorder,
    ops: &mut Vec<Op>,
    active: u32,
    later: bool,
    charges: bool,
) -> Result<(), GpuError> {
    let ddef = p.ddef_layout.is_some();
    p.tangent_field_mode(ops, 0, active, p.nc > 0 && !ddef, later, true)?;
    if ddef {
        p.ddef_field_vjp(ops, charges)?;
    }
    Ok(())
}

/// Whether `adjoint_charges` (the all-pairs charge cotangents) runs: charges asked for
/// and no DDEF (whose field transpose adds its own).
pub(super) fn all_pairs_charges(p: &Recorder, setup: &AdjointSetup) -> bool {
    setup.charges && p.ddef_layout.is_none()
}

/// The `AdjointBit`s of the cotangents `setup` asks for, and of the field's transpose.
pub(super) fn cotangent_bits(setup: &AdjointSetup, field: bool) -> u32 {
    let bit = |on: bool, b: AdjointBit| if on { b.bits() } else { 0 };
    bit(setup.stiffnesses, AdjointBit::Stiffness)
        | bit(setup.masses, AdjointBit::Masses)
        | bit(setup.charges, AdjointBit::Charges)
        | bit(setup.externals, AdjointBit::Externals)
        | bit(field, AdjointBit::Field)
}

/// Runs `record` with the adjoint solves as CG when `setup` asks for it.
pub(super) fn with_adjoint_solver<T>(
    p: &mut Recorder,
    setup: &AdjointSetup,
    record: impl FnOnce(&mut Recorder) -> Result<T, GpuError>,
) -> Result<T, GpuError> {
    let saved = setup.cg_iterations.map(|iterations| {
        std::mem::replace(
            &mut p.solve,
            SolveSpec {
                method: SolverMethod::Cg,
                iterations,
                weights: Vec::new(),
            },
        )
    });
    let out = record(p);
    if let Some(spec) = saved {
        p.solve = spec;
    }
    out
}
