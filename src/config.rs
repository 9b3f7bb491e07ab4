//! How a system is simulated: integrator, linear solver, Coulomb method and the external
//! world (gravity, point charges, fields). Shared by the CPU reference and the GPU solver;
//! scene files (`crate::scene`) deserialize into these types. Data and validation only:
//! the formulas on these types (an orbiting charge's position, a field's value and their
//! derivatives) live in `crate::physics`.

use crate::model::{ModelError, System};
use glam::DVec3;
use serde::Deserialize;

mod checks;
mod ddef;
pub use ddef::{DdefConfig, DdefGrid, DdefSamples, DdefVariant};

/// Time integrator (docs/physics.md §4-§6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Integrator {
    /// Linearized backward Euler for springs, explicit Coulomb (the paper's eq. 10 in
    /// velocity form, seeds 000/004).
    #[default]
    Imex,
    /// Liu 2013 local-global for springs, explicit Coulomb (the paper's eq. 11).
    LocalGlobal,
    /// Explicit: v += h a(x); x += h v (the paper's explicit-explicit baseline).
    SymplecticEuler,
    /// Explicit velocity Verlet (the paper's reference at a fine step).
    Verlet,
}

impl Integrator {
    pub const NAMES: [&'static str; 4] = ["imex", "local_global", "symplectic_euler", "verlet"];
    pub fn name(self) -> &'static str {
        match self {
            Self::Imex => "imex",
            Self::LocalGlobal => "local_global",
            Self::SymplecticEuler => "symplectic_euler",
            Self::Verlet => "verlet",
        }
    }
    pub fn from_name(s: &str) -> Option<Self> {
        Some(match s {
            "imex" => Self::Imex,
            "local_global" => Self::LocalGlobal,
            "symplectic_euler" => Self::SymplecticEuler,
            "verlet" => Self::Verlet,
            _ => return None,
        })
    }
    /// True for the integrators that solve a linear system each step.
    pub fn is_implicit(self) -> bool {
        matches!(self, Self::Imex | Self::LocalGlobal)
    }
}

/// The most solver iterations a step may take, all local-global solves together: the GPU
/// records a dispatch or more per iteration (`u32::MAX` never finished building), and a
/// step that long takes minutes on any device.
pub const MAX_SOLVER_ITERATIONS_PER_STEP: u64 = 1 << 24;

/// Matrix-free linear solver (docs/physics.md §7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SolverMethod {
    /// Weighted Jacobi, docs/physics.md (7.1).
    #[default]
    Jacobi,
    /// Jacobi with the 3x3 diagonal block inverted.
    BlockJacobi,
    /// Chebyshev-accelerated (block) Jacobi, Wang 2015.
    Chebyshev,
    /// Conjugate gradients with a Jacobi preconditioner, docs/physics.md (7.3).
    Cg,
}

impl SolverMethod {
    pub const NAMES: [&'static str; 4] = ["jacobi", "block_jacobi", "chebyshev", "cg"];
    pub fn name(self) -> &'static str {
        match self {
            Self::Jacobi => "jacobi",
            Self::BlockJacobi => "block_jacobi",
            Self::Chebyshev => "chebyshev",
            Self::Cg => "cg",
        }
    }
    pub fn from_name(s: &str) -> Option<Self> {
        Some(match s {
            "jacobi" => Self::Jacobi,
            "block_jacobi" => Self::BlockJacobi,
            "chebyshev" => Self::Chebyshev,
            "cg" => Self::Cg,
            _ => return None,
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SolverConfig {
    pub method: SolverMethod,
    /// Maximum sweeps (or CG iterations) per linear solve.
    pub iterations: u32,
    /// Jacobi relaxation weight, 0 < omega <= 1.
    pub omega: f64,
    /// Stop when |b - A v| / |b| <= tolerance. 0 runs exactly `iterations`. The GPU runs a
    /// fixed count (no readback inside a step) and reports the final residual.
    pub tolerance: f64,
    /// Chebyshev: spectral radius of the Jacobi iteration matrix. `None` estimates it
    /// once from the initial state by power iteration.
    pub rho: Option<f64>,
}

impl Default for SolverConfig {
    fn default() -> Self {
        Self {
            method: SolverMethod::default(),
            iterations: 50,
            omega: 0.5,
            tolerance: 1e-6,
            rho: None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CoulombMethod {
    /// Exact all-pairs sum over the charged particles.
    #[default]
    AllPairs,
    /// Coulomb forces switched off.
    None,
    /// The paper's DDEF approximation (Section 3.3, Algorithm 1): exact near field plus a
    /// far field interpolated on a tetrahedral grid (a lattice of Kuhn-split cubes, or the
    /// paper's Delaunay grid of Halton samples: `DdefConfig::grid`). The lattice grid runs
    /// on both backends (on the GPU every stage on the device); the Delaunay grid on the
    /// CPU only.
    /// The parameters ride in the variant so `CoulombConfig` keeps its two fields.
    Ddef(DdefConfig),
}

impl CoulombMethod {
    pub const NAMES: [&'static str; 3] = ["all_pairs", "none", "ddef"];
    pub fn name(self) -> &'static str {
        match self {
            Self::AllPairs => "all_pairs",
            Self::None => "none",
            Self::Ddef(_) => "ddef",
        }
    }
    /// The method named `s` in a scene file; DDEF with the default parameters.
    pub fn from_name(s: &str) -> Option<Self> {
        Some(match s {
            "all_pairs" => Self::AllPairs,
            "none" => Self::None,
            "ddef" => Self::Ddef(DdefConfig::default()),
            _ => return None,
        })
    }
    /// The DDEF parameters when the method is DDEF.
    pub fn ddef(self) -> Option<DdefConfig> {
        match self {
            Self::Ddef(d) => Some(d),
            _ => None,
        }
    }
}

/// A scene file names the method (`coulomb.method = "ddef"`); the DDEF parameters are
/// keys of their own, so this reads a name as [`CoulombMethod::from_name`] does.
impl<'de> Deserialize<'de> for CoulombMethod {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        deserialize_name(d, "CoulombMethod", &Self::NAMES, Self::from_name)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct CoulombConfig {
    pub method: CoulombMethod,
    /// Softening length eps in m: pair force k_c q_i q_j d / (r^2 + eps^2)^(3/2). 0 = exact.
    pub softening: f64,
}

/// Circular motion of an external charge about `axis` through `center`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Orbit {
    pub center: DVec3,
    /// Unit vector (normalized when the scene is loaded).
    pub axis: DVec3,
    /// rad/s, right-handed about `axis`.
    pub angular_velocity: f64,
}

/// A point charge outside the system, static or orbiting.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ExternalCharge {
    /// C.
    pub charge: f64,
    /// Position at t = 0, m.
    pub position: DVec3,
    pub orbit: Option<Orbit>,
}

/// An external electric field E(x), force q_i E(x_i).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ExternalField {
    /// Constant E in V/m.
    Uniform(DVec3),
    /// The paper's guiding field exactly as printed, E = s [y/z, x/z, 0] (paper Section 4.3).
    /// Singular at z = 0: |z| is clamped to at least `min_z` (m) so a particle crossing the
    /// plane stays finite. Note: this field has no curl about z (it stretches along x = y and
    /// squeezes along x = -y), so it does not turn a body; see [`ExternalField::Vortex`].
    Swirl { scale: f64, min_z: f64 },
    /// E = s [-y/z, x/z, 0]: the field that turns a positive charge counter-clockwise about
    /// +z for s/z > 0, the rotation the paper's Figure 13 shows. Same `min_z` clamp.
    Vortex { scale: f64, min_z: f64 },
}

impl ExternalField {
    pub const DEFAULT_MIN_Z: f64 = 1e-3;
}

/// The scene's `[world]` table, deserialized straight from the scene file (a key added
/// here needs no other scene code): per-world physical settings beyond gravity and the
/// external charges and field.
#[derive(Clone, Copy, Debug, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields, expecting = "a table")]
pub struct WorldConfig {
    /// Linear drag coefficient c (kg/s): every particle feels f = -c v (docs/physics.md
    /// (3.4)), evaluated with the other non-spring forces (explicitly, at the velocity
    /// they see). Dissipative: it has no potential, so the total energy falls.
    pub drag: f64,
}

/// Everything about how to advance a [`crate::model::System`].
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub integrator: Integrator,
    /// Time step h in s.
    pub dt: f64,
    /// Number of steps in a run.
    pub steps: u64,
    pub solver: SolverConfig,
    /// Local-global alternations per step (`local_global` only).
    pub local_global_iterations: u32,
    /// m/s^2.
    pub gravity: DVec3,
    pub coulomb: CoulombConfig,
    pub external_charges: Vec<ExternalCharge>,
    pub external_field: Option<ExternalField>,
    pub world: WorldConfig,
}

/// The defaults of every setting a scene file may leave out (the scene loader starts
/// from these).
impl Default for Config {
    fn default() -> Self {
        Self {
            integrator: Integrator::default(),
            dt: 0.015,
            steps: 1000,
            solver: SolverConfig::default(),
            local_global_iterations: 10,
            gravity: DVec3::ZERO,
            coulomb: CoulombConfig::default(),
            external_charges: Vec::new(),
            external_field: None,
            world: WorldConfig::default(),
        }
    }
}

/// A configuration value out of its range. `key` is the scene file's dotted path.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{key}: {message}")]
pub struct ConfigError {
    pub key: String,
    pub message: String,
}

impl ConfigError {
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            message: message.into(),
        }
    }
}

impl Config {
    /// The most steps a run takes (`integrator.steps`, `--steps`, `duration / dt`): a
    /// bound no run reaches, which i64 (the TOML copy of the scene) holds.
    pub const MAX_STEPS: u64 = 1_000_000_000_000_000;

    /// The load-time Coulomb check of `system` under this configuration (shared rule of
    /// both backends): with the run's softening, no two distinct charged particles (when
    /// the Coulomb method sums pairs) and no external charge at t = 0 and charged particle
    /// may be so close that their exact force is not finite. See [`System::check_coulomb`].
    pub fn check_coulomb(&self, system: &System) -> Result<(), ModelError> {
        let externals: Vec<(DVec3, f64)> = self
            .external_charges
            .iter()
            .map(|c| (c.position_at(0.0), c.charge))
            .collect();
        let pairs = self.coulomb.method != CoulombMethod::None;
        system.check_coulomb(self.coulomb.softening, pairs, &externals)
    }

    /// The scene key an error of [`Self::check_coulomb`] is about.
    pub fn coulomb_error_key(e: &ModelError) -> String {
        match e {
            ModelError::SingularExternalCharge { external, .. } => {
                format!("external_charges[{external}].position")
            }
            ModelError::ChargeProductOverflow { what, .. } if what.starts_with("external") => {
                "external_charges".into()
            }
            ModelError::ChargeProductOverflow { .. } => "material.charge".into(),
            _ => "coulomb.softening".into(),
        }
    }

    /// What the forward tangents (on either backend) cannot differentiate in this
    /// configuration, naming its scene key; `None` when they can. Refused rather than
    /// silently dropped from the derivative.
    pub fn not_differentiable(&self) -> Option<ConfigError> {
        if self.coulomb.method.ddef().map(|d| d.grid) == Some(DdefGrid::Delaunay) {
            // The lattice DDEF is differentiated with its structure frozen; the Delaunay
            // grid is not.
            return Some(ConfigError::new(
                "coulomb.ddef_grid",
                "\"delaunay\" cannot be differentiated: gradients through DDEF run on the \
                 lattice grid (coulomb.ddef_grid = \"lattice\", the default)",
            ));
        }
        if self.world.drag != 0.0 {
            return Some(ConfigError::new(
                "world.drag",
                "the drag's tangent is not propagated yet; fit without drag",
            ));
        }
        None
    }

    /// [`Self::validate`], the drag's stability, [`Self::check_coulomb`] as a
    /// [`ConfigError`] and [`Self::check_external`]: what a backend checks before it starts.
    pub fn validate_for(&self, system: &System) -> Result<(), ConfigError> {
        self.validate()?;
        self.check_drag(system)?;
        self.check_coulomb(system)
            .map_err(|e| ConfigError::new(Self::coulomb_error_key(&e), e.to_string()))?;
        self.check_external(system)
    }

    /// Checks every value's range; the error names the scene key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let positive = |key: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(ConfigError::new(
                    key,
                    format!(
                        "must be positive and finite, got {}",
                        crate::display::num(v)
                    ),
                ))
            }
        };
        // Names the component: `gravity[2]: must be finite, got inf`.
        let finite3 = |key: &str, v: DVec3| match (0..3).find(|&k| !v[k].is_finite()) {
            None => Ok(()),
            Some(k) => Err(ConfigError::new(
                format!("{key}[{k}]"),
                format!("must be finite, got {}", crate::display::num(v[k])),
            )),
        };
        positive("integrator.dt", self.dt)?;
        if self.steps == 0 {
            return Err(ConfigError::new("integrator.steps", "must be at least 1"));
        }
        if self.steps > Self::MAX_STEPS {
            let limit = crate::display::num(Self::MAX_STEPS as f64);
            let message = format!("must be at most {limit}, got {}", self.steps);
            return Err(ConfigError::new("integrator.steps", message));
        }
        if self.solver.iterations == 0 {
            return Err(ConfigError::new(
                "integrator.solver.iterations",
                "must be at least 1",
            ));
        }
        let w = self.solver.omega;
        if !(w > 0.0 && w <= 1.0) {
            return Err(ConfigError::new(
                "integrator.solver.omega",
                format!("must be in (0, 1], got {}", crate::display::num(w)),
            ));
        }
        let tol = self.solver.tolerance;
        if !(tol.is_finite() && tol >= 0.0) {
            return Err(ConfigError::new(
                "integrator.solver.tolerance",
                format!(
                    "must be finite and non-negative, got {}",
                    crate::display::num(tol)
                ),
            ));
        }
        if let Some(rho) = self.solver.rho {
            if !(rho > 0.0 && rho < 1.0) {
                return Err(ConfigError::new(
                    "integrator.solver.rho",
                    format!("must be in (0, 1), got {}", crate::display::num(rho)),
                ));
            }
        }
        if self.integrator == Integrator::LocalGlobal && self.local_global_iterations == 0 {
            return Err(ConfigError::new(
                "integrator.local_global_iterations",
                "must be at least 1",
            ));
        }
        let solves = match self.integrator {
            Integrator::LocalGlobal => u64::from(self.local_global_iterations),
            _ => u64::from(self.integrator.is_implicit()),
        };
        let per_step = u64::from(self.solver.iterations) * solves;
        if per_step > MAX_SOLVER_ITERATIONS_PER_STEP {
            return Err(ConfigError::new(
                "integrator.solver.iterations",
                format!("{per_step} per step (local-global: times local_global_iterations) is over the limit of {MAX_SOLVER_ITERATIONS_PER_STEP}"),
            ));
        }
        finite3("gravity", self.gravity)?;
        let c = self.world.drag;
        if !(c.is_finite() && c >= 0.0) {
            return Err(ConfigError::new(
                "world.drag",
                format!(
                    "must be finite and non-negative, got {}",
                    crate::display::num(c)
                ),
            ));
        }
        let eps = self.coulomb.softening;
        if !(eps.is_finite() && eps >= 0.0) {
            return Err(ConfigError::new(
                "coulomb.softening",
                format!(
                    "must be finite and non-negative, got {}",
                    crate::display::num(eps)
                ),
            ));
        }
        if let CoulombMethod::Ddef(d) = self.coulomb.method {
            if let Some(m) = d.samples.count().filter(|&m| m > DdefConfig::MAX_SAMPLES) {
                return Err(ConfigError::new(
                    "coulomb.samples",
                    format!("must be at most {}, got {m}", DdefConfig::MAX_SAMPLES),
                ));
            }
            if d.rebuild_every == 0 {
                return Err(ConfigError::new(
                    "coulomb.rebuild_every",
                    "must be at least 1",
                ));
            }
            if d.grid == DdefGrid::Lattice && d.rebuild_every != 1 {
                return Err(ConfigError::new(
                    "coulomb.rebuild_every",
                    format!(
                        "must be 1 with coulomb.ddef_grid = \"lattice\" (its box follows the \
                         charges at every evaluation; rebuild_every applies to the \
                         \"delaunay\" grid), got {}",
                        d.rebuild_every
                    ),
                ));
            }
        }
        for (k, c) in self.external_charges.iter().enumerate() {
            let key = |f: &str| format!("external_charges[{k}].{f}");
            if !c.charge.is_finite() {
                return Err(ConfigError::new(key("charge"), "must be finite"));
            }
            finite3(&key("position"), c.position)?;
            if let Some(o) = c.orbit {
                finite3(&key("orbit.center"), o.center)?;
                if !(o.axis.is_finite() && (o.axis.length() - 1.0).abs() < 1e-9) {
                    return Err(ConfigError::new(key("orbit.axis"), "must be a unit vector"));
                }
                if !o.angular_velocity.is_finite() {
                    return Err(ConfigError::new(
                        key("orbit.angular_velocity"),
                        "must be finite",
                    ));
                }
            }
        }
        match self.external_field {
            Some(ExternalField::Uniform(e)) => finite3("external_field.value", e)?,
            Some(ExternalField::Swirl { scale, min_z })
            | Some(ExternalField::Vortex { scale, min_z }) => {
                if !scale.is_finite() {
                    return Err(ConfigError::new("external_field.scale", "must be finite"));
                }
                positive("external_field.min_z", min_z)?;
            }
            None => {}
        }
        Ok(())
    }
}

/// The scene file's names of the external field kinds (`external_field.kind`).
impl ExternalField {
    pub const NAMES: [&'static str; 3] = ["uniform", "swirl", "vortex"];
    pub fn name(&self) -> &'static str {
        match self {
            Self::Uniform(_) => "uniform",
            Self::Swirl { .. } => "swirl",
            Self::Vortex { .. } => "vortex",
        }
    }
    /// The kind named `s`, with the defaults of the keys a scene may leave out: value 0,
    /// scale 1 V, `min_z` [`ExternalField::DEFAULT_MIN_Z`].
    pub fn from_name(s: &str) -> Option<Self> {
        let (scale, min_z) = (1.0, Self::DEFAULT_MIN_Z);
        Some(match s {
            "uniform" => Self::Uniform(DVec3::ZERO),
            "swirl" => Self::Swirl { scale, min_z },
            "vortex" => Self::Vortex { scale, min_z },
            _ => return None,
        })
    }
    /// The `[external_field]` keys this kind reads besides `kind`.
    pub fn keys(&self) -> &'static [&'static str] {
        match self {
            Self::Uniform(_) => &["value"],
            Self::Swirl { .. } | Self::Vortex { .. } => &["scale", "min_z"],
        }
    }
}

/// A scene file names the kind (`external_field.kind = "vortex"`); its parameters are keys
/// of their own, so this reads a name as [`ExternalField::from_name`] does.
impl<'de> Deserialize<'de> for ExternalField {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        deserialize_name(d, "ExternalField", &Self::NAMES, Self::from_name)
    }
}

/// Reads the name of an enum's variant as a derived `Deserialize` reads a unit variant
/// (the same accepted forms and errors: an unknown name lists `names`), then maps it with
/// `from_name`: for the enums whose variants carry parameters set by keys of their own.
fn deserialize_name<'de, D: serde::Deserializer<'de>, T>(
    d: D,
    what: &'static str,
    names: &'static [&'static str],
    from_name: fn(&str) -> Option<T>,
) -> Result<T, D::Error> {
    use serde::de::{EnumAccess, Error, VariantAccess, Visitor};
    struct Name<T> {
        what: &'static str,
        names: &'static [&'static str],
        from_name: fn(&str) -> Option<T>,
    }
    impl<'de, T> Visitor<'de> for Name<T> {
        type Value = T;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            write!(f, "enum {}", self.what)
        }
        fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<T, A::Error> {
            let (name, variant): (String, _) = data.variant()?;
            let value = (self.from_name)(&name)
                .ok_or_else(|| A::Error::unknown_variant(&name, self.names))?;
            variant.unit_variant()?;
            Ok(value)
        }
    }
    let visitor = Name {
        what,
        names,
        from_name,
    };
    d.deserialize_enum(what, names, visitor)
}
