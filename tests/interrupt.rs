//! Stop requests on `msc run`, `msc sweep` and `msc fit`: a stop right after an output step
//! records that step once (its row and frame were written twice), alone or in a GPU batch
//! of worlds, a second signal, which ends the
//! process at once, never claims the clean status 130 ("every output written"), an
//! interrupted fit counts iterations, not steps, a killed fit keeps its iterations so far
//! in fit.json, a fit over a huge horizon stops within a step (on the GPU within a chunk
//! of about 50 ms), and a killed `msc bench`
//! keeps the rows it finished in `--out`.

#![cfg(unix)]

mod common;

use common::{gpu_available, msc, read_json, skip_no_adapter, stderr, stdout, tiny, tiny_run_args};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `msc run tiny.toml --out OUT` for very many steps, with `set` overrides, under way
/// (its energy log started) when this returns.
fn start(dir: &Path, out: &str, set: &[&str]) -> Child {
    tiny(dir);
    let mut args = tiny_run_args(out, set);
    args.extend(["--steps", "100000000"]);
    spawn_until_logging(dir, &args, &[dir.join(out)])
}

/// `msc ARGS` in `dir`, under way (every folder of `runs` has its energy log) when this
/// returns.
fn spawn_until_logging(dir: &Path, args: &[&str], runs: &[PathBuf]) -> Child {
    let child = Command::new(env!("CARGO_BIN_EXE_msc"))
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let logging = |run: &PathBuf| {
        std::fs::read_dir(run)
            .map(|d| {
                d.flatten()
                    .any(|e| e.file_name().to_string_lossy().contains("energy"))
            })
            .unwrap_or(false)
    };
    while !runs.iter().all(logging) {
        assert!(started.elapsed().as_secs() < 120, "the runs did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    child
}

fn signal(child: &Child, sig: &str) {
    let kill = Command::new("kill")
        .args([&format!("-{sig}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
}

/// With an output at every step, every stop lands right after one.
#[test]
fn a_stop_after_an_output_step_records_it_once() {
    let tmp = tempfile::tempdir().unwrap();
    let child = start(
        tmp.path(),
        "r",
        &["output.every=1", "output.frames=\"ply\""],
    );
    signal(&child, "INT");
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert_recorded_once(tmp.path(), "r");
}

/// The same on the GPU's batched worlds (a sweep stepping its runs together), which record
/// through the same driver as one run.
#[test]
fn a_stop_in_a_batch_of_worlds_records_each_step_once() {
    if !gpu_available() {
        skip_no_adapter("batched sweep");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    tiny(tmp.path());
    let args = [
        "sweep",
        "tiny.toml",
        "--vary",
        "integrator.dt=0.001,0.002",
        "--set",
        "output.every=1",
        "--set",
        "output.frames=\"ply\"",
        "--steps",
        "100000000",
        "--backend",
        "gpu",
        "--out",
        "s",
    ];
    let runs = ["s/integrator.dt=0.001", "s/integrator.dt=0.002"];
    let folders: Vec<PathBuf> = runs.iter().map(|r| tmp.path().join(r)).collect();
    let child = spawn_until_logging(tmp.path(), &args, &folders);
    signal(&child, "INT");
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert!(stdout(&o).contains("stepped together"), "{}", stdout(&o));
    for r in runs {
        assert_recorded_once(tmp.path(), r);
    }
}

/// Run folder `dir/run` of an interrupted run: each step's energy row and frame once, the
/// summary's step the last row's, and the log plots.
fn assert_recorded_once(dir: &Path, run: &str) {
    let run = dir.join(run);
    let csv = std::fs::read_to_string(run.join("energy.csv")).unwrap();
    let steps: Vec<u64> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').next().unwrap().parse().unwrap())
        .collect();
    assert!(
        steps.windows(2).all(|w| w[0] < w[1]),
        "{:?}",
        &steps[steps.len().saturating_sub(3)..]
    );
    let s = read_json(&run.join("summary.json"));
    assert_eq!(s["interrupted"], true);
    assert_eq!(s["steps"].as_u64(), steps.last().copied());
    let frames = std::fs::read_dir(run.join("frames")).unwrap().count();
    assert_eq!(frames, steps.len());
    assert_eq!(s["frames"].as_u64(), Some(steps.len() as u64));
    // The log plots: its times increase.
    let o = msc(&["plot", run.to_str().unwrap()], dir);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// 130 means every output is written; a second signal that ends the run at once exits
/// 137, the rows so far readable.
#[test]
fn a_second_signal_never_claims_the_clean_status() {
    let tmp = tempfile::tempdir().unwrap();
    let child = start(tmp.path(), "t", &["output.every=1000"]);
    signal(&child, "INT");
    std::thread::sleep(Duration::from_millis(5));
    signal(&child, "INT");
    let o = child.wait_with_output().unwrap();
    let run = tmp.path().join("t");
    match o.status.code() {
        // The clean stop finished before the second signal came.
        Some(130) => {
            assert!(run.join("summary.json").is_file() && run.join("energy.csv").is_file());
        }
        // Ended at once: the rows written so far are readable, in energy.csv or, when
        // the log was not finished, in its hidden temporary file.
        Some(137) => {
            let mut logs = common::leftover_temp_files(&run);
            logs.retain(|p| p.to_string_lossy().contains(".energy.csv.tmp-"));
            logs.push(run.join("energy.csv"));
            let rows = logs
                .iter()
                .filter_map(|p| std::fs::read_to_string(p).ok())
                .map(|t| t.lines().count())
                .max();
            assert!(rows.is_some_and(|n| n >= 2), "{logs:?}");
        }
        code => panic!("exit {code:?}: {}", stderr(&o)),
    }
}

/// `msc fit` (Adam, up to 1,000 iterations of about a tenth of a second each) of a torus
/// scene's charge to a run of it in `dir`, under way (its first iteration's progress line
/// read) when this returns; the rest of its stderr stays in the reader.
fn start_fit(dir: &Path) -> (Child, std::io::BufReader<std::process::ChildStderr>, String) {
    let scene = "[mesh]\nkind = \"torus\"\nmajor_radius = 4.0\nminor_radius = 1.5\nrings = 12\n\
                 sides = 6\n[material]\nmass = 0.1\nstiffness = 10.0\ncharge = 6e-6\n\
                 [integrator]\nmethod = \"imex\"\ndt = 0.015\nsteps = 2000\n\
                 [output]\nevery = 500\nframes = \"ply\"\n";
    std::fs::write(dir.join("t.toml"), scene).unwrap();
    let target = msc(
        &[
            "run",
            "t.toml",
            "--backend",
            "cpu",
            "--quiet",
            "--out",
            "target",
        ]
        .into_iter()
        .chain(["--set", "material.charge=7e-6"])
        .collect::<Vec<_>>(),
        dir,
    );
    assert!(target.status.success(), "{}", stderr(&target));
    let mut child = Command::new(env!("CARGO_BIN_EXE_msc"))
        .args([
            "fit",
            "t.toml",
            "--target",
            "target",
            "--param",
            "charge",
            "--backend",
            "cpu",
        ])
        .args(["--optimizer", "adam", "--max-iters", "1000", "--out", "fit"])
        .current_dir(dir)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The first iteration's progress line: the handler is installed, the fit under way.
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        let n = std::io::BufRead::read_line(&mut err, &mut line).unwrap();
        assert!(n > 0, "the fit ended before its first iteration:\n{seen}");
        seen.push_str(&line);
        if line.trim_start().starts_with("iter") {
            break;
        }
    }
    (child, err, seen)
}

/// A fit stops after the iteration under way and says which iteration (its message said
/// "step" and gave the iteration's number).
#[test]
fn an_interrupted_fit_names_the_iteration() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, mut err, seen) = start_fit(dir.path());
    signal(&child, "INT");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{seen}{rest}");
    assert!(rest.contains("interrupted after iteration"), "{seen}{rest}");
    let fit = read_json(&dir.path().join("fit/fit.json"));
    assert_eq!(fit["interrupted"], true);
}

/// A fit killed outright (SIGKILL: no handler runs) keeps fit.json as it was after its
/// first iteration, marked running, with that iteration's point as its result: before,
/// fit.json was written only when the fit stopped, so every iteration was lost.
#[test]
fn a_killed_fit_keeps_its_iterations_so_far() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, _err, _seen) = start_fit(dir.path());
    signal(&child, "KILL");
    child.wait().unwrap();
    let fit = read_json(&dir.path().join("fit/fit.json"));
    assert_eq!(fit["reason"], "running", "{fit}");
    assert_eq!(fit["interrupted"], false, "{fit}");
    assert_eq!(fit["converged"], false, "{fit}");
    let history = fit["history"].as_array().unwrap();
    assert!(!history.is_empty(), "{fit}");
    assert_eq!(history[0]["iteration"], 0, "{fit}");
    let last = history.last().unwrap();
    assert_eq!(fit["loss"], last["loss"], "{fit}");
    assert_eq!(fit["initial_loss"], history[0]["loss"], "{fit}");
    // The result is the last recorded iterate (one component: the charge).
    assert_eq!(fit["parameters"][0]["result"], last["values"], "{fit}");
    assert!(
        fit["parameters"][0]["result"][0].as_f64().unwrap() > 0.0,
        "{fit}"
    );
}

/// `msc bench --out` holds the rows finished so far after each one: a benchmark killed
/// half-way through a size keeps the sizes before it, each a whole JSON line.
#[test]
fn a_killed_benchmark_keeps_its_finished_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("rows.jsonl");
    // The CPU reference's all-pairs sum: 1K charges take milliseconds a step, 256K about
    // 65G pairs, far more than this test waits.
    let mut child = Command::new(env!("CARGO_BIN_EXE_msc"))
        .args([
            "bench",
            "--backend",
            "cpu",
            "--workload",
            "coulomb",
            "--sizes",
            "1K,2K,256K",
            "--steps",
            "1",
            "--repeats",
            "1",
            "--warmup-ms",
            "0",
            "--quiet",
            "--out",
        ])
        .arg(&out)
        .current_dir(tmp.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let rows = |text: &str| text.lines().count();
    while rows(&std::fs::read_to_string(&out).unwrap_or_default()) < 2 {
        assert!(started.elapsed().as_secs() < 120, "no rows written");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let text = std::fs::read_to_string(&out).unwrap();
    let sizes: Vec<u64> = text
        .lines()
        .map(|l| {
            let v: serde_json::Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            v["n"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(sizes, [1024, 2048], "{text}");
}

/// An embedder's concurrent calls each stop through their own scope: raising one stops
/// the work run in it, not another scope's work, and a dropped scope stops nothing.
/// The scope tests share the process's count of raised scopes: one at a time.
static SCOPES: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn a_scope_stops_its_own_work_and_no_other_calls() {
    let _one = SCOPES.lock().unwrap_or_else(|e| e.into_inner());
    use msc::interrupt::{requested, Scope};
    let (a, b) = (Scope::new(), Scope::new());
    a.request();
    assert!(a.run(requested));
    assert!(!b.run(requested), "b's work stopped by a's request");
    assert!(
        !std::thread::spawn(move || b.run(requested)).join().unwrap(),
        "b's work on another thread stopped by a's request"
    );
    // A thread a run spawned (outside every scope) cannot tell whose work it does, so it
    // stops while any scope is raised, and not once that scope is gone.
    assert!(std::thread::spawn(requested).join().unwrap());
    drop(a);
    assert!(!std::thread::spawn(requested).join().unwrap());
    // A nested scope gives the thread its outer one back.
    let outer = Scope::new();
    outer.run(|| {
        let inner = Scope::new();
        inner.request();
        assert!(inner.run(requested));
        assert!(!requested());
    });
    assert!(!requested());
}

/// A sweep run in a call's own scope (as Python's `msc.sweep` runs it) is not stopped by
/// another call's raised scope: its worker threads run in its scope. (They ran outside
/// every scope, where any raised scope stops them, so every run was left undone.)
#[test]
fn a_sweep_in_its_own_scope_runs_on_while_another_scope_is_raised() {
    let _one = SCOPES.lock().unwrap_or_else(|e| e.into_inner());
    use clap::Parser;
    use msc::cli::{Cli, Command};
    use msc::interrupt::Scope;
    let dir = tempfile::tempdir().unwrap();
    let scene = tiny(dir.path());
    let out = dir.path().join("sweep");
    let argv = [
        "msc",
        "sweep",
        "--vary",
        "integrator.dt=0.001,0.002",
        "--steps",
        "20",
        "--backend",
        "cpu",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
        "--",
        scene.to_str().unwrap(),
    ];
    let Command::Sweep(args) = Cli::try_parse_from(argv).unwrap().command else {
        unreachable!("a sweep")
    };
    let other = Scope::new();
    other.request();
    let report = Scope::new()
        .run(|| msc::cli::sweep::execute(&args))
        .unwrap()
        .expect("a report");
    assert_eq!(report.records.len(), 2);
    assert_eq!(report.count("ok"), 2, "{:?}", report.records);
    drop(other);
}

/// `run tiny.toml` with PLY frames into `dir/target`, and `far.ply`: its last frame
/// with its header's time set to `time` (the fit's horizon is that time over dt).
fn far_target(dir: &Path, time: &str) {
    tiny(dir);
    let mut args = tiny_run_args("target", &["output.frames=\"ply\""]);
    args.extend(["--steps", "5"]);
    let o = msc(&args, dir);
    assert!(o.status.success(), "{}", stderr(&o));
    let frame = std::fs::read(dir.join("target/frames/frame_000001.ply")).unwrap();
    let (at, old) = (
        frame.windows(4).position(|w| w == b"step").unwrap(),
        b"step 5 time 5e-2",
    );
    assert_eq!(&frame[at..at + old.len()], old);
    let mut far = frame[..at].to_vec();
    far.extend_from_slice(format!("time {time}").as_bytes());
    far.extend_from_slice(&frame[at + old.len()..]);
    std::fs::write(dir.join("far.ply"), far).unwrap();
}

/// A fit over a horizon of 1e12 steps (forward gradients) or 1e9 (the adjoint) ignored
/// Ctrl-C until its evaluation ended (never): the evaluations read the stop request only
/// between iterations. Now it stops within a step, with exit status 130 and fit.json.
#[test]
fn a_fit_over_a_huge_horizon_stops_on_ctrl_c() {
    huge_fit_stops_on_ctrl_c("cpu", &[("1e10", "forward"), ("1e7", "adjoint")]);
}

/// The same on the GPU: its forward tangents ran a frame's whole interval and its adjoint
/// a checkpoint interval in one call, ignoring Ctrl-C until the evaluation ended. Now they
/// run in chunks of about 50 ms with a check between them (and each reversed step).
#[test]
fn a_gpu_fit_over_a_huge_horizon_stops_on_ctrl_c() {
    if !gpu_available() {
        skip_no_adapter("msc fit --backend gpu");
        return;
    }
    huge_fit_stops_on_ctrl_c("gpu", &[("1e10", "forward"), ("1e7", "adjoint")]);
}

/// `msc fit --backend BACKEND --gradient G` to a target frame at each `(time, G)`, sent
/// Ctrl-C 0.5 s into its first evaluation: exit 130 within 20 s, fit.json interrupted.
fn huge_fit_stops_on_ctrl_c(backend: &str, cases: &[(&str, &str)]) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for &(time, gradient) in cases {
        far_target(d, time);
        let mut child = Command::new(env!("CARGO_BIN_EXE_msc"))
            .args([
                "fit",
                "tiny.toml",
                "--target",
                "far.ply",
                "--param",
                "charge",
            ])
            .args(["--backend", backend, "--gradient", gradient, "--out", "fit"])
            .current_dir(d)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        std::io::BufRead::read_line(&mut err, &mut line).unwrap();
        assert!(line.starts_with("fitting"), "{backend} {gradient}: {line}");
        std::thread::sleep(Duration::from_millis(500));
        signal(&child, "INT");
        // Before, the evaluation ran on: wait 20 s at most, then kill it and fail.
        let asked = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if asked.elapsed() > Duration::from_secs(20) {
                child.kill().unwrap();
                child.wait().unwrap();
                panic!("{backend} {gradient}: still running 20 s after Ctrl-C");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
        let what = format!("{backend} {gradient}: {line}{rest}");
        assert_eq!(status.code(), Some(130), "{what}");
        assert!(!rest.contains("panicked"), "{what}");
        // Reported as a stop, not as a failed fit.
        assert!(rest.contains("interrupted after iteration"), "{what}");
        // Stopped in its first evaluation: the record keeps the start, marked interrupted.
        let fit = read_json(&d.join("fit/fit.json"));
        assert_eq!(fit["interrupted"], true, "{what}{fit}");
        assert_eq!(fit["reason"], "interrupted", "{what}{fit}");
        assert_eq!(fit["parameters"][0]["result"][0], 1e-6, "{what}{fit}");
        std::fs::remove_dir_all(d.join("fit")).unwrap();
    }
}
