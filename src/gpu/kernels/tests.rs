//! The launchers' refusals, on a device.

use crate::config::Config;
use crate::gpu::device::adapter::test_device;
use crate::gpu::error::GpuError;
use crate::gpu::host::buffers::{Buf, Buffers, Shape};
use crate::gpu::host::engine::Engine;
use crate::gpu::host::params::TimeStep;
use crate::gpu::host::recorder::Recorder;
use crate::gpu::host::recording::Op;
use crate::gpu::layout::SCALAR_SLOTS;
use crate::model::{System, SystemDesc};
use glam::DVec3;

/// The launchers refuse what does not fit a kernel with a typed error naming it, before
/// anything is recorded: a reduction slot past the scalars, a solve whose unknown is its
/// own partner, a buffer this solver never created.
#[test]
fn launchers_refuse_mismatched_launches_with_typed_errors() {
    let Some((device, _queue)) = test_device() else {
        return;
    };
    let system = System::new(SystemDesc {
        positions: vec![DVec3::ZERO, DVec3::X],
        masses: vec![0.01; 2],
        charges: vec![0.0; 2],
        ..Default::default()
    })
    .unwrap();
    let config = Config::default();
    let dt = TimeStep::new(&config);
    let shape = Shape::of(&system, &config);
    let buffers = Buffers::one_system(&device, &system, &config, dt, shape, 1).unwrap();
    let mut engine = Engine::new(&device, Default::default());
    let mut p = Recorder::new(&device, &mut engine, &buffers, &system, &config, dt);
    let binding = |r: Result<Op, GpuError>| match r {
        Err(GpuError::Binding { kernel, problem }) => format!("{kernel}: {problem}"),
        other => panic!("expected a binding error, got {other:?}"),
    };
    let m = binding(p.reduce(SCALAR_SLOTS, 0));
    assert!(m.starts_with("dot_reduce: slot 8 of 8"), "{m}");
    match p.solve(&mut Vec::new(), Buf::V, Buf::V) {
        Err(GpuError::Binding { problem, .. }) => assert!(problem.contains("both V")),
        other => panic!("expected a binding error, got {other:?}"),
    }
    let m = binding(p.tangent_copy(Buf::X));
    assert!(
        m.starts_with("tangent_copy: buffer TanZ does not exist"),
        "{m}"
    );
    // A launch that fits is recorded.
    assert!(matches!(p.rhs(), Ok(Op::Dispatch(_))));
}
