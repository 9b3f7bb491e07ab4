//! Reverse-mode gradients (`GradMode::Adjoint`) on the CPU reference.
//!
//! - Against forward mode: both differentiate the same exact-solve discrete map, so with
//!   tight solves (forward, tangent and adjoint CG to 1e-13) the gradients agree to 1e-8
//!   relative (the solves' residuals, amplified by the horizon, are the only difference).
//! - Against central differences of the loss along random directions in theta (every
//!   component moved at once), d = 1e-5 relative: agreement 1e-5 (the error budget of
//!   `tests/gradients.rs`).
//! - Checkpointing: store-all, two-level and binomial plans give the same gradient bit for
//!   bit, because every recomputed segment repeats the forward run bit for bit.

use glam::DVec3;
use msc::config::{
    Config, CoulombMethod, DdefConfig, DdefGrid, ExternalCharge, ExternalField, Integrator, Orbit,
    SolverConfig, SolverMethod,
};
use msc::grad::{
    evaluate, simulate, AdjointSolve, CheckpointOptions, Checkpointing, GradError, GradMode,
    GradOptions, Param, ParamSet, TangentSolve, Target,
};
use msc::model::mesh::grid;
use msc::model::{Spring, System, SystemDesc};

struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    fn vec3(&mut self, s: f64) -> DVec3 {
        (DVec3::new(self.unit(), self.unit(), self.unit()) * 2.0 - DVec3::ONE) * s
    }
}

/// A 5 x 4 charged cloth with shear springs, two pinned corners, varied stiffness,
/// damping, mass and charge (one particle uncharged), random velocities. Some springs
/// start compressed (the clamp of the IMEX blocks acts) and the bottom row sits in the
/// swirl field's clamped band |z| < min_z.
fn cloth(seed: u64) -> System {
    cloth_at(seed, 0.0, 0.9)
}

/// [`cloth`] lifted by `lift` with rest lengths from `rest` to `rest + 0.2` of the
/// initial lengths.
fn cloth_at(seed: u64, lift: f64, rest: f64) -> System {
    let mesh = grid([1.0, 0.8], [5, 4], true, false).unwrap();
    let mut rng = Rng(seed);
    let n = mesh.positions.len();
    let x: Vec<DVec3> = mesh
        .positions
        .iter()
        .map(|p| DVec3::new(p.x, 0.05 * rng.unit(), p.y + lift))
        .collect();
    let springs = mesh
        .edges
        .iter()
        .map(|&[i, j]| Spring {
            i,
            j,
            stiffness: 20.0 * (0.5 + rng.unit()),
            rest_length: (x[j as usize] - x[i as usize]).length() * (rest + 0.2 * rng.unit()),
            damping: 0.05 * rng.unit(),
        })
        .collect();
    let mut pinned = vec![false; n];
    pinned[n - 1] = true;
    pinned[n - 5] = true;
    System::new(SystemDesc {
        positions: x,
        velocities: (0..n).map(|_| rng.vec3(0.3)).collect(),
        masses: (0..n).map(|_| 0.01 * (0.5 + rng.unit())).collect(),
        charges: (0..n)
            .map(|i| {
                if i == 3 {
                    0.0
                } else {
                    1e-7 * (rng.unit() - 0.3)
                }
            })
            .collect(),
        pinned,
        springs,
        faces: mesh.faces,
    })
    .unwrap()
}

/// Every force term on: gravity, softened all-pairs Coulomb, an orbiting external charge,
/// a swirl field. The forward solver is an inexact Chebyshev (replaced by CG under
/// `exact_forward`).
fn config(integrator: Integrator) -> Config {
    let mut c = Config {
        integrator,
        dt: 0.01,
        steps: 30,
        local_global_iterations: 3,
        gravity: DVec3::new(0.0, 0.0, -9.81),
        solver: SolverConfig {
            method: SolverMethod::Chebyshev,
            iterations: 12,
            omega: 0.9,
            tolerance: 0.0,
            rho: None,
        },
        external_charges: vec![ExternalCharge {
            charge: -2e-7,
            position: DVec3::new(1.5, 0.5, 0.4),
            orbit: Some(Orbit {
                center: DVec3::new(0.5, 0.0, 0.4),
                axis: DVec3::Z,
                angular_velocity: 3.0,
            }),
        }],
        external_field: Some(ExternalField::Swirl {
            scale: 200.0,
            min_z: 1e-2,
        }),
        ..Config::default()
    };
    c.coulomb.softening = 0.02;
    c
}

fn exact(mode: GradMode) -> GradOptions {
    GradOptions {
        mode,
        tangent_solve: TangentSolve {
            tolerance: 1e-13,
            max_iterations: 10_000,
        },
        exact_forward: true,
        ..GradOptions::default()
    }
}

/// Targets from a run at theta perturbed by a few percent, so the loss is well above
/// rounding.
fn targets(set: &ParamSet, steps: &[u64]) -> Vec<Target> {
    let mut rng = Rng(77);
    let theta: Vec<f64> = set
        .initial()
        .iter()
        .map(|t| t * (1.0 + 0.05 * (rng.unit() - 0.5)))
        .collect();
    simulate(set, &theta, steps, &exact(GradMode::Forward))
        .unwrap()
        .into_iter()
        .map(|s| Target {
            step: s.step,
            positions: s.x,
        })
        .collect()
}

fn all_params() -> Vec<Param> {
    vec![
        Param::Charges,
        Param::Stiffnesses,
        Param::Masses,
        Param::ExternalCharge { index: 0 },
        Param::ExternalPosition { index: 0 },
    ]
}

fn norm(v: &[f64]) -> f64 {
    v.iter().map(|x| x * x).sum::<f64>().sqrt()
}

#[test]
fn the_adjoint_gradient_equals_forward_mode_for_every_integrator() {
    for integrator in [
        Integrator::Imex,
        Integrator::LocalGlobal,
        Integrator::SymplecticEuler,
        Integrator::Verlet,
    ] {
        let system = cloth(3);
        let c = config(integrator);
        for params in [
            all_params(),
            vec![Param::ChargeScale, Param::StiffnessScale],
            vec![Param::StiffnessBlocks { count: 7 }],
        ] {
            let set = ParamSet::new(&system, &c, &params).unwrap();
            let targets = targets(&set, &[7, 15, 30]);
            let theta = set.initial();
            let fwd = evaluate(
                &set,
                &theta,
                &targets,
                &exact(GradMode::Forward),
                true,
                false,
            )
            .unwrap();
            let adj = evaluate(
                &set,
                &theta,
                &targets,
                &exact(GradMode::Adjoint),
                true,
                false,
            )
            .unwrap();
            assert_eq!(
                fwd.loss.to_bits(),
                adj.loss.to_bits(),
                "{integrator:?}: loss"
            );
            assert!(adj.stats.worst_tangent_residual <= 1e-12);
            // Per parameter group: |g_adj - g_fwd| <= 1e-8 |g_fwd|.
            for (a, p) in params.iter().enumerate() {
                let r = set.range(a);
                let (f, b) = (&fwd.gradient[r.clone()], &adj.gradient[r]);
                let diff: Vec<f64> = f.iter().zip(b).map(|(x, y)| x - y).collect();
                assert!(norm(f) > 0.0, "{integrator:?} {p:?}: zero gradient");
                let rel = norm(&diff) / norm(f);
                assert!(
                    rel <= 1e-8,
                    "{integrator:?} {p:?}: relative difference {rel:.2e}"
                );
            }
        }
    }
}

/// Central differences need a smooth map around theta: the cloth is lifted clear of the
/// swirl field's clamp and starts stretched (rest lengths 0.6-0.8), so no kink (the
/// clamps of the field and of the IMEX blocks) falls between theta - d and theta + d.
#[test]
fn the_adjoint_gradient_matches_central_differences_along_random_directions() {
    for integrator in [
        Integrator::Imex,
        Integrator::LocalGlobal,
        Integrator::Verlet,
    ] {
        let system = cloth_at(4, 0.5, 0.6);
        let c = config(integrator);
        let set = ParamSet::new(&system, &c, &all_params()).unwrap();
        let targets = targets(&set, &[10, 25]);
        let theta = set.initial();
        let e = evaluate(
            &set,
            &theta,
            &targets,
            &exact(GradMode::Adjoint),
            true,
            false,
        )
        .unwrap();
        let mut rng = Rng(5);
        for _ in 0..2 {
            // Every component moved, each relative to its own size (a zero component
            // relative to its parameter's mean size).
            let mut dir = vec![0.0; theta.len()];
            for a in 0..set.params().len() {
                let r = set.range(a);
                let mean = theta[r.clone()].iter().map(|t| t.abs()).sum::<f64>() / r.len() as f64;
                for k in r {
                    let size = if theta[k] != 0.0 {
                        theta[k].abs()
                    } else {
                        mean
                    };
                    dir[k] = (rng.unit() - 0.5) * size;
                }
            }
            let d = 1e-5;
            let at = |s: f64| {
                let th: Vec<f64> = theta.iter().zip(&dir).map(|(t, u)| t + s * u).collect();
                evaluate(&set, &th, &targets, &exact(GradMode::Forward), false, false)
                    .unwrap()
                    .loss
            };
            let fd = (at(d) - at(-d)) / (2.0 * d);
            let an: f64 = e.gradient.iter().zip(&dir).map(|(g, u)| g * u).sum();
            let rel = (fd - an).abs() / an.abs();
            assert!(
                rel <= 1e-5,
                "{integrator:?}: {an:e} vs fd {fd:e} ({rel:.2e})"
            );
        }
    }
}

#[test]
fn every_checkpointing_plan_gives_the_same_gradient_bit_for_bit() {
    for integrator in [
        Integrator::Imex,
        Integrator::LocalGlobal,
        Integrator::Verlet,
    ] {
        let system = cloth(6);
        // The configured (inexact) forward solver: recomputation must repeat it exactly.
        let c = config(integrator);
        let set = ParamSet::new(&system, &c, &[Param::Stiffnesses, Param::Charges]).unwrap();
        let targets = targets(&set, &[9, 20, 29]);
        let theta = set.initial();
        let run = |policy| {
            let o = GradOptions {
                mode: GradMode::Adjoint,
                checkpoint: CheckpointOptions {
                    policy,
                    memory_budget: u64::MAX,
                },
                ..GradOptions::default()
            };
            evaluate(&set, &theta, &targets, &o, true, false).unwrap()
        };
        let all = run(Checkpointing::StoreAll);
        let bits = |g: &[f64]| g.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for policy in [
            Checkpointing::TwoLevel { interval: None },
            Checkpointing::TwoLevel { interval: Some(4) },
            Checkpointing::Binomial { snapshots: 3 },
            Checkpointing::Binomial { snapshots: 1 },
        ] {
            let e = run(policy);
            assert_eq!(
                bits(&e.gradient),
                bits(&all.gradient),
                "{integrator:?} {policy:?}"
            );
            assert_eq!(e.loss.to_bits(), all.loss.to_bits());
            let ck = e.stats.checkpoint.unwrap();
            assert!(
                ck.peak_states < 29 && ck.forward_steps > 29,
                "{policy:?}: {ck:?}"
            );
        }
        // Store-all keeps the 29 records and the state after the step being reversed.
        let ck = all.stats.checkpoint.unwrap();
        assert_eq!(
            (ck.policy, ck.forward_steps, ck.peak_states),
            ("store_all", 29, 30)
        );
    }
}

#[test]
fn log_parameters_chain_the_gradient_and_stay_positive() {
    let system = cloth(8);
    let c = config(Integrator::Imex);
    let lin = ParamSet::new(&system, &c, &[Param::Stiffnesses, Param::Masses]).unwrap();
    let log = lin.clone().with_log(&[true, true]).unwrap();
    let targets = targets(&lin, &[10, 20]);
    let (tl, tg) = (lin.initial(), log.initial());
    assert_eq!(log.values(&tg).unwrap().len(), tl.len());
    for (a, b) in log.values(&tg).unwrap().iter().zip(&tl) {
        assert!((a - b).abs() <= 1e-15 * b.abs(), "{a} {b}");
    }
    let el = evaluate(&lin, &tl, &targets, &exact(GradMode::Adjoint), true, false).unwrap();
    let eg = evaluate(&log, &tg, &targets, &exact(GradMode::Adjoint), true, false).unwrap();
    // dL/dlog|v| = v dL/dv, and the forward tangents along value-scaled directions agree.
    let ef = evaluate(&log, &tg, &targets, &exact(GradMode::Forward), true, false).unwrap();
    // (The log set's values are exp(ln v), within an ulp of v: the runs differ at
    // rounding, so the comparison is relative to the whole gradient.)
    let chained: Vec<f64> = (0..tl.len())
        .map(|k| eg.gradient[k] - el.gradient[k] * tl[k])
        .collect();
    assert!(
        norm(&chained) <= 1e-10 * norm(&eg.gradient),
        "{:e}",
        norm(&chained)
    );
    let diff: Vec<f64> = ef
        .gradient
        .iter()
        .zip(&eg.gradient)
        .map(|(a, b)| a - b)
        .collect();
    assert!(norm(&diff) <= 1e-8 * norm(&ef.gradient));
    // Any theta maps to positive stiffnesses and masses.
    let wild: Vec<f64> = tg.iter().map(|t| t - 40.0).collect();
    let (sys, _) = log.instantiate(&wild).unwrap();
    assert!(sys.springs().iter().all(|s| s.stiffness > 0.0));
    assert!(sys.masses().iter().all(|m| *m > 0.0));
    // A charge keeps its sign.
    let q = ParamSet::new(&system, &c, &[Param::ChargeScale])
        .unwrap()
        .with_log(&[true])
        .unwrap();
    let (sys, _) = q.instantiate(&[-3.0]).unwrap();
    for (a, b) in sys.charges().iter().zip(system.charges()) {
        assert!(a * b > 0.0 || *b == 0.0);
    }
    // A zero base value has no logarithm: refused, naming it.
    let e = ParamSet::new(&system, &c, &[Param::Charges])
        .unwrap()
        .with_log(&[true])
        .unwrap_err();
    assert!(e.to_string().contains("charges[3]"), "{e}");
}

#[test]
fn the_adjoint_refuses_what_it_does_not_differentiate() {
    let system = cloth(9);
    let c = config(Integrator::Imex);
    let set = ParamSet::new(&system, &c, &[Param::Stiffnesses]).unwrap();
    let targets = targets(&set, &[5]);
    let theta = set.initial();
    let windowed = GradOptions {
        window: Some(3),
        ..exact(GradMode::Adjoint)
    };
    let e = evaluate(&set, &theta, &targets, &windowed, true, false).unwrap_err();
    assert!(matches!(e, GradError::Unsupported { .. }), "{e}");
    let e = evaluate(
        &set,
        &theta,
        &targets,
        &exact(GradMode::Adjoint),
        true,
        true,
    )
    .unwrap_err();
    assert!(e.to_string().contains("J^T J"), "{e}");
    // DDEF: the CPU adjoint differentiates the lattice grid (tests/ddef_gradients.rs);
    // the Delaunay grid has no derivative and is refused by the parameter set, never
    // differentiated as if it were all-pairs.
    let mut ddef = c.clone();
    ddef.coulomb.method = CoulombMethod::Ddef(DdefConfig {
        grid: DdefGrid::Delaunay,
        ..Default::default()
    });
    let e = ParamSet::new(&system, &ddef, &[Param::Stiffnesses]).unwrap_err();
    assert!(e.to_string().contains("delaunay"), "{e}");
}

/// `AdjointSolve::Scene` runs the exact adjoint's equations with the scene's own solver
/// (here Chebyshev, as the forward), warm-started: with that solver run to convergence it
/// gives the exact adjoint's gradient (1e-8, the tight solves' budget); truncated to a
/// fixed iteration count its error against the exact gradient shrinks as the count grows
/// (a mode that ignored its solve, or solved a different system, would not converge).
#[test]
fn the_scene_solver_adjoint_converges_to_the_exact_gradient() {
    for integrator in [Integrator::Imex, Integrator::LocalGlobal] {
        let system = cloth(10);
        let mut errors = Vec::new();
        for (iterations, tolerance) in [(2, 0.0), (4, 0.0), (8, 0.0), (20_000, 1e-14)] {
            let mut c = config(integrator);
            c.solver.iterations = iterations;
            c.solver.tolerance = tolerance;
            let set = ParamSet::new(&system, &c, &all_params()).unwrap();
            let targets = targets(&set, &[7, 15, 30]);
            let theta = set.initial();
            let run = |adjoint_solve| {
                let o = GradOptions {
                    adjoint_solve,
                    exact_forward: false,
                    ..exact(GradMode::Adjoint)
                };
                evaluate(&set, &theta, &targets, &o, true, false).unwrap()
            };
            let (ex, sc) = (run(AdjointSolve::Exact), run(AdjointSolve::Scene));
            assert_eq!(ex.loss.to_bits(), sc.loss.to_bits(), "{integrator:?}: loss");
            let diff: Vec<f64> = ex
                .gradient
                .iter()
                .zip(&sc.gradient)
                .map(|(a, b)| a - b)
                .collect();
            errors.push(norm(&diff) / norm(&ex.gradient));
        }
        assert!(errors[3] <= 1e-8, "{integrator:?}: converged {errors:?}");
        assert!(
            errors[0] > errors[1] && errors[1] > errors[2] && errors[2] > errors[3],
            "{integrator:?}: {errors:?}"
        );
    }
}
