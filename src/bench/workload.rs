//! The standard benchmark workloads: a hanging cloth (springs, IMEX, a fixed number of
//! Jacobi sweeps, optionally some charges), a pure all-pairs Coulomb cloud (uniform in a
//! cube, or crowded onto a surface: [`Cloud`]), and batches of small worlds (the built-in
//! torus or a small cloth) with parameters varied per world. A size's host memory is
//! estimated and checked before its arrays are allocated ([`check_host_memory`]).

use crate::config::{
    Config, CoulombConfig, CoulombMethod, DdefConfig, DdefVariant, Integrator, SolverConfig,
    SolverMethod,
};
use crate::model::{mesh, MeshCounts, ModelError, Spring, System, SystemDesc};
use crate::scene::{available_memory, check_host, SceneSize, Shortfall};
use glam::DVec3;

/// Which workload a record measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// Cloth grid: structural + shear springs, IMEX with fixed-count Jacobi.
    Cloth,
    /// Random charges in a cube, no springs, all-pairs Coulomb (symplectic Euler).
    Coulomb,
    /// The Coulomb cloud with the DDEF far field (`coulomb.samples` = m) instead of
    /// all-pairs: one row per size and m.
    Ddef,
    /// W small worlds ([`WorldScene`]) with varied parameters, stepped as one GPU batch and
    /// one after another: one row per world scene and W.
    Worlds,
    /// A mesh file (`--mesh FILE`, any format `mesh.kind` reads) with the cloth's material
    /// and solver settings: one row, with the time the file took to load.
    Mesh,
}

impl Workload {
    pub fn name(self) -> &'static str {
        match self {
            Self::Cloth => "cloth",
            Self::Coulomb => "coulomb",
            Self::Ddef => "ddef",
            Self::Worlds => "worlds",
            Self::Mesh => "mesh",
        }
    }
}

/// What each world of the worlds workload is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WorldScene {
    /// The built-in `torus` scene (145 charged particles, IMEX, 50 Jacobi sweeps).
    Torus,
    /// The cloth workload's grid at [`WORLD_CLOTH_PARTICLES`] particles.
    Cloth,
}

impl WorldScene {
    pub const ALL: [Self; 2] = [Self::Torus, Self::Cloth];

    pub fn name(self) -> &'static str {
        match self {
            Self::Torus => "torus",
            Self::Cloth => "cloth",
        }
    }
}

/// Where the Coulomb and DDEF workloads' charges lie (`--cloud`): uniform in the 1 m cube,
/// or crowded onto a surface inside it, where a DDEF lattice cell holds several times the
/// mean count. Every shape draws the same random numbers, so the signs are the cube's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Cloud {
    /// Uniform in the cube.
    #[default]
    Cube,
    /// On a sphere of radius 0.5 m, uniform in area.
    Sphere,
    /// On a torus of radii 0.35 and 0.12 m (uniform in its two angles).
    Torus,
    /// On a wavy 1 m square sheet (a cloth's shape: height 0.05 sin(4 pi u) cos(2 pi v)).
    Sheet,
}

impl Cloud {
    pub const ALL: [Self; 4] = [Self::Cube, Self::Sphere, Self::Torus, Self::Sheet];

    pub fn name(self) -> &'static str {
        match self {
            Self::Cube => "cube",
            Self::Sphere => "sphere",
            Self::Torus => "torus",
            Self::Sheet => "sheet",
        }
    }

    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.name() == s)
    }

    /// The point of this shape for a uniform point `p` of the cube about the origin
    /// (its x and y parametrize a surface).
    fn place(self, p: DVec3) -> DVec3 {
        let tau = std::f64::consts::TAU;
        let (u, v) = (p.x + 0.5, p.y + 0.5);
        match self {
            Self::Cube => p,
            Self::Sphere => {
                let z = 2.0 * u - 1.0;
                let r = (1.0 - z * z).max(0.0).sqrt();
                0.5 * DVec3::new(r * (tau * v).cos(), r * (tau * v).sin(), z)
            }
            Self::Torus => {
                let (a, b) = (tau * u, tau * v);
                let ring = 0.35 + 0.12 * b.cos();
                DVec3::new(ring * a.cos(), ring * a.sin(), 0.12 * b.sin())
            }
            Self::Sheet => DVec3::new(
                u - 0.5,
                v - 0.5,
                0.05 * (2.0 * tau * u).sin() * (tau * v).cos(),
            ),
        }
    }
}

/// A built workload.
#[derive(Clone, Debug)]
pub struct Built {
    pub system: System,
    pub config: Config,
    /// Cloth: vertices along x and y.
    pub grid: Option<[u32; 2]>,
}

/// Why a workload could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkloadError {
    #[error("size {n}: a cloth needs at least 4 particles (a 2 x 2 grid)")]
    ClothTooSmall { n: usize },
    #[error("size {n}: the Coulomb workload needs at least 2 charges")]
    CoulombTooSmall { n: usize },
    #[error("DDEF samples {samples} exceed the limit {}", DdefConfig::MAX_SAMPLES)]
    TooManySamples { samples: usize },
    #[error("size {n}: {source}")]
    Mesh {
        n: usize,
        #[source]
        source: mesh::MeshError,
    },
    #[error("{0}")]
    MeshFile(mesh::MeshError),
    #[error("the mesh workload needs a file (--mesh FILE)")]
    NoMeshFile,
    #[error("the built-in torus scene: {0}")]
    Scene(String),
    #[error("size {n}: {source}")]
    Model {
        n: usize,
        #[source]
        source: ModelError,
    },
    /// More host memory than is available, found before the arrays are allocated (a
    /// failed allocation aborts the process): the workload, its size and the bytes.
    #[error("size {n}: {shortfall}")]
    HostMemory {
        workload: Workload,
        n: usize,
        shortfall: Box<Shortfall>,
    },
}

/// The counts of `workload` at size `n` before it is built, as the scene loader sizes a
/// mesh; None for the worlds and mesh workloads (their size is not n) and for a cloth too
/// small to build.
fn workload_size(workload: Workload, n: usize) -> Option<SceneSize> {
    let c = match workload {
        Workload::Cloth => MeshCounts::grid(grid_shape(n)?, true, false),
        Workload::Coulomb | Workload::Ddef => MeshCounts {
            vertices: n as u64,
            ..MeshCounts::default()
        },
        Workload::Worlds | Workload::Mesh => return None,
    };
    Some(SceneSize {
        mesh: workload.name(),
        key: "--sizes",
        particles: c.vertices,
        springs: c.edges,
        faces: c.faces,
    })
}

/// Estimated host bytes of `workload` at size `n`, with the scene loader's figures per
/// particle, spring and triangle ([`SceneSize::host_bytes`]: the system, a backend's copy
/// of it and the CPU reference's working set); None for the worlds and mesh workloads
/// (their size is not n) and for a cloth too small to build.
pub fn host_bytes(workload: Workload, n: usize) -> Option<u64> {
    workload_size(workload, n).map(|s| s.host_bytes())
}

/// [`host_bytes`] against the host memory available (`MemAvailable`; not checked where
/// it cannot be read), so a size too large is refused by its size instead of aborting
/// the process at its first large allocation.
pub fn check_host_memory(workload: Workload, n: usize) -> Result<(), WorkloadError> {
    check_host_memory_within(workload, n, available_memory())
}

/// [`check_host_memory`] against `available` bytes (None: unknown, not checked), by the
/// scene loader's own check ([`check_host`]).
fn check_host_memory_within(
    workload: Workload,
    n: usize,
    available: Option<u64>,
) -> Result<(), WorkloadError> {
    let Some(size) = workload_size(workload, n) else {
        return Ok(());
    };
    check_host(&size, available).map_err(|mut shortfall| {
        shortfall.what = format!(
            "the {} workload (host memory, MemAvailable)",
            workload.name()
        );
        WorkloadError::HostMemory {
            workload,
            n,
            shortfall: Box::new(shortfall),
        }
    })
}

/// Cloth side lengths (m), spring constants and the time step: a 1 m square of 0.5 kg
/// hanging from its two top corners; any size stays finite under the fixed sweep count
/// because the springs are implicit.
const CLOTH_SIZE: f64 = 1.0;
const CLOTH_MASS: f64 = 0.5;
const CLOTH_STIFFNESS: f64 = 1000.0;
const CLOTH_DAMPING: f64 = 0.1;
const CLOTH_DT: f64 = 0.01;
/// Total charge of the charged cloth particles (C), shared equally: the Coulomb
/// acceleration stays ~0.07 / F m/s^2 whatever the size.
const CLOTH_CHARGE: f64 = 1e-6;
/// Coulomb cloud: 1 m cube, 1 kg and 1 uC of total |charge|, softened at 1 mm so that
/// random close pairs stay bounded, explicit steps of 1 ms.
const CLOUD_SIZE: f64 = 1.0;
const CLOUD_MASS: f64 = 1.0;
const CLOUD_CHARGE: f64 = 1e-6;
const CLOUD_SOFTENING: f64 = 1e-3;
const CLOUD_DT: f64 = 1e-3;
/// Seed of the cloud's positions and signs (runs are reproducible).
const CLOUD_SEED: u64 = 0x6d73_635f_6265_6e63;

/// Grid shape for about `n` vertices: the divisor pair of `n` closest to square when it is
/// no more elongated than 4:1 (exactly `n` vertices), else the nearest square-ish grid.
pub fn grid_shape(n: usize) -> Option<[u32; 2]> {
    if n < 4 {
        return None;
    }
    let root = (n as f64).sqrt().floor() as usize;
    let side = (1..=root).rev().find(|d| n.is_multiple_of(*d)).unwrap_or(1);
    let (nx, ny) = if side >= 2 && 4 * side >= n / side {
        (n / side, side)
    } else {
        let nx = (n as f64).sqrt().round().max(2.0) as usize;
        (nx, (n as f64 / nx as f64).round().max(2.0) as usize)
    };
    Some([u32::try_from(nx).ok()?, u32::try_from(ny).ok()?])
}

/// Whether particle `i` of `n` is charged at fraction `f`: evenly spread, exactly
/// round(f n) of them (the counter floor(f i) steps up at each charged one).
fn charged_at(i: usize, f: f64) -> bool {
    (f * (i + 1) as f64).floor() > (f * i as f64).floor()
}

/// The cloth workload with about `n` particles (see [`grid_shape`]).
pub fn cloth(n: usize, sweeps: u32, charged_fraction: f64) -> Result<Built, WorkloadError> {
    let [nx, ny] = grid_shape(n).ok_or(WorkloadError::ClothTooSmall { n })?;
    check_host_memory(Workload::Cloth, n)?;
    let m = mesh::grid([CLOTH_SIZE, CLOTH_SIZE], [nx, ny], true, false)
        .map_err(|source| WorkloadError::Mesh { n, source })?;
    let count = m.positions.len();
    let mut pinned = vec![false; count];
    let top = (ny as usize - 1) * nx as usize;
    pinned[top] = true;
    pinned[top + nx as usize - 1] = true;
    let mut built = cloth_material(m, pinned, sweeps, charged_fraction)
        .map_err(|source| WorkloadError::Model { n, source })?;
    built.grid = Some([nx, ny]);
    Ok(built)
}

/// The mesh workload: the file at `path` (format by extension, as [`mesh::load_file`]
/// reads it) with the cloth's material, unpinned; and the seconds loading it took.
pub fn mesh_file(
    path: &std::path::Path,
    sweeps: u32,
    charged_fraction: f64,
) -> Result<(Built, f64), WorkloadError> {
    let start = std::time::Instant::now();
    let m = mesh::load_file(path, None, &mesh::FileOptions::default())
        .map_err(WorkloadError::MeshFile)?;
    let seconds = start.elapsed().as_secs_f64();
    let n = m.positions.len();
    let pinned = vec![false; n];
    let built = cloth_material(m, pinned, sweeps, charged_fraction)
        .map_err(|source| WorkloadError::Model { n, source })?;
    Ok((built, seconds))
}

/// A mesh with the cloth workload's springs, masses, charges and IMEX + Jacobi settings.
fn cloth_material(
    m: mesh::Mesh,
    pinned: Vec<bool>,
    sweeps: u32,
    charged_fraction: f64,
) -> Result<Built, ModelError> {
    let count = m.positions.len();
    let springs = m
        .edges
        .iter()
        .map(|&[i, j]| Spring {
            i,
            j,
            stiffness: CLOTH_STIFFNESS,
            rest_length: (m.positions[j as usize] - m.positions[i as usize]).length(),
            damping: CLOTH_DAMPING,
        })
        .collect();
    let charged: Vec<bool> = (0..count)
        .map(|i| charged_at(i, charged_fraction))
        .collect();
    let nc = charged.iter().filter(|&&c| c).count();
    let q = if nc > 0 {
        CLOTH_CHARGE / nc as f64
    } else {
        0.0
    };
    let system = System::new(SystemDesc {
        positions: m.positions,
        masses: vec![CLOTH_MASS / count as f64; count],
        charges: charged.iter().map(|&c| if c { q } else { 0.0 }).collect(),
        pinned,
        springs,
        faces: m.faces,
        ..Default::default()
    })?;
    let config = Config {
        integrator: Integrator::Imex,
        dt: CLOTH_DT,
        solver: SolverConfig {
            method: SolverMethod::Jacobi,
            iterations: sweeps,
            // The CPU stops early at a tolerance; 0 makes it run the same sweeps as the GPU.
            tolerance: 0.0,
            ..Default::default()
        },
        gravity: DVec3::new(0.0, 0.0, -9.81),
        coulomb: CoulombConfig {
            method: CoulombMethod::AllPairs,
            softening: 0.0,
        },
        ..Default::default()
    };
    Ok(Built {
        system,
        config,
        grid: None,
    })
}

/// SplitMix64: a small, fixed, reproducible generator (no dependency).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The Coulomb workload: `n` charges of random sign uniformly in a cube, no springs.
pub fn coulomb(n: usize) -> Result<Built, WorkloadError> {
    coulomb_on(n, Cloud::Cube)
}

/// The Coulomb workload on the charges of `cloud`.
pub fn coulomb_on(n: usize, cloud: Cloud) -> Result<Built, WorkloadError> {
    charge_cloud(Workload::Coulomb, n, cloud)
}

/// The charges of the Coulomb and DDEF workloads (`workload` names the one refused).
fn charge_cloud(workload: Workload, n: usize, cloud: Cloud) -> Result<Built, WorkloadError> {
    if n < 2 {
        return Err(WorkloadError::CoulombTooSmall { n });
    }
    // Checked before the buffers are allocated: a huge n would overflow their capacity.
    if n > System::MAX_PARTICLES {
        let (count, limit) = (n, System::MAX_PARTICLES);
        let source = ModelError::TooManyParticles { count, limit };
        return Err(WorkloadError::Model { n, source });
    }
    check_host_memory(workload, n)?;
    let mut rng = SplitMix(CLOUD_SEED);
    let mut positions = Vec::with_capacity(n);
    let mut charges = Vec::with_capacity(n);
    let q = CLOUD_CHARGE / n as f64;
    for _ in 0..n {
        let p = DVec3::new(rng.unit(), rng.unit(), rng.unit()) - DVec3::splat(0.5);
        positions.push(cloud.place(p) * CLOUD_SIZE);
        charges.push(if rng.next() & 1 == 0 { q } else { -q });
    }
    let system = System::new(SystemDesc {
        positions,
        masses: vec![CLOUD_MASS / n as f64; n],
        charges,
        ..Default::default()
    })
    .map_err(|source| WorkloadError::Model { n, source })?;
    let config = Config {
        integrator: Integrator::SymplecticEuler,
        dt: CLOUD_DT,
        gravity: DVec3::ZERO,
        coulomb: CoulombConfig {
            method: CoulombMethod::AllPairs,
            softening: CLOUD_SOFTENING,
        },
        ..Default::default()
    };
    Ok(Built {
        system,
        config,
        grid: None,
    })
}

/// The DDEF workload: the Coulomb cloud of [`coulomb_on`] with the DDEF far field of
/// `variant` on m samples, grid rebuilt every `rebuild_every` evaluations (1: Algorithm
/// 1, every step).
pub fn ddef(
    n: usize,
    samples: usize,
    rebuild_every: u32,
    variant: DdefVariant,
    cloud: Cloud,
) -> Result<Built, WorkloadError> {
    let mut built = charge_cloud(Workload::Ddef, n, cloud)?;
    let samples = u32::try_from(samples)
        .ok()
        .filter(|&m| m <= DdefConfig::MAX_SAMPLES)
        .ok_or(WorkloadError::TooManySamples { samples })?;
    built.config.coulomb.method = CoulombMethod::Ddef(DdefConfig {
        samples: crate::config::DdefSamples::Count(samples),
        rebuild_every,
        variant,
        ..Default::default()
    });
    Ok(built)
}

/// Particles of a cloth world (a 12 x 12 grid, about the torus's 145).
pub const WORLD_CLOTH_PARTICLES: usize = 144;
/// Each world's charge and stiffness scales lie in [1/f, f] and its time step in
/// [dt/sqrt(f), dt sqrt(f)] of the scene's, log-uniformly: world 0 has the scene's own
/// values, the rest fill the box evenly.
pub const WORLD_PARAMETER_FACTOR: f64 = 2.0;
/// The R3 low-discrepancy sequence's steps (powers of 1/phi_3, phi_3^4 = phi_3 + 1): point
/// w of the unit cube is frac(1/2 + w a).
const R3: [f64; 3] = [
    0.819_172_513_396_164_4,
    0.671_043_606_703_789_2,
    0.549_700_477_901_970_3,
];

/// World `w`'s (charge scale, stiffness scale, time-step factor).
pub fn world_factors(w: usize) -> [f64; 3] {
    let f = WORLD_PARAMETER_FACTOR;
    let u = R3.map(|a| (0.5 + w as f64 * a).fract());
    [
        f.powf(2.0 * u[0] - 1.0),
        f.powf(2.0 * u[1] - 1.0),
        f.powf(u[2] - 0.5),
    ]
}

/// The base world of `scene`: the built-in torus, or the cloth workload's grid at
/// [`WORLD_CLOTH_PARTICLES`] with `sweeps` Jacobi sweeps and `charged_fraction` charged.
pub fn world_base(
    scene: WorldScene,
    sweeps: u32,
    charged_fraction: f64,
) -> Result<Built, WorkloadError> {
    match scene {
        WorldScene::Torus => {
            let s = crate::scene::load("torus", &[])
                .map_err(|e| WorkloadError::Scene(e.to_string()))?;
            Ok(Built {
                system: s.system,
                config: s.config,
                grid: None,
            })
        }
        WorldScene::Cloth => cloth(WORLD_CLOTH_PARTICLES, sweeps, charged_fraction),
    }
}

/// `count` worlds of `scene`, world w with [`world_factors`]`(w)` applied to the base's
/// charges, stiffnesses and time step (same sizes and topology: only parameters vary).
pub fn worlds(
    scene: WorldScene,
    count: usize,
    sweeps: u32,
    charged_fraction: f64,
) -> Result<Vec<Built>, WorkloadError> {
    let base = world_base(scene, sweeps, charged_fraction)?;
    let n = base.system.len();
    (0..count)
        .map(|w| {
            let [q, k, h] = world_factors(w);
            let mut config = base.config.clone();
            config.dt *= h;
            let system = base
                .system
                .with_charge_scale(q)
                .and_then(|s| s.with_stiffness_scale(k))
                .map_err(|source| WorkloadError::Model { n, source })?;
            Ok(Built {
                system,
                config,
                grid: base.grid,
            })
        })
        .collect()
}

#[cfg(test)]
#[path = "workload_tests.rs"]
mod tests;
