//! The step program: the recordings a solver replays (a step, Verlet's prologue, the
//! energies, the residual, the diagnostics), each built once, linearly, by [`build`]
//! for every integrator and solver. Extra per-step kernels (the forward tangents of
//! `solver::tangent`) are recorded through [`StepHooks`] at named points of the step as
//! it is built, never spliced in afterwards.

use crate::config::{Config, Integrator};
use crate::gpu::error::GpuError;
use crate::gpu::host::buffers::Buf;
use crate::gpu::host::recorder::Recorder;
use crate::gpu::host::recording::Op;
use crate::gpu::kernels::field::ForceTime;
use crate::gpu::kernels::springs::SpringMode;
use crate::gpu::kernels::steps::{IntegrateMode, KickMode};
use crate::gpu::layout::{SLOT_ENERGY, SLOT_RESIDUAL};

/// Points of the step where hooks record extra kernels; each default records nothing.
pub(in crate::gpu) trait StepHooks {
    /// Local-global: after the field forces at x_t, before `lg_prepare` (x still x_t).
    fn lg_start(&mut self, _p: &mut Recorder, _ops: &mut Vec<Op>) -> Result<(), GpuError> {
        Ok(())
    }
    /// Local-global: before alternation `alternation`'s local step reads `iterate`.
    fn before_local(
        &mut self,
        _p: &mut Recorder,
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
        _p: &mut Recorder,
        _ops: &mut Vec<Op>,
        _solve: SolveEnd,
    ) -> Result<(), GpuError> {
        Ok(())
    }
    /// Explicit integrators: before each `explicit_step` kick, at the state it reads.
    fn before_kick(
        &mut self,
        _p: &mut Recorder,
        _ops: &mut Vec<Op>,
        _kick: Kick,
    ) -> Result<(), GpuError> {
        Ok(())
    }
}

/// No extra kernels: the plain forward step.
pub(in crate::gpu) struct NoHooks;
impl StepHooks for NoHooks {}

/// Where a forward solve ended.
#[derive(Clone, Copy, Debug)]
pub(in crate::gpu) struct SolveEnd {
    /// Index of the solve in the step (0 for IMEX) and their number.
    pub(in crate::gpu) alternation: u32,
    pub(in crate::gpu) alternations: u32,
    /// The buffer holding the solution (IMEX: v'; local-global: z^{a+1}).
    pub(in crate::gpu) solution: Buf,
}

/// An explicit kick: `fraction` of h; `second`: Verlet's second half kick, which reads
/// the forces at t + h before the clock advances.
#[derive(Clone, Copy, Debug)]
pub(in crate::gpu) struct Kick {
    pub(in crate::gpu) fraction: f64,
    pub(in crate::gpu) second: bool,
}

/// The recordings of one solver.
#[derive(Default)]
pub(in crate::gpu) struct Program {
    pub(in crate::gpu) step: Vec<Op>,
    /// Verlet: the field forces at (x_t, t) that start a step. A step ends with them at
    /// (x', t + h) in the force buffer (its a'), so they run only when that buffer is not
    /// current: before the first step and after a diagnostic rewrote it.
    pub(in crate::gpu) prologue: Vec<Op>,
    pub(in crate::gpu) energy: Vec<Op>,
    /// The forward solve's residual (implicit integrators; empty otherwise).
    pub(in crate::gpu) residual: Vec<Op>,
    /// Diagnostics: the spring blocks, and the field forces.
    pub(in crate::gpu) springs: Vec<Op>,
    pub(in crate::gpu) field: Vec<Op>,
}

/// Builds every recording of a solver for `config`, calling `hooks` at their points of
/// the step.
pub(in crate::gpu) fn build(
    p: &mut Recorder,
    config: &Config,
    hooks: &mut dyn StepHooks,
) -> Result<Program, GpuError> {
    let mut step = Vec::new();
    let mut prologue = Vec::new();
    match config.integrator {
        Integrator::Imex => {
            p.springs(&mut step, SpringMode::Implicit)?;
            p.field(&mut step, ForceTime::T, false)?;
            step.push(p.rhs()?);
            let v_new = p.solve(&mut step, Buf::V, Buf::SolveScratch)?;
            let end = SolveEnd {
                alternation: 0,
                alternations: 1,
                solution: v_new,
            };
            hooks.after_solve(p, &mut step, end)?;
            step.push(p.integrate(if v_new == Buf::V {
                IntegrateMode::Imex
            } else {
                IntegrateMode::ImexFromScratch
            })?);
        }
        Integrator::LocalGlobal => {
            p.field(&mut step, ForceTime::T, false)?;
            hooks.lg_start(p, &mut step)?;
            step.push(p.lg_prepare()?);
            let alternations = config.local_global_iterations;
            let mut cur = Buf::X;
            for alternation in 0..alternations {
                hooks.before_local(p, &mut step, alternation, cur)?;
                step.push(p.lg_rhs(cur)?);
                let other = if cur == Buf::X {
                    Buf::SolveScratch
                } else {
                    Buf::X
                };
                cur = p.solve(&mut step, cur, other)?;
                let end = SolveEnd {
                    alternation,
                    alternations,
                    solution: cur,
                };
                hooks.after_solve(p, &mut step, end)?;
            }
            step.push(p.integrate(if cur == Buf::X {
                IntegrateMode::LocalGlobal
            } else {
                IntegrateMode::LocalGlobalFromScratch
            })?);
        }
        Integrator::SymplecticEuler | Integrator::Verlet => {
            let verlet = config.integrator == Integrator::Verlet;
            p.springs(&mut step, SpringMode::Explicit)?;
            if verlet {
                // a(x_t, t) is the previous step's a' (the CPU reference reuses it too):
                // its field part runs as a prologue only when not current.
                p.field(&mut prologue, ForceTime::T, false)?;
            } else {
                p.field(&mut step, ForceTime::T, false)?;
            }
            let kick = Kick {
                fraction: if verlet { 0.5 } else { 1.0 },
                second: false,
            };
            hooks.before_kick(p, &mut step, kick)?;
            step.push(p.explicit_step(if verlet {
                KickMode::VerletFirst
            } else {
                KickMode::Euler
            })?);
            if verlet {
                // a' = f(x', v_half, t + h) / m
                p.springs(&mut step, SpringMode::Explicit)?;
                p.field(&mut step, ForceTime::TPlusH, false)?;
                let kick = Kick {
                    fraction: 0.5,
                    second: true,
                };
                hooks.before_kick(p, &mut step, kick)?;
                step.push(p.explicit_step(KickMode::VerletSecond)?);
            }
        }
    }

    let mut energy = Vec::new();
    // The Coulomb energy stays exact all-pairs, as in the CPU reference.
    p.field(&mut energy, ForceTime::T, true)?;
    energy.push(p.energy_reduce()?);
    energy.push(p.reduce(SLOT_ENERGY, 0)?);
    energy.push(p.reduce(SLOT_ENERGY + 1, 1)?);

    let mut springs = Vec::new();
    p.springs(&mut springs, SpringMode::Explicit)?;
    let mut field = Vec::new();
    p.field(&mut field, ForceTime::T, false)?;

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
