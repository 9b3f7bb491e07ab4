//! An error of one world of a batch names the world (its index, and its run or scene
//! where the caller named it): in a batch of many worlds the user must know which one to
//! fix. Each test puts one bad world at index 2 of 4.

mod common;

use common::{at_10_ms, msc, pair, stdout, tiny};
use msc::config::{Config, CoulombConfig, CoulombMethod, DdefConfig, DdefGrid, WorldConfig};
use msc::gpu::{GpuError, GpuWorlds, HeadlessOptions};
use msc::model::System;

/// Worlds 0, 1 and 3 of `good`, world 2 of `bad`, on one system.
fn worlds<'a>(s: &'a System, good: &'a Config, bad: &'a Config) -> Vec<(&'a System, &'a Config)> {
    vec![(s, good), (s, good), (s, bad), (s, good)]
}

const SOFTWARE: HeadlessOptions = HeadlessOptions {
    allow_software: true,
};

/// A configuration value one world's system cannot take (a drag the explicit step makes
/// unstable for its 1 kg particles) named the scene key but not the world. The inputs
/// are checked before an adapter is opened, so this needs no device.
#[test]
fn a_bad_configuration_in_one_world_names_the_world() {
    let s = pair();
    let good = at_10_ms();
    let bad = Config {
        world: WorldConfig { drag: 1e3 }, // c dt / m = 10: unstable from 2 on
        ..at_10_ms()
    };
    let names: Vec<_> = ["a", "b", "c", "d"]
        .map(|n| Some(format!("scene '{n}'")))
        .into();
    for (named, world) in [(false, "world 2,"), (true, "world 2 (scene 'c'),")] {
        let built = match named {
            false => GpuWorlds::headless(&worlds(&s, &good, &bad), &SOFTWARE),
            true => GpuWorlds::headless_named(&worlds(&s, &good, &bad), &names, &SOFTWARE),
        };
        match built {
            Err(GpuError::Config(c)) => {
                assert_eq!(c.key, "world.drag");
                assert!(c.message.contains(world), "{c}");
            }
            Err(e) => panic!("expected a configuration error naming {world}, got {e}"),
            Ok(_) => panic!("expected a configuration error naming {world}, got a batch"),
        }
    }
}

/// A world the GPU cannot run at all (DDEF on the Delaunay grid) named the grid but not
/// the world. It stays `Unsupported`, which `--backend auto` falls back from.
#[test]
fn a_world_the_gpu_cannot_run_names_the_world() {
    let s = pair();
    let ddef = |grid| Config {
        coulomb: CoulombConfig {
            method: CoulombMethod::Ddef(DdefConfig {
                grid,
                ..DdefConfig::default()
            }),
            softening: 1e-3,
        },
        ..at_10_ms()
    };
    let (good, bad) = (ddef(DdefGrid::Lattice), ddef(DdefGrid::Delaunay));
    match GpuWorlds::headless(&worlds(&s, &good, &bad), &SOFTWARE) {
        Err(e @ GpuError::Unsupported(_)) => {
            assert!(e.to_string().contains("world 2, coulomb.ddef_grid"), "{e}")
        }
        Err(e) => panic!("expected Unsupported naming world 2, got {e}"),
        Ok(_) => panic!("expected Unsupported naming world 2, got a batch"),
    }
}

/// A limit one world's system exceeds on the device (all-pairs Coulomb over more charges
/// than a CPU adapter's loop budget) named the limit but not the world. Only a CPU
/// adapter (lavapipe) has that limit: elsewhere the batch builds.
#[test]
fn a_limit_one_world_exceeds_names_the_world() {
    use msc::gpu::limits::CPU_ADAPTER_ALL_PAIRS_CHARGES;
    let Some(adapter) = common::adapter() else {
        return;
    };
    let cpu = adapter.get_info().device_type == wgpu::DeviceType::Cpu;
    let Some((device, queue)) = common::device() else {
        return;
    };
    let n = CPU_ADAPTER_ALL_PAIRS_CHARGES as usize + 1;
    let line = common::charged_line(n);
    let small = pair();
    let config = common::all_pairs_config();
    let batch = [
        (&small, &config),
        (&small, &config),
        (&line, &config),
        (&small, &config),
    ];
    match GpuWorlds::new(&device, &queue, &batch) {
        Err(GpuError::LimitExceeded { what, needed, .. }) if cpu => {
            assert_eq!(needed, n as u64);
            assert!(what.starts_with("world 2, all-pairs Coulomb"), "{what}");
        }
        Ok(_) if !cpu => {}
        Err(e) => panic!("cpu adapter {cpu}: expected the limit naming world 2, got {e}"),
        Ok(_) => panic!("cpu adapter: expected the limit naming world 2, got a batch"),
    }
}

/// `msc batch --backend gpu` of four runs of the tiny torus, the third ("c") with a
/// softening the f64 reference takes but f32 cannot hold squared (1e-50): the chunk of
/// four cannot be built as one batch. (Planning refuses what every backend refuses, such
/// as an unstable drag: see `a_drag_no_backend_takes_stops_the_plan_naming_the_run`.)
/// `None` without an adapter (the test is skipped).
fn batch_with_a_bad_run(tmp: &std::path::Path) -> Option<std::process::Output> {
    if !common::gpu_available() {
        return None;
    }
    tiny(tmp);
    let mut manifest = String::new();
    for name in ["a", "b", "c", "d"] {
        manifest.push_str(&format!(
            "[[runs]]\nscene = \"tiny.toml\"\nname = \"{name}\"\n"
        ));
        if name == "c" {
            manifest.push_str("set = [\"coulomb.softening=1e-25\"]\n");
        }
    }
    std::fs::write(tmp.join("runs.toml"), manifest).unwrap();
    let args = [
        "batch",
        "runs.toml",
        "--backend",
        "gpu",
        "--steps",
        "5",
        "--out",
        "out",
    ];
    Some(msc(&args, tmp))
}

/// The chunk then ran one at a time with a note quoting the error without the run (the
/// chunk's world index would not name it either); the note names the run.
#[test]
fn a_batch_note_names_the_run_of_the_bad_world() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(o) = batch_with_a_bad_run(tmp.path()) else {
        return;
    };
    let out = stdout(&o);
    let note = out
        .lines()
        .find(|l| l.contains("could not step as one batch"))
        .unwrap_or_else(|| panic!("no note of a batch that could not be built: {out}"));
    assert!(
        note.contains("world 2 (run 'c'), coulomb.softening squared"),
        "{note}"
    );
}

/// Run one at a time, only the bad run fails: every run failed, the good ones as "being
/// written by another msc process" (the batch still held their folders).
#[test]
fn a_chunk_that_cannot_be_built_runs_its_good_runs_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(o) = batch_with_a_bad_run(tmp.path()) else {
        return;
    };
    let (out, err) = (stdout(&o), common::stderr(&o));
    assert!(
        out.contains("4 runs: 3 ok, 0 diverged, 1 failed"),
        "{out}{err}"
    );
    assert!(err.contains("c: failed: "), "{err}");
    assert_eq!(o.status.code(), Some(1), "{err}");
}

/// A drag the scene's load accepts but the tiny torus's 0.1 kg particles cannot take
/// (c dt / m = 1e5, unstable from 2 on), in the third run: every backend refuses it
/// before the first step, so planning refuses it as it refuses the other configuration
/// errors (exit 2, naming the run and the key, nothing run). Before, the plan passed and
/// only that run failed, after the others had run. Any backend: the CPU needs no adapter.
#[test]
fn a_drag_no_backend_takes_stops_the_plan_naming_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    tiny(tmp.path());
    let mut manifest = String::new();
    for name in ["a", "b", "c", "d"] {
        manifest.push_str(&format!(
            "[[runs]]\nscene = \"tiny.toml\"\nname = \"{name}\"\n"
        ));
        if name == "c" {
            manifest.push_str("set = [\"world.drag=1e6\"]\n");
        }
    }
    std::fs::write(tmp.path().join("runs.toml"), manifest).unwrap();
    let args = ["batch", "runs.toml", "--backend", "cpu", "--out", "out"];
    let o = msc(&args, tmp.path());
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("run 'c' of the plan cannot start"), "{err}");
    assert!(err.contains("world.drag: c dt / m = "), "{err}");
    for name in ["a", "b", "c", "d"] {
        let dir = tmp.path().join("out").join(name);
        assert!(!dir.exists(), "{} was written: {err}", dir.display());
    }
}
