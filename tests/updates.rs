//! Writing into a running simulation instead of rebuilding it (`Simulator::set_state`,
//! `Simulator::set_parameters`, the f32 reads): on each backend, a solver that was
//! stepped, then given a state and parameters, steps exactly as a solver built with
//! them (bit for bit: the same values reach the same arithmetic); the GPU after updates
//! against the CPU after the same updates; and the refusals, each naming the problem.
//!
//! GPU tests run on whatever adapter wgpu finds (lavapipe included), skip with a
//! message when there is none, and fail instead when `MSC_REQUIRE_GPU=1`.

mod common;

use common::{gpu, Rng};
use glam::DVec3;
use msc::config::{Config, CoulombConfig, CoulombMethod, Integrator, SolverConfig, SolverMethod};
use msc::cpu::CpuSimulation;
use msc::gpu::GpuError;
use msc::model::{mesh, ModelError, Spring, State, System, SystemDesc};
use msc::{SimError, Simulator};

/// A braced 3 x 3 x 3 lattice with jittered positions, random springs, masses,
/// velocities and charges of both signs on about half the particles; one pinned.
fn system() -> System {
    let m = mesh::lattice([1.0, 1.0, 1.0], [3; 3]).expect("lattice");
    let mut rng = Rng(7);
    let n = m.positions.len();
    System::new(SystemDesc {
        positions: m.positions.iter().map(|p| *p + rng.vec(0.03)).collect(),
        velocities: (0..n).map(|_| rng.vec(0.2)).collect(),
        masses: (0..n).map(|_| rng.range(0.05, 0.2)).collect(),
        charges: (0..n)
            .map(|i| {
                if i % 2 == 0 {
                    1e-6 * rng.range(-1.5, 1.5)
                } else {
                    0.0
                }
            })
            .collect(),
        pinned: (0..n).map(|i| i == 0).collect(),
        springs: m
            .edges
            .iter()
            .map(|&[i, j]| Spring {
                i,
                j,
                stiffness: rng.range(20.0, 50.0),
                rest_length: (m.positions[i as usize] - m.positions[j as usize]).length()
                    * rng.range(0.9, 1.1),
                damping: rng.range(0.0, 0.05),
            })
            .collect(),
        ..Default::default()
    })
    .unwrap()
}

fn config(integrator: Integrator) -> Config {
    Config {
        integrator,
        dt: if integrator.is_implicit() {
            0.01
        } else {
            0.002
        },
        solver: SolverConfig {
            method: SolverMethod::Jacobi,
            iterations: 30,
            tolerance: 0.0,
            ..Default::default()
        },
        local_global_iterations: 3,
        gravity: DVec3::new(0.0, 0.0, -9.81),
        coulomb: CoulombConfig {
            method: CoulombMethod::AllPairs,
            softening: 1e-3,
        },
        ..Default::default()
    }
}

/// The system with its charges doubled and its stiffnesses scaled by 1.5 (a charged
/// particle keeps its charge, so the topology holds).
fn updated(s: &System) -> System {
    let q: Vec<f64> = s.charges().iter().map(|q| 2.0 * q).collect();
    let k: Vec<f64> = s.springs().iter().map(|sp| 1.5 * sp.stiffness).collect();
    s.with_charges(&q).unwrap().with_stiffnesses(&k).unwrap()
}

const INTEGRATORS: [Integrator; 3] = [
    Integrator::Imex,
    Integrator::LocalGlobal,
    Integrator::Verlet,
];

/// Steps `a` 7 steps, writes `target`'s initial state and parameters into it, steps 10;
/// returns its state and that of `b` (built with `target`) after 10 steps.
fn rewound(a: &mut dyn Simulator, b: &mut dyn Simulator, target: &System) -> (State, State) {
    a.step(7).unwrap();
    a.set_state(target.positions(), target.velocities())
        .unwrap();
    a.set_parameters(target).unwrap();
    a.step(10).unwrap();
    b.step(10).unwrap();
    (a.state().unwrap(), b.state().unwrap())
}

fn assert_same_motion(a: &State, b: &State, what: &str) {
    assert_eq!(a.x, b.x, "{what}: positions");
    assert_eq!(a.v, b.v, "{what}: velocities");
    assert!(a.is_finite(), "{what}: a finite trajectory");
}

#[test]
fn gpu_updates_step_as_a_solver_built_with_them() {
    let s = system();
    let target = updated(&s);
    for integrator in INTEGRATORS {
        let c = config(integrator);
        let (Some(mut a), Some(mut b)) = (gpu(&s, &c), gpu(&target, &c)) else {
            return;
        };
        let (sa, sb) = rewound(&mut a, &mut b, &target);
        assert_same_motion(&sa, &sb, integrator.name());
        assert_eq!(sa.step, 17);
        // The f32 reads are the device's values: the f64 state rounds back to them.
        let x32 = a.positions_f32().unwrap();
        let v32 = a.velocities_f32().unwrap();
        for i in 0..s.len() {
            assert_eq!(x32[i], sa.x[i].as_vec3().to_array());
            assert_eq!(v32[i], sa.v[i].as_vec3().to_array());
        }
    }
}

#[test]
fn cpu_updates_step_as_a_simulation_built_with_them() {
    let s = system();
    let target = updated(&s);
    for integrator in INTEGRATORS {
        let c = config(integrator);
        let mut a = CpuSimulation::new(&s, &c).unwrap();
        let mut b = CpuSimulation::new(&target, &c).unwrap();
        let (sa, sb) = rewound(&mut a, &mut b, &target);
        assert_same_motion(&sa, &sb, integrator.name());
        assert_eq!(a.energy_terms(), b.energy_terms(), "{}", integrator.name());
    }
}

/// The same updates on both backends, from a perturbed state, then 40 steps compared as
/// tests/gpu_solver.rs compares trajectories: 1e-3 of the system's 1 m size for
/// positions, of the largest CPU speed for velocities (f32 against f64 over a
/// well-conditioned run).
#[test]
fn gpu_after_updates_matches_cpu_after_the_same_updates() {
    let s = system();
    let target = updated(&s);
    let mut rng = Rng(11);
    let x: Vec<DVec3> = s.positions().iter().map(|p| *p + rng.vec(0.02)).collect();
    let v: Vec<DVec3> = (0..s.len()).map(|_| rng.vec(0.3)).collect();
    for integrator in INTEGRATORS {
        let c = config(integrator);
        let Some(mut g) = gpu(&s, &c) else { return };
        let mut cpu = CpuSimulation::new(&s, &c).unwrap();
        for sim in [&mut g as &mut dyn Simulator, &mut cpu] {
            sim.step(5).unwrap();
            sim.set_state(&x, &v).unwrap();
            sim.set_parameters(&target).unwrap();
            sim.step(40).unwrap();
        }
        let (gs, cs) = (g.state().unwrap(), Simulator::state(&mut cpu).unwrap());
        assert_eq!((gs.step, cs.step), (45, 45));
        let dx =
            gs.x.iter()
                .zip(&cs.x)
                .map(|(a, b)| a.distance(*b))
                .fold(0.0, f64::max);
        let vmax = cs.v.iter().map(|v| v.length()).fold(0.0, f64::max);
        let dv =
            gs.v.iter()
                .zip(&cs.v)
                .map(|(a, b)| a.distance(*b))
                .fold(0.0, f64::max);
        assert!(
            dx <= 1e-3,
            "{}: positions differ by {dx:e} m",
            integrator.name()
        );
        assert!(
            dv <= 1e-3 * vmax,
            "{}: velocities differ by {dv:e}",
            integrator.name()
        );
    }
}

#[test]
fn updates_that_would_change_the_topology_or_a_fixed_setting_are_refused() {
    let s = system();
    let c = config(Integrator::Imex);
    let mut q = s.charges().to_vec();
    q[1] = 1e-6; // particle 1 was uncharged
    let recharged = s.with_charges(&q).unwrap();
    let mut cpu = CpuSimulation::new(&s, &c).unwrap();
    let e = Simulator::set_parameters(&mut cpu, &recharged).unwrap_err();
    assert!(
        matches!(e, SimError::Model(ModelError::TopologyChanged { .. })),
        "{e}"
    );
    assert!(e.to_string().contains("particle 1"), "{e}");
    let short = vec![DVec3::ZERO; 3];
    let e = Simulator::set_state(&mut cpu, &short, &short).unwrap_err();
    assert!(e.to_string().contains("3 entries"), "{e}");

    let cheb = Config {
        solver: SolverConfig {
            method: SolverMethod::Chebyshev,
            ..c.solver
        },
        ..c.clone()
    };
    let mut cpu_cheb = CpuSimulation::new(&s, &cheb).unwrap();
    match Simulator::set_parameters(&mut cpu_cheb, &updated(&s)) {
        Err(SimError::Config(e)) => assert_eq!(e.key, "integrator.solver.rho"),
        other => panic!("{other:?}"),
    }
    // A given spectral radius fixes Chebyshev's weights: updates are accepted.
    let mut given = cheb.clone();
    given.solver.rho = Some(0.9);
    let mut cpu_given = CpuSimulation::new(&s, &given).unwrap();
    Simulator::set_parameters(&mut cpu_given, &updated(&s)).unwrap();

    let Some(mut g) = gpu(&s, &c) else { return };
    assert!(matches!(
        g.set_parameters(&recharged),
        Err(GpuError::Model(ModelError::TopologyChanged { .. }))
    ));
    let Some(mut g_cheb) = gpu(&s, &cheb) else {
        return;
    };
    assert!(matches!(
        g_cheb.set_parameters(&updated(&s)),
        Err(GpuError::Config(e)) if e.key == "integrator.solver.rho"
    ));
    // A position f32 cannot square without overflow: the GPU refuses it, naming the
    // particle; the f64 reference takes it.
    let mut far = s.positions().to_vec();
    far[4].x = 1e30;
    let e = g.write_state(&far, s.velocities()).unwrap_err();
    assert!(
        matches!(&e, GpuError::F32Range { what, .. } if what == "position of particle 4 (x)"),
        "{e}"
    );
    Simulator::set_state(&mut cpu, &far, s.velocities()).unwrap();
    let mut nan = s.velocities().to_vec();
    nan[2].z = f64::NAN;
    assert!(matches!(
        g.write_state(s.positions(), &nan),
        Err(GpuError::Model(ModelError::NonFinite {
            index: 2,
            what: "velocity"
        }))
    ));
    // Refused updates leave the solver as it was: it still steps as a fresh one.
    let Some(mut fresh) = gpu(&s, &c) else { return };
    g.step(3).unwrap();
    fresh.step(3).unwrap();
    assert_same_motion(
        &g.state().unwrap(),
        &fresh.state().unwrap(),
        "after refusals",
    );
}

/// Steps return once submitted; `synchronize` waits for them and keeps the state.
#[test]
fn synchronize_waits_and_keeps_the_state() {
    let s = system();
    let c = config(Integrator::Imex);
    let Some(mut g) = gpu(&s, &c) else { return };
    for _ in 0..20 {
        g.step(1).unwrap();
    }
    Simulator::synchronize(&mut g).unwrap();
    assert_eq!(Simulator::steps_done(&mut g).unwrap(), 20);
    let Some(mut once) = gpu(&s, &c) else { return };
    once.step(20).unwrap();
    assert_same_motion(&g.state().unwrap(), &once.state().unwrap(), "20 x 1 vs 20");
}
