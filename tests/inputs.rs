//! Inputs that used to be corrupted silently or crash the process: OBJ coordinates read
//! in f32, coincident charges dropped, values beyond f32 on the GPU, meshes too large for
//! memory or for the GPU's buffers. Each must give the f64 value, a typed error (exit 2)
//! naming the problem, or a divergence (exit 1).

mod common;

use common::{gpu, msc, read_json, require_gpu, skip_no_adapter, stderr};
use glam::DVec3;
use msc::config::{Config, ExternalCharge, Integrator, Orbit};
use msc::cpu::CpuSimulation;
use msc::model::{System, SystemDesc};
use msc::Simulator;
use std::path::Path;
use std::time::{Duration, Instant};

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

/// A scene of the OBJ file `mesh.obj` beside it, charged, two steps, no frames.
fn obj_scene(dir: &Path, obj: &str) {
    write(dir, "mesh.obj", obj);
    write(
        dir,
        "scene.toml",
        "[mesh]\nkind = \"obj\"\npath = \"mesh.obj\"\n\
         [material]\ncharge = 1e-9\n\
         [integrator]\ndt = 0.001\nsteps = 2\n\
         [output]\nframes = \"none\"\n",
    );
}

/// Vertices 1 and 2 (particles 0 and 1) are 1e-9 m apart.
const NEAR_DUPLICATES: &str = "v 1 0 0\nv 1.000000001 0 0\nv 0 1 0\nv 0 0 1\nf 1 2 3\nf 1 2 4\n";

#[test]
fn obj_coordinates_are_parsed_in_f64() {
    let dir = tempfile::tempdir().unwrap();
    let obj = "v 1 0 0\nv 1.000000001 0 0\nv 0.1000000000000000055 0.123456789012345678 0\n\
               v 0 0 1\nf 1 2 3\nf 1 2 4\n";
    write(dir.path(), "m.obj", obj);
    let mesh = msc::model::mesh::obj(&dir.path().join("m.obj"), 1.0).unwrap();
    // f32 parsing merged vertices 1 and 2 and rounded 0.1 to 0.10000000149.
    assert_eq!(mesh.positions.len(), 4);
    assert_eq!(mesh.positions[1].x, 1.000000001);
    assert_eq!(mesh.positions[2].x, 0.1);
    assert_eq!(
        mesh.positions[2].y,
        "0.123456789012345678".parse::<f64>().unwrap()
    );
    // Equal coordinates (0 and -0 included) still merge into one particle.
    write(
        dir.path(),
        "dup.obj",
        "v 0 0 0\nv -0 0 0\nv 1 0 0\nv 0 1 0\nf 1 3 4\nf 2 3 4\n",
    );
    let dup = msc::model::mesh::obj(&dir.path().join("dup.obj"), 1.0).unwrap();
    assert_eq!(dup.positions.len(), 3);

    // Through `msc run`: four particles, 1e-9 m apart at the closest, run on the CPU.
    obj_scene(dir.path(), NEAR_DUPLICATES);
    let o = msc(
        &[
            "run",
            "scene.toml",
            "--backend",
            "cpu",
            "--quiet",
            "--out",
            "out",
        ],
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let summary = read_json(&dir.path().join("out/summary.json"));
    assert_eq!(summary["particles"], 4);
    assert_eq!(summary["finite"], true);
}

#[test]
fn coincident_charges_are_refused_at_load_unless_softened() {
    let dir = tempfile::tempdir().unwrap();
    // Charges 1e-170 m apart: r^2 = 1e-340 underflows to 0 in f64 and the pair was dropped.
    let tiny = [
        "run",
        "cloth",
        "--set",
        "mesh.size=[1e-170, 1e-170]",
        "--set",
        "mesh.resolution=[2, 2]",
        "--set",
        "material.charge=1e-6",
        "--set",
        "coulomb.method=\"all_pairs\"",
        "--backend",
        "cpu",
        "--steps",
        "3",
        "--quiet",
        "--out",
        "out",
    ];
    let o = msc(&tiny, dir.path());
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("coulomb.softening")
            && err.contains("charged particles 0 and 1")
            && err.contains("1e-170 m apart"),
        "{err}"
    );
    // With a softening length the softened law applies to every pair: it runs.
    let mut soft = tiny.to_vec();
    soft.extend(["--set", "coulomb.softening=1e-3"]);
    let o = msc(&soft, dir.path());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        read_json(&dir.path().join("out/summary.json"))["finite"],
        true
    );
}

#[test]
fn an_external_charge_on_a_particle_is_refused_at_load() {
    let dir = tempfile::tempdir().unwrap();
    // Particle 0 of the built-in torus is at (5.5, 0, 0): the charge's force on it was
    // dropped and the run blew up with exit 0.
    let o = msc(
        &[
            "run",
            "torus",
            "--set",
            "external_charges=[{charge = -1e-6, position = [5.5, 0.0, 0.0]}]",
            "--backend",
            "cpu",
            "--steps",
            "3",
            "--quiet",
            "--out",
            "out",
        ],
        dir.path(),
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("external_charges[0].position")
            && err.contains("external charge 0 is 0 m from charged particle 0"),
        "{err}"
    );
}

/// Two pinned charged particles: particle 0 moves at 1 m/s towards particle 1, 1 m away
/// (or, with `external`, particle 1 is an external charge), so they meet exactly (in f32
/// and f64) after four steps of 0.25 s.
fn meeting_system(external: bool) -> (System, Config) {
    let n = if external { 1 } else { 2 };
    let system = System::new(SystemDesc {
        positions: [DVec3::ZERO, DVec3::X][..n].to_vec(),
        velocities: [DVec3::X, DVec3::ZERO][..n].to_vec(),
        masses: vec![0.1; n],
        charges: vec![1e-6; n],
        pinned: vec![true; n],
        ..Default::default()
    })
    .unwrap();
    let config = Config {
        integrator: Integrator::SymplecticEuler,
        dt: 0.25,
        external_charges: if external {
            vec![ExternalCharge {
                charge: -1e-6,
                position: DVec3::X,
                orbit: None,
            }]
        } else {
            vec![]
        },
        ..Config::default()
    };
    (system, config)
}

#[test]
fn charges_that_meet_during_a_run_diverge_on_both_backends() {
    for external in [false, true] {
        let (system, config) = meeting_system(external);
        let mut cpu = CpuSimulation::new(&system, &config).unwrap();
        cpu.step(3).unwrap();
        assert!(cpu.energies().unwrap().is_finite(), "external: {external}");
        cpu.step(1).unwrap();
        assert_eq!(cpu.current().x[0], DVec3::X);
        assert!(!cpu.energies().unwrap().is_finite(), "external: {external}");
        if let Some(mut g) = gpu(&system, &config) {
            g.step(3).unwrap();
            assert!(g.energies().unwrap().is_finite(), "external: {external}");
            g.step(1).unwrap();
            assert_eq!(g.state().unwrap().x[0], DVec3::X);
            assert!(!g.energies().unwrap().is_finite(), "external: {external}");
        }
    }
}

#[test]
fn an_orbiting_charge_reaching_a_particle_makes_the_run_diverge() {
    // A pinned charged particle exactly where the orbiting charge is at step 3: 0.2 m
    // away at t = 0 (accepted), coincident at t = 3 h (non-finite, never dropped).
    let ext = ExternalCharge {
        charge: -1e-6,
        position: DVec3::new(0.2, 0.0, 0.0),
        orbit: Some(Orbit {
            center: DVec3::ZERO,
            axis: DVec3::Z,
            angular_velocity: 2.0,
        }),
    };
    let h = 0.1;
    let system = System::new(SystemDesc {
        positions: vec![ext.position_at(3.0 * h)],
        masses: vec![0.1],
        charges: vec![1e-6],
        pinned: vec![true],
        ..Default::default()
    })
    .unwrap();
    let config = Config {
        dt: h,
        external_charges: vec![ext],
        ..Config::default()
    };
    let mut cpu = CpuSimulation::new(&system, &config).unwrap();
    cpu.step(2).unwrap();
    assert!(cpu.energies().unwrap().is_finite());
    cpu.step(1).unwrap();
    assert!(!cpu.energies().unwrap().is_finite());
}

/// `msc run ... --backend gpu`, or `None` (skipped) when there is no adapter.
fn run_gpu(args: &[&str], dir: &Path) -> Option<(Option<i32>, String)> {
    let mut all = vec!["run"];
    all.extend(args);
    all.extend([
        "--backend",
        "gpu",
        "--steps",
        "3",
        "--quiet",
        "--out",
        "out",
    ]);
    let o = msc(&all, dir);
    let err = stderr(&o);
    if err.contains("no GPU adapter") {
        skip_no_adapter(&format!(": {err}"));
        return None;
    }
    Some((o.status.code(), err))
}

#[test]
fn gpu_inputs_beyond_f32_are_refused_naming_the_value() {
    let dir = tempfile::tempdir().unwrap();
    // Corners at +-1e30 m: squared spring lengths overflow f32 (it diverged at step 0).
    let Some((code, err)) = run_gpu(&["cloth", "--set", "mesh.size=[2e30, 2e30]"], dir.path())
    else {
        return;
    };
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("position of particle 0 (x) = -1e30") && err.contains("f32"),
        "{err}"
    );
    // 1e15 C per particle: q sqrt(k_c) fits f32 but k_c q_i q_j = 9e39 does not.
    let (code, err) = run_gpu(&["torus", "--set", "material.charge=1e15"], dir.path()).unwrap();
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("Coulomb product k_c q_i q_j of particles 0 and 1 = 8.98755"),
        "{err}"
    );
    // Charges 1e-9 m apart are distinct in f64 but one point in f32.
    obj_scene(dir.path(), NEAR_DUPLICATES);
    let (code, err) = run_gpu(&["scene.toml"], dir.path()).unwrap();
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("charged particles 0 and 1 are 0 m apart at f32 precision"),
        "{err}"
    );
}

#[test]
fn a_mesh_too_large_for_memory_is_a_typed_error_before_it_is_built() {
    let dir = tempfile::tempdir().unwrap();
    let start = Instant::now();
    // 1.6e9 particles: building it aborted the process on a failed allocation (exit 134).
    let o = msc(
        &[
            "run",
            "cloth",
            "--set",
            "mesh.resolution=[40000, 40000]",
            "--backend",
            "cpu",
            "--quiet",
            "--out",
            "out",
        ],
        dir.path(),
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("mesh.resolution")
            && err.contains("the grid mesh has 1600000000 particles")
            && err.contains("host memory"),
        "{err}"
    );
    // Refused from the estimate, before allocating (generous bound for a loaded machine).
    assert!(
        start.elapsed() < Duration::from_secs(60),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn a_mesh_beyond_the_gpu_buffer_limits_is_refused_before_it_is_built() {
    let Ok((name, limits)) = msc::gpu::headless_adapter_limits(&msc::gpu::HeadlessOptions {
        allow_software: true,
    }) else {
        skip_no_adapter("");
        return;
    };
    // The smallest square `cloth` (shear and bending springs, about 6 per particle) whose
    // spring-block buffer (32 bytes per spring) exceeds the adapter's binding limit.
    let cloth = msc::scene::load("cloth", &[]).unwrap().config;
    let fits = |r: u64| {
        let springs = msc::model::MeshCounts::grid([r as u32; 2], true, true).edges;
        msc::gpu::limits::oversized_buffer(&limits, r * r, springs, r * r, &cloth).is_none()
    };
    let mut r = 64;
    while fits(r) {
        r += r / 8;
    }
    // It must fit the host estimate with room to spare, or the test cannot tell the two.
    let host = msc::model::MeshCounts::grid([r as u32; 2], true, true);
    let host_bytes = 600 * host.vertices + 200 * host.edges;
    if msc::scene::available_memory().is_some_and(|a| host_bytes > a / 4) {
        assert!(
            !require_gpu() || r > 4096,
            "lavapipe's limits fit a small mesh"
        );
        eprintln!("skipping: {name}'s buffer limits need a {r} x {r} mesh, too large here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let res = format!("mesh.resolution=[{r}, {r}]");
    let (code, err) = run_gpu(&["cloth", "--set", &res], dir.path()).unwrap();
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!("the grid mesh has {} particles", r * r))
            && err.contains(&format!("GPU adapter '{name}'"))
            && err.contains("max_"),
        "{err}"
    );
    // The same scene is within the host estimate: the CPU backend would accept it.
    assert!(!err.contains("host memory"), "{err}");
}
