//! `msc fit` on a DDEF scene (a charged icosphere under DDEF, m = 27): the charge of a
//! target run comes back with forward gradients (CPU and GPU backends) and with the CPU
//! and GPU adjoints (`--gradient adjoint`).

mod common;

use msc::gpu::{GpuError, HeadlessOptions};
use std::path::Path;

/// The ball scene: an icosphere of `subdivisions`, charged 2e-6 C per particle, under
/// DDEF (m = 27), `steps` IMEX steps of 0.02 s with CG to 1e-12 in at most `cg`
/// iterations (the GPU runs all of them), a PLY frame every `every` steps; springs of
/// `stiffness`.
fn ball_scene(subdivisions: u32, steps: u32, every: u32, cg: u32, stiffness: f64) -> String {
    format!(
        r#"
name = "ball"
[mesh]
kind = "icosphere"
radius = 1.0
subdivisions = {subdivisions}
[material]
mass = 0.05
stiffness = {stiffness}
damping = 0.05
charge = 2e-6
[coulomb]
method = "ddef"
samples = 27
softening = 0.01
[integrator]
method = "imex"
dt = 0.02
steps = {steps}
solver = {{ method = "cg", iterations = {cg}, tolerance = 1e-12 }}
[output]
every = {every}
frames = "ply"
"#
    )
}

/// The scene of the forward and CPU adjoint fits: 162 particles, 20 steps.
fn ball() -> String {
    ball_scene(2, 20, 10, 500, 2.5)
}

/// `msc fit` on a DDEF scene, CPU and GPU backends (forward gradients): the charge of a
/// target run (CPU, float32 PLY frames) comes back from 1e-6 C to the precision of those
/// frames and of the f32 GPU trajectory (asked 1e-4 relative, as the all-pairs fit tests
/// in tests/gradients.rs and tests/gpu_gradients.rs).
#[test]
fn msc_fit_recovers_a_charge_on_a_ddef_scene() {
    let gpu = match msc::gpu::open_headless_device(&HeadlessOptions {
        allow_software: true,
    }) {
        Err(GpuError::NoAdapter(why)) => {
            common::skip_no_adapter(&why);
            false
        }
        _ => true,
    };
    let both = [("cpu", "forward"), ("gpu", "forward")];
    fit_ball(&ball(), if gpu { &both } else { &both[..1] });
}

/// The same with the CPU adjoint (`--gradient adjoint`), to the same precision.
#[test]
fn msc_fit_with_the_cpu_adjoint_recovers_a_charge_on_a_ddef_scene() {
    fit_ball(&ball(), &[("cpu", "adjoint")]);
}

/// `msc fit --gradient adjoint --backend gpu` on a DDEF scene (the GPU adjoint through
/// `kernels::ddef_adjoint`), kept short for a software adapter: a smaller ball (42
/// particles, 10 steps, 60 CG iterations), from 1.6e-6 C, 6 L-BFGS iterations (one
/// reverse sweep each). A target the scene reproduces exactly leaves every cotangent 0
/// at the truth, whatever the transpose (with the near transpose's row dropped from
/// `ddef_source_adjoint` such a fit still found 2e-6 C), so here the target's springs
/// are stiffer (3 against 2.5 N/m): no charge matches it, and the fit's answer is where
/// the computed gradient vanishes. It must agree with the CPU forward-mode fit's (f64
/// tangents) to 1e-6 relative. Measured on lavapipe: 1.95351778e-6 C on the CPU, the GPU
/// adjoint's within 5.3e-8 (f32 trajectories and sums; 1e-6 leaves 19x for other
/// adapters); planted in `ddef_source_adjoint`: the far field's transpose dropped gives
/// 2.5e-6, the near transpose's row dropped 4.2e-5. The scalar charge is a weak probe of
/// the transpose (an error that scales the charge's gradient keeps its zero): the
/// gradient itself is checked in tests/gpu_ddef_gradients.rs and tests/gpu_ddef_adjoint.rs.
/// About 8 s for both fits on lavapipe.
#[test]
fn msc_fit_with_the_gpu_adjoint_finds_the_cpus_charge_on_a_ddef_scene() {
    if let Err(GpuError::NoAdapter(why)) = msc::gpu::open_headless_device(&HeadlessOptions {
        allow_software: true,
    }) {
        common::skip_no_adapter(&why);
        return;
    }
    let (scene, target) = (ball_scene(1, 10, 5, 60, 2.5), ball_scene(1, 10, 5, 60, 3.0));
    let dir = tempfile::tempdir().unwrap();
    let t = run_target(dir.path(), &target);
    let fit = |backend, gradient, options: &[&str]| {
        fit_charge(dir.path(), &scene, &t, options, backend, gradient)
    };
    let cpu = fit("cpu", "forward", &["--init", "1.6e-6"]);
    let gpu = fit("gpu", "adjoint", &["--init", "1.6e-6", "--max-iters", "6"]);
    let rel = (gpu / cpu - 1.0).abs();
    eprintln!("stiffer target: CPU forward {cpu:e} C, GPU adjoint {gpu:e} C ({rel:.2e})");
    assert!(
        (cpu / 2e-6 - 1.0).abs() > 1e-2,
        "the target must not be reachable: {cpu}"
    );
    assert!(
        rel < 1e-6,
        "GPU adjoint {gpu}, CPU forward {cpu}: {rel:.2e}"
    );
}

/// Runs the target of `scene_text` on the CPU, then `msc fit` of its charge from 1e-6 C
/// with each (backend, gradient) of `runs`: the fit converges with the charge within
/// 1e-4 of 2e-6 C.
fn fit_ball(scene_text: &str, runs: &[(&str, &str)]) {
    let dir = tempfile::tempdir().unwrap();
    let t = run_target(dir.path(), scene_text);
    for &(backend, gradient) in runs {
        let q = fit_charge(
            dir.path(),
            scene_text,
            &t,
            &["--init", "1e-6"],
            backend,
            gradient,
        );
        assert!(
            (q / 2e-6 - 1.0).abs() < 1e-4,
            "{backend} {gradient}: charge {q}"
        );
    }
}

/// Runs `scene_text` on the CPU into `dir`/target; returns that run's folder.
fn run_target(dir: &Path, scene_text: &str) -> String {
    let scene = dir.join("target.toml");
    std::fs::write(&scene, scene_text).unwrap();
    let target = dir.join("target");
    let (s, t) = (scene.to_str().unwrap(), target.to_str().unwrap());
    let run = ["msc", "run", s, "--backend", "cpu", "--quiet", "--out", t];
    assert_eq!(msc::cli::main_with_args(run), 0);
    t.to_string()
}

/// `msc fit` of `scene_text`'s charge to the frames in `target` with `options` (the
/// start, an iteration cap), on `backend` with `gradient`; the fit converges, or stops at
/// the cap. Returns the charge found.
fn fit_charge(
    dir: &Path,
    scene_text: &str,
    target: &str,
    options: &[&str],
    backend: &str,
    gradient: &str,
) -> f64 {
    let scene = dir.join("ball.toml");
    std::fs::write(&scene, scene_text).unwrap();
    let out = dir.join(format!("fit-{backend}-{gradient}"));
    let mut args = vec!["msc", "fit", scene.to_str().unwrap(), "--target", target];
    args.extend(["--param", "charge"]);
    args.extend(options);
    args.extend(["--backend", backend, "--gradient", gradient, "--quiet"]);
    args.extend(["--out", out.to_str().unwrap()]);
    assert_eq!(msc::cli::main_with_args(args), 0, "{backend}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("fit.json")).unwrap()).unwrap();
    assert_eq!(json["gradient"]["backend"], backend, "{json}");
    assert_eq!(json["gradient"]["mode"], gradient, "{json}");
    let capped = options.contains(&"--max-iters");
    let stopped = json["converged"] == true || (capped && json["reason"] == "max_iterations");
    assert!(stopped, "{json}");
    let q = json["parameters"][0]["result"][0].as_f64().unwrap();
    eprintln!("{backend} {gradient}: charge {q:e} C");
    q
}
