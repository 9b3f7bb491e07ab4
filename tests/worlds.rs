//! Batched worlds (`GpuWorlds`) against each world stepped alone on the single-world GPU
//! solver and against the f64 CPU reference. Runs on whatever adapter wgpu finds (lavapipe
//! included); skips without one unless `MSC_REQUIRE_GPU=1`.
//!
//! Tolerances: a world of a batch runs the same kernels on the same f32 values in the same
//! order as the world alone (its particles, springs and Coulomb sources are whole
//! workgroups and tiles apart, its reductions are its own workgroups), so the two must
//! agree bit for bit: positions, velocities, energies and residuals are compared with
//! `==`. Against the CPU reference: Jacobi within the f32 bound of `tests/gpu_solver.rs`
//! (1e-3 of the system's scale over the steps compared); CG and local-global, whose solves
//! converge, within bounds in units of f32's roundoff of each world's extent (stated at
//! each test).

mod common;

use common::{require_gpu, skip_no_adapter};
use msc::config::Config;
use msc::cpu::CpuSimulation;
use msc::gpu::{BatchKey, GpuError, GpuSolver, GpuWorlds, HeadlessOptions};
use msc::measures::{Energies, SolveStats};
use msc::model::{State, System};

const OPTIONS: HeadlessOptions = HeadlessOptions {
    allow_software: true,
};

fn scene(name: &str, sets: &[&str]) -> (System, Config) {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let s = msc::scene::load(name, &sets).unwrap_or_else(|e| panic!("{name}: {e}"));
    (s.system, s.config)
}

/// World `system` under `config` stepped alone: its state, energies and solve after
/// `steps` steps, or `None` when there is no adapter.
fn alone(
    system: &System,
    config: &Config,
    steps: u64,
) -> Option<(State, Energies, Option<SolveStats>)> {
    let mut g = match GpuSolver::headless(system, config, &OPTIONS) {
        Ok(g) => g,
        Err(GpuError::NoAdapter(why)) => {
            skip_no_adapter(&why);
            return None;
        }
        Err(e) => panic!("single-world solver: {e}"),
    };
    g.advance(steps).unwrap();
    Some((
        g.read_state().unwrap(),
        g.read_energies().unwrap(),
        g.read_solve_stats().unwrap(),
    ))
}

fn batch(worlds: &[(System, Config)]) -> Option<GpuWorlds> {
    let refs: Vec<(&System, &Config)> = worlds.iter().map(|(s, c)| (s, c)).collect();
    match GpuWorlds::headless(&refs, &OPTIONS) {
        Ok(b) => Some(b),
        Err(GpuError::NoAdapter(why)) => {
            skip_no_adapter(&why);
            None
        }
        Err(e) => panic!("batch: {e}"),
    }
}

fn same_bits(a: &State, b: &State) -> bool {
    let bits = |s: &State| -> Vec<u64> {
        s.x.iter()
            .chain(&s.v)
            .flat_map(|p| [p.x.to_bits(), p.y.to_bits(), p.z.to_bits()])
            .collect()
    };
    bits(a) == bits(b) && a.t == b.t && a.step == b.step
}

/// Worlds of different sizes, topologies and parameters (time step, charges, fields,
/// external charges, gravity, pins, drag: two worlds with their own, the others none)
/// under the integrator and solver `shared` sets (each file has IMEX; their solvers differ).
fn mixed_worlds(shared: &[&str]) -> Vec<(System, Config)> {
    let with = |extra: &[&str]| -> Vec<String> {
        ["coulomb.method = \"all_pairs\""]
            .iter()
            .chain(extra)
            .chain(shared)
            .map(|s| s.to_string())
            .collect()
    };
    let load = |name: &str, sets: Vec<String>| {
        let refs: Vec<&str> = sets.iter().map(String::as_str).collect();
        scene(name, &refs)
    };
    vec![
        load("torus", with(&[])),
        load(
            "cloth",
            with(&["mesh.resolution = [9, 7]", "world.drag = 0.002"]),
        ),
        load("torus_dt003", with(&["material.charge = 3e-6"])),
        load("torus_orbit", with(&["world.drag = 0.01"])),
        load("swirl", with(&[])),
    ]
}

/// Every world of a batch ends where it ends alone, bit for bit, for every integrator and
/// solver, with worlds of different sizes, topologies, time steps and fields in one batch.
#[test]
fn every_world_steps_as_it_does_alone_bit_for_bit() {
    let imex = |method: &'static str, iterations: &'static str| -> Vec<&'static str> {
        vec!["integrator.method = \"imex\"", method, iterations]
    };
    let cases: Vec<Vec<&str>> = vec![
        imex(
            "integrator.solver.method = \"jacobi\"",
            "integrator.solver.iterations = 12",
        ),
        imex(
            "integrator.solver.method = \"block_jacobi\"",
            "integrator.solver.iterations = 8",
        ),
        imex(
            "integrator.solver.method = \"chebyshev\"",
            "integrator.solver.iterations = 10",
        ),
        imex(
            "integrator.solver.method = \"cg\"",
            "integrator.solver.iterations = 6",
        ),
        vec![
            "integrator.method = \"local_global\"",
            "integrator.local_global_iterations = 2",
            "integrator.solver.method = \"jacobi\"",
            "integrator.solver.iterations = 5",
        ],
        vec![
            "integrator.method = \"symplectic_euler\"",
            "integrator.dt = 0.001",
        ],
        vec!["integrator.method = \"verlet\"", "integrator.dt = 0.001"],
    ];
    let steps = 6;
    for shared in &cases {
        let worlds = mixed_worlds(shared);
        let Some(mut b) = batch(&worlds) else {
            return;
        };
        assert_eq!(b.len(), worlds.len());
        b.advance(steps).unwrap();
        let states = b.read_states().unwrap();
        let energies = b.read_energies().unwrap();
        let stats = b.read_solve_stats().unwrap();
        for (w, (system, config)) in worlds.iter().enumerate() {
            let (state, e, st) = alone(system, config, steps).unwrap();
            assert!(state.is_finite(), "{shared:?} world {w} is not finite");
            assert!(
                same_bits(&states[w], &state),
                "{shared:?}: world {w}'s state differs from the world alone"
            );
            assert_eq!(energies[w], e, "{shared:?}: world {w}'s energies");
            assert_eq!(stats[w], st, "{shared:?}: world {w}'s solve");
        }
    }
}

/// A charged particle exactly at the origin without softening: the padding of its
/// world's Coulomb sources (zero charges at the origin, up to a tile) must not be summed
/// as sources, or 0 x inf = NaN where the world alone is finite. Batched equals alone, bit
/// for bit (the sweep of the cloth with all-pairs Coulomb and two stiffnesses).
#[test]
fn a_charge_at_the_origin_without_softening_steps_as_it_does_alone() {
    let world = |stiffness: &str| {
        scene(
            "cloth",
            &[
                "coulomb.method = \"all_pairs\"",
                "coulomb.softening = 0.0",
                "material.charge = 1e-7",
                stiffness,
            ],
        )
    };
    let worlds = vec![
        world("material.stiffness = 40"),
        world("material.stiffness = 54"),
    ];
    for (system, _) in &worlds {
        let at_origin = (0..system.len())
            .filter(|&i| system.charges()[i] != 0.0)
            .any(|i| system.positions()[i] == msc::glam::DVec3::ZERO);
        assert!(at_origin, "the test needs a charged particle at the origin");
    }
    let Some(mut b) = batch(&worlds) else {
        return;
    };
    let steps = 10;
    b.advance(steps).unwrap();
    let states = b.read_states().unwrap();
    let energies = b.read_energies().unwrap();
    for (w, (system, config)) in worlds.iter().enumerate() {
        let (state, e, _) = alone(system, config, steps).unwrap();
        assert!(state.is_finite() && e.is_finite(), "world {w} alone");
        assert!(
            energies[w].is_finite() && states[w].is_finite(),
            "world {w} of the batch: {:?}",
            energies[w]
        );
        assert!(same_bits(&states[w], &state), "world {w}'s state");
        assert_eq!(energies[w], e, "world {w}'s energies");
    }
}

/// A world whose state turns non-finite does not touch the others: they still end as they
/// do alone, and its own energies report the divergence.
#[test]
fn a_diverging_world_leaves_the_others_untouched() {
    let verlet = "integrator.method = \"verlet\"";
    let coulomb = "coulomb.method = \"all_pairs\"";
    let worlds = vec![
        scene("torus", &[verlet]),
        // Explicit Verlet at h = 0.15 s blows up (paper Fig. 4c), here helped along by
        // charges a hundred times larger.
        scene("torus_dt015", &[verlet, "material.charge = 6e-4"]),
        scene(
            "cloth",
            &[
                verlet,
                coulomb,
                "mesh.resolution = [6, 6]",
                "integrator.dt = 0.001",
            ],
        ),
    ];
    let Some(mut b) = batch(&worlds) else {
        return;
    };
    let steps = 300;
    b.advance(steps).unwrap();
    let states = b.read_states().unwrap();
    let energies = b.read_energies().unwrap();
    assert!(
        !energies[1].is_finite() || !states[1].is_finite(),
        "world 1 was meant to diverge: {:?}",
        energies[1]
    );
    for w in [0, 2] {
        let (system, config) = &worlds[w];
        let (state, e, _) = alone(system, config, steps).unwrap();
        assert!(state.is_finite() && e.is_finite(), "world {w} alone");
        assert!(
            same_bits(&states[w], &state),
            "world {w} moved with world 1"
        );
        assert_eq!(energies[w], e, "world {w}'s energies");
    }
}

/// Each world of a batch against the f64 CPU reference, within the f32 bound of
/// `tests/gpu_solver.rs` (1e-3 of the system's 1 m scale over 40 steps).
#[test]
fn every_world_agrees_with_the_cpu_reference() {
    let worlds = mixed_worlds(&[
        "integrator.solver.method = \"jacobi\"",
        "integrator.solver.iterations = 30",
    ]);
    let Some(mut b) = batch(&worlds) else {
        return;
    };
    let steps = 40;
    b.advance(steps).unwrap();
    let states = b.read_states().unwrap();
    for (w, (system, config)) in worlds.iter().enumerate() {
        let mut c = CpuSimulation::new(system, config).unwrap();
        c.advance(steps).unwrap();
        let cs = c.current();
        let dx =
            cs.x.iter()
                .zip(&states[w].x)
                .map(|(a, b)| (*a - *b).length())
                .fold(0.0, f64::max);
        let moved =
            cs.x.iter()
                .zip(system.positions())
                .map(|(a, b)| (*a - *b).length())
                .fold(0.0, f64::max);
        assert!(moved > 1e-2, "world {w} barely moved ({moved:e})");
        assert!(dx <= 1e-3, "world {w}: positions differ by {dx:e}");
        assert!((states[w].t - cs.t).abs() < 1e-12, "world {w}'s clock");
    }
}

/// Each world of a batch under `shared` against the f64 CPU reference after 40 steps:
/// positions within `bound` times the world's extent R (its largest |x| on the CPU), the
/// world having moved over 100 times that.
fn every_world_within(shared: &[&str], bound: f64) {
    let worlds = mixed_worlds(shared);
    let Some(mut b) = batch(&worlds) else {
        return;
    };
    let steps = 40;
    b.advance(steps).unwrap();
    let states = b.read_states().unwrap();
    for (w, (system, config)) in worlds.iter().enumerate() {
        let mut c = CpuSimulation::new(system, config).unwrap();
        c.advance(steps).unwrap();
        let cs = c.current();
        let max = |d: &mut dyn Iterator<Item = f64>| d.fold(0.0, f64::max);
        let dx = max(&mut cs
            .x
            .iter()
            .zip(&states[w].x)
            .map(|(a, b)| (*a - *b).length()));
        let moved = max(&mut cs
            .x
            .iter()
            .zip(system.positions())
            .map(|(a, b)| (*a - *b).length()));
        let r = max(&mut cs.x.iter().map(|a| a.length()));
        eprintln!(
            "{shared:?} world {w}: |dx| {dx:.2e} = {:.2e} R, moved {moved:.2e}",
            dx / r
        );
        assert!(
            moved > 100.0 * bound * r,
            "world {w} barely moved ({moved:e})"
        );
        assert!(
            dx <= bound * r,
            "{shared:?} world {w}: positions differ by {dx:e} > {bound:e} R (R = {r})"
        );
        assert!((states[w].t - cs.t).abs() < 1e-12, "world {w}'s clock");
    }
}

/// IMEX with conjugate gradients run to convergence on both backends (40 iterations, no
/// early stop): what is left is the f32 rounding of the state and the forces. The solve is
/// for the velocity, so its rounding scales with h |v|, not with R, and the stored
/// positions round at u R (u = 6e-8). Bound: 16 u R = 1e-6 R (measured on lavapipe: at
/// most 1.8e-7 R).
#[test]
fn every_world_agrees_with_the_cpu_reference_under_cg() {
    every_world_within(
        &[
            "integrator.solver.method = \"cg\"",
            "integrator.solver.iterations = 40",
            "integrator.solver.tolerance = 0.0",
        ],
        1e-6,
    );
}

/// Local-global (5 iterations, its global solve by converged CG) solves for the positions
/// themselves: each step's f32 solve and projections round at the scale of R, a few u R a
/// step, and these add up over the steps. Bound: 8 u R a step over 40 steps = 2e-5 R
/// (measured on lavapipe: at most 8e-6 R, growing about linearly with the steps).
#[test]
fn every_world_agrees_with_the_cpu_reference_under_local_global() {
    every_world_within(
        &[
            "integrator.method = \"local_global\"",
            "integrator.local_global_iterations = 5",
            "integrator.solver.method = \"cg\"",
            "integrator.solver.iterations = 40",
            "integrator.solver.tolerance = 0.0",
        ],
        2e-5,
    );
}

/// World w's positions are the documented range of the one position buffer.
#[test]
fn each_world_is_a_range_of_the_position_buffer() {
    let worlds = mixed_worlds(&[
        "integrator.solver.method = \"jacobi\"",
        "integrator.solver.iterations = 20",
    ]);
    let Some(mut b) = batch(&worlds) else {
        return;
    };
    b.advance(2).unwrap();
    let states = b.read_states().unwrap();
    let (device, queue) = (b.device().clone(), b.queue().clone());
    let size = b.positions_buffer().size();
    let staging = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("test positions"),
        size,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut encoder = device.create_command_encoder(&Default::default());
    encoder.copy_buffer_to_buffer(b.positions_buffer(), 0, &staging, 0, size);
    queue.submit([encoder.finish()]);
    let bytes = msc::gpu::device::read_mapped(&device, &staging, size).unwrap();
    let all: &[[f32; 4]] = bytemuck::cast_slice(&bytes);
    let mut prev_end = 0;
    for (w, s) in states.iter().enumerate() {
        let r = b.world_range(w).unwrap();
        assert!(r.start >= prev_end, "worlds overlap");
        prev_end = r.end;
        assert_eq!((r.end - r.start) as usize, s.x.len());
        for (p, q) in all[r.start as usize..r.end as usize].iter().zip(&s.x) {
            assert_eq!([p[0] as f64, p[1] as f64, p[2] as f64], q.to_array());
            assert_eq!(p[3], 1.0);
        }
    }
    assert!(b.world_range(worlds.len()).is_err());
}

/// What cannot share a batch is refused with a typed error that says why, before any
/// device work: no worlds, different integrators, DDEF with the all-pairs sum, the
/// Delaunay grid.
#[test]
fn worlds_that_cannot_share_a_batch_are_refused() {
    let (a, ca) = scene("torus", &[]);
    let (b, cb) = scene("torus", &["integrator.method = \"verlet\""]);
    let (d, cd) = scene(
        "torus",
        &[
            "coulomb.method = \"ddef\"",
            "coulomb.ddef_grid = \"delaunay\"",
        ],
    );
    let (l, cl) = scene("torus", &["coulomb.method = \"ddef\""]);
    let e = GpuWorlds::headless(&[(&a, &ca), (&l, &cl)], &OPTIONS)
        .err()
        .unwrap();
    // Named in scene keys: what world 1 has, not world 0's.
    assert!(
        matches!(&e, GpuError::Worlds(m) if m.contains("world 1")
            && m.contains("(coulomb.method ddef, not all_pairs)")),
        "{e}"
    );
    assert!(BatchKey::of(&cl).is_ok_and(|k| k.ddef));
    let e = GpuWorlds::headless(&[], &OPTIONS).err().unwrap();
    assert!(matches!(e, GpuError::Worlds(_)), "{e}");
    let e = GpuWorlds::headless(&[(&a, &ca), (&b, &cb)], &OPTIONS)
        .err()
        .unwrap();
    assert!(
        matches!(&e, GpuError::Worlds(m) if m.contains("world 1")
            && m.contains("(integrator.method verlet, not imex)")),
        "{e}"
    );
    let e = GpuWorlds::headless(&[(&a, &ca), (&d, &cd)], &OPTIONS)
        .err()
        .unwrap();
    assert!(
        matches!(&e, GpuError::Unsupported(m) if m.contains("ddef_grid = \"lattice\"")),
        "{e}"
    );
    assert!(BatchKey::of(&cd).is_err());
    assert_eq!(
        BatchKey::of(&ca).unwrap(),
        BatchKey::of(&ca.clone()).unwrap()
    );
}

/// DDEF worlds (each its own plan, m, variant, softening and charges; one without a
/// charge) step in a batch exactly as alone: bit for bit, with their energies, and the
/// same plans and evaluations.
#[test]
fn ddef_worlds_step_as_they_do_alone_bit_for_bit() {
    let ddef = |extra: &[&str]| -> (System, Config) {
        let mut sets = vec![
            "coulomb.method = \"ddef\"",
            "integrator.solver.method = \"jacobi\"",
            "integrator.solver.iterations = 20",
        ];
        sets.extend_from_slice(extra);
        scene("torus", &sets)
    };
    let worlds = vec![
        ddef(&[]),
        ddef(&[
            "coulomb.samples = 40",
            "material.charge = 3e-6",
            "coulomb.softening = 0.01",
        ]),
        ddef(&[
            "coulomb.ddef_variant = \"paper\"",
            "mesh.rings = 40",
            "mesh.sides = 8",
        ]),
        ddef(&["material.charge = 0.0"]),
        ddef(&["coulomb.samples = 0"]),
    ];
    let steps = 12;
    let Some(mut b) = batch(&worlds) else {
        return;
    };
    b.advance(steps).unwrap();
    let states = b.read_states().unwrap();
    let energies = b.read_energies().unwrap();
    for (w, (system, config)) in worlds.iter().enumerate() {
        let (state, e, _) = alone(system, config, steps).unwrap();
        assert!(same_bits(&states[w], &state), "world {w}: state");
        assert_eq!(energies[w], e, "world {w}: energies");
        let counts = b.ddef_counts(w).unwrap().unwrap();
        assert_eq!(counts.evaluations, steps, "world {w}");
        assert_eq!(counts.rebuilds, 1, "world {w}");
    }
}

/// `fitting` cuts a list of worlds where the next would exceed a buffer limit, and a
/// device with WebGPU's default limits (8 storage buffers per stage) gets a typed limit
/// error, not a panic, when the batch needs more.
#[test]
fn batches_are_cut_to_the_limits() {
    let worlds: Vec<(System, Config)> = (0..40).map(|_| scene("torus", &[])).collect();
    let refs: Vec<(&System, &Config)> = worlds.iter().map(|(s, c)| (s, c)).collect();
    // WebGPU's defaults lack the storage buffers a batch binds: nothing fits.
    assert_eq!(GpuWorlds::fitting(&wgpu::Limits::default(), &refs), 0);
    let mut limits = wgpu::Limits {
        max_storage_buffers_per_shader_stage: 32,
        ..wgpu::Limits::default()
    };
    assert_eq!(GpuWorlds::fitting(&limits, &refs), 40);
    // 145 particles pad to 256 slots: 4 KiB of positions per world.
    limits.max_storage_buffer_binding_size = 10 * 4096 + 100;
    let k = GpuWorlds::fitting(&limits, &refs);
    assert!((1..40).contains(&k), "{k}");
    if let Some((device, queue)) = common::device() {
        match GpuWorlds::new(&device, &queue, &refs[..2]) {
            Ok(b) => assert_eq!(b.len(), 2),
            Err(GpuError::LimitExceeded { what, .. }) => {
                assert!(what.contains("storage buffers"), "{what}")
            }
            Err(e) => panic!("{e}"),
        }
    } else {
        assert!(!require_gpu());
    }
}

/// `fitting` never accepts what `new` refuses on a device with the same limits: devices
/// opened with lowered limits (buffer sizes, workgroups per dimension) take exactly the
/// batch `fitting` allows for them, and one world more fails with a typed limit error
/// where a limit (not the batch byte budget) is what stopped `fitting`.
#[test]
fn what_fitting_accepts_a_device_with_those_limits_builds() {
    let Some(adapter) = common::adapter() else {
        assert!(!require_gpu());
        return;
    };
    let worlds: Vec<(System, Config)> = (0..12)
        .map(|_| scene("torus", &["coulomb.method = \"all_pairs\""]))
        .collect();
    let refs: Vec<(&System, &Config)> = worlds.iter().map(|(s, c)| (s, c)).collect();
    // The library's own wgpu, as a caller passing its device names it.
    use msc::wgpu;
    let full = adapter.limits();
    let variants = [
        // 145 particles pad to 256 slots, one workgroup each: 2 x 2 groups per dispatch.
        wgpu::Limits {
            max_compute_workgroups_per_dimension: 2,
            ..full.clone()
        },
        // About five worlds' positions.
        wgpu::Limits {
            max_storage_buffer_binding_size: 5 * 4096 + 100,
            ..full.clone()
        },
    ];
    for limits in variants {
        let k = GpuWorlds::fitting(&limits, &refs);
        assert!((1..refs.len()).contains(&k), "{k} of {}", refs.len());
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("msc test: lowered limits"),
            required_features: wgpu::Features::empty(),
            required_limits: limits.clone(),
            ..Default::default()
        }))
        .expect("a device with lowered limits");
        let b = GpuWorlds::new(&device, &queue, &refs[..k])
            .unwrap_or_else(|e| panic!("fitting said {k} worlds fit: {e}"));
        assert_eq!(b.len(), k);
        match GpuWorlds::new(&device, &queue, &refs[..k + 1]) {
            Err(GpuError::LimitExceeded { .. }) => {}
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("{} worlds built beyond the limits", k + 1),
        }
    }
}

/// The same for DDEF worlds, whose gather, far field and scans have grids of their own
/// (a 145-charge torus: 258 gather work items): with 50 workgroups per dimension `fitting`
/// allows a few of 12 and that batch builds, while all 12 need more and are refused with a
/// typed limit error. (`fitting` counted only the per-particle grids: it allowed all 12.)
#[test]
fn what_fitting_accepts_of_ddef_worlds_builds() {
    let Some(adapter) = common::adapter() else {
        assert!(!require_gpu());
        return;
    };
    use msc::wgpu;
    let worlds: Vec<(System, Config)> = (0..12)
        .map(|_| scene("torus", &["coulomb.method = \"ddef\""]))
        .collect();
    let refs: Vec<(&System, &Config)> = worlds.iter().map(|(s, c)| (s, c)).collect();
    let limits = wgpu::Limits {
        max_compute_workgroups_per_dimension: 50,
        ..adapter.limits()
    };
    let k = GpuWorlds::fitting(&limits, &refs);
    assert!((1..refs.len()).contains(&k), "{k} of {}", refs.len());
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("msc test: lowered limits"),
        required_features: wgpu::Features::empty(),
        required_limits: limits,
        ..Default::default()
    }))
    .expect("a device with lowered limits");
    let b = GpuWorlds::new(&device, &queue, &refs[..k])
        .unwrap_or_else(|e| panic!("fitting said {k} worlds fit: {e}"));
    assert_eq!(b.len(), k);
    match GpuWorlds::new(&device, &queue, &refs) {
        Err(GpuError::LimitExceeded { what, .. }) => {
            assert!(what.contains("per dimension"), "{what}")
        }
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("12 DDEF worlds built beyond the limits"),
    }
}

/// A DDEF world that diverges (stiff springs under explicit Verlet: its charges leave
/// f32 over the steps, its box re-planned at each read as it grows) does not stop the
/// batch: its own energies or state go non-finite while the other world steps on as it
/// does alone, bit for bit. A fit's starts run as such a batch: a re-plan error there
/// would lose every start to one.
#[test]
fn a_diverging_ddef_world_does_not_stop_the_others() {
    let ddef = |extra: &[&str]| -> (System, Config) {
        let mut sets = vec![
            "coulomb.method = \"ddef\"",
            "integrator.method = \"verlet\"",
            "integrator.dt = 0.001",
        ];
        sets.extend_from_slice(extra);
        scene("torus", &sets)
    };
    let worlds = vec![ddef(&[]), ddef(&["material.stiffness = 1e6"])];
    let Some(mut b) = batch(&worlds) else {
        return;
    };
    let steps = 200;
    for _ in 0..steps / 5 {
        b.advance(5).unwrap();
        b.read_energies().unwrap();
    }
    let states = b.read_states().unwrap();
    let energies = b.read_energies().unwrap();
    assert!(
        !states[1].is_finite() || !energies[1].total.is_finite(),
        "world 1 diverged: {:?}",
        energies[1]
    );
    let replans = b.ddef_counts(1).unwrap().unwrap().rebuilds;
    assert!(
        replans > 1,
        "world 1's growing box was re-planned: {replans} plans"
    );
    let (state, e, _) = alone(&worlds[0].0, &worlds[0].1, steps).unwrap();
    assert!(same_bits(&states[0], &state), "world 0 steps as alone");
    assert_eq!(energies[0], e, "world 0: energies");
}
