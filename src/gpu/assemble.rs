//! Assembles a solver's parts from a system and configuration, in order: limit checks,
//! the buffers, the tangent banks (when asked for), the DDEF stage, the step program
//! (built once, the tangent hooks called as it goes) and the sealed dispatch records.

use super::buffers::Buffers;
use super::ddef_stage::SolverDdef;
use super::engine::Engine;
use super::error::scoped;
use super::launch::Planner;
use super::limits::{check_limits, grid, sizes};
use super::params::{self, TimeStep};
use super::program::{self, NoHooks, Program};
use super::recording::Op;
use super::submit::Submitter;
use super::tangent::{TangentDirection, TangentHooks};
use super::GpuError;
use crate::config::{Config, CoulombMethod};
use crate::model::System;

/// The tangents a solver's step carries.
pub(super) struct Tangents {
    pub(super) directions: usize,
    /// The relative residual of the last direction's tangent solve (empty for the
    /// explicit integrators, whose tangents solve nothing).
    pub(super) residual: Vec<Op>,
}

/// Everything a solver holds on its device but the device itself.
pub(super) struct Parts {
    pub(super) dt: TimeStep,
    pub(super) buffers: Buffers,
    pub(super) engine: Engine,
    pub(super) program: Program,
    pub(super) ddef: Option<SolverDdef>,
    pub(super) tangents: Option<Tangents>,
}

/// Builds the parts of a solver for `system` under `config` on `host`'s device, with one
/// tangent per direction when `directions` is given.
pub(super) fn assemble(
    host: &Submitter,
    system: &System,
    config: &Config,
    directions: Option<&[TangentDirection]>,
) -> Result<Parts, GpuError> {
    config.validate_for(system)?;
    super::range::check(system, config)?;
    let device = &host.device;
    let limits = device.limits();
    let sz = sizes(system, config);
    check_limits(&limits, &sz)?;
    let dt = TimeStep::new(config);
    let wg = grid(
        system.len() as u32,
        limits.max_compute_workgroups_per_dimension,
    );
    scoped(device, || {
        let mut buffers = Buffers::create(device, system, config, dt, &sz, wg[0] * wg[1])?;
        let mut hooks = match directions {
            Some(d) => Some(TangentHooks::new(device, &mut buffers, system, config, d)?),
            None => None,
        };
        let ddef = match config.coulomb.method {
            CoulombMethod::Ddef(d) => {
                let charges = system
                    .charged_indices()
                    .iter()
                    .map(|&i| system.charges()[i as usize])
                    .collect();
                Some(SolverDdef::new(
                    device,
                    &host.queue,
                    &buffers,
                    d,
                    config.coulomb.softening,
                    charges,
                )?)
            }
            _ => None,
        };
        let mut engine = Engine::new(device, params::specialization(config));
        let mut planner = Planner::new(device, &mut engine, &buffers, system, config, dt);
        let (program, tangents) = match hooks.as_mut() {
            Some(h) => {
                let program = program::build(&mut planner, config, h)?;
                let tangents = Tangents {
                    directions: h.directions(),
                    residual: h.residual(&mut planner)?,
                };
                (program, Some(tangents))
            }
            None => (program::build(&mut planner, config, &mut NoHooks)?, None),
        };
        engine.seal(device);
        Ok(Parts {
            dt,
            buffers,
            engine,
            program,
            ddef,
            tangents,
        })
    })
}
