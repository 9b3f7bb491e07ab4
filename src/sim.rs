//! What every backend reports, and the trait the CLI drives them through.

use crate::model::State;

/// The simulated time after `step` steps of `dt`: `step * dt`, rounded once. Every host
/// site that rebuilds a time from a step count calls this, so a time written to
/// `energy.csv`, `summary.json` or a fit is the same number everywhere.
pub fn time_at(step: u64, dt: f64) -> f64 {
    step as f64 * dt
}

/// Energy terms in J (DESIGN section 1). `external` covers external point charges and a
/// uniform field; a swirl field has no potential and contributes nothing here (see
/// [`crate::config::ExternalField::is_conservative`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Energies {
    pub kinetic: f64,
    pub elastic: f64,
    pub coulomb: f64,
    pub gravity: f64,
    pub external: f64,
    pub total: f64,
}

impl Energies {
    /// Builds the terms and sums them into `total`. A zero is stored as +0 (a term such as
    /// -m g . x with g = 0 gives -0, which would print as `-0e0`).
    pub fn new(kinetic: f64, elastic: f64, coulomb: f64, gravity: f64, external: f64) -> Self {
        let z = |v: f64| v + 0.0;
        Self {
            kinetic: z(kinetic),
            elastic: z(elastic),
            coulomb: z(coulomb),
            gravity: z(gravity),
            external: z(external),
            total: z(kinetic + elastic + coulomb + gravity + external),
        }
    }
    pub fn is_finite(&self) -> bool {
        self.terms().iter().all(|(_, v)| v.is_finite())
    }
    /// (name, value) pairs in the order of `energy.csv`'s columns.
    pub fn terms(&self) -> [(&'static str, f64); 6] {
        [
            ("kinetic", self.kinetic),
            ("elastic", self.elastic),
            ("coulomb", self.coulomb),
            ("gravity", self.gravity),
            ("external", self.external),
            ("total", self.total),
        ]
    }
}

/// Outcome of the last linear solve of a step.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SolveStats {
    /// Sweeps or CG iterations done.
    pub iterations: u32,
    /// Final relative residual |b - A v| / |b| (0 when b = 0 and v solves it).
    pub residual: f64,
}

/// Errors a backend can raise while stepping or reading back.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    #[error(transparent)]
    Gpu(#[from] crate::gpu::GpuError),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Ddef(#[from] crate::ddef::DdefError),
}

/// A time stepper over one system: the CPU reference or the GPU solver.
pub trait Simulator {
    /// Advances `n` steps.
    fn step(&mut self, n: u64) -> Result<(), SimError>;
    /// Current positions and velocities (a readback on the GPU).
    fn state(&mut self) -> Result<State, SimError>;
    /// Current energy terms (reduced on the GPU; only six numbers come back).
    fn energies(&mut self) -> Result<Energies, SimError>;
    /// The last step's linear solve, for implicit integrators.
    fn solve_stats(&mut self) -> Result<Option<SolveStats>, SimError>;
    /// "cpu", or the GPU adapter's name.
    fn backend_name(&self) -> String;
    /// The first particle whose position or velocity f32 cannot hold (see
    /// [`State::first_outside_f32`]); such a state is a divergence on every backend, since
    /// the GPU and the PLY frames hold f32. Backends that hold f32 state cannot exceed it
    /// (values become inf and show in the energies): the default says `None`.
    fn first_outside_f32(&mut self) -> Result<Option<usize>, SimError> {
        Ok(None)
    }
    /// DDEF grid builds and force evaluations so far; `None` unless `coulomb.method` is
    /// DDEF.
    fn ddef_counts(&self) -> Option<DdefCounts> {
        None
    }
}

/// How often a DDEF run rebuilt its grid (`coulomb.rebuild_every`, or a charge leaving the
/// padded box).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct DdefCounts {
    pub rebuilds: u64,
    pub evaluations: u64,
}
