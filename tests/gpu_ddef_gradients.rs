//! Gradients through DDEF on the GPU (lattice grid, structure frozen at each evaluation;
//! docs/physics.md §9): the DDEF tangent kernels against the CPU reference tangents, and
//! the GPU adjoint (`kernels::ddef_adjoint`) against the GPU tangents, on the charged
//! ball of `ddef_ball`. Runs on whatever adapter wgpu finds, software ones (lavapipe)
//! included; skips when there is none, and fails instead when `MSC_REQUIRE_GPU=1`.

mod common;
mod ddef_ball;

use common::Rng;
use ddef_ball::{ball, ball_with, cg, config, exact, norm, on_gpu, rel_err};
use glam::DVec3;
use msc::config::{DdefVariant, ExternalCharge, Integrator};
use msc::grad::{
    evaluate, simulate, simulate_with_tangents, GradBackend, GradMode, GradOptions, Param,
    ParamSet, TangentRun,
};

/// The GPU tangents (the DDEF tangent kernels) against the CPU reference tangents, every
/// integrator family, both variants, the charge scale and per-particle charges.
///
/// Tolerance: relative 1e-4 in the tangent's norm over all particles, as for the
/// all-pairs tangents (tests/gpu_gradients.rs). The GPU runs the DDEF evaluation and its
/// tangent in f32 (unit roundoff 6e-8): sums of about 160 terms per site and per target,
/// the `corrected` terms subtracted from the vertex far values, and (for the implicit
/// integrators) fixed-count solves, through 10 steps. Measured on lavapipe: at most
/// 6.2e-7 (local-global), 2.8e-7 for the per-particle charges, so 1e-4 leaves a wide
/// margin for other adapters' rounding. Planted bugs in `ddef_gather_tangent`: the
/// weights' derivative dropped gives 1.1e-3, the far field's tangent dropped 0.23.
#[test]
fn gpu_ddef_tangents_match_the_cpu_reference() {
    let system = ball();
    for (integrator, variant, solver) in [
        (Integrator::Imex, DdefVariant::Corrected, cg(40, 0.0)),
        (Integrator::Imex, DdefVariant::Paper, cg(40, 0.0)),
        (
            Integrator::SymplecticEuler,
            DdefVariant::Corrected,
            cg(1, 0.0),
        ),
        (Integrator::Verlet, DdefVariant::Paper, cg(1, 0.0)),
        (Integrator::LocalGlobal, DdefVariant::Corrected, cg(40, 0.0)),
    ] {
        let c = config(integrator, variant, solver);
        let what = format!("{integrator:?} {variant:?}");
        let set = ParamSet::new(&system, &c, &[Param::ChargeScale]).unwrap();
        let theta = set.initial();
        let frames = [5, 10];
        let gpu_opts = GradOptions {
            backend: GradBackend::Gpu {
                allow_software: true,
            },
            ..GradOptions::default()
        };
        let Some(gpu) = on_gpu(simulate_with_tangents(&set, &theta, &frames, &gpu_opts)) else {
            return;
        };
        let cpu = simulate_with_tangents(&set, &theta, &frames, &GradOptions::default()).unwrap();
        check_gpu(&gpu, &cpu, &what);
        if integrator != Integrator::Imex || variant != DdefVariant::Corrected {
            continue;
        }
        // Per-particle charges on the 42-particle ball (still 27 sites): 42 directions,
        // each through the DDEF tangent kernels.
        let small = ball_with(1, |_| true);
        let set = ParamSet::new(&small, &c, &[Param::Charges]).unwrap();
        let theta = set.initial();
        let gpu = simulate_with_tangents(&set, &theta, &[10], &gpu_opts).unwrap();
        let cpu = simulate_with_tangents(&set, &theta, &[10], &GradOptions::default()).unwrap();
        check_gpu(&gpu, &cpu, &format!("{what} charges"));
    }
}

/// Per-particle charge tangents through DDEF with an external point charge in the world:
/// each direction's record of tangent inputs then holds the external charge's entry after
/// the particles' and springs' ones, and the DDEF tangent kernels must step over it
/// (direction d's charges start at d (n + springs + external charges)). On the
/// 42-particle ball, a 2 uC charge 0.7 m from its centre (~2 m/s^2 on a particle).
///
/// Tolerance: 1e-4 relative, as gpu_ddef_tangents_match_the_cpu_reference (the external
/// charge adds one exact term per particle to the same f32 sums).
#[test]
fn gpu_ddef_charge_tangents_with_an_external_charge_match_the_cpu_reference() {
    let small = ball_with(1, |_| true);
    let mut c = config(Integrator::Imex, DdefVariant::Corrected, cg(40, 0.0));
    c.external_charges = vec![ExternalCharge {
        charge: 2e-6,
        position: DVec3::new(0.6, 0.3, -0.2),
        orbit: None,
    }];
    let set = ParamSet::new(&small, &c, &[Param::Charges]).unwrap();
    let theta = set.initial();
    let gpu_opts = GradOptions {
        backend: GradBackend::Gpu {
            allow_software: true,
        },
        ..GradOptions::default()
    };
    let Some(gpu) = on_gpu(simulate_with_tangents(&set, &theta, &[10], &gpu_opts)) else {
        return;
    };
    let cpu = simulate_with_tangents(&set, &theta, &[10], &GradOptions::default()).unwrap();
    check_gpu(&gpu, &cpu, "charges with an external charge");
}

fn check_gpu(gpu: &TangentRun, cpu: &TangentRun, what: &str) {
    for (g, c) in gpu.frames.iter().zip(&cpu.frames) {
        assert_eq!(g.step, c.step);
        let mut worst: f64 = 0.0;
        for (tg, tc) in g.tangents.iter().zip(&c.tangents) {
            let norm: f64 = tc.dx.iter().map(|v| v.length_squared()).sum();
            if norm == 0.0 {
                continue;
            }
            worst = worst.max(rel_err(&tg.dx, &tc.dx));
        }
        eprintln!(
            "{what} step {}: worst relative tangent error {worst:.2e}",
            g.step
        );
        assert!(worst <= 1e-4, "{what} step {}: {worst:.2e}", g.step);
    }
}

/// The GPU adjoint through DDEF (`kernels::ddef_adjoint`, the DDEF evaluation redone at
/// each reversed step's state) against the GPU tangents (`kernels::ddef_tangent`) on the
/// 42-particle ball (m = 27: most pairs through the far field), every integrator family,
/// both variants, per-particle charges (and stiffnesses under IMEX). Both differentiate
/// the same f32 frozen-structure map with the same fixed-count solves, so they agree to
/// f32 roundoff through the sweep: 1e-3 relative per parameter group, the all-pairs GPU
/// adjoint's bound (tests/gpu_adjoint.rs). Measured on lavapipe: at most 5.3e-5
/// (local-global); losses within 2.1e-5.
#[test]
fn gpu_ddef_adjoint_matches_the_gpu_tangents() {
    use DdefVariant::{Corrected, Paper};
    use Integrator::{Imex, LocalGlobal, SymplecticEuler, Verlet};
    let small = ball_with(1, |_| true);
    let charges = vec![Param::Charges];
    for (integrator, variant, solver, params) in [
        (
            Imex,
            Corrected,
            cg(40, 0.0),
            vec![Param::Charges, Param::Stiffnesses],
        ),
        (SymplecticEuler, Corrected, cg(1, 0.0), charges.clone()),
        (Verlet, Paper, cg(1, 0.0), charges.clone()),
        (LocalGlobal, Corrected, cg(40, 0.0), charges),
    ] {
        let what = format!("{integrator:?} {variant:?}");
        let c = config(integrator, variant, solver);
        let set = ParamSet::new(&small, &c, &params).unwrap();
        let theta = set.initial();
        let mut rng = Rng(41);
        let moved: Vec<f64> = theta.iter().map(|t| t * rng.range(0.97, 1.03)).collect();
        let states = simulate(&set, &moved, &[5, 12], &exact(GradMode::Forward));
        let targets = common::targets_of(states.unwrap(), |p| p);
        let gpu = |mode| GradOptions {
            backend: GradBackend::Gpu {
                allow_software: true,
            },
            ..GradOptions {
                mode,
                ..GradOptions::default()
            }
        };
        let Some(adj) = on_gpu(evaluate(
            &set,
            &theta,
            &targets,
            &gpu(GradMode::Adjoint),
            true,
            false,
        )) else {
            return;
        };
        let tan = on_gpu(evaluate(
            &set,
            &theta,
            &targets,
            &gpu(GradMode::Forward),
            true,
            false,
        ))
        .unwrap();
        // The adjoint's loss is summed on the device in f32 from position differences of
        // about 1e-4 (f32 spacing 6e-8 at 0.5 m), the tangents' on the host in f64.
        let dl = (adj.loss - tan.loss).abs() / tan.loss;
        assert!(dl <= 1e-4, "{what}: loss {} against {}", adj.loss, tan.loss);
        for (a, p) in params.iter().enumerate() {
            let r = set.range(a);
            let (f, b) = (&tan.gradient[r.clone()], &adj.gradient[r]);
            let diff: Vec<f64> = f.iter().zip(b).map(|(x, y)| x - y).collect();
            assert!(norm(f) > 0.0, "{what} {p:?}: zero gradient");
            let rel = norm(&diff) / norm(f);
            eprintln!("{what} {p:?}: GPU adjoint against GPU tangents {rel:.2e}");
            assert!(rel <= 1e-3, "{what} {p:?}: relative difference {rel:.2e}");
        }
    }
}

/// 200 heavy charges in the unit cube with velocities stretching z 3.4x over 40 steps of
/// 1 ms (as tests/gpu_ddef.rs's re-plan test): the charges' box drifts from the plan the
/// run starts with.
fn stretched() -> (msc::model::System, msc::config::Config) {
    use glam::DVec3;
    let n = 200;
    let x = msc::ddef::error_study::random_points(DVec3::ZERO, DVec3::ONE, n, 31);
    let system = msc::model::System::new(msc::model::SystemDesc {
        velocities: x
            .iter()
            .map(|p| DVec3::new(0.0, 0.0, 60.0 * (p.z - 0.5)))
            .collect(),
        positions: x,
        masses: vec![1e3; n],
        charges: common::charges(&mut Rng(2), n, 1e-6, 0.0),
        pinned: vec![false; n],
        springs: Vec::new(),
        faces: Vec::new(),
    })
    .unwrap();
    let mut c = config(
        Integrator::SymplecticEuler,
        DdefVariant::Corrected,
        cg(1, 0.0),
    );
    c.coulomb.method = msc::config::CoulombMethod::Ddef(msc::config::DdefConfig {
        samples: msc::config::DdefSamples::Auto,
        ..Default::default()
    });
    c.coulomb.softening = 1e-3;
    c.dt = 1e-3;
    c.gravity = DVec3::ZERO;
    (system, c)
}

/// The GPU adjoint keeps the DDEF plan it was set up with for the whole run, as the CPU
/// gradient driver does (its reversed steps must see the forward's structure), even when
/// the charges' box drifts from it and the energies are read between steps, where a plain
/// solver re-plans: on the stretched cloud a plain solver makes at least 2 plans, the
/// adjoint's solver 1 with its drift flag raised, and its cotangents are bit-identical to
/// a run that read nothing between steps. (A re-plan in the adjoint's energy read makes
/// its plan count 2 and the reversed steps' structure differ.)
#[test]
fn the_gpu_adjoint_keeps_its_ddef_plan_when_the_box_drifts() {
    use msc::gpu::{AdjointSetup, GpuAdjoint, GpuError, GpuSolver, HeadlessOptions};
    let (system, config) = stretched();
    let options = HeadlessOptions {
        allow_software: true,
    };
    let mut plain = match GpuSolver::headless(&system, &config, &options) {
        Err(GpuError::NoAdapter(why)) => return common::skip_no_adapter(&why),
        r => r.expect("solver"),
    };
    for _ in 0..4 {
        plain.advance(10).unwrap();
        plain.read_energies().unwrap();
    }
    let plans = plain.ddef_rebuilds().unwrap();
    assert!(
        plans >= 2,
        "the stretched cloud re-plans a plain run ({plans} plans)"
    );
    let setup = AdjointSetup {
        stiffnesses: false,
        masses: true,
        charges: true,
        externals: false,
        frames: 1,
        scale: 1.0 / system.len() as f64,
        cg_iterations: None,
    };
    let run = |read_energies: bool| {
        let mut adj = GpuAdjoint::headless(&system, &config, &setup, &options).unwrap();
        for _ in 0..4 {
            adj.advance(10, true).unwrap();
            if read_energies {
                adj.state().unwrap(); // submits the steps
                adj.solver().read_energies().unwrap();
            }
        }
        let s = adj.solver();
        let plans = s.ddef_rebuilds().unwrap();
        let drifted = read_energies && s.read_ddef_structure().unwrap().unwrap().drifted;
        adj.seed(0, system.positions()).unwrap();
        while adj.latest_kept().is_some() {
            adj.reverse().unwrap();
        }
        (plans, drifted, adj.read().unwrap())
    };
    let (plans, drifted, read) = run(true);
    assert_eq!(plans, 1, "the adjoint's solver re-planned");
    assert!(
        drifted,
        "the box drifted from the plan, and no re-plan cleared the flag"
    );
    assert!(read.charges.iter().any(|g| *g != 0.0), "charge cotangents");
    let (_, _, quiet) = run(false);
    assert_eq!(read, quiet, "cotangents with and without the energy reads");
}
