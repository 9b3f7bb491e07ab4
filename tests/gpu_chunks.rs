//! The GPU forward tangents run a long frame interval in chunks with a stop-request check
//! between them; the chunks must run the same steps in the same order as one call, so a
//! chunked run gives the same bits as [`GpuTangents::step`] over the whole interval.

mod common;

use msc::config::Config;
use msc::gpu::{GpuError, HeadlessOptions};
use msc::grad::{simulate_with_tangents, GpuTangents, GradBackend, GradOptions, Param, ParamSet};
use msc::model::mesh::icosphere;
use msc::model::{Spring, System, SystemDesc};

fn ball() -> System {
    let mesh = icosphere(0.5, 1).unwrap();
    let n = mesh.positions.len();
    let springs = mesh
        .edges
        .iter()
        .map(|&[i, j]| Spring {
            i,
            j,
            stiffness: 20.0,
            rest_length: 0.95 * (mesh.positions[j as usize] - mesh.positions[i as usize]).length(),
            damping: 0.05,
        })
        .collect();
    System::new(SystemDesc {
        positions: mesh.positions.clone(),
        velocities: vec![glam::DVec3::ZERO; n],
        masses: vec![0.02; n],
        charges: vec![3e-7; n],
        pinned: (0..n).map(|i| i == 0).collect(),
        springs,
        faces: mesh.faces.clone(),
    })
    .unwrap()
}

/// 300 steps through the gradient API (chunked: 1, 2, 4, ... steps while a chunk takes
/// under 50 ms) and through one `GpuTangents::step(300)`: every bit equal.
#[test]
fn chunked_gpu_tangents_equal_one_call() {
    let system = ball();
    let mut config = Config {
        dt: 0.005,
        ..Config::default()
    };
    config.coulomb.softening = 0.02;
    let set = ParamSet::new(
        &system,
        &config,
        &[Param::ChargeScale, Param::StiffnessScale],
    )
    .unwrap();
    let theta = set.initial();
    let options = GradOptions {
        backend: GradBackend::Gpu {
            allow_software: true,
        },
        ..GradOptions::default()
    };
    let chunked = match simulate_with_tangents(&set, &theta, &[300], &options) {
        Ok(r) => r,
        Err(msc::grad::GradError::Gpu(GpuError::NoAdapter(why))) => {
            common::skip_no_adapter(&why);
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let (sys, cfg) = set.instantiate(&theta).unwrap();
    let dirs = set.directions_at(&theta).unwrap();
    let hopts = HeadlessOptions {
        allow_software: true,
    };
    let mut whole = GpuTangents::headless(&sys, &cfg, &dirs, &hopts).unwrap();
    whole.step(300).unwrap();
    let (state, tangents) = whole.read().unwrap();
    let frame = &chunked.frames[0];
    assert_eq!(frame.step, 300);
    assert_eq!(state.step, 300);
    let bits = |v: &[glam::DVec3]| -> Vec<[u64; 3]> {
        v.iter()
            .map(|p| [p.x.to_bits(), p.y.to_bits(), p.z.to_bits()])
            .collect()
    };
    assert_eq!(bits(&frame.x), bits(&state.x), "positions");
    assert_eq!(bits(&frame.v), bits(&state.v), "velocities");
    assert_eq!(frame.tangents.len(), tangents.len());
    for (p, (a, b)) in frame.tangents.iter().zip(&tangents).enumerate() {
        assert_eq!(bits(&a.dx), bits(&b.dx), "tangent {p} dx");
        assert_eq!(bits(&a.dv), bits(&b.dv), "tangent {p} dv");
    }
}
