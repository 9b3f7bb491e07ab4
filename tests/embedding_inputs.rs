//! A hostile embedder's use of the GPU solver on its own wgpu device (the device's limits,
//! `record_steps` into the caller's encoder, the indices the API takes): each must give a
//! typed error naming the problem, never a wgpu panic or a silently wrong state. Runs on
//! whatever adapter wgpu finds, lavapipe included (see `common`).

mod common;

use common::{adapter, at_10_ms, pair};
use msc::gpu::{GpuError, GpuSolver, GpuWorlds};

/// The adapter's own limits with `lower` applied, as a caller's device, or `None` (test
/// skipped) without an adapter.
fn device_lowering(lower: impl Fn(&mut wgpu::Limits)) -> Option<(wgpu::Device, wgpu::Queue)> {
    let adapter = adapter()?;
    let mut limits = adapter.limits();
    lower(&mut limits);
    let device = adapter.request_device(&wgpu::DeviceDescriptor {
        required_limits: limits,
        ..Default::default()
    });
    Some(pollster::block_on(device).expect("a device with a lowered limit"))
}

/// A device with fewer bindings per bind group than the widest kernel's binding indices,
/// fewer uniform buffers per stage than the two every kernel binds (`Params` and
/// `Dispatch`), or a uniform binding smaller than `Params`: the solver and the batch
/// failed to build with a bare "wgpu validation error" from inside a pipeline or bind
/// group. Now each names the limit with both sizes, before anything is created.
#[test]
fn a_device_below_the_kernels_binding_limits_is_a_limit_error() {
    type Lower = fn(&mut wgpu::Limits);
    let cases: [(Lower, &str, u64, u64); 3] = [
        (
            |l| l.max_bindings_per_bind_group = 8,
            "bindings per bind group",
            9,
            8,
        ),
        (
            |l| l.max_uniform_buffers_per_shader_stage = 1,
            "uniform buffers per shader stage",
            2,
            1,
        ),
        (
            |l| l.max_uniform_buffer_binding_size = 64,
            "uniform buffer binding size",
            std::mem::size_of::<msc::gpu::layout::Params>() as u64,
            64,
        ),
    ];
    let (system, config) = (pair(), at_10_ms());
    for (lower, name, want_needed, want_limit) in cases {
        let Some((device, queue)) = device_lowering(lower) else {
            return;
        };
        let built = [
            GpuSolver::new(&device, &queue, &system, &config).map(drop),
            GpuWorlds::new(&device, &queue, &[(&system, &config); 2]).map(drop),
        ];
        for result in built {
            match result {
                Err(GpuError::LimitExceeded {
                    what,
                    needed,
                    limit,
                }) => {
                    assert!(what.contains(name), "{name}: {what}");
                    assert_eq!((needed, limit), (want_needed, want_limit), "{what}");
                }
                other => panic!("{name}: expected a limit error, got {:?}", other.err()),
            }
        }
    }
    // The adapter's own limits build both.
    let (device, queue) = device_lowering(|_| {}).expect("the adapter");
    GpuSolver::new(&device, &queue, &system, &config).expect("a solver");
    GpuWorlds::new(&device, &queue, &[(&system, &config); 2]).expect("a batch");
}

/// `GpuWorlds::in_world` built a table of `w + 1` names to label one world: world
/// `usize::MAX` overflowed (a panic), and a large index allocated a name per world below
/// it. Now any index is only printed.
#[test]
fn a_world_label_of_any_index_is_only_printed() {
    let e = GpuWorlds::in_world(
        usize::MAX,
        Some("run 'c'"),
        GpuError::Unsupported("no".into()),
    );
    match e {
        GpuError::Unsupported(m) => {
            assert_eq!(m, format!("world {} (run 'c'), no", usize::MAX))
        }
        other => panic!("expected the world's label, got {other:?}"),
    }
}

/// `GpuAdjoint::save(slot)` grew its table of snapshots to `slot + 1` entries: slot
/// `usize::MAX` overflowed (a panic), and a large slot allocated that many. Now a new slot
/// must be the next one, and a slot past it is refused naming both; saving the next and
/// an earlier one again still works.
#[test]
fn an_adjoint_snapshot_slot_past_the_next_is_refused() {
    use msc::gpu::{AdjointSetup, GpuAdjoint};
    let Some((device, queue)) = common::device() else {
        return;
    };
    let setup = AdjointSetup {
        frames: 1,
        charges: true,
        scale: 0.5,
        ..Default::default()
    };
    let mut adjoint =
        GpuAdjoint::new(&device, &queue, &pair(), &at_10_ms(), &setup).expect("adjoint");
    for slot in [usize::MAX, 1] {
        match adjoint.save(slot) {
            Err(GpuError::Unsupported(m)) => {
                assert!(m.contains(&format!("slot {slot}")), "{m}");
                assert!(m.contains("the next is 0"), "{m}");
            }
            other => panic!("slot {slot}: expected a refusal, got {other:?}"),
        }
    }
    adjoint.save(0).unwrap();
    adjoint.advance(2, false).unwrap();
    adjoint.save(1).unwrap();
    adjoint.save(0).unwrap();
    assert_eq!(adjoint.kept_states(), 2);
    adjoint.restore(1).unwrap();
    assert_eq!(adjoint.state().unwrap().step, 2);
}

/// Steps recorded with `record_steps` count as done at once, but run only when the
/// caller submits the encoder. A state read before that came back with the positions from
/// before the steps labelled with the steps' count, and after an encoder dropped
/// unsubmitted every later state was labelled steps ahead (under Verlet also from a
/// trajectory whose first force evaluation was skipped). Now such a read is an
/// `Unsubmitted` error naming both counts, for one solver and for a batch; the same
/// read after the submission gives the stepped state.
#[test]
fn a_state_read_before_the_recorded_steps_are_submitted_is_refused() {
    use msc::config::Integrator;
    let Some((device, queue)) = common::device() else {
        return;
    };
    let system = pair();
    let check = |result: Result<(), GpuError>, counted: u64, unsubmitted: u64| match result {
        Err(GpuError::Unsubmitted {
            counted: c,
            unsubmitted: u,
        }) => assert_eq!((c, u), (counted, unsubmitted)),
        other => panic!("expected an unsubmitted-steps error, got {other:?}"),
    };
    let mut solver = GpuSolver::new(&device, &queue, &system, &at_10_ms()).expect("solver");
    let start = solver.read_state().unwrap();
    let mut encoder = device.create_command_encoder(&Default::default());
    solver.record_steps(&mut encoder, 0).unwrap();
    solver.record_steps(&mut encoder, 5).unwrap();
    check(solver.read_state().map(drop), 5, 5);
    check(solver.read_positions_f32().map(drop), 5, 5);
    queue.submit([encoder.finish()]);
    let stepped = solver.read_state().unwrap();
    assert_eq!(stepped.step, 5);
    assert_ne!(stepped.x, start.x, "five steps moved nothing");

    // An encoder dropped unsubmitted: Verlet's steps are refused as behind, not read.
    let verlet = msc::Config {
        integrator: Integrator::Verlet,
        ..at_10_ms()
    };
    let mut solver = GpuSolver::new(&device, &queue, &system, &verlet).expect("solver");
    let mut encoder = device.create_command_encoder(&Default::default());
    solver.record_steps(&mut encoder, 1).unwrap();
    drop(encoder);
    solver.advance(3).unwrap();
    check(solver.read_state().map(drop), 4, 1);

    let Some(adapter) = adapter() else {
        return;
    };
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        required_limits: adapter.limits(),
        ..Default::default()
    }))
    .expect("a device with the adapter's limits");
    let config = at_10_ms();
    let mut batch = GpuWorlds::new(&device, &queue, &[(&system, &config); 2]).expect("batch");
    let mut encoder = device.create_command_encoder(&Default::default());
    batch.record_steps(&mut encoder, 3).unwrap();
    check(batch.read_states().map(drop), 3, 3);
    queue.submit([encoder.finish()]);
    let states = batch.read_states().unwrap();
    assert!(states.iter().all(|s| s.step == 3 && s.x != start.x));
}
