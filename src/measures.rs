//! What every backend reports (energy terms, the last solve, DDEF counts) and the
//! step-to-time rule. The trait that drives a backend is [`crate::simulator::Simulator`].

/// The simulated time after `step` steps of `dt`: `step * dt`, rounded once. Every host
/// site that rebuilds a time from a step count calls this, so a time written to
/// `energy.csv`, `summary.json` or a fit is the same number everywhere.
pub fn time_at(step: u64, dt: f64) -> f64 {
    step as f64 * dt
}

/// Energy terms in J (docs/physics.md §10). `external` covers external point charges and a
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

/// How often a DDEF run rebuilt its grid (`coulomb.rebuild_every`, or a charge leaving the
/// padded box).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct DdefCounts {
    pub rebuilds: u64,
    pub evaluations: u64,
}
