//! The DDEF parameters of a scene (`coulomb.samples`, `coulomb.ddef_variant`,
//! `coulomb.rebuild_every`, `coulomb.ddef_grid`): data and the rule that picks m.

use serde::Deserialize;

/// `coulomb.samples`: the grid size m, or `auto` (the default) for the rule that
/// minimizes the far-field plus near-field work at the charge count ([`Self::resolve`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DdefSamples {
    #[default]
    Auto,
    Count(u32),
}

impl DdefSamples {
    /// m = round(AUTO_FACTOR sqrt(n)) for `n` charges: the far field costs about m n pair
    /// terms and the near field about c n^2 / m, so their sum is least at m = sqrt(c n);
    /// c was measured on the lattice grid (docs/guide.md, "DDEF").
    pub const AUTO_FACTOR: f64 = 5.7;

    /// m for `charges` charged particles.
    pub fn resolve(self, charges: usize) -> u32 {
        match self {
            Self::Count(m) => m,
            Self::Auto => {
                let m = (Self::AUTO_FACTOR * (charges as f64).sqrt()).round();
                m.min(f64::from(DdefConfig::MAX_SAMPLES)) as u32
            }
        }
    }

    /// The explicit count, if any.
    pub fn count(self) -> Option<u32> {
        match self {
            Self::Count(m) => Some(m),
            Self::Auto => None,
        }
    }
}

impl std::fmt::Display for DdefSamples {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Auto => f.write_str("auto"),
            Self::Count(m) => write!(f, "{m}"),
        }
    }
}

/// A scene file gives a count (`samples = 2000`) or `"auto"`.
impl<'de> Deserialize<'de> for DdefSamples {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{Error, Unexpected, Visitor};
        struct V;
        impl Visitor<'_> for V {
            type Value = DdefSamples;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a sample count (a non-negative integer) or \"auto\"")
            }
            fn visit_u64<E: Error>(self, v: u64) -> Result<DdefSamples, E> {
                u32::try_from(v)
                    .map(DdefSamples::Count)
                    .map_err(|_| E::invalid_value(Unexpected::Unsigned(v), &self))
            }
            fn visit_i64<E: Error>(self, v: i64) -> Result<DdefSamples, E> {
                u32::try_from(v)
                    .map(DdefSamples::Count)
                    .map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
            }
            fn visit_str<E: Error>(self, v: &str) -> Result<DdefSamples, E> {
                if v == "auto" {
                    Ok(DdefSamples::Auto)
                } else {
                    Err(E::invalid_value(Unexpected::Str(v), &self))
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// How the DDEF near and far fields split the sources (see `crate::ddef`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DdefVariant {
    /// Algorithm 1 as printed: the near set is the union of M_k over k in N_i while each
    /// vertex's far field excludes only its own M_k, so a source can be counted twice.
    Paper,
    /// The interpolated far field excludes exactly the sources summed in the near field.
    /// The default: it is the more accurate of the two (measured by `msc ddef-error`).
    #[default]
    Corrected,
}

impl DdefVariant {
    pub const NAMES: [&'static str; 2] = ["paper", "corrected"];
    pub fn name(self) -> &'static str {
        match self {
            Self::Paper => "paper",
            Self::Corrected => "corrected",
        }
    }
    pub fn from_name(s: &str) -> Option<Self> {
        Some(match s {
            "paper" => Self::Paper,
            "corrected" => Self::Corrected,
            _ => return None,
        })
    }
}

/// Which tetrahedral grid DDEF interpolates on (see `crate::ddef`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DdefGrid {
    /// The paper's grid: m Halton samples plus the box corners, Delaunay tetrahedralized.
    Delaunay,
    /// A regular lattice of about m + 8 sites, each cell split into 6 Kuhn tetrahedra: no
    /// Delaunay step, closed-form location and neighbours (`crate::ddef::lattice`).
    /// The default: at the same m it was at least as accurate in every force case measured
    /// by `msc ddef-error` (random charges, torus, sphere, cloth) and builds faster.
    #[default]
    Lattice,
}

impl DdefGrid {
    pub const NAMES: [&'static str; 2] = ["delaunay", "lattice"];
    pub fn name(self) -> &'static str {
        match self {
            Self::Delaunay => "delaunay",
            Self::Lattice => "lattice",
        }
    }
    pub fn from_name(s: &str) -> Option<Self> {
        Some(match s {
            "delaunay" => Self::Delaunay,
            "lattice" => Self::Lattice,
            _ => return None,
        })
    }
}

/// DDEF parameters (`coulomb.samples`, `coulomb.ddef_variant`, `coulomb.rebuild_every`,
/// `coulomb.ddef_grid`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DdefConfig {
    /// m: Halton samples in the charges' bounding box (the 8 box corners come on top);
    /// for the lattice grid, about m + 8 lattice sites in all. `auto` (the default) picks
    /// m from the charge count ([`DdefSamples::resolve`]).
    pub samples: DdefSamples,
    pub variant: DdefVariant,
    /// Delaunay grid: force evaluations (one per step) between rebuilds of the
    /// tetrahedralization; it is also rebuilt whenever a charge leaves the grid's box.
    /// 1 = Algorithm 1 (every step). The lattice grid follows the charges' box at every
    /// evaluation and never needs a rebuild: there it must stay 1.
    pub rebuild_every: u32,
    pub grid: DdefGrid,
}

impl DdefConfig {
    /// Upper bound on `samples`: a Delaunay grid has about 6.5 tetrahedra per site, so
    /// this many already take a few GB.
    pub const MAX_SAMPLES: u32 = 10_000_000;
}

impl Default for DdefConfig {
    fn default() -> Self {
        Self {
            samples: DdefSamples::Auto,
            variant: DdefVariant::default(),
            rebuild_every: 1,
            grid: DdefGrid::default(),
        }
    }
}
