//! The DDEF far field's and near gathers' staged paths (sources through workgroup memory,
//! one site or target per invocation: what hardware GPUs run) against their direct ones
//! (what a CPU adapter runs by default: several sites or targets per invocation) on the
//! same device: both add the same terms in the same order, so the forces (`ddef_far`,
//! `ddef_gather`), the
//! tangents (`ddef_gather_tangent`) and the cotangents (`ddef_gather_adjoint`,
//! `ddef_source_adjoint`) must agree bit for bit, and so must the forces of every shape of
//! `ddef_gather` (`DdefGather`: lanes per workgroup, tiles per neighbour cell or packed)
//! and of `ddef_far` (`DdefFar`: staged, or direct with 1, 2 or 4 sites per invocation).
//! `GpuSolver::headless_tuned` keeps the staged path on a CPU adapter (on a hardware GPU
//! both solvers run it). Skips when wgpu finds no adapter, and fails instead when
//! `MSC_REQUIRE_GPU=1`.

mod common;

use common::{cloud, ddef_cloud_config as config, skip_no_adapter, Rng};
use glam::DVec3;
use msc::config::{Config, DdefSamples, DdefVariant};
use msc::ddef::error_study::random_points;
use msc::gpu::{
    DdefFar, DdefGather, GatherChoice, GpuError, GpuSolver, HeadlessOptions, TangentDirection,
    Tuning,
};
use msc::model::System;

/// The GPU's DDEF forces, the field's tangent along `dx` (with the charges' tangents
/// `dq`) and the forces' VJP for cotangent `dx` (position and charge cotangents), staged
/// in the kernel shapes of `shape` or (None) not; None without an adapter.
type Results = (Vec<DVec3>, Vec<DVec3>, Vec<DVec3>, Vec<f64>);
fn results(
    system: &System,
    config: &Config,
    dx: &[DVec3],
    dq: &[f64],
    shape: Option<Tuning>,
) -> Option<Results> {
    let along = TangentDirection {
        dq: Some(dq),
        dk: None,
        dqe: &[],
        dxe: &[],
    };
    let options = HeadlessOptions {
        allow_software: true,
    };
    let tuning = Tuning {
        staged_on_cpu: shape.is_some(),
        ..shape.unwrap_or_default()
    };
    let mut g = match GpuSolver::headless_tuned(system, config, Some(&[along]), &options, tuning) {
        Ok(g) => g,
        Err(GpuError::NoAdapter(why)) => {
            skip_no_adapter(&why);
            return None;
        }
        Err(e) => panic!("building the GPU solver failed: {e}"),
    };
    let forces = g.field_forces().expect("field forces").0;
    let jvp = g.ddef_forces_jvp(dx).expect("jvp");
    let (xb, qb) = g.ddef_forces_vjp(dx).expect("vjp");
    Some((forces, jvp, xb, qb))
}

#[test]
fn the_staged_gather_gives_the_unstaged_ones_bits() {
    let mut rng = Rng(5);
    let mut q = |n: usize| -> Vec<f64> {
        (0..n)
            .map(|_| 1e-6 * rng.range(0.5, 1.5) * if rng.next() < 0.5 { -1.0 } else { 1.0 })
            .collect()
    };
    // Spread charges (one tile per neighbour cell, cells of one work item; 4 far chunks,
    // the last one ending inside a block of 32 sources), and crowded cells: 4,000 charges
    // at m = 8, a few cells of 500 or more (several tiles per neighbour cell, a tile
    // boundary inside a tetrahedron's range, several work items per cell). Neither
    // lattice's site count is a multiple of the far field's sites per invocation. The
    // spread charges have no softening: a target's pull from its own source would be
    // NaN there (with softening it is exactly 0), so every walk's own-source test counts.
    let spread = random_points(DVec3::ZERO, DVec3::ONE, 3001, 7);
    let crowded = random_points(DVec3::ZERO, DVec3::ONE, 4000, 9);
    let cases = [
        ("spread", cloud(&spread, &q(spread.len())), 400, 0.0),
        ("crowded", cloud(&crowded, &q(crowded.len())), 8, 1e-2),
    ];
    for (name, system, m, eps) in &cases {
        let n = system.len();
        let mut r = Rng(11);
        let dx: Vec<DVec3> = (0..n).map(|_| r.vec(1.0)).collect();
        let dq = q(n);
        for variant in [DdefVariant::Paper, DdefVariant::Corrected] {
            let c = config(DdefSamples::Count(*m), variant, *eps);
            let Some(plain) = results(system, &c, &dx, &dq, None) else {
                return;
            };
            // The default shape here; `Auto` picks one of the shapes compared below.
            let default = Tuning {
                ddef_gather: GatherChoice::Fixed(DdefGather::default()),
                ..Tuning::default()
            };
            let staged = results(system, &c, &dx, &dq, Some(default)).expect("adapter");
            assert!(
                plain.0.iter().any(|f| *f != DVec3::ZERO),
                "{name}: no forces"
            );
            assert!(
                plain.1.iter().any(|f| *f != DVec3::ZERO),
                "{name}: no tangents"
            );
            assert!(plain.3.iter().any(|f| *f != 0.0), "{name}: no cotangents");
            // Every kind compared before failing, so a failure names each kernel's.
            let count = |a: &[DVec3], b: &[DVec3]| a.iter().zip(b).filter(|(a, b)| a != b).count();
            let differ = [
                ("forces (ddef_far, ddef_gather)", count(&plain.0, &staged.0)),
                ("tangents (ddef_gather_tangent)", count(&plain.1, &staged.1)),
                (
                    "position cotangents (ddef_*_adjoint)",
                    count(&plain.2, &staged.2),
                ),
                (
                    "charge cotangents (ddef_*_adjoint)",
                    plain
                        .3
                        .iter()
                        .zip(&staged.3)
                        .filter(|(a, b)| a != b)
                        .count(),
                ),
            ];
            let bad: Vec<_> = differ.iter().filter(|(_, n)| *n > 0).collect();
            assert!(bad.is_empty(), "{name} {variant:?}: differ {bad:?}");
            // Every other shape of ddef_gather and of ddef_far (tunings only they read):
            // their forces.
            let gathers = DdefGather::all()
                .filter(|s| *s != DdefGather::default())
                .map(|g| Tuning {
                    ddef_gather: GatherChoice::Fixed(g),
                    ..default
                });
            let fars = DdefFar::ALL[1..].iter().map(|&ddef_far| Tuning {
                ddef_far,
                ..default
            });
            let differ: Vec<(String, usize)> = gathers
                .chain(fars)
                .map(|t| {
                    let f = results(system, &c, &dx, &dq, Some(t)).expect("adapter").0;
                    (
                        format!("{} {}", t.ddef_gather, t.ddef_far),
                        count(&plain.0, &f),
                    )
                })
                .filter(|(_, n)| *n > 0)
                .collect();
            assert!(
                differ.is_empty(),
                "{name} {variant:?}: forces differ {differ:?}"
            );
        }
    }
}

/// `GatherChoice::Auto` gives cells of few charges 128 lanes and crowded ones 256
/// (`DdefGather::for_load`), from the charges' cells at set-up; a fixed shape is kept.
#[test]
fn the_automatic_gather_shape_follows_the_cells_load() {
    let options = HeadlessOptions {
        allow_software: true,
    };
    let q = vec![1e-6; 4000];
    let points = random_points(DVec3::ZERO, DVec3::ONE, 4000, 9);
    let system = cloud(&points, &q);
    let shape = |m: u32, ddef_gather: GatherChoice| {
        let c = config(DdefSamples::Count(m), DdefVariant::Corrected, 1e-2);
        let tuning = Tuning {
            ddef_gather,
            staged_on_cpu: true,
            ..Tuning::default()
        };
        match GpuSolver::headless_tuned(&system, &c, None, &options, tuning) {
            Ok(g) => Some(g.ddef_gather().expect("a DDEF solver").to_string()),
            Err(GpuError::NoAdapter(why)) => {
                skip_no_adapter(&why);
                None
            }
            Err(e) => panic!("building the GPU solver failed: {e}"),
        }
    };
    // About 10 charges a cell at m = 400; about 500 at m = 8 (every cell over 128).
    let Some(spread) = shape(400, GatherChoice::Auto) else {
        return;
    };
    assert_eq!(spread, "cell/128/unrolled");
    assert_eq!(
        shape(8, GatherChoice::Auto).as_deref(),
        Some("cell/256/unrolled")
    );
    let packed: DdefGather = "packed/64".parse().expect("a shape");
    assert_eq!(shape(8, packed.into()).as_deref(), Some("packed/64"));
}
