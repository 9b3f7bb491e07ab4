//! GPU solver against the f64 CPU reference. Runs on whatever adapter wgpu finds,
//! software ones (lavapipe) included; skips with a message when there is none, and fails
//! instead when `MSC_REQUIRE_GPU=1`.
//!
//! Tolerances: the GPU computes in f32 (unit roundoff 6e-8), the CPU in f64. Single force
//! evaluations agree to ~1e-6 relative; we ask 1e-4 relative to the largest force of the
//! system (the spring stretch l - L and Coulomb sums with mixed signs cancel, so the error
//! of one entry is bounded by the scale of the whole set, not by its own size).
//! Trajectories over 100 steps are compared to 1e-3 relative to the system's scale
//! (positions: its 1 m size; velocities: the largest CPU speed): the systems are chosen
//! well conditioned (implicit steps, or explicit steps at h omega_max well below 1, mild
//! Coulomb forces) so roundoff is not amplified chaotically over 100 steps.

mod common;

use common::{adapter, device, gpu, Rng};
use glam::{DMat3, DVec3};
use msc::config::{
    Config, CoulombConfig, CoulombMethod, ExternalCharge, ExternalField, Integrator, Orbit,
    SolverConfig, SolverMethod,
};
use msc::cpu::{self, CpuSimulation};
use msc::gpu::{GpuError, GpuSolver, HeadlessOptions};
use msc::model::{mesh, Spring, State, System, SystemDesc};
use msc::Simulator;

struct Random {
    seed: u64,
    /// Lattice vertices per axis (a braced 1 m cube).
    res: u32,
    /// Fraction of charged particles and their charge magnitude (C).
    charged: f64,
    charge: f64,
    pinned: usize,
    speed: f64,
    /// Largest spring damping (N s/m); each spring's is drawn in [0, damping).
    damping: f64,
}

impl Default for Random {
    fn default() -> Self {
        Self {
            seed: 1,
            res: 3,
            charged: 0.5,
            charge: 1e-6,
            pinned: 0,
            speed: 0.2,
            damping: 0.05,
        }
    }
}

/// A seeded random system: a braced lattice with jittered positions, random rest lengths
/// (springs start stretched or compressed by up to 10 %), stiffness, damping, masses,
/// velocities and charges of both signs.
fn random_system(r: Random) -> System {
    let m = mesh::lattice([1.0, 1.0, 1.0], [r.res; 3]).expect("lattice");
    random_on(&m.positions, &m.edges, r)
}

/// [`random_system`]'s randomization on the vertices and edges of any mesh.
fn random_on(vertices: &[DVec3], edges: &[[u32; 2]], r: Random) -> System {
    let mut rng = Rng(r.seed);
    let n = vertices.len();
    let positions: Vec<DVec3> = vertices.iter().map(|p| *p + rng.vec(0.03)).collect();
    let springs = edges
        .iter()
        .map(|&[i, j]| Spring {
            i,
            j,
            stiffness: rng.range(20.0, 50.0),
            rest_length: (vertices[i as usize] - vertices[j as usize]).length()
                * rng.range(0.9, 1.1),
            damping: rng.range(0.0, r.damping),
        })
        .collect();
    let charges = (0..n)
        .map(|_| {
            if rng.next() < r.charged {
                r.charge * rng.range(0.5, 1.5) * if rng.next() < 0.5 { -1.0 } else { 1.0 }
            } else {
                0.0
            }
        })
        .collect();
    System::new(SystemDesc {
        velocities: (0..n).map(|_| rng.vec(r.speed)).collect(),
        masses: (0..n).map(|_| rng.range(0.05, 0.15)).collect(),
        charges,
        pinned: (0..n).map(|i| i < r.pinned).collect(),
        positions,
        springs,
        faces: Vec::new(),
    })
    .expect("valid system")
}

fn imex(method: SolverMethod, iterations: u32) -> Config {
    Config {
        integrator: Integrator::Imex,
        dt: 0.005,
        solver: SolverConfig {
            method,
            iterations,
            omega: if method == SolverMethod::Jacobi {
                0.6
            } else {
                0.9
            },
            // Run the same fixed count on both backends.
            tolerance: 0.0,
            rho: None,
        },
        gravity: DVec3::new(0.0, 0.0, -9.81),
        ..Default::default()
    }
}

fn max_norm(a: &[DVec3]) -> f64 {
    a.iter().map(|v| v.length()).fold(0.0, f64::max)
}

fn max_diff(a: &[DVec3], b: &[DVec3]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (*x - *y).length())
        .fold(0.0, f64::max)
}

/// Runs both backends `steps` steps and compares positions (to `tol` m, the system being
/// 1 m across) and velocities (to `tol` times the largest CPU speed, at least 1 m/s).
fn compare_trajectories(system: &System, config: &Config, steps: u64, tol: f64) {
    let Some(mut g) = gpu(system, config) else {
        return;
    };
    let mut c = CpuSimulation::new(system, config).expect("cpu");
    c.step(steps).unwrap();
    g.step(steps).unwrap();
    let (cs, gs) = (c.state().unwrap(), g.state().unwrap());
    assert!(gs.is_finite(), "GPU state is not finite");
    assert_eq!(gs.step, steps);
    assert!((gs.t - cs.t).abs() < 1e-12);
    let dx = max_diff(&gs.x, &cs.x);
    let dv = max_diff(&gs.v, &cs.v);
    let vscale = max_norm(&cs.v).max(1.0);
    // The run must have moved, or the comparison proves nothing.
    let moved = max_diff(&cs.x, system.positions());
    assert!(moved > 10.0 * tol, "the CPU run barely moved ({moved})");
    eprintln!(
        "{:?}/{:?}: |dx| {dx:.2e} |dv| {dv:.2e} (moved {moved:.2e})",
        config.integrator, config.solver.method
    );
    assert!(dx <= tol, "positions differ by {dx:e} > {tol:e}");
    assert!(
        dv <= tol * vscale,
        "velocities differ by {dv:e} > {:e}",
        tol * vscale
    );
    // Pinned particles keep their prescribed velocity exactly (as stored in f32).
    for (i, p) in system.pinned().iter().enumerate() {
        if *p {
            let v0 = system.velocities()[i].as_vec3().as_dvec3();
            assert_eq!(gs.v[i], v0, "pinned particle {i} changed velocity");
        }
    }
}

#[test]
fn spring_kernel_matches_cpu() {
    let system = random_system(Random {
        seed: 7,
        speed: 1.0,
        ..Default::default()
    });
    let config = imex(SolverMethod::Jacobi, 1);
    let Some(mut g) = gpu(&system, &config) else {
        return;
    };
    let blocks = g.spring_blocks().unwrap();
    let (x, v) = (system.positions(), system.velocities());
    let mut f_cpu = Vec::new();
    let mut w_cpu = Vec::new();
    for s in system.springs() {
        let (i, j) = (s.i as usize, s.j as usize);
        f_cpu.push(cpu::forces::spring_force(x[i], x[j], v[i], v[j], s));
        w_cpu.push(cpu::forces::spring_w_block(x[i], x[j], s, config.dt));
    }
    let f_gpu: Vec<DVec3> = blocks.iter().map(|b| b.0).collect();
    let f_scale = max_norm(&f_cpu);
    assert!(f_scale > 0.1, "springs should be loaded");
    let df = max_diff(&f_gpu, &f_cpu);
    assert!(df <= 1e-4 * f_scale, "spring forces differ by {df:e}");
    let wnorm = |m: &DMat3| {
        m.to_cols_array()
            .iter()
            .map(|a| a.abs())
            .fold(0.0, f64::max)
    };
    let w_scale = w_cpu.iter().map(wnorm).fold(0.0, f64::max);
    let dw = blocks
        .iter()
        .zip(&w_cpu)
        .map(|(b, w)| wnorm(&(b.1 - *w)))
        .fold(0.0, f64::max);
    assert!(dw <= 1e-4 * w_scale, "W blocks differ by {dw:e}");
}

/// Coulomb + external + gravity forces against the CPU reference.
fn check_field_forces(system: &System, config: &Config) {
    let Some(mut g) = gpu(system, config) else {
        return;
    };
    let (f_gpu, _) = g.field_forces().unwrap();
    let x = system.positions();
    let q = system.charges();
    let mut f_cpu = cpu::forces::external_forces(x, q, config, 0.0);
    if config.coulomb.method == CoulombMethod::AllPairs {
        let fc = cpu::forces::coulomb_forces(x, q, config.coulomb.softening);
        for (f, c) in f_cpu.iter_mut().zip(fc) {
            *f += c;
        }
    }
    for (f, m) in f_cpu.iter_mut().zip(system.masses()) {
        *f += config.gravity * *m;
    }
    let scale = max_norm(&f_cpu);
    let d = max_diff(&f_gpu, &f_cpu);
    assert!(
        d <= 1e-4 * scale,
        "forces differ by {d:e} (scale {scale:e})"
    );
    for (i, (fg, fc)) in f_gpu.iter().zip(&f_cpu).enumerate() {
        if *fc == DVec3::ZERO {
            assert_eq!(*fg, DVec3::ZERO, "particle {i} must feel no force");
        }
    }
}

#[test]
fn coulomb_tiles_not_a_multiple_of_the_tile_size() {
    // 7^3 = 343 particles, ~300 charged: one full tile of 256 sources and a partial one,
    // and 2 target workgroups, the last partly empty.
    let system = random_system(Random {
        seed: 3,
        res: 7,
        charged: 0.9,
        charge: 1e-5,
        ..Default::default()
    });
    let nc = system.charged_count();
    assert!(nc > 256 && !nc.is_multiple_of(256), "{nc} charged");
    let config = imex(SolverMethod::Jacobi, 1);
    check_field_forces(&system, &config);
}

#[test]
fn coulomb_edge_cases() {
    let config = Config {
        gravity: DVec3::ZERO,
        ..imex(SolverMethod::Jacobi, 1)
    };
    // One charge: no partner, no self-interaction; nothing else is charged.
    let mut one = random_system(Random {
        seed: 4,
        charged: 0.0,
        ..Default::default()
    })
    .charges()
    .to_vec();
    one[5] = 3e-6;
    let base = random_system(Random {
        seed: 4,
        charged: 0.0,
        ..Default::default()
    });
    let with = |q: Vec<f64>| {
        System::new(SystemDesc {
            positions: base.positions().to_vec(),
            velocities: base.velocities().to_vec(),
            masses: base.masses().to_vec(),
            charges: q,
            pinned: Vec::new(),
            springs: base.springs().to_vec(),
            faces: Vec::new(),
        })
        .unwrap()
    };
    check_field_forces(&with(one), &config);
    // None charged: all zero (plus gravity when on).
    check_field_forces(&base, &imex(SolverMethod::Jacobi, 1));
    // Softening, on a system with close pairs.
    let soft = Config {
        coulomb: CoulombConfig {
            method: CoulombMethod::AllPairs,
            softening: 0.05,
        },
        ..config.clone()
    };
    check_field_forces(
        &random_system(Random {
            seed: 9,
            charged: 1.0,
            charge: 1e-5,
            ..Default::default()
        }),
        &soft,
    );
    // Coulomb switched off: only the external world acts.
    let off = Config {
        coulomb: CoulombConfig {
            method: CoulombMethod::None,
            softening: 0.0,
        },
        external_field: Some(ExternalField::Uniform(DVec3::new(1e3, -2e3, 5e2))),
        ..config.clone()
    };
    check_field_forces(&random_system(Random::default()), &off);
}

fn external_world() -> Config {
    Config {
        external_charges: vec![
            ExternalCharge {
                charge: 2e-5,
                position: DVec3::new(2.0, 0.0, 0.5),
                orbit: Some(Orbit {
                    center: DVec3::new(0.5, 0.5, 0.5),
                    axis: DVec3::Z,
                    angular_velocity: 3.0,
                }),
            },
            ExternalCharge {
                charge: -1e-5,
                position: DVec3::new(-1.0, 2.0, -1.0),
                orbit: None,
            },
        ],
        external_field: Some(ExternalField::Swirl {
            scale: 2e3,
            min_z: 0.05,
        }),
        coulomb: CoulombConfig {
            method: CoulombMethod::AllPairs,
            softening: 0.01,
        },
        ..imex(SolverMethod::Jacobi, 1)
    }
}

#[test]
fn external_charges_and_fields_match_cpu() {
    let system = random_system(Random {
        seed: 11,
        ..Default::default()
    });
    check_field_forces(&system, &external_world());
    let uniform = Config {
        external_field: Some(ExternalField::Uniform(DVec3::new(3e3, 0.0, -1e3))),
        ..external_world()
    };
    check_field_forces(&system, &uniform);
    let vortex = Config {
        external_field: Some(ExternalField::Vortex {
            scale: 2e3,
            min_z: 0.05,
        }),
        ..external_world()
    };
    check_field_forces(&system, &vortex);
}

fn check_energies(system: &System, config: &Config, steps: u64) {
    let Some(mut g) = gpu(system, config) else {
        return;
    };
    g.step(steps).unwrap();
    let state: State = g.state().unwrap();
    let e_gpu = g.energies().unwrap();
    // Evaluate the CPU energies at the GPU's own state: this checks the reduction only.
    let e_cpu = cpu::energy::energies(system, config, &state);
    let scale = e_cpu
        .terms()
        .iter()
        .map(|(_, v)| v.abs())
        .fold(0.0, f64::max);
    for ((name, a), (_, b)) in e_gpu.terms().iter().zip(e_cpu.terms()) {
        assert!(
            (a - b).abs() <= 1e-4 * scale,
            "{name}: GPU {a} vs CPU {b} (scale {scale})"
        );
    }
}

#[test]
fn energies_match_cpu() {
    let system = random_system(Random {
        seed: 5,
        charge: 5e-6,
        ..Default::default()
    });
    check_energies(&system, &imex(SolverMethod::BlockJacobi, 10), 0);
    let uniform = Config {
        external_field: Some(ExternalField::Uniform(DVec3::new(3e3, 0.0, -1e3))),
        ..external_world()
    };
    // After some steps: the orbiting charge has moved (time enters the potential).
    check_energies(&system, &uniform, 7);
}

#[test]
fn imex_jacobi_matches_cpu() {
    let system = random_system(Random {
        seed: 21,
        pinned: 3,
        ..Default::default()
    });
    compare_trajectories(&system, &imex(SolverMethod::Jacobi, 30), 100, 1e-3);
}

/// The GPU's adjacency is sliced (SELL-32) for a 20 x 14 grid (280 rows: nine slices,
/// the last partial) and CSR for a hub joined to 150 particles on a circle (its slice
/// would be 150 entries wide); both layouts reproduce the CPU reference's trajectories
/// under the gathering kernels (rhs, Jacobi sweeps, CG's matvec, residual), at the 1e-3
/// bound of the other trajectory tests.
#[test]
fn both_adjacency_layouts_match_cpu() {
    use msc::gpu::adjacency::{slice_shift, SLICE_SHIFT};
    let grid = mesh::grid([1.0, 1.0], [20, 14], true, false).expect("grid");
    let grid = random_on(
        &grid.positions,
        &grid.edges,
        Random {
            seed: 31,
            pinned: 2,
            // 5 cm apart: mild Coulomb forces need a smaller charge than the lattice's.
            charge: 1e-8,
            ..Default::default()
        },
    );
    assert_eq!(slice_shift(grid.len(), grid.springs()), SLICE_SHIFT);
    let ring = 150u32;
    let mut vertices = vec![DVec3::ZERO];
    let mut edges = Vec::new();
    for k in 0..ring {
        let a = std::f64::consts::TAU * f64::from(k) / f64::from(ring);
        vertices.push(DVec3::new(0.5 * a.cos(), 0.5 * a.sin(), 0.0));
        edges.push([0, k + 1]);
        edges.push([k + 1, (k + 1) % ring + 1]);
    }
    let hub = random_on(
        &vertices,
        &edges,
        Random {
            seed: 32,
            // 2 cm apart on the circle.
            charge: 1e-9,
            ..Default::default()
        },
    );
    assert_eq!(slice_shift(hub.len(), hub.springs()), 0);
    for system in [&grid, &hub] {
        compare_trajectories(system, &imex(SolverMethod::Jacobi, 30), 100, 1e-3);
        compare_trajectories(system, &imex(SolverMethod::Cg, 10), 100, 1e-3);
    }
}

#[test]
fn imex_block_jacobi_matches_cpu() {
    let system = random_system(Random {
        seed: 22,
        pinned: 2,
        ..Default::default()
    });
    compare_trajectories(&system, &imex(SolverMethod::BlockJacobi, 20), 100, 1e-3);
}

#[test]
fn imex_chebyshev_matches_cpu() {
    let system = random_system(Random {
        seed: 23,
        pinned: 2,
        ..Default::default()
    });
    // rho estimated on both sides (the GPU reuses the CPU estimator).
    compare_trajectories(&system, &imex(SolverMethod::Chebyshev, 20), 100, 1e-3);
    let fixed = Config {
        solver: SolverConfig {
            rho: Some(0.6),
            ..imex(SolverMethod::Chebyshev, 15).solver
        },
        ..imex(SolverMethod::Chebyshev, 15)
    };
    compare_trajectories(&system, &fixed, 100, 1e-3);
}

#[test]
fn imex_cg_matches_cpu() {
    let system = random_system(Random {
        seed: 24,
        pinned: 2,
        ..Default::default()
    });
    compare_trajectories(&system, &imex(SolverMethod::Cg, 10), 100, 1e-3);
}

/// A fixed-count solve far from convergence follows the CPU reference's iteration, not
/// only its fixed point (the trajectory tests above converge, which hides a wrong
/// preconditioner block, CG direction or Chebyshev recurrence): one stiff IMEX step
/// (h = 0.05 s, h^2 k / m up to ~1 per spring, so A is far from its mass diagonal) with
/// 3 to 5 iterations, every solver. The few iterations must matter: the CPU's velocities
/// after them differ from its converged solve (CG, 200 iterations) by over 100 times the
/// tolerance.
///
/// Tolerance: 1e-4 of the largest CPU velocity, as for single force evaluations. A few
/// iterations of a contracting linear recurrence in f32 add a few roundoffs (6e-8) of the
/// iterate per sweep; CG's alpha and beta are ratios of sums far from their noise while
/// the residual is still large.
#[test]
fn unconverged_solves_follow_the_cpu_iteration() {
    let system = random_system(Random {
        seed: 43,
        pinned: 2,
        charged: 0.0,
        speed: 1.0,
        ..Default::default()
    });
    let fixed_rho = Config {
        solver: SolverConfig {
            rho: Some(0.8),
            ..imex(SolverMethod::Chebyshev, 5).solver
        },
        ..imex(SolverMethod::Chebyshev, 5)
    };
    for base in [
        imex(SolverMethod::Jacobi, 4),
        imex(SolverMethod::BlockJacobi, 4),
        imex(SolverMethod::Chebyshev, 5),
        fixed_rho,
        imex(SolverMethod::Cg, 3),
    ] {
        let config = Config { dt: 0.05, ..base };
        let what = format!("{:?} {:?}", config.solver.method, config.solver.rho);
        let cpu_step = |config: &Config| {
            let mut c = CpuSimulation::new(&system, config).unwrap();
            c.step(1).unwrap();
            c.state().unwrap().v
        };
        let cpu = cpu_step(&config);
        let converged = cpu_step(&Config {
            solver: SolverConfig {
                method: SolverMethod::Cg,
                iterations: 200,
                ..config.solver
            },
            ..config.clone()
        });
        let tol = 1e-4 * max_norm(&cpu);
        let unconverged = max_diff(&cpu, &converged);
        assert!(
            unconverged > 100.0 * tol,
            "{what}: the iterations barely matter ({unconverged:e})"
        );
        let Some(mut g) = gpu(&system, &config) else {
            return;
        };
        g.step(1).unwrap();
        let d = max_diff(&g.state().unwrap().v, &cpu);
        eprintln!("{what}: |dv| {d:.2e} (unconverged by {unconverged:.2e}, tol {tol:.2e})");
        assert!(d <= tol, "{what}: velocities differ by {d:e} > {tol:e}");
    }
}

#[test]
fn local_global_matches_cpu() {
    let system = random_system(Random {
        seed: 25,
        pinned: 2,
        ..Default::default()
    });
    // 9 sweeps: the iterate alternates between the two buffers across the local-global
    // iterations and ends in the scratch one.
    for (method, iterations) in [
        (SolverMethod::Jacobi, 12),
        (SolverMethod::BlockJacobi, 9),
        (SolverMethod::Chebyshev, 8),
        (SolverMethod::Cg, 5),
    ] {
        let config = Config {
            integrator: Integrator::LocalGlobal,
            local_global_iterations: 3,
            ..imex(method, iterations)
        };
        compare_trajectories(&system, &config, 100, 1e-3);
        // Both report one step's solver work: the sweeps of all three alternations.
        let Some(mut g) = gpu(&system, &config) else {
            return;
        };
        let mut c = CpuSimulation::new(&system, &config).unwrap();
        g.step(2).unwrap();
        c.step(2).unwrap();
        let (sg, sc) = (
            g.solve_stats().unwrap().unwrap(),
            c.solve_stats().unwrap().unwrap(),
        );
        assert_eq!(sg.iterations, 3 * iterations, "{method:?}");
        assert_eq!(sg.iterations, sc.iterations, "{method:?}");
        // The constant matrix shares the spring-block buffer: the diagnostic is refused
        // rather than allowed to corrupt the next step.
        assert!(matches!(g.spring_blocks(), Err(GpuError::Unsupported(_))));
    }
}

#[test]
fn coincident_charges_without_softening_are_refused_by_both_backends() {
    // Two charges at one point with softening 0: their exact force is infinite. Neither
    // backend drops the pair (the GPU used to return 0 for it): both refuse the system
    // naming the pair, and accept it with a softening length, where they agree.
    let system = System::new(SystemDesc {
        positions: vec![DVec3::ZERO, DVec3::ZERO, DVec3::new(0.5, 0.2, 0.1)],
        masses: vec![0.1; 3],
        charges: vec![1e-6, 2e-6, -1e-6],
        ..Default::default()
    })
    .unwrap();
    let config = imex(SolverMethod::Jacobi, 5);
    let e = CpuSimulation::new(&system, &config).err().expect("refused");
    assert_eq!(e.key, "coulomb.softening");
    assert!(e.message.contains("charged particles 0 and 1"), "{e}");
    let gpu_error = GpuSolver::headless(
        &system,
        &config,
        &HeadlessOptions {
            allow_software: true,
        },
    )
    .err()
    .expect("refused");
    assert!(
        gpu_error.to_string().contains("charged particles 0 and 1"),
        "{gpu_error}"
    );
    let soft = Config {
        coulomb: CoulombConfig {
            method: CoulombMethod::AllPairs,
            softening: 0.01,
        },
        ..config
    };
    check_field_forces(&system, &soft);
}

#[test]
fn explicit_integrators_match_cpu() {
    let system = random_system(Random {
        seed: 26,
        pinned: 2,
        ..Default::default()
    });
    for integrator in [Integrator::SymplecticEuler, Integrator::Verlet] {
        // h omega_max ~ 0.002 * sqrt(12 * 50 / 0.05) ~ 0.2: stable and well resolved.
        let config = Config {
            integrator,
            dt: 0.002,
            ..external_world()
        };
        compare_trajectories(&system, &config, 100, 1e-3);
    }
}

/// Damping under both explicit integrators, where the spring force carries it (IMEX puts
/// it in W_k): springs damped 20 times more than in the other tests (c up to 1 N s/m) on
/// particles moving at up to 1 m/s. The damping must move the CPU run by over 50 times
/// the tolerance, so that an error of 2 % in the damping term shows; the GPU agrees with
/// the CPU to
/// the file's trajectory bound, 1e-3 of the 1 m system over 100 steps (h (2 c / m) <= 0.08
/// and h omega_max ~ 0.2: stable, and roundoff is not amplified).
#[test]
fn damping_under_explicit_integrators_matches_cpu() {
    let system = |damping| {
        random_system(Random {
            seed: 41,
            pinned: 1,
            speed: 1.0,
            damping,
            ..Default::default()
        })
    };
    let (damped, undamped) = (system(1.0), system(0.0));
    let tol = 1e-3;
    for integrator in [Integrator::SymplecticEuler, Integrator::Verlet] {
        let config = Config {
            integrator,
            dt: 0.002,
            ..imex(SolverMethod::Jacobi, 1)
        };
        let end = |s: &System| {
            let mut c = CpuSimulation::new(s, &config).expect("cpu");
            c.step(100).unwrap();
            c.state().unwrap().x
        };
        let effect = max_diff(&end(&damped), &end(&undamped));
        assert!(
            effect > 50.0 * tol,
            "{integrator:?}: damping moved the run by only {effect:e}"
        );
        compare_trajectories(&damped, &config, 100, tol);
    }
}

#[test]
fn imex_with_external_world_matches_cpu() {
    let system = random_system(Random {
        seed: 27,
        pinned: 1,
        ..Default::default()
    });
    let config = Config {
        solver: imex(SolverMethod::BlockJacobi, 20).solver,
        ..external_world()
    };
    compare_trajectories(&system, &config, 100, 1e-3);
}

#[test]
fn residuals_are_reported_and_shrink_with_iterations() {
    let system = random_system(Random {
        seed: 31,
        pinned: 2,
        ..Default::default()
    });
    let residual = |config: &Config| -> Option<f64> {
        let mut g = gpu(&system, config)?;
        assert_eq!(
            g.solve_stats().unwrap(),
            None,
            "no solve before the first step"
        );
        g.step(2).unwrap();
        let stats = g
            .solve_stats()
            .unwrap()
            .expect("implicit steps report stats");
        assert_eq!(stats.iterations, config.solver.iterations);
        // The diagnostic kernels must not disturb the saved stats.
        g.spring_blocks().unwrap();
        assert_eq!(g.solve_stats().unwrap(), Some(stats));
        Some(stats.residual)
    };
    let (Some(few), Some(many)) = (
        residual(&imex(SolverMethod::Jacobi, 3)),
        residual(&imex(SolverMethod::Jacobi, 60)),
    ) else {
        return;
    };
    assert!(many < few / 10.0, "jacobi: {many} vs {few}");
    let Some(cg) = residual(&imex(SolverMethod::Cg, 40)) else {
        return;
    };
    // f32 limits the attainable residual to ~1e-6.
    assert!(cg < 1e-4, "cg residual {cg}");
    // The CPU's residual for the same configuration: r = b - A v cancels, so its f32
    // relative error is about 6e-8 |b| / |r| = 6e-8 / residual (plus the states' own ~1e-6
    // difference, amplified the same way). After 3 sweeps the residual is far above 1e-3,
    // so 1e-2 relative leaves an order of magnitude for the reductions' summation order
    // while a wrong residual formula (missing pinned masking, |b| over all rows) is off by
    // far more.
    let config = imex(SolverMethod::Jacobi, 3);
    let mut c = CpuSimulation::new(&system, &config).unwrap();
    c.step(2).unwrap();
    let cpu = c.solve_stats().unwrap().unwrap().residual;
    assert!((few - cpu).abs() <= 1e-2 * cpu, "GPU {few} vs CPU {cpu}");
    let explicit = Config {
        integrator: Integrator::Verlet,
        ..imex(SolverMethod::Jacobi, 3)
    };
    let Some(mut g) = gpu(&system, &explicit) else {
        return;
    };
    g.step(1).unwrap();
    assert_eq!(g.solve_stats().unwrap(), None);
}

#[test]
fn two_identical_runs_are_bit_identical() {
    let system = random_system(Random {
        seed: 41,
        res: 4,
        pinned: 1,
        ..Default::default()
    });
    for config in [imex(SolverMethod::Cg, 8), external_world()] {
        let run = || -> Option<(State, [(&'static str, f64); 6])> {
            let mut g = gpu(&system, &config)?;
            g.step(20).unwrap();
            Some((g.state().unwrap(), g.energies().unwrap().terms()))
        };
        let (Some(a), Some(b)) = (run(), run()) else {
            return;
        };
        assert_eq!(a.0, b.0);
        assert_eq!(a.1, b.1);
    }
}

/// Verlet reuses a step's a' as the next step's a (as the CPU reference does): the field
/// forces run once per step, plus once before the first step and after a diagnostic that
/// rewrote the force buffer. Reading energies, forces or the state between steps, or
/// profiling some of them, must leave the trajectory bit for bit the same, and a step
/// records one field evaluation fewer than symplectic Euler's two kernels' worth.
#[test]
fn verlet_field_reuse_survives_diagnostics_between_steps() {
    let system = random_system(Random {
        seed: 43,
        pinned: 1,
        ..Default::default()
    });
    let config = Config {
        integrator: Integrator::Verlet,
        dt: 0.002,
        ..external_world()
    };
    // With DDEF the energy diagnostic writes the exact field into the force buffer, so a
    // step that reused it unchecked would leave the DDEF trajectory.
    let mut ddef = config.clone();
    ddef.coulomb.method = CoulombMethod::Ddef(Default::default());
    for config in [&config, &ddef] {
        let Some(mut plain) = gpu(&system, config) else {
            return;
        };
        plain.step(12).unwrap();
        let mut probed = gpu(&system, config).unwrap();
        probed.step(3).unwrap();
        probed.energies().unwrap();
        probed.step(2).unwrap();
        probed.field_forces().unwrap();
        probed.state().unwrap();
        probed.step(1).unwrap();
        match probed.profile(2) {
            Ok(_) => {}
            // Refused as documented: DDEF steps pause for a host stage; profiling needs
            // timestamp queries.
            Err(GpuError::Unsupported(m)) if m.contains("ddef") || !has_timestamps(&probed) => {}
            Err(e) => panic!("{e}"),
        }
        let left = 12 - probed.steps_done();
        probed.step(left).unwrap();
        let name = config.coulomb.method.name();
        assert_eq!(probed.state().unwrap(), plain.state().unwrap(), "{name}");
    }
    // Per step: springs, one field evaluation (external + 2 Coulomb kernels), a kick,
    // springs, a kick; the explicit Euler step has springs, field, kick.
    let verlet = gpu(&system, &config).unwrap();
    let euler = gpu(
        &system,
        &Config {
            integrator: Integrator::SymplecticEuler,
            ..config.clone()
        },
    )
    .unwrap();
    assert_eq!(
        verlet.dispatches_per_step(),
        euler.dispatches_per_step() + 2
    );
}

/// One `record_steps` call of more dispatches than `MAX_RECORDED_DISPATCHES` (u32::MAX
/// steps would take gigabytes of host memory before anything ran) is a limit error that
/// records and counts nothing; a call within it still records.
#[test]
fn recording_more_dispatches_than_the_limit_is_refused() {
    let Some((device, queue)) = device() else {
        return;
    };
    let system = random_system(Random {
        seed: 52,
        ..Default::default()
    });
    let mut solver = GpuSolver::new(&device, &queue, &system, &external_world()).unwrap();
    let per_step = solver.dispatches_per_step() as u64;
    let most = (msc::gpu::MAX_RECORDED_DISPATCHES - per_step) / per_step;
    let mut encoder = device.create_command_encoder(&Default::default());
    match solver.record_steps(&mut encoder, u32::MAX) {
        Err(GpuError::LimitExceeded {
            what,
            needed,
            limit,
        }) => {
            assert!(what.contains("record_steps"), "{what}");
            assert!(needed > limit, "{needed} {limit}");
            assert_eq!(limit, msc::gpu::MAX_RECORDED_DISPATCHES);
        }
        other => panic!("expected a limit error, got {other:?}"),
    }
    assert!(
        matches!(
            solver.record_steps(&mut encoder, (most + 2) as u32),
            Err(GpuError::LimitExceeded { .. })
        ),
        "{most} + 2 steps"
    );
    assert_eq!(solver.steps_done(), 0);
    solver.record_steps(&mut encoder, 3).unwrap();
    queue.submit([encoder.finish()]);
    assert_eq!(solver.state().unwrap().step, 3);
}

#[test]
fn recording_into_a_caller_encoder_matches_step() {
    let Some((device, queue)) = device() else {
        return;
    };
    let system = random_system(Random {
        seed: 51,
        ..Default::default()
    });
    let config = external_world();
    let mut embedded = GpuSolver::new(&device, &queue, &system, &config).unwrap();
    let usage = embedded.positions_buffer().usage();
    assert!(usage.contains(
        wgpu::BufferUsages::VERTEX | wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC
    ));
    assert_eq!(embedded.positions_buffer().size(), 16 * system.len() as u64);
    let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
        label: Some("caller"),
    });
    embedded.record_steps(&mut encoder, 6).unwrap();
    queue.submit([encoder.finish()]);
    let mut reference = GpuSolver::new(&device, &queue, &system, &config).unwrap();
    reference.step(6).unwrap();
    let (a, b) = (embedded.state().unwrap(), reference.state().unwrap());
    assert_eq!(a.step, 6);
    assert_eq!(a, b);
    assert_ne!(a.x, system.positions());
    // The positions buffer holds xyz + w = 1 for drawing.
    let staging = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("check"),
        size: embedded.positions_buffer().size(),
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut encoder = device.create_command_encoder(&Default::default());
    encoder.copy_buffer_to_buffer(embedded.positions_buffer(), 0, &staging, 0, None);
    queue.submit([encoder.finish()]);
    staging
        .slice(..)
        .map_async(wgpu::MapMode::Read, |r| r.unwrap());
    device.poll(wgpu::PollType::wait_indefinitely()).unwrap();
    let view = staging.slice(..).get_mapped_range().unwrap();
    let xs: &[[f32; 4]] = bytemuck::cast_slice(&view);
    for (i, p) in xs.iter().enumerate() {
        assert_eq!(p[3], 1.0);
        assert_eq!(p[0] as f64, a.x[i].x);
    }
}

#[test]
fn bad_inputs_give_typed_errors() {
    let system = random_system(Random::default());
    let Some((device, queue)) = device() else {
        return;
    };
    // Invalid configuration.
    let bad = Config {
        dt: 0.0,
        ..imex(SolverMethod::Jacobi, 5)
    };
    match GpuSolver::new(&device, &queue, &system, &bad) {
        Err(GpuError::Config(e)) => assert_eq!(e.key, "integrator.dt"),
        other => panic!("expected a config error, got {:?}", other.err()),
    }
    // More external charges than the kernels take.
    let many = Config {
        external_charges: vec![
            ExternalCharge {
                charge: 1e-6,
                position: DVec3::X * 3.0,
                orbit: None,
            };
            9
        ],
        ..imex(SolverMethod::Jacobi, 5)
    };
    assert!(matches!(
        GpuSolver::new(&device, &queue, &system, &many),
        Err(GpuError::Unsupported(_))
    ));
    // DDEF on the lattice records into a caller's encoder (tests/gpu_ddef.rs); the
    // Delaunay grid is refused with a typed error that names the lattice.
    let ddef = Config {
        coulomb: CoulombConfig {
            method: CoulombMethod::Ddef(Default::default()),
            softening: 0.0,
        },
        ..imex(SolverMethod::Jacobi, 5)
    };
    let mut solver = GpuSolver::new(&device, &queue, &system, &ddef).expect("DDEF solver");
    let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
    solver
        .record_steps(&mut encoder, 1)
        .expect("DDEF steps record");
    let delaunay = Config {
        coulomb: CoulombConfig {
            method: CoulombMethod::Ddef(msc::config::DdefConfig {
                grid: msc::config::DdefGrid::Delaunay,
                ..Default::default()
            }),
            softening: 0.0,
        },
        ..imex(SolverMethod::Jacobi, 5)
    };
    match GpuSolver::new(&device, &queue, &system, &delaunay) {
        Err(GpuError::Unsupported(m)) => assert!(m.contains("lattice"), "{m}"),
        other => panic!("expected unsupported, got {:?}", other.err()),
    }
    // Values that f32 cannot hold.
    let huge = System::new(SystemDesc {
        positions: vec![DVec3::ZERO, DVec3::X * 1e300],
        masses: vec![1.0, 1.0],
        ..Default::default()
    })
    .unwrap();
    match GpuSolver::new(&device, &queue, &huge, &imex(SolverMethod::Jacobi, 5)) {
        Err(e @ GpuError::F32Range { .. }) => {
            assert!(e.to_string().contains("position of particle 1 (x)"), "{e}")
        }
        other => panic!("expected an f32 range error, got {:?}", other.err()),
    }
}

#[test]
fn small_device_limits_give_limit_errors() {
    let Some(adapter) = adapter() else {
        return;
    };
    let open = |limits: wgpu::Limits| {
        pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            required_limits: limits,
            ..Default::default()
        }))
        .expect("device with reduced limits")
    };
    let system = random_system(Random::default());
    let config = imex(SolverMethod::Cg, 5);
    // Buffers larger than the device allows: the error names the buffer and both sizes.
    let (device, queue) = open(wgpu::Limits {
        max_storage_buffer_binding_size: 1024,
        ..Default::default()
    });
    match GpuSolver::new(&device, &queue, &system, &config) {
        Err(GpuError::LimitExceeded {
            what,
            needed,
            limit,
        }) => {
            assert_eq!(limit, 1024);
            assert!(needed > 1024, "{what}: {needed}");
            assert!(what.contains("storage buffer"), "{what}");
        }
        other => panic!("expected a limit error, got {:?}", other.err()),
    }
    // Fewer storage buffers per stage than the widest kernel binds.
    let (device, queue) = open(wgpu::Limits {
        max_storage_buffers_per_shader_stage: 4,
        ..Default::default()
    });
    assert!(matches!(
        GpuSolver::new(&device, &queue, &system, &config),
        Err(GpuError::LimitExceeded {
            needed: 8,
            limit: 4,
            ..
        })
    ));
}

#[test]
fn adapter_is_described() {
    let system = random_system(Random::default());
    let Some(g) = gpu(&system, &imex(SolverMethod::Jacobi, 1)) else {
        return;
    };
    let a = g.adapter().expect("summary");
    assert_eq!(g.backend_name(), a.name);
    assert!(a.max_storage_buffers_per_shader_stage >= 8);
    assert!(msc::gpu::list_adapters().iter().any(|l| l.name == a.name));
}

/// A process that builds a solver per run (a batch, a Python loop) must keep finding its
/// adapter: NVIDIA's Vulkan driver stopped listing its GPU after 30 wgpu instances in one
/// process (an H100: the 31st headless solver found none), so every headless device
/// shares the process's one instance. lavapipe never ran out; this fails on such a GPU.
#[test]
fn forty_headless_solvers_in_turn_each_find_the_adapter() {
    let system = random_system(Random::default());
    for i in 0..40 {
        let Some(mut g) = gpu(&system, &imex(SolverMethod::Jacobi, 1)) else {
            assert_eq!(i, 0, "solver {i} found no adapter, after {i} that did");
            return;
        };
        g.step(1).unwrap();
    }
}

/// The shared instance's adapters from many threads at once (a test harness, a batch
/// driver): wgpu's GL adapters share its EGL context, and enumerating on one thread while
/// another dropped its list panicked inside wgpu (EGL BadAccess) until the library took
/// them one thread at a time.
#[test]
fn adapters_are_listed_and_opened_from_many_threads_at_once() {
    let Some(_) = adapter() else {
        return;
    };
    let options = HeadlessOptions {
        allow_software: true,
    };
    std::thread::scope(|s| {
        for t in 0..8 {
            let options = &options;
            s.spawn(move || {
                for i in 0..10 {
                    assert!(
                        !msc::gpu::list_adapters().is_empty(),
                        "thread {t}, list {i}"
                    );
                    if i % 5 == t % 5 {
                        msc::gpu::open_headless_device(options).expect("device");
                    }
                }
            });
        }
    });
}

#[test]
fn a_lost_device_is_reported() {
    let system = random_system(Random::default());
    let Some(mut g) = gpu(&system, &imex(SolverMethod::Jacobi, 2)) else {
        return;
    };
    g.step(1).unwrap();
    // Idle first: wgpu completes a destroy (and reports the loss) once the queue drains.
    g.state().unwrap();
    g.device().destroy();
    match g.step(1) {
        Err(msc::SimError::Gpu(GpuError::DeviceLost(m))) => eprintln!("lost: {m}"),
        other => panic!("expected device lost, got {other:?}"),
    }
    assert!(matches!(
        g.state(),
        Err(msc::SimError::Gpu(GpuError::DeviceLost(_)))
    ));
}

/// Whether the solver's device can profile (`GpuSolver::profile` needs timestamp queries).
fn has_timestamps(g: &GpuSolver) -> bool {
    g.device()
        .features()
        .contains(wgpu::Features::TIMESTAMP_QUERY)
}

#[test]
fn profiling_times_every_kernel_and_advances_like_step() {
    let system = random_system(Random::default());
    let config = imex(SolverMethod::Cg, 4);
    let Some(mut g) = gpu(&system, &config) else {
        return;
    };
    if !has_timestamps(&g) {
        common::skip_missing_feature("profiling", "TIMESTAMP_QUERY");
        return;
    }
    let profile = g.profile(3).unwrap();
    let total: u64 = profile.iter().map(|k| k.dispatches).sum();
    assert_eq!(total, 3 * g.dispatches_per_step() as u64);
    for name in [
        "spring_assemble",
        "coulomb_tiled",
        "rhs",
        "cg_matvec",
        "integrate",
    ] {
        let k = profile.iter().find(|k| k.kernel == name).expect(name);
        assert!(k.seconds >= 0.0 && k.seconds.is_finite());
    }
    assert!(profile.iter().map(|k| k.seconds).sum::<f64>() > 0.0);
    // The profiled steps are real steps: same state as an unprofiled run.
    let mut plain = gpu(&system, &config).unwrap();
    plain.step(3).unwrap();
    assert_eq!(g.state().unwrap(), plain.state().unwrap());
}

#[test]
fn two_dimensional_dispatch_grids_give_the_same_run() {
    // 8000 particles = 32 workgroups (66000 springs = 259); a device allowing 17 per
    // dimension runs them as 16 x 2 (and 17 x 16) grids. Every kernel indexes (and reduces) by the linear workgroup index, so the run
    // must be bit-identical to the 1D one.
    let system = random_system(Random {
        seed: 61,
        res: 20,
        charged: 0.3,
        ..Default::default()
    });
    let config = imex(SolverMethod::Cg, 4);
    let Some(adapter) = adapter() else {
        return;
    };
    let run = |max_per_dim: u32| {
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            required_limits: wgpu::Limits {
                max_compute_workgroups_per_dimension: max_per_dim,
                ..Default::default()
            },
            ..Default::default()
        }))
        .expect("device");
        let mut g = GpuSolver::new(&device, &queue, &system, &config).unwrap();
        g.step(3).unwrap();
        (
            g.state().unwrap(),
            g.energies().unwrap(),
            g.solve_stats().unwrap(),
        )
    };
    let (a, b) = (run(65535), run(17));
    assert_eq!(a.0, b.0);
    assert_eq!(a.1, b.1);
    assert_eq!(a.2, b.2);
    assert_ne!(a.0.x, system.positions());
}

#[test]
fn free_fall_and_a_moving_pinned_particle_are_exact() {
    // No springs: A = M, so v' = v + h g after the solve converges, x_N = x_0 + h^2 g N(N+1)/2.
    // A pinned particle moves with its prescribed velocity and keeps it.
    let v_pin = DVec3::new(0.5, 0.0, 0.25);
    let system = System::new(SystemDesc {
        positions: vec![DVec3::ZERO, DVec3::X],
        velocities: vec![DVec3::ZERO, v_pin],
        masses: vec![0.5, 2.0],
        pinned: vec![false, true],
        ..Default::default()
    })
    .unwrap();
    for integrator in Integrator::NAMES.map(|n| Integrator::from_name(n).unwrap()) {
        let config = Config {
            integrator,
            local_global_iterations: 2,
            ..imex(SolverMethod::BlockJacobi, 30)
        };
        let Some(mut g) = gpu(&system, &config) else {
            return;
        };
        let steps = 40u64;
        g.step(steps).unwrap();
        let s = g.state().unwrap();
        let h = config.dt;
        let nf = steps as f64;
        let (x_exact, v_exact) = match integrator {
            // Implicit and symplectic Euler: v_k = k h g, x_N = h sum_{k=1..N} v_k.
            Integrator::Verlet => (
                0.5 * config.gravity * (nf * h).powi(2),
                config.gravity * nf * h,
            ),
            _ => (
                config.gravity * h * h * nf * (nf + 1.0) / 2.0,
                config.gravity * nf * h,
            ),
        };
        // f32: relative 1e-5 over 40 accumulations.
        let tol = 1e-5 * v_exact.length();
        assert!(
            (s.v[0] - v_exact).length() <= tol,
            "{integrator:?}: v {:?}",
            s.v[0]
        );
        assert!(
            (s.x[0] - x_exact).length() <= 1e-5 * x_exact.length(),
            "{integrator:?}: x {:?} vs {x_exact:?}",
            s.x[0]
        );
        assert_eq!(s.v[1], v_pin, "{integrator:?}: pinned velocity");
        // Each x += h v rounds by up to half an f32 ulp of |x| ~ 1.1 (1.2e-7): N ulps bound.
        let x_pin = DVec3::X + v_pin * (nf * h);
        let ulp = f64::from(f32::EPSILON) * 2.0;
        assert!(
            (s.x[1] - x_pin).length() <= nf * ulp,
            "{integrator:?}: pinned x {:?}",
            s.x[1]
        );
    }
}

/// A linear drag (docs/physics.md §3) with a coefficient of the masses' order over the
/// run (c t / m ~ 1.25: the speeds fall about threefold) matches the CPU reference in every
/// integrator to the trajectories' 1e-3, and moves them far more than that: a GPU that
/// dropped it or got its size wrong would fail.
#[test]
fn drag_matches_cpu_in_every_integrator() {
    let system = random_system(Random {
        seed: 33,
        pinned: 1,
        speed: 1.0,
        ..Default::default()
    });
    let local_global = Config {
        integrator: Integrator::LocalGlobal,
        local_global_iterations: 3,
        ..imex(SolverMethod::Jacobi, 10)
    };
    let explicit = |integrator| Config {
        integrator,
        dt: 0.002,
        ..external_world()
    };
    for base in [
        imex(SolverMethod::Jacobi, 20),
        local_global,
        explicit(Integrator::SymplecticEuler),
        explicit(Integrator::Verlet),
    ] {
        let mut config = base.clone();
        config.world.drag = 0.5;
        let steps = (0.25 / config.dt) as u64;
        let mut with = CpuSimulation::new(&system, &config).unwrap();
        let mut without = CpuSimulation::new(&system, &base).unwrap();
        with.step(steps).unwrap();
        without.step(steps).unwrap();
        let effect = max_diff(&with.state().unwrap().x, &without.state().unwrap().x);
        assert!(
            effect > 1e-2,
            "{:?}: the drag moved x by {effect:e}",
            base.integrator
        );
        compare_trajectories(&system, &config, steps, 1e-3);
    }
}

/// llvmpipe ends a shader's loops after 65,535 iterations in all, so all-pairs Coulomb
/// over more charges than `limits::CPU_ADAPTER_ALL_PAIRS_CHARGES` would drop sources
/// silently on a CPU adapter: it is refused there, naming the count and the limit. One
/// charge past the limit is refused; the limit itself builds (any adapter).
#[test]
fn all_pairs_past_a_cpu_adapters_loop_budget_is_refused_there() {
    use msc::gpu::limits::CPU_ADAPTER_ALL_PAIRS_CHARGES;
    let Some(a) = adapter() else {
        return;
    };
    let cpu = a.get_info().device_type == wgpu::DeviceType::Cpu;
    let Some((device, queue)) = device() else {
        return;
    };
    let system_of = |n: u64| common::charged_line(n as usize);
    let config = common::all_pairs_config();
    let over = system_of(CPU_ADAPTER_ALL_PAIRS_CHARGES + 1);
    match GpuSolver::new(&device, &queue, &over, &config) {
        Err(GpuError::LimitExceeded {
            what,
            needed,
            limit,
        }) if cpu => {
            assert_eq!(
                (needed, limit),
                (
                    CPU_ADAPTER_ALL_PAIRS_CHARGES + 1,
                    CPU_ADAPTER_ALL_PAIRS_CHARGES
                )
            );
            assert!(what.contains("65,535") && what.contains("ddef"), "{what}");
        }
        Ok(_) if !cpu => {}
        other => panic!("cpu adapter {cpu}: got {:?}", other.err()),
    }
    let at = system_of(CPU_ADAPTER_ALL_PAIRS_CHARGES);
    assert!(GpuSolver::new(&device, &queue, &at, &config).is_ok());
}
