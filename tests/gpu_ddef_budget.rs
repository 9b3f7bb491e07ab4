//! The device-resident DDEF past a CPU adapter's loop budget. llvmpipe (lavapipe) ends
//! an invocation's loops after 65,535 iterations in all, without an error; `ddef_rank`
//! walks every charge of its tetrahedron and `ddef_gather` the sources around its cell,
//! so crowded charges with a small m could lose terms silently. Each test builds such a
//! set and requires either the typed error that names the count and the limit, or (on a
//! hardware GPU, which has no such budget) forces that match the f64 reference.
//!
//! Tolerance: the forces compared are those of the charges whose walk passes the budget,
//! relative to their own largest: their sums are over tens of thousands of sources of one
//! sign, so f32 rounding stays near 1e-5 (`F32_SUMS` = 1e-4, as in `tests/gpu_ddef.rs`),
//! while a cut walk drops thousands of them (a few percent at least).

mod common;

use common::gpu;
use glam::DVec3;
use msc::config::{
    Config, CoulombConfig, CoulombMethod, DdefConfig, DdefSamples, DdefVariant, Integrator,
};
use msc::ddef::plan::ORDERS;
use msc::ddef::{DdefSolver, Evaluation, LatticeDdef};
use msc::gpu::GpuError;
use msc::model::{System, SystemDesc};

const F32_SUMS: f64 = 1e-4;

/// The unit cube's corners: they fix the box whatever lies inside.
fn corners() -> Vec<DVec3> {
    (0..8)
        .map(|c| DVec3::new(f64::from(c & 1), f64::from((c >> 1) & 1), f64::from(c >> 2)))
        .collect()
}

fn config(samples: u32) -> Config {
    Config {
        integrator: Integrator::SymplecticEuler,
        dt: 1e-3,
        gravity: DVec3::ZERO,
        coulomb: CoulombConfig {
            method: CoulombMethod::Ddef(DdefConfig {
                samples: DdefSamples::Count(samples),
                variant: DdefVariant::Corrected,
                ..Default::default()
            }),
            softening: 1e-3,
        },
        ..Default::default()
    }
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

/// The GPU's DDEF forces on `x` (charges 1e-9 each): the typed loop-budget error's
/// (needed, limit, what), or `None` once the forces of the charges `check` matched the
/// CPU reference on the GPU's tetrahedra (or no adapter was found).
fn forces_or_budget_error(
    x: &[DVec3],
    samples: u32,
    check: std::ops::Range<usize>,
) -> Option<(u64, u64, String)> {
    let n = x.len();
    let x: Vec<DVec3> = x.iter().map(|p| p.as_vec3().as_dvec3()).collect();
    let q = vec![1e-9; n];
    let system = System::new(SystemDesc {
        positions: x.clone(),
        velocities: vec![DVec3::ZERO; n],
        masses: vec![1.0; n],
        charges: q.clone(),
        pinned: vec![false; n],
        springs: Vec::new(),
        faces: Vec::new(),
    })
    .expect("system");
    let config = config(samples);
    let mut g = gpu(&system, &config)?;
    let gpu_f = match g.field_forces() {
        Err(GpuError::LimitExceeded {
            what,
            needed,
            limit,
        }) => return Some((needed, limit, what)),
        Err(e) => panic!("unexpected error: {e}"),
        Ok((f, _)) => f,
    };
    let s = g.read_ddef_structure().expect("structure").expect("DDEF");
    let d = config.coulomb.method.ddef().unwrap();
    let plan = DdefSolver::plan_for(d, &x, &q).expect("plan");
    let frame = plan.frame(DVec3::ZERO, DVec3::ONE);
    let cpu = LatticeDdef::with_tets(frame, &x, &q, 1e-3, &s.tets).expect("cpu on gpu structure");
    let mut cpu_f = vec![DVec3::ZERO; n];
    cpu.forces_into(Evaluation::Ddef(DdefVariant::Corrected), &mut cpu_f);
    let scale = check.clone().map(|i| cpu_f[i].length()).fold(0.0, f64::max);
    let worst = check
        .map(|i| (gpu_f[i] - cpu_f[i]).length() / scale)
        .fold(0.0, f64::max);
    assert!(
        worst < F32_SUMS,
        "no loop-budget error, so the forces must match the reference: worst {worst:.3e} \
         of the largest"
    );
    None
}

/// 7 clusters of 9,600 charges in tetrahedra that are all near the 16 targets of one
/// tetrahedron but not near each other (found from the near stencils of Kuhn type 0): the
/// targets' near walk holds 67,200 sources, a cluster charge's only its own cluster.
#[test]
fn a_gather_walk_past_a_cpu_adapters_loop_budget_is_a_typed_error() {
    let samples = 216;
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
    x.extend(crowd(samples, centre, 0, 16, 1));
    for (i, (d, kuhn)) in near.iter().enumerate() {
        let cell = std::array::from_fn(|a| (centre[a] as i32 + d[a]) as u32);
        x.extend(crowd(samples, cell, *kuhn, 9_600, 2 + i as u64));
    }
    let Some((needed, limit, what)) = forces_or_budget_error(&x, samples, targets) else {
        return;
    };
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

/// 66,000 charges in one tetrahedron: `ddef_rank` would rank each among all of them.
#[test]
fn a_tetrahedron_past_a_cpu_adapters_loop_budget_is_a_typed_error() {
    let samples = 216;
    let mut x = corners();
    let crowded = x.len()..x.len() + 66_000;
    x.extend(crowd(samples, [2, 2, 2], 3, 66_000, 9));
    let Some((needed, limit, what)) = forces_or_budget_error(&x, samples, crowded) else {
        return;
    };
    eprintln!("{what}: {needed} > {limit}");
    assert!(
        what.contains("charged particles in one tetrahedron"),
        "{what}"
    );
    assert_eq!(needed, 66_000);
    assert!(limit < 65_535, "{limit}");
}
