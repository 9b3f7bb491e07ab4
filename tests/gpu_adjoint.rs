//! The GPU adjoint (`GradMode::Adjoint` with `GradBackend::Gpu`) against the GPU forward
//! tangents and the f64 CPU adjoint. Runs on whatever adapter wgpu finds, lavapipe
//! included; skips with a message when there is none, and fails instead when
//! `MSC_REQUIRE_GPU=1`.
//!
//! Setup: a charged icosphere (42 particles, 120 damped springs, two pinned particles,
//! two uncharged ones), an orbiting external charge, a swirl field and gravity, IMEX over
//! 30 steps with a fixed-count solver that converges to f32 roundoff on this system (A is
//! strongly diagonally dominant at h = 0.01): forward, tangent and adjoint solves then all
//! give the exact-solve map's derivatives up to rounding.
//!
//! Tolerances: against the GPU tangents (both f32, both the scene's solver) 1e-3 relative
//! per parameter group (the target; measured here well below it); against the f64
//! CPU adjoint 1e-3 as well (f32 unit roundoff 6e-8 amplified by 30 steps of mixed-sign
//! Coulomb sums). Every checkpointing plan gives the same gradient bit for bit (no float
//! atomics: a recomputed segment repeats the forward run exactly).

mod common;

use common::Rng;
use glam::DVec3;
use msc::config::{
    Config, ExternalCharge, ExternalField, Integrator, Orbit, SolverConfig, SolverMethod,
};
use msc::gpu::GpuError;
use msc::grad::{
    evaluate, simulate, CheckpointOptions, Checkpointing, Evaluation, GradBackend, GradError,
    GradMode, GradOptions, Param, ParamSet, Target,
};
use msc::model::mesh::icosphere;
use msc::model::{Spring, System, SystemDesc};

fn ball() -> System {
    let mesh = icosphere(0.5, 1).unwrap();
    let mut rng = Rng(7);
    let n = mesh.positions.len();
    let springs = mesh
        .edges
        .iter()
        .map(|&[i, j]| Spring {
            i,
            j,
            stiffness: 20.0 * rng.range(0.8, 1.2),
            rest_length: 0.95 * (mesh.positions[j as usize] - mesh.positions[i as usize]).length(),
            damping: 0.05,
        })
        .collect();
    let mut charges: Vec<f64> = (0..n).map(|_| 3e-7 * rng.range(0.8, 1.2)).collect();
    charges[3] = 0.0;
    charges[7] = 0.0;
    let mut pinned = vec![false; n];
    pinned[0] = true;
    pinned[5] = true;
    System::new(SystemDesc {
        positions: mesh.positions.clone(),
        velocities: (0..n).map(|_| rng.vec(0.3)).collect(),
        masses: (0..n).map(|_| 0.02 * rng.range(0.8, 1.2)).collect(),
        charges,
        pinned,
        springs,
        faces: mesh.faces.clone(),
    })
    .unwrap()
}

fn config(method: SolverMethod, iterations: u32) -> Config {
    let mut c = Config {
        integrator: Integrator::Imex,
        dt: 0.01,
        steps: 30,
        gravity: DVec3::new(0.0, 0.0, -9.81),
        solver: SolverConfig {
            method,
            iterations,
            omega: 1.0,
            tolerance: 0.0,
            rho: None,
        },
        ..Config::default()
    };
    c.coulomb.softening = 0.02;
    c.external_charges.push(ExternalCharge {
        charge: -2e-6,
        position: DVec3::new(1.2, 0.3, 0.2),
        orbit: Some(Orbit {
            center: DVec3::ZERO,
            axis: DVec3::Z,
            angular_velocity: 2.0,
        }),
    });
    c.external_field = Some(ExternalField::Swirl {
        scale: 2e4,
        min_z: 0.05,
    });
    c
}

fn options(mode: GradMode, backend: GradBackend) -> GradOptions {
    GradOptions {
        mode,
        backend,
        ..GradOptions::default()
    }
}

const GPU: GradBackend = GradBackend::Gpu {
    allow_software: true,
};

/// `None` (test skipped) when there is no adapter.
fn on_gpu(r: Result<Evaluation, GradError>) -> Option<Evaluation> {
    match r {
        Ok(v) => Some(v),
        Err(GradError::Gpu(GpuError::NoAdapter(why))) => {
            common::skip_no_adapter(&why);
            None
        }
        Err(e) => panic!("GPU adjoint failed: {e}"),
    }
}

fn targets(set: &ParamSet, steps: &[u64]) -> Vec<Target> {
    let theta: Vec<f64> = set.initial().iter().map(|t| t * 1.03).collect();
    simulate(
        set,
        &theta,
        steps,
        &options(GradMode::Forward, GradBackend::Cpu),
    )
    .unwrap()
    .into_iter()
    .map(|s| Target {
        step: s.step,
        positions: s.x,
    })
    .collect()
}

fn relative(a: &[f64], b: &[f64]) -> f64 {
    let d: f64 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
    let n: f64 = b.iter().map(|y| y * y).sum();
    (d / n).sqrt()
}

#[test]
fn the_gpu_adjoint_matches_the_gpu_tangents_and_the_cpu_adjoint() {
    let system = ball();
    // Per-element parameters with one solver (the tangents cost one direction per
    // component), the scalars with each.
    let per_element = vec![
        Param::Stiffnesses,
        Param::Charges,
        Param::ExternalCharge { index: 0 },
        Param::ExternalPosition { index: 0 },
    ];
    let scalars = vec![
        Param::StiffnessScale,
        Param::ChargeScale,
        Param::ExternalCharge { index: 0 },
        Param::ExternalPosition { index: 0 },
    ];
    for (method, iterations, params) in [
        (SolverMethod::Chebyshev, 40, per_element),
        (SolverMethod::Cg, 40, scalars.clone()),
        (SolverMethod::Jacobi, 121, scalars),
    ] {
        let c = config(method, iterations);
        let set = ParamSet::new(&system, &c, &params).unwrap();
        let targets = targets(&set, &[10, 20, 30]);
        let theta = set.initial();
        let Some(adj) = on_gpu(evaluate(
            &set,
            &theta,
            &targets,
            &options(GradMode::Adjoint, GPU),
            true,
            false,
        )) else {
            return;
        };
        let tan = on_gpu(evaluate(
            &set,
            &theta,
            &targets,
            &options(GradMode::Forward, GPU),
            true,
            false,
        ))
        .unwrap();
        let cpu = evaluate(
            &set,
            &theta,
            &targets,
            &options(GradMode::Adjoint, GradBackend::Cpu),
            true,
            false,
        )
        .unwrap();
        assert!(
            (adj.loss - cpu.loss).abs() <= 1e-4 * cpu.loss,
            "{method:?} loss"
        );
        for (a, p) in params.iter().enumerate() {
            let r = set.range(a);
            let vs_tangents = relative(&adj.gradient[r.clone()], &tan.gradient[r.clone()]);
            let vs_cpu = relative(&adj.gradient[r.clone()], &cpu.gradient[r]);
            println!("{method:?} {p:?}: vs GPU tangents {vs_tangents:.2e}, vs CPU {vs_cpu:.2e}");
            assert!(vs_tangents <= 1e-3, "{method:?} {p:?}: {vs_tangents:.2e}");
            assert!(vs_cpu <= 1e-3, "{method:?} {p:?}: {vs_cpu:.2e}");
        }
    }
}

/// Masses have no GPU tangent: against the CPU adjoint. With the CG option for the
/// adjoint solve (the forward keeps its Jacobi sweeps).
#[test]
fn gpu_mass_gradients_and_the_cg_adjoint_solve() {
    let system = ball();
    let c = config(SolverMethod::Jacobi, 121);
    let set = ParamSet::new(&system, &c, &[Param::Masses, Param::StiffnessScale]).unwrap();
    let targets = targets(&set, &[15, 30]);
    let theta = set.initial();
    let cg = GradOptions {
        adjoint_cg_iterations: Some(40),
        ..options(GradMode::Adjoint, GPU)
    };
    let Some(gpu) = on_gpu(evaluate(&set, &theta, &targets, &cg, true, false)) else {
        return;
    };
    let cpu = evaluate(
        &set,
        &theta,
        &targets,
        &options(GradMode::Adjoint, GradBackend::Cpu),
        true,
        false,
    )
    .unwrap();
    let r = relative(&gpu.gradient, &cpu.gradient);
    assert!(r <= 1e-3, "masses and stiffness scale: {r:.2e}");
}

#[test]
fn every_gpu_checkpointing_plan_gives_the_same_gradient_bit_for_bit() {
    let system = ball();
    let c = config(SolverMethod::Chebyshev, 20);
    let set = ParamSet::new(&system, &c, &[Param::Stiffnesses, Param::Charges]).unwrap();
    let targets = targets(&set, &[9, 20, 29]);
    let theta = set.initial();
    let run = |policy| {
        let o = GradOptions {
            checkpoint: CheckpointOptions {
                policy,
                memory_budget: u64::MAX,
            },
            ..options(GradMode::Adjoint, GPU)
        };
        on_gpu(evaluate(&set, &theta, &targets, &o, true, false))
    };
    let Some(all) = run(Checkpointing::StoreAll) else {
        return;
    };
    let bits = |g: &[f64]| g.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for policy in [
        Checkpointing::TwoLevel { interval: None },
        Checkpointing::Binomial { snapshots: 2 },
    ] {
        let e = run(policy).unwrap();
        assert_eq!(bits(&e.gradient), bits(&all.gradient), "{policy:?}");
        assert_eq!(e.loss.to_bits(), all.loss.to_bits(), "{policy:?}");
        assert!(e.stats.checkpoint.unwrap().peak_states < 29);
    }
}

#[test]
fn the_gpu_adjoint_refuses_what_it_does_not_reverse() {
    let system = ball();
    let mut c = config(SolverMethod::Jacobi, 40);
    c.integrator = Integrator::Verlet;
    let set = ParamSet::new(&system, &c, &[Param::Stiffnesses]).unwrap();
    let targets = targets(&set, &[5]);
    match evaluate(
        &set,
        &set.initial(),
        &targets,
        &options(GradMode::Adjoint, GPU),
        true,
        false,
    ) {
        Err(GradError::Gpu(GpuError::Unsupported(m))) => {
            assert!(m.contains("verlet"), "{m}")
        }
        Err(GradError::Gpu(GpuError::NoAdapter(why))) => common::skip_no_adapter(&why),
        other => panic!("expected a refusal, got {:?}", other.map(|e| e.loss)),
    }
}
