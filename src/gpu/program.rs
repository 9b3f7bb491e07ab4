//! The step program: the recordings a solver replays (a step, Verlet's prologue, the
//! energies, the residual, the diagnostics), each built once, linearly, by [`build`]
//! for every integrator and solver. Extra per-step kernels (the forward tangents of
//! `gpu::tangent`) are recorded through [`StepHooks`] at named points of the step as it
//! is built, never spliced in afterwards.

use super::buffers::Buf;
use super::launch::Planner;
use super::layout::{SLOT_ENERGY, SLOT_RESIDUAL};
use super::recording::Op;
use super::GpuError;
use crate::config::{Config, Integrator};

/// Points of the step where hooks record extra kernels; each default records nothing.
pub(super) trait StepHooks {
    /// Local-global: after the field forces at x_t, before `lg_prepare` (x still x_t).
    fn lg_start(&mut self, _p: &mut Planner, _ops: &mut Vec<Op>) -> Result<(), GpuError> {
        Ok(())
    }
    /// Local-global: before alternation `alternation`'s local step reads `iterate`.
    fn before_local(
        &mut self,
        _p: &mut Planner,
        _ops: &mut Vec<Op>,
        _alternation: u32,
        _iterate: Buf,
    ) -> Result<(), GpuError> {
        Ok(())
    }
    /// Implicit integrators: after a forward solve (IMEX: its one solve, then
    /// `integrate`; local-global: each alternation's).
    fn after_solve(
        &mut self,
        _p: &mut Planner,
        _ops: &mut Vec<Op>,
        _solve: SolveEnd,
    ) -> Result<(), GpuError> {
        Ok(())
    }
    /// Explicit integrators: before each `explicit_step` kick, at the state it reads.
    fn before_kick(
        &mut self,
        _p: &mut Planner,
        _ops: &mut Vec<Op>,
        _kick: Kick,
    ) -> Result<(), GpuError> {
        Ok(())
    }
}

/// No extra kernels: the plain forward step.
pub(super) struct NoHooks;
impl StepHooks for NoHooks {}

/// Where a forward solve ended.
#[derive(Clone, Copy, Debug)]
pub(super) struct SolveEnd {
    /// Index of the solve in the step (0 for IMEX) and their number.
    pub(super) alternation: u32,
    pub(super) alternations: u32,
    /// The buffer holding the solution (IMEX: v'; local-global: z^{a+1}).
    pub(super) solution: Buf,
}

/// An explicit kick: `fraction` of h; `second`: Verlet's second half kick, which reads
/// the forces at t + h before the clock advances.
#[derive(Clone, Copy, Debug)]
pub(super) struct Kick {
    pub(super) fraction: f64,
    pub(super) second: bool,
}

/// The recordings of one solver.
#[derive(Default)]
pub(super) struct Program {
    pub(super) step: Vec<Op>,
    /// Verlet: the field forces at (x_t, t) that start a step. A step ends with them at
    /// (x', t + h) in the force buffer (its a'), so they run only when that buffer is not
    /// current: before the first step and after a diagnostic rewrote it.
    pub(super) prologue: Vec<Op>,
    pub(super) energy: Vec<Op>,
    /// The forward solve's residual (implicit integrators; empty otherwise).
    pub(super) residual: Vec<Op>,
    /// Diagnostics: the spring blocks, and the field forces.
    pub(super) springs: Vec<Op>,
    pub(super) field: Vec<Op>,
}

/// Builds every recording of a solver for `config`, calling `hooks` at their points of
/// the step.
pub(super) fn build(
    p: &mut Planner,
    config: &Config,
    hooks: &mut dyn StepHooks,
) -> Result<Program, GpuError> {
    let mut step = Vec::new();
    let mut prologue = Vec::new();
    match config.integrator {
        Integrator::Imex => {
            p.springs(&mut step, 0)?;
            p.field(&mut step, 0, false)?;
            step.push(p.rhs()?);
            let v_new = p.solve(&mut step, Buf::V, Buf::S)?;
            let end = SolveEnd {
                alternation: 0,
                alternations: 1,
                solution: v_new,
            };
            hooks.after_solve(p, &mut step, end)?;
            step.push(p.integrate(if v_new == Buf::V { 0 } else { 1 })?);
        }
        Integrator::LocalGlobal => {
            p.field(&mut step, 0, false)?;
            hooks.lg_start(p, &mut step)?;
            step.push(p.lg_prepare()?);
            let alternations = config.local_global_iterations;
            let mut cur = Buf::X;
            for alternation in 0..alternations {
                hooks.before_local(p, &mut step, alternation, cur)?;
                step.push(p.lg_rhs(cur)?);
                let other = if cur == Buf::X { Buf::S } else { Buf::X };
                cur = p.solve(&mut step, cur, other)?;
                let end = SolveEnd {
                    alternation,
                    alternations,
                    solution: cur,
                };
                hooks.after_solve(p, &mut step, end)?;
            }
            step.push(p.integrate(if cur == Buf::X { 2 } else { 3 })?);
        }
        Integrator::SymplecticEuler | Integrator::Verlet => {
            let verlet = config.integrator == Integrator::Verlet;
            p.springs(&mut step, 1)?;
            if verlet {
                // a(x_t, t) is the previous step's a' (the CPU reference reuses it too):
                // its field part runs as a prologue only when not current.
                p.field(&mut prologue, 0, false)?;
            } else {
                p.field(&mut step, 0, false)?;
            }
            let kick = Kick {
                fraction: if verlet { 0.5 } else { 1.0 },
                second: false,
            };
            hooks.before_kick(p, &mut step, kick)?;
            step.push(p.explicit_step(u32::from(verlet))?);
            if verlet {
                // a' = f(x', v_half, t + h) / m
                p.springs(&mut step, 1)?;
                p.field(&mut step, 1, false)?;
                let kick = Kick {
                    fraction: 0.5,
                    second: true,
                };
                hooks.before_kick(p, &mut step, kick)?;
                step.push(p.explicit_step(2)?);
            }
        }
    }

    let mut energy = Vec::new();
    // The Coulomb energy stays exact all-pairs, as in the CPU reference.
    p.field(&mut energy, 0, true)?;
    energy.push(p.energy_reduce()?);
    energy.push(p.reduce(SLOT_ENERGY, 0)?);
    energy.push(p.reduce(SLOT_ENERGY + 1, 1)?);

    let mut springs = Vec::new();
    p.springs(&mut springs, 1)?;
    let mut field = Vec::new();
    p.field(&mut field, 0, false)?;

    let residual = if config.integrator.is_implicit() {
        let unknown = if config.integrator == Integrator::Imex {
            Buf::V
        } else {
            Buf::X
        };
        vec![p.residual(unknown)?, p.reduce(SLOT_RESIDUAL, 0)?]
    } else {
        Vec::new()
    };
    Ok(Program {
        step,
        prologue,
        energy,
        residual,
        springs,
        field,
    })
}
