//! Writing into a running CPU reference instead of rebuilding it: a replacement state and
//! new per-particle and per-spring parameters on the same topology, under the rules the
//! GPU solver follows ([`parameters_fixed`], [`crate::model::Topology`]), so both backends accept the
//! same updates.

use glam::DVec3;

use super::CpuSimulation;
use crate::config::{Config, ConfigError, CoulombMethod, Integrator, SolverMethod};
use crate::cpu::solvers::BlockLaplacian;
use crate::model::{check_coulomb_pairs, check_state, ModelError, System};

/// Why `config` fixes the per-particle and per-spring parameters of a running simulation
/// (on both backends), if it does: DDEF builds its far field from the charges on the
/// host, and Chebyshev's weights come from a spectral radius estimated for the initial
/// parameters.
pub fn parameters_fixed(config: &Config) -> Option<ConfigError> {
    if config.coulomb.method.ddef().is_some() {
        return Some(ConfigError::new(
            "coulomb.method",
            "parameters cannot change under \"ddef\" (its grid holds the charges): build a \
             new simulator",
        ));
    }
    if config.integrator.is_implicit()
        && config.solver.method == SolverMethod::Chebyshev
        && config.solver.rho.is_none()
    {
        return Some(ConfigError::new(
            "integrator.solver.rho",
            "parameters cannot change under \"chebyshev\" with a spectral radius estimated \
             from the initial ones: set integrator.solver.rho, or build a new simulator",
        ));
    }
    None
}

/// What an update of a CPU simulation can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UpdateError {
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Config(#[from] ConfigError),
}

impl CpuSimulation {
    /// Replaces the positions and velocities; the time and step count stay. Checked as
    /// the initial state is: lengths, finite values, and no two charged particles so
    /// close that their Coulomb force is not finite (`System::check_coulomb`).
    pub fn set_state(&mut self, x: &[DVec3], v: &[DVec3]) -> Result<(), ModelError> {
        check_state(self.system.len(), x, v)?;
        if self.config.coulomb.method != CoulombMethod::None {
            let q = self.system.charges();
            check_coulomb_pairs(x, q, self.config.coulomb.softening)?;
        }
        self.state.x.copy_from_slice(x);
        self.state.v.copy_from_slice(v);
        // Velocity Verlet's field forces were evaluated at the old positions.
        self.field_step = None;
        Ok(())
    }

    /// Replaces the masses, charges, pins and spring parameters with `system`'s; the
    /// state stays. The rules of `GpuSolver::set_parameters`: the same [`crate::model::Topology`], and
    /// refused where [`parameters_fixed`] says so.
    pub fn set_parameters(&mut self, system: &System) -> Result<(), UpdateError> {
        self.topology.check(system)?;
        if let Some(e) = parameters_fixed(&self.config) {
            return Err(e.into());
        }
        self.config.validate_for(system)?;
        self.system = system.clone();
        let mut op = BlockLaplacian::from_system(&self.system);
        let h = self.config.dt;
        match self.config.integrator {
            Integrator::Imex => op.assemble_imex(&self.state.x, self.system.springs(), h),
            Integrator::LocalGlobal => op.assemble_local_global(self.system.springs(), h),
            _ => {}
        }
        self.op = op;
        self.field_step = None;
        Ok(())
    }
}
