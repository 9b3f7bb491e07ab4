//! The charged ball the DDEF gradient tests share (tests/ddef_gradients.rs,
//! tests/gpu_ddef_gradients.rs): a jittered icosphere (162 particles at 2 subdivisions,
//! 42 at 1; all charged, damped springs) under DDEF with m = 27 samples, so most pairs
//! go through the far field and its interpolation, not the exact near sum; its configs,
//! option sets and comparisons.

// Each test crate uses only some of these.
#![allow(dead_code)]

use crate::common::Rng;
use glam::DVec3;
use msc::config::{
    Config, CoulombMethod, DdefConfig, DdefGrid, DdefSamples, DdefVariant, Integrator,
    SolverConfig, SolverMethod,
};
use msc::gpu::GpuError;
use msc::grad::{GradError, GradMode, GradOptions, TangentSolve};
use msc::model::mesh::icosphere;
use msc::model::{Spring, System, SystemDesc};

pub fn ball() -> System {
    ball_with(2, |_| true)
}

/// The ball of `subdivisions` with the particles `charged(i)` charged (the others at 0 C).
pub fn ball_with(subdivisions: u32, charged: impl Fn(usize) -> bool) -> System {
    let mesh = icosphere(0.47, subdivisions).unwrap();
    let mut rng = Rng(5);
    let n = mesh.positions.len();
    // Jittered off the icosphere's symmetric (and dyadic) coordinates, which put charges
    // on tetrahedron faces and box bounds on quanta.
    let positions: Vec<DVec3> = mesh.positions.iter().map(|p| *p + rng.vec(0.02)).collect();
    let springs = mesh
        .edges
        .iter()
        .map(|&[i, j]| Spring {
            i,
            j,
            stiffness: 5.0 * rng.range(0.8, 1.2),
            rest_length: (positions[j as usize] - positions[i as usize]).length(),
            damping: 0.02,
        })
        .collect();
    System::new(SystemDesc {
        positions,
        velocities: (0..n).map(|_| rng.vec(0.2)).collect(),
        masses: vec![0.01; n],
        charges: (0..n)
            .map(|i| 4e-7 * rng.range(0.5, 1.5) * f64::from(u8::from(charged(i))))
            .collect(),
        pinned: vec![false; n],
        springs,
        faces: mesh.faces.clone(),
    })
    .unwrap()
}

pub fn ddef(variant: DdefVariant) -> CoulombMethod {
    CoulombMethod::Ddef(DdefConfig {
        samples: DdefSamples::Count(27),
        variant,
        grid: DdefGrid::Lattice,
        ..DdefConfig::default()
    })
}

pub fn config(integrator: Integrator, variant: DdefVariant, solver: SolverConfig) -> Config {
    let mut c = Config {
        integrator,
        dt: 0.005,
        steps: 1,
        local_global_iterations: 3,
        solver,
        ..Config::default()
    };
    c.coulomb.method = ddef(variant);
    c.coulomb.softening = 0.01;
    c
}

pub fn cg(iterations: u32, tolerance: f64) -> SolverConfig {
    SolverConfig {
        method: SolverMethod::Cg,
        iterations,
        omega: 1.0,
        tolerance,
        rho: None,
    }
}

pub fn rel_err(a: &[DVec3], b: &[DVec3]) -> f64 {
    let num: f64 = a
        .iter()
        .zip(b)
        .map(|(a, b)| (*a - *b).length_squared())
        .sum();
    let den: f64 = b.iter().map(|b| b.length_squared()).sum();
    (num / den).sqrt()
}

/// Forward and adjoint options with tight solves (forward, tangent and adjoint CG to 1e-13).
pub fn exact(mode: GradMode) -> GradOptions {
    GradOptions {
        mode,
        tangent_solve: TangentSolve {
            tolerance: 1e-13,
            max_iterations: 5000,
        },
        exact_forward: true,
        ..GradOptions::default()
    }
}

pub fn norm(v: &[f64]) -> f64 {
    v.iter().map(|x| x * x).sum::<f64>().sqrt()
}

/// `Ok(None)` (test skipped) when there is no adapter.
pub fn on_gpu<T>(r: Result<T, GradError>) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(GradError::Gpu(GpuError::NoAdapter(why))) => {
            crate::common::skip_no_adapter(&why);
            None
        }
        Err(e) => panic!("GPU tangents failed: {e}"),
    }
}
