//! What the worlds of one batch must share ([`BatchKey`]): the kernels and dispatch
//! sequence of a step; and how two keys differ, in scene keys, when a batch is refused.

use crate::config::{Config, CoulombMethod, DdefGrid, Integrator, SolverMethod};
use crate::gpu::error::GpuError;
use crate::gpu::solver::ddef::delaunay_refused;

/// What worlds of one batch must share: the kernels and dispatch sequence of a step.
/// Everything else (sizes, topology, every physical parameter) may differ per world.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BatchKey {
    pub integrator: Integrator,
    pub method: SolverMethod,
    pub iterations: u32,
    pub local_global_iterations: u32,
    /// The Coulomb sum runs (all pairs or DDEF) or is off.
    pub coulomb: bool,
    /// The Coulomb sum is DDEF on the lattice grid (each world its own plan, m,
    /// variant and softening).
    pub ddef: bool,
}

impl BatchKey {
    /// The key of `config`, or why it cannot run in a batch (the Delaunay grid runs on
    /// the CPU only).
    pub fn of(config: &Config) -> Result<Self, GpuError> {
        let (coulomb, ddef) = match config.coulomb.method {
            CoulombMethod::AllPairs => (true, false),
            CoulombMethod::None => (false, false),
            CoulombMethod::Ddef(d) if d.grid == DdefGrid::Delaunay => {
                return Err(delaunay_refused())
            }
            CoulombMethod::Ddef(_) => (true, true),
        };
        // The explicit integrators solve nothing: their solver settings do not matter.
        let implicit = config.integrator.is_implicit();
        Ok(Self {
            integrator: config.integrator,
            method: if implicit {
                config.solver.method
            } else {
                SolverMethod::Jacobi
            },
            iterations: if implicit {
                config.solver.iterations
            } else {
                0
            },
            local_global_iterations: match config.integrator {
                Integrator::LocalGlobal => config.local_global_iterations,
                _ => 0,
            },
            coulomb,
            ddef,
        })
    }

    /// What `self` has that `other` does not, in scene keys ("integrator.method verlet,
    /// not imex"), for the refusal of a mixed batch.
    pub(super) fn differences(&self, other: &Self) -> String {
        let coulomb = |k: &Self| match (k.coulomb, k.ddef) {
            (false, _) => "none",
            (true, false) => "all_pairs",
            (true, true) => "ddef",
        };
        let mut fields = vec![(
            "integrator.method",
            self.integrator.name().to_string(),
            other.integrator.name().to_string(),
        )];
        // The solver keys matter only between worlds of one integrator.
        if self.integrator == other.integrator {
            fields.extend([
                (
                    "integrator.solver.method",
                    self.method.name().to_string(),
                    other.method.name().to_string(),
                ),
                (
                    "integrator.solver.iterations",
                    self.iterations.to_string(),
                    other.iterations.to_string(),
                ),
                (
                    "integrator.local_global_iterations",
                    self.local_global_iterations.to_string(),
                    other.local_global_iterations.to_string(),
                ),
            ]);
        }
        fields.push((
            "coulomb.method",
            coulomb(self).to_string(),
            coulomb(other).to_string(),
        ));
        let differ: Vec<String> = fields
            .iter()
            .filter(|(_, a, b)| a != b)
            .map(|(key, a, b)| format!("{key} {a}, not {b}"))
            .collect();
        differ.join("; ")
    }
}
