//! `msc fit` with inputs that cannot be fitted: a target from another geometry is refused
//! (it "converged" to nonsense); a start the GPU cannot hold is reported and passed over;
//! a stop request during the starts ends them within a few steps; an unwritable `--out`
//! fails before the fit; a negative `--init` is a value; options the fit would not read are
//! refused, and so is `--checkpoint all` past `--checkpoint-memory`; an absurd learning
//! rate backs off; a short frame is named by its file; a start where the gradient is
//! exactly 0 is not reported as converged.

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

/// The issue's case: the same 16 particles on a 2 m grid as the target of a 1 m scene.
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

/// `msc fit small.toml --target one --param charge` with `extra`, on the CPU, progress on.
fn fit_one(d: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "fit",
        "small.toml",
        "--target",
        "one",
        "--param",
        "charge",
        "--backend",
        "cpu",
        "--max-iters",
        "3",
    ];
    args.extend_from_slice(extra);
    msc(&args, d)
}

/// An output folder that cannot be written failed only after the whole fit had run
/// (its iterations lost); now before the first evaluation, naming the path.
#[test]
fn an_unwritable_out_fails_before_the_fit() {
    let dir = fixture();
    let d = dir.path();
    target(d, "one", &[]);
    std::fs::write(d.join("afile"), "x").unwrap();
    std::fs::create_dir_all(d.join("taken/fit.json")).unwrap();
    for (out, named) in [("afile/sub", "afile/sub"), ("taken", "fit.json")] {
        let o = fit_one(d, &["--out", out]);
        assert_no_crash(&o, out);
        let err = stderr(&o);
        assert_ne!(o.status.code(), Some(0), "{out}: {err}");
        assert!(err.contains(named), "{out}: {err}");
        assert!(!err.contains("iter   0"), "{out}: the fit ran first\n{err}");
    }
}

/// `--init -1e-9` (a negative charge, or a position's negative x) was taken for an option
/// by the parser and refused; it is a value.
#[test]
fn a_negative_init_is_a_value() {
    let dir = fixture();
    let d = dir.path();
    target(d, "one", &[]);
    let o = fit_one(d, &["--init", "-1e-9", "--quiet", "--out", "f"]);
    assert_no_crash(&o, "--init -1e-9");
    assert_ne!(o.status.code(), Some(2), "{}", stderr(&o));
    let fit = read_json(&d.join("f/fit.json"));
    assert_eq!(fit["parameters"][0]["initial"][0], -1e-9, "{fit}");
}

/// Options this fit does not read were silently ignored; a value given for one is refused
/// (exit 2) naming it, before anything runs.
#[test]
fn options_the_fit_does_not_read_are_refused() {
    let dir = fixture();
    let d = dir.path();
    target(d, "one", &[]);
    let cases: [(&[&str], &str); 5] = [
        // A scalar parameter has no neighbours to smooth over.
        (
            &["--smoothness", "1", "--optimizer", "lbfgs"],
            "--smoothness",
        ),
        // One start: nothing to spread.
        (&["--start-factor", "2"], "--start-factor"),
        // Levenberg-Marquardt takes no learning rate.
        (
            &["--optimizer", "lm", "--learning-rate", "0.5"],
            "--learning-rate",
        ),
        // Forward gradients keep no checkpoints.
        (
            &["--gradient", "forward", "--checkpoint", "all"],
            "--checkpoint",
        ),
        (
            &["--gradient", "forward", "--checkpoint-memory", "10"],
            "--checkpoint-memory",
        ),
    ];
    for (extra, option) in cases {
        let mut args = extra.to_vec();
        args.extend_from_slice(&["--out", "r"]);
        let o = fit_one(d, &args);
        assert_no_crash(&o, option);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains(option), "{extra:?}: {err}");
        assert!(!d.join("r/fit.json").exists(), "{extra:?}");
    }
}

/// `--checkpoint all` stored every state whatever `--checkpoint-memory` allowed; now the
/// states it would keep past the budget are refused (exit 2) before the first evaluation
/// runs, naming the option, the bytes needed and the budget; within the budget it runs.
#[test]
fn checkpoint_all_past_the_memory_budget_is_refused() {
    let dir = fixture();
    let d = dir.path();
    target(d, "one", &[]);
    // The target's last frame (t = 0.03 s) at dt = 1e-5 s: 3000 steps, 3001 states of 16
    // particles, two f64 vectors each on the CPU (2304768 bytes), past 1 MiB.
    let fit = |backend: &str, mib: &str, out: &str| {
        let mut args = vec!["fit", "small.toml", "--target", "one", "--param", "charge"];
        args.extend_from_slice(&["--gradient", "adjoint", "--checkpoint", "all"]);
        args.extend_from_slice(&["--checkpoint-memory", mib, "--max-iters", "1"]);
        args.extend_from_slice(&["--set", "integrator.dt=1e-5", "--backend", backend]);
        args.extend_from_slice(&["--quiet", "--out", out]);
        msc(&args, d)
    };
    let mut backends = vec!["cpu"];
    if crate::common::gpu_available() {
        backends.push("gpu");
    }
    for backend in backends {
        let o = fit(backend, "1", backend);
        assert_no_crash(&o, backend);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{backend}: {err}");
        assert!(err.contains("--checkpoint-memory"), "{backend}: {err}");
        assert!(err.contains("1048576 bytes"), "{backend}: {err}");
        if backend == "cpu" {
            assert!(err.contains("2304768 bytes"), "{err}");
        }
        assert!(!d.join(backend).join("fit.json").exists(), "{backend}");
    }
    // A budget that holds them: every state is kept.
    let o = fit("cpu", "3", "fits");
    assert_no_crash(&o, "3 MiB");
    assert_ne!(o.status.code(), Some(2), "{}", stderr(&o));
    let json = read_json(&d.join("fits/fit.json"));
    assert_eq!(
        json["gradient"]["checkpoint"]["policy"], "store_all",
        "{json}"
    );
}

/// A first step past f64's range (`--learning-rate 1e300`) ended the fit with "theta
/// component 0 is not finite" and no fit.json; the optimizers now back off from it as
/// from a trial that blows up.
#[test]
fn an_absurd_learning_rate_backs_off() {
    let dir = fixture();
    let d = dir.path();
    target(d, "one", &[]);
    for optimizer in ["lbfgs", "adam"] {
        let out = format!("lr-{optimizer}");
        let extra = [
            "--init",
            "2e-9",
            "--optimizer",
            optimizer,
            "--learning-rate",
            "1e300",
            "--quiet",
            "--out",
            &out,
        ];
        let o = fit_one(d, &extra);
        assert_no_crash(&o, optimizer);
        let err = stderr(&o);
        assert!(matches!(o.status.code(), Some(0 | 1)), "{optimizer}: {err}");
        let fit = read_json(&d.join(&out).join("fit.json"));
        assert!(fit["loss"].as_f64().unwrap().is_finite(), "{fit}");
    }
}

/// A run folder with one frame of another particle count was reported as "target frame
/// 1", an index into the frames after t = 0 that names no file; now the file is named.
#[test]
fn a_frame_with_another_particle_count_is_named_by_its_file() {
    let dir = fixture();
    let d = dir.path();
    target(d, "one", &[]);
    let mut ply = String::from(
        "ply\nformat ascii 1.0\ncomment msc 0.1.0 step 2 time 2e-2\nelement vertex 10\n\
         property float x\nproperty float y\nproperty float z\nend_header\n",
    );
    for k in 0..10 {
        ply.push_str(&format!("{} 0 0\n", k as f64 * 0.1));
    }
    std::fs::write(d.join("one/frames/frame_000002.ply"), ply).unwrap();
    let o = fit_one(d, &["--quiet", "--out", "f"]);
    assert_no_crash(&o, "a short frame");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("frame_000002.ply"), "{err}");
    assert!(err.contains("10 particles") && err.contains("16"), "{err}");
}

/// `--init 0` on the charge of a scene where only the charges interact: the loss is even
/// in the charge, so its gradient there is exactly 0 and the fit "converged" at once
/// (`zero_gradient`, converged true) far from the target's charge. Now it stops
/// unconverged, `no_gradient` in fit.json, exit 2 naming the parameter and `--init`; with
/// starts too (a component at 0 stays 0 in each). The advice works: from a nonzero start
/// the loss falls far below that at 0, which was no minimum.
#[test]
fn a_start_without_gradient_is_not_converged() {
    let dir = fixture();
    let d = dir.path();
    let charged = ["--set", "material.charge=1e-6"];
    target(d, "one", &charged);
    let mut zero_loss = 0.0;
    for (out, starts) in [("z1", "1"), ("z4", "4")] {
        let mut extra = vec!["--init", "0", "--starts", starts, "--out", out];
        extra.extend_from_slice(&charged);
        let o = fit_one(d, &extra);
        assert_no_crash(&o, out);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{out}: {err}");
        assert!(err.contains("charge") && err.contains("--init"), "{err}");
        // The error points at the record it left.
        assert!(err.contains(&format!("{out}/fit.json")), "{err}");
        let fit = read_json(&d.join(out).join("fit.json"));
        assert_eq!(fit["reason"], "no_gradient", "{fit}");
        assert_eq!(fit["converged"], false, "{fit}");
        assert_eq!(fit["zero_gradient_at_start"][0], "charge", "{fit}");
        assert_eq!(fit["parameters"][0]["result"][0], 0.0, "{fit}");
        zero_loss = fit["loss"].as_f64().unwrap();
    }
    let mut args = vec!["fit", "small.toml", "--target", "one", "--param", "charge"];
    args.extend_from_slice(&charged);
    args.extend_from_slice(&[
        "--backend",
        "cpu",
        "--init",
        "5e-7",
        "--quiet",
        "--out",
        "nz",
    ]);
    let o = msc(&args, d);
    assert_no_crash(&o, "--init 5e-7");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let fit = read_json(&d.join("nz/fit.json"));
    let loss = fit["loss"].as_f64().unwrap();
    assert!(loss < 1e-6 * zero_loss, "{loss} vs {zero_loss} at 0: {fit}");
}

/// One parameter without a gradient at the start beside one with: the fit runs (the
/// stiffness of a pinned grid sagging under gravity moves), and the flat one is named in
/// a warning and in fit.json rather than silently reported as fitted.
#[test]
fn a_parameter_without_gradient_at_the_start_is_named() {
    let dir = fixture();
    let d = dir.path();
    let sag = [
        "--set",
        "gravity=[0.0, 0.0, -9.81]",
        "--set",
        "pin.where=\"corners_max_y\"",
    ];
    target(d, "sag", &sag);
    let mut args = vec!["fit", "small.toml", "--target", "sag", "--backend", "cpu"];
    args.extend_from_slice(&sag);
    args.extend_from_slice(&["--param", "charge,stiffness", "--init", "0"]);
    args.extend_from_slice(&["--init", "12", "--quiet", "--out", "f"]);
    let o = msc(&args, d);
    assert_no_crash(&o, "charge,stiffness");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("warning") && err.contains("charge"), "{err}");
    let fit = read_json(&d.join("f/fit.json"));
    assert_eq!(fit["zero_gradient_at_start"].as_array().unwrap().len(), 1);
    assert_eq!(fit["zero_gradient_at_start"][0], "charge", "{fit}");
    let k = fit["parameters"][1]["result"][0].as_f64().unwrap();
    assert!((k - 10.0).abs() < 0.1, "stiffness {k} (target 10 N/m)");
}

/// A target frame 1e30 s away was taken as u64::MAX steps (a saturating cast) and the fit
/// ran on forever; past 2^53 steps it is now refused (exit 2) naming the frame's time,
/// the step count and the limit.
#[test]
fn a_target_past_the_horizon_limit_is_refused() {
    let dir = fixture();
    let d = dir.path();
    target(d, "one", &[]);
    let frame = std::fs::read(d.join("one/frames/frame_000003.ply")).unwrap();
    let old = b"step 3 time 3e-2";
    let at = frame.windows(old.len()).position(|w| w == old).unwrap();
    let mut far = frame[..at].to_vec();
    far.extend_from_slice(b"time 1e30");
    far.extend_from_slice(&frame[at + old.len()..]);
    std::fs::write(d.join("far.ply"), far).unwrap();
    let o = msc(
        &[
            "fit",
            "small.toml",
            "--target",
            "far.ply",
            "--param",
            "charge",
        ],
        d,
    );
    assert_no_crash(&o, "1e30 s");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    let limit = msc::grad::target::MAX_HORIZON_STEPS.to_string();
    assert!(err.contains("far.ply") && err.contains(&limit), "{err}");
}

/// The same absurd step on the GPU backend: the trial's charges (1e288 C) are refused by
/// the GPU's checks as a `GpuError`, which ended the fit with reason `failed` and exit 2
/// (blaming the inputs) where the CPU backs off. Now it backs off as on the CPU.
#[test]
fn an_absurd_learning_rate_backs_off_on_the_gpu() {
    if !crate::common::gpu_available() {
        return;
    }
    let dir = fixture();
    let d = dir.path();
    target(d, "one", &[]);
    let mut args = vec!["fit", "small.toml", "--target", "one", "--param", "charge"];
    args.extend_from_slice(&["--init", "2e-9", "--optimizer", "adam", "--max-iters", "3"]);
    args.extend_from_slice(&["--learning-rate", "1e300", "--backend", "gpu"]);
    args.extend_from_slice(&["--quiet", "--out", "g"]);
    let o = msc(&args, d);
    assert_no_crash(&o, "adam on the GPU");
    let err = stderr(&o);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{err}");
    let fit = read_json(&d.join("g/fit.json"));
    assert_ne!(fit["reason"], "failed", "{fit}");
    assert!(fit["loss"].as_f64().unwrap().is_finite(), "{fit}");
}
