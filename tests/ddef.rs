//! DDEF (the paper's Section 3.3, Algorithm 1): the tetrahedralization, the near/far
//! bookkeeping, exactness where the method implies it, accuracy against the exact
//! all-pairs sum (Table 1), degenerate inputs, and the integrator wiring.

use glam::DVec3;
use msc::config::{
    Config, CoulombConfig, CoulombMethod, DdefConfig, DdefGrid, DdefSamples, DdefVariant,
    Integrator, SolverConfig,
};
use msc::cpu::forces::coulomb_forces;
use msc::cpu::CpuSimulation;
use msc::ddef::delaunay::{orient, NONE};
use msc::ddef::error_study::{random_points, ErrorStats};
use msc::ddef::solver::REUSE_MARGIN;
use msc::ddef::{
    domain_box, exact_fields_at, Ddef, DdefError, DdefSolver, Evaluation, Grid, Tetrahedralization,
};
use msc::model::{Spring, System, SystemDesc};
use msc::Simulator;
use std::sync::Arc;

const Q: f64 = 8e-6;
const PAPER: Evaluation = Evaluation::Ddef(DdefVariant::Paper);
const CORRECTED: Evaluation = Evaluation::Ddef(DdefVariant::Corrected);

fn unit_random(n: usize, seed: u64) -> Vec<DVec3> {
    random_points(DVec3::ZERO, DVec3::ONE, n, seed)
}

/// Largest |a - b| over the largest |b|: the relative agreement of two force sets.
fn rel_diff(a: &[DVec3], b: &[DVec3]) -> f64 {
    let scale = b.iter().map(|v| v.length()).fold(0.0, f64::max);
    let d = a
        .iter()
        .zip(b)
        .map(|(x, y)| (*x - *y).length())
        .fold(0.0, f64::max);
    if scale > 0.0 {
        d / scale
    } else {
        d
    }
}

fn tet_volume(tri: &Tetrahedralization, t: usize) -> f64 {
    let [a, b, c, d] = tri.tets()[t].map(|i| tri.points()[i as usize]);
    // robust's orient3d is 6 times the signed volume.
    orient(a, b, c, d) / 6.0
}

fn check_tetrahedralization(tri: &Tetrahedralization) {
    tri.check().expect("valid Delaunay tetrahedralization");
    let (lo, hi) = tri.bounds();
    let box_vol = (hi - lo).x * (hi - lo).y * (hi - lo).z;
    let vol: f64 = (0..tri.tets().len()).map(|t| tet_volume(tri, t)).sum();
    assert!(
        (vol - box_vol).abs() <= 1e-9 * box_vol,
        "tetrahedra fill the box: {vol} vs {box_vol}"
    );
    for i in 0..tri.points().len() {
        assert_ne!(
            tri.point_tet(i),
            NONE,
            "site {i} is in the tetrahedralization"
        );
    }
}

#[test]
fn halton_delaunay_is_valid_and_fills_the_box() {
    let (lo, hi) = (DVec3::new(-1.0, 0.5, 2.0), DVec3::new(3.0, 1.0, 2.2));
    let grid = Grid::new(lo, hi, 600).unwrap();
    assert_eq!(grid.sites().len(), 608);
    check_tetrahedralization(grid.tetrahedralization());
    // Euler: a Delaunay tetrahedralization of v points has about 6.5 v tetrahedra.
    let t = grid.tetrahedralization().tets().len();
    assert!(t > 4 * 608 && t < 8 * 608, "{t} tetrahedra");
}

#[test]
fn delaunay_handles_cospherical_and_coplanar_lattices() {
    // A 5^3 lattice inside the unit box: every cell's corners are cospherical and many
    // points are coplanar with the box faces' parallels.
    let mut pts = Vec::new();
    for i in 1..6 {
        for j in 1..6 {
            for k in 1..6 {
                pts.push(DVec3::new(i as f64, j as f64, k as f64) / 6.0);
            }
        }
    }
    let tri = Tetrahedralization::box_delaunay(DVec3::ZERO, DVec3::ONE, &pts).unwrap();
    check_tetrahedralization(&tri);
}

#[test]
fn location_weights_reproduce_the_point_including_sites_edges_and_faces() {
    let grid = Grid::new(DVec3::ZERO, DVec3::ONE, 300).unwrap();
    let mut pts = unit_random(200, 3);
    // Exactly on sites, on the box faces and corners, on the Kuhn diagonal.
    pts.extend(grid.sites()[..40].iter().copied());
    pts.extend([
        DVec3::ZERO,
        DVec3::ONE,
        DVec3::new(0.5, 0.0, 0.5),
        DVec3::splat(0.25),
    ]);
    let tets = grid.tetrahedralization().tets();
    for (k, &p) in pts.iter().enumerate() {
        let (t, w) = grid.locate(p, 0).expect("inside");
        assert!(w.iter().all(|&x| x >= 0.0), "point {k}: weights {w:?}");
        assert!((w.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        let back: DVec3 = (0..4)
            .map(|v| grid.sites()[tets[t as usize][v] as usize] * w[v])
            .sum();
        assert!((back - p).length() < 1e-12, "point {k}: {back} vs {p}");
    }
    assert!(grid.locate(DVec3::new(1.5, 0.5, 0.5), 0).is_none());
    assert!(grid.locate(DVec3::NAN, 0).is_none());
}

#[test]
fn near_sets_and_inverse_lists_match_algorithm_1() {
    let x = unit_random(300, 5);
    let q = vec![Q; 300];
    let d = Ddef::build(&x, &q, 0.0, 200, 0.0).unwrap();
    let tets = d.grid().tetrahedralization().tets();
    let nbrs = d.grid().tetrahedralization().neighbors();
    for s in 0..300 {
        let n_s = d.near_sites().row(s);
        let t = d.source_tets()[s] as usize;
        // N_s = vertices of tau_s and of its face neighbours.
        let mut expect: Vec<u32> = tets[t].to_vec();
        for &nb in &nbrs[t] {
            if nb != NONE {
                expect.extend(tets[nb as usize]);
            }
        }
        expect.sort_unstable();
        expect.dedup();
        let mut got = n_s.to_vec();
        got.sort_unstable();
        assert_eq!(got, expect, "N_{s}");
        for &j in n_s {
            assert!(d.site_sources().row(j as usize).contains(&(s as u32)));
        }
    }
    let total: usize = (0..d.site_sources().rows())
        .map(|j| d.site_sources().row(j).len())
        .sum();
    assert_eq!(total, d.near_sites().entries.len(), "M is the inverse of N");
    // Far field: exactly the sources not in M_j (paper eq. 17).
    for j in [0usize, 7, 8, 100, 207] {
        let u = d.grid().sites()[j];
        let m_j = d.site_sources().row(j);
        let keep: Vec<f64> = (0..300)
            .map(|s| if m_j.contains(&(s as u32)) { 0.0 } else { Q })
            .collect();
        let e = exact_fields_at(&[u], None, &x, &keep, 0.0)[0];
        let f = d.far_field()[j];
        assert!((f - e).length() <= 1e-12 * e.length(), "site {j}");
    }
}

#[test]
fn corrected_is_exact_when_every_source_is_near() {
    // With only the 8 corners (6 tetrahedra around a diagonal) every N has 6 of the 8
    // sites, so any two intersect and every source is in every target's near set; the
    // corrected far field then has nothing left to interpolate.
    let n = 60;
    let x = unit_random(n, 11);
    let q: Vec<f64> = (0..n)
        .map(|i| if i % 3 == 0 { -Q } else { 2.0 * Q })
        .collect();
    for eps in [0.0, 0.05] {
        let d = Ddef::build(&x, &q, eps, 0, 0.0).unwrap();
        let plan = d.gather_plan();
        for s in 0..n {
            assert_eq!(
                plan.near.row(plan.target_group[s] as usize).len(),
                n,
                "source {s}: every source is near"
            );
        }
        let exact = coulomb_forces(&x, &q, eps);
        let f = d.forces(n, CORRECTED);
        assert!(rel_diff(&f, &exact) < 1e-12, "eps {eps}");
        // Also at test sites, which have no self term.
        let sites = unit_random(50, 12)
            .into_iter()
            .map(|p| p * 0.9 + DVec3::splat(0.05))
            .collect::<Vec<_>>();
        let e = d.fields_at(&sites, CORRECTED).unwrap();
        assert!(rel_diff(&e, &exact_fields_at(&sites, None, &x, &q, eps)) < 1e-12);
    }
}

#[test]
fn both_variants_are_exact_when_all_charges_share_one_tetrahedron() {
    // A corner-only grid on a large box and a small cluster inside one tetrahedron: every
    // vertex of that tetrahedron has all charges in M_v, so the far field there is zero
    // and Algorithm 1 as printed reduces to the exact sum too.
    let grid = Arc::new(Grid::new(DVec3::ZERO, DVec3::splat(10.0), 0).unwrap());
    let c = DVec3::new(6.0, 3.0, 1.0); // x > y > z: inside one Kuhn tetrahedron.
    let x: Vec<DVec3> = unit_random(40, 21)
        .into_iter()
        .map(|p| c + (p - DVec3::splat(0.5)) * 0.2)
        .collect();
    let q: Vec<f64> = (0..40).map(|i| Q * (1.0 + i as f64 / 40.0)).collect();
    let d = Ddef::on_grid(grid, &x, &q, 0.0, None).unwrap();
    let t0 = d.source_tets()[0];
    assert!(d.source_tets().iter().all(|&t| t == t0), "one tetrahedron");
    let exact = coulomb_forces(&x, &q, 0.0);
    for eval in [PAPER, CORRECTED] {
        assert!(rel_diff(&d.forces(40, eval), &exact) < 1e-12, "{eval:?}");
    }
}

#[test]
fn random_charges_meet_the_papers_accuracy_and_the_far_field_matters() {
    // Table 1's protocol at n = 2000, m = 2000: mean relative force error over the charges.
    let n = 2000;
    let x = unit_random(n, 7);
    let q = vec![Q; n];
    let d = Ddef::build(&x, &q, 0.0, 2000, 0.0).unwrap();
    let exact = coulomb_forces(&x, &q, 0.0);
    let stats = |eval| ErrorStats::of(&d.forces(n, eval), &exact);
    let (paper, corrected, near) = (stats(PAPER), stats(CORRECTED), stats(Evaluation::NearOnly));
    assert_eq!(corrected.count, n);
    // The default variant meets the paper's 0.046-0.059.
    assert_eq!(DdefConfig::default().variant, DdefVariant::Corrected);
    assert!(corrected.mean <= 0.06, "corrected mean {}", corrected.mean);
    // Removing the double-counted sources is what makes it better than Algorithm 1.
    assert!(
        corrected.mean < 0.5 * paper.mean,
        "corrected {} vs paper {}",
        corrected.mean,
        paper.mean
    );
    // Ignoring the far field (Table 1, bottom row) is far worse.
    assert!(
        near.mean > 5.0 * corrected.mean && near.mean > paper.mean,
        "near only {} vs {} / {}",
        near.mean,
        corrected.mean,
        paper.mean
    );
}

#[test]
fn test_sites_without_charge_are_evaluated_too() {
    let n = 500;
    let x = unit_random(n, 8);
    let q = vec![Q; n];
    let d = Ddef::build(&x, &q, 0.0, 500, 0.0).unwrap();
    let (lo, hi) = x
        .iter()
        .fold((x[0], x[0]), |(a, b), p| (a.min(*p), b.max(*p)));
    let sites = random_points(lo, hi, 400, 9);
    let exact = exact_fields_at(&sites, None, &x, &q, 0.0);
    let s = ErrorStats::of(&d.fields_at(&sites, CORRECTED).unwrap(), &exact);
    let near = ErrorStats::of(&d.fields_at(&sites, Evaluation::NearOnly).unwrap(), &exact);
    assert!(s.mean < 0.06 && near.mean > 5.0 * s.mean, "{s:?} {near:?}");
    let outside = [DVec3::splat(3.0)];
    assert!(matches!(
        d.fields_at(&outside, CORRECTED),
        Err(DdefError::OutsideGrid { index: 0, .. })
    ));
}

/// Degenerate charge sets every grid must handle, passed to `check` as (name, positions,
/// charges, samples, whether DDEF must then be exact): coplanar and collinear charges
/// (with samples, and with the box corners only), all charges at one point (every pair
/// coincides: the exact sum is non-finite, never dropped, so it is not compared) and a
/// single charge.
fn degenerate_charge_sets(mut check: impl FnMut(&str, Vec<DVec3>, Vec<f64>, usize, bool)) {
    let planar: Vec<DVec3> = unit_random(200, 31)
        .into_iter()
        .map(|p| DVec3::new(p.x, p.y, 0.0))
        .collect();
    let line: Vec<DVec3> = (0..50)
        .map(|i| DVec3::new(1.0, 2.0, 3.0) * (i as f64 / 49.0))
        .collect();
    check("coplanar", planar.clone(), vec![Q; 200], 300, false);
    check("coplanar, corners only", planar, vec![Q; 200], 0, true);
    check("collinear", line.clone(), vec![-Q; 50], 100, false);
    check("collinear, corners only", line, vec![-Q; 50], 0, true);
    check(
        "one point",
        vec![DVec3::splat(2.0); 10],
        vec![Q; 10],
        50,
        false,
    );
    check(
        "single charge",
        vec![DVec3::new(1.0, -1.0, 0.5)],
        vec![Q],
        20,
        true,
    );
}

/// The degenerate set whose distinct charges coincide (exact Coulomb diverges there).
fn coincident(name: &str) -> bool {
    name == "one point"
}

#[test]
fn degenerate_charge_sets_do_not_panic_and_stay_exact_where_implied() {
    let check = |name: &str, x: Vec<DVec3>, q: Vec<f64>, samples: usize, exact_expected: bool| {
        let n = x.len();
        let d = Ddef::build(&x, &q, 0.0, samples, 0.0).unwrap_or_else(|e| panic!("{name}: {e}"));
        let exact = coulomb_forces(&x, &q, 0.0);
        for eval in [PAPER, CORRECTED, Evaluation::NearOnly] {
            let f = d.forces(n, eval);
            if coincident(name) {
                // Distinct charges at one point with eps = 0: infinite, never dropped.
                assert!(f.iter().all(|v| !v.is_finite()), "{name} {eval:?}");
            } else {
                assert!(f.iter().all(|v| v.is_finite()), "{name} {eval:?}");
            }
        }
        if exact_expected {
            let f = d.forces(n, CORRECTED);
            assert!(rel_diff(&f, &exact) < 1e-12, "{name}");
        }
        d
    };
    degenerate_charge_sets(|name, x, q, samples, exact_expected| {
        check(name, x, q, samples, exact_expected);
    });
    // Uncharged particles are not sources and receive nothing.
    let x = unit_random(30, 4);
    let mut q = vec![Q; 30];
    q[3] = 0.0;
    q[17] = 0.0;
    let d = check("some uncharged", x, q, 0, true);
    assert_eq!(d.source_particles().len(), 28);
    // No charge at all: nothing to size a grid with.
    assert_eq!(
        Ddef::build(&[DVec3::ZERO], &[0.0], 0.0, 10, 0.0).unwrap_err(),
        DdefError::NoCharges
    );
    assert!(matches!(
        Ddef::build(&[DVec3::ZERO, DVec3::NAN], &[Q, Q], 0.0, 10, 0.0),
        Err(DdefError::NonFinitePosition { index: 1 })
    ));
}

#[test]
fn a_charge_exactly_on_a_grid_site_is_located_there() {
    let x0 = unit_random(300, 41);
    let q0 = vec![Q; 300];
    let (lo, hi) = domain_box(&x0, 0.0).unwrap();
    let grid = Arc::new(Grid::new(lo, hi, 300).unwrap());
    // A Halton site inside the charges' own bounding box, so the box would not change.
    let j = (8..grid.sites().len())
        .find(|&j| {
            let u = grid.sites()[j];
            u.cmpgt(DVec3::splat(0.1)).all() && u.cmplt(DVec3::splat(0.9)).all()
        })
        .unwrap();
    let mut x = x0.clone();
    x.push(grid.sites()[j]);
    let mut q = q0.clone();
    q.push(-Q);
    assert_eq!(domain_box(&x, 0.0).unwrap(), (lo, hi));
    let d = Ddef::on_grid(grid.clone(), &x, &q, 0.0, None).unwrap();
    let s = 300;
    let t = d.source_tets()[s] as usize;
    let w = d.source_weights()[s];
    let v = grid.tetrahedralization().tets()[t]
        .iter()
        .position(|&k| k as usize == j)
        .expect("the site is a vertex of its tetrahedron");
    assert_eq!(w[v], 1.0);
    let exact = coulomb_forces(&x, &q, 0.0);
    for eval in [PAPER, CORRECTED] {
        let f = d.forces(301, eval);
        assert!(f.iter().all(|v| v.is_finite()));
        // The far field never includes a source at its own site (it is in M_j): if it did,
        // the r = 0 term would make this force infinite. 0.5 only bounds the ordinary
        // approximation error of one charge (the mean over charges is ~0.02).
        let e = (f[s] - exact[s]).length() / exact[s].length();
        assert!(e < 0.5, "{eval:?}: {e}");
    }
    assert!(d.far_field().iter().all(|v| v.is_finite()));
}

fn charged_cloud(n: usize, seed: u64) -> System {
    let x = unit_random(n, seed);
    let springs: Vec<Spring> = (0..n - 1)
        .map(|i| Spring {
            i: i as u32,
            j: i as u32 + 1,
            stiffness: 5.0,
            rest_length: (x[i + 1] - x[i]).length(),
            damping: 0.01,
        })
        .collect();
    System::new(SystemDesc {
        positions: x,
        masses: vec![1e-3; n],
        charges: vec![2e-7; n],
        springs,
        ..SystemDesc::default()
    })
    .unwrap()
}

fn ddef_config(integrator: Integrator, d: DdefConfig) -> Config {
    Config {
        integrator,
        dt: 1e-3,
        solver: SolverConfig {
            tolerance: 1e-10,
            iterations: 200,
            ..SolverConfig::default()
        },
        coulomb: CoulombConfig {
            method: CoulombMethod::Ddef(d),
            softening: 0.0,
        },
        ..Config::default()
    }
}

#[test]
fn integrators_use_ddef_and_rebuild_on_schedule() {
    let sys = charged_cloud(200, 51);
    let d = DdefConfig {
        samples: DdefSamples::Count(150),
        variant: DdefVariant::Corrected,
        rebuild_every: 3,
        grid: DdefGrid::Delaunay,
    };
    for integrator in [
        Integrator::Imex,
        Integrator::SymplecticEuler,
        Integrator::Verlet,
    ] {
        let mut sim = CpuSimulation::new(&sys, &ddef_config(integrator, d)).unwrap();
        let mut reference = CpuSimulation::new(
            &sys,
            &Config {
                coulomb: CoulombConfig::default(),
                ..ddef_config(integrator, d)
            },
        )
        .unwrap();
        sim.step(7).unwrap();
        reference.step(7).unwrap();
        let solver = sim.ddef().expect("DDEF state");
        // One evaluation per step (Verlet reuses a' as the next a, plus its first).
        let expected = if integrator == Integrator::Verlet {
            8
        } else {
            7
        };
        assert_eq!(solver.evaluations(), expected, "{integrator:?}");
        // Slow motion stays inside the padded box: rebuilds only on the schedule.
        assert_eq!(
            solver.rebuilds(),
            solver.evaluations().div_ceil(3),
            "{integrator:?}"
        );
        // The trajectory follows the exact one closely (forces within a few percent).
        let (a, b) = (&sim.current().x, &reference.current().x);
        let moved = b
            .iter()
            .zip(sys.positions())
            .map(|(p, p0)| (*p - *p0).length())
            .fold(0.0, f64::max);
        let diff = a
            .iter()
            .zip(b)
            .map(|(p, r)| (*p - *r).length())
            .fold(0.0, f64::max);
        assert!(
            moved > 0.0 && diff < 0.1 * moved,
            "{integrator:?}: {diff} vs {moved}"
        );
    }
}

#[test]
fn charges_leaving_the_box_force_a_rebuild() {
    let x = unit_random(100, 61);
    let q = vec![Q; 100];
    let d = DdefConfig {
        samples: DdefSamples::Count(100),
        variant: DdefVariant::Paper,
        rebuild_every: 1000,
        grid: DdefGrid::Delaunay,
    };
    let mut solver = DdefSolver::new(d, 0.0);
    let mut f = vec![DVec3::ZERO; 100];
    solver.forces_into(&x, &q, &mut f).unwrap();
    solver.forces_into(&x, &q, &mut f).unwrap();
    assert_eq!(solver.rebuilds(), 1);
    let grown: Vec<DVec3> = x.iter().map(|p| *p * 1.5).collect();
    solver.forces_into(&grown, &q, &mut f).unwrap();
    assert_eq!(solver.rebuilds(), 2);
    // The rebuilt grid is the one a fresh build with the reuse margin makes.
    let fresh = Ddef::build(&grown, &q, 0.0, 100, REUSE_MARGIN).unwrap();
    assert!(rel_diff(&f, &fresh.forces(100, PAPER)) < 1e-14);
    let mut short = vec![DVec3::ZERO; 3];
    assert!(matches!(
        solver.forces_into(&x, &q, &mut short),
        Err(DdefError::LengthMismatch { .. })
    ));
}

#[test]
fn ddef_settings_are_validated() {
    let bad = |d: DdefConfig| ddef_config(Integrator::Imex, d).validate().unwrap_err().key;
    let ok = DdefConfig::default();
    assert!(ddef_config(Integrator::Imex, ok).validate().is_ok());
    assert_eq!(
        bad(DdefConfig {
            rebuild_every: 0,
            ..ok
        }),
        "coulomb.rebuild_every"
    );
    assert_eq!(
        bad(DdefConfig {
            samples: DdefSamples::Count(DdefConfig::MAX_SAMPLES + 1),
            ..ok
        }),
        "coulomb.samples"
    );
    // The lattice follows the charges at every evaluation: rebuild_every is the
    // Delaunay grid's.
    assert_eq!(
        bad(DdefConfig {
            rebuild_every: 2,
            ..ok
        }),
        "coulomb.rebuild_every"
    );
    assert!(ddef_config(
        Integrator::Imex,
        DdefConfig {
            rebuild_every: 2,
            grid: DdefGrid::Delaunay,
            ..ok
        }
    )
    .validate()
    .is_ok());
    assert_eq!(CoulombMethod::Ddef(ok).name(), "ddef");
    assert_eq!(DdefVariant::from_name("paper"), Some(DdefVariant::Paper));
}

const SCENE: &str = r#"name = "ddef_scene"
[mesh]
kind = "torus"
major_radius = 1.0
minor_radius = 0.3
rings = 12
sides = 6
[material]
charge = 1e-7
[integrator]
dt = 0.001
steps = 4
solver = { method = "cg", iterations = 100, tolerance = 1e-9 }
"#;

/// Each `[coulomb]` addition to the base scene fails to load with an error naming `key`.
fn assert_coulomb_key_errors(dir: &tempfile::TempDir, cases: &[(&str, &str)]) {
    for &(extra, key) in cases {
        let path = scene_file(dir, &format!("{SCENE}[coulomb]\n{extra}"));
        let e = msc::scene::load(&path, &[]).unwrap_err();
        assert_eq!(e.key(), Some(key), "{extra}: {e}");
    }
}

fn scene_file(dir: &tempfile::TempDir, text: &str) -> String {
    let p = dir.path().join("scene.toml");
    std::fs::write(&p, text).unwrap();
    p.to_string_lossy().into_owned()
}

#[test]
fn scenes_select_ddef_and_name_bad_keys() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "{SCENE}[coulomb]\nmethod = \"ddef\"\nsamples = 300\nddef_variant = \"paper\"\n\
         rebuild_every = 2\nddef_grid = \"delaunay\"\n"
    );
    let path = scene_file(&dir, &text);
    let sc = msc::scene::load(&path, &[]).unwrap();
    assert_eq!(
        sc.config.coulomb.method,
        CoulombMethod::Ddef(DdefConfig {
            samples: DdefSamples::Count(300),
            variant: DdefVariant::Paper,
            rebuild_every: 2,
            grid: DdefGrid::Delaunay,
        })
    );
    let sc = msc::scene::load(&path, &["coulomb.samples=40".to_string()]).unwrap();
    assert_eq!(
        sc.config.coulomb.method.ddef().unwrap().samples,
        DdefSamples::Count(40)
    );
    for auto in ["coulomb.samples=auto", "coulomb.samples=\"auto\""] {
        let sc = msc::scene::load(&path, &[auto.to_string()]).unwrap();
        assert_eq!(
            sc.config.coulomb.method.ddef().unwrap().samples,
            DdefSamples::Auto
        );
    }
    // Defaults when only the method is given.
    let path = scene_file(&dir, &format!("{SCENE}[coulomb]\nmethod = \"ddef\"\n"));
    let sc = msc::scene::load(&path, &[]).unwrap();
    assert_eq!(
        sc.config.coulomb.method,
        CoulombMethod::Ddef(DdefConfig::default())
    );
    // The run steps on the CPU with DDEF and keeps finite energies; the lattice is planned
    // once.
    let mut sim = CpuSimulation::new(&sc.system, &sc.config).unwrap();
    sim.step(sc.config.steps).unwrap();
    assert!(sim.energies().unwrap().is_finite());
    assert_eq!(sim.ddef().unwrap().rebuilds(), 1);
    assert_coulomb_key_errors(
        &dir,
        &[
            (
                "method = \"ddef\"\nrebuild_every = 0\n",
                "coulomb.rebuild_every",
            ),
            ("samples = 100\n", "coulomb.samples"),
            ("method = \"ddef\"\nsamples = -3\n", "coulomb.samples"),
            ("method = \"ddef\"\nsamples = \"many\"\n", "coulomb.samples"),
            (
                "method = \"none\"\nddef_variant = \"paper\"\n",
                "coulomb.ddef_variant",
            ),
            (
                "method = \"ddef\"\nddef_variant = \"exact\"\n",
                "coulomb.ddef_variant",
            ),
        ],
    );
}

#[test]
fn ddef_error_command_reports_every_case_and_scheme() {
    use msc::cli::ddef_error::{execute, DdefErrorArgs, GridChoice};
    use msc::ddef::error_study::Targets;
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("rows.jsonl");
    let args = DdefErrorArgs {
        scene: None,
        set: Vec::new(),
        random: Some(400),
        samples: vec![100, 400],
        tests: Some(200),
        grid: GridChoice::Delaunay,
        seed: 3,
        json: Some(json.clone()),
        shape: Default::default(),
        thickness: 0.0,
    };
    let rows = execute(&args).unwrap();
    // 2 grid sizes x (random sites, charges) x 4 schemes.
    assert_eq!(rows.len(), 16);
    let lines = std::fs::read_to_string(&json).unwrap();
    assert_eq!(lines.lines().count(), 16);
    for l in lines.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert!(v["mean"].as_f64().unwrap().is_finite());
        assert!(v["scheme"].is_string() && v["targets"].is_string());
    }
    for m in [100, 400] {
        for t in [Targets::RandomSites, Targets::Charges] {
            let get = |s: &str| {
                rows.iter()
                    .find(|r| r.m == m && r.targets == t && r.scheme == s)
                    .unwrap()
                    .stats
            };
            assert_eq!(
                get("corrected").count,
                if t == Targets::Charges { 400 } else { 200 }
            );
            assert!(get("corrected").mean < get("paper").mean, "m {m} {t:?}");
            assert!(get("paper").mean < get("near_only").mean, "m {m} {t:?}");
        }
    }
    // Usage errors exit 2: neither SCENE nor --random, or both.
    assert_eq!(msc::cli::main_with_args(["msc", "ddef-error"]), 2);
    assert_eq!(
        msc::cli::main_with_args(["msc", "ddef-error", "torus", "--random", "5"]),
        2
    );
}

// ---- The lattice grid (regular lattice of Kuhn-split cubes) ----

const LATTICE: DdefGrid = DdefGrid::Lattice;

/// Boxes of several shapes: unit, anisotropic and off-origin with spacings that are not
/// representable, thin.
fn lattice_boxes() -> Vec<(DVec3, DVec3)> {
    vec![
        (DVec3::ZERO, DVec3::ONE),
        (DVec3::new(-1.3, 0.7, 2.1), DVec3::new(3.1, 1.9, 2.9)),
        (
            DVec3::new(1e3, -7.0, 0.01),
            DVec3::new(1e3 + 0.3, -6.9, 0.013),
        ),
    ]
}

#[test]
fn lattice_is_a_valid_delaunay_tetrahedralization_with_closed_form_neighbours() {
    for (lo, hi) in lattice_boxes() {
        for m in [0usize, 7, 100, 600, 2000] {
            let grid = Grid::new_lattice(lo, hi, m).unwrap();
            assert_eq!(grid.kind(), LATTICE);
            let tri = grid.tetrahedralization();
            check_tetrahedralization(tri);
            let [rx, ry, rz] = grid.lattice().unwrap().dims();
            assert!(rx >= 2 && ry >= 2 && rz >= 2);
            assert_eq!(tri.points().len(), rx * ry * rz, "{m}");
            let cells = (rx - 1) * (ry - 1) * (rz - 1);
            assert_eq!(tri.tets().len(), 6 * cells);
            // About m + 8 sites: within one lattice plane per axis of it.
            let t = m as f64 + 8.0;
            let planes = [rx, ry, rz].map(|r| t / r as f64);
            let slack = planes.iter().sum::<f64>();
            assert!(
                ((rx * ry * rz) as f64 - t).abs() <= slack,
                "m {m}: {rx} x {ry} x {rz}"
            );
            // Sites 0..8 are the box corners, as on the Delaunay grid.
            for c in 0..8usize {
                let corner = DVec3::new(
                    if c & 1 != 0 { hi.x } else { lo.x },
                    if c & 2 != 0 { hi.y } else { lo.y },
                    if c & 4 != 0 { hi.z } else { lo.z },
                );
                assert_eq!(tri.points()[c], corner);
            }
            // Every face without a neighbour lies on the box surface, and there are exactly
            // 2 per boundary square (check() only tests the neighbours that exist).
            let mut hull = 0;
            for (t, v) in tri.tets().iter().enumerate() {
                for k in 0..4 {
                    if tri.neighbors()[t][k] != NONE {
                        continue;
                    }
                    hull += 1;
                    let f: Vec<DVec3> = (0..4)
                        .filter(|&j| j != k)
                        .map(|j| tri.points()[v[j] as usize])
                        .collect();
                    let on = (0..3).any(|a| {
                        f.iter().all(|p| p[a] == lo[a]) || f.iter().all(|p| p[a] == hi[a])
                    });
                    assert!(on, "tet {t} face {k} has no neighbour inside the box");
                }
            }
            let squares = (rx - 1) * (ry - 1) + (ry - 1) * (rz - 1) + (rx - 1) * (rz - 1);
            assert_eq!(hull, 2 * 2 * squares, "m {m}");
        }
    }
}

/// Normalized barycentric coordinates of p in tetrahedron t by exact orientations.
fn exact_barycentric(tri: &Tetrahedralization, t: usize, p: DVec3) -> [f64; 4] {
    let [a, b, c, d] = tri.tets()[t].map(|i| tri.points()[i as usize]);
    let o = [
        orient(p, b, c, d),
        orient(a, p, c, d),
        orient(a, b, p, d),
        orient(a, b, c, p),
    ];
    let s: f64 = o.iter().sum();
    o.map(|x| x / s)
}

#[test]
fn lattice_locate_agrees_with_a_brute_force_search() {
    for (lo, hi) in lattice_boxes() {
        let grid = Grid::new_lattice(lo, hi, 150).unwrap();
        let lat = grid.lattice().unwrap();
        let tri = grid.tetrahedralization();
        let [cx, cy, cz] = [0, 1, 2].map(|a| lat.axis_coords(a).to_vec());
        let mid = |c: &[f64], i: usize| 0.5 * (c[i] + c[i + 1]);
        let mut pts = random_points(lo, hi, 300, 71);
        let mut rounded = Vec::new();
        // Lattice sites (interior and on the box), points on axis-aligned cell faces and
        // edges, on the box's faces, edges and upper corner, and on the Kuhn diagonal.
        pts.extend(grid.sites().iter().step_by(7).copied());
        for i in 0..cx.len() - 1 {
            let (j, k) = (i % (cy.len() - 1), (i * 3) % (cz.len() - 1));
            pts.push(DVec3::new(cx[i], mid(&cy, j), mid(&cz, k))); // on a face x = const
            pts.push(DVec3::new(mid(&cx, i), cy[j + 1], cz[k])); // on an edge
            pts.push(DVec3::new(cx[i], cy[j], mid(&cz, k))); // on an edge
            pts.push(DVec3::new(hi.x, mid(&cy, j), mid(&cz, k))); // upper box face
            pts.push(DVec3::new(mid(&cx, i), hi.y, hi.z)); // upper box edge
            pts.push(DVec3::new(mid(&cx, i), lo.y, mid(&cz, k))); // lower box face
            let c = DVec3::new(cx[i], cy[j], cz[k]);
            let e = DVec3::new(cx[i + 1], cy[j + 1], cz[k + 1]) - c;
            // On the cell's diagonal, shared by all 6. The three fractional coordinates
            // tie only up to rounding there, so the tetrahedron chosen may miss p by an ulp
            // (its weights still reproduce p): not held to exact containment below.
            rounded.push(pts.len());
            pts.push(c + e * 0.375);
        }
        pts.extend([lo, hi, DVec3::new(hi.x, lo.y, hi.z)]);
        let scale = (hi - lo).length() + lo.abs().max(hi.abs()).max_element();
        for (k, &p) in pts.iter().enumerate() {
            let (t, w) = grid.locate(p, 0).expect("inside");
            assert!(w.iter().all(|&x| x >= 0.0), "point {k}: weights {w:?}");
            assert!((w.iter().sum::<f64>() - 1.0).abs() < 1e-12, "point {k}");
            let v = tri.tets()[t as usize];
            let back: DVec3 = (0..4).map(|i| tri.points()[v[i] as usize] * w[i]).sum();
            assert!(
                (back - p).length() <= 1e-12 * scale,
                "point {k}: {back} vs {p}"
            );
            // The brute force: p is in the closed tetrahedron by exact orientations (up to
            // the rounding of p itself), and the weights are its barycentric coordinates.
            let b = exact_barycentric(tri, t as usize, p);
            assert!(b.iter().all(|&x| x >= -1e-12), "point {k}: {b:?}");
            for i in 0..4 {
                assert!((b[i] - w[i]).abs() < 1e-9, "point {k}: {b:?} vs {w:?}");
            }
            // It is one of the tetrahedra that contain p by exact orientations, and the
            // walk on the same tetrahedralization gives the same point back.
            let holders: Vec<usize> = (0..tri.tets().len())
                .filter(|&s| exact_barycentric(tri, s, p).iter().all(|&x| x >= 0.0))
                .collect();
            assert!(!holders.is_empty(), "point {k}");
            assert!(
                rounded.contains(&k) || holders.contains(&(t as usize)),
                "point {k}: {t} not in {holders:?}"
            );
            let (tw, ww) = tri.locate(p, 0).unwrap();
            let vw = tri.tets()[tw as usize];
            let back_w: DVec3 = (0..4).map(|i| tri.points()[vw[i] as usize] * ww[i]).sum();
            assert!((back_w - back).length() <= 1e-12 * scale);
        }
        // Exactly at a site: weight exactly 1 there.
        for (j, &u) in grid.sites().iter().enumerate() {
            let (t, w) = grid.locate(u, 0).unwrap();
            let v = tri.tets()[t as usize];
            let at = v
                .iter()
                .position(|&s| s as usize == j)
                .expect("site is a vertex");
            assert_eq!(w[at], 1.0, "site {j}");
        }
        assert!(grid.locate(hi + DVec3::X * (hi.x - lo.x), 0).is_none());
        assert!(grid.locate(DVec3::NAN, 0).is_none());
        assert!(grid
            .locate(lo - DVec3::Z * (hi.z - lo.z) * 1e-6, 0)
            .is_none());
    }
}

#[test]
fn lattice_near_sets_and_far_field_follow_algorithm_1() {
    let x = unit_random(300, 5);
    let q = vec![Q; 300];
    let d = Ddef::build_with(&x, &q, 0.0, 200, 0.0, LATTICE).unwrap();
    assert_eq!(d.grid().kind(), LATTICE);
    let tri = d.grid().tetrahedralization();
    for s in 0..300 {
        let t = d.source_tets()[s] as usize;
        let mut expect: Vec<u32> = tri.tets()[t].to_vec();
        for &nb in &tri.neighbors()[t] {
            if nb != NONE {
                expect.extend(tri.tets()[nb as usize]);
            }
        }
        expect.sort_unstable();
        expect.dedup();
        let mut got = d.near_sites().row(s).to_vec();
        got.sort_unstable();
        assert_eq!(got, expect, "N_{s}");
    }
    for j in [0usize, 7, 8, 100, d.grid().sites().len() - 1] {
        let u = d.grid().sites()[j];
        let m_j = d.site_sources().row(j);
        let keep: Vec<f64> = (0..300)
            .map(|s| if m_j.contains(&(s as u32)) { 0.0 } else { Q })
            .collect();
        let e = exact_fields_at(&[u], None, &x, &keep, 0.0)[0];
        assert!(
            (d.far_field()[j] - e).length() <= 1e-12 * e.length(),
            "site {j}"
        );
    }
    // The gather plan describes the same tetrahedra and weights.
    let plan = d.gather_plan();
    for (s, &xs) in x.iter().enumerate() {
        let g = plan.target_group[s] as usize;
        assert_eq!(
            plan.tet_vertices[g],
            tri.tets()[d.source_tets()[s] as usize]
        );
        let back: DVec3 = (0..4)
            .map(|v| tri.points()[plan.tet_vertices[g][v] as usize] * plan.weights[s][v])
            .sum();
        assert!((back - xs).length() < 1e-12);
    }
}

#[test]
fn lattice_ddef_is_exact_where_every_charge_is_near() {
    // m = 0: the lattice is the 8 corners split into the same 6 tetrahedra as the
    // Delaunay grid's start, every source is near every target, corrected is exact.
    let n = 60;
    let x = unit_random(n, 11);
    let q: Vec<f64> = (0..n)
        .map(|i| if i % 3 == 0 { -Q } else { 2.0 * Q })
        .collect();
    for eps in [0.0, 0.05] {
        let d = Ddef::build_with(&x, &q, eps, 0, 0.0, LATTICE).unwrap();
        assert_eq!(d.grid().sites().len(), 8);
        let exact = coulomb_forces(&x, &q, eps);
        assert!(
            rel_diff(&d.forces(n, CORRECTED), &exact) < 1e-12,
            "eps {eps}"
        );
    }
    // A cluster inside one tetrahedron of a coarse lattice: both variants are exact.
    let grid = Arc::new(Grid::new_lattice(DVec3::ZERO, DVec3::splat(10.0), 0).unwrap());
    let c = DVec3::new(6.0, 3.0, 1.0);
    let x: Vec<DVec3> = unit_random(40, 21)
        .into_iter()
        .map(|p| c + (p - DVec3::splat(0.5)) * 0.2)
        .collect();
    let q: Vec<f64> = (0..40).map(|i| Q * (1.0 + i as f64 / 40.0)).collect();
    let d = Ddef::on_grid(grid, &x, &q, 0.0, None).unwrap();
    assert!(d.source_tets().iter().all(|&t| t == d.source_tets()[0]));
    let exact = coulomb_forces(&x, &q, 0.0);
    for eval in [PAPER, CORRECTED] {
        assert!(rel_diff(&d.forces(40, eval), &exact) < 1e-12, "{eval:?}");
    }
}

#[test]
fn lattice_handles_degenerate_charge_sets() {
    let check = |name: &str, x: Vec<DVec3>, q: Vec<f64>, samples: usize, exact_expected: bool| {
        let n = x.len();
        let d = Ddef::build_with(&x, &q, 0.0, samples, 0.0, LATTICE)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        d.grid().tetrahedralization().check().unwrap();
        for eval in [PAPER, CORRECTED, Evaluation::NearOnly] {
            let finite = d.forces(n, eval).iter().all(|v| v.is_finite());
            // Distinct charges at one point with eps = 0: infinite, never dropped.
            assert_eq!(finite, !coincident(name), "{name}");
        }
        if exact_expected {
            let exact = coulomb_forces(&x, &q, 0.0);
            assert!(rel_diff(&d.forces(n, CORRECTED), &exact) < 1e-12, "{name}");
        }
    };
    // Coplanar charges: on the lattice the plane is widened to a slab whose middle lattice
    // plane (odd r_z) holds every charge, on lattice faces.
    degenerate_charge_sets(check);
    assert_eq!(
        Ddef::build_with(&[DVec3::ZERO], &[0.0], 0.0, 10, 0.0, LATTICE).unwrap_err(),
        DdefError::NoCharges
    );
    assert!(matches!(
        Grid::new_lattice(
            DVec3::ZERO,
            DVec3::ONE,
            DdefConfig::MAX_SAMPLES as usize + 1
        ),
        Err(DdefError::TooManySamples { .. })
    ));
    assert!(matches!(
        Grid::new_lattice(DVec3::ONE, DVec3::ONE, 10),
        Err(DdefError::DegenerateBox { .. })
    ));
}

#[test]
fn a_charge_exactly_on_a_lattice_site_stays_finite() {
    let x0 = unit_random(300, 41);
    let q0 = vec![Q; 300];
    let (lo, hi) = domain_box(&x0, 0.0).unwrap();
    let grid = Arc::new(Grid::new_lattice(lo, hi, 300).unwrap());
    let j = (8..grid.sites().len())
        .find(|&j| {
            let u = grid.sites()[j];
            u.cmpgt(DVec3::splat(0.2)).all() && u.cmplt(DVec3::splat(0.8)).all()
        })
        .unwrap();
    let mut x = x0;
    x.push(grid.sites()[j]);
    let mut q = q0;
    q.push(-Q);
    let d = Ddef::on_grid(grid.clone(), &x, &q, 0.0, None).unwrap();
    let t = d.source_tets()[300] as usize;
    let v = grid.tetrahedralization().tets()[t]
        .iter()
        .position(|&k| k as usize == j)
        .expect("the site is a vertex of its tetrahedron");
    assert_eq!(d.source_weights()[300][v], 1.0);
    assert!(d.far_field().iter().all(|v| v.is_finite()));
    let exact = coulomb_forces(&x, &q, 0.0);
    for eval in [PAPER, CORRECTED] {
        let f = d.forces(301, eval);
        assert!(f.iter().all(|v| v.is_finite()));
        // As on the Delaunay grid: 0.5 bounds one charge's ordinary approximation error.
        let e = (f[300] - exact[300]).length() / exact[300].length();
        assert!(e < 0.5, "{eval:?}: {e}");
    }
}

#[test]
fn lattice_meets_the_papers_accuracy_and_is_at_least_as_accurate_as_delaunay() {
    // Table 1's protocol at n = 2000, m = 2000, the same charges on both grids.
    let n = 2000;
    let x = unit_random(n, 7);
    let q = vec![Q; n];
    let exact = coulomb_forces(&x, &q, 0.0);
    let stats = |grid, eval| {
        let d = Ddef::build_with(&x, &q, 0.0, 2000, 0.0, grid).unwrap();
        ErrorStats::of(&d.forces(n, eval), &exact)
    };
    let lattice = stats(LATTICE, CORRECTED);
    let delaunay = stats(DdefGrid::Delaunay, CORRECTED);
    assert_eq!(lattice.count, n);
    assert!(lattice.mean <= 0.06, "lattice mean {}", lattice.mean);
    // The measurement behind the default grid.
    assert_eq!(DdefConfig::default().grid, LATTICE);
    assert!(
        lattice.mean <= delaunay.mean && lattice.max <= delaunay.max,
        "lattice {lattice:?} vs delaunay {delaunay:?}"
    );
    // The far field matters on the lattice too.
    let near = stats(LATTICE, Evaluation::NearOnly);
    assert!(near.mean > 5.0 * lattice.mean, "{near:?}");
    // At test sites without charge as well.
    let d = Ddef::build_with(&x, &q, 0.0, 2000, 0.0, LATTICE).unwrap();
    let sites = random_points(DVec3::splat(0.01), DVec3::splat(0.99), 400, 9);
    let e = ErrorStats::of(
        &d.fields_at(&sites, CORRECTED).unwrap(),
        &exact_fields_at(&sites, None, &x, &q, 0.0),
    );
    assert!(e.mean <= 0.06, "{e:?}");
}

#[test]
fn the_solver_and_scenes_use_the_lattice_grid() {
    let x = unit_random(150, 61);
    let q = vec![Q; 150];
    let d = DdefConfig {
        samples: DdefSamples::Count(120),
        variant: DdefVariant::Corrected,
        rebuild_every: 1,
        grid: LATTICE,
    };
    let mut solver = DdefSolver::new(d, 0.0);
    let mut f = vec![DVec3::ZERO; 150];
    solver.forces_into(&x, &q, &mut f).unwrap();
    // The lattice policy's evaluation (msc::ddef::plan), not a Delaunay grid.
    assert!(solver.grid().is_none());
    let plan = DdefSolver::plan_for(d, &x, &q).unwrap();
    assert_eq!(solver.plan(), Some(&plan));
    let fresh = msc::ddef::LatticeDdef::new(&plan, &x, &q, 0.0).unwrap();
    let mut g = vec![DVec3::ZERO; 150];
    fresh.forces_into(CORRECTED, &mut g);
    assert!(rel_diff(&f, &g) < 1e-14);
    let other = Ddef::build(&x, &q, 0.0, 120, 0.0).unwrap();
    assert_eq!(other.grid().kind(), DdefGrid::Delaunay);
    assert!(
        rel_diff(&f, &other.forces(150, CORRECTED)) > 1e-6,
        "a different grid"
    );

    // Integrators step on it.
    let sys = charged_cloud(200, 52);
    let mut sim = CpuSimulation::new(&sys, &ddef_config(Integrator::Imex, d)).unwrap();
    sim.step(3).unwrap();
    assert!(sim.ddef().unwrap().plan().is_some());
    assert!(sim.energies().unwrap().is_finite());

    // Scene key, its default and its errors.
    let dir = tempfile::tempdir().unwrap();
    for (name, grid) in [("lattice", LATTICE), ("delaunay", DdefGrid::Delaunay)] {
        let text = format!("{SCENE}[coulomb]\nmethod = \"ddef\"\nddef_grid = \"{name}\"\n");
        let sc = msc::scene::load(&scene_file(&dir, &text), &[]).unwrap();
        assert_eq!(sc.config.coulomb.method.ddef().unwrap().grid, grid);
        assert_eq!(DdefGrid::from_name(name), Some(grid));
        assert_eq!(grid.name(), name);
    }
    let path = scene_file(&dir, &format!("{SCENE}[coulomb]\nmethod = \"ddef\"\n"));
    let sc = msc::scene::load(&path, &["coulomb.ddef_grid=delaunay".to_string()]).unwrap();
    assert_eq!(
        sc.config.coulomb.method.ddef().unwrap().grid,
        DdefGrid::Delaunay
    );
    assert_coulomb_key_errors(
        &dir,
        &[
            (
                "method = \"none\"\nddef_grid = \"lattice\"\n",
                "coulomb.ddef_grid",
            ),
            (
                "method = \"ddef\"\nddef_grid = \"cubes\"\n",
                "coulomb.ddef_grid",
            ),
        ],
    );
}

#[test]
fn ddef_error_compares_both_grids_by_default() {
    use msc::cli::ddef_error::{execute, DdefErrorArgs, GridChoice};
    use msc::ddef::error_study::Targets;
    let args = DdefErrorArgs {
        scene: None,
        set: Vec::new(),
        random: Some(300),
        samples: vec![200],
        tests: Some(100),
        grid: GridChoice::default(),
        seed: 5,
        json: None,
        shape: Default::default(),
        thickness: 0.0,
    };
    assert_eq!(args.grid, GridChoice::Both);
    let rows = execute(&args).unwrap();
    // 2 grids x (random sites, charges) x 4 schemes.
    assert_eq!(rows.len(), 16);
    for grid in ["delaunay", "lattice"] {
        let r: Vec<_> = rows.iter().filter(|r| r.grid == grid).collect();
        assert_eq!(r.len(), 8, "{grid}");
        let get = |t, s: &str| {
            r.iter()
                .find(|r| r.targets == t && r.scheme == s)
                .unwrap()
                .stats
        };
        for t in [Targets::RandomSites, Targets::Charges] {
            assert!(
                get(t, "corrected").mean < get(t, "near_only").mean,
                "{grid}"
            );
        }
    }
    let lat = rows.iter().find(|r| r.grid == "lattice").unwrap();
    assert_eq!(lat.sites, 6 * 6 * 6, "cbrt(208) rounds to 6 per axis");
    assert_eq!(
        msc::cli::main_with_args([
            "msc",
            "ddef-error",
            "--random",
            "50",
            "--samples",
            "20",
            "--grid",
            "lattice"
        ]),
        0
    );
    assert_eq!(
        msc::cli::main_with_args(["msc", "ddef-error", "--random", "5", "--grid", "cubes"]),
        2
    );
}
