//! A hostile embedder's inputs through the library API (a `System` and `Config` built in
//! Rust, the caller's wgpu device, the gradient API): each must give a typed error naming
//! the problem, never a panic, a silent NaN or a silently dropped term. Runs on whatever
//! adapter wgpu finds, lavapipe included (see `common`).

mod common;

use common::{adapter, at_10_ms, pair};
use glam::DVec3;
use msc::config::{Config, SolverConfig, SolverMethod};
use msc::cpu::CpuSimulation;
use msc::gpu::{GpuError, GpuSolver, GpuWorlds};
use msc::model::{System, SystemDesc};

/// A device of the caller's with `limits`, or `None` (test skipped) without an adapter.
fn device_with(limits: wgpu::Limits) -> Option<(wgpu::Device, wgpu::Queue)> {
    let adapter = adapter()?;
    let limits = wgpu::Limits {
        max_storage_buffers_per_shader_stage: adapter.limits().max_storage_buffers_per_shader_stage,
        ..limits
    };
    Some(
        pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            required_limits: limits,
            ..Default::default()
        }))
        .expect("device with reduced limits"),
    )
}

/// A device of the caller's with timestamp queries (what `profile` needs), or `None`
/// (test `name` skipped) without an adapter that has them.
fn timestamp_device(name: &str) -> Option<(wgpu::Device, wgpu::Queue)> {
    let adapter = adapter()?;
    if !adapter.features().contains(wgpu::Features::TIMESTAMP_QUERY) {
        common::skip_missing_feature(name, "TIMESTAMP_QUERY");
        return None;
    }
    let device = adapter.request_device(&wgpu::DeviceDescriptor {
        required_features: wgpu::Features::TIMESTAMP_QUERY,
        ..Default::default()
    });
    Some(pollster::block_on(device).expect("device with timestamps"))
}

/// A Chebyshev solve records one dispatch record per iteration; past the device's
/// `max_buffer_size` their uniform buffer was created anyway and wgpu panicked
/// ("Failed to get mapped range"). Now a limit error names the buffer and both sizes.
#[test]
fn chebyshev_records_beyond_max_buffer_size_are_a_limit_error() {
    let mib = 1 << 20;
    let Some((device, queue)) = device_with(wgpu::Limits {
        max_buffer_size: mib,
        max_storage_buffer_binding_size: mib,
        ..Default::default()
    }) else {
        return;
    };
    let system = pair();
    let config = |iterations| Config {
        dt: 0.01,
        solver: SolverConfig {
            method: SolverMethod::Chebyshev,
            iterations,
            ..Default::default()
        },
        ..Default::default()
    };
    // Within the limit it runs.
    let mut fits = GpuSolver::new(&device, &queue, &system, &config(50)).expect("solver");
    fits.advance(1).unwrap();
    // 8192 records of at least 32 bytes (256 with WebGPU's offset alignment) exceed 1 MiB
    // wherever the alignment is 256; a smaller alignment needs more iterations.
    let align = u64::from(device.limits().min_uniform_buffer_offset_alignment).max(32);
    let iterations = (2 * mib / align) as u32;
    let check = |e: GpuError| match e {
        GpuError::LimitExceeded {
            what,
            needed,
            limit,
        } => {
            assert!(what.contains("dispatch records"), "{what}");
            assert!(what.contains("max_buffer_size"), "{what}");
            assert_eq!(limit, mib);
            assert!(needed > mib, "{needed}");
        }
        other => panic!("expected a limit error, got {other}"),
    };
    check(
        GpuSolver::new(&device, &queue, &system, &config(iterations))
            .err()
            .expect("refused"),
    );
    let c = config(iterations);
    check(
        GpuWorlds::new(&device, &queue, &[(&system, &c), (&system, &c)])
            .err()
            .expect("refused"),
    );
}

/// A world a CPU batch does not hold was an index panic; the GPU batch already named it.
#[test]
fn a_world_a_cpu_batch_does_not_hold_is_a_typed_error() {
    use msc::simulator::{CpuWorlds, Worlds};
    use msc::SimError;
    let config = Config {
        dt: 0.01,
        ..Default::default()
    };
    let mut worlds = CpuWorlds::new(vec![CpuSimulation::new(&pair(), &config).expect("cpu")]);
    worlds.state(0).expect("world 0");
    let named = |e: SimError| {
        assert!(
            matches!(&e, SimError::Gpu(GpuError::Worlds(m)) if m == "world 3 of 1 asked for"),
            "{e}"
        )
    };
    named(worlds.state(3).unwrap_err());
    named(worlds.energies(3).unwrap_err());
    named(worlds.solve_stats(3).unwrap_err());
    named(worlds.first_outside_f32(3).unwrap_err());
}

/// A replacement state is checked as the initial one: two charged particles on one point
/// (no softening) were accepted by `set_state` and `write_state`, and the next step made
/// every position NaN. Now the pair is named; with softening, with the Coulomb sum off
/// or once one of them is uncharged, the same state is accepted.
#[test]
fn a_written_state_with_coincident_charges_is_refused_on_both_backends() {
    use msc::config::{CoulombConfig, CoulombMethod};
    use msc::model::ModelError;
    use msc::Simulator;
    let system = pair();
    let config = Config {
        dt: 0.01,
        ..Default::default()
    };
    let (x, v) = (vec![DVec3::ZERO; 2], vec![DVec3::ZERO; 2]);
    let singular = ModelError::SingularCoulombPair {
        i: 0,
        j: 1,
        distance: 0.0,
        softening: 0.0,
    };
    let mut cpu = CpuSimulation::new(&system, &config).expect("cpu");
    assert_eq!(cpu.set_state(&x, &v), Err(singular.clone()));
    cpu.step(1).unwrap();
    assert!(cpu.current().is_finite());
    let accepted = |config: &Config| {
        let mut cpu = CpuSimulation::new(&system, config).expect("cpu");
        cpu.set_state(&x, &v).expect("accepted");
        cpu.step(1).unwrap();
        assert!(cpu.current().is_finite());
    };
    let softened = Config {
        coulomb: CoulombConfig {
            softening: 1e-3,
            ..Default::default()
        },
        ..config.clone()
    };
    let off = Config {
        coulomb: CoulombConfig {
            method: CoulombMethod::None,
            softening: 0.0,
        },
        ..config.clone()
    };
    accepted(&softened);
    accepted(&off);

    let Some((device, queue)) = device_with(wgpu::Limits::default()) else {
        return;
    };
    let mut gpu = GpuSolver::new(&device, &queue, &system, &config).expect("gpu");
    match gpu.write_state(&x, &v) {
        Err(GpuError::Model(e)) => assert_eq!(e, singular),
        other => panic!("expected the pair, got {other:?}"),
    }
    // Apart in f64 but not in the kernels' f32 (r^2 = 1e-50 m^2 flushes to 0).
    let close = [DVec3::ZERO, DVec3::X * 1e-25];
    match gpu.write_state(&close, &v) {
        Err(e @ GpuError::F32Pair { .. }) => {
            assert!(e.to_string().contains("charged particles 0 and 1"), "{e}")
        }
        other => panic!("expected an f32 pair error, got {other:?}"),
    }
    gpu.step(1).unwrap();
    assert!(gpu.state().unwrap().is_finite());
    for c in [&softened, &off] {
        let mut gpu = GpuSolver::new(&device, &queue, &system, c).expect("gpu");
        gpu.write_state(&x, &v).expect("accepted");
        gpu.step(1).unwrap();
        assert!(gpu.state().unwrap().is_finite());
    }
    // The charges the check uses follow set_parameters.
    let one_charged = system.with_charges(&[1e-6, 0.0]).unwrap();
    gpu.set_parameters(&one_charged).unwrap();
    gpu.write_state(&x, &v).expect("one charge");
    cpu.set_parameters(&one_charged).unwrap();
    cpu.set_state(&x, &v).expect("one charge");
}

/// A tangent direction's entries were converted to f32 unchecked: a NaN or infinite one
/// gave NaN tangents, and one below f32's normal range (1e-50) was flushed to 0, a zero
/// tangent. Now each is named with its direction and index.
#[test]
fn tangent_directions_the_kernels_cannot_hold_are_named() {
    use msc::grad::{Direction, GpuTangents};
    let Some((device, queue)) = device_with(wgpu::Limits::default()) else {
        return;
    };
    let (system, config) = (pair(), at_10_ms());
    let build = |d: Direction| GpuTangents::new(&device, &queue, &system, &config, &[d]);
    let dq = |q: f64| Direction {
        dq: Some(vec![0.0, q]),
        ..Default::default()
    };
    let mut fine = build(dq(1.0)).expect("a unit charge direction");
    fine.step(2).unwrap();
    let (_, tangents) = fine.read().unwrap();
    assert!(tangents[0].dx.iter().all(|d| d.is_finite()));
    for (d, names) in [
        (
            dq(f64::NAN),
            "tangent direction 0: charge tangent of particle 1 is not finite",
        ),
        (
            Direction {
                dk: Some(vec![f64::INFINITY]),
                ..Default::default()
            },
            "tangent direction 0: stiffness tangent of spring 0 is not finite",
        ),
    ] {
        match build(d).err().expect("refused") {
            GpuError::Unsupported(m) => assert!(m.contains(names), "{m}"),
            other => panic!("expected {names}, got {other}"),
        }
    }
    match build(dq(1e-50)).err().expect("refused") {
        e @ GpuError::F32Range { .. } => assert!(
            e.to_string()
                .contains("charge tangent of particle 1 in tangent direction 0 = 1e-50"),
            "{e}"
        ),
        other => panic!("expected an f32 range error, got {other}"),
    }
}

/// The GPU adjoint scaled every cotangent by `AdjointSetup::scale` unchecked: the
/// default 0 gave a zero gradient and NaN a NaN one, and a NaN target seeded a NaN
/// loss. Now each is refused before it runs.
#[test]
fn adjoint_scales_and_targets_that_give_no_gradient_are_refused() {
    use msc::gpu::{AdjointSetup, GpuAdjoint};
    let Some((device, queue)) = device_with(wgpu::Limits::default()) else {
        return;
    };
    let (system, config) = (pair(), at_10_ms());
    let setup = |scale| AdjointSetup {
        frames: 1,
        charges: true,
        scale,
        ..Default::default()
    };
    for scale in [0.0, f64::NAN, 1e-50] {
        match GpuAdjoint::new(&device, &queue, &system, &config, &setup(scale)) {
            Err(GpuError::Unsupported(m)) => assert!(m.contains("loss scale"), "{m}"),
            other => panic!("scale {scale}: expected a refusal, got {:?}", other.err()),
        }
    }
    let mut adjoint =
        GpuAdjoint::new(&device, &queue, &system, &config, &setup(0.5)).expect("adjoint");
    adjoint.advance(1, true).unwrap();
    match adjoint.seed(0, &[DVec3::NAN, DVec3::ZERO]) {
        Err(GpuError::Unsupported(m)) => {
            assert!(m.contains("particle 0 has a non-finite position"), "{m}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    adjoint.seed(0, &[DVec3::X, DVec3::ZERO]).unwrap();
    adjoint.reverse().unwrap();
    let read = adjoint.read().unwrap();
    assert!(read.losses[0] > 0.0 && read.charges.iter().all(|g| g.is_finite()));
    assert!(read.charges.iter().any(|&g| g != 0.0), "{:?}", read.charges);
}

/// `profile(0)` profiled nothing but marked Verlet's first field evaluation done, so the
/// next step kicked with a zero force: a silently different trajectory. Now it leaves
/// the solver as it was.
#[test]
fn profiling_no_step_leaves_verlet_s_first_step_as_it_was() {
    use msc::config::Integrator;
    let Some((device, queue)) = timestamp_device("profiling_no_step") else {
        return;
    };
    let config = Config {
        integrator: Integrator::Verlet,
        dt: 0.01,
        ..Default::default()
    };
    let run = |profile_first: bool| {
        let mut solver = GpuSolver::new(&device, &queue, &pair(), &config).expect("solver");
        if profile_first {
            assert!(solver.profile(0).expect("profile").is_empty());
        }
        solver.advance(3).unwrap();
        solver.read_state().unwrap()
    };
    assert_eq!(run(true), run(false));
}

/// Profiled DDEF steps were not counted as DDEF evaluations (`ddef_evaluations` said 0
/// after two profiled steps); they are now counted as stepped ones are.
#[test]
fn profiled_ddef_steps_count_their_evaluations() {
    let Some((device, queue)) = timestamp_device("profiled_ddef_steps") else {
        return;
    };
    let mut rng = common::Rng(3);
    let x: Vec<DVec3> = (0..64).map(|_| rng.vec(1.0)).collect();
    let system = common::cloud(&x, &[1e-9; 64]);
    let config = common::ddef_cloud_config(
        msc::config::DdefSamples::Count(50),
        Default::default(),
        1e-2,
    );
    let mut stepped = GpuSolver::new(&device, &queue, &system, &config).expect("solver");
    stepped.advance(2).unwrap();
    let mut profiled = GpuSolver::new(&device, &queue, &system, &config).expect("solver");
    assert!(!profiled.profile(2).expect("profile").is_empty());
    assert_eq!(stepped.ddef_evaluations(), Some(2));
    assert_eq!(profiled.ddef_evaluations(), Some(2));
    assert_eq!(
        profiled.read_state().unwrap(),
        stepped.read_state().unwrap()
    );
}

/// A caller's device with fewer workgroups per dimension than a DDEF dispatch needs: the
/// solver was built, and the dispatch failed only when the steps were submitted (from
/// the caller's encoder an uncaptured validation error, which panics by default). Now
/// the build names the kernel, the count and the limit; the all-pairs solver, whose
/// dispatches fit, still runs there.
#[test]
fn dispatches_beyond_the_device_s_workgroups_per_dimension_are_a_limit_error() {
    let Some(adapter) = adapter() else {
        return;
    };
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        required_limits: wgpu::Limits {
            max_compute_workgroups_per_dimension: 12,
            ..adapter.limits()
        },
        ..Default::default()
    }))
    .expect("device with 12 workgroups per dimension");
    let mut rng = common::Rng(5);
    let x: Vec<DVec3> = (0..2000).map(|_| rng.vec(1.0)).collect();
    let system = common::cloud(&x, &[1e-9; 2000]);
    let ddef = common::ddef_cloud_config(msc::config::DdefSamples::Auto, Default::default(), 1e-2);
    match GpuSolver::new(&device, &queue, &system, &ddef) {
        Err(GpuError::LimitExceeded {
            what,
            needed,
            limit,
        }) => {
            assert!(
                what.contains("ddef") && what.contains("per dimension"),
                "{what}"
            );
            assert!(needed > 12, "{needed}");
            assert_eq!(limit, 12);
        }
        other => panic!("expected a limit error, got {:?}", other.err()),
    }
    let all_pairs = Config {
        coulomb: msc::config::CoulombConfig {
            softening: 1e-2,
            ..Default::default()
        },
        ..ddef.clone()
    };
    let mut solver = GpuSolver::new(&device, &queue, &system, &all_pairs).expect("all pairs");
    let mut encoder = device.create_command_encoder(&Default::default());
    solver.record_steps(&mut encoder, 2).unwrap();
    queue.submit([encoder.finish()]);
    assert!(solver.read_state().unwrap().is_finite());
}

/// A tangent solve that stops before its first iteration (`max_iterations` 0, or a
/// tolerance of 1 or more, which the starting guess meets) gave a zero gradient, forward
/// and adjoint, without an error. Now it is refused, naming both values.
#[test]
fn a_tangent_solve_that_never_iterates_is_refused() {
    use msc::grad::{
        evaluate, simulate, GradError, GradMode, GradOptions, Param, ParamSet, TangentSolve, Target,
    };
    let config = Config {
        dt: 0.01,
        ..Default::default()
    };
    let set = ParamSet::new(&pair(), &config, &[Param::StiffnessScale]).expect("set");
    let theta = set.initial();
    let targets = [Target {
        step: 5,
        positions: vec![DVec3::X * 0.1, DVec3::X * 0.9],
    }];
    for mode in [GradMode::Forward, GradMode::Adjoint] {
        let options = |tangent_solve| GradOptions {
            mode,
            tangent_solve,
            ..Default::default()
        };
        let good = evaluate(
            &set,
            &theta,
            &targets,
            &options(TangentSolve::default()),
            true,
            false,
        )
        .expect("gradient");
        assert!(good.gradient[0] != 0.0);
        for (bad, says) in [
            (
                TangentSolve {
                    max_iterations: 0,
                    ..Default::default()
                },
                "got 0 and 1e-12",
            ),
            (
                TangentSolve {
                    tolerance: 1.0,
                    ..Default::default()
                },
                "got 20000 and 1",
            ),
            (
                TangentSolve {
                    tolerance: f64::INFINITY,
                    ..Default::default()
                },
                "got 20000 and inf",
            ),
        ] {
            match evaluate(&set, &theta, &targets, &options(bad), true, false) {
                Err(GradError::Param(m)) => assert!(
                    m.contains("the tangent solve needs max_iterations >= 1") && m.contains(says),
                    "{m}"
                ),
                other => panic!("{mode:?} {bad:?}: expected a refusal, got {other:?}"),
            }
            // The forward run alone solves no tangent: still accepted.
            simulate(&set, &theta, &[5], &options(bad)).expect("forward only");
        }
    }
}

/// A step of `u32::MAX` solver iterations (or 65536 local-global alternations of 65537)
/// never finished building its GPU recording, with no way to stop it; the CPU reference
/// would run it for days. Both backends refuse it, naming the key and the limit.
#[test]
fn a_step_of_more_solver_iterations_than_the_limit_is_refused() {
    use msc::config::{ConfigError, Integrator, MAX_SOLVER_ITERATIONS_PER_STEP};
    let system = pair();
    let cases = [
        (Integrator::Imex, u32::MAX, 1),
        (Integrator::LocalGlobal, 65536, 65537),
    ];
    let check = |e: &ConfigError| {
        let said = e.to_string();
        assert!(said.contains("integrator.solver.iterations"), "{said}");
        assert!(
            said.contains(&MAX_SOLVER_ITERATIONS_PER_STEP.to_string()),
            "{said}"
        );
    };
    for (integrator, iterations, alternations) in cases {
        let config = Config {
            integrator,
            local_global_iterations: alternations,
            solver: SolverConfig {
                iterations,
                ..Default::default()
            },
            ..Default::default()
        };
        match CpuSimulation::new(&system, &config) {
            Err(e) => check(&e),
            Ok(_) => panic!("{integrator:?}: accepted"),
        }
        if let Some((device, queue)) = device_with(wgpu::Limits::default()) {
            match GpuSolver::new(&device, &queue, &system, &config) {
                Err(GpuError::Config(e)) => check(&e),
                Err(e) => panic!("{integrator:?}: expected a config error, got {e}"),
                Ok(_) => panic!("{integrator:?}: accepted"),
            }
        }
    }
    // At the limit it is accepted (IMEX, 2^24 iterations of one solve).
    let at = Config {
        solver: SolverConfig {
            iterations: MAX_SOLVER_ITERATIONS_PER_STEP as u32,
            ..Default::default()
        },
        ..Default::default()
    };
    assert!(at.validate().is_ok());
}

/// `ParamSet::values`, `value_derivatives`, `directions_at` and `pullback` indexed theta
/// unchecked: a theta of the wrong length panicked (index out of bounds at a log
/// parameter) or came back as short as it went in. Now each names theta and both lengths.
#[test]
fn a_theta_of_the_wrong_length_is_a_typed_error() {
    use msc::grad::cotangent::Wants;
    use msc::grad::{Cotangent, GradError, Param, ParamSet};
    let params = [Param::Charges, Param::StiffnessScale, Param::Masses];
    let set = ParamSet::new(&pair(), &at_10_ms(), &params)
        .and_then(|s| s.with_log(&[false, false, true]))
        .expect("set");
    let cot = Cotangent::zeros(Wants::of(&set), 2, 1, 0);
    let good = set.initial();
    assert_eq!(set.values(&good).expect("values").len(), 5);
    assert_eq!(set.value_derivatives(&good).expect("derivatives").len(), 5);
    assert_eq!(set.directions_at(&good).expect("directions").len(), 5);
    assert_eq!(set.pullback(&cot, &good).expect("pullback").len(), 5);
    for len in [4, 6] {
        let theta = vec![0.5; len];
        let says = format!("theta has {len} components, the parameters have 5");
        let check = |what: &str, e: Option<GradError>| match e {
            Some(GradError::Param(m)) => assert!(m.contains(&says), "{what}: {m}"),
            other => panic!("{what}: expected a parameter error, got {other:?}"),
        };
        check("values", set.values(&theta).err());
        check("value_derivatives", set.value_derivatives(&theta).err());
        check("directions_at", set.directions_at(&theta).err());
        check("pullback", set.pullback(&cot, &theta).err());
    }
}

/// `ParamSet::pullback` read a cotangent built for another system unchecked: a short
/// `charges` zipped short or gave a short gradient, a short `stiffnesses` panicked under
/// stiffness blocks, an empty `external_charges` panicked. Now each names the field and
/// both lengths.
#[test]
fn a_cotangent_of_the_wrong_size_is_a_typed_error() {
    use msc::config::ExternalCharge;
    use msc::grad::cotangent::Wants;
    use msc::grad::{Cotangent, GradError, Param, ParamSet};
    let config = Config {
        external_charges: vec![ExternalCharge {
            charge: 1e-7,
            position: DVec3::new(0.5, 1.0, 0.0),
            orbit: None,
        }],
        ..at_10_ms()
    };
    let params = [
        Param::ChargeScale,
        Param::StiffnessBlocks { count: 1 },
        Param::Masses,
        Param::ExternalCharge { index: 0 },
        Param::ExternalPosition { index: 0 },
    ];
    let set = ParamSet::new(&pair(), &config, &params).expect("set");
    let theta = set.initial();
    let good = Cotangent::zeros(Wants::of(&set), 2, 1, 1);
    assert_eq!(set.pullback(&good, &theta).expect("pullback").len(), 8);
    type Spoil = fn(&mut Cotangent);
    let cases: [(Spoil, &str); 5] = [
        (
            |c| c.charges.truncate(1),
            "charges has 1 entries, for 2 particles",
        ),
        (
            |c| c.stiffnesses.clear(),
            "stiffnesses has 0 entries, for 1 springs",
        ),
        (
            |c| c.masses.push(0.0),
            "masses has 3 entries, for 2 particles",
        ),
        (
            |c| c.external_charges.clear(),
            "external_charges has 0 entries, for 1 external charges",
        ),
        (
            |c| c.external_positions.push(DVec3::ZERO),
            "external_positions has 2 entries, for 1 external charges",
        ),
    ];
    for (spoil, says) in cases {
        let mut cot = good.clone();
        spoil(&mut cot);
        match set.pullback(&cot, &theta) {
            Err(GradError::Param(m)) => assert!(m.contains(says) && m.contains("cotangent"), "{m}"),
            other => panic!("{says}: expected a parameter error, got {other:?}"),
        }
    }
}

/// `System::with_charge_scale` and `with_stiffness_scale` scaled a copy without the checks
/// of `System::new`: a scale of -1 gave a negative stiffness and a NaN scale NaN charges,
/// which both backends then stepped (the CPU reference took the NaN charges too). Now the
/// product is checked as `System::new` checks it and names the spring or particle.
#[test]
fn scaled_parameters_are_checked_as_a_new_system_is() {
    use msc::model::ModelError;
    let s = pair();
    assert_eq!(s.with_charge_scale(2.0).unwrap().charges(), &[2e-6; 2]);
    assert_eq!(
        s.with_stiffness_scale(0.5).unwrap().springs()[0].stiffness,
        5.0
    );
    for scale in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        match s.with_charge_scale(scale) {
            Err(ModelError::NonFinite {
                index: 0,
                what: "charge",
            }) => {}
            other => panic!("charge scale {scale}: expected a non-finite charge, got {other:?}"),
        }
    }
    for scale in [-1.0, f64::NAN, f64::INFINITY] {
        match s.with_stiffness_scale(scale) {
            Err(ModelError::BadSpringParameter {
                spring: 0,
                what: "stiffness",
                ..
            }) => {}
            other => panic!("stiffness scale {scale}: expected a bad stiffness, got {other:?}"),
        }
    }
}

/// A batch's DDEF counts of a world it does not hold came back as a count (no plans and
/// every evaluation of the batch) instead of an error; `world_range` already named it.
#[test]
fn ddef_counts_of_a_world_a_batch_does_not_hold_are_a_typed_error() {
    let Some((device, queue)) = device_with(wgpu::Limits::default()) else {
        return;
    };
    let config = Config {
        coulomb: msc::config::CoulombConfig {
            method: msc::config::CoulombMethod::Ddef(Default::default()),
            softening: 0.0,
        },
        ..at_10_ms()
    };
    let system = pair();
    let mut batch = GpuWorlds::new(&device, &queue, &[(&system, &config)]).expect("batch");
    batch.advance(2).expect("steps");
    let counts = batch.ddef_counts(0).expect("world 0").expect("DDEF");
    assert_eq!((counts.rebuilds, counts.evaluations), (1, 2));
    match batch.ddef_counts(1) {
        Err(GpuError::Worlds(m)) => assert_eq!(m, "world 1 of 1 asked for"),
        other => panic!("expected a world error, got {other:?}"),
    }
}

/// A GPU batch answered `first_outside_f32` for a world it does not hold with `Ok(None)`
/// (the trait's default), where its other reads and the CPU batch name the world.
#[test]
fn a_world_a_gpu_batch_does_not_hold_is_a_typed_error() {
    use msc::simulator::{GpuBatch, Worlds};
    use msc::SimError;
    let Some((device, queue)) = device_with(wgpu::Limits::default()) else {
        return;
    };
    let system = pair();
    let config = at_10_ms();
    let batch = GpuWorlds::new(&device, &queue, &[(&system, &config)]).expect("batch");
    let mut worlds = GpuBatch::new(batch);
    worlds.step(1).expect("step");
    assert_eq!(worlds.first_outside_f32(0).expect("world 0"), None);
    let named = |e: SimError| {
        assert!(
            matches!(&e, SimError::Gpu(GpuError::Worlds(m)) if m == "world 3 of 1 asked for"),
            "{e}"
        )
    };
    named(worlds.state(3).unwrap_err());
    named(worlds.energies(3).unwrap_err());
    named(worlds.solve_stats(3).unwrap_err());
    named(worlds.first_outside_f32(3).unwrap_err());
}

/// A value f32 cannot hold in one world of a batch named its particle but not its world.
/// The inputs are checked before an adapter is opened, so this needs no device.
#[test]
fn a_value_beyond_f32_in_one_world_of_a_batch_names_the_world() {
    let good = pair();
    let mut desc = SystemDesc {
        positions: vec![DVec3::ZERO, DVec3::new(1e30, 0.0, 0.0)],
        masses: vec![1.0; 2],
        ..Default::default()
    };
    let far = System::new(desc.clone()).expect("the f64 model holds it");
    desc.positions[1] = DVec3::X;
    desc.charges = vec![1e15; 2]; // k_c q_i q_j = 9e39: beyond f32
    let charged = System::new(desc).expect("the f64 model holds it");
    let c = at_10_ms();
    let options = msc::gpu::HeadlessOptions {
        allow_software: true,
    };
    for (bad, what) in [
        (&far, "world 2, position of particle 1 (x)"),
        (
            &charged,
            "world 2, Coulomb product k_c q_i q_j of particles 0 and 1",
        ),
    ] {
        let worlds = [(&good, &c), (&good, &c), (bad, &c), (&good, &c)];
        match GpuWorlds::headless(&worlds, &options) {
            Err(e @ GpuError::F32Range { .. }) => {
                assert!(e.to_string().starts_with(what), "{e}")
            }
            Err(e) => panic!("expected a range error naming {what:?}, got {e}"),
            Ok(_) => panic!("expected a range error naming {what:?}, got a batch"),
        }
    }
}

/// A queue of another device than the one passed with it (of the same adapter, or of
/// another wgpu instance) was accepted, and the first step panicked inside wgpu ("Device
/// of CommandBuffer doesn't match Device of Queue", in that device's default error
/// handler). Now the solver and the batch refuse the pair when they are built.
#[test]
fn a_queue_of_another_device_is_refused() {
    let Some(adapter) = adapter() else {
        return;
    };
    let open = |a: &wgpu::Adapter| {
        pollster::block_on(a.request_device(&wgpu::DeviceDescriptor {
            required_limits: a.limits(),
            ..Default::default()
        }))
        .expect("device")
    };
    let (device, queue) = open(&adapter);
    let (_other_device, other_queue) = open(&adapter);
    // `common::adapter` makes a wgpu instance of its own at every call.
    let other_instance = common::adapter().map(|a| open(&a));
    let (system, config) = (pair(), at_10_ms());
    let refused = |r: Result<(), GpuError>| match r {
        Err(GpuError::Validation(m)) => assert!(m.contains("not that device's"), "{m}"),
        other => panic!("expected the pair refused, got {other:?}"),
    };
    let mut queues = vec![&other_queue];
    queues.extend(other_instance.as_ref().map(|(_, q)| q));
    for q in queues {
        refused(GpuSolver::new(&device, q, &system, &config).map(drop));
        refused(GpuWorlds::new(&device, q, &[(&system, &config)]).map(drop));
    }
    let mut solver = GpuSolver::new(&device, &queue, &system, &config).expect("its own queue");
    solver.advance(1).expect("step");
    GpuWorlds::new(&device, &queue, &[(&system, &config)]).expect("its own queue");
}

/// `ddef_forces_vjp` and `ddef_forces_jvp` took a vector of any length (refused with an
/// untyped message that named neither the argument nor which length was wanted) and
/// uploaded NaN, infinite or beyond-f32 entries as they were, so the results came back
/// NaN. Now each is a typed error naming the argument, its length or the index.
#[test]
fn ddef_vjp_and_jvp_vectors_of_the_wrong_length_or_not_finite_are_named() {
    use msc::gpu::TangentDirection;
    use msc::model::ModelError;
    let Some((device, queue)) = device_with(wgpu::Limits::default()) else {
        return;
    };
    let config = Config {
        coulomb: msc::config::CoulombConfig {
            method: msc::config::CoulombMethod::Ddef(Default::default()),
            softening: 0.0,
        },
        ..at_10_ms()
    };
    let along = TangentDirection {
        dq: None,
        dk: None,
        dqe: &[],
        dxe: &[],
    };
    let mut g = GpuSolver::with_tangents(&device, &queue, &pair(), &config, &[along])
        .expect("solver with tangents and DDEF");
    let good = vec![DVec3::X; 2];
    let (gx, gq) = g.ddef_forces_vjp(&good).expect("vjp of a good cotangent");
    assert!(gx.iter().all(|v| v.is_finite()) && gq.iter().all(|q| q.is_finite()));
    let jvp = g.ddef_forces_jvp(&good).expect("jvp of a good tangent");
    assert!(jvp.iter().all(|v| v.is_finite()));
    let bad = |i: usize, v: DVec3| {
        let mut x = good.clone();
        x[i] = v;
        x
    };
    for (what, r) in [("w", 0), ("dx", 1)] {
        let call = |g: &mut GpuSolver, x: &[DVec3]| match r {
            0 => g.ddef_forces_vjp(x).map(drop),
            _ => g.ddef_forces_jvp(x).map(drop),
        };
        for len in [0, 1, 3] {
            match call(&mut g, &vec![DVec3::X; len]) {
                Err(e @ GpuError::Model(ModelError::LengthMismatch { .. })) => {
                    let says = format!("{what} has {len} entries, positions has 2");
                    assert!(e.to_string().contains(&says), "{e}");
                }
                other => panic!("{what} of length {len}: expected a length error, got {other:?}"),
            }
        }
        for v in [
            DVec3::new(0.0, f64::NAN, 0.0),
            DVec3::splat(f64::NEG_INFINITY),
        ] {
            match call(&mut g, &bad(1, v)) {
                Err(GpuError::Model(ModelError::NonFinite { index: 1, what: w })) => {
                    assert_eq!(w, what)
                }
                other => panic!("{what} with {v}: expected a non-finite error, got {other:?}"),
            }
        }
        match call(&mut g, &bad(1, DVec3::new(0.0, 0.0, -1e300))) {
            Err(GpuError::F32Range { what: w, value, .. }) => {
                assert_eq!((w.as_str(), value), (format!("{what}[1]").as_str(), -1e300))
            }
            other => panic!("{what} beyond f32: expected a range error, got {other:?}"),
        }
    }
}

/// The t = 0 check of the external charges' and a swirl or vortex field's forces ran for
/// scenes only: a `System` and `Config` built in code with a swirl of min_z = 1e-320, a
/// vortex of scale 1e308 or a 1e300 C external charge started, and was reported as
/// diverged at step 0 or 1. Now both backends refuse them naming the key, as a scene is,
/// and the check refuses exactly where the force code's forces at t = 0 are not finite.
#[test]
fn external_forces_that_overflow_at_t0_are_refused_as_in_a_scene() {
    use msc::config::{CoulombConfig, ExternalCharge, ExternalField};
    use msc::cpu::{energy::external_energy, forces::external_forces};
    // Off the plane z = 0 by 1e-3 m: a field with min_z = 1e-3 is not clamped there.
    let lifted = System::new(SystemDesc {
        positions: vec![DVec3::new(0.0, 0.0, 1e-3), DVec3::new(1.0, 0.0, 1e-3)],
        masses: vec![1.0; 2],
        charges: vec![1e-6; 2],
        ..Default::default()
    })
    .expect("system");
    let config = |charges: &[(f64, f64)], field: Option<ExternalField>, softening: f64| Config {
        external_charges: (charges.iter())
            .map(|&(charge, z)| ExternalCharge {
                charge,
                position: DVec3::new(0.0, 0.0, z),
                orbit: None,
            })
            .collect(),
        external_field: field,
        coulomb: CoulombConfig {
            softening,
            ..Default::default()
        },
        ..at_10_ms()
    };
    let swirl = |scale, min_z| Some(ExternalField::Swirl { scale, min_z });
    let vortex = |scale, min_z| Some(ExternalField::Vortex { scale, min_z });
    // min_z = 1e-2 clamps |z| = 1e-3 up: a finite field, accepted.
    CpuSimulation::new(&lifted, &config(&[], swirl(1e300, 1e-2), 0.0)).expect("clamped");
    let refused = [
        // pair(): particle 1 at x = 1 m on the plane z = 0, clamped to 1e-320.
        (
            pair(),
            config(&[], swirl(1.0, 1e-320), 0.0),
            "external_field.min_z",
        ),
        (
            lifted.clone(),
            config(&[], vortex(1e308, 1e-3), 0.0),
            "external_field.scale",
        ),
        (
            lifted.clone(),
            config(&[(1e-9, 1.0), (1e300, 1.0)], None, 0.0),
            "external_charges[1].charge",
        ),
    ];
    for (s, c, key) in &refused {
        let Err(e) = CpuSimulation::new(s, c) else {
            panic!("{key}: accepted");
        };
        assert_eq!(e.key, *key, "{e}");
        assert!(e.to_string().contains("at t = 0") && e.to_string().contains("overflows f64"));
    }

    // Refused exactly where the CPU reference's force or energy at t = 0 is not finite.
    let (x, q) = (lifted.positions(), lifted.charges());
    let mut count = [0; 2];
    for qe in [1e-9, 1e290, 1e300, -1e303] {
        for z in [1.0, 1e-3 + 1e-9, 1e-3] {
            for field in [None, swirl(1e300, 1e-3), swirl(1e305, 1e-3)] {
                for softening in [0.0, 1e-3] {
                    let c = config(&[(1e-9, 2.0), (qe, z)], field, softening);
                    let finite = external_forces(x, q, &c, 0.0).iter().all(|f| f.is_finite())
                        && external_energy(x, q, &c, 0.0).is_finite();
                    let got = CpuSimulation::new(&lifted, &c);
                    assert_eq!(
                        got.is_ok(),
                        finite,
                        "{qe} C at z = {z}, {field:?}, {softening}"
                    );
                    count[usize::from(finite)] += 1;
                }
            }
        }
    }
    assert!(count[0] > 0 && count[1] > 0, "refused, accepted: {count:?}");

    let Some((device, queue)) = device_with(wgpu::Limits::default()) else {
        return;
    };
    for (s, c, key) in &refused {
        match GpuSolver::new(&device, &queue, s, c) {
            Err(GpuError::Config(e)) => assert_eq!(e.key, *key, "{e}"),
            Err(e) => panic!("{key}: expected a config error, got {e}"),
            Ok(_) => panic!("{key}: accepted"),
        }
    }
}
