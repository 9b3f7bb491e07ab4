//! The device-resident DDEF past a CPU adapter's loop budget. llvmpipe (lavapipe) ends
//! an invocation's loops after 65,535 iterations in all, without an error; `ddef_rank`
//! walks every charge of its tetrahedron and `ddef_gather` the sources around its cell,
//! so crowded charges with a small m could lose terms silently. Each test builds such a
//! set and requires either the typed error that names the count and the limit, or (on a
//! hardware GPU, which has no such budget) forces that match the f64 reference.
//!
//! The adjoint (`kernels::ddef_adjoint`) walks the same structure: `ddef_tet_adjoint` a
//! tetrahedron's charges as `ddef_rank` does, `ddef_gather_adjoint` and
//! `ddef_source_adjoint` the sources around a cell of the forward's work items (the
//! near stencils' cell offsets reversed: the same set) as `ddef_gather` does, with short
//! loops that fit the iterations the budget keeps (`shader::CPU_WALK_BUDGET`). So the
//! forward's flags, raised by the evaluation each transpose follows, cover its walks,
//! and every read of a DDEF solver's results (the VJP's, the tangents', the adjoint's
//! cotangents, the state) checks them: past the budget the VJP and `grad::evaluate`
//! (adjoint, tangents, plain loss) are the typed error on a CPU adapter.
//!
//! Tolerance: the forces compared are those of the charges whose walk passes the budget,
//! relative to their own largest: their sums are over tens of thousands of sources of one
//! sign, so f32 rounding stays near 1e-5 (`F32_SUMS` = 1e-4, as in `tests/gpu_ddef.rs`),
//! while a cut walk drops thousands of them (a few percent at least). The VJP's
//! cotangents (on a hardware GPU) are compared the same way.

mod common;

use common::{cloud, ddef_cloud_config, f32_round, gpu, Rng};
use glam::DVec3;
use msc::config::{Config, DdefSamples, DdefVariant};
use msc::ddef::plan::ORDERS;
use msc::ddef::{DdefSolver, Evaluation, LatticeDdef};
use msc::gpu::{GpuError, GpuSolver, GpuWorlds, HeadlessOptions, TangentDirection};
use msc::grad::{evaluate, GradBackend, GradError, GradMode, GradOptions, Param, ParamSet, Target};
use std::ops::Range;

const F32_SUMS: f64 = 1e-4;

/// The unit cube's corners: they fix the box whatever lies inside.
fn corners() -> Vec<DVec3> {
    (0..8)
        .map(|c| DVec3::new(f64::from(c & 1), f64::from((c >> 1) & 1), f64::from(c >> 2)))
        .collect()
}

fn config(samples: u32) -> Config {
    ddef_cloud_config(DdefSamples::Count(samples), DdefVariant::Corrected, 1e-3)
}

/// `count` points inside tetrahedron (cell, Kuhn type `kuhn`) of the lattice of m =
/// `samples` on the unit cube: around its centroid (fractional coordinates 3/4, 1/2, 1/4
/// along its axis order), jittered by at most 0.1 of a cell so the type holds.
fn crowd(samples: u32, cell: [u32; 3], kuhn: usize, count: usize, seed: u64) -> Vec<DVec3> {
    let d = config(samples).coulomb.method.ddef().unwrap();
    let c = corners();
    let plan = DdefSolver::plan_for(d, &c, &[1.0; 8]).expect("plan");
    let frame = plan.frame(DVec3::ZERO, DVec3::ONE);
    let order = ORDERS[kuhn];
    let mut f = [0.0; 3];
    for (k, &axis) in order.iter().enumerate() {
        f[axis] = 0.75 - 0.25 * k as f64;
    }
    let mut rng = common::Rng(seed);
    (0..count)
        .map(|_| {
            let u = DVec3::new(
                f64::from(cell[0]) + f[0],
                f64::from(cell[1]) + f[1],
                f64::from(cell[2]) + f[2],
            ) + rng.vec(0.1);
            frame.lo + u * frame.h
        })
        .collect()
}

/// The typed loop-budget error's (needed, limit, what); any other error fails the test.
fn budget(e: GpuError) -> (u64, u64, String) {
    match e {
        GpuError::LimitExceeded {
            what,
            needed,
            limit,
        } => (needed, limit, what),
        e => panic!("unexpected error: {e}"),
    }
}

/// The CPU reference on the GPU's tetrahedra `tets` (charges `q`, m = `samples`).
fn reference(x: &[DVec3], q: &[f64], samples: u32, tets: &[u32]) -> LatticeDdef {
    let c = config(samples);
    let plan = DdefSolver::plan_for(c.coulomb.method.ddef().unwrap(), x, q).expect("plan");
    let frame = plan.frame(DVec3::ZERO, DVec3::ONE);
    LatticeDdef::with_tets(frame, x, q, 1e-3, tets).expect("cpu on gpu structure")
}

/// Largest |a_i - b_i| over `check`, relative to the largest |b_i| there.
fn worst<T>(a: &[T], b: &[T], check: &Range<usize>, norm: impl Fn(T) -> f64) -> f64
where
    T: Copy + std::ops::Sub<Output = T>,
{
    let scale = check.clone().map(|i| norm(b[i])).fold(0.0, f64::max);
    assert!(scale > 0.0, "reference all zero");
    check
        .clone()
        .map(|i| norm(a[i] - b[i]) / scale)
        .fold(0.0, f64::max)
}

/// The GPU's DDEF forces on `x` (charges 1e-9 each): the typed loop-budget error's
/// (needed, limit, what), or `None` once the forces of the charges `check` matched the
/// CPU reference on the GPU's tetrahedra (or no adapter was found).
fn forces_or_budget_error(
    x: &[DVec3],
    samples: u32,
    check: Range<usize>,
) -> Option<(u64, u64, String)> {
    let (x, q) = (f32_round(x), vec![1e-9; x.len()]);
    let mut g = gpu(&cloud(&x, &q), &config(samples))?;
    let gpu_f = match g.field_forces() {
        Err(e) => return Some(budget(e)),
        Ok((f, _)) => f,
    };
    let s = g.read_ddef_structure().expect("structure").expect("DDEF");
    let mut cpu_f = vec![DVec3::ZERO; x.len()];
    reference(&x, &q, samples, &s.tets)
        .forces_into(Evaluation::Ddef(DdefVariant::Corrected), &mut cpu_f);
    let w = worst(&gpu_f, &cpu_f, &check, DVec3::length);
    assert!(
        w < F32_SUMS,
        "no loop-budget error, so the forces must match the reference: worst {w:.3e} of \
         the largest"
    );
    None
}

/// The GPU's DDEF forces' transpose (`GpuSolver::ddef_forces_vjp`, the adjoint kernels
/// after the forward evaluation) on `x` for a random force cotangent: the typed
/// loop-budget error's (needed, limit, what), or `None` once the position and charge
/// cotangents of the charges `check` matched `LatticeDdef::forces_vjp` on the GPU's
/// tetrahedra (or no adapter was found).
fn vjp_or_budget_error(
    x: &[DVec3],
    samples: u32,
    check: Range<usize>,
) -> Option<(u64, u64, String)> {
    let n = x.len();
    let (x, q) = (f32_round(x), vec![1e-9; n]);
    let zero = TangentDirection {
        dq: None,
        dk: None,
        dqe: &[],
        dxe: &[],
    };
    let options = HeadlessOptions {
        allow_software: true,
    };
    let mut g = match GpuSolver::headless_with_tangents(
        &cloud(&x, &q),
        &config(samples),
        &[zero],
        &options,
    ) {
        Err(GpuError::NoAdapter(why)) => {
            common::skip_no_adapter(&why);
            return None;
        }
        r => r.expect("solver"),
    };
    let mut rng = Rng(17);
    let w: Vec<DVec3> = (0..n).map(|_| f32_round(&[rng.vec(1.0)])[0]).collect();
    let (gx, gq) = match g.ddef_forces_vjp(&w) {
        Err(e) => return Some(budget(e)),
        Ok(v) => v,
    };
    let s = g.read_ddef_structure().expect("structure").expect("DDEF");
    let (mut cx, mut cq) = (vec![DVec3::ZERO; n], vec![0.0; n]);
    reference(&x, &q, samples, &s.tets).forces_vjp(
        Evaluation::Ddef(DdefVariant::Corrected),
        &w,
        &mut cx,
        Some(&mut cq),
    );
    let (wx, wq) = (
        worst(&gx, &cx, &check, DVec3::length),
        worst(&gq, &cq, &check, f64::abs),
    );
    eprintln!("no loop-budget error: x_bar {wx:.2e}, q_bar {wq:.2e} of the largest");
    assert!(
        wx < F32_SUMS && wq < F32_SUMS,
        "no loop-budget error, so the cotangents must match the reference: x_bar {wx:.3e}, \
         q_bar {wq:.3e} of the largest"
    );
    None
}

/// m of the crowded scenes.
const SAMPLES: u32 = 216;

/// 16 targets in one tetrahedron, then 7 clusters of `per` charges in tetrahedra that
/// are all near the targets but not near each other (found from the near stencils of
/// Kuhn type 0): the targets' near walk holds 7 `per` sources (and maybe a corner), a
/// cluster charge's only its own cluster. The targets' range comes with it.
fn gather_scene(per: usize) -> (Vec<DVec3>, Range<usize>) {
    let centre = [2, 2, 2];
    let near: [([i32; 3], usize); 7] = [
        ([2, 1, 2], 0),
        ([-2, -1, -2], 0),
        ([1, 1, -1], 5),
        ([0, -2, -1], 3),
        ([-1, 1, -1], 5),
        ([1, -1, 1], 5),
        ([0, 1, 1], 4),
    ];
    let mut x = corners();
    let targets = x.len()..x.len() + 16;
    x.extend(crowd(SAMPLES, centre, 0, 16, 1));
    for (i, (d, kuhn)) in near.iter().enumerate() {
        let cell = std::array::from_fn(|a| (centre[a] as i32 + d[a]) as u32);
        x.extend(crowd(SAMPLES, cell, *kuhn, per, 2 + i as u64));
    }
    (x, targets)
}

/// 66,000 charges in one tetrahedron (`ddef_rank` would rank each among all of them),
/// and their range.
fn tet_scene() -> (Vec<DVec3>, Range<usize>) {
    let mut x = corners();
    let crowded = x.len()..x.len() + 66_000;
    x.extend(crowd(SAMPLES, [2, 2, 2], 3, 66_000, 9));
    (x, crowded)
}

/// The error of a walk around a cell past the budget: it names the walk, llvmpipe's
/// budget and the remedy, and counts at least the 67,200 sources of the clusters.
fn check_gather_error((needed, limit, what): (u64, u64, String)) {
    eprintln!("{what}: {needed} > {limit}");
    assert!(what.contains("sources around one lattice cell"), "{what}");
    assert!(
        what.contains("65,535") && what.contains("coulomb.samples"),
        "{what}"
    );
    assert!(
        needed >= 67_200 && needed > limit && limit < 65_535,
        "{needed} {limit}"
    );
}

fn check_tet_error((needed, limit, what): (u64, u64, String)) {
    eprintln!("{what}: {needed} > {limit}");
    assert!(
        what.contains("charged particles in one tetrahedron"),
        "{what}"
    );
    assert_eq!(needed, 66_000);
    assert!(limit < 65_535, "{limit}");
}

/// The targets' near walk holds 67,200 sources.
#[test]
fn a_gather_walk_past_a_cpu_adapters_loop_budget_is_a_typed_error() {
    let (x, targets) = gather_scene(9_600);
    if let Some(e) = forces_or_budget_error(&x, SAMPLES, targets) {
        check_gather_error(e);
    }
}

#[test]
fn a_tetrahedron_past_a_cpu_adapters_loop_budget_is_a_typed_error() {
    let (x, crowded) = tet_scene();
    if let Some(e) = forces_or_budget_error(&x, SAMPLES, crowded) {
        check_tet_error(e);
    }
}

/// The adjoint kernels after the same forward evaluation: the typed error (the
/// forward's flags, read with the VJP), rather than cotangents missing the skipped
/// walks' terms. The tetrahedron's crowd also fills its cell's neighbourhood past the
/// gather's budget, so no walk runs: cheap on a CPU adapter.
#[test]
fn the_ddef_vjp_past_a_cpu_adapters_loop_budget_is_a_typed_error() {
    let (x, crowded) = tet_scene();
    if let Some(e) = vjp_or_budget_error(&x, SAMPLES, crowded) {
        check_tet_error(e);
    }
}

/// `grad::evaluate` on the GPU past the budget (66,000 charges in one tetrahedron, one
/// step): the reverse sweep (per-particle charges), the tangents (the charge scale) and
/// the plain loss each read the world records with their results, so on a CPU adapter
/// each is the typed error, never a gradient from skipped walks; on a hardware GPU they
/// run.
#[test]
fn gpu_gradients_past_a_cpu_adapters_loop_budget_are_a_typed_error() {
    let Some(adapter) = common::adapter() else {
        return;
    };
    let cpu = adapter.get_info().device_type == wgpu::DeviceType::Cpu;
    let (x, _) = tet_scene();
    let (x, q) = (f32_round(&x), vec![1e-9; x.len()]);
    let system = cloud(&x, &q);
    let config = config(SAMPLES);
    let targets = [Target {
        step: 1,
        positions: x.clone(),
    }];
    for (mode, param, gradient) in [
        (GradMode::Adjoint, Param::Charges, true),
        (GradMode::Forward, Param::ChargeScale, true),
        (GradMode::Forward, Param::ChargeScale, false),
    ] {
        let set = ParamSet::new(&system, &config, &[param]).unwrap();
        let options = GradOptions {
            mode,
            backend: GradBackend::Gpu {
                allow_software: true,
            },
            ..GradOptions::default()
        };
        let what = format!("{mode:?} {param:?} gradient {gradient}");
        match evaluate(&set, &set.initial(), &targets, &options, gradient, false) {
            Err(GradError::Gpu(e)) if cpu => check_tet_error(budget(e)),
            Err(e) => panic!("{what}: {e}"),
            Ok(_) if cpu => panic!("{what}: no loop-budget error on a CPU adapter"),
            Ok(r) => assert!(r.loss.is_finite(), "{what}: loss {}", r.loss),
        }
    }
}

/// A batch of four DDEF worlds, worlds 1 and 3 each with 66,000 charges in one tetrahedron
/// (0 and 2: the cube's corners alone): after a step, reading the states and the
/// energies is the typed error, and it names both crowded worlds, each with its walk and
/// count, and neither of the others; its needed and limit are world 1's. On a hardware
/// GPU the batch runs.
#[test]
fn a_batch_names_every_world_past_a_cpu_adapters_loop_budget() {
    let Some(adapter) = common::adapter() else {
        return;
    };
    let cpu = adapter.get_info().device_type == wgpu::DeviceType::Cpu;
    let plain = f32_round(&corners());
    let crowded = f32_round(&tet_scene().0);
    let systems = [
        cloud(&plain, &[1e-9; 8]),
        cloud(&crowded, &vec![1e-9; crowded.len()]),
        cloud(&plain, &[1e-9; 8]),
        cloud(&crowded, &vec![1e-9; crowded.len()]),
    ];
    let config = config(SAMPLES);
    let worlds: Vec<_> = systems.iter().map(|s| (s, &config)).collect();
    let options = HeadlessOptions {
        allow_software: true,
    };
    let mut batch = match GpuWorlds::headless(&worlds, &options) {
        Err(GpuError::NoAdapter(why)) => return common::skip_no_adapter(&why),
        r => r.expect("batch"),
    };
    batch.advance(1).expect("step");
    for (read, result) in [
        ("states", batch.read_states().map(|_| ())),
        ("energies", batch.read_energies().map(|_| ())),
    ] {
        match result {
            Err(e) if cpu => {
                let (needed, limit, what) = budget(e);
                eprintln!("{read}: {what}");
                assert!(what.contains("2 world(s)"), "{read}: {what}");
                for w in [1, 3] {
                    let named = format!("world {w}: charged particles in one tetrahedron, 66000 >");
                    assert!(what.contains(&named), "{read}: {named:?} missing: {what}");
                }
                assert!(
                    !what.contains("world 0") && !what.contains("world 2"),
                    "{what}"
                );
                assert_eq!(needed, 66_000, "{read}");
                assert!(limit < 65_535, "{read}: {limit}");
            }
            Err(e) => panic!("{read}: {e}"),
            Ok(()) if cpu => panic!("{read}: no loop-budget error on a CPU adapter"),
            Ok(()) => {}
        }
    }
}
