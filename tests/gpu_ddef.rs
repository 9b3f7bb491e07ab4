//! The device-resident lattice DDEF (`coulomb.method = "ddef"`, every stage a kernel)
//! against the f64 CPU reference of the same policy (`msc::ddef::lattice_field`). Runs on
//! whatever adapter wgpu finds, software ones (lavapipe) included; skips when there is
//! none, and fails instead when `MSC_REQUIRE_GPU=1`.
//!
//! Tolerances. The CPU reference evaluates the positions rounded to f32 (what the GPU
//! holds) on the frame and tetrahedra the GPU built (read back): the box is whole numbers
//! of quanta, identical in f32 and f64 (checked), while a charge within f32 rounding of a
//! cell face may land in the neighbouring tetrahedron (both contain it: counted and
//! bounded, 1e-3 of the charges at most). Then only the f32 arithmetic differs: sums over
//! thousands of sources with mixed signs and the `corrected` subtraction at the vertices
//! lose a few digits against the largest term, so each force is compared with the
//! largest force of the set, at `F32_SUMS` = 1e-4 of it (the bound of the all-pairs GPU
//! tests); a real error (a wrong stencil, mask, exclusion or weight) shows at the DDEF
//! approximation's own size, 1e-3..1e-1 of it, which each test checks is far above the
//! tolerance. Trajectories are compared to 1e-3 of the system's 1 m size and of its
//! largest speed, as in `tests/gpu_solver.rs`.

mod common;

use common::{charges, cloud, ddef_cloud_config as ddef_config, f32_round, gpu, Rng};
use glam::DVec3;
use msc::config::{
    Config, CoulombMethod, DdefConfig, DdefGrid, DdefSamples, DdefVariant, Integrator,
    SolverConfig, SolverMethod,
};
use msc::cpu::CpuSimulation;
use msc::ddef::error_study::random_points;
use msc::ddef::{exact_fields_at, DdefSolver, Evaluation, LatticeDdef};
use msc::gpu::{GpuError, GpuSolver, HeadlessOptions};
use msc::model::{mesh, Spring, System, SystemDesc};
use msc::Simulator;

/// f32 sums against f64 ones, relative to the largest force (see the module docs).
const F32_SUMS: f64 = 1e-4;

/// Largest |a - b| over the largest |b|.
fn rel_diff(a: &[DVec3], b: &[DVec3]) -> f64 {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().map(|v| v.length()).fold(0.0, f64::max);
    let d = a
        .iter()
        .zip(b)
        .map(|(x, y)| (*x - *y).length())
        .fold(0.0, f64::max);
    assert!(scale > 0.0, "reference forces are all zero");
    d / scale
}

fn exact_forces(x: &[DVec3], q: &[f64], softening: f64) -> Vec<DVec3> {
    let idx: Vec<usize> = (0..x.len()).collect();
    exact_fields_at(x, Some(&idx), x, q, softening)
        .into_iter()
        .zip(q)
        .map(|(e, &qi)| e * qi)
        .collect()
}

/// The GPU's DDEF forces at the initial positions against the CPU reference on the GPU's
/// frame and tetrahedra; returns (GPU vs CPU, CPU vs exact).
fn compare(
    x: &[DVec3],
    q: &[f64],
    samples: DdefSamples,
    variant: DdefVariant,
    eps: f64,
) -> Option<(f64, f64)> {
    let x = f32_round(x);
    let system = cloud(&x, q);
    let config = ddef_config(samples, variant, eps);
    let mut g = gpu(&system, &config)?;
    let (gpu_f, _) = g.field_forces().expect("field forces");
    let s = g.read_ddef_structure().expect("structure").expect("DDEF");
    // The CPU's plan and frame for the same charges: the same box, bit for bit.
    let d = config.coulomb.method.ddef().unwrap();
    let plan = DdefSolver::plan_for(d, &x, q).expect("plan");
    let cpu = LatticeDdef::new(&plan, &x, q, eps).expect("cpu ddef");
    let frame = *cpu.frame();
    assert_eq!((s.lo, s.hi), (frame.lo, frame.hi), "frame box");
    assert_eq!(s.dims, plan.dims);
    // Tetrahedra: equal but for charges within f32 rounding of a face.
    let n = cpu.located().len();
    let flips = (0..n)
        .filter(|&k| cpu.located()[k].tet != s.tets[k])
        .count();
    assert!(
        flips * 1000 <= n,
        "{flips} of {n} charges in another tetrahedron"
    );
    let on_gpu = LatticeDdef::with_tets(frame, &x, q, eps, &s.tets).expect("cpu on gpu structure");
    let mut cpu_f = vec![DVec3::ZERO; x.len()];
    on_gpu.forces_into(Evaluation::Ddef(variant), &mut cpu_f);
    for (i, f) in gpu_f.iter().enumerate() {
        if q[i] == 0.0 {
            assert_eq!(*f, DVec3::ZERO, "uncharged particle {i}");
        }
    }
    Some((
        rel_diff(&gpu_f, &cpu_f),
        rel_diff(&cpu_f, &exact_forces(&x, q, eps)),
    ))
}

fn check(name: &str, x: &[DVec3], q: &[f64], samples: DdefSamples, eps: f64) {
    for variant in [DdefVariant::Paper, DdefVariant::Corrected] {
        let Some((d, approx)) = compare(x, q, samples, variant, eps) else {
            return;
        };
        eprintln!("{name} {variant:?} m={samples}: GPU vs CPU {d:.2e}, DDEF vs exact {approx:.2e}");
        assert!(d < F32_SUMS, "{name} {variant:?}: GPU vs CPU {d:.3e}");
        assert!(
            approx > 10.0 * F32_SUMS,
            "{name}: DDEF error {approx:.3e} resolves nothing"
        );
    }
}

#[test]
fn gpu_ddef_matches_the_cpu_reference_on_random_charges() {
    let n = 3000;
    let x = random_points(DVec3::ZERO, DVec3::ONE, n, 7);
    let q = charges(&mut Rng(3), n, 1e-6, 0.1);
    check("random", &x, &q, DdefSamples::Count(400), 1e-3);
    check("random", &x, &q, DdefSamples::Auto, 0.0);
}

#[test]
fn gpu_ddef_matches_the_cpu_reference_on_surfaces_and_planes() {
    // Crowded cells: charges on a sphere, and on a flat sheet (a thin axis).
    let m = mesh::icosphere(0.5, 4).expect("icosphere");
    let q = charges(&mut Rng(11), m.positions.len(), 2e-6, 0.0);
    check("sphere", &m.positions, &q, DdefSamples::Count(300), 0.0);
    let n = 2000;
    let x: Vec<DVec3> = random_points(DVec3::ZERO, DVec3::ONE, n, 5)
        .into_iter()
        .map(|p| DVec3::new(p.x, p.y, 0.25))
        .collect();
    let q = charges(&mut Rng(12), n, 1e-6, 0.0);
    check("sheet", &x, &q, DdefSamples::Count(2000), 1e-3);
}

/// 52K random charges at m = 1000 (about 48K sources): past what one far-field chunk
/// could hold on llvmpipe before chunks were capped (two chunks, its loop budget of
/// 65,535 iterations per invocation ended each after about 21,800 sources; 64K charges
/// were off by 12%). Softened (eps = 0.01) so the largest force is not one close pair
/// and the DDEF error stays resolvable against the f32 bound.
#[test]
fn gpu_ddef_matches_the_cpu_reference_past_a_cpu_adapters_loop_budget() {
    let n = 53_248;
    let x = random_points(DVec3::ZERO, DVec3::ONE, n, 17);
    let q = charges(&mut Rng(5), n, 1e-6, 0.1);
    check("52K", &x, &q, DdefSamples::Count(1000), 0.01);
}

/// A braced lattice (`res`^3 particles in a 1 m cube) with jittered positions, random
/// springs, masses and velocities, charges of both signs (a fifth uncharged).
fn lattice_system(res: u32, seed: u64, charge: f64) -> System {
    let mut rng = Rng(seed);
    let m = mesh::lattice([1.0, 1.0, 1.0], [res; 3]).expect("lattice");
    let n = m.positions.len();
    let positions: Vec<DVec3> = m.positions.iter().map(|p| *p + rng.vec(0.02)).collect();
    let springs = m
        .edges
        .iter()
        .map(|&[i, j]| Spring {
            i,
            j,
            stiffness: rng.range(20.0, 50.0),
            rest_length: (m.positions[i as usize] - m.positions[j as usize]).length(),
            damping: rng.range(0.0, 0.05),
        })
        .collect();
    System::new(SystemDesc {
        velocities: (0..n).map(|_| rng.vec(0.3)).collect(),
        masses: (0..n).map(|_| rng.range(0.05, 0.15)).collect(),
        charges: charges(&mut rng, n, charge, 0.2),
        pinned: vec![false; n],
        positions,
        springs,
        faces: Vec::new(),
    })
    .expect("system")
}

fn step_config(integrator: Integrator, dt: f64) -> Config {
    Config {
        integrator,
        dt,
        solver: SolverConfig {
            method: SolverMethod::Jacobi,
            iterations: 30,
            omega: 0.6,
            tolerance: 0.0,
            rho: None,
        },
        ..ddef_config(DdefSamples::Count(150), DdefVariant::Corrected, 1e-3)
    }
}

fn max_diff(a: &[DVec3], b: &[DVec3]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (*x - *y).length())
        .fold(0.0, f64::max)
}

/// Both backends `steps` steps with DDEF; positions to `tol` m (1 m system), velocities to
/// `tol` of the largest CPU speed; the same plans and evaluations.
fn compare_trajectories(
    system: &System,
    config: &Config,
    steps: u64,
    tol: f64,
) -> Option<GpuSolver> {
    let mut g = gpu(system, config)?;
    let mut c = CpuSimulation::new(system, config).expect("cpu");
    c.step(steps).unwrap();
    g.step(steps).unwrap();
    let (cs, gs) = (c.state().unwrap(), g.state().unwrap());
    assert!(gs.is_finite(), "GPU state is not finite");
    let moved = max_diff(&cs.x, system.positions());
    assert!(moved > 20.0 * tol, "the run barely moved ({moved:.2e} m)");
    let dx = max_diff(&gs.x, &cs.x);
    let vscale = cs.v.iter().map(|v| v.length()).fold(0.0, f64::max);
    let dv = max_diff(&gs.v, &cs.v);
    eprintln!("moved {moved:.3e} m; dx {dx:.2e} m, dv {dv:.2e} (speed scale {vscale:.2e})");
    assert!(dx < tol, "positions differ by {dx:.3e} m");
    assert!(dv < tol * vscale, "velocities differ by {dv:.3e}");
    let cpu_ddef = c.ddef().expect("CPU DDEF");
    assert_eq!(g.ddef_rebuilds(), Some(cpu_ddef.rebuilds()), "plans made");
    assert_eq!(
        g.ddef_evaluations(),
        Some(cpu_ddef.evaluations()),
        "force evaluations"
    );
    // The Coulomb energy diagnostic stays exact all-pairs on both.
    let (ce, ge) = (c.energies().unwrap(), g.energies().unwrap());
    let scale = ce.coulomb.abs().max(1e-12);
    assert!(
        (ge.coulomb - ce.coulomb).abs() < 1e-3 * scale,
        "coulomb energy"
    );
    Some(g)
}

#[test]
fn gpu_ddef_trajectories_match_the_cpu_reference() {
    let system = lattice_system(8, 21, 5e-7);
    compare_trajectories(&system, &step_config(Integrator::Imex, 0.005), 40, 1e-3);
    // Velocity Verlet evaluates once per step and once before the first: n + 1.
    let system = lattice_system(5, 4, 1e-6);
    if let Some(g) =
        compare_trajectories(&system, &step_config(Integrator::Verlet, 0.001), 30, 1e-3)
    {
        assert_eq!(g.ddef_evaluations(), Some(31));
    }
}

/// Every stage on the device: reruns give the same bits, a block of steps is one
/// submission with nothing read back, steps record into a caller's encoder and profile.
#[test]
fn gpu_ddef_is_ordinary_recorded_work() {
    let system = lattice_system(6, 8, 1e-6);
    let config = step_config(Integrator::Imex, 0.005);
    let (Some(mut a), Some(mut b)) = (gpu(&system, &config), gpu(&system, &config)) else {
        return;
    };
    let before = a.host_counts();
    a.step(7).unwrap();
    let after = a.host_counts();
    assert_eq!(
        after.submissions - before.submissions,
        1,
        "one submission per recorded block"
    );
    assert_eq!(after.readbacks - before.readbacks, 0, "no host read");
    assert_eq!(after.compute_passes - before.compute_passes, 1);
    // Reading the energies is the one read, and the next block is again one submission.
    a.energies().unwrap();
    let read = a.host_counts();
    assert_eq!(read.readbacks - after.readbacks, 1);
    a.step(5).unwrap();
    let again = a.host_counts();
    assert_eq!(
        (
            again.submissions - read.submissions,
            again.readbacks - read.readbacks
        ),
        (1, 0)
    );
    let mut encoder = b
        .device()
        .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
    let before = b.host_counts();
    b.record_steps(&mut encoder, 7).unwrap();
    b.queue().submit([encoder.finish()]);
    let after = b.host_counts();
    assert_eq!(
        (
            after.submissions - before.submissions,
            after.readbacks - before.readbacks
        ),
        (0, 0),
        "recorded into the caller's encoder"
    );
    b.energies().unwrap();
    b.step(5).unwrap();
    let (sa, sb) = (a.read_state().unwrap(), b.read_state().unwrap());
    assert_eq!(sa.x, sb.x, "bit-identical reruns");
    assert_eq!(sa.v, sb.v);
    assert_eq!(a.ddef_evaluations(), Some(12));
    assert_eq!(b.ddef_evaluations(), Some(12));
    if b.device()
        .features()
        .contains(wgpu::Features::TIMESTAMP_QUERY)
    {
        let times = b.profile(1).expect("profile");
        for k in [
            "ddef_frame",
            "ddef_locate",
            "ddef_scan",
            "ddef_far",
            "ddef_gather",
        ] {
            assert!(times.iter().any(|t| t.kernel == k), "{k} profiled");
        }
    }
}

/// A charge cloud stretched along one axis: its frame drifts from the plan; the GPU
/// raises its flag, and re-plans when the energies are read, as the CPU reference does
/// at the same point, and both go on with the same lattice.
#[test]
fn gpu_ddef_replans_between_steps_like_the_cpu() {
    let n = 800;
    let x = random_points(DVec3::ZERO, DVec3::ONE, n, 31);
    let q = charges(&mut Rng(2), n, 1e-6, 0.0);
    let config = ddef_config(DdefSamples::Auto, DdefVariant::Corrected, 1e-3);
    // Heavy charges with velocities stretching z by 3x over 100 steps of 1 ms.
    let system = System::new(SystemDesc {
        velocities: x
            .iter()
            .map(|p| DVec3::new(0.0, 0.0, 20.0 * (p.z - 0.5)))
            .collect(),
        positions: x.clone(),
        masses: vec![1e3; n],
        charges: q.clone(),
        pinned: vec![false; n],
        springs: Vec::new(),
        faces: Vec::new(),
    })
    .unwrap();
    let Some(mut g) = gpu(&system, &config) else {
        return;
    };
    let mut c = CpuSimulation::new(&system, &config).unwrap();
    let first = g.read_ddef_structure().unwrap().unwrap();
    for _ in 0..10 {
        g.step(10).unwrap();
        c.step(10).unwrap();
        g.energies().unwrap();
        c.energies().unwrap();
        assert_eq!(g.ddef_rebuilds(), Some(c.ddef().unwrap().rebuilds()));
    }
    let plans = g.ddef_rebuilds().unwrap();
    assert!(
        plans >= 2,
        "the stretched cloud was re-planned ({plans} plans)"
    );
    g.step(1).unwrap();
    c.step(1).unwrap();
    let last = g.read_ddef_structure().unwrap().unwrap();
    assert!(
        last.dims[2] > first.dims[2],
        "{:?} -> {:?}",
        first.dims,
        last.dims
    );
    assert_eq!(last.dims, c.ddef().unwrap().plan().unwrap().dims);
}

#[test]
fn the_delaunay_grid_is_refused_on_the_gpu_naming_the_lattice() {
    let system = lattice_system(3, 2, 1e-6);
    let mut config = step_config(Integrator::Imex, 0.005);
    config.coulomb.method = CoulombMethod::Ddef(DdefConfig {
        grid: DdefGrid::Delaunay,
        ..Default::default()
    });
    let r = GpuSolver::headless(
        &system,
        &config,
        &HeadlessOptions {
            allow_software: true,
        },
    );
    match r {
        Err(GpuError::Unsupported(m)) => assert!(m.contains("ddef_grid = \"lattice\""), "{m}"),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("the Delaunay grid ran on the GPU"),
    }
}

/// Two charges brought onto one point, or to a subnormal r^2, after the start (as the
/// dynamics may; the host refuses such a state when a solver is built or a state is
/// written, so it goes into the position buffer directly), softening 0: the all-pairs
/// and near-pair loops (physics.wgsl's `pair_inv_dist`, without `inv_dist`'s test) must
/// give both of them non-finite forces, never drop the pair, and leave every other force
/// finite, on the adapter at hand.
#[test]
fn charges_brought_together_get_non_finite_forces_in_both_pair_loops() {
    let n = 300;
    let mut x = random_points(DVec3::splat(-1.0), DVec3::ONE, n, 23);
    x[0] = DVec3::ZERO;
    let q = charges(&mut Rng(29), n, 1e-6, 0.0);
    let system = cloud(&x, &q);
    let ddef = ddef_config(DdefSamples::Count(100), DdefVariant::Corrected, 0.0);
    let all_pairs = Config {
        coulomb: msc::config::CoulombConfig {
            method: CoulombMethod::AllPairs,
            softening: 0.0,
        },
        ..ddef.clone()
    };
    // 1e-20 m: r^2 = 1e-40 is subnormal in f32 (flushed to 0 by some adapters).
    for (name, config) in [("all-pairs", &all_pairs), ("ddef", &ddef)] {
        for gap in [0.0, 1e-20] {
            let Some(mut g) = gpu(&system, config) else {
                return;
            };
            let mut moved = x.clone();
            moved[1] = DVec3::new(gap, 0.0, 0.0);
            let x4: Vec<[f32; 4]> = moved
                .iter()
                .map(|p| [p.x as f32, p.y as f32, p.z as f32, 1.0])
                .collect();
            g.queue()
                .write_buffer(g.positions_buffer(), 0, bytemuck::cast_slice(&x4));
            let (f, _) = g.field_forces().expect("field forces");
            assert!(
                !f[0].is_finite() && !f[1].is_finite(),
                "{name}, {gap} m apart: {} and {}",
                f[0],
                f[1]
            );
            let spilled: Vec<usize> = (2..n).filter(|&i| !f[i].is_finite()).collect();
            assert!(spilled.is_empty(), "{name}, {gap} m apart: {spilled:?}");
        }
    }
}

/// Charges exactly on lattice sites: the far field and the `corrected` sums divide by
/// |u_j - x_s| without a test for 0 (`pair_inv_dist`), which holds because a charge at a
/// site is always near it (excluded from its sums). The sample count is picked so that
/// every axis's extent (whole quanta, a power of two) is a whole number of cells: the
/// sites are then exact in f32, on the GPU as here, and r = 0 exactly. Three inner
/// charges, not the box's, moved onto inner sites, so the box and the lattice stay;
/// three, as each may land in another tetrahedron than the reference's (`compare`
/// allows n / 1000).
#[test]
fn gpu_ddef_matches_the_cpu_reference_with_charges_on_lattice_sites() {
    let n = 3000;
    let mut x = f32_round(&random_points(DVec3::ZERO, DVec3::ONE, n, 31));
    let q = charges(&mut Rng(37), n, 1e-6, 0.1);
    let frame_for = |x: &[DVec3], m: u32| {
        let config = ddef_config(DdefSamples::Count(m), DdefVariant::Corrected, 0.0);
        let d = config.coulomb.method.ddef().unwrap();
        *DdefSolver::reference_for(d, x, &q, 0.0)
            .expect("reference")
            .frame()
    };
    let (m, frame) = (300..3000)
        .map(|m| (m, frame_for(&x, m)))
        .find(|(_, f)| (0..3).all(|a| f.ext_q[a] % i64::from(f.dims[a] - 1) == 0))
        .expect("a sample count whose sites are exact in f32");
    let (lo, hi) = x
        .iter()
        .fold((x[0], x[0]), |(a, b), p| (a.min(*p), b.max(*p)));
    let inside = |p: DVec3| p.cmpgt(lo).all() && p.cmplt(hi).all();
    let [rx, ry, rz] = frame.dims;
    let sites = [
        [rx / 2, ry / 2, rz / 2],
        [1, 1, 1],
        [rx - 2, ry / 3, rz - 2],
    ]
    .map(|p| frame.site(p));
    assert_eq!(f32_round(&sites), sites, "sites exact in f32");
    let movable: Vec<usize> = (0..n).filter(|&i| inside(x[i])).take(3).collect();
    for (&i, s) in movable.iter().zip(sites) {
        assert!(inside(s), "site {s} outside the charges' bounds");
        x[i] = s;
    }
    let moved = frame_for(&x, m);
    assert_eq!(
        (moved.lo, moved.hi, moved.dims),
        (frame.lo, frame.hi, frame.dims)
    );
    check("on sites", &x, &q, DdefSamples::Count(m), 0.0);
}
