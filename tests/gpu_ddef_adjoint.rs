//! The device DDEF adjoint (`kernels::ddef_adjoint`: the transpose of the lattice DDEF
//! forces with the evaluation's structure frozen) against the f64 CPU reference
//! `LatticeDdef::forces_vjp`, on the frame and tetrahedra the GPU built (read back), at
//! the positions rounded to f32 (what the GPU holds). Runs on whatever adapter wgpu
//! finds, software ones (lavapipe) included; skips when there is none, and fails instead
//! when `MSC_REQUIRE_GPU=1`.
//!
//! Tolerance: each cotangent is compared with the largest of its kind (positions,
//! charges) at `F32_SUMS` = 1e-4 of it, the bound of the forward DDEF tests
//! (`tests/gpu_ddef.rs`): the GPU sums the same pair terms in f32, over thousands of
//! sources with mixed signs and with the `corrected` subtraction, in other orders (per
//! target, per source, per site, per tetrahedron) than the CPU's serial scatter, which
//! costs a few digits against the largest term; a wrong mask, exclusion, sign or weight
//! shows at the size of the term it drops, and the test checks that the `corrected`
//! terms alone (the smallest: the two variants' difference) are far above the tolerance.

mod common;

use common::{charges, cloud, ddef_cloud_config as config, f32_round, skip_no_adapter, Rng};
use glam::DVec3;
use msc::config::{Config, DdefSamples, DdefVariant};
use msc::ddef::error_study::random_points;
use msc::ddef::{DdefSolver, Evaluation, LatticeDdef};
use msc::gpu::{GpuError, GpuSolver, HeadlessOptions, TangentDirection};
use msc::model::System;

/// f32 sums against f64 ones, relative to the largest cotangent (see the module docs).
const F32_SUMS: f64 = 1e-4;

fn solver(system: &System, config: &Config) -> Option<GpuSolver> {
    solver_along(system, config, None)
}

/// A solver with one tangent direction, of charge tangents `dq` (None: 0).
fn solver_along(system: &System, config: &Config, dq: Option<&[f64]>) -> Option<GpuSolver> {
    let zero = TangentDirection {
        dq,
        dk: None,
        dqe: &[],
        dxe: &[],
    };
    let options = HeadlessOptions {
        allow_software: true,
    };
    match GpuSolver::headless_with_tangents(system, config, &[zero], &options) {
        Ok(s) => Some(s),
        Err(GpuError::NoAdapter(why)) => {
            skip_no_adapter(&why);
            None
        }
        Err(e) => panic!("building the GPU solver failed: {e}"),
    }
}

/// Largest |a - b| over the largest |b|.
fn rel<T: Copy>(a: &[T], b: &[T], norm: impl Fn(T) -> f64, sub: impl Fn(T, T) -> T) -> f64 {
    let scale = b.iter().map(|&v| norm(v)).fold(0.0, f64::max);
    assert!(scale > 0.0, "reference cotangents are all zero");
    let d = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| norm(sub(x, y)))
        .fold(0.0, f64::max);
    d / scale
}

type Vjp = (Vec<DVec3>, Vec<f64>);

/// The GPU's VJP for cotangent `w` and the CPU's on the GPU's structure.
fn both(x: &[DVec3], q: &[f64], w: &[DVec3], c: &Config) -> Option<(Vjp, Vjp)> {
    let system = cloud(x, q);
    let mut g = solver(&system, c)?;
    let gpu = g.ddef_forces_vjp(w).expect("gpu vjp");
    // Reruns give the same bits (no atomics, fixed orders).
    assert_eq!(g.ddef_forces_vjp(w).expect("rerun"), gpu, "rerun");
    let s = g.read_ddef_structure().expect("structure").expect("DDEF");
    let d = c.coulomb.method.ddef().unwrap();
    let eps = c.coulomb.softening;
    let plan = DdefSolver::plan_for(d, x, q).expect("plan");
    let frame = *LatticeDdef::new(&plan, x, q, eps).expect("cpu").frame();
    assert_eq!((s.lo, s.hi), (frame.lo, frame.hi), "frame box");
    let cpu = LatticeDdef::with_tets(frame, x, q, eps, &s.tets).expect("cpu on gpu structure");
    let (mut xb, mut qb) = (vec![DVec3::ZERO; x.len()], vec![0.0; x.len()]);
    cpu.forces_vjp(Evaluation::Ddef(d.variant), w, &mut xb, Some(&mut qb));
    Some((gpu, (xb, qb)))
}

fn check(name: &str, x: &[DVec3], q: &[f64], samples: u32, eps: f64) {
    let x = f32_round(x);
    let mut rng = Rng(99);
    let w: Vec<DVec3> = (0..x.len())
        .map(|_| rng.vec(1.0).as_vec3().as_dvec3())
        .collect();
    let mut runs = Vec::new();
    for variant in [DdefVariant::Paper, DdefVariant::Corrected] {
        let Some(((gx, gq), (cx, cq))) = both(
            &x,
            q,
            &w,
            &config(DdefSamples::Count(samples), variant, eps),
        ) else {
            return;
        };
        for (i, &qi) in q.iter().enumerate() {
            if qi == 0.0 {
                assert_eq!((gx[i], gq[i]), (DVec3::ZERO, 0.0), "uncharged {i}");
            }
        }
        let dx = rel(&gx, &cx, |v| v.length(), |a, b| a - b);
        let dq = rel(&gq, &cq, f64::abs, |a, b| a - b);
        eprintln!("{name} {variant:?} m={samples}: x_bar {dx:.2e}, q_bar {dq:.2e}");
        assert!(dx < F32_SUMS, "{name} {variant:?}: x_bar off by {dx:.3e}");
        assert!(dq < F32_SUMS, "{name} {variant:?}: q_bar off by {dq:.3e}");
        runs.push((gx, gq, cx, cq));
    }
    // The `corrected` terms alone (the variants' difference, 1e-5..1e-2 of the largest
    // cotangent: below F32_SUMS for x_bar) against the CPU's, to 10% of their own size
    // (the f32 sums' error, about 1e-6 of the largest cotangent, over the difference).
    let sub = |a: &[DVec3], b: &[DVec3]| -> Vec<DVec3> {
        a.iter().zip(b).map(|(u, v)| *u - *v).collect()
    };
    let subq = |a: &[f64], b: &[f64]| -> Vec<f64> { a.iter().zip(b).map(|(u, v)| u - v).collect() };
    let (p, c) = (&runs[0], &runs[1]);
    let dx = rel(
        &sub(&c.0, &p.0),
        &sub(&c.2, &p.2),
        |v| v.length(),
        |a, b| a - b,
    );
    let dq = rel(&subq(&c.1, &p.1), &subq(&c.3, &p.3), f64::abs, |a, b| a - b);
    eprintln!("{name} corrected terms m={samples}: x_bar {dx:.2e}, q_bar {dq:.2e}");
    assert!(
        dx < 0.1 && dq < 0.1,
        "{name}: corrected terms off by {dx:.2e}, {dq:.2e}"
    );
}

#[test]
fn gpu_ddef_vjp_matches_the_cpu_reference_on_random_charges() {
    let n = 2000;
    let x = random_points(DVec3::ZERO, DVec3::ONE, n, 7);
    let q = charges(&mut Rng(3), n, 1e-6, 0.1);
    check("random", &x, &q, 200, 1e-3);
    check("random", &x, &q, 400, 0.0);
}

#[test]
fn gpu_ddef_vjp_matches_the_cpu_reference_on_a_sheet() {
    // A thin axis: every charge on one plane.
    let n = 1500;
    let x: Vec<DVec3> = random_points(DVec3::ZERO, DVec3::ONE, n, 5)
        .into_iter()
        .map(|p| DVec3::new(p.x, p.y, 0.25))
        .collect();
    let q = charges(&mut Rng(12), n, 1e-6, 0.0);
    check("sheet", &x, &q, 600, 1e-3);
}

fn dot(a: &[DVec3], b: &[DVec3]) -> f64 {
    a.iter().zip(b).map(|(u, v)| u.dot(*v)).sum()
}

fn norm(a: &[DVec3]) -> f64 {
    dot(a, a).sqrt()
}

/// The dot-product test <w, J u> = <J^T w, u> between the device DDEF VJP and the device
/// DDEF tangent kernels (`kernels::ddef_tangent`, read through `ddef_forces_jvp`) on the
/// same evaluation, position and charge tangents apart, both variants. Tolerance 1e-7 of
/// |w| |J u| (the Cauchy-Schwarz bound of both sides): the two sides sum the same f32
/// pair products (unit roundoff 6e-8) in different orders over about 10^6 terms of mixed
/// signs, whose roundoffs largely cancel: measured at most 4.7e-9 of the bound on
/// lavapipe, so 1e-7 leaves 20x for other adapters. Planted bug: the weights' transpose
/// dropped (`ddef_gather_adjoint`) gives 2.4e-6 (paper) and 1.0e-5 (corrected).
#[test]
fn gpu_ddef_vjp_is_the_transpose_of_the_gpu_ddef_tangent() {
    let n = 1500;
    let x = f32_round(&random_points(DVec3::ZERO, DVec3::ONE, n, 31));
    let q = charges(&mut Rng(32), n, 1e-6, 0.0);
    let mut rng = Rng(33);
    let w: Vec<DVec3> = (0..n).map(|_| rng.vec(1.0).as_vec3().as_dvec3()).collect();
    let dx: Vec<DVec3> = (0..n).map(|_| rng.vec(1e-3).as_vec3().as_dvec3()).collect();
    let dq: Vec<f64> = (0..n)
        .map(|_| (rng.range(-1e-8, 1e-8) as f32).into())
        .collect();
    let system = cloud(&x, &q);
    for variant in [DdefVariant::Paper, DdefVariant::Corrected] {
        let c = config(DdefSamples::Count(300), variant, 1e-3);
        let zero = vec![DVec3::ZERO; n];
        for (what, tdx, tdq) in [("positions", &dx, None), ("charges", &zero, Some(&dq[..]))] {
            let Some(mut g) = solver_along(&system, &c, tdq) else {
                return;
            };
            let ju = g.ddef_forces_jvp(tdx).expect("jvp");
            let (xb, qb) = g.ddef_forces_vjp(&w).expect("vjp");
            let lhs = dot(&w, &ju);
            let mut rhs = dot(&xb, tdx);
            if let Some(dq) = tdq {
                rhs += qb.iter().zip(dq).map(|(a, b)| a * b).sum::<f64>();
            }
            let bound = norm(&w) * norm(&ju);
            let rel = (lhs - rhs).abs() / bound;
            eprintln!("{variant:?} {what}: <w, Ju> {lhs:.6e}, <J^T w, u> {rhs:.6e}, {rel:.2e} of the bound");
            assert!(bound > 0.0 && rel <= 1e-7, "{variant:?} {what}: {rel:.2e}");
        }
    }
}
