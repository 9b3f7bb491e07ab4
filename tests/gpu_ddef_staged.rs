//! The DDEF far field's and gather's staged paths (sources through workgroup memory, one
//! site or target per invocation: what hardware GPUs run) against their unstaged ones
//! (what a CPU adapter runs by default: several sites or targets per invocation) on the
//! same device: both add the same terms in the same order, so the forces must agree bit
//! for bit. On a CPU adapter `MSC_DDEF_GATHER_STAGED=1` and `MSC_DDEF_FAR_STAGED=1` keep
//! the staged paths; this file is its own test binary with one test, so setting the
//! variables races no other test. Skips when wgpu finds no adapter, and fails instead
//! when `MSC_REQUIRE_GPU=1`.

mod common;

use common::{gpu, Rng};
use glam::DVec3;
use msc::config::{
    Config, CoulombConfig, CoulombMethod, DdefConfig, DdefSamples, DdefVariant, Integrator,
};
use msc::ddef::error_study::random_points;
use msc::model::{System, SystemDesc};

const GATHER_STAGED: &str = "MSC_DDEF_GATHER_STAGED";
const FAR_STAGED: &str = "MSC_DDEF_FAR_STAGED";

fn cloud(x: &[DVec3], q: &[f64]) -> System {
    let n = x.len();
    System::new(SystemDesc {
        positions: x.to_vec(),
        velocities: vec![DVec3::ZERO; n],
        masses: vec![1.0; n],
        charges: q.to_vec(),
        pinned: vec![false; n],
        springs: Vec::new(),
        faces: Vec::new(),
    })
    .expect("system")
}

fn config(samples: u32, variant: DdefVariant, softening: f64) -> Config {
    Config {
        integrator: Integrator::SymplecticEuler,
        dt: 1e-3,
        gravity: DVec3::ZERO,
        coulomb: CoulombConfig {
            method: CoulombMethod::Ddef(DdefConfig {
                samples: DdefSamples::Count(samples),
                variant,
                ..Default::default()
            }),
            softening,
        },
        ..Default::default()
    }
}

/// The GPU's DDEF forces with kernel `staged` on its staged path (None: both unstaged);
/// None without an adapter.
fn forces(system: &System, config: &Config, staged: Option<&str>) -> Option<Vec<DVec3>> {
    let clear = || {
        for var in [GATHER_STAGED, FAR_STAGED] {
            std::env::remove_var(var);
        }
    };
    clear();
    if let Some(kernel) = staged {
        let var = if kernel == "ddef_far" {
            FAR_STAGED
        } else {
            GATHER_STAGED
        };
        std::env::set_var(var, "1");
        assert!(msc::gpu::shader::staged_on_cpu(kernel));
    }
    let mut g = gpu(system, config);
    clear();
    Some(g.as_mut()?.field_forces().expect("field forces").0)
}

#[test]
fn the_staged_paths_give_the_unstaged_ones_bits() {
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
    // lattice's site count is a multiple of the far field's sites per invocation.
    let spread = random_points(DVec3::ZERO, DVec3::ONE, 3001, 7);
    let crowded = random_points(DVec3::ZERO, DVec3::ONE, 4000, 9);
    let cases = [
        ("spread", cloud(&spread, &q(spread.len())), 400, 1e-3),
        ("crowded", cloud(&crowded, &q(crowded.len())), 8, 1e-2),
    ];
    for (name, system, m, eps) in &cases {
        for variant in [DdefVariant::Paper, DdefVariant::Corrected] {
            let c = config(*m, variant, *eps);
            let Some(plain) = forces(system, &c, None) else {
                return;
            };
            assert!(plain.iter().any(|f| *f != DVec3::ZERO), "{name}: no forces");
            for kernel in ["ddef_gather", "ddef_far"] {
                let staged = forces(system, &c, Some(kernel)).expect("adapter");
                let differ = plain.iter().zip(&staged).filter(|(a, b)| a != b).count();
                assert_eq!(
                    differ, 0,
                    "{name} {variant:?} {kernel}: {differ} forces differ"
                );
            }
        }
    }
}
