//! GPU forward sensitivities (`msc::grad::GpuTangents`, `GradBackend::Gpu`) against the f64
//! CPU reference tangents (`msc::grad`). Runs on whatever adapter wgpu finds, lavapipe
//! included; skips with a message when there is none, and fails instead when
//! `MSC_REQUIRE_GPU=1`.
//!
//! Setup: a charged icosphere (42 particles, 120 damped springs, two pinned particles, two
//! uncharged ones), an orbiting external charge, IMEX over 30 steps (the explicit
//! integrators' test says what differs for them). Both backends run the forward linear
//! solves with the same solver and the same fixed iteration count (tolerance 0 on the CPU). The GPU's tangent solves run that solver too, the CPU's run
//! CG to 1e-12: the counts are chosen so the fixed-count solves converge to f32 roundoff
//! on this system (A = M + sum W_k is strongly diagonally dominant at h = 0.01), so both
//! tangents are the exact-solve derivative up to rounding.
//!
//! Tolerance: |dx_gpu - dx_cpu| <= 1e-4 |dx_cpu| (norms over all particles), per
//! direction. The GPU computes in f32 (unit roundoff 6e-8); the tangents carry the
//! rounding of Coulomb JVP sums with mixed signs and of the iterative solves through 30
//! steps (measured here: at most 3e-6, so 1e-4 leaves a 30x margin for other adapters'
//! rounding). Dropping a single term of the tangent moves it by far more (measured: dA v'
//! 0.7, the clamp's derivative 3e-2, the orbit rotation of dx_e 0.1, the swirl field's
//! gradient 6e-3).

mod common;

use common::Rng;
use glam::DVec3;
use msc::config::{
    Config, CoulombMethod, ExternalCharge, ExternalField, Integrator, Orbit, SolverConfig,
    SolverMethod,
};
use msc::gpu::{GpuError, HeadlessOptions};
use msc::grad::{
    evaluate, simulate_with_tangents, GpuTangents, GradBackend, GradError, GradOptions, Param,
    ParamSet, TangentRun, Target,
};
use msc::model::mesh::icosphere;
use msc::model::{Spring, System, SystemDesc};

const GPU: GradOptions = GradOptions {
    tangent_solve: msc::grad::TangentSolve {
        tolerance: 1e-12,
        max_iterations: 20_000,
    },
    exact_forward: false,
    window: None,
    backend: GradBackend::Gpu {
        allow_software: true,
    },
    mode: msc::grad::GradMode::Forward,
    adjoint_cg_iterations: None,
    adjoint_solve: msc::grad::AdjointSolve::Exact,
    checkpoint: msc::grad::CheckpointOptions {
        policy: msc::grad::Checkpointing::Auto,
        memory_budget: msc::grad::checkpoint::DEFAULT_MEMORY_BUDGET,
    },
};

/// `Ok(None)` (test skipped) when there is no adapter.
fn on_gpu<T>(r: Result<T, GradError>) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(GradError::Gpu(GpuError::NoAdapter(why))) => {
            common::skip_no_adapter(&why);
            None
        }
        Err(e) => panic!("GPU tangents failed: {e}"),
    }
}

/// Particles 0 and 5 are pinned, 3 and 7 uncharged (a charge direction on 7 makes it act
/// and be acted on).
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
        masses: vec![0.02; n],
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
            omega: if method == SolverMethod::Jacobi {
                0.9
            } else {
                1.0
            },
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

fn cpu_options() -> GradOptions {
    GradOptions {
        backend: GradBackend::Cpu,
        ..GPU
    }
}

/// Worst |gpu - cpu| / |cpu| over the components `pairs` = (gpu index, cpu index), and
/// the pinned rows of the GPU tangents (which must be exactly 0).
fn compare(
    gpu: &[msc::grad::Tangent],
    cpu: &[msc::grad::Tangent],
    pairs: &[(usize, usize)],
    pinned: &[usize],
) -> f64 {
    let mut worst: f64 = 0.0;
    for &(g, c) in pairs {
        let (a, b) = (&gpu[g].dx, &cpu[c].dx);
        let diff: f64 = a
            .iter()
            .zip(b)
            .map(|(x, y)| (*x - *y).length_squared())
            .sum();
        let norm: f64 = b.iter().map(|y| y.length_squared()).sum();
        assert!(norm > 0.0, "component {c}: the CPU tangent is 0");
        worst = worst.max((diff / norm).sqrt());
        for &i in pinned {
            assert_eq!(gpu[g].dx[i], DVec3::ZERO, "pinned particle {i}");
            assert_eq!(gpu[g].dv[i], DVec3::ZERO, "pinned particle {i}");
        }
    }
    worst
}

const TOL: f64 = 1e-4;

/// Global parameters through the gradient API (`GradBackend::Gpu`), every solver.
#[test]
fn gpu_tangents_match_the_cpu_reference_for_global_parameters() {
    let system = ball();
    let params = [
        Param::ChargeScale,
        Param::StiffnessScale,
        Param::ExternalCharge { index: 0 },
        Param::ExternalPosition { index: 0 },
    ];
    // Odd sweep counts leave the forward's v' in the ping-pong partner, even ones in v.
    for (method, iterations, coulomb) in [
        (SolverMethod::Jacobi, 41, CoulombMethod::AllPairs),
        (SolverMethod::BlockJacobi, 30, CoulombMethod::AllPairs),
        (SolverMethod::Chebyshev, 21, CoulombMethod::AllPairs),
        (SolverMethod::Cg, 25, CoulombMethod::AllPairs),
        // Without internal Coulomb the charges still feel the external charge and field.
        (SolverMethod::Cg, 25, CoulombMethod::None),
    ] {
        let mut c = config(method, iterations);
        c.coulomb.method = coulomb;
        if !global_params_agree(
            &system,
            &c,
            &params,
            &[10, 30],
            &format!("{method:?} {coulomb:?}"),
        ) {
            return;
        }
    }
}

fn check_run(gpu: &TangentRun, cpu: &TangentRun, components: usize, what: &str) {
    assert_eq!(gpu.frames.len(), cpu.frames.len());
    for (g, c) in gpu.frames.iter().zip(&cpu.frames) {
        assert_eq!(g.step, c.step);
        let dx: f64 =
            g.x.iter()
                .zip(&c.x)
                .map(|(a, b)| (*a - *b).length())
                .fold(0.0, f64::max);
        // Positions: f32 roundoff of a 1 m system over 30 steps.
        assert!(
            dx < 1e-4,
            "{what} step {}: positions differ by {dx}",
            g.step
        );
        let pairs: Vec<(usize, usize)> = (0..components).map(|p| (p, p)).collect();
        let worst = compare(&g.tangents, &c.tangents, &pairs, &[0, 5]);
        eprintln!(
            "{what} step {}: worst relative tangent error {worst:.2e}",
            g.step
        );
        assert!(worst <= TOL, "{what} step {}: {worst:.2e} > {TOL}", g.step);
    }
}

/// The parameters `params` through the gradient API on both backends, compared at
/// `frames` by [`check_run`]; false when skipped for want of an adapter.
fn global_params_agree(
    system: &System,
    config: &Config,
    params: &[Param],
    frames: &[u64],
    label: &str,
) -> bool {
    let set = ParamSet::new(system, config, params).unwrap();
    let theta = set.initial();
    let cpu = simulate_with_tangents(&set, &theta, frames, &cpu_options()).unwrap();
    let Some(gpu) = on_gpu(simulate_with_tangents(&set, &theta, frames, &GPU)) else {
        return false;
    };
    check_run(&gpu, &cpu, set.len(), label);
    true
}

/// Per-particle charges through [`GpuTangents`] directly: two of the CPU's directions
/// (particle 11, charged, and 7, uncharged: a charge direction makes it act and be acted
/// on) over `steps` steps of `config`, against the CPU reference at `TOL`. Returns the
/// solver (for its tangent-solve report), or `None` when skipped for want of an adapter.
fn per_particle_charges_agree(
    system: &System,
    config: &Config,
    steps: u64,
    label: &str,
) -> Option<GpuTangents> {
    let set = ParamSet::new(system, config, &[Param::Charges]).unwrap();
    let theta = set.initial();
    let cpu = simulate_with_tangents(&set, &theta, &[steps], &cpu_options()).unwrap();
    let dirs = set.directions();
    let picked = [dirs[11].clone(), dirs[7].clone()];
    let (sys, cfg) = set.instantiate(&theta).unwrap();
    let mut gpu = match GpuTangents::headless(
        &sys,
        &cfg,
        &picked,
        &HeadlessOptions {
            allow_software: true,
        },
    ) {
        Ok(g) => g,
        Err(GpuError::NoAdapter(why)) => {
            common::skip_no_adapter(&why);
            return None;
        }
        Err(e) => panic!("{e}"),
    };
    gpu.step(steps).unwrap();
    let (state, tangents) = gpu.read().unwrap();
    assert_eq!(state.step, steps);
    let worst = compare(
        &tangents,
        &cpu.frames[0].tangents,
        &[(0, 11), (1, 7)],
        &[0, 5],
    );
    eprintln!("charges {label}: worst relative tangent error {worst:.2e}");
    assert!(worst <= TOL, "{label}: {worst:.2e} > {TOL}");
    Some(gpu)
}

/// Per-particle charges (a charged particle and an uncharged one) through
/// [`GpuTangents`] directly, with two directions out of the CPU's 42.
#[test]
fn gpu_tangents_match_the_cpu_reference_for_per_particle_charges() {
    let system = ball();
    for (method, iterations) in [(SolverMethod::BlockJacobi, 31), (SolverMethod::Cg, 25)] {
        let c = config(method, iterations);
        let Some(gpu) = per_particle_charges_agree(&system, &c, 20, &format!("{method:?}")) else {
            return;
        };
        // The tangent solves converged (the premise of the comparison).
        let s = gpu.last_tangent_solve().unwrap();
        assert!(s.residual < 1e-4, "tangent residual {}", s.residual);
    }
}

/// Explicit integrators (symplectic Euler, Verlet): the same comparison with global
/// parameters through the gradient API and two per-particle charge directions through
/// [`GpuTangents`], over 40 steps of h = 0.005. Their tangents solve nothing, so both
/// backends compute the same explicit map and only f32 rounding separates them; the
/// tolerance is the IMEX one, 1e-4 (measured: at most 3.3e-6). Dropping a term moves the
/// tangent by far more (measured: the damping's dependence on dv 4e-2, on the axis
/// rotation dn 1e-3, Verlet's second force at t instead of t + h 8e-3, all at step 10).
#[test]
fn gpu_tangents_match_the_cpu_reference_for_explicit_integrators() {
    let system = ball();
    let params = [
        Param::ChargeScale,
        Param::StiffnessScale,
        Param::ExternalCharge { index: 0 },
        Param::ExternalPosition { index: 0 },
    ];
    for integrator in [Integrator::SymplecticEuler, Integrator::Verlet] {
        let mut c = Config {
            integrator,
            dt: 0.005,
            steps: 40,
            ..config(SolverMethod::Jacobi, 10)
        };
        c.coulomb.method = CoulombMethod::AllPairs;
        if !global_params_agree(&system, &c, &params, &[10, 40], &format!("{integrator:?}")) {
            return;
        }

        let label = format!("{integrator:?}");
        let Some(gpu) = per_particle_charges_agree(&system, &c, 40, &label) else {
            return;
        };
        // Nothing is solved: the residual is reported as 0, as on the CPU.
        assert_eq!(gpu.last_tangent_solve().unwrap().residual, 0.0);
    }
}

/// Local-global: the same comparison over 30 steps of h = 0.01 with 4 alternations per
/// step, global parameters through the gradient API and two per-particle charges through
/// [`GpuTangents`]. Each alternation's tangent solve runs the scene's solver for its fixed
/// count on the constant P = M + h C_L + h^2 L (diagonally dominant here), the CPU's CG to
/// 1e-12; the counts converge to f32 roundoff, so the tolerance is the IMEX one, 1e-4
/// (measured: at most 1.9e-5, in the stiffness direction, whose right-hand side is the
/// difference dk (L e - (z'_i - z'_j)) of two terms of the size of a spring, that f32
/// rounds to ~1e-6 of itself per step). Dropping a term moves it by far more (measured at
/// step 10: dP z' 90, h C_L dx 0.7, the projection (I - e e^T) in the local projection's
/// JVP 6, the local projection's JVP taken at y in every alternation 0.35).
#[test]
fn gpu_tangents_match_the_cpu_reference_for_local_global() {
    let system = ball();
    let params = [
        Param::ChargeScale,
        Param::StiffnessScale,
        Param::ExternalCharge { index: 0 },
        Param::ExternalPosition { index: 0 },
    ];
    for (method, iterations) in [
        (SolverMethod::BlockJacobi, 31),
        (SolverMethod::Chebyshev, 20),
        (SolverMethod::Cg, 25),
    ] {
        let mut c = Config {
            integrator: Integrator::LocalGlobal,
            local_global_iterations: 4,
            ..config(method, iterations)
        };
        c.coulomb.method = CoulombMethod::AllPairs;
        if !global_params_agree(
            &system,
            &c,
            &params,
            &[10, 30],
            &format!("LocalGlobal {method:?}"),
        ) {
            return;
        }
    }
    let c = Config {
        integrator: Integrator::LocalGlobal,
        local_global_iterations: 4,
        ..config(SolverMethod::Cg, 25)
    };
    let Some(gpu) = per_particle_charges_agree(&system, &c, 30, "LocalGlobal") else {
        return;
    };
    let s = gpu.last_tangent_solve().unwrap();
    assert!(s.residual < 1e-4, "tangent residual {}", s.residual);
}

/// The GPU gradient of the fit loss against central differences of the GPU forward run.
/// f32 noise permits it here: positions carry ~1e-7 m of rounding, the loss changes by
/// ~1e-5 of itself per step of 2 d = 0.04 in the charge scale, so the difference quotient
/// is good to ~1e-3; the truncation error d^2 L'''/6 of this smooth loss is ~1e-4
/// (measured agreement 4e-4). Agreement asked: 0.5% (dropping dA v' moves it by 0.8%).
#[test]
fn gpu_loss_gradient_matches_central_differences_of_the_gpu_forward() {
    let system = ball();
    let c = config(SolverMethod::Cg, 25);
    let set = ParamSet::new(&system, &c, &[Param::ChargeScale]).unwrap();
    // Targets: the CPU reference at a 30% larger charge.
    let frames = [15u64, 30];
    let truth = msc::grad::simulate(&set, &[1.3], &frames, &cpu_options()).unwrap();
    let targets: Vec<Target> = truth
        .iter()
        .map(|s| Target {
            step: s.step,
            positions: s.x.clone(),
        })
        .collect();
    let theta = [1.0];
    let Some(eval) = on_gpu(evaluate(&set, &theta, &targets, &GPU, true, false)) else {
        return;
    };
    // The forward run alone (no tangents) is the same trajectory, bit for bit: the
    // tangent kernels write only their own buffers and the right-hand side the next
    // step's rhs kernel rewrites.
    let plain = evaluate(&set, &theta, &targets, &GPU, false, false).unwrap();
    assert_eq!(plain.loss, eval.loss);
    let d = 0.02;
    let lp = evaluate(&set, &[theta[0] + d], &targets, &GPU, false, false).unwrap();
    let lm = evaluate(&set, &[theta[0] - d], &targets, &GPU, false, false).unwrap();
    let fd = (lp.loss - lm.loss) / (2.0 * d);
    let g = eval.gradient[0];
    eprintln!("dL/ds: tangent {g:.6e}, central difference {fd:.6e}");
    assert!(
        g < 0.0,
        "the loss must fall towards the larger target charge"
    );
    assert!((g - fd).abs() <= 5e-3 * fd.abs(), "{g} vs {fd}");
    // And the CPU reference's gradient (f64, exact tangent solves).
    let cpu = evaluate(&set, &theta, &targets, &cpu_options(), true, false).unwrap();
    assert!(
        (g - cpu.gradient[0]).abs() <= TOL * cpu.gradient[0].abs(),
        "{g} vs CPU {}",
        cpu.gradient[0]
    );
}

/// Options the GPU does not implement are refused with a typed error pointing to the CPU
/// backend, not ignored (before any device is opened: this runs without an adapter).
/// Every integrator has GPU tangents.
#[test]
fn unsupported_options_are_refused_on_the_gpu() {
    let system = ball();
    let c = config(SolverMethod::Jacobi, 10);
    let set = ParamSet::new(&system, &c, &[Param::ChargeScale]).unwrap();
    let windowed = GradOptions {
        window: Some(3),
        ..GPU
    };
    assert!(matches!(
        simulate_with_tangents(&set, &[1.0], &[5], &windowed),
        Err(GradError::Param(m)) if m.contains("--backend cpu")
    ));
    // DDEF on the Delaunay grid has no GPU tangent (the lattice grid has:
    // tests/ddef_gradients.rs), and a charge direction on an uncharged particle (3) has
    // none under DDEF: both refused before a device is opened.
    let mut d = config(SolverMethod::Jacobi, 10);
    d.coulomb.method = CoulombMethod::Ddef(msc::config::DdefConfig {
        grid: msc::config::DdefGrid::Delaunay,
        ..Default::default()
    });
    let dir = set.directions();
    let r = GpuTangents::headless(&system, &d, &dir, &HeadlessOptions::default());
    assert!(
        matches!(&r, Err(GpuError::Unsupported(m)) if m.contains("delaunay")),
        "{:?}",
        r.err()
    );
    d.coulomb.method = CoulombMethod::Ddef(Default::default());
    let per = ParamSet::new(&system, &c, &[Param::Charges])
        .unwrap()
        .directions();
    let r = GpuTangents::headless(&system, &d, &per, &HeadlessOptions::default());
    assert!(
        matches!(&r, Err(GpuError::Unsupported(m)) if m.contains("particle 3")),
        "{:?}",
        r.err()
    );
}

/// `msc fit --backend gpu` end to end: a target run by the CPU reference (float32 PLY
/// frames), the fit's tangents on the GPU; the charge comes back to the precision of the
/// f32 frames and of the f32 GPU trajectory (measured 3e-9 relative; asked 1e-4, as the
/// CPU backend's fit test in tests/gradients.rs).
#[test]
fn msc_fit_with_the_gpu_backend_recovers_a_charge() {
    if let Err(GpuError::NoAdapter(why)) = msc::gpu::open_headless_device(&HeadlessOptions {
        allow_software: true,
    }) {
        common::skip_no_adapter(&why);
        return;
    }
    let scene = common::ball_scene(
        "method = \"imex\"\ndt = 0.02\nsteps = 40\nsolver = { method = \"cg\", iterations = 30, tolerance = 0.0 }",
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ball.toml");
    std::fs::write(&path, scene).unwrap();
    let s = path.to_str().unwrap();
    let target = dir.path().join("target");
    let t = target.to_str().unwrap();
    let run = ["msc", "run", s, "--backend", "cpu", "--quiet", "--out", t];
    assert_eq!(msc::cli::main_with_args(run), 0);
    let out = dir.path().join("fit");
    let args = [
        "msc",
        "fit",
        s,
        "--target",
        t,
        "--param",
        "charge",
        "--init",
        "1e-6",
        "--backend",
        "gpu",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ];
    assert_eq!(msc::cli::main_with_args(args), 0);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("fit.json")).unwrap()).unwrap();
    assert_eq!(json["gradient"]["backend"], "gpu", "{json}");
    assert_eq!(json["converged"], true, "{json}");
    let q = json["parameters"][0]["result"][0].as_f64().unwrap();
    eprintln!("recovered charge {q:e} C (truth 2e-6)");
    assert!((q / 2e-6 - 1.0).abs() < 1e-4, "charge {q}");
}

/// `tangent_coulomb` over several tiles of sources: 600 charged particles (no springs, no
/// pins), so a workgroup's 256 targets meet full tiles of other targets' sources (the
/// kernel's loop without the self-pair test), tiles holding its own targets and a partial
/// last tile. The charge-scale tangent after 30 symplectic Euler steps against the CPU
/// reference at the file's tolerance, 1e-4 (f32 sums of 600 terms per step; measured
/// 1.0e-6 on lavapipe, and 5.3e-3 with the G dx term dropped from the full tiles' loop).
#[test]
fn gpu_coulomb_tangents_match_the_cpu_reference_across_tiles() {
    let n = 600;
    let mut rng = Rng(11);
    let system = System::new(SystemDesc {
        positions: (0..n).map(|_| rng.vec(0.5)).collect(),
        velocities: vec![DVec3::ZERO; n],
        masses: vec![1e-3; n],
        charges: (0..n)
            .map(|_| 1e-8 * rng.range(0.5, 1.5) * if rng.next() < 0.5 { -1.0 } else { 1.0 })
            .collect(),
        pinned: vec![false; n],
        springs: Vec::new(),
        faces: Vec::new(),
    })
    .unwrap();
    let mut config = Config {
        integrator: Integrator::SymplecticEuler,
        dt: 1e-3,
        steps: 30,
        gravity: DVec3::ZERO,
        ..Config::default()
    };
    config.coulomb.method = CoulombMethod::AllPairs;
    config.coulomb.softening = 0.02;
    let set = ParamSet::new(&system, &config, &[Param::ChargeScale]).unwrap();
    let theta = set.initial();
    let cpu = simulate_with_tangents(&set, &theta, &[30], &cpu_options()).unwrap();
    let Some(gpu) = on_gpu(simulate_with_tangents(&set, &theta, &[30], &GPU)) else {
        return;
    };
    let worst = compare(
        &gpu.frames[0].tangents,
        &cpu.frames[0].tangents,
        &[(0, 0)],
        &[],
    );
    eprintln!("600 charges: worst relative tangent error {worst:.2e}");
    assert!(worst <= TOL, "{worst:.2e} > {TOL}");
}
