//! Scene files: TOML in, a validated [`System`] and [`Config`] out.
//!
//! A scene is a TOML file (or a built-in name, see [`builtin_names`]); `--set key=value`
//! overrides edit the parsed table before it is checked, so they get the same errors. Every
//! error names the dotted key (`integrator.solver.omega`, `external_charges[0].charge`) and,
//! where the file sets it, the line. The schema, with defaults:
//!
//! ```toml
//! name = "torus"                  # default: the file stem or built-in name
//! description = "..."             # optional, free text
//! gravity = [0.0, 0.0, 0.0]       # m/s^2
//! [mesh]
//! kind = "torus"                  # torus | icosphere | grid | lattice | obj | ply | stl | tet
//! center = [0.0, 0.0, 0.0]        # where the mesh origin goes (a file: its bounding-box centre)
//! # torus: major_radius, minor_radius, rings, sides   icosphere: radius, subdivisions
//! # grid: size = [w, h], resolution = [nx, ny], shear = true, bending = false
//! # lattice: size = [x, y, z], resolution = [nx, ny, nz]
//! # obj, ply, stl, tet: path (relative to the scene file; to the working directory for a
//! #   built-in; "builtin:beam.msh" is embedded), scale = 1; obj and ply: polygons = "both_diagonals" | "edges" | "triangulate"
//! #   tet: .msh (Gmsh 2.2/4.1), .vtk, .vtu, .node/.ele (TetGen) or .mesh (Medit)
//! [material]
//! mass = 0.01                     # kg per particle, or total_mass (kg, spread evenly)
//! stiffness = 10.0                # N/m
//! damping = 0.0                   # N s/m along each spring
//! charge = 0.0                    # C per charged particle, or total_charge (C, spread evenly)
//! charged_fraction = 1.0          # charge particle i iff floor((i+1) f) > floor(i f)
//! rest_length_scale = 1.0         # rest length = scale * initial edge length
//! [pin]                           # optional
//! indices = [0, 12]               # and/or where = max_y | min_y | max_x | min_x | max_z |
//! where = "corners_max_y"         #   min_z | corners_max_y (extreme x among the max-y row)
//! velocity = [0.0, 0.0, 0.0]      # prescribed velocity of the pinned particles, m/s
//! [integrator]
//! method = "imex"                 # imex | local_global | symplectic_euler | verlet
//! dt = 0.015                      # s
//! duration = 15.0                 # s, or steps = N (exactly one of the two)
//! local_global_iterations = 10
//! solver = { method = "jacobi", iterations = 50, omega = 0.5, tolerance = 1e-6 }  # + rho
//! [coulomb]
//! method = "all_pairs"            # all_pairs | none | ddef
//! softening = 0.0                 # m
//! samples = "auto"                # ddef: grid size m, or "auto" (m from the charge count)
//! ddef_variant = "corrected"      # ddef: corrected | paper (Algorithm 1 as printed)
//! rebuild_every = 1               # ddef, delaunay grid: steps between tetrahedralizations
//! ddef_grid = "lattice"           # ddef: lattice (Kuhn-split cubes) | delaunay (Halton + Delaunay)
//! [[external_charges]]            # any number
//! charge = -42e-6                 # C
//! position = [0.0, 0.0, 1.0]      # m, at t = 0
//! orbit = { center = [0.0, 0.0, 0.0], axis = [0.0, 0.0, 1.0], angular_velocity = 0.5 }
//! [external_field]                # optional
//! kind = "uniform"                # uniform: value = [ex, ey, ez] V/m (default 0)
//!                                 # swirl (s [y/z, x/z, 0], as printed in the paper) and
//!                                 # vortex (s [-y/z, x/z, 0], turns about z): scale = 1.0 (V), min_z = 1e-3 (m)
//! [output]
//! every = 10                      # steps between frames and energy rows
//! frames = "ply"                  # ply | none
//! ```

mod builtin;
mod config_only;
mod ctx;
mod error;
mod geometry;
mod initial;
mod keys;
mod name;
mod overrides;
mod particles;
mod resolve;
mod schema;
mod settings;
mod size;
#[cfg(test)]
mod strict_tests;

pub use config_only::{config_from, CONFIG_KEYS};
pub use error::{Location, SceneError};
pub use size::{available_memory, check_host, Resource, SceneSize, Shortfall};

use crate::config::Config;
use crate::digest::FileDigest;
use crate::model::mesh::MeshFormat;
use crate::model::{MeshError, System};
use ctx::Ctx;
use keys::{line_of, SourceMap};
use resolve::resolve;
use schema::SceneFile;
use std::path::{Path, PathBuf};

/// What `[output]` asks a run to write.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputConfig {
    /// Steps between frames and energy rows.
    pub every: u64,
    pub frames: FrameFormat,
}

/// What a scene leaves out of `[output]`.
impl Default for OutputConfig {
    fn default() -> Self {
        Self {
            every: 10,
            frames: FrameFormat::Ply,
        }
    }
}

/// `output.frames`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FrameFormat {
    #[default]
    Ply,
    None,
}

/// A scene loaded, overridden and validated.
#[derive(Clone, Debug)]
pub struct LoadedScene {
    pub name: String,
    pub system: System,
    pub config: Config,
    pub output: OutputConfig,
    /// The file it came from (`None` for a built-in scene).
    pub source: Option<PathBuf>,
    /// The scene as TOML after `--set` overrides, for reproducing the run.
    pub resolved_toml: String,
    /// Every file the scene read, in the order read: the scene file (none for a built-in)
    /// and a mesh file (TetGen: the .node and .ele files); each under its absolute path,
    /// with its size and SHA-256.
    pub inputs: Vec<FileDigest>,
}

/// Loads a scene from a path or a built-in name, applying `key=value` overrides.
///
/// An existing file wins over a built-in of the same name. Overrides are applied in order
/// to the parsed table (`integrator.dt=0.15`, `integrator.solver.method=cg`,
/// `mesh.resolution=[64, 64]`, `external_charges[0].charge=-1e-6`); a value that is not
/// valid TOML is taken as a string. Setting `mesh.kind`, `external_field.kind`,
/// `integrator.method` or `coulomb.method` to a new choice drops the file's keys that only
/// the old one reads.
pub fn load(scene: &str, overrides: &[String]) -> Result<LoadedScene, SceneError> {
    load_checked(scene, overrides, |_, _| Ok(()))
}

/// The dotted key (normalized: `integrator.dt`, `external_charges[0].charge`) and TOML
/// value of one `--set KEY=VALUE`, read as [`load`] reads it: for callers that compare
/// overrides (a sweep's values) without loading a scene.
pub fn parse_override(arg: &str) -> Result<(String, toml::Value), SceneError> {
    let o = overrides::parse(arg)?;
    Ok((o.key(), o.value))
}

/// Whether the override `later` gives a key that `earlier` (given before it) set a new
/// value: `(that key, the key later sets whole)`, the same key or a table or array holding
/// it (an inline table merges, so a key it leaves out keeps its value). `None` also when
/// either does not parse, which loading names. For a sweep, whose labels must say what ran.
pub fn override_overwrites(earlier: &str, later: &str) -> Option<(String, String)> {
    let (e, l) = (
        overrides::parse(earlier).ok()?,
        overrides::parse(later).ok()?,
    );
    overrides::overwrites(&e, &l, false)
}

/// [`load`], with a check of the scene's size before its mesh is built (a mesh file:
/// after reading the file, before the system): first against the host memory available
/// ([`available_memory`]), then by `device` (e.g. a GPU adapter's buffer limits). A
/// shortfall is a [`SceneError::TooLarge`] naming the mesh, its size and the bytes.
pub fn load_checked(
    scene: &str,
    overrides: &[String],
    device: impl FnOnce(&SceneSize, &Config) -> Result<(), Shortfall>,
) -> Result<LoadedScene, SceneError> {
    let src = resolve(scene)?;
    let ovs = overrides
        .iter()
        .map(|a| overrides::parse(a))
        .collect::<Result<Vec<_>, _>>()?;
    let ctx = Ctx {
        origin: src.origin.clone(),
        map: SourceMap::new(&src.text),
        overrides: &ovs,
    };

    let mut table: toml::Table = toml::from_str(&src.text).map_err(|e| {
        let span = e.span();
        let line = span.as_ref().map(|s| line_of(&src.text, s.start));
        let key = span
            .as_ref()
            .map(|s| ctx.map.key_at(s))
            .filter(|k| !k.is_empty())
            .or_else(|| keys::key_on_line(&src.text, line?));
        SceneError::Syntax {
            at: Location {
                origin: src.origin.clone(),
                line,
                set_by: None,
            },
            key,
            message: e.message().trim().to_string(),
        }
    })?;
    overrides::apply(&mut table, &ovs)?;
    let resolved_toml = toml::to_string(&table).map_err(|e| SceneError::Invalid {
        at: ctx.at(""),
        key: String::new(),
        message: format!("cannot write the resolved scene: {e}"),
    })?;

    // Without overrides, deserialize the original text so spans are its own lines.
    let text = if ovs.is_empty() {
        src.text.as_str()
    } else {
        resolved_toml.as_str()
    };
    let file: SceneFile = toml::from_str(text).map_err(|e| ctx.schema(e, text, ovs.is_empty()))?;
    let name = match &file.name {
        Some(n) => {
            if let Some(message) = name::problem(n) {
                return Err(SceneError::Invalid {
                    at: ctx.at("name"),
                    key: "name".into(),
                    message: format!("{message}; it names the output folder out/<name> (use --out to write elsewhere)"),
                });
            }
            n.clone()
        }
        None => name::sanitize(&src.default_name),
    };
    // The mesh files read from disk (an embedded asset of a built-in scene is not).
    let mesh_files: Vec<PathBuf> = match (file.mesh.kind.file_format(), &file.mesh.path) {
        (Some(format), Some(p)) if !p.starts_with("builtin:") => {
            let full = src.base_dir.join(p);
            if format.is_none() && MeshFormat::from_extension(&full) == Some(MeshFormat::TetGen) {
                vec![full.with_extension("node"), full.with_extension("ele")]
            } else {
                vec![full]
            }
        }
        _ => Vec::new(),
    };
    let (system, config, output) = build(file, &ctx, &src.base_dir, device)?;
    let shown = |p: &Path| {
        std::path::absolute(p)
            .unwrap_or_else(|_| p.to_path_buf())
            .display()
            .to_string()
    };
    let mut inputs = Vec::new();
    if let Some(p) = &src.path {
        inputs.push(FileDigest::of_bytes(shown(p), src.text.as_bytes()));
    }
    for p in mesh_files {
        let digest = FileDigest::of_file(shown(&p), &p).map_err(|e| {
            ctx.mesh(MeshError::File {
                format: MeshFormat::from_extension(&p).unwrap_or(MeshFormat::Obj),
                path: p.display().to_string(),
                at: None,
                message: e.to_string(),
            })
        })?;
        inputs.push(digest);
    }
    Ok(LoadedScene {
        name,
        system,
        config,
        output,
        source: src.path,
        resolved_toml,
        inputs,
    })
}

/// Built-in scenes: (name, one-line description).
pub fn builtin_names() -> Vec<(&'static str, &'static str)> {
    builtin::BUILTINS
        .iter()
        .map(|b| (b.name, b.description))
        .collect()
}

/// A scene spelled `builtin:NAME` is the built-in scene NAME, never a file of that name.
pub const BUILTIN_PREFIX: &str = "builtin:";

/// `builtin:NAME` for a built-in scene's name that is not a file in the current folder
/// (which [`load`] would read instead), so that the run loads the built-in from anywhere;
/// anything else unchanged.
pub fn pin_builtin(scene: &str) -> String {
    if builtin::find(scene).is_some() && !Path::new(scene).is_file() {
        format!("{BUILTIN_PREFIX}{scene}")
    } else {
        scene.to_string()
    }
}

/// The TOML text of a built-in scene (e.g. to copy it as a starting point).
pub fn builtin_text(name: &str) -> Option<&'static str> {
    builtin::find(name).map(|b| b.text)
}

fn build(
    f: SceneFile,
    ctx: &Ctx,
    base_dir: &Path,
    device: impl FnOnce(&SceneSize, &Config) -> Result<(), Shortfall>,
) -> Result<(System, Config, OutputConfig), SceneError> {
    let config = settings::build_config(&f, ctx)?;
    let d = OutputConfig::default();
    let output = OutputConfig {
        every: match f.output.every.unwrap_or(d.every) {
            0 => return Err(ctx.invalid("output.every", "must be at least 1")),
            n => n,
        },
        frames: f.output.frames.unwrap_or(d.frames),
    };
    let too_large = |size: SceneSize, shortfall: Shortfall| SceneError::TooLarge {
        at: ctx.at(size.key),
        key: size.key.to_string(),
        size: Box::new(size),
        shortfall: Box::new(shortfall),
    };
    let mut device = Some(device);
    let mut check_size = |size: SceneSize| -> Result<(), SceneError> {
        let device = device.take().expect("the size is checked once");
        size::check_host(&size, available_memory())
            .and_then(|()| device(&size, &config))
            .map_err(|s| too_large(size, s))
    };
    // Past the particle limit the mesh builder refuses the mesh by its parameter, before
    // allocating; the estimate's counts and bytes would have saturated there.
    let estimated = size::estimate(&f.mesh)
        .filter(|s| s.particles <= crate::model::System::MAX_PARTICLES as u64);
    let planned = estimated.is_some();
    if let Some(size) = estimated {
        check_size(size)?;
    }
    let mesh = geometry::build_mesh(&f.mesh, ctx, base_dir)?;
    if !planned {
        let counts = crate::model::MeshCounts {
            vertices: mesh.positions.len() as u64,
            edges: mesh.edges.len() as u64,
            faces: mesh.faces.len() as u64,
        };
        check_size(SceneSize::new(f.mesh.kind, counts))?;
    }
    let system = particles::build_system(&f, mesh, ctx)?;
    initial::check(ctx, &system, &config)?;
    config.check_coulomb(&system).map_err(|e| {
        let key = Config::coulomb_error_key(&e);
        SceneError::Model {
            at: ctx.at(&key),
            key,
            source: Box::new(e),
        }
    })?;
    (config.check_external(&system)).map_err(|e| ctx.invalid(e.key, e.message))?;
    Ok((system, config, output))
}
