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
//! kind = "torus"                  # torus | icosphere | grid | lattice | obj
//! center = [0.0, 0.0, 0.0]        # where the mesh origin goes (OBJ: its bounding-box centre)
//! # torus: major_radius, minor_radius, rings, sides   icosphere: radius, subdivisions
//! # grid: size = [w, h], resolution = [nx, ny], shear = true, bending = false
//! # lattice: size = [x, y, z], resolution = [nx, ny, nz]
//! # obj: path (relative to the scene file; to the working directory for a built-in), scale = 1
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
//! samples = 2000                  # ddef: Halton samples m
//! ddef_variant = "corrected"      # ddef: corrected | paper (Algorithm 1 as printed)
//! rebuild_every = 1               # ddef: steps between tetrahedralizations
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
mod keys;
mod name;
mod overrides;
mod schema;
mod size;

pub use size::{available_memory, SceneSize, Shortfall};

use crate::config::Config;
use crate::config::{
    CoulombConfig, CoulombMethod, DdefConfig, DdefGrid, DdefVariant, ExternalCharge, ExternalField,
    Integrator, Orbit, SolverConfig, SolverMethod,
};
use crate::digest::FileDigest;
use crate::model::{mesh, Mesh, MeshError, ModelError, Spring, System, SystemDesc};
use glam::DVec3;
use keys::{line_of, SourceMap};
use overrides::Override;
use schema::*;
use std::fmt;
use std::path::{Path, PathBuf};

/// What `[output]` asks a run to write.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputConfig {
    /// Steps between frames and energy rows.
    pub every: u64,
    pub frames: FrameFormat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameFormat {
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
    /// and an OBJ mesh; each under its absolute path, with its size and SHA-256.
    pub inputs: Vec<FileDigest>,
}

/// Where in the input an error is: the file (or built-in), the line when the text sets the
/// key, and the `--set` argument when an override set it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    pub origin: String,
    pub line: Option<usize>,
    pub set_by: Option<String>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.origin)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(arg) = &self.set_by {
            write!(f, " (--set {arg})")?;
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SceneError {
    /// The scene file could not be read.
    #[error("cannot read scene file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Neither a file nor a built-in scene.
    #[error(
        "'{name}' is neither a scene file nor a built-in scene (built-in scenes: {})",
        builtins.join(", ")
    )]
    UnknownScene { name: String, builtins: Vec<String> },
    /// The text is not valid TOML.
    #[error("{at}: malformed TOML{}: {message}", key.as_ref().map(|k| format!(" at {k}")).unwrap_or_default())]
    Syntax {
        at: Location,
        key: Option<String>,
        message: String,
    },
    /// Valid TOML that does not fit the schema: unknown key, wrong type, missing key,
    /// unknown name (mesh kind, integrator...).
    #[error("{at}: {key}: {message}")]
    Schema {
        at: Location,
        key: String,
        message: String,
    },
    /// A value out of its range, or keys that conflict.
    #[error("{at}: {key}: {message}")]
    Invalid {
        at: Location,
        key: String,
        message: String,
    },
    /// The mesh could not be built (bad parameter, unreadable OBJ).
    #[error("{at}: {key}: {}", mesh_message(source))]
    Mesh {
        at: Location,
        key: String,
        /// Boxed to keep `SceneError` small.
        source: Box<MeshError>,
    },
    /// The particles and springs failed [`System::new`]'s checks.
    #[error("{at}: {key}: {source}")]
    Model {
        at: Location,
        key: String,
        /// Boxed to keep `SceneError` small.
        source: Box<ModelError>,
    },
    /// A malformed `--set` argument.
    #[error("--set {arg}: {message}")]
    Override { arg: String, message: String },
    /// The scene is too large for this machine: the estimate, made before the mesh is
    /// built, exceeds the available host memory or a GPU buffer limit.
    #[error(
        "{at}: {key}: the {} mesh has {} particles and {} springs: {shortfall}",
        size.mesh, size.particles, size.springs
    )]
    TooLarge {
        at: Location,
        key: String,
        /// Boxed to keep `SceneError` small.
        size: Box<SceneSize>,
        shortfall: Box<Shortfall>,
    },
}

impl SceneError {
    /// The dotted key the error is about, when it has one.
    pub fn key(&self) -> Option<&str> {
        match self {
            Self::Syntax { key, .. } => key.as_deref(),
            Self::Schema { key, .. }
            | Self::Invalid { key, .. }
            | Self::Mesh { key, .. }
            | Self::Model { key, .. }
            | Self::TooLarge { key, .. } => Some(key),
            _ => None,
        }
    }
    /// The line in the scene text, when known.
    pub fn line(&self) -> Option<usize> {
        match self {
            Self::Syntax { at, .. }
            | Self::Schema { at, .. }
            | Self::Invalid { at, .. }
            | Self::Mesh { at, .. }
            | Self::Model { at, .. }
            | Self::TooLarge { at, .. } => at.line,
            _ => None,
        }
    }
}

fn mesh_message(e: &MeshError) -> String {
    match e {
        // The key already names the parameter.
        MeshError::BadParameter { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// Loads a scene from a path or a built-in name, applying `key=value` overrides.
///
/// An existing file wins over a built-in of the same name. Overrides are applied in order
/// to the parsed table (`integrator.dt=0.15`, `integrator.solver.method=cg`,
/// `mesh.resolution=[64, 64]`, `external_charges[0].charge=-1e-6`); a value that is not
/// valid TOML is taken as a string. Setting `mesh.kind` or `external_field.kind` to a new
/// kind drops the file's keys that only the old kind reads.
pub fn load(scene: &str, overrides: &[String]) -> Result<LoadedScene, SceneError> {
    load_checked(scene, overrides, |_, _| Ok(()))
}

/// [`load`], with a check of the scene's size before its mesh is built (an OBJ mesh:
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
    let obj = match (file.mesh.kind, &file.mesh.path) {
        (MeshKind::Obj, Some(p)) => Some(src.base_dir.join(p)),
        _ => None,
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
    if let Some(p) = obj {
        let digest = FileDigest::of_file(shown(&p), &p).map_err(|e| {
            ctx.mesh(MeshError::Obj {
                path: p.display().to_string(),
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

/// The TOML text of a built-in scene (e.g. to copy it as a starting point).
pub fn builtin_text(name: &str) -> Option<&'static str> {
    builtin::find(name).map(|b| b.text)
}

struct Source {
    text: String,
    origin: String,
    path: Option<PathBuf>,
    base_dir: PathBuf,
    default_name: String,
}

fn resolve(scene: &str) -> Result<Source, SceneError> {
    let path = Path::new(scene);
    let read = |path: &Path| -> Result<Source, SceneError> {
        let text = std::fs::read_to_string(path).map_err(|source| SceneError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(Source {
            text,
            origin: path.display().to_string(),
            path: Some(path.to_path_buf()),
            base_dir: path.parent().map(Path::to_path_buf).unwrap_or_default(),
            default_name: path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| scene.to_string()),
        })
    };
    if path.is_file() {
        return read(path);
    }
    if let Some(b) = builtin::find(scene) {
        return Ok(Source {
            text: b.text.to_string(),
            origin: format!("built-in scene '{}'", b.name),
            path: None,
            base_dir: PathBuf::new(),
            default_name: b.name.to_string(),
        });
    }
    let looks_like_path = scene.ends_with(".toml")
        || scene.contains('/')
        || scene.contains(std::path::MAIN_SEPARATOR)
        || path.exists();
    if looks_like_path {
        return read(path);
    }
    Err(SceneError::UnknownScene {
        name: scene.to_string(),
        builtins: builtin::BUILTINS
            .iter()
            .map(|b| b.name.to_string())
            .collect(),
    })
}

/// What error construction needs: where the text came from and which keys `--set` set.
struct Ctx<'a> {
    origin: String,
    map: SourceMap<'a>,
    overrides: &'a [Override],
}

impl Ctx<'_> {
    /// The location of `key`: the `--set` that set it, else its line in the file.
    fn at(&self, key: &str) -> Location {
        let set_by = self
            .overrides
            .iter()
            .rev()
            .find(|o| {
                let k = o.key();
                key == k || key.starts_with(&format!("{k}.")) || key.starts_with(&format!("{k}["))
            })
            .map(|o| o.arg.clone());
        let line = if set_by.is_some() {
            None
        } else {
            self.map.line(key)
        };
        Location {
            origin: self.origin.clone(),
            line,
            set_by,
        }
    }

    fn invalid(&self, key: impl Into<String>, message: impl Into<String>) -> SceneError {
        let key = key.into();
        SceneError::Invalid {
            at: self.at(&key),
            key,
            message: message.into(),
        }
    }

    /// A serde error from deserializing `text`: find the key from the error's span.
    fn schema(&self, e: toml::de::Error, text: &str, original: bool) -> SceneError {
        let message = e.message().trim().to_string();
        let mut key = match e.span() {
            Some(span) => SourceMap::new(text).key_at(&span),
            None => String::new(),
        };
        // "missing field `x`" points at the table that lacks it.
        if let Some(field) = message
            .strip_prefix("missing field `")
            .and_then(|r| r.split('`').next())
        {
            key = if key.is_empty() {
                field.to_string()
            } else {
                format!("{key}.{field}")
            };
        }
        let mut at = self.at(&key);
        if original && at.line.is_none() {
            // Keys the map cannot place (e.g. a missing top-level key): the error's own span.
            at.line = e.span().map(|s| line_of(text, s.start));
        }
        SceneError::Schema { at, key, message }
    }

    fn mesh(&self, e: MeshError) -> SceneError {
        let key = match &e {
            MeshError::BadParameter { param, .. } => format!("mesh.{param}"),
            _ => "mesh.path".to_string(),
        };
        SceneError::Mesh {
            at: self.at(&key),
            key,
            source: Box::new(e),
        }
    }
}

/// A finite 3-vector; the error names the component (`gravity[2]`).
fn finite3(ctx: &Ctx, key: &str, v: [f64; 3]) -> Result<DVec3, SceneError> {
    match (0..3).find(|&k| !v[k].is_finite()) {
        None => Ok(DVec3::from_array(v)),
        Some(k) => Err(ctx.invalid(
            format!("{key}[{k}]"),
            format!("must be finite, got {}", crate::display::num(v[k])),
        )),
    }
}

fn check(ctx: &Ctx, key: &str, v: f64, ok: bool, range: &str) -> Result<f64, SceneError> {
    if ok && v.is_finite() {
        Ok(v)
    } else {
        Err(ctx.invalid(
            key,
            format!("must be {range}, got {}", crate::display::num(v)),
        ))
    }
}

fn positive(ctx: &Ctx, key: &str, v: f64) -> Result<f64, SceneError> {
    check(ctx, key, v, v > 0.0, "positive and finite")
}

fn non_negative(ctx: &Ctx, key: &str, v: f64) -> Result<f64, SceneError> {
    check(ctx, key, v, v >= 0.0, "finite and non-negative")
}

/// At most one of two alternative keys.
fn one_of<T>(ctx: &Ctx, a: (&str, Option<T>), b: (&str, Option<T>)) -> Result<(), SceneError> {
    if a.1.is_some() && b.1.is_some() {
        return Err(ctx.invalid(b.0, format!("give {} or {}, not both", a.0, b.0)));
    }
    Ok(())
}

fn build(
    f: SceneFile,
    ctx: &Ctx,
    base_dir: &Path,
    device: impl FnOnce(&SceneSize, &Config) -> Result<(), Shortfall>,
) -> Result<(System, Config, OutputConfig), SceneError> {
    let config = build_config(&f, ctx)?;
    let output = OutputConfig {
        every: match f.output.every.unwrap_or(10) {
            0 => return Err(ctx.invalid("output.every", "must be at least 1")),
            n => n,
        },
        frames: match f.output.frames.unwrap_or(FramesName::Ply) {
            FramesName::Ply => FrameFormat::Ply,
            FramesName::None => FrameFormat::None,
        },
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
    let estimated = size::estimate(&f.mesh);
    let planned = estimated.is_some();
    if let Some(size) = estimated {
        check_size(size)?;
    }
    let mesh = build_mesh(&f.mesh, ctx, base_dir)?;
    if !planned {
        let counts = crate::model::MeshCounts {
            vertices: mesh.positions.len() as u64,
            edges: mesh.edges.len() as u64,
            faces: mesh.faces.len() as u64,
        };
        check_size(SceneSize::new(f.mesh.kind, counts))?;
    }
    let system = build_system(&f, mesh, ctx)?;
    config.check_coulomb(&system).map_err(|e| {
        let key = Config::coulomb_error_key(&e);
        SceneError::Model {
            at: ctx.at(&key),
            key,
            source: Box::new(e),
        }
    })?;
    Ok((system, config, output))
}

fn build_config(f: &SceneFile, ctx: &Ctx) -> Result<Config, SceneError> {
    let it = &f.integrator;
    let integrator = match it.method.unwrap_or(IntegratorName::Imex) {
        IntegratorName::Imex => Integrator::Imex,
        IntegratorName::LocalGlobal => Integrator::LocalGlobal,
        IntegratorName::SymplecticEuler => Integrator::SymplecticEuler,
        IntegratorName::Verlet => Integrator::Verlet,
    };
    let dt = it.dt.unwrap_or(0.015);
    let steps = match (it.duration, it.steps) {
        (Some(_), Some(_)) => {
            return Err(ctx.invalid(
                "integrator.steps",
                "give integrator.duration or integrator.steps, not both",
            ))
        }
        (None, None) => {
            return Err(ctx.invalid(
                "integrator.duration",
                "give integrator.duration (s) or integrator.steps",
            ))
        }
        (None, Some(n)) => n,
        (Some(d), None) => {
            positive(ctx, "integrator.duration", d)?;
            if dt.is_finite() && dt > 0.0 {
                // The small offset keeps 15 s / 0.015 s at 1000 steps despite rounding.
                let n = (d / dt - 1e-9).ceil();
                if n > 1e15 {
                    return Err(ctx.invalid(
                        "integrator.duration",
                        format!("{d} s at dt = {dt} s is more than 1e15 steps"),
                    ));
                }
                (n as u64).max(1)
            } else {
                1 // Config::validate reports the bad dt.
            }
        }
    };
    let mut solver = SolverConfig::default();
    if let Some(s) = &it.solver {
        if let Some(m) = s.method {
            solver.method = match m {
                SolverName::Jacobi => SolverMethod::Jacobi,
                SolverName::BlockJacobi => SolverMethod::BlockJacobi,
                SolverName::Chebyshev => SolverMethod::Chebyshev,
                SolverName::Cg => SolverMethod::Cg,
            };
        }
        solver.iterations = s.iterations.unwrap_or(solver.iterations);
        solver.omega = s.omega.unwrap_or(solver.omega);
        solver.tolerance = s.tolerance.unwrap_or(solver.tolerance);
        solver.rho = s.rho.or(solver.rho);
    }
    let c = &f.coulomb;
    let method = match c.method.unwrap_or(CoulombName::AllPairs) {
        CoulombName::AllPairs => CoulombMethod::AllPairs,
        CoulombName::None => CoulombMethod::None,
        CoulombName::Ddef => {
            let d = DdefConfig::default();
            CoulombMethod::Ddef(DdefConfig {
                samples: c.samples.unwrap_or(d.samples),
                variant: match c.ddef_variant {
                    None => d.variant,
                    Some(DdefVariantName::Paper) => DdefVariant::Paper,
                    Some(DdefVariantName::Corrected) => DdefVariant::Corrected,
                },
                rebuild_every: c.rebuild_every.unwrap_or(d.rebuild_every),
                grid: match c.ddef_grid {
                    None => d.grid,
                    Some(DdefGridName::Delaunay) => DdefGrid::Delaunay,
                    Some(DdefGridName::Lattice) => DdefGrid::Lattice,
                },
            })
        }
    };
    if method.ddef().is_none() {
        let given = [
            ("samples", c.samples.is_some()),
            ("ddef_variant", c.ddef_variant.is_some()),
            ("rebuild_every", c.rebuild_every.is_some()),
            ("ddef_grid", c.ddef_grid.is_some()),
        ];
        if let Some((k, _)) = given.iter().find(|(_, set)| *set) {
            return Err(ctx.invalid(
                format!("coulomb.{k}"),
                format!(
                    "only used with method = \"ddef\" (method is \"{}\")",
                    method.name()
                ),
            ));
        }
    }
    let coulomb = CoulombConfig {
        method,
        softening: c.softening.unwrap_or(0.0),
    };
    let mut external_charges = Vec::with_capacity(f.external_charges.len());
    for (k, c) in f.external_charges.iter().enumerate() {
        let orbit = match &c.orbit {
            None => None,
            Some(o) => {
                let key = format!("external_charges[{k}].orbit.axis");
                let axis = DVec3::from_array(o.axis.unwrap_or([0.0, 0.0, 1.0]));
                let len = axis.length();
                if !(len.is_finite() && len > 0.0) {
                    return Err(ctx.invalid(key, "must be a non-zero finite vector"));
                }
                Some(Orbit {
                    center: DVec3::from_array(o.center.unwrap_or([0.0; 3])),
                    axis: axis / len,
                    angular_velocity: o.angular_velocity,
                })
            }
        };
        external_charges.push(ExternalCharge {
            charge: c.charge,
            position: DVec3::from_array(c.position),
            orbit,
        });
    }
    let external_field = match &f.external_field {
        None => None,
        Some(e) => {
            let used = e.kind.keys();
            for (k, set) in [
                ("value", e.value.is_some()),
                ("scale", e.scale.is_some()),
                ("min_z", e.min_z.is_some()),
            ] {
                if set && !used.contains(&k) {
                    return Err(ctx.invalid(
                        format!("external_field.{k}"),
                        format!(
                            "not used by kind = \"{}\" (it reads {})",
                            e.kind.name(),
                            used.join(", ")
                        ),
                    ));
                }
            }
            Some(match e.kind {
                FieldKind::Uniform => {
                    ExternalField::Uniform(DVec3::from_array(e.value.unwrap_or([0.0; 3])))
                }
                FieldKind::Swirl => ExternalField::Swirl {
                    scale: e.scale.unwrap_or(1.0),
                    min_z: e.min_z.unwrap_or(ExternalField::DEFAULT_MIN_Z),
                },
                FieldKind::Vortex => ExternalField::Vortex {
                    scale: e.scale.unwrap_or(1.0),
                    min_z: e.min_z.unwrap_or(ExternalField::DEFAULT_MIN_Z),
                },
            })
        }
    };
    let config = Config {
        integrator,
        dt,
        steps,
        solver,
        local_global_iterations: it.local_global_iterations.unwrap_or(10),
        gravity: DVec3::from_array(f.gravity.unwrap_or([0.0; 3])),
        coulomb,
        external_charges,
        external_field,
    };
    config
        .validate()
        .map_err(|e| ctx.invalid(e.key, e.message))?;
    Ok(config)
}

fn build_mesh(m: &MeshSpec, ctx: &Ctx, base_dir: &Path) -> Result<Mesh, SceneError> {
    let kind = m.kind;
    let used = kind.keys();
    let given = [
        ("major_radius", m.major_radius.is_some()),
        ("minor_radius", m.minor_radius.is_some()),
        ("rings", m.rings.is_some()),
        ("sides", m.sides.is_some()),
        ("radius", m.radius.is_some()),
        ("subdivisions", m.subdivisions.is_some()),
        ("size", m.size.is_some()),
        ("resolution", m.resolution.is_some()),
        ("shear", m.shear.is_some()),
        ("bending", m.bending.is_some()),
        ("path", m.path.is_some()),
        ("scale", m.scale.is_some()),
    ];
    for (k, set) in given {
        if set && !used.contains(&k) {
            return Err(ctx.invalid(
                format!("mesh.{k}"),
                format!(
                    "not used by kind = \"{}\" (it reads {})",
                    kind.name(),
                    used.join(", ")
                ),
            ));
        }
    }
    fn req<T: Clone>(ctx: &Ctx, kind: MeshKind, key: &str, v: &Option<T>) -> Result<T, SceneError> {
        v.clone().ok_or_else(|| {
            ctx.invalid(
                format!("mesh.{key}"),
                format!("required by kind = \"{}\"", kind.name()),
            )
        })
    }
    fn fixed<T: Copy, const N: usize>(
        ctx: &Ctx,
        key: &str,
        v: Vec<T>,
        what: &str,
    ) -> Result<[T; N], SceneError> {
        let len = v.len();
        <[T; N]>::try_from(v).map_err(|_| {
            ctx.invalid(
                format!("mesh.{key}"),
                format!("expected {N} values ({what}), got {len}"),
            )
        })
    }
    let center = finite3(ctx, "mesh.center", m.center.unwrap_or([0.0; 3]))?;
    let mut mesh = match kind {
        MeshKind::Torus => mesh::torus(
            req(ctx, kind, "major_radius", &m.major_radius)?,
            req(ctx, kind, "minor_radius", &m.minor_radius)?,
            req(ctx, kind, "rings", &m.rings)?,
            req(ctx, kind, "sides", &m.sides)?,
        ),
        MeshKind::Icosphere => mesh::icosphere(
            req(ctx, kind, "radius", &m.radius)?,
            req(ctx, kind, "subdivisions", &m.subdivisions)?,
        ),
        MeshKind::Grid => mesh::grid(
            fixed(ctx, "size", req(ctx, kind, "size", &m.size)?, "[w, h]")?,
            fixed(
                ctx,
                "resolution",
                req(ctx, kind, "resolution", &m.resolution)?,
                "[nx, ny]",
            )?,
            m.shear.unwrap_or(true),
            m.bending.unwrap_or(false),
        ),
        MeshKind::Lattice => mesh::lattice(
            fixed(ctx, "size", req(ctx, kind, "size", &m.size)?, "[x, y, z]")?,
            fixed(
                ctx,
                "resolution",
                req(ctx, kind, "resolution", &m.resolution)?,
                "[nx, ny, nz]",
            )?,
        ),
        MeshKind::Obj => {
            let path = req(ctx, kind, "path", &m.path)?;
            let full = base_dir.join(path);
            mesh::obj(&full, m.scale.unwrap_or(1.0))
        }
    }
    .map_err(|e| ctx.mesh(e))?;
    let shift = if kind == MeshKind::Obj {
        let lo = mesh
            .positions
            .iter()
            .fold(DVec3::INFINITY, |a, &p| a.min(p));
        let hi = mesh
            .positions
            .iter()
            .fold(DVec3::NEG_INFINITY, |a, &p| a.max(p));
        center - 0.5 * (lo + hi)
    } else {
        center
    };
    for p in &mut mesh.positions {
        *p += shift;
    }
    check_extent(
        &mesh,
        ctx,
        if kind == MeshKind::Obj {
            "mesh.scale"
        } else {
            "mesh"
        },
    )?;
    Ok(mesh)
}

/// A mesh whose coordinates or edge lengths overflow f64 (`mesh.scale = 1e300`) is the
/// mesh's fault, named at `key`, not the rest lengths' that derive from it.
fn check_extent(mesh: &Mesh, ctx: &Ctx, key: &str) -> Result<(), SceneError> {
    let p = &mesh.positions;
    if let Some(i) = p.iter().position(|x| !x.is_finite()) {
        return Err(ctx.invalid(
            key,
            format!("vertex {i} is not finite once scaled and placed ({})", p[i]),
        ));
    }
    for (k, &[a, b]) in mesh.edges.iter().enumerate() {
        let length = (p[b as usize] - p[a as usize]).length();
        if !length.is_finite() {
            return Err(ctx.invalid(
                key,
                format!(
                    "edge {k} (vertices {a} and {b}) is longer than f64 can hold: the mesh is too large"
                ),
            ));
        }
    }
    Ok(())
}

/// Particle `i` is charged iff floor((i+1) f) > floor(i f): floor(n f) charged particles,
/// spread evenly and deterministically.
fn is_charged(i: usize, fraction: f64) -> bool {
    ((i + 1) as f64 * fraction).floor() > (i as f64 * fraction).floor()
}

fn build_system(f: &SceneFile, mesh: Mesh, ctx: &Ctx) -> Result<System, SceneError> {
    let n = mesh.positions.len();
    let mat = &f.material;

    one_of(
        ctx,
        ("material.mass", mat.mass),
        ("material.total_mass", mat.total_mass),
    )?;
    let (mass_key, mass) = match mat.total_mass {
        Some(total) => (
            "material.total_mass",
            positive(ctx, "material.total_mass", total)? / n as f64,
        ),
        None => (
            "material.mass",
            positive(ctx, "material.mass", mat.mass.unwrap_or(0.01))?,
        ),
    };
    let stiffness = non_negative(ctx, "material.stiffness", mat.stiffness.unwrap_or(10.0))?;
    let damping = non_negative(ctx, "material.damping", mat.damping.unwrap_or(0.0))?;
    let scale = positive(
        ctx,
        "material.rest_length_scale",
        mat.rest_length_scale.unwrap_or(1.0),
    )?;
    let fraction = mat.charged_fraction.unwrap_or(1.0);
    check(
        ctx,
        "material.charged_fraction",
        fraction,
        (0.0..=1.0).contains(&fraction),
        "in [0, 1]",
    )?;
    one_of(
        ctx,
        ("material.charge", mat.charge),
        ("material.total_charge", mat.total_charge),
    )?;
    let charged: Vec<bool> = (0..n).map(|i| is_charged(i, fraction)).collect();
    let n_charged = charged.iter().filter(|&&c| c).count();
    let (charge_key, q) = match mat.total_charge {
        Some(total) => {
            let key = "material.total_charge";
            check(ctx, key, total, true, "finite")?;
            if n_charged == 0 {
                if total != 0.0 {
                    return Err(ctx.invalid(
                        key,
                        "no particle is charged (material.charged_fraction is too small)",
                    ));
                }
                (key, 0.0)
            } else {
                (key, total / n_charged as f64)
            }
        }
        None => {
            let key = "material.charge";
            (
                key,
                check(ctx, key, mat.charge.unwrap_or(0.0), true, "finite")?,
            )
        }
    };
    let charges = charged.iter().map(|&c| if c { q } else { 0.0 }).collect();

    let mut pinned = vec![false; n];
    let mut velocities = vec![DVec3::ZERO; n];
    if let Some(pin) = &f.pin {
        if pin.indices.is_empty() && pin.where_.is_none() {
            return Err(ctx.invalid("pin", "give pin.indices and/or pin.where"));
        }
        for (k, &i) in pin.indices.iter().enumerate() {
            if i >= n as u64 {
                return Err(ctx.invalid(
                    format!("pin.indices[{k}]"),
                    format!("particle {i} is out of range (the mesh has {n} particles)"),
                ));
            }
            pinned[i as usize] = true;
        }
        if let Some(w) = pin.where_ {
            for i in select(&mesh.positions, w) {
                pinned[i] = true;
            }
        }
        let v = finite3(ctx, "pin.velocity", pin.velocity.unwrap_or([0.0; 3]))?;
        for (vel, _) in velocities.iter_mut().zip(&pinned).filter(|(_, &p)| p) {
            *vel = v;
        }
    }

    let springs = mesh
        .edges
        .iter()
        .map(|&[i, j]| Spring {
            i,
            j,
            stiffness,
            rest_length: scale * (mesh.positions[i as usize] - mesh.positions[j as usize]).length(),
            damping,
        })
        .collect();
    let desc = SystemDesc {
        positions: mesh.positions,
        velocities,
        masses: vec![mass; n],
        charges,
        pinned,
        springs,
        faces: mesh.faces,
    };
    System::new(desc).map_err(|e| {
        let key = match &e {
            ModelError::BadMass { .. } => mass_key,
            ModelError::NonFinite {
                what: "velocity", ..
            } => "pin.velocity",
            ModelError::NonFinite { what: "charge", .. } => charge_key,
            ModelError::BadSpringParameter {
                what: "stiffness", ..
            } => "material.stiffness",
            ModelError::BadSpringParameter {
                what: "damping", ..
            } => "material.damping",
            ModelError::BadSpringParameter { .. } => "material.rest_length_scale",
            _ => "mesh",
        };
        SceneError::Model {
            at: ctx.at(key),
            key: key.to_string(),
            source: Box::new(e),
        }
    })
}

/// Particles selected by `pin.where`. Coordinates within 1e-9 of the extent of the extreme
/// count as on it, so a row computed with rounding is still one row.
fn select(x: &[DVec3], w: PinWhere) -> Vec<usize> {
    let lo = x.iter().fold(DVec3::INFINITY, |a, &p| a.min(p));
    let hi = x.iter().fold(DVec3::NEG_INFINITY, |a, &p| a.max(p));
    let tol = 1e-9 * (hi - lo).max_element().max(f64::MIN_POSITIVE);
    let extreme = |axis: usize, max: bool| -> Vec<usize> {
        let target = if max { hi[axis] } else { lo[axis] };
        (0..x.len())
            .filter(|&i| (x[i][axis] - target).abs() <= tol)
            .collect()
    };
    match w {
        PinWhere::MaxX => extreme(0, true),
        PinWhere::MinX => extreme(0, false),
        PinWhere::MaxY => extreme(1, true),
        PinWhere::MinY => extreme(1, false),
        PinWhere::MaxZ => extreme(2, true),
        PinWhere::MinZ => extreme(2, false),
        PinWhere::CornersMaxY => {
            let top = extreme(1, true);
            // First index wins ties, so the choice is deterministic.
            let left = top
                .iter()
                .copied()
                .min_by(|&a, &b| x[a].x.total_cmp(&x[b].x));
            let right = top
                .iter()
                .copied()
                .rev()
                .max_by(|&a, &b| x[a].x.total_cmp(&x[b].x));
            let mut out: Vec<usize> = left.into_iter().chain(right).collect();
            out.dedup();
            out
        }
    }
}
