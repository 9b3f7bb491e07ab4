//! `msc fit` with inputs that cannot be fitted: a target from another geometry is refused
//! (it "converged" to nonsense); a start the GPU cannot hold is reported and passed over;
//! a stop request during the starts ends them within a few steps.

use super::{assert_no_crash, fixture};
use crate::common::{msc, read_json, stderr};
use std::path::Path;
use std::time::{Duration, Instant};

/// `msc run small.toml --out OUT` with `extra` options, on the CPU with frames.
fn target(d: &Path, out: &str, extra: &[&str]) {
    let mut args = vec![
        "run",
        "small.toml",
        "--backend",
        "cpu",
        "--quiet",
        "--out",
        out,
    ];
    args.extend_from_slice(extra);
    let o = msc(&args, d);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// The case: the same 16 particles on a 2 m grid as the target of a 1 m scene.
#[test]
fn a_target_from_another_geometry_is_refused() {
    let dir = fixture();
    let d = dir.path();
    target(d, "two", &["--set", "mesh.size=[2.0, 2.0]"]);
    target(d, "one", &[]);
    let fit = |target: &str, extra: &[&str]| {
        let mut args = vec![
            "fit",
            "small.toml",
            "--target",
            target,
            "--param",
            "charge",
            "--init",
            "2e-9",
            "--backend",
            "cpu",
            "--quiet",
            "--max-iters",
            "3",
            "--out",
            "f",
        ];
        args.extend_from_slice(extra);
        msc(&args, d)
    };
    let o = fit("two", &[]);
    assert_no_crash(&o, "fit against two");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("frame at t = 0"), "{err}");
    assert!(err.contains("--initial-tolerance"), "{err}");
    assert!(!d.join("f/fit.json").exists());
    // Its own frames pass the check (they are the initial state in f32).
    let o = fit("one", &[]);
    assert_ne!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(d.join("f/fit.json").exists());
    // The check can be loosened.
    let o = fit("two", &["--initial-tolerance", "inf"]);
    assert_ne!(o.status.code(), Some(2), "{}", stderr(&o));
}

/// A start spread so far that its charges leave f32 range: reported and passed over on the
/// GPU, as on the CPU, instead of failing the whole batch of starts.
#[test]
fn a_start_the_gpu_cannot_hold_is_passed_over() {
    if !crate::common::gpu_available() {
        return;
    }
    let dir = fixture();
    let d = dir.path();
    target(d, "one", &[]);
    let o = msc(
        &[
            "fit",
            "small.toml",
            "--target",
            "one",
            "--param",
            "charge",
            "--starts",
            "4",
            "--start-factor",
            "1e60",
            "--backend",
            "gpu",
            "--max-iters",
            "2",
            "--out",
            "f",
        ],
        d,
    );
    assert_no_crash(&o, "fit --starts on the GPU");
    let err = stderr(&o);
    assert_ne!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("failed: "), "no start was refused: {err}");
    assert!(err.contains("has the lowest loss"), "{err}");
    let fit = read_json(&d.join("f/fit.json"));
    let points = fit["starts"]["points"].as_array().unwrap();
    assert_eq!(points.len(), 4);
    assert!(points.iter().any(|p| p["error"].is_string()), "{fit}");
    assert!(points[0]["loss"].is_number(), "{fit}");
}

/// SIGTERM while thousands of CPU starts run: the fit stops within seconds (Slurm's grace
/// is 30 s), exits 130 and writes fit.json marked interrupted.
#[cfg(unix)]
#[test]
fn a_stop_request_ends_the_starts_within_seconds() {
    let dir = fixture();
    let d = dir.path();
    // Target frames every 500 steps up to step 2000: each start runs 2000 steps.
    target(d, "long", &["--steps", "2000", "--set", "output.every=500"]);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_msc"))
        .args([
            "fit",
            "small.toml",
            "--target",
            "long",
            "--param",
            "charge",
            "--starts",
            "4096",
            "--backend",
            "cpu",
            "--quiet",
            "--out",
            "f",
        ])
        .current_dir(d)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    if child.try_wait().unwrap().is_some() {
        panic!("the starts ended before the stop request");
    }
    let id = child.id().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &id])
        .status()
        .unwrap()
        .success());
    let asked = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if asked.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("still running 20 s after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = child.wait_with_output().unwrap();
    assert_no_crash(&o, "fit --starts 4096");
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    let fit = read_json(&d.join("f/fit.json"));
    assert_eq!(fit["interrupted"], true, "{fit}");
}
