//! End to end: the per-spring stiffnesses of a cloth with a stiff band (5x) across its
//! middle, recovered from observed frames (every particle at every step, from a run at
//! the true stiffnesses) by the adjoint and L-BFGS on log-stiffnesses, starting from a
//! uniform guess: within 5% RMS relative error over all springs.
//!
//! The scene is chosen so the frames hold the stiffnesses: the cloth is shaken (every
//! particle starts with its own velocity) so every spring stretches, and omega h stays
//! small (masses 0.1 kg, h = 5 ms: omega h = 0.07 and 0.16) so the implicit step does not
//! damp the stiff springs' motion away. With h = 10 ms and 20 g particles (omega h = 0.7
//! in the band) the band moves nearly rigidly after a few steps and the same fit stalls
//! near 20% RMS: the frames no longer tell its stiffness.

mod common;

use glam::DVec3;
use msc::config::{Config, Integrator, SolverConfig, SolverMethod};
use msc::grad::{
    fit, simulate, FitOptions, GradMode, GradOptions, Optimizer, Param, ParamSet, Target,
};
use msc::model::mesh::grid;
use msc::model::{Spring, System, SystemDesc};

const SOFT: f64 = 20.0;
const STIFF: f64 = 100.0;
const GUESS: f64 = 50.0;

/// An n x n cloth (structural and shear springs) in the x-z plane, its top edge pinned,
/// with a horizontal band of stiff springs across its middle; the rest soft. Returns the
/// system (at the true stiffnesses) and the band flags.
fn banded_cloth(n: u32) -> (System, Vec<bool>) {
    let mesh = grid([1.0, 1.0], [n, n], true, false).unwrap();
    let x: Vec<DVec3> = mesh
        .positions
        .iter()
        .map(|p| DVec3::new(p.x, 0.0, p.y))
        .collect();
    let (zmin, zmax) = x
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.z), b.max(p.z)));
    let mid = 0.5 * (zmin + zmax);
    let band_half = 0.18 * (zmax - zmin);
    let mut band = Vec::new();
    let springs = mesh
        .edges
        .iter()
        .map(|&[i, j]| {
            let (a, b) = (x[i as usize], x[j as usize]);
            let in_band = ((a.z + b.z) * 0.5 - mid).abs() < band_half;
            band.push(in_band);
            Spring {
                i,
                j,
                stiffness: if in_band { STIFF } else { SOFT },
                rest_length: (b - a).length(),
                damping: 0.01,
            }
        })
        .collect();
    // The two top corners hold it (a spring between two pinned particles would have no
    // effect on any frame, and no gradient).
    let (xmin, xmax) = x
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.x), b.max(p.x)));
    let pinned: Vec<bool> = x
        .iter()
        .map(|p| p.z > zmax - 1e-9 && (p.x < xmin + 1e-9 || p.x > xmax - 1e-9))
        .collect();
    // Shaken: every free particle starts with its own velocity (a fixed pseudo-random
    // pattern), so every spring stretches and its stiffness shows in the frames.
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let mut unit = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    };
    let velocities = pinned
        .iter()
        .map(|pin| {
            let v = DVec3::new(unit(), unit(), unit());
            if *pin {
                DVec3::ZERO
            } else {
                v
            }
        })
        .collect();
    let system = System::new(SystemDesc {
        positions: x.clone(),
        velocities,
        masses: vec![0.1; x.len()],
        pinned,
        springs,
        faces: mesh.faces,
        ..Default::default()
    })
    .unwrap();
    (system, band)
}

fn config() -> Config {
    Config {
        integrator: Integrator::Imex,
        dt: 0.005,
        steps: 120,
        gravity: DVec3::new(0.0, 0.0, -9.81),
        solver: SolverConfig {
            method: SolverMethod::Cg,
            iterations: 2000,
            omega: 1.0,
            tolerance: 1e-12,
            rho: None,
        },
        ..Config::default()
    }
}

/// Log-stiffness parameters of `truth`, its frames at every step of 120 (the targets),
/// and the adjoint's options.
fn band_problem(truth: &System) -> (ParamSet, Vec<Target>, GradOptions) {
    let c = config();
    let set = ParamSet::new(truth, &c, &[Param::Stiffnesses])
        .unwrap()
        .with_log(&[true])
        .unwrap();
    let grad = GradOptions {
        mode: GradMode::Adjoint,
        ..GradOptions::default()
    };
    let steps: Vec<u64> = (1..=120).collect();
    let targets: Vec<Target> = simulate(&set, &set.initial(), &steps, &grad)
        .unwrap()
        .into_iter()
        .map(|s| Target {
            step: s.step,
            positions: s.x,
        })
        .collect();
    (set, targets, grad)
}

#[test]
fn a_stiff_band_in_a_soft_cloth_is_recovered_per_spring() {
    let (truth, band) = banded_cloth(6);
    let (set, targets, grad) = band_problem(&truth);
    // Start from a uniform guess between the two.
    let guess = vec![GUESS; truth.springs().len()];
    let theta0 = set.from_values(&guess).unwrap();
    let options = FitOptions {
        optimizer: Optimizer::Lbfgs { initial_step: 0.3 },
        max_iterations: 200,
        grad,
        ftol: 0.0,
        xtol: 1e-12,
        loss_tol: 0.0,
        smoothness: 0.0,
        smoothness_continuation: 0,
        smoothness_release: false,
    };
    let t = std::time::Instant::now();
    let out = fit(&set, &theta0, &targets, &options, |h| {
        if h.iteration % 50 == 0 {
            println!(
                "iter {} loss {:e} |g| {:e}",
                h.iteration, h.loss, h.gradient_norm
            );
        }
    })
    .unwrap();
    assert!(out.loss < 1e-4 * out.initial_loss, "{:?}", out.reason);
    let k = set.values(&out.theta).unwrap();
    let rms = rms_error(&k, &truth);
    for (name, which) in [("band", true), ("soft", false)] {
        let errs: Vec<f64> = k
            .iter()
            .zip(truth.springs())
            .zip(&band)
            .filter(|(_, b)| **b == which)
            .map(|((a, s), _)| (a - s.stiffness) / s.stiffness)
            .collect();
        let worst = errs.iter().fold(0.0f64, |m, e| m.max(e.abs()));
        let mean = errs.iter().sum::<f64>() / errs.len() as f64;
        println!("{name}: mean error {mean:.4}, worst {worst:.4}");
        assert!(mean.abs() <= 0.05, "{name}: mean relative error {mean}");
    }
    println!(
        "{} springs ({} in the band), {:?} after {} evaluations, {:.1} s: loss {:e}, rms {rms:.4}",
        k.len(),
        band.iter().filter(|b| **b).count(),
        out.reason,
        out.evaluations,
        t.elapsed().as_secs_f64(),
        out.loss
    );
    assert!(rms <= 0.05, "relative RMS error {rms}");
}

/// RMS over all springs of the relative error of `k` against `truth`'s stiffnesses.
fn rms_error(k: &[f64], truth: &System) -> f64 {
    let sum = k
        .iter()
        .zip(truth.springs())
        .map(|(a, s)| ((a - s.stiffness) / s.stiffness).powi(2))
        .sum::<f64>();
    (sum / k.len() as f64).sqrt()
}

/// `smoothness_continuation`: a penalized stage, then an unpenalized one from its result.
/// The outcome carries no penalty and meets the band's 5% RMS; the history holds both
/// stages in order, the second starting where the first ended (a second stage restarted
/// from theta0, or one that kept the penalty, fails here).
#[test]
fn a_smoothness_continuation_ends_without_the_penalty_from_the_penalized_result() {
    let (truth, _) = banded_cloth(6);
    let (set, targets, grad) = band_problem(&truth);
    let theta0 = set
        .from_values(&vec![GUESS; truth.springs().len()])
        .unwrap();
    let options = FitOptions {
        optimizer: Optimizer::Lbfgs { initial_step: 0.3 },
        max_iterations: 100,
        grad,
        ftol: 0.0,
        xtol: 1e-12,
        smoothness: 3e-5,
        smoothness_continuation: 1,
        smoothness_release: true,
        ..FitOptions::default()
    };
    let mut seen = Vec::new();
    let out = fit(&set, &theta0, &targets, &options, |h| {
        seen.push(h.iteration)
    })
    .unwrap();
    assert_eq!(out.penalty, 0.0);
    assert_eq!(
        seen,
        out.history.iter().map(|h| h.iteration).collect::<Vec<_>>()
    );
    // The stage boundary: the same theta twice, the second without the penalty.
    let b = (1..out.history.len())
        .find(|&i| out.history[i].iteration == out.history[i - 1].iteration)
        .expect("two stages");
    assert_eq!(out.history[b].theta, out.history[b - 1].theta);
    assert!(out.history[b].loss < out.history[b - 1].loss);
    assert!(out.history[b - 1].theta != theta0);
    assert_eq!(out.initial_loss, out.history[0].loss);
    assert_eq!(out.loss, out.history.last().unwrap().loss);
    let rms = rms_error(&set.values(&out.theta).unwrap(), &truth);
    assert!(rms <= 0.05, "relative RMS error {rms}");
}

fn ball_scene() -> String {
    common::ball_scene(
        "method = \"imex\"\ndt = 0.02\nsteps = 40\nsolver = { method = \"cg\", iterations = 500, tolerance = 1e-12 }",
    )
}

fn msc(args: &[&str]) -> i32 {
    msc::cli::main_with_args(std::iter::once("msc").chain(args.iter().copied()))
}

/// `msc fit --param stiffnesses` picks the adjoint and L-BFGS by itself, reports how the
/// gradient was computed and lowers the loss; `--gradient forward --optimizer lm` on a
/// scalar and `--starts` with the adjoint work; the adjoint refuses Levenberg-Marquardt
/// and a window, and options of an adjoint not run are refused, with exit status 2.
#[test]
fn msc_fit_chooses_and_reports_the_gradient_method() {
    let dir = tempfile::tempdir().unwrap();
    let scene = dir.path().join("ball.toml");
    std::fs::write(&scene, ball_scene()).unwrap();
    let s = scene.to_str().unwrap();
    let target = dir.path().join("target");
    let t = target.to_str().unwrap();
    assert_eq!(
        msc(&["run", s, "--backend", "cpu", "--quiet", "--out", t]),
        0
    );
    let fit_json = |name: &str, extra: &[&str]| -> (i32, Option<serde_json::Value>) {
        let out = dir.path().join(name);
        let o = out.to_str().unwrap();
        let mut args = vec!["fit", s, "--target", t, "--quiet", "--out", o];
        args.extend_from_slice(extra);
        let code = msc(&args);
        let json = std::fs::read_to_string(out.join("fit.json"))
            .ok()
            .map(|text| serde_json::from_str(&text).unwrap());
        (code, json)
    };
    let (code, json) = fit_json(
        "auto",
        &[
            "--param",
            "stiffnesses",
            "--init",
            "2.0",
            "--max-iters",
            "8",
        ],
    );
    let json = json.unwrap();
    assert!(code == 0 || code == 3, "exit {code}");
    assert_eq!(json["gradient"]["mode"], "adjoint");
    assert_eq!(json["optimizer"], "lbfgs");
    assert_eq!(json["gradient"]["checkpoint"]["policy"], "store_all");
    assert_eq!(json["gradient"]["checkpoint"]["forward_steps"], 40);
    let (l0, l1) = (
        json["initial_loss"].as_f64().unwrap(),
        json["loss"].as_f64().unwrap(),
    );
    assert!(l1 < 0.1 * l0, "{l0} -> {l1}");
    // Log-stiffnesses, two-level checkpointing, a smoothness penalty and starts.
    let (code, json) = fit_json(
        "log",
        &[
            "--param",
            "stiffnesses",
            "--log",
            "stiffnesses",
            "--init",
            "2.0",
            "--max-iters",
            "5",
            "--checkpoint",
            "two-level",
            "--smoothness",
            "1e-6",
            "--starts",
            "3",
        ],
    );
    let json = json.unwrap();
    assert!(code == 0 || code == 3, "exit {code}");
    assert_eq!(json["parameters"][0]["log"], true);
    assert_eq!(json["gradient"]["checkpoint"]["policy"], "two_level");
    assert!(
        json["gradient"]["checkpoint"]["peak_states"]
            .as_u64()
            .unwrap()
            <= 14
    );
    assert_eq!(json["starts"]["count"], 3);
    assert!(json["penalty"].as_f64().unwrap() >= 0.0);
    let k = json["parameters"][0]["result"].as_array().unwrap();
    assert!(k.iter().all(|v| v.as_f64().unwrap() > 0.0));
    // The scene-solver adjoint and a released smoothness continuation: no penalty left.
    let (code, json) = fit_json(
        "continued",
        &[
            "--param",
            "stiffnesses",
            "--init",
            "2.0",
            "--max-iters",
            "3",
            "--adjoint-solve",
            "scene",
            "--smoothness",
            "1e-6",
            "--smoothness-continuation",
            "1",
            "--smoothness-release",
        ],
    );
    let json = json.unwrap();
    assert!(code == 0 || code == 3, "exit {code}");
    assert_eq!(json["penalty"].as_f64(), Some(0.0));
    assert_eq!(json["smoothness_continuation"], 1);
    assert_eq!(json["smoothness_release"], true);
    assert!(json["loss"].as_f64().unwrap() < json["initial_loss"].as_f64().unwrap());
    // A scalar: forward and Levenberg-Marquardt as before.
    let (code, json) = fit_json("scalar", &["--param", "stiffness", "--init", "2.0"]);
    assert_eq!(code, 0);
    let json = json.unwrap();
    assert_eq!(json["gradient"]["mode"], "forward");
    assert_eq!(json["optimizer"], "levenberg_marquardt");
    // Per-particle masses from the command line (the guide listed them; the parser did
    // not know the name): the adjoint, one component per particle, the loss lowered.
    let (code, json) = fit_json(
        "masses",
        &["--param", "masses", "--init", "0.06", "--max-iters", "5"],
    );
    assert!(code == 0 || code == 3, "exit {code}");
    let json = json.unwrap();
    assert_eq!(json["gradient"]["mode"], "adjoint");
    assert_eq!(json["parameters"][0]["name"], "masses");
    assert_eq!(json["parameters"][0]["unit"], "kg");
    assert_eq!(json["parameters"][0]["components"], 42);
    assert!(json["loss"].as_f64().unwrap() < json["initial_loss"].as_f64().unwrap());
    // Refusals are usage errors, and no fit.json is written.
    for extra in [
        &[
            "--param",
            "charge",
            "--gradient",
            "adjoint",
            "--optimizer",
            "lm",
        ][..],
        &[
            "--param",
            "charge",
            "--gradient",
            "adjoint",
            "--window",
            "5",
        ][..],
        &["--param", "charge", "--checkpoint", "binomial"][..],
        // Options of an adjoint this fit does not run (they were ignored).
        &["--param", "stiffnesses", "--adjoint-cg", "5"][..],
        &["--param", "charge", "--adjoint-solve", "scene"][..],
        &["--param", "stiffnesses", "--smoothness-continuation", "2"][..],
        &[
            "--param",
            "stiffnesses",
            "--smoothness",
            "1e-6",
            "--smoothness-release",
        ][..],
    ] {
        let (code, json) = fit_json("refused", extra);
        assert_eq!(code, 2, "{extra:?}");
        assert!(json.is_none());
    }
}
