//! Fixtures shared by the grad unit tests: a small charged sheet, and the checkpoint
//! policies (test_policies.rs, shared with tests/gpu_adjoint.rs).

use super::Checkpointing;
use crate::model::mesh::grid;
use crate::model::{Spring, System, SystemDesc};

#[path = "test_policies.rs"]
mod policies;
pub(crate) use policies::every_policy;

/// A flat 1 m square of `resolution` particles with shear springs (no bending), each
/// spring of stiffness 10 and rest length 0.3, each particle 0.01 kg and 1e-7 C.
pub(crate) fn sheet(resolution: [u32; 2]) -> System {
    let mesh = grid([1.0, 1.0], resolution, true, false).unwrap();
    let n = mesh.positions.len();
    System::new(SystemDesc {
        positions: mesh.positions.clone(),
        masses: vec![0.01; n],
        charges: vec![1e-7; n],
        springs: mesh
            .edges
            .iter()
            .map(|&[i, j]| Spring {
                i,
                j,
                stiffness: 10.0,
                rest_length: 0.3,
                damping: 0.0,
            })
            .collect(),
        ..Default::default()
    })
    .unwrap()
}
