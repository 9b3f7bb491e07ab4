//! Assembles a solver's parts from a system and configuration already checked, in order:
//! the DDEF plan, limit checks, the buffers (the tangent banks and the DDEF buffers too,
//! when asked for), the step program (built once, the tangent hooks called as it goes) and the sealed dispatch
//! records.

use super::adjoint::{self, AdjointProgram, AdjointSetup};
use super::ddef::{SolverDdef, WorldPlan};
use super::program::{self, NoHooks, Program};
use super::tangent::{TangentDirection, TangentHooks};
use crate::config::Config;
use crate::gpu::device::scoped;
use crate::gpu::device::submit::Submitter;
use crate::gpu::error::GpuError;
use crate::gpu::host::buffers::{Buf, Buffers, Part, Shape};
use crate::gpu::host::engine::Engine;
use crate::gpu::host::limits::{check_cpu_loop_budget, check_limits, grid};
use crate::gpu::host::params::{self, TimeStep};
use crate::gpu::host::recorder::Recorder;
use crate::gpu::host::recording::Op;
use crate::gpu::kernels::field::ForceTime;
pub(in crate::gpu) use crate::gpu::shader::is_cpu;
use crate::gpu::shader::{Specialization, Tuning};
use crate::model::System;

/// The tangents a solver's step carries.
pub(in crate::gpu) struct Tangents {
    pub(in crate::gpu) directions: usize,
    /// The relative residual of the last direction's tangent solve (empty for the
    /// explicit integrators, whose tangents solve nothing).
    pub(in crate::gpu) residual: Vec<Op>,
    /// With DDEF: the field at the current state, then the DDEF forces' transpose for
    /// the cotangent in direction 0's dx bank (`GpuSolver::ddef_forces_vjp`), and their
    /// tangent along direction 0 into `RhsDiagonal` (`GpuSolver::ddef_forces_jvp`).
    pub(in crate::gpu) ddef_vjp: Vec<Op>,
    pub(in crate::gpu) ddef_jvp: Vec<Op>,
}

/// Everything a solver holds on its device but the device itself.
pub(in crate::gpu) struct Parts {
    pub(in crate::gpu) dt: TimeStep,
    pub(in crate::gpu) buffers: Buffers,
    pub(in crate::gpu) engine: Engine,
    pub(in crate::gpu) program: Program,
    pub(in crate::gpu) ddef: Option<SolverDdef>,
    pub(in crate::gpu) tangents: Option<Tangents>,
    pub(in crate::gpu) adjoint: Option<AdjointProgram>,
}

/// Builds the parts of a solver for `system` under `config` (both checked by the caller:
/// `GpuSolver::check`) on `host`'s device, with one tangent per direction when
/// `directions` is given, or with the adjoint's buffers and reversed step for `adjoint`;
/// `tuning`: the caller's kernel shapes ([`Tuning`]).
pub(in crate::gpu) fn assemble(
    host: &Submitter,
    system: &System,
    config: &Config,
    directions: Option<&[TangentDirection]>,
    adjoint: Option<&AdjointSetup>,
    tuning: Tuning,
) -> Result<Parts, GpuError> {
    let device = &host.device;
    let limits = device.limits();
    let mut shape = Shape::of(system, config);
    if let Some(d) = directions {
        shape.directions = d.len() as u64;
        shape.externals = config.external_charges.len() as u64;
    }
    let nc = system.charged_count() as u32;
    check_cpu_loop_budget(is_cpu(device), config, u64::from(nc))?;
    let ddef = WorldPlan::of(system, config)?
        .filter(|_| nc > 0)
        .map(|p| SolverDdef::new(vec![p], &[nc], &[(0, nc)], is_cpu(device)));
    let tables = ddef.as_ref().map(|d| d.layout.tables()).unwrap_or_default();
    if let Some(d) = &ddef {
        shape.ddef = d.sizes(tables.len());
    }
    let wg = grid(
        system.len() as u32,
        limits.max_compute_workgroups_per_dimension,
    );
    let n_wg = wg[0] * wg[1];
    if let Some(a) = adjoint {
        adjoint::shape(&mut shape, config, a, n_wg);
    }
    check_limits(&limits, &shape)?;
    let dt = TimeStep::new(config);
    scoped(device, || {
        let mut buffers = Buffers::one_system(device, system, config, dt, shape, n_wg)?;
        let mut hooks = match directions {
            Some(d) => Some(TangentHooks::new(device, &mut buffers, system, config, d)?),
            None => None,
        };
        if adjoint.is_some() {
            adjoint::banks(device, &mut buffers, system, config)?;
            for b in Buf::ALL.iter().copied() {
                if b.spec(&shape).part == Part::Adjoint {
                    buffers.put(device, b, &[]);
                }
            }
        }
        if let Some(d) = &ddef {
            d.create_buffers(device, &mut buffers, &tables);
        }
        let load = ddef.as_ref().map(SolverDdef::load).unwrap_or_default();
        let spec = Specialization {
            tuning,
            ..params::specialization(config, load)
        };
        let mut engine = Engine::new(device, spec);
        let mut recorder = Recorder::new(device, &mut engine, &buffers, system, config, dt);
        recorder.ddef_layout = ddef.as_ref().map(|d| d.layout.clone());
        let (program, tangents) = match hooks.as_mut() {
            Some(h) => {
                let program = program::build(&mut recorder, config, h)?;
                let (mut ddef_vjp, mut ddef_jvp) = (Vec::new(), Vec::new());
                if ddef.is_some() {
                    recorder.field(&mut ddef_vjp, ForceTime::T, false)?;
                    recorder.ddef_adjoint(&mut ddef_vjp, 0)?;
                    recorder.field(&mut ddef_jvp, ForceTime::T, false)?;
                    h.field_jvp(&mut recorder, &mut ddef_jvp, 0, false)?;
                }
                let tangents = Tangents {
                    directions: h.directions(),
                    residual: h.residual(&mut recorder)?,
                    ddef_vjp,
                    ddef_jvp,
                };
                (program, Some(tangents))
            }
            None => (program::build(&mut recorder, config, &mut NoHooks)?, None),
        };
        let adjoint = match adjoint {
            Some(a) => Some(adjoint::record(&mut recorder, system, config, a, n_wg)?),
            None => None,
        };
        engine.seal(device)?;
        Ok(Parts {
            dt,
            buffers,
            engine,
            program,
            ddef,
            tangents,
            adjoint,
        })
    })
}
