//! CPU reference timings: all-pairs Coulomb (vectorized and the straightforward loop it
//! is tested against), the Coulomb tangent, DDEF against all-pairs, the lattice DDEF's
//! forces, tangent and transpose on a uniform and a crowded set, one IMEX step on a
//! 10K-particle cloth, one Jacobi sweep. Kept short (10 samples, 2 s each): `cargo bench --bench cpu_reference`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use glam::DVec3;
use msc::config::{Config, CoulombConfig, CoulombMethod, Integrator, SolverConfig, SolverMethod};
use msc::cpu::forces::coulomb_forces;
use msc::cpu::solvers::{diagonal_inverse, jacobi_sweep, BlockLaplacian};
use msc::cpu::CpuSimulation;
use msc::ddef::{
    Ddef, DdefConfig, DdefSamples, DdefSolver, DdefVariant, Evaluation, Grid, LatticeDdef,
};
use msc::model::{Spring, System, SystemDesc};
use std::hint::black_box;
use std::time::Duration;

/// Deterministic points in the unit cube with charges of both signs.
fn charges(n: usize) -> (Vec<DVec3>, Vec<f64>) {
    let mut s = 0x1234_5678_u64;
    let mut unit = move || {
        s = s
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (s >> 11) as f64 / (1u64 << 53) as f64
    };
    let x = (0..n).map(|_| DVec3::new(unit(), unit(), unit())).collect();
    let q = (0..n).map(|_| (unit() - 0.5) * 1e-5).collect();
    (x, q)
}

/// A side x side cloth in the x-z plane with structural and shear springs, two corners pinned.
fn cloth(side: usize) -> System {
    let spacing = 0.01;
    let x: Vec<DVec3> = (0..side * side)
        .map(|k| {
            DVec3::new(
                (k % side) as f64 * spacing,
                0.0,
                (k / side) as f64 * spacing,
            )
        })
        .collect();
    let mut springs = Vec::new();
    let mut add = |i: usize, j: usize| {
        springs.push(Spring {
            i: i as u32,
            j: j as u32,
            stiffness: 50.0,
            rest_length: (x[j] - x[i]).length(),
            damping: 0.01,
        })
    };
    for a in 0..side {
        for b in 0..side {
            let i = a * side + b;
            if b + 1 < side {
                add(i, i + 1);
            }
            if a + 1 < side {
                add(i, i + side);
            }
            if a + 1 < side && b + 1 < side {
                add(i, i + side + 1);
                add(i + 1, i + side);
            }
        }
    }
    let mut pinned = vec![false; side * side];
    pinned[0] = true;
    pinned[side - 1] = true;
    System::new(SystemDesc {
        masses: vec![1e-3; x.len()],
        positions: x,
        springs,
        pinned,
        ..Default::default()
    })
    .expect("valid cloth")
}

fn bench_coulomb(c: &mut Criterion) {
    let mut group = c.benchmark_group("coulomb_forces");
    for n in [1000usize, 4000] {
        let (x, q) = charges(n);
        group.throughput(Throughput::Elements((n * (n - 1)) as u64));
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| coulomb_forces(black_box(&x), black_box(&q), 0.0))
        });
        // The straightforward sequential loop the vectorized one is tested against.
        group.bench_with_input(BenchmarkId::new("straightforward", n), &n, |b, _| {
            b.iter(|| msc::coulomb::reference::forces(black_box(&x), black_box(&q), 0.0))
        });
    }
    group.finish();
}

/// The all-pairs Coulomb tangent (forward sensitivities) with a charge direction.
fn bench_coulomb_tangent(c: &mut Criterion) {
    let mut group = c.benchmark_group("coulomb_tangent");
    let n = 4000usize;
    let (x, q) = charges(n);
    let dx: Vec<DVec3> = x.iter().map(|p| *p * 0.1).collect();
    let dir = msc::grad::params::Direction {
        dq: Some(q.iter().map(|q| q * 0.5).collect()),
        dk: None,
        dm: None,
        dqe: vec![],
        dxe: vec![],
    };
    let config = Config::default();
    let mut out = vec![DVec3::ZERO; n];
    group.throughput(Throughput::Elements((n * (n - 1)) as u64));
    group.bench_function(BenchmarkId::from_parameter(n), |b| {
        b.iter(|| {
            msc::grad::jvp::field_forces_jvp(
                black_box(&x),
                &q,
                &config,
                0.0,
                &dx,
                &dir,
                None,
                &mut out,
            )
        })
    });
    group.finish();
}

/// DDEF (m = 2000, corrected) against the exact sum at n = 4K and 16K: a full build
/// (grid, location, lists, far field, evaluation: `rebuild_every = 1`) and an evaluation
/// on a kept grid (`rebuild_every > 1`).
fn bench_ddef(c: &mut Criterion) {
    let mut group = c.benchmark_group("coulomb_ddef");
    let eval = Evaluation::Ddef(DdefVariant::Corrected);
    for n in [4000usize, 16000] {
        let (x, q) = charges(n);
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new("all_pairs", n), &n, |b, _| {
            b.iter(|| coulomb_forces(black_box(&x), black_box(&q), 0.0))
        });
        group.bench_with_input(BenchmarkId::new("ddef_m2000_build", n), &n, |b, _| {
            b.iter(|| {
                Ddef::build(black_box(&x), &q, 0.0, 2000, 0.0)
                    .expect("ddef")
                    .forces(n, eval)
            })
        });
        let grid = std::sync::Arc::new(Grid::around(&x, 2000, 0.05).expect("grid"));
        group.bench_with_input(BenchmarkId::new("ddef_m2000_kept_grid", n), &n, |b, _| {
            b.iter(|| {
                Ddef::on_grid(grid.clone(), black_box(&x), &q, 0.0, None)
                    .expect("ddef")
                    .forces(n, eval)
            })
        });
    }
    group.finish();
}

/// The lattice DDEF (corrected, softening 1e-3) on the f64 reference: the forces, their
/// tangent (JVP) and their transpose (VJP) on 30K uniform charges (m = 1000) and on 6K
/// charges in one tetrahedron beside the unit cube's corners (m = 216; its targets are
/// split over threads, `TARGETS_PER_TASK`).
fn bench_lattice_ddef(c: &mut Criterion) {
    let mut group = c.benchmark_group("lattice_ddef");
    let eval = Evaluation::Ddef(DdefVariant::Corrected);
    let (uniform, q) = charges(30_000);
    let mut crowded: Vec<DVec3> = (0..8)
        .map(|c| DVec3::new(f64::from(c & 1), f64::from((c >> 1) & 1), f64::from(c >> 2)))
        .collect();
    let (ball, _) = charges(6_000);
    crowded.extend(
        ball.iter()
            .map(|p| DVec3::new(0.41, 0.52, 0.33) + (*p - 0.5) * 2e-4),
    );
    for (name, x, m) in [("uniform_30k", uniform, 1000), ("crowded_6k", crowded, 216)] {
        let q = &q[..x.len()];
        let config = DdefConfig {
            samples: DdefSamples::Count(m),
            ..DdefConfig::default()
        };
        let plan = DdefSolver::plan_for(config, &x, q).expect("plan");
        let l = LatticeDdef::new(&plan, &x, q, 1e-3).expect("evaluation");
        l.far_field();
        let n = x.len();
        let (w, _) = charges(n);
        let mut out = vec![DVec3::ZERO; n];
        group.bench_function(BenchmarkId::new("forces", name), |b| {
            b.iter(|| l.forces_into(eval, black_box(&mut out)))
        });
        let dq = vec![0.0; n];
        group.bench_function(BenchmarkId::new("jvp", name), |b| {
            b.iter(|| l.forces_jvp(eval, black_box(&w), &dq, &mut out))
        });
        let mut qb = vec![0.0; n];
        group.bench_function(BenchmarkId::new("vjp", name), |b| {
            b.iter(|| l.forces_vjp(eval, black_box(&w), &mut out, Some(&mut qb)))
        });
    }
    group.finish();
}

fn bench_imex_step(c: &mut Criterion) {
    // Uncharged: this measures the spring assembly, right-hand side and 50 Jacobi sweeps.
    let system = cloth(100);
    let config = Config {
        integrator: Integrator::Imex,
        dt: 0.005,
        gravity: DVec3::new(0.0, -9.81, 0.0),
        solver: SolverConfig {
            method: SolverMethod::Jacobi,
            iterations: 50,
            omega: 0.5,
            tolerance: 0.0,
            rho: None,
        },
        coulomb: CoulombConfig {
            method: CoulombMethod::None,
            softening: 0.0,
        },
        ..Config::default()
    };
    let mut sim = CpuSimulation::new(&system, &config).expect("valid config");
    let mut group = c.benchmark_group("imex_step");
    group.throughput(Throughput::Elements(system.len() as u64));
    group.bench_function("cloth_10k_jacobi50", |b| b.iter(|| sim.step_once()));
    group.finish();
}

fn bench_jacobi_sweep(c: &mut Criterion) {
    let system = cloth(100);
    let op = BlockLaplacian::imex(&system, system.positions(), 0.005);
    let b_vec: Vec<DVec3> = (0..system.len())
        .map(|i| DVec3::splat(i as f64 * 1e-4))
        .collect();
    let mut diag_inv = Vec::new();
    diagonal_inverse(&op, &mut diag_inv);
    let v_in = vec![DVec3::ZERO; system.len()];
    let mut v_out = vec![DVec3::ZERO; system.len()];
    let mut group = c.benchmark_group("jacobi_sweep");
    group.throughput(Throughput::Elements(system.len() as u64));
    group.bench_function("cloth_10k", |b| {
        b.iter(|| jacobi_sweep(&op, black_box(&b_vec), &diag_inv, 0.5, &v_in, &mut v_out))
    });
    group.finish();
}

fn quick() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}

criterion_group! {
    name = benches;
    config = quick();
    targets = bench_coulomb, bench_coulomb_tangent, bench_ddef, bench_lattice_ddef, bench_imex_step,
        bench_jacobi_sweep
}
criterion_main!(benches);
