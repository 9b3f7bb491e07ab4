//! `msc sweep` batching on the GPU end to end: runs stepped together as a batch of worlds
//! write the same files with the same values as `--no-batch` (timings aside), and a
//! batched sweep resumes without redoing complete runs. Skipped without a GPU adapter,
//! failing instead when `MSC_REQUIRE_GPU=1`.

mod common;

use common::{comparable_table, gpu_available, msc, read_json, stderr, stdout, tiny};
use std::path::{Path, PathBuf};
use std::process::Output;

/// The summary fields that two runs of the same scene on the same device may differ in:
/// wall-clock timings (seen differing between two `--no-batch` sweeps).
const TIMINGS: [&str; 3] = ["setup_seconds", "wall_seconds", "ms_per_step"];

/// Every file under `dir`, relative, sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    out.sort();
    out
}

fn without_timings(path: &Path) -> serde_json::Value {
    let mut v = read_json(path);
    for key in TIMINGS {
        v.as_object_mut().unwrap().remove(key);
    }
    v
}

/// Asserts that the batch folders `a` and `b` hold the same files, each byte for byte
/// equal except the timings of `summary.json` and `runs.csv`.
fn assert_same_batch(a: &Path, b: &Path) {
    let (fa, fb) = (files(a), files(b));
    assert_eq!(
        fa,
        fb,
        "{} and {} hold other files",
        a.display(),
        b.display()
    );
    assert!(fa.iter().any(|p| p.ends_with("frames/frame_000000.ply")));
    for f in &fa {
        let (pa, pb) = (a.join(f), b.join(f));
        let name = f.file_name().unwrap().to_string_lossy();
        if name == "summary.json" {
            assert_eq!(
                without_timings(&pa),
                without_timings(&pb),
                "{}",
                f.display()
            );
        } else if name == "runs.csv" {
            let read = |p: &Path| comparable_table(&std::fs::read_to_string(p).unwrap());
            assert_eq!(read(&pa), read(&pb));
        } else {
            let same = std::fs::read(&pa).unwrap() == std::fs::read(&pb).unwrap();
            assert!(same, "{} differs", f.display());
        }
    }
}

/// An explicit sweep over two integrators (two batches: they differ in their kernels)
/// and three time steps, of which h = 0.1 s diverges (k = 1e4 N/m on 0.1 kg: h omega ~
/// 30, far beyond the explicit limit of 2), with PLY frames.
fn sweep(tmp: &Path, scene: &Path, out: &str, extra: &[&str]) -> Output {
    let out = tmp.join(out);
    let mut args = vec![
        "sweep",
        scene.to_str().unwrap(),
        "--vary",
        "integrator.method=verlet,symplectic_euler",
        "--vary",
        "integrator.dt=0.001,0.002,0.1",
        "--set",
        "material.stiffness=1e4",
        "--set",
        "output.frames=\"ply\"",
        "--steps",
        "40",
        "--backend",
        "gpu",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let o = msc(&args, tmp);
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    o
}

#[test]
fn a_batched_gpu_sweep_writes_what_one_run_at_a_time_writes() {
    if !gpu_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let scene = tiny(tmp.path());
    let alone = sweep(tmp.path(), &scene, "alone", &["--no-batch"]);
    let again = sweep(tmp.path(), &scene, "again", &["--no-batch"]);
    let batched = sweep(tmp.path(), &scene, "batched", &[]);
    for o in [&alone, &again, &batched] {
        // Two runs diverge: exit 1 after every run was tried.
        assert_eq!(o.status.code(), Some(1), "{}", stderr(o));
        // Progress counts runs: done / total (diverged runs' lines go to stderr).
        let said = stdout(o) + &stderr(o);
        assert!(said.contains("[6/6]"), "{said}");
    }
    // The harness: two sweeps one at a time differ in their timings only.
    assert_same_batch(&tmp.path().join("alone"), &tmp.path().join("again"));
    assert!(!stdout(&alone).contains("stepped together"));
    // Batched: each integrator's three runs stepped together, and every output is the
    // same as one at a time.
    let together = stdout(&batched).matches("3 runs stepped together").count();
    assert_eq!(together, 2, "{}", stdout(&batched));
    assert_same_batch(&tmp.path().join("alone"), &tmp.path().join("batched"));
    // Two workers on the one device: the two batches dealt one to each, same files.
    let workers = sweep(tmp.path(), &scene, "workers", &["--devices", "2"]);
    assert_eq!(workers.status.code(), Some(1), "{}", stderr(&workers));
    let together = stdout(&workers).matches("3 runs stepped together").count();
    assert_eq!(together, 2, "{}", stdout(&workers));
    assert_same_batch(&tmp.path().join("alone"), &tmp.path().join("workers"));
    let diverged = read_json(
        &tmp.path()
            .join("batched/integrator.method=verlet__integrator.dt=0.1/summary.json"),
    );
    assert_eq!(diverged["finite"], false);
}

/// Modification time and size of a file.
fn stamp(path: &Path) -> (std::time::SystemTime, u64) {
    let m = std::fs::metadata(path).unwrap();
    (m.modified().unwrap(), m.len())
}

#[test]
fn a_batched_sweep_resumes_without_redoing_complete_runs() {
    if !gpu_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let scene = tiny(tmp.path());
    let out = tmp.path().join("sweep");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "sweep",
            scene.to_str().unwrap(),
            "--vary",
            "material.charge=1e-6,2e-6,3e-6,4e-6",
            "--steps",
            "20",
            "--backend",
            "gpu",
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let o = msc(&args, tmp.path());
        assert!(o.status.success(), "{}", stderr(&o));
        o
    };
    run(&[]);
    let names = [
        "material.charge=1e-6",
        "material.charge=2e-6",
        "material.charge=3e-6",
        "material.charge=4e-6",
    ];
    // Two runs killed before their summaries were written.
    for n in [names[1], names[3]] {
        std::fs::remove_file(out.join(n).join("summary.json")).unwrap();
    }
    let stamps = || -> Vec<_> {
        [names[0], names[2]]
            .iter()
            .flat_map(|n| {
                ["summary.json", "energy.csv", "scene.toml"].map(|f| stamp(&out.join(n).join(f)))
            })
            .collect()
    };
    let before = stamps();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let o = run(&[]);
    assert_eq!(before, stamps(), "complete runs were rewritten");
    // The two runs to redo stepped together.
    assert!(
        stdout(&o).contains("2 runs stepped together"),
        "{}",
        stdout(&o)
    );
    let table = std::fs::read_to_string(out.join("runs.csv")).unwrap();
    let mut lines = table.lines();
    let header = msc::batch::record::parse_csv_line(lines.next().unwrap());
    let col = header.iter().position(|h| h == "skipped").unwrap();
    let skipped: Vec<String> = lines
        .map(|l| msc::batch::record::parse_csv_line(l)[col].clone())
        .collect();
    assert_eq!(skipped, ["true", "false", "true", "false"], "{table}");
    for n in [names[1], names[3]] {
        assert_eq!(read_json(&out.join(n).join("summary.json"))["steps"], 20);
    }
    // The redone runs are those of a sweep one at a time.
    let alone = tmp.path().join("alone");
    let o = msc(
        &[
            "sweep",
            scene.to_str().unwrap(),
            "--vary",
            "material.charge=1e-6,2e-6,3e-6,4e-6",
            "--steps",
            "20",
            "--backend",
            "gpu",
            "--no-batch",
            "--out",
            alone.to_str().unwrap(),
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    for n in names {
        let a = std::fs::read(out.join(n).join("energy.csv")).unwrap();
        let b = std::fs::read(alone.join(n).join("energy.csv")).unwrap();
        assert!(a == b, "{n}: energy.csv differs");
    }
}

/// DDEF runs (every stage on the device) step together as the all-pairs runs do, in a
/// batch of their own; every file is that of the sweep one at a time.
#[test]
fn ddef_runs_step_together_in_a_batched_sweep() {
    if !gpu_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let scene = tiny(tmp.path());
    let run = |out: &str, extra: &[&str]| {
        let out = tmp.path().join(out);
        let mut args = vec![
            "sweep",
            scene.to_str().unwrap(),
            "--vary",
            "coulomb.method=\"all_pairs\",\"ddef\"",
            "--vary",
            "material.charge=1e-6,2e-6",
            "--set",
            "output.frames=\"ply\"",
            "--steps",
            "10",
            "--backend",
            "gpu",
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let o = msc(&args, tmp.path());
        assert!(o.status.success(), "{}", stderr(&o));
        o
    };
    let batched = run("batched", &[]);
    run("alone", &["--no-batch"]);
    let said = stdout(&batched);
    assert_eq!(said.matches("2 runs stepped together").count(), 2, "{said}");
    assert_same_batch(&tmp.path().join("alone"), &tmp.path().join("batched"));
    for charge in ["1e-6", "2e-6"] {
        let dir = format!("batched/coulomb.method=ddef__material.charge={charge}");
        let s = read_json(&tmp.path().join(dir).join("summary.json"));
        assert_eq!(s["coulomb"], "ddef");
        assert!(s["ddef"].is_object(), "{s}");
    }
}
