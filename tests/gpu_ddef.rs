//! GPU DDEF against the f64 CPU reference DDEF (`msc::ddef`), standalone (`GpuDdef`) and
//! inside the GPU solver (`coulomb.method = "ddef"`). Runs on whatever adapter wgpu
//! finds, software ones (lavapipe) included; skips when there is none, and fails instead
//! when `MSC_REQUIRE_GPU=1`.
//!
//! Tolerances. The CPU reference is built on the positions rounded to f32 (what the GPU
//! holds), so both evaluate the same DDEF on the same grid and lists, and only the f32
//! arithmetic differs (unit roundoff 6e-8). Sums over up to a few thousand sources with
//! mixed signs and the `corrected` subtraction at the vertices lose a few digits against
//! the largest term, so one force is compared with the largest force of the set, at
//! `F32_SUMS` = 1e-4 of it (the same bound the all-pairs GPU tests use): a real error
//! (a wrong list, weight, mask or exclusion) shows at the DDEF approximation's own size,
//! 1e-3..1e-1 of it, which each test also checks is far above the tolerance.
//! Trajectories (damped implicit steps, a few dozen) are compared to 1e-3 of the system's
//! 1 m size and of its largest speed, as in `tests/gpu_solver.rs`.

mod common;

use common::{device, gpu, Rng};
use glam::DVec3;
use msc::config::{
    Config, CoulombConfig, CoulombMethod, DdefConfig, DdefGrid, DdefVariant, Integrator,
    SolverConfig, SolverMethod,
};
use msc::cpu::CpuSimulation;
use msc::ddef::error_study::random_points;
use msc::ddef::{exact_fields_at, Ddef, DdefSolver, Evaluation, Grid};
use msc::gpu::{GpuDdef, GpuError, GpuSolver};
use msc::model::{mesh, Spring, System, SystemDesc};
use msc::Simulator;
use std::sync::Arc;

/// f32 sums against f64 ones, relative to the largest force (see the module docs).
const F32_SUMS: f64 = 1e-4;
const VARIANTS: [DdefVariant; 2] = [DdefVariant::Paper, DdefVariant::Corrected];

/// Random charges for the DDEF tests.
trait Charges {
    fn charges(&mut self, n: usize, q: f64, uncharged: f64) -> Vec<f64>;
}
impl Charges for Rng {
    /// Charges of both signs, a fraction `uncharged` of them zero.
    fn charges(&mut self, n: usize, q: f64, uncharged: f64) -> Vec<f64> {
        (0..n)
            .map(|_| {
                if self.next() < uncharged {
                    0.0
                } else {
                    q * self.range(0.5, 1.5) * if self.next() < 0.5 { -1.0 } else { 1.0 }
                }
            })
            .collect()
    }
}

/// What the GPU holds: positions rounded to f32.
fn f32_round(x: &[DVec3]) -> Vec<DVec3> {
    x.iter().map(|p| p.as_vec3().as_dvec3()).collect()
}

/// Largest |a - b| over the largest |b|.
fn rel_diff(a: &[DVec3], b: &[DVec3]) -> f64 {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().map(|v| v.length()).fold(0.0, f64::max);
    let d = a
        .iter()
        .zip(b)
        .map(|(x, y)| (*x - *y).length())
        .fold(0.0, f64::max);
    assert!(scale > 0.0, "reference forces are all zero");
    d / scale
}

/// Exact all-pairs Coulomb forces (f64).
fn exact_forces(x: &[DVec3], q: &[f64], softening: f64) -> Vec<DVec3> {
    let idx: Vec<usize> = (0..x.len()).collect();
    exact_fields_at(x, Some(&idx), x, q, softening)
        .into_iter()
        .zip(q)
        .map(|(e, &qi)| e * qi)
        .collect()
}

/// GPU DDEF forces (both variants) against the CPU reference on (x, q), and the far
/// field at the sites, on both grids; returns the worst GPU-vs-CPU difference.
fn compare_standalone(x: &[DVec3], q: &[f64], samples: usize, softening: f64) -> f64 {
    [DdefGrid::Delaunay, DdefGrid::Lattice]
        .into_iter()
        .map(|kind| compare_on_grid(x, q, samples, softening, kind))
        .fold(0.0, f64::max)
}

fn compare_on_grid(x: &[DVec3], q: &[f64], samples: usize, softening: f64, kind: DdefGrid) -> f64 {
    let Some((device, queue)) = device() else {
        return 0.0;
    };
    let x = f32_round(x);
    let ddef = Ddef::build_with(&x, q, softening, samples, 0.0, kind).expect("ddef");
    assert_eq!(ddef.grid().kind(), kind);
    let mut g = GpuDdef::new(&device, &queue, softening).expect("GpuDdef");
    let exact = exact_forces(&x, q, softening);
    let mut worst: f64 = 0.0;
    let mut results = Vec::new();
    for v in VARIANTS {
        let cpu = ddef.forces(x.len(), Evaluation::Ddef(v));
        let gpu = g.forces(&ddef, &x, q, v).expect("gpu forces");
        let d = rel_diff(&gpu, &cpu);
        let approx = rel_diff(&cpu, &exact);
        eprintln!("{kind:?} {v:?}: GPU vs CPU DDEF {d:.2e}, CPU DDEF vs exact {approx:.2e}");
        assert!(d < F32_SUMS, "{kind:?} {v:?}: GPU vs CPU DDEF {d:.3e}");
        // The comparison resolves the approximation: a wrong list would show.
        assert!(approx > 10.0 * F32_SUMS, "{v:?}: DDEF error {approx:.3e}");
        // Uncharged particles get exactly zero.
        for (i, f) in gpu.iter().enumerate() {
            if q[i] == 0.0 {
                assert_eq!(*f, DVec3::ZERO, "uncharged particle {i}");
            }
        }
        let far = g.read_far_field().expect("far field");
        let df = rel_diff(&far, ddef.far_field());
        assert!(df < F32_SUMS, "{v:?}: far field {df:.3e}");
        worst = worst.max(d).max(df);
        results.push(gpu);
    }
    // The variant switch reaches the kernels.
    let dv = rel_diff(&results[0], &results[1]);
    assert!(dv > 10.0 * F32_SUMS, "paper vs corrected {dv:.3e}");
    worst
}

#[test]
fn gpu_ddef_matches_cpu_ddef_on_random_charges() {
    let n = 2000;
    let x = random_points(DVec3::ZERO, DVec3::ONE, n, 7);
    let q = Rng(3).charges(n, 1e-6, 0.1);
    compare_standalone(&x, &q, 500, 1e-3);
}

#[test]
fn gpu_ddef_matches_cpu_ddef_on_a_mesh() {
    // An icosphere (642 vertices on a sphere: structured, far from uniform in its box),
    // all charged, no softening.
    let m = mesh::icosphere(0.5, 3).expect("icosphere");
    let n = m.positions.len();
    let q = Rng(11).charges(n, 2e-6, 0.0);
    compare_standalone(&m.positions, &q, 200, 0.0);
}

#[test]
fn gpu_ddef_equals_gpu_all_pairs_when_every_charge_is_near() {
    // Every charge inside one tetrahedron tau of a 50-sample grid: each source's N_s holds
    // tau's vertices, so S(tau) is every source, each in M_v of every vertex (masks 0),
    // and the vertex far fields exclude all of them (0). DDEF is then the exact sum.
    let Some((device, queue)) = device() else {
        return;
    };
    let grid = Arc::new(Grid::new(DVec3::splat(-1.0), DVec3::ONE, 50).expect("grid"));
    let tri = grid.tetrahedralization();
    let t = 7 % tri.tets().len();
    let verts = tri.tets()[t].map(|j| tri.points()[j as usize]);
    let c = verts.iter().copied().sum::<DVec3>() / 4.0;
    let mut rng = Rng(5);
    let n = 300;
    // Random barycentric points of tau shrunk by half about its centroid: inside tau.
    let x: Vec<DVec3> = f32_round(
        &(0..n)
            .map(|_| {
                let b: [f64; 4] = std::array::from_fn(|_| -rng.next().max(1e-12).ln());
                let s: f64 = b.iter().sum();
                let p = (0..4).map(|k| verts[k] * (b[k] / s)).sum::<DVec3>();
                c + (p - c) * 0.5
            })
            .collect::<Vec<_>>(),
    );
    let q = rng.charges(n, 1e-6, 0.0);
    let softening = 1e-3;
    let ddef = Ddef::on_grid(grid.clone(), &x, &q, softening, None).expect("ddef");
    let plan = ddef.gather_plan();
    assert_eq!(plan.tet_vertices.len(), 1, "one occupied tetrahedron");
    assert_eq!(plan.near.row(0).len(), n, "every source is near");
    assert!(plan.near.entries.iter().all(|e| e.mask == 0));

    // All-pairs on the GPU: the solver's tiled kernel on the same particles.
    let system = System::new(SystemDesc {
        positions: x.clone(),
        velocities: vec![DVec3::ZERO; n],
        masses: vec![0.1; n],
        charges: q.clone(),
        pinned: vec![false; n],
        springs: Vec::new(),
        faces: Vec::new(),
    })
    .expect("system");
    let config = Config {
        gravity: DVec3::ZERO,
        coulomb: CoulombConfig {
            method: CoulombMethod::AllPairs,
            softening,
        },
        ..Default::default()
    };
    let mut all_pairs =
        GpuSolver::new(&device, &queue, &system, &config).expect("all-pairs GPU solver");
    let (tiled, _) = all_pairs.field_forces().expect("all-pairs forces");
    let exact = exact_forces(&x, &q, softening);
    assert!(rel_diff(&tiled, &exact) < F32_SUMS);
    let mut g = GpuDdef::new(&device, &queue, softening).expect("GpuDdef");
    for v in VARIANTS {
        let gpu = g.forces(&ddef, &x, &q, v).expect("gpu forces");
        let d = rel_diff(&gpu, &tiled);
        assert!(d < F32_SUMS, "{v:?}: GPU DDEF vs GPU all-pairs {d:.3e}");
        let far = g.read_far_field().expect("far field");
        for j in tri.tets()[t] {
            assert_eq!(
                far[j as usize],
                DVec3::ZERO,
                "far field at vertex {j} of tau"
            );
        }
    }
}

/// A braced lattice (`res`^3 particles in a 1 m cube) with jittered positions, random
/// springs, masses and velocities, charges of both signs (a fifth uncharged).
fn lattice_system(res: u32, seed: u64, charge: f64) -> System {
    let mut rng = Rng(seed);
    let m = mesh::lattice([1.0, 1.0, 1.0], [res; 3]).expect("lattice");
    let n = m.positions.len();
    let positions: Vec<DVec3> = m.positions.iter().map(|p| *p + rng.vec(0.02)).collect();
    let springs = m
        .edges
        .iter()
        .map(|&[i, j]| Spring {
            i,
            j,
            stiffness: rng.range(20.0, 50.0),
            rest_length: (m.positions[i as usize] - m.positions[j as usize]).length(),
            damping: rng.range(0.0, 0.05),
        })
        .collect();
    System::new(SystemDesc {
        velocities: (0..n).map(|_| rng.vec(0.3)).collect(),
        masses: (0..n).map(|_| rng.range(0.05, 0.15)).collect(),
        charges: rng.charges(n, charge, 0.2),
        pinned: vec![false; n],
        positions,
        springs,
        faces: Vec::new(),
    })
    .expect("system")
}

fn ddef_config(integrator: Integrator, dt: f64, rebuild_every: u32) -> Config {
    Config {
        integrator,
        dt,
        solver: SolverConfig {
            method: SolverMethod::Jacobi,
            iterations: 30,
            omega: 0.6,
            tolerance: 0.0,
            rho: None,
        },
        gravity: DVec3::ZERO,
        coulomb: CoulombConfig {
            method: CoulombMethod::Ddef(DdefConfig {
                samples: 150,
                variant: DdefVariant::Corrected,
                rebuild_every,
                ..Default::default()
            }),
            softening: 1e-3,
        },
        ..Default::default()
    }
}

fn max_diff(a: &[DVec3], b: &[DVec3]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (*x - *y).length())
        .fold(0.0, f64::max)
}

/// Both backends `steps` steps with DDEF; positions to `tol` m (1 m system), velocities to
/// `tol` of the largest CPU speed; the same number of grids and evaluations.
fn compare_trajectories(system: &System, config: &Config, steps: u64, tol: f64) -> GpuSolver {
    let mut g = gpu(system, config).expect("GPU solver");
    let mut c = CpuSimulation::new(system, config).expect("cpu");
    c.step(steps).unwrap();
    g.step(steps).unwrap();
    let (cs, gs) = (c.state().unwrap(), g.state().unwrap());
    assert!(gs.is_finite(), "GPU state is not finite");
    assert_eq!(gs.step, steps);
    let moved = max_diff(&cs.x, system.positions());
    assert!(moved > 20.0 * tol, "the run barely moved ({moved:.2e} m)");
    let dx = max_diff(&gs.x, &cs.x);
    let vscale = cs.v.iter().map(|v| v.length()).fold(0.0, f64::max);
    let dv = max_diff(&gs.v, &cs.v);
    eprintln!("moved {moved:.3e} m; dx {dx:.2e} m, dv {dv:.2e} (speed scale {vscale:.2e})");
    assert!(dx < tol, "positions differ by {dx:.3e} m");
    assert!(dv < tol * vscale, "velocities differ by {dv:.3e}");
    let cpu_ddef = c.ddef().expect("CPU DDEF");
    assert_eq!(g.ddef_rebuilds(), Some(cpu_ddef.rebuilds()), "grids built");
    assert_eq!(
        g.ddef_evaluations(),
        Some(cpu_ddef.evaluations()),
        "force evaluations"
    );
    // The Coulomb energy diagnostic stays exact all-pairs on both.
    let (ce, ge) = (c.energies().unwrap(), g.energies().unwrap());
    let scale = ce.coulomb.abs().max(1e-12);
    assert!(
        (ge.coulomb - ce.coulomb).abs() < 1e-3 * scale,
        "coulomb energy {} vs {}",
        ge.coulomb,
        ce.coulomb
    );
    g
}

#[test]
fn gpu_ddef_imex_trajectory_matches_cpu_ddef_with_grid_reuse() {
    // 512 particles (about 410 charged), m = 150: the far field carries most sources. The
    // grid is kept 4 evaluations, so over 40 steps it is rebuilt at least 10 times, more
    // when a charge leaves the padded box.
    let system = lattice_system(8, 21, 5e-7);
    let config = ddef_config(Integrator::Imex, 0.005, 4);
    if device().is_none() {
        return;
    }
    let g = compare_trajectories(&system, &config, 40, 1e-3);
    let rebuilds = g.ddef_rebuilds().unwrap();
    assert!((10..40).contains(&rebuilds), "{rebuilds} rebuilds");
    assert!(!g.supports_recording());
}

#[test]
fn gpu_ddef_verlet_evaluates_once_per_step_like_the_cpu() {
    // Velocity Verlet evaluates f at x' once per step; the next step's first force is at
    // the same positions, so both backends reuse it (n + 1 evaluations for n steps).
    let system = lattice_system(5, 4, 1e-6);
    let config = ddef_config(Integrator::Verlet, 0.001, 3);
    if device().is_none() {
        return;
    }
    let g = compare_trajectories(&system, &config, 30, 1e-3);
    assert_eq!(g.ddef_evaluations(), Some(31));
}

#[test]
fn gpu_solver_ddef_forces_match_the_cpu_solver_forces() {
    // The solver wiring: compacted sources, charged-index scatter (uncharged particles in
    // between), addition to the external forces (none here, gravity off).
    let system = lattice_system(7, 9, 3e-6);
    let config = ddef_config(Integrator::Imex, 0.005, 1);
    let Some(mut g) = gpu(&system, &config) else {
        return;
    };
    let (gpu_f, _) = g.field_forces().expect("field forces");
    let d = config.coulomb.method.ddef().unwrap();
    let mut cpu = DdefSolver::new(d, config.coulomb.softening);
    let x = f32_round(system.positions());
    let mut cpu_f = vec![DVec3::ZERO; x.len()];
    cpu.forces_into(&x, system.charges(), &mut cpu_f)
        .expect("cpu forces");
    let diff = rel_diff(&gpu_f, &cpu_f);
    assert!(diff < F32_SUMS, "GPU solver vs CPU DDEF forces {diff:.3e}");
    let exact = exact_forces(&x, system.charges(), config.coulomb.softening);
    assert!(rel_diff(&cpu_f, &exact) > 10.0 * F32_SUMS);
    // The diagnostic ran the host stage once; a step at the same positions reuses it.
    assert_eq!(g.ddef_evaluations(), Some(1));
    g.step(1).unwrap();
    assert_eq!(g.ddef_evaluations(), Some(1));
    g.step(1).unwrap();
    assert_eq!(g.ddef_evaluations(), Some(2));
}

#[test]
fn recording_steps_with_ddef_is_refused() {
    let system = lattice_system(3, 2, 1e-6);
    let config = ddef_config(Integrator::Imex, 0.005, 1);
    let Some(mut g) = gpu(&system, &config) else {
        return;
    };
    assert!(!g.supports_recording());
    let mut encoder = g
        .device()
        .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
    let r = g.record_steps(&mut encoder, 2);
    assert!(matches!(r, Err(GpuError::Unsupported(_))), "{r:?}");
    assert_eq!(g.steps_done(), 0, "nothing recorded");
    let mut all_pairs = config.clone();
    all_pairs.coulomb.method = CoulombMethod::AllPairs;
    let g = gpu(&system, &all_pairs).expect("GPU solver");
    assert!(g.supports_recording());
}
