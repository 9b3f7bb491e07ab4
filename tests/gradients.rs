//! Gradients through the simulation (`msc::grad`) against central finite differences of
//! the same simulation, and the fitting loop.
//!
//! What is compared: the tangent dx/dtheta at a frame (all particles, all components) with
//! (x(theta + d) - x(theta - d)) / 2d from two forward runs, d = 1e-4 |theta|. The forward
//! runs solve their linear systems with CG to a relative residual of 1e-13
//! (`exact_forward`), so the finite differences see the exact-solve map that the tangents
//! differentiate. Required agreement: |fd - tangent| <= 1e-5 |tangent| (vector norms over
//! all particles).
//! The error budget of the central difference: truncation O(d^2) ~ 1e-8 relative for these
//! smooth maps; the forward solves' residual (1e-13 of |b|, and for local_global b holds
//! positions ~ 1 m while dx/dtheta can be ~ 1e-3 m) enters as ~1e-13 |x| / (d |dx|) ~ 1e-6;
//! rounding as ~1e-16 |x| / (d |dx|) ~ 1e-9. (With d = 1e-6 the solve noise alone reaches
//! 1e-5 on the local_global cloth; at 1e-3 and 1e-4 that case agrees to 9e-9 and 7e-8.)
//! So a correct tangent agrees to ~1e-6 or better, while a missing term (a dropped dA v',
//! a wrong sign, a stale x) shows at the percent level.

// Per-particle checks read best with explicit indices.
#![allow(clippy::needless_range_loop)]

mod common;

use glam::DVec3;
use msc::config::{Config, ExternalCharge, Integrator, Orbit, SolverConfig, SolverMethod};
use msc::cpu::CpuSimulation;
use msc::grad::{
    self, evaluate, fit, simulate, simulate_with_tangents, FitOptions, GradError, GradOptions,
    Optimizer, Param, ParamSet, TangentSolve, Target,
};
use msc::model::mesh::{grid, icosphere};
use msc::model::{Spring, System, SystemDesc};
use msc::Simulator;

// ---------------------------------------------------------------------------------------
// helpers

struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn range(&mut self, a: f64, b: f64) -> f64 {
        a + (b - a) * self.unit()
    }
    fn vec3(&mut self, s: f64) -> DVec3 {
        DVec3::new(self.range(-s, s), self.range(-s, s), self.range(-s, s))
    }
    fn index(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// A charged ball: icosphere (42 particles, 120 springs), rest lengths 0.95 of the mesh's,
/// random initial velocities and slightly varied charges and stiffnesses so no symmetry
/// hides a term.
fn ball(seed: u64) -> System {
    let mesh = icosphere(0.5, 1).unwrap();
    let mut rng = Rng(seed);
    let n = mesh.positions.len();
    let springs = mesh
        .edges
        .iter()
        .map(|&[i, j]| Spring {
            i,
            j,
            stiffness: 2.0 * rng.range(0.8, 1.2),
            rest_length: 0.95 * (mesh.positions[j as usize] - mesh.positions[i as usize]).length(),
            damping: 0.01,
        })
        .collect();
    System::new(SystemDesc {
        positions: mesh.positions.clone(),
        velocities: (0..n).map(|_| rng.vec3(0.3)).collect(),
        masses: vec![0.02; n],
        charges: (0..n).map(|_| 2e-7 * rng.range(0.8, 1.2)).collect(),
        pinned: vec![],
        springs,
        faces: mesh.faces.clone(),
    })
    .unwrap()
}

/// A 6 x 6 cloth (shear springs) hanging from two pinned corners, lightly charged.
fn cloth() -> System {
    let mesh = grid([1.0, 1.0], [6, 6], true, false).unwrap();
    let n = mesh.positions.len();
    // Hang in the x-z plane: grid y becomes height.
    let positions: Vec<DVec3> = mesh
        .positions
        .iter()
        .map(|p| DVec3::new(p.x, 0.0, p.y))
        .collect();
    let springs = mesh
        .edges
        .iter()
        .map(|&[i, j]| Spring {
            i,
            j,
            stiffness: 50.0,
            rest_length: (positions[j as usize] - positions[i as usize]).length(),
            damping: 0.02,
        })
        .collect();
    let mut pinned = vec![false; n];
    pinned[n - 1] = true;
    pinned[n - 6] = true;
    System::new(SystemDesc {
        positions,
        velocities: vec![],
        masses: vec![0.01; n],
        charges: vec![5e-8; n],
        pinned,
        springs,
        faces: mesh.faces.clone(),
    })
    .unwrap()
}

fn config(integrator: Integrator, dt: f64) -> Config {
    Config {
        integrator,
        dt,
        steps: 1,
        local_global_iterations: 4,
        solver: SolverConfig {
            method: SolverMethod::Cg,
            iterations: 5000,
            omega: 1.0,
            tolerance: 1e-13,
            rho: None,
        },
        ..Config::default()
    }
}

fn exact() -> GradOptions {
    GradOptions {
        tangent_solve: TangentSolve {
            tolerance: 1e-13,
            max_iterations: 5000,
        },
        exact_forward: true,
        window: None,
        ..GradOptions::default()
    }
}

/// Relative step of the central differences (see the header for the error budget).
const FD_STEP: f64 = 1e-4;

fn rel_err(a: &[DVec3], b: &[DVec3]) -> f64 {
    let num: f64 = a
        .iter()
        .zip(b)
        .map(|(a, b)| (*a - *b).length_squared())
        .sum();
    let den: f64 = b.iter().map(|b| b.length_squared()).sum();
    (num / den).sqrt()
}

/// Checks the tangents of the listed components at every frame against central differences.
fn check_components(set: &ParamSet, frames: &[u64], components: &[usize], what: &str) {
    let opts = exact();
    let theta = set.initial();
    let run = simulate_with_tangents(set, &theta, frames, &opts).unwrap();
    assert!(
        run.stats.worst_tangent_residual <= 1e-12,
        "{what}: tangent solves reached only {}",
        run.stats.worst_tangent_residual
    );
    let names = set.component_names();
    for &p in components {
        let d = FD_STEP * theta[p].abs().max(1e-300);
        let mut plus = theta.clone();
        plus[p] += d;
        let mut minus = theta.clone();
        minus[p] -= d;
        let sp = simulate(set, &plus, frames, &opts).unwrap();
        let sm = simulate(set, &minus, frames, &opts).unwrap();
        for (k, f) in run.frames.iter().enumerate() {
            let fd: Vec<DVec3> = sp[k]
                .x
                .iter()
                .zip(&sm[k].x)
                .map(|(a, b)| (*a - *b) / (2.0 * d))
                .collect();
            let an = &f.tangents[p].dx;
            let scale: f64 = an.iter().map(|v| v.length_squared()).sum::<f64>().sqrt();
            assert!(scale > 0.0, "{what}: {} has a zero tangent", names[p]);
            let e = rel_err(&fd, an);
            assert!(
                e <= 1e-5,
                "{what}: d x / d {} at step {}: relative error {e:.3e} (|dx| = {scale:.3e})",
                names[p],
                f.step
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// the forward map the tangents differentiate is the reference's

#[test]
fn the_gradient_forward_is_the_cpu_reference_bit_for_bit() {
    for integrator in [
        Integrator::Imex,
        Integrator::LocalGlobal,
        Integrator::SymplecticEuler,
        Integrator::Verlet,
    ] {
        let system = ball(1);
        let mut c = config(integrator, 0.004);
        // An inexact, configured solve: the mirror must follow it too.
        c.solver = SolverConfig {
            method: SolverMethod::Chebyshev,
            iterations: 7,
            omega: 0.9,
            tolerance: 1e-5,
            rho: None,
        };
        c.external_charges.push(ExternalCharge {
            charge: -1e-6,
            position: DVec3::new(1.0, 0.0, 0.0),
            orbit: Some(Orbit {
                center: DVec3::ZERO,
                axis: DVec3::Z,
                angular_velocity: 2.0,
            }),
        });
        let set = ParamSet::new(&system, &c, &[Param::ChargeScale]).unwrap();
        let options = GradOptions::default();
        let states = simulate(&set, &set.initial(), &[5, 12], &options).unwrap();
        let mut sim = CpuSimulation::new(&system, &c).unwrap();
        sim.step(5).unwrap();
        assert_eq!(sim.current().x, states[0].x, "{integrator:?} step 5");
        sim.step(7).unwrap();
        let s = sim.state().unwrap();
        assert_eq!(
            (s.x, s.v),
            (states[1].x.clone(), states[1].v.clone()),
            "{integrator:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// global scales through each integrator and a range of time steps

#[test]
fn imex_scale_gradients_match_finite_differences_small_to_large_dt() {
    let system = ball(2);
    for (dt, steps) in [(0.002, 60), (0.02, 30), (0.2, 12)] {
        let c = config(Integrator::Imex, dt);
        let set = ParamSet::new(&system, &c, &[Param::ChargeScale, Param::StiffnessScale]).unwrap();
        check_components(&set, &[steps / 2, steps], &[0, 1], &format!("imex dt {dt}"));
    }
}

#[test]
fn local_global_scale_gradients_match_finite_differences_small_to_large_dt() {
    let system = cloth();
    for (dt, steps) in [(0.002, 50), (0.02, 30), (0.1, 10)] {
        let mut c = config(Integrator::LocalGlobal, dt);
        c.gravity = DVec3::new(0.0, 0.0, -9.81);
        let set = ParamSet::new(&system, &c, &[Param::ChargeScale, Param::StiffnessScale]).unwrap();
        check_components(
            &set,
            &[steps / 2, steps],
            &[0, 1],
            &format!("local_global dt {dt}"),
        );
    }
}

#[test]
fn explicit_integrator_gradients_match_finite_differences() {
    let system = ball(3);
    for integrator in [Integrator::Verlet, Integrator::SymplecticEuler] {
        let c = config(integrator, 0.002);
        let set = ParamSet::new(&system, &c, &[Param::ChargeScale, Param::StiffnessScale]).unwrap();
        check_components(&set, &[40, 80], &[0, 1], integrator.name());
    }
}

#[test]
fn imex_cloth_gradients_with_pinned_particles_and_gravity() {
    let system = cloth();
    let mut c = config(Integrator::Imex, 0.01);
    c.gravity = DVec3::new(0.0, 0.0, -9.81);
    let set = ParamSet::new(&system, &c, &[Param::StiffnessScale, Param::ChargeScale]).unwrap();
    check_components(&set, &[40], &[0, 1], "imex cloth");
    // Pinned particles never move with the parameters.
    let run = simulate_with_tangents(&set, &set.initial(), &[40], &exact()).unwrap();
    for (i, &p) in system.pinned().iter().enumerate() {
        if p {
            for t in &run.frames[0].tangents {
                assert_eq!((t.dx[i], t.dv[i]), (DVec3::ZERO, DVec3::ZERO));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// many parameters: per-particle charges and per-spring stiffnesses

#[test]
fn per_particle_charge_and_per_spring_stiffness_gradients_on_random_components() {
    let system = ball(4);
    let mut rng = Rng(99);
    for integrator in [Integrator::Imex, Integrator::LocalGlobal] {
        let c = config(integrator, 0.02);
        let set = ParamSet::new(&system, &c, &[Param::Charges, Param::Stiffnesses]).unwrap();
        let n = system.len();
        let ns = system.springs().len();
        assert_eq!(set.len(), n + ns);
        let picks = [
            rng.index(n),
            rng.index(n),
            n + rng.index(ns),
            n + rng.index(ns),
        ];
        check_components(&set, &[20], &picks, integrator.name());
    }
}

#[test]
fn a_charge_on_an_uncharged_particle_has_a_gradient() {
    // q = 0 particles are skipped as sources in the forward; the derivative with respect to
    // their charge is still the smooth formula's.
    let base = ball(5);
    let mut charges = base.charges().to_vec();
    charges[7] = 0.0;
    let system = System::new(SystemDesc {
        positions: base.positions().to_vec(),
        velocities: base.velocities().to_vec(),
        masses: base.masses().to_vec(),
        charges,
        pinned: vec![],
        springs: base.springs().to_vec(),
        faces: vec![],
    })
    .unwrap();
    let c = config(Integrator::Imex, 0.02);
    let set = ParamSet::new(&system, &c, &[Param::Charges]).unwrap();
    let theta = set.initial();
    let run = simulate_with_tangents(&set, &theta, &[15], &exact()).unwrap();
    // A step of 1e-4 of the neighbours' charges.
    let d = 2e-11;
    let (mut plus, mut minus) = (theta.clone(), theta.clone());
    plus[7] += d;
    minus[7] -= d;
    let sp = simulate(&set, &plus, &[15], &exact()).unwrap();
    let sm = simulate(&set, &minus, &[15], &exact()).unwrap();
    let fd: Vec<DVec3> = sp[0]
        .x
        .iter()
        .zip(&sm[0].x)
        .map(|(a, b)| (*a - *b) / (2.0 * d))
        .collect();
    let e = rel_err(&fd, &run.frames[0].tangents[7].dx);
    assert!(e <= 1e-5, "relative error {e:.3e}");
}

// ---------------------------------------------------------------------------------------
// external charge: its charge and its start position (orbiting)

#[test]
fn external_charge_and_position_gradients_match_finite_differences() {
    let system = ball(6);
    for integrator in [
        Integrator::Imex,
        Integrator::LocalGlobal,
        Integrator::Verlet,
    ] {
        let dt = if integrator == Integrator::Verlet {
            0.002
        } else {
            0.02
        };
        let mut c = config(integrator, dt);
        c.external_charges.push(ExternalCharge {
            charge: -2e-6,
            position: DVec3::new(1.2, 0.3, -0.2),
            orbit: Some(Orbit {
                center: DVec3::new(0.0, 0.0, 0.1),
                axis: DVec3::new(0.0, 0.6, 0.8),
                angular_velocity: 3.0,
            }),
        });
        let set = ParamSet::new(
            &system,
            &c,
            &[
                Param::ExternalCharge { index: 0 },
                Param::ExternalPosition { index: 0 },
            ],
        )
        .unwrap();
        assert_eq!(set.len(), 4);
        let steps = if integrator == Integrator::Verlet {
            100
        } else {
            20
        };
        check_components(&set, &[steps], &[0, 1, 2, 3], integrator.name());
    }
}

// ---------------------------------------------------------------------------------------
// the loss and its gradient

fn targets_from(set: &ParamSet, theta: &[f64], steps: &[u64]) -> Vec<Target> {
    simulate(set, theta, steps, &exact())
        .unwrap()
        .into_iter()
        .map(|s| Target {
            step: s.step,
            positions: s.x,
        })
        .collect()
}

#[test]
fn loss_gradient_and_gauss_newton_matrix_match_finite_differences() {
    let system = ball(7);
    let c = config(Integrator::Imex, 0.02);
    let set = ParamSet::new(&system, &c, &[Param::ChargeScale, Param::StiffnessScale]).unwrap();
    let targets = targets_from(&set, &[1.3, 0.8], &[10, 20, 30]);
    let theta = vec![1.0, 1.0];
    let e = evaluate(&set, &theta, &targets, &exact(), true, true).unwrap();
    assert_eq!(e.frames.len(), 3);
    let n = system.len() as f64;
    // The loss is the mean squared distance over frames and particles.
    let states = simulate(&set, &theta, &[10, 20, 30], &exact()).unwrap();
    let direct: f64 = states
        .iter()
        .zip(&targets)
        .map(|(s, t)| {
            s.x.iter()
                .zip(&t.positions)
                .map(|(a, b)| (*a - *b).length_squared())
                .sum::<f64>()
        })
        .sum::<f64>()
        / (3.0 * n);
    assert!((e.loss - direct).abs() <= 1e-14 * direct);
    for p in 0..2 {
        let d = FD_STEP;
        let (mut a, mut b) = (theta.clone(), theta.clone());
        a[p] += d;
        b[p] -= d;
        let la = evaluate(&set, &a, &targets, &exact(), false, false)
            .unwrap()
            .loss;
        let lb = evaluate(&set, &b, &targets, &exact(), false, false)
            .unwrap()
            .loss;
        let fd = (la - lb) / (2.0 * d);
        let rel = (fd - e.gradient[p]).abs() / e.gradient[p].abs();
        assert!(
            rel <= 1e-5,
            "dL/dtheta_{p}: {} vs fd {fd} ({rel:.2e})",
            e.gradient[p]
        );
    }
    // J^T J is symmetric positive semi-definite with the Cauchy-Schwarz bound.
    let j = &e.jtj;
    assert_eq!(j[1], j[2]);
    assert!(j[0] > 0.0 && j[3] > 0.0 && j[1] * j[1] <= j[0] * j[3]);
    // And the per-frame gradient norms are those of the frames' terms: their sum bounds the total.
    let sum: f64 = e.frames.iter().map(|f| f.gradient_norm.unwrap()).sum();
    let total = (e.gradient[0].powi(2) + e.gradient[1].powi(2)).sqrt();
    assert!(total <= sum * (1.0 + 1e-12));
}

#[test]
fn a_window_truncates_each_frame_to_its_last_steps() {
    // The windowed tangent at step s is the derivative of x_s with the state at s - w held
    // fixed: finite differences of a run restarted from that state with perturbed theta.
    let system = ball(8);
    let c = config(Integrator::Imex, 0.02);
    let set = ParamSet::new(&system, &c, &[Param::ChargeScale]).unwrap();
    let theta = set.initial();
    let (w, s) = (6u64, 20u64);
    let opts = GradOptions {
        window: Some(w),
        ..exact()
    };
    let run = simulate_with_tangents(&set, &theta, &[s], &opts).unwrap();
    let full = simulate_with_tangents(&set, &theta, &[s], &exact()).unwrap();
    let mid = simulate(&set, &theta, &[s - w], &exact())
        .unwrap()
        .remove(0);
    let restarted = System::new(SystemDesc {
        positions: mid.x.clone(),
        velocities: mid.v.clone(),
        masses: system.masses().to_vec(),
        charges: system.charges().to_vec(),
        pinned: vec![],
        springs: system.springs().to_vec(),
        faces: vec![],
    })
    .unwrap();
    let set2 = ParamSet::new(&restarted, &c, &[Param::ChargeScale]).unwrap();
    let d = FD_STEP;
    let sp = simulate(&set2, &[1.0 + d], &[w], &exact()).unwrap();
    let sm = simulate(&set2, &[1.0 - d], &[w], &exact()).unwrap();
    let fd: Vec<DVec3> = sp[0]
        .x
        .iter()
        .zip(&sm[0].x)
        .map(|(a, b)| (*a - *b) / (2.0 * d))
        .collect();
    let e = rel_err(&fd, &run.frames[0].tangents[0].dx);
    assert!(e <= 1e-5, "windowed tangent: relative error {e:.3e}");
    // Truncation changes the answer (the test would pass vacuously otherwise).
    assert!(
        rel_err(
            &run.frames[0].tangents[0].dx,
            &full.frames[0].tangents[0].dx
        ) > 1e-3
    );
    // A window at least as long as the run is the full history.
    let long = GradOptions {
        window: Some(s),
        ..exact()
    };
    let same = simulate_with_tangents(&set, &theta, &[s], &long).unwrap();
    assert_eq!(same.frames[0].tangents[0].dx, full.frames[0].tangents[0].dx);
}

// ---------------------------------------------------------------------------------------
// errors, not NaN

#[test]
fn a_blow_up_is_a_typed_error_naming_the_step() {
    let system = ball(9);
    // Verlet far beyond its stability limit.
    let c = config(Integrator::Verlet, 0.5);
    let set = ParamSet::new(&system, &c, &[Param::ChargeScale]).unwrap();
    let err = simulate_with_tangents(&set, &set.initial(), &[2000], &exact()).unwrap_err();
    assert!(
        matches!(
            err,
            GradError::NonFiniteState { .. } | GradError::NonFiniteTangent { .. }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("step"), "{err}");
}

#[test]
fn bad_parameters_and_targets_are_typed_errors() {
    let system = ball(10);
    let c = config(Integrator::Imex, 0.02);
    let e = ParamSet::new(&system, &c, &[Param::ExternalCharge { index: 0 }]).unwrap_err();
    assert!(e.to_string().contains("0 external charges"), "{e}");
    let e = ParamSet::new(&system, &c, &[Param::ChargeScale, Param::Charges]).unwrap_err();
    assert!(matches!(e, GradError::Param(_)));
    // DDEF on the Delaunay grid is not differentiated (the lattice grid is:
    // tests/ddef_gradients.rs): refused rather than silently dropped.
    let mut ddef = c.clone();
    ddef.coulomb.method = msc::config::CoulombMethod::Ddef(msc::config::DdefConfig {
        grid: msc::config::DdefGrid::Delaunay,
        ..Default::default()
    });
    let e = ParamSet::new(&system, &ddef, &[Param::ChargeScale]).unwrap_err();
    assert!(e.to_string().contains("delaunay"), "{e}");
    let set = ParamSet::new(&system, &c, &[Param::StiffnessScale]).unwrap();
    // A negative stiffness is the model's typed error.
    let e = set.instantiate(&[-1.0]).unwrap_err();
    assert!(matches!(e, GradError::Model(_)), "{e}");
    let bad = vec![Target {
        step: 5,
        positions: vec![DVec3::ZERO; 3],
    }];
    let e = evaluate(&set, &[1.0], &bad, &exact(), true, false).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains('3') && msg.contains("42"), "{msg}");
    let e = simulate(&set, &[1.0], &[5, 5], &exact()).unwrap_err();
    assert!(matches!(e, GradError::Frames(_)));
}

// ---------------------------------------------------------------------------------------
// fitting

#[test]
fn levenberg_marquardt_recovers_a_charge_scale_and_a_stiffness() {
    let system = ball(11);
    let c = config(Integrator::Imex, 0.05);
    let set = ParamSet::new(&system, &c, &[Param::ChargeScale]).unwrap();
    let targets = targets_from(&set, &[1.0], &[10, 20, 30, 40]);
    let out = fit(&set, &[0.6], &targets, &FitOptions::default(), |_| {}).unwrap();
    assert!(out.reason.converged(), "{:?}", out.reason);
    assert!(
        (out.theta[0] - 1.0).abs() < 1e-6,
        "charge scale {}",
        out.theta[0]
    );
    assert!(out.loss < 1e-12 * out.initial_loss);
    assert!(out.history.windows(2).all(|w| w[1].loss < w[0].loss));

    // The cloth: stiffness 50 N/m recovered from 20 N/m.
    let system = cloth();
    let mut c = config(Integrator::Imex, 0.02);
    c.gravity = DVec3::new(0.0, 0.0, -9.81);
    let set = ParamSet::new(&system, &c, &[Param::StiffnessScale]).unwrap();
    let targets = targets_from(&set, &[1.0], &[25, 50]);
    let out = fit(&set, &[0.4], &targets, &FitOptions::default(), |_| {}).unwrap();
    assert!(out.reason.converged(), "{:?}", out.reason);
    assert!(
        (out.theta[0] * 50.0 - 50.0).abs() < 1e-4,
        "k = {}",
        out.theta[0] * 50.0
    );
}

#[test]
fn adam_lowers_the_loss_over_many_per_spring_stiffnesses() {
    let system = ball(12);
    let c = config(Integrator::Imex, 0.05);
    let set = ParamSet::new(&system, &c, &[Param::Stiffnesses]).unwrap();
    let truth = set.initial();
    let targets = targets_from(&set, &truth, &[10, 20]);
    let start: Vec<f64> = truth.iter().map(|k| k * 0.7).collect();
    let options = FitOptions {
        optimizer: Optimizer::Adam {
            learning_rate: 0.05,
        },
        max_iterations: 15,
        ..FitOptions::default()
    };
    let out = grad::fit(&set, &start, &targets, &options, |_| {}).unwrap();
    assert!(
        out.loss < 0.2 * out.initial_loss,
        "loss {} from {}",
        out.loss,
        out.initial_loss
    );
    // Closer to the truth on average.
    let dist = |t: &[f64]| {
        t.iter()
            .zip(&truth)
            .map(|(a, b)| (a - b).powi(2))
            .sum::<f64>()
    };
    assert!(dist(&out.theta) < dist(&start));
}

// ---------------------------------------------------------------------------------------
// `msc fit` end to end: a target run folder written by `msc run`, then the fit

fn ball_scene() -> String {
    common::ball_scene(
        "method = \"imex\"\ndt = 0.02\nsteps = 60\nsolver = { method = \"cg\", iterations = 500, tolerance = 1e-12 }",
    )
}

#[test]
fn msc_fit_recovers_the_charge_of_a_target_run_and_writes_fit_json() {
    let dir = tempfile::tempdir().unwrap();
    let scene = dir.path().join("ball.toml");
    std::fs::write(&scene, ball_scene()).unwrap();
    let target = dir.path().join("target");
    let s = scene.to_str().unwrap();
    let code = msc::cli::main_with_args([
        "msc",
        "run",
        s,
        "--backend",
        "cpu",
        "--quiet",
        "--out",
        target.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    let out = dir.path().join("fit");
    let args = [
        "msc",
        "fit",
        s,
        "--target",
        target.to_str().unwrap(),
        "--param",
        "charge",
        "--init",
        "1e-6",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ];
    assert_eq!(msc::cli::main_with_args(args), 0);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("fit.json")).unwrap()).unwrap();
    assert_eq!(json["converged"], true, "{json}");
    assert_eq!(json["parameters"][0]["unit"], "C");
    assert_eq!(json["parameters"][0]["initial"][0].as_f64(), Some(1e-6));
    // The frames are float32: the charge comes back to their precision, not exactly.
    let q = json["parameters"][0]["result"][0].as_f64().unwrap();
    assert!((q / 2e-6 - 1.0).abs() < 1e-4, "charge {q}");
    assert_eq!(json["target_steps"].as_array().unwrap().len(), 6);
    assert!(json["history"].as_array().unwrap().len() >= 2);

    // A target from another mesh: the error names both particle counts.
    let other = dir.path().join("other.toml");
    std::fs::write(
        &other,
        ball_scene().replace("subdivisions = 1", "subdivisions = 0"),
    )
    .unwrap();
    let args = [
        "msc",
        "fit",
        other.to_str().unwrap(),
        "--target",
        target.to_str().unwrap(),
        "--param",
        "charge",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ];
    let parsed = <msc::cli::Cli as clap::Parser>::try_parse_from(args).unwrap();
    let err = msc::cli::dispatch(&parsed.command).unwrap_err();
    let text = msc::cli::error::render(&err);
    assert!(text.contains("42") && text.contains("12"), "{text}");
    assert_eq!(err.exit_code(), 2);
    // A time step that does not divide the target's frame times.
    let args = [
        "msc",
        "fit",
        s,
        "--set",
        "integrator.dt=0.03",
        "--target",
        target.to_str().unwrap(),
        "--param",
        "stiffness",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ];
    let parsed = <msc::cli::Cli as clap::Parser>::try_parse_from(args).unwrap();
    let err = msc::cli::dispatch(&parsed.command).unwrap_err();
    let text = msc::cli::error::render(&err);
    assert!(
        text.contains("0.03") && text.contains("not a whole number"),
        "{text}"
    );
    assert_eq!(
        msc::cli::main_with_args(["msc", "fit", s, "--target", "x", "--param", "mass"]),
        2
    );
}
