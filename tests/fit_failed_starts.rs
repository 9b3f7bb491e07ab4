//! `msc fit --starts`: a start point that fails for real (its run diverges, its values
//! leave f64) is recorded in fit.json as failed, at its own index with its error, and
//! the fit goes on from the best start that has a loss; with none, the error names each
//! start. GPU cases skip without an adapter unless `MSC_REQUIRE_GPU=1`.

mod common;

use serde_json::Value;
use std::path::Path;

/// A charged ball under explicit Verlet: stable at its stiffness of 2.5 N/m (omega dt
/// about 0.3), so stiff springs (1e8 N/m and up) grow a mode by orders of magnitude
/// each step and leave f64 within the 60 steps.
fn verlet_ball() -> String {
    common::ball_scene("method = \"verlet\"\ndt = 0.02\nsteps = 60")
}

const TRUE_STIFFNESS: f64 = 2.5;

/// The scene and its target run (the CPU reference at the true stiffness) in `dir`.
fn setup(dir: &Path) {
    setup_scene(dir, &verlet_ball());
}

/// [`setup`] of `scene`.
fn setup_scene(dir: &Path, scene: &str) {
    std::fs::write(dir.join("ball.toml"), scene).unwrap();
    let o = common::msc(
        &[
            "run",
            "ball.toml",
            "--backend",
            "cpu",
            "-q",
            "--out",
            "target",
        ],
        dir,
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
}

/// `msc fit` of the stiffness from `init` with `starts` spread by `factor`.
fn fit(dir: &Path, backend: &str, init: &str, starts: &str, factor: &str) -> std::process::Output {
    #[rustfmt::skip]
    let args = [
        "fit", "ball.toml", "--target", "target", "--param", "stiffness", "--init", init,
        "--starts", starts, "--start-factor", factor, "--backend", backend, "--max-iters",
        "20", "-q", "--out", backend,
    ];
    common::msc(&args, dir)
}

/// Each start point of fit.json has a loss or an error, never both; the chosen one has
/// the lowest loss. Returns the points.
fn checked_points(json: &Value, count: usize) -> Vec<Value> {
    let s = &json["starts"];
    let points = s["points"].as_array().unwrap().clone();
    assert_eq!(points.len(), count);
    assert_eq!(s["count"], count);
    for (k, p) in points.iter().enumerate() {
        assert!(
            p["loss"].is_f64() != p["error"].is_string(),
            "start {k}: a loss or an error: {p}"
        );
    }
    let chosen = s["chosen"].as_u64().unwrap() as usize;
    let best = points[chosen]["loss"]
        .as_f64()
        .expect("the chosen start has a loss");
    for p in &points {
        assert!(p["loss"].as_f64().is_none_or(|l| best <= l), "{p}");
    }
    points
}

/// Start 0 (the --init, 1e12 N/m) and start 2 (1.2e19 N/m) diverge; start 1 (3.5 N/m)
/// runs. The two are recorded as failed at their own index with the run's error, and the
/// fit converges from start 1 to the true stiffness.
fn diverging_starts_fail_alone(backend: &str) {
    diverging_starts_of_fail_alone(backend, &verlet_ball());
}

/// [`diverging_starts_fail_alone`] of `scene`.
fn diverging_starts_of_fail_alone(backend: &str, scene: &str) {
    let dir = tempfile::tempdir().unwrap();
    setup_scene(dir.path(), scene);
    let o = fit(dir.path(), backend, "1e12", "3", "1e15");
    assert!(o.status.success(), "{}", common::stderr(&o));
    let json = common::read_json(&dir.path().join(backend).join("fit.json"));
    let points = checked_points(&json, 3);
    assert_eq!(
        points[0]["values"][0].as_f64(),
        Some(1e12),
        "the given start"
    );
    for k in [0, 2] {
        let e = points[k]["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{}", points[k]));
        assert!(e.contains("non-finite at step"), "start {k}: {e}");
    }
    let v1 = points[1]["values"][0].as_f64().unwrap();
    assert!(v1 < 10.0, "start 1 is the stable one: {v1}");
    assert_eq!(json["starts"]["chosen"], 1);
    assert_eq!(json["initial_loss"], points[1]["loss"]);
    assert_eq!(json["converged"], true, "{}", json["message"]);
    let k = json["parameters"][0]["result"][0].as_f64().unwrap();
    assert!((k / TRUE_STIFFNESS - 1.0).abs() < 1e-3, "fitted {k} N/m");
}

#[test]
fn a_start_whose_run_diverges_is_recorded_failed_and_the_fit_goes_on() {
    diverging_starts_fail_alone("cpu");
}

/// The same with DDEF (lattice grid, m = 20): the CPU forward froze the step's DDEF
/// structure before its finite check, so a start whose step left f64 failed naming only
/// a particle ("particle 0: position is not finite"), not the step.
#[test]
fn a_diverging_ddef_start_is_recorded_non_finite_at_its_step() {
    let scene = verlet_ball().replace(
        "[integrator]",
        "[coulomb]\nmethod = \"ddef\"\nsamples = 20\n[integrator]",
    );
    assert!(scene.contains("samples = 20"));
    diverging_starts_of_fail_alone("cpu", &scene);
}

#[test]
fn a_start_whose_gpu_run_diverges_is_recorded_failed_and_the_fit_goes_on() {
    if common::gpu_available() {
        diverging_starts_fail_alone("gpu");
    }
}

/// --start-factor 1e308 around 1e100 N/m takes start 4 past f64's range (its value has no
/// theta): that start's error, naming the parameter and the factor, where it ended every
/// start's fit with "theta component 0 is not finite (inf)". Start 1 still runs.
#[test]
fn a_start_spread_past_f64_range_fails_alone() {
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path());
    let o = fit(dir.path(), "cpu", "1e100", "5", "1e308");
    assert!(o.status.success(), "{}", common::stderr(&o));
    let json = common::read_json(&dir.path().join("cpu/fit.json"));
    let points = checked_points(&json, 5);
    let e = points[4]["error"].as_str().unwrap();
    assert!(
        e.contains("stiffness") && e.contains("--start-factor 1e308"),
        "{e}"
    );
    assert!(points[1]["loss"].is_f64(), "{}", points[1]);
    assert_eq!(json["starts"]["chosen"], 1);
}

/// Every start diverges (1e30 N/m spread by 4): the error says that none has a loss and
/// names the first starts by index, and the exit status is a failed run's (1), as
/// without --starts. It was the first start's error alone, naming no start.
#[test]
fn when_no_start_has_a_loss_the_error_names_the_starts() {
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path());
    let o = fit(dir.path(), "cpu", "1e30", "6", "4");
    assert_eq!(o.status.code(), Some(1), "{}", common::stderr(&o));
    let e = common::stderr(&o);
    assert!(e.contains("none of the 6 start points has a loss"), "{e}");
    for s in 0..4 {
        assert!(
            e.contains(&format!("start {s}: the simulation became non-finite")),
            "{e}"
        );
    }
    assert!(e.contains("and 2 more"), "{e}");
    // A value the model refuses in every start is a bad input (2), as without --starts.
    let o = fit(dir.path(), "cpu", "-1", "3", "4");
    assert_eq!(o.status.code(), Some(2), "{}", common::stderr(&o));
    assert!(common::stderr(&o).contains("start 2: spring 0: stiffness"));
}
