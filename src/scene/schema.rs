//! The scene file's TOML schema. Every table denies unknown keys, so a typo is an error
//! naming the key instead of a silently ignored setting. Optional keys are `Option` so the
//! defaults live in one place: `Config::default()` and the types' own defaults for the
//! simulation settings, the builders for the mesh and material. Names (integrator,
//! solver, Coulomb method, ...) deserialize into the configuration's own enums.

use super::FrameFormat;
use crate::config::{
    CoulombMethod, DdefGrid, DdefSamples, DdefVariant, ExternalField, Integrator, SolverMethod,
};
use crate::model::mesh::{MeshFormat, Polygons};
use serde::{Deserialize, Deserializer};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SceneFile {
    pub name: Option<String>,
    /// Free text for the reader; accepted so a file can describe itself.
    #[allow(dead_code)]
    pub description: Option<String>,
    /// m/s^2.
    #[serde(default, deserialize_with = "opt_vec3")]
    pub gravity: Option<[f64; 3]>,
    pub mesh: MeshSpec,
    #[serde(default)]
    pub material: MaterialSpec,
    pub pin: Option<PinSpec>,
    #[serde(default)]
    pub integrator: IntegratorSpec,
    #[serde(default)]
    pub coulomb: CoulombSpec,
    #[serde(default)]
    pub external_charges: Vec<ExternalChargeSpec>,
    pub external_field: Option<ExternalFieldSpec>,
    #[serde(default)]
    pub output: OutputSpec,
    #[serde(default)]
    pub world: crate::config::WorldConfig,
}

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub(super) enum MeshKind {
    Torus,
    Icosphere,
    Grid,
    Lattice,
    Obj,
    Ply,
    Stl,
    Tet,
}

impl MeshKind {
    pub fn name(self) -> &'static str {
        match self {
            Self::Torus => "torus",
            Self::Icosphere => "icosphere",
            Self::Grid => "grid",
            Self::Lattice => "lattice",
            Self::Obj => "obj",
            Self::Ply => "ply",
            Self::Stl => "stl",
            Self::Tet => "tet",
        }
    }
    pub fn from_name(s: &str) -> Option<Self> {
        Some(match s {
            "torus" => Self::Torus,
            "icosphere" => Self::Icosphere,
            "grid" => Self::Grid,
            "lattice" => Self::Lattice,
            "obj" => Self::Obj,
            "ply" => Self::Ply,
            "stl" => Self::Stl,
            "tet" => Self::Tet,
            _ => return None,
        })
    }
    /// The `[mesh]` keys this kind reads besides `kind` and `center`.
    pub fn keys(self) -> &'static [&'static str] {
        match self {
            Self::Torus => &["major_radius", "minor_radius", "rings", "sides"],
            Self::Icosphere => &["radius", "subdivisions"],
            Self::Grid => &["size", "resolution", "shear", "bending"],
            Self::Lattice => &["size", "resolution"],
            Self::Obj | Self::Ply => &["path", "scale", "polygons"],
            Self::Stl | Self::Tet => &["path", "scale"],
        }
    }
    /// A kind read from a file (`mesh.path`), and the format it reads (`None` for `tet`:
    /// the file's extension picks Gmsh, VTK, VTU, TetGen or Medit).
    pub fn file_format(self) -> Option<Option<MeshFormat>> {
        match self {
            Self::Obj => Some(Some(MeshFormat::Obj)),
            Self::Ply => Some(Some(MeshFormat::Ply)),
            Self::Stl => Some(Some(MeshFormat::Stl)),
            Self::Tet => Some(None),
            _ => None,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(super) struct MeshSpec {
    pub kind: MeshKind,
    /// Where the mesh's origin goes (for a mesh file: the centre of its bounding box).
    #[serde(default, deserialize_with = "opt_vec3")]
    pub center: Option<[f64; 3]>,
    pub major_radius: Option<f64>,
    pub minor_radius: Option<f64>,
    pub rings: Option<u32>,
    pub sides: Option<u32>,
    pub radius: Option<f64>,
    pub subdivisions: Option<u32>,
    /// [w, h] for a grid, [x, y, z] for a lattice.
    pub size: Option<Vec<f64>>,
    pub resolution: Option<Vec<u32>>,
    pub shear: Option<bool>,
    pub bending: Option<bool>,
    pub path: Option<String>,
    pub scale: Option<f64>,
    /// Springs of polygons with 4 or more vertices (OBJ, PLY).
    pub polygons: Option<Polygons>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(super) struct MaterialSpec {
    /// kg per particle.
    pub mass: Option<f64>,
    /// kg, spread evenly over the particles.
    pub total_mass: Option<f64>,
    /// N/m.
    pub stiffness: Option<f64>,
    /// N s/m along each spring.
    pub damping: Option<f64>,
    /// C per charged particle.
    pub charge: Option<f64>,
    /// C, spread evenly over the charged particles.
    pub total_charge: Option<f64>,
    /// Fraction of particles that carry charge, in [0, 1].
    pub charged_fraction: Option<f64>,
    /// Rest length = scale * initial edge length.
    pub rest_length_scale: Option<f64>,
}

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub(super) enum PinWhere {
    MaxX,
    MinX,
    MaxY,
    MinY,
    MaxZ,
    MinZ,
    CornersMaxY,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(super) struct PinSpec {
    #[serde(default)]
    pub indices: Vec<u64>,
    #[serde(rename = "where")]
    pub where_: Option<PinWhere>,
    /// Prescribed velocity of the pinned particles, m/s.
    #[serde(default, deserialize_with = "opt_vec3")]
    pub velocity: Option<[f64; 3]>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(super) struct IntegratorSpec {
    pub method: Option<Integrator>,
    pub dt: Option<f64>,
    pub duration: Option<f64>,
    pub steps: Option<u64>,
    pub solver: Option<SolverSpec>,
    pub local_global_iterations: Option<u32>,
}

/// The `[integrator]` keys `method` reads besides `method`, `dt`, `duration` and `steps`.
pub(super) fn integrator_keys(method: Integrator) -> &'static [&'static str] {
    match method {
        Integrator::Imex => &["solver"],
        Integrator::LocalGlobal => &["solver", "local_global_iterations"],
        Integrator::SymplecticEuler | Integrator::Verlet => &[],
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(super) struct SolverSpec {
    pub method: Option<SolverMethod>,
    pub iterations: Option<u32>,
    pub omega: Option<f64>,
    pub tolerance: Option<f64>,
    pub rho: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(super) struct CoulombSpec {
    /// DDEF: its parameters are the keys below.
    pub method: Option<CoulombMethod>,
    pub softening: Option<f64>,
    /// DDEF only.
    pub samples: Option<DdefSamples>,
    pub ddef_variant: Option<DdefVariant>,
    pub rebuild_every: Option<u32>,
    pub ddef_grid: Option<DdefGrid>,
}

/// The `[coulomb]` keys `method` reads besides `method` and `softening`.
pub(super) fn coulomb_keys(method: CoulombMethod) -> &'static [&'static str] {
    match method {
        CoulombMethod::Ddef(_) => &["samples", "ddef_variant", "rebuild_every", "ddef_grid"],
        CoulombMethod::AllPairs | CoulombMethod::None => &[],
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(super) struct ExternalChargeSpec {
    pub charge: f64,
    #[serde(deserialize_with = "vec3")]
    pub position: [f64; 3],
    pub orbit: Option<OrbitSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(super) struct OrbitSpec {
    #[serde(default, deserialize_with = "opt_vec3")]
    pub center: Option<[f64; 3]>,
    #[serde(default, deserialize_with = "opt_vec3")]
    pub axis: Option<[f64; 3]>,
    pub angular_velocity: f64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(super) struct ExternalFieldSpec {
    /// The kind, with the defaults of its parameters (the keys below).
    pub kind: ExternalField,
    /// V/m (uniform).
    #[serde(default, deserialize_with = "opt_vec3")]
    pub value: Option<[f64; 3]>,
    /// V (swirl: E = scale [y/z, x/z, 0]).
    pub scale: Option<f64>,
    /// m (swirl).
    pub min_z: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(super) struct OutputSpec {
    pub every: Option<u64>,
    pub frames: Option<FrameFormat>,
}

/// `[x, y, z]`, exactly three values: serde's `[f64; 3]` stops after the third and toml
/// does not look for more, so a fourth value would be dropped silently.
fn vec3<'de, D: Deserializer<'de>>(d: D) -> Result<[f64; 3], D::Error> {
    let v = Vec::<f64>::deserialize(d)?;
    let len = v.len();
    <[f64; 3]>::try_from(v)
        .map_err(|_| serde::de::Error::custom(format!("expected 3 values ([x, y, z]), got {len}")))
}

fn opt_vec3<'de, D: Deserializer<'de>>(d: D) -> Result<Option<[f64; 3]>, D::Error> {
    vec3(d).map(Some)
}
