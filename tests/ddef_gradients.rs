//! Gradients through DDEF (lattice grid) on the CPU, with the structure frozen at each
//! evaluation (docs/physics.md §9, "Through DDEF"): the tangents against central
//! differences of the same simulation, the adjoint against forward mode, checkpointing,
//! and the refusals. On the charged ball of `ddef_ball`; the GPU's gradients are in
//! tests/gpu_ddef_gradients.rs, `msc fit` on a DDEF scene in tests/ddef_fit.rs.
//!
//! Central differences: relative step 1e-6 of each parameter. The DDEF map is piecewise
//! smooth (its structure changes where a charge crosses a tetrahedron face or the box
//! crosses a quantum), so the differences measure the frozen-structure derivative only
//! when the ± runs keep the primal run's structure at every evaluation: the test checks
//! that (frame and every charge's tetrahedron, step by step) before comparing. With
//! charges crossing faces every few steps, a relative step of 1e-4 made a ± run cross at
//! another step than the primal in about half the components (measured); 1e-6 moves the
//! crossings' times by about 1e-9 s, against steps of 5e-3 s.

mod common;
mod ddef_ball;

use common::Rng;
use ddef_ball::{ball, ball_with, cg, config, exact, norm, rel_err};
use glam::DVec3;
use msc::config::{CoulombMethod, DdefGrid, DdefVariant, Integrator};
use msc::ddef::{DdefSolver, Frame, LatticeDdef};
use msc::gpu::{GpuError, HeadlessOptions};
use msc::grad::{
    evaluate, simulate, simulate_with_tangents, CheckpointOptions, Checkpointing, GpuTangents,
    GradMode, GradOptions, Param, ParamSet, TangentSolve,
};

/// The DDEF structure of every evaluation up to step `last` of the run at `theta` (states
/// 0..=last: each evaluation reads one of them): the frame and each charge's tetrahedron.
fn structure(
    set: &ParamSet,
    theta: &[f64],
    last: u64,
    opts: &GradOptions,
) -> Vec<(Frame, Vec<u32>)> {
    let (system, config) = set.instantiate(theta).unwrap();
    let d = config.coulomb.method.ddef().unwrap();
    let (x0, q) = (system.positions(), system.charges());
    let plan = DdefSolver::plan_for(d, x0, q).unwrap();
    let steps: Vec<u64> = (1..=last).collect();
    let eps = config.coulomb.softening;
    std::iter::once(x0.to_vec())
        .chain(
            simulate(set, theta, &steps, opts)
                .unwrap()
                .into_iter()
                .map(|s| s.x),
        )
        .map(|x| {
            let l = LatticeDdef::new(&plan, &x, q, eps).unwrap();
            (*l.frame(), l.located().iter().map(|l| l.tet).collect())
        })
        .collect()
}

/// CPU tangents of `components` against central differences of the CPU simulation.
fn check_fd(set: &ParamSet, frames: &[u64], components: &[usize], what: &str) {
    let opts = GradOptions {
        tangent_solve: TangentSolve {
            tolerance: 1e-13,
            max_iterations: 5000,
        },
        exact_forward: true,
        ..GradOptions::default()
    };
    let theta = set.initial();
    let run = simulate_with_tangents(set, &theta, frames, &opts).unwrap();
    let names = set.component_names();
    for &p in components {
        let d = 1e-6 * theta[p].abs();
        let (mut plus, mut minus) = (theta.clone(), theta.clone());
        plus[p] += d;
        minus[p] -= d;
        let sp = simulate(set, &plus, frames, &opts).unwrap();
        let sm = simulate(set, &minus, frames, &opts).unwrap();
        // The differences measure the frozen-structure derivative only if both runs keep
        // the primal run's structure at every evaluation.
        let last = *frames.last().unwrap();
        let primal = structure(set, &theta, last, &opts);
        for (side, t) in [("+", &plus), ("-", &minus)] {
            let other = structure(set, t, last, &opts);
            if let Some(k) = (0..primal.len()).find(|&k| other[k] != primal[k]) {
                panic!(
                    "{what}: {} {side}: the DDEF structure changed at step {k}",
                    names[p]
                );
            }
        }
        for (k, f) in run.frames.iter().enumerate() {
            let fd: Vec<DVec3> = sp[k]
                .x
                .iter()
                .zip(&sm[k].x)
                .map(|(a, b)| (*a - *b) / (2.0 * d))
                .collect();
            let e = rel_err(&fd, &f.tangents[p].dx);
            eprintln!("{what}: d x / d {} at step {}: {e:.2e}", names[p], f.step);
            // The O(d^2) truncation is negligible at this step and the roundoff of the
            // differences (positions of 0.5 m to 1e-16, solves to 1e-13) is about 1e-8
            // relative; a dropped DDEF term moves the tangent by far more.
            assert!(
                e <= 1e-5,
                "{what}: d x / d {} at step {}: relative error {e:.3e}",
                names[p],
                f.step
            );
        }
    }
}

/// The charge scale and three per-particle charges, IMEX and Verlet (two evaluations a
/// step) and local-global, both variants: the tangents propagate through positions
/// (dx enters every later evaluation) and charges.
#[test]
fn cpu_ddef_tangents_match_central_differences_of_the_simulation() {
    let system = ball();
    for (integrator, variant) in [
        (Integrator::Imex, DdefVariant::Corrected),
        (Integrator::Imex, DdefVariant::Paper),
        (Integrator::Verlet, DdefVariant::Corrected),
        (Integrator::LocalGlobal, DdefVariant::Corrected),
    ] {
        let c = config(integrator, variant, cg(5000, 1e-13));
        let set = ParamSet::new(&system, &c, &[Param::ChargeScale]).unwrap();
        check_fd(
            &set,
            &[10, 20],
            &[0],
            &format!("{integrator:?} {variant:?}"),
        );
        // Per-particle charges on the 42-particle ball (one tangent per particle).
        let small = ball_with(1, |_| true);
        let set = ParamSet::new(&small, &c, &[Param::Charges]).unwrap();
        check_fd(
            &set,
            &[20],
            &[3, 20, 40],
            &format!("{integrator:?} {variant:?}"),
        );
    }
}

/// The CPU adjoint through DDEF (`ddef::lattice_adjoint`) against CPU forward mode on the
/// 42-particle ball (m = 27, so most pairs go through the far field): both differentiate
/// the same frozen-structure map, so with solves to 1e-13 they agree to 1e-8 relative per
/// parameter group (the target; the solves' residuals through 20 steps are the
/// only difference). Every integrator family, both variants, per-element and scalar
/// parameters. The targets come from a run at theta moved by a few percent. Measured:
/// at most 1.2e-12 (local-global). Planted bug: the far field's transpose dropped gives
/// 7e-2 (IMEX, per-particle charges).
#[test]
fn cpu_ddef_adjoint_gradient_equals_forward_mode() {
    use DdefVariant::{Corrected, Paper};
    use Integrator::{Imex, LocalGlobal, SymplecticEuler, Verlet};
    let small = ball_with(1, |_| true);
    let per_element = vec![Param::Charges, Param::Stiffnesses, Param::Masses];
    for (integrator, variant, params) in [
        (Imex, Corrected, per_element.clone()),
        (Imex, Paper, vec![Param::ChargeScale, Param::StiffnessScale]),
        (LocalGlobal, Corrected, per_element),
        (
            SymplecticEuler,
            Paper,
            vec![Param::Charges, Param::Stiffnesses],
        ),
        (Verlet, Corrected, vec![Param::Charges]),
    ] {
        let what = format!("{integrator:?} {variant:?}");
        let c = config(integrator, variant, cg(5000, 1e-13));
        let set = ParamSet::new(&small, &c, &params).unwrap();
        let theta = set.initial();
        let mut rng = Rng(41);
        let moved: Vec<f64> = theta.iter().map(|t| t * rng.range(0.97, 1.03)).collect();
        let states = simulate(&set, &moved, &[5, 12, 20], &exact(GradMode::Forward));
        let targets = common::targets_of(states.unwrap(), |p| p);
        let run = |mode| evaluate(&set, &theta, &targets, &exact(mode), true, false).unwrap();
        let (fwd, adj) = (run(GradMode::Forward), run(GradMode::Adjoint));
        assert_eq!(fwd.loss.to_bits(), adj.loss.to_bits(), "{what}: loss");
        for (a, p) in params.iter().enumerate() {
            let r = set.range(a);
            let (f, b) = (&fwd.gradient[r.clone()], &adj.gradient[r]);
            let diff: Vec<f64> = f.iter().zip(b).map(|(x, y)| x - y).collect();
            assert!(norm(f) > 0.0, "{what} {p:?}: zero gradient");
            let rel = norm(&diff) / norm(f);
            eprintln!("{what} {p:?}: adjoint against forward {rel:.2e}");
            assert!(rel <= 1e-8, "{what} {p:?}: relative difference {rel:.2e}");
        }
    }
}

/// Checkpointing through DDEF: a recomputed segment rebuilds each evaluation under the
/// run's plan, so two-level and binomial plans give the store-all gradient bit for bit.
#[test]
fn cpu_ddef_adjoint_checkpointing_is_bit_identical() {
    let small = ball_with(1, |_| true);
    let c = config(Integrator::Imex, DdefVariant::Corrected, cg(60, 0.0));
    let set = ParamSet::new(&small, &c, &[Param::Charges, Param::Stiffnesses]).unwrap();
    let theta = set.initial();
    let states = simulate(&set, &theta, &[7, 16], &GradOptions::default());
    let targets = common::targets_of(states.unwrap(), |p| p * 1.01);
    let adjoint = GradOptions {
        mode: GradMode::Adjoint,
        ..GradOptions::default()
    };
    let run = |policy| {
        let checkpoint = CheckpointOptions {
            policy,
            memory_budget: u64::MAX,
        };
        let o = GradOptions {
            checkpoint,
            ..adjoint
        };
        evaluate(&set, &theta, &targets, &o, true, false).unwrap()
    };
    let bits = |g: &[f64]| g.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let all = run(Checkpointing::StoreAll);
    assert!(norm(&all.gradient) > 0.0);
    for policy in [
        Checkpointing::TwoLevel { interval: Some(4) },
        Checkpointing::Binomial { snapshots: 2 },
    ] {
        let e = run(policy);
        assert_eq!(bits(&e.gradient), bits(&all.gradient), "{policy:?}");
        assert!(e.stats.checkpoint.unwrap().forward_steps > 16, "{policy:?}");
    }
}

/// Refusals: the Delaunay grid has no tangent; under DDEF an uncharged particle's
/// charge is part of the frozen structure (CPU parameter set and GPU directions alike).
#[test]
fn ddef_gradients_refuse_what_has_no_derivative() {
    let system = ball();
    let mut c = config(Integrator::Imex, DdefVariant::Corrected, cg(100, 0.0));
    if let CoulombMethod::Ddef(d) = &mut c.coulomb.method {
        d.grid = DdefGrid::Delaunay;
    }
    let e = ParamSet::new(&system, &c, &[Param::ChargeScale]).unwrap_err();
    assert!(e.to_string().contains("lattice"), "{e}");
    let c = config(Integrator::Imex, DdefVariant::Corrected, cg(100, 0.0));
    let system = ball_with(2, |i| i != 9);
    let e = ParamSet::new(&system, &c, &[Param::Charges]).unwrap_err();
    assert!(e.to_string().contains("particle 9"), "{e}");
    // A charge scale is fine: its direction is 0 on the uncharged particle.
    let set = ParamSet::new(&system, &c, &[Param::ChargeScale]).unwrap();
    let mut dq = vec![0.0; system.len()];
    dq[9] = 1.0;
    let dir = msc::grad::Direction {
        dq: Some(dq),
        ..Default::default()
    };
    let r = GpuTangents::headless(&system, &c, &[dir], &HeadlessOptions::default());
    assert!(
        matches!(&r, Err(GpuError::Unsupported(m)) if m.contains("particle 9")),
        "{:?}",
        r.err()
    );
    // `--gradient auto` takes the adjoint for per-element parameters on either backend.
    let ball = ball();
    let per_element = ParamSet::new(&ball, &c, &[Param::Charges]).unwrap();
    assert_eq!(GradMode::auto(&per_element), GradMode::Adjoint);
    assert_eq!(GradMode::auto(&set), GradMode::Forward);
}
