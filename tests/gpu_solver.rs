//! GPU solver tests (run on any adapter wgpu finds, software ones included).

use glam::DVec3;
use msc::config::{Config, Integrator};
use msc::gpu::{GpuError, GpuSolver, HeadlessOptions};
use msc::model::{Spring, System, SystemDesc};
use msc::sim::Simulator;

/// The solver on any adapter, or `None` (test skipped) when there is none; with
/// `MSC_REQUIRE_GPU=1` a missing adapter fails the test instead.
fn gpu(system: &System, config: &Config) -> Option<GpuSolver> {
    match GpuSolver::headless(
        system,
        config,
        &HeadlessOptions {
            allow_software: true,
        },
    ) {
        Ok(s) => Some(s),
        Err(GpuError::NoAdapter(why)) => {
            if std::env::var("MSC_REQUIRE_GPU").as_deref() == Ok("1") {
                panic!("MSC_REQUIRE_GPU=1 but no adapter{why}");
            }
            eprintln!("skipping: no GPU adapter{why}");
            None
        }
        Err(e) => panic!("building the GPU solver failed: {e}"),
    }
}

#[test]
fn smoke() {
    let system = System::new(SystemDesc {
        positions: vec![DVec3::ZERO, DVec3::X * 1.5],
        masses: vec![1.0, 1.0],
        springs: vec![Spring {
            i: 0,
            j: 1,
            stiffness: 10.0,
            rest_length: 1.0,
            damping: 0.1,
        }],
        ..Default::default()
    })
    .unwrap();
    let config = Config {
        integrator: Integrator::Imex,
        ..Default::default()
    };
    let Some(mut s) = gpu(&system, &config) else {
        return;
    };
    eprintln!("{}", s.backend_name());
    s.step(3).unwrap();
    eprintln!("{:?}", s.state().unwrap());
    eprintln!("{:?}", s.energies().unwrap());
    eprintln!("{:?}", s.solve_stats().unwrap());
}
