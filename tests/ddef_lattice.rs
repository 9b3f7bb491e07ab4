//! The lattice DDEF policy both backends follow (`msc::ddef::plan`, `stencil`,
//! `lattice_field`): the stencil tables against Algorithm 1's definitions evaluated by
//! brute force, the evaluation against the tetrahedralization-based implementation on the
//! same lattice, the box policy (quantized, piecewise constant, drift and re-plan),
//! accuracy against exact all-pairs, and degenerate charge sets.

use glam::DVec3;
use msc::config::{DdefConfig, DdefSamples, DdefVariant};
use msc::cpu::forces::coulomb_forces;
use msc::ddef::error_study::{random_points, ErrorStats};
use msc::ddef::plan::{bounds, LatticePlan};
use msc::ddef::stencil::{slot_offsets, valid_slots};
use msc::ddef::{Ddef, DdefSolver, Evaluation, Grid, LatticeDdef};
use std::collections::BTreeSet;
use std::sync::Arc;

const Q: f64 = 8e-6;
const CORRECTED: Evaluation = Evaluation::Ddef(DdefVariant::Corrected);
const PAPER: Evaluation = Evaluation::Ddef(DdefVariant::Paper);

fn rel_diff(a: &[DVec3], b: &[DVec3]) -> f64 {
    let scale = b.iter().map(|v| v.length()).fold(0.0, f64::max);
    let d = a
        .iter()
        .zip(b)
        .map(|(x, y)| (*x - *y).length())
        .fold(0.0, f64::max);
    d / scale.max(f64::MIN_POSITIVE)
}

/// Charges on a torus surface (a crowded, curved set) of about `n` points.
fn torus_points(n: usize) -> Vec<DVec3> {
    let rings = (n as f64 / 20.0).round() as usize;
    let mut out = Vec::new();
    for i in 0..rings {
        for j in 0..20 {
            let (u, v) = (
                i as f64 / rings as f64 * std::f64::consts::TAU,
                j as f64 / 20.0 * std::f64::consts::TAU,
            );
            let r = 1.0 + 0.3 * v.cos();
            out.push(DVec3::new(r * u.cos(), r * u.sin(), 0.3 * v.sin()));
        }
    }
    out
}

/// The 2000 charges of `msc ddef-error torus --set mesh.rings=100 --set mesh.sides=20`.
fn scene_torus() -> Vec<DVec3> {
    let set = ["mesh.rings=100".to_string(), "mesh.sides=20".to_string()];
    let sc = msc::scene::load("torus", &set).unwrap();
    assert_eq!(sc.system.len(), 2000);
    sc.system.positions().to_vec()
}

fn lattice_of(x: &[DVec3], q: &[f64], m: u32, eps: f64) -> (LatticePlan, LatticeDdef) {
    let (lo, hi) = bounds((0..x.len()).filter(|&i| q[i] != 0.0).map(|i| (i, x[i]))).unwrap();
    let plan = LatticePlan::new(lo, hi, m).unwrap();
    let l = LatticeDdef::new(&plan, x, q, eps).unwrap();
    (plan, l)
}

/// Points moved by up to 1e-6 (seeded): off the lattice planes a symmetric mesh has
/// points on, where either neighbouring cell holds them and the two codes may differ.
fn jittered(x: Vec<DVec3>) -> Vec<DVec3> {
    let j = random_points(DVec3::splat(-1e-6), DVec3::splat(1e-6), x.len(), 99);
    x.into_iter().zip(j).map(|(p, d)| p + d).collect()
}

/// N(tau) by definition: the slot sites of the tetrahedron inside the lattice.
fn near_sites(l: &LatticeDdef, tet: u32) -> BTreeSet<u32> {
    let f = l.frame();
    let (cell, t) = f.tet_cell(tet);
    let valid = valid_slots(f.dims, cell, t);
    slot_offsets(t)
        .iter()
        .enumerate()
        .filter(|(k, _)| valid & (1 << k) != 0)
        .map(|(_, o)| f.site_id([0, 1, 2].map(|a| (cell[a] as i32 + o[a]) as u32)))
        .collect()
}

/// M_j and S(tau) with its masks, by brute force over the sources, equal the stencil
/// tables' ranges.
#[test]
fn stencils_give_algorithm_1s_sets() {
    for (name, x) in [
        ("random", random_points(DVec3::ZERO, DVec3::ONE, 600, 3)),
        ("torus", torus_points(600)),
    ] {
        let q = vec![Q; x.len()];
        let (_, l) = lattice_of(&x, &q, 150, 0.0);
        let ns: Vec<BTreeSet<u32>> = l.located().iter().map(|p| near_sites(&l, p.tet)).collect();
        let rank_of = |s: usize| {
            l.sorted_sources()
                .iter()
                .position(|&o| o as usize == s)
                .unwrap() as u32
        };
        let sites = l.frame().dims.iter().product::<u32>();
        for j in 0..sites {
            let expect: BTreeSet<u32> = (0..x.len())
                .filter(|&s| ns[s].contains(&j))
                .map(rank_of)
                .collect();
            let got: BTreeSet<u32> = l
                .site_ranges(j)
                .into_iter()
                .flat_map(|(b, e)| b..e)
                .collect();
            assert_eq!(got, expect, "{name}: M_{j}");
        }
        let occupied: BTreeSet<u32> = l.located().iter().map(|p| p.tet).collect();
        for &tet in occupied.iter().step_by(3) {
            let n_tau = near_sites(&l, tet);
            let verts = l.tet_sites(tet);
            let mut expect = BTreeSet::new();
            for (s, sites) in ns.iter().enumerate() {
                if sites.is_disjoint(&n_tau) {
                    continue;
                }
                let mask = (0..4)
                    .filter(|&v| !sites.contains(&verts[v]))
                    .map(|v| 1u32 << v)
                    .sum::<u32>();
                expect.insert((rank_of(s), mask));
            }
            let got: BTreeSet<(u32, u32)> = l
                .near_ranges(tet)
                .into_iter()
                .flat_map(|r| (r.begin..r.end).map(move |k| (k, r.mask)))
                .collect();
            assert_eq!(got, expect, "{name}: S({tet})");
        }
        // The counting sort: each tetrahedron's range holds its sources in particle order.
        let starts = l.tet_starts();
        for t in 0..starts.len() - 1 {
            let slice = &l.sorted_sources()[starts[t] as usize..starts[t + 1] as usize];
            assert!(slice.windows(2).all(|w| w[0] < w[1]));
            assert!(slice
                .iter()
                .all(|&s| l.located()[s as usize].tet == t as u32));
        }
    }
}

/// On the same lattice (box and sites per axis), the stencil evaluation equals the
/// tetrahedralization-based one (`Ddef` on `Grid::new_lattice`) for every scheme.
#[test]
fn the_stencil_evaluation_equals_the_tetrahedralization_based_one() {
    for (name, x, eps) in [
        (
            "random",
            random_points(DVec3::ZERO, DVec3::ONE, 1500, 5),
            0.0,
        ),
        ("torus", jittered(torus_points(1500)), 0.01),
    ] {
        let q: Vec<f64> = (0..x.len())
            .map(|i| if i % 4 == 0 { -Q } else { Q })
            .collect();
        let (plan, l) = lattice_of(&x, &q, 400, eps);
        let f = l.frame();
        let grid = Grid::new_lattice(f.lo, f.hi, plan.samples as usize).unwrap();
        assert_eq!(
            grid.lattice().unwrap().dims(),
            plan.dims.map(|r| r as usize),
            "{name}: same sites per axis"
        );
        let old = Ddef::on_grid(Arc::new(grid), &x, &q, eps, None).unwrap();
        for eval in [
            CORRECTED,
            PAPER,
            Evaluation::TextNearSet,
            Evaluation::NearOnly,
        ] {
            let d = rel_diff(&l.fields_at_sources(eval), &old.fields_at_sources(eval));
            assert!(d < 1e-12, "{name} {eval:?}: {d:e}");
        }
        let pts = random_points(f.lo, f.hi, 200, 8);
        let d = rel_diff(
            &l.fields_at(&pts, CORRECTED).unwrap(),
            &old.fields_at(&pts, CORRECTED).unwrap(),
        );
        assert!(d < 1e-12, "{name} at points: {d:e}");
    }
}

/// Accuracy against exact all-pairs within 10% of the previous lattice DDEF at the same m
/// (its mean relative force errors, measured with `msc ddef-error`: 0.0094 for 2000 random
/// charges at m = 1000, 0.0348 on a 2000-charge torus at m = 1000).
#[test]
fn accuracy_stays_within_ten_percent_of_the_previous_lattice() {
    let n = 2000;
    for (name, x, bound) in [
        (
            "random",
            random_points(DVec3::ZERO, DVec3::ONE, n, 1),
            1.1 * 0.0094,
        ),
        ("torus", scene_torus(), 1.1 * 0.0348),
    ] {
        let q = vec![Q; x.len()];
        let (_, l) = lattice_of(&x, &q, 1000, 0.0);
        let mut f = vec![DVec3::ZERO; x.len()];
        l.forces_into(CORRECTED, &mut f);
        let s = ErrorStats::of(&f, &coulomb_forces(&x, &q, 0.0));
        assert!(s.mean <= bound, "{name}: mean {} > {bound}", s.mean);
        // The far field matters.
        l.forces_into(Evaluation::NearOnly, &mut f);
        let near = ErrorStats::of(&f, &coulomb_forces(&x, &q, 0.0));
        assert!(near.mean > 5.0 * s.mean, "{name}: {near:?}");
    }
}

/// The box is the charges' box rounded outward to quanta: small moves keep it (and the
/// lattice), every charge stays inside; the solver's plan follows `samples = auto`, and a
/// frame that drifted makes the solver re-plan when asked (between steps), not before.
#[test]
fn the_box_is_piecewise_constant_and_the_solver_replans_on_drift() {
    let x = random_points(DVec3::ZERO, DVec3::new(2.0, 1.0, 1.0), 900, 2);
    let q = vec![Q; 900];
    let (plan, l) = lattice_of(&x, &q, 500, 0.0);
    let moved: Vec<DVec3> = x.iter().map(|p| *p * (1.0 + 1e-6)).collect();
    let (_, l2) = {
        let l2 = LatticeDdef::new(&plan, &moved, &q, 0.0).unwrap();
        (plan, l2)
    };
    assert_eq!(l.frame(), l2.frame());
    assert!(x.iter().all(|&p| l.frame().contains(p)));
    let config = DdefConfig::default();
    assert_eq!(config.samples, DdefSamples::Auto);
    let mut solver = DdefSolver::new(config, 0.0);
    let mut out = vec![DVec3::ZERO; 900];
    solver.forces_into(&x, &q, &mut out).unwrap();
    let first = *solver.plan().unwrap();
    assert_eq!(first.samples, DdefSamples::Auto.resolve(900));
    assert!(!solver.drifted());
    assert!(!solver.replan().unwrap());
    // Stretched 3x along z: the aspect drifted; the plan stays until `replan`.
    let stretched: Vec<DVec3> = x.iter().map(|p| DVec3::new(p.x, p.y, 3.0 * p.z)).collect();
    solver.forces_into(&stretched, &q, &mut out).unwrap();
    assert!(solver.drifted());
    assert_eq!(*solver.plan().unwrap(), first);
    assert!(solver.replan().unwrap());
    let second = *solver.plan().unwrap();
    assert!(second.dims[2] > first.dims[2], "{first:?} -> {second:?}");
    assert_eq!(solver.rebuilds(), 2);
    solver.forces_into(&stretched, &q, &mut out).unwrap();
    assert!(!solver.drifted());
    // The forces are the plan's: equal to a fresh evaluation under it.
    let fresh = LatticeDdef::new(&second, &stretched, &q, 0.0).unwrap();
    let mut f = vec![DVec3::ZERO; 900];
    fresh.forces_into(CORRECTED, &mut f);
    assert_eq!(f, out);
}

/// m = 0: a lattice of one cell (8 sites, 6 tetrahedra) where every source is near every
/// target, so `corrected` is exact.
#[test]
fn one_cell_is_exact() {
    let x = random_points(DVec3::ZERO, DVec3::ONE, 30, 4);
    let q: Vec<f64> = (0..30)
        .map(|i| if i % 2 == 0 { Q } else { -2.0 * Q })
        .collect();
    let config = DdefConfig {
        samples: DdefSamples::Count(0),
        ..Default::default()
    };
    let mut solver = DdefSolver::new(config, 0.0);
    let mut out = vec![DVec3::ZERO; 30];
    solver.forces_into(&x, &q, &mut out).unwrap();
    assert!(rel_diff(&out, &coulomb_forces(&x, &q, 0.0)) < 1e-12);
}

/// Coplanar and collinear charges lie on a middle lattice plane (line) of their thin axes:
/// their DDEF field has no component off the plane (line), as the exact one, so it never
/// pushes them off it. Nearly degenerate sets stay about as accurate as a volume.
#[test]
fn degenerate_sets_keep_their_plane_and_line() {
    let n = 1500;
    let cube = random_points(DVec3::ZERO, DVec3::ONE, n, 12);
    let q: Vec<f64> = (0..n).map(|i| if i % 5 == 0 { -Q } else { Q }).collect();
    let error = |x: &[DVec3]| {
        let (_, l) = lattice_of(x, &q, DdefSamples::Auto.resolve(n), 0.0);
        let mut f = vec![DVec3::ZERO; n];
        l.forces_into(CORRECTED, &mut f);
        (f.clone(), ErrorStats::of(&f, &coulomb_forces(x, &q, 0.0)))
    };
    let (_, volume) = error(&cube);
    // An exact plane (z = 0.375) and line (y = 0.25, z = 0.625), heights that are whole
    // numbers of the fine quantum, and a plane at a height that is not.
    for (name, normal) in [
        ("plane", [false, false, true]),
        ("line", [false, true, true]),
    ] {
        for at in [[0.5, 0.25, 0.375], [0.1, 0.123_456_789, 0.876_543_21]] {
            let x: Vec<DVec3> = cube
                .iter()
                .map(|p| DVec3::from_array([0, 1, 2].map(|a| if normal[a] { at[a] } else { p[a] })))
                .collect();
            let (f, s) = error(&x);
            let fmax = f.iter().map(|v| v.length()).fold(0.0, f64::max);
            let off = f
                .iter()
                .map(|v| {
                    (0..3)
                        .filter(|&a| normal[a])
                        .map(|a| v[a].abs())
                        .fold(0.0, f64::max)
                })
                .fold(0.0, f64::max);
            let exact_height = at == [0.5, 0.25, 0.375];
            // Off a whole number of fine quanta the plane is up to half of one (Q / 2048)
            // off its lattice plane: a field off the plane that small (2e-9 measured).
            let bound = if exact_height { 0.0 } else { 1e-7 * fmax };
            assert!(
                off <= bound,
                "{name} at {at:?}: off-plane {off:e} of {fmax:e}"
            );
            assert!(
                s.mean <= 2.0 * volume.mean,
                "{name}: {s:?} vs volume {volume:?}"
            );
        }
    }
    // Nearly coplanar (1e-3 thick): as accurate as a volume, give or take a factor 2.
    let x: Vec<DVec3> = cube
        .iter()
        .map(|p| DVec3::new(p.x, p.y, 0.5 + 1e-3 * p.z))
        .collect();
    let (_, s) = error(&x);
    assert!(s.mean <= 2.0 * volume.mean, "{s:?} vs {volume:?}");
}

/// A charged cloth that stays in its plane: with the thin axis handled, its DDEF
/// trajectory follows the exact one as closely as a volume's does (the previous policy,
/// whose lattice planes missed the cloth at small m, was off by 62 times the cloth's
/// displacement here).
#[test]
fn a_flat_charged_cloth_follows_the_exact_trajectory() {
    let set = [
        "material.charge=2e-8",
        "gravity=[0,0,0]",
        "coulomb.method=\"all_pairs\"",
        "mesh.resolution=[20, 20]",
    ]
    .map(String::from);
    let sc = msc::scene::load("cloth", &set).unwrap();
    let run = |method| {
        let mut config = sc.config.clone();
        config.coulomb.method = method;
        let mut sim = msc::cpu::CpuSimulation::new(&sc.system, &config).unwrap();
        for _ in 0..50 {
            sim.step_once();
        }
        sim.current().x.clone()
    };
    let exact = run(msc::config::CoulombMethod::AllPairs);
    let ddef = run(msc::config::CoulombMethod::Ddef(DdefConfig::default()));
    let x0 = sc.system.positions();
    let mean = |a: &[DVec3], b: &[DVec3]| {
        a.iter()
            .zip(b)
            .map(|(p, q)| (*p - *q).length())
            .sum::<f64>()
            / a.len() as f64
    };
    let ratio = mean(&ddef, &exact) / mean(&exact, x0);
    assert!(
        ddef.iter().all(|p| p.z == x0[0].z),
        "the cloth stays in its plane"
    );
    assert!(ratio < 0.1, "trajectory error / displacement {ratio}");
}
