//! The paper's stiffness-estimation experiment (Section 4.2, Figure 11): a cloth hanging
//! from two corners under 10x gravity; the spring constant of the target (50 N/m) is
//! recovered from an initial guess of 20 N/m by fitting the IMEX simulation.
//!
//! The paper's t-shirt is not available; a 1 m x 1 m cloth of 15 x 15 vertices with shear
//! springs stands in (50 g in all, damping 0.001 N s/m, as the `cloth` scene). Targets:
//! the IMEX simulation itself at h = 0.01 s (an exact recovery is expected), and velocity
//! Verlet at h = 2e-4 s (a different discretization: the fit absorbs the IMEX error;
//! fitted at h = 0.01 s and 0.002 s).
//! Frames every 0.1 s over 2 s.
//!
//! Measured (release build): the IMEX target is recovered exactly (50.00000 N/m). Against
//! the Verlet target, h = 0.01 s gives 52.2 N/m over all frames and 48.1 N/m on the last
//! one. At h = 0.002 s the lightly damped cloth still swings in the fitted model and the
//! loss along k is rough on a 0.1 N/m scale (its gradient agrees with finite differences
//! of step 1e-5, not with those of step 1e-2): LM from 20 N/m stops in a ripple near
//! 25 N/m although the loss keeps falling towards 50 N/m on a coarse scan, printed last.
//! The coarse step's numerical damping smooths the loss; so do `--frames last` and a
//! truncation window.
//!
//!     cargo run --release --example fit_cloth

use glam::DVec3;
use msc::config::{Config, Integrator, SolverConfig, SolverMethod};
use msc::grad::{fit, simulate, FitOptions, GradOptions, Param, ParamSet, Target};
use msc::model::mesh::grid;
use msc::model::{Spring, System, SystemDesc};
use std::time::Instant;

const K_TARGET: f64 = 50.0;
const K_START: f64 = 20.0;
const DURATION: f64 = 2.0;
const FRAME_EVERY: f64 = 0.1;
const RES: u32 = 15;

fn cloth(stiffness: f64) -> System {
    let mesh = grid([1.0, 1.0], [RES, RES], true, false).expect("grid");
    let n = mesh.positions.len();
    let springs = mesh
        .edges
        .iter()
        .map(|&[i, j]| Spring {
            i,
            j,
            stiffness,
            rest_length: (mesh.positions[j as usize] - mesh.positions[i as usize]).length(),
            damping: 0.001,
        })
        .collect();
    let mut pinned = vec![false; n];
    // The two corners of the top (max y) row.
    pinned[n - RES as usize] = true;
    pinned[n - 1] = true;
    System::new(SystemDesc {
        positions: mesh.positions.clone(),
        velocities: vec![],
        masses: vec![0.05 / n as f64; n],
        charges: vec![],
        pinned,
        springs,
        faces: mesh.faces.clone(),
    })
    .expect("system")
}

fn config(integrator: Integrator, dt: f64) -> Config {
    Config {
        integrator,
        dt,
        steps: (DURATION / dt).round() as u64,
        gravity: DVec3::new(0.0, -98.1, 0.0),
        solver: SolverConfig {
            method: SolverMethod::Cg,
            iterations: 2000,
            omega: 1.0,
            tolerance: 1e-10,
            rho: None,
        },
        ..Config::default()
    }
}

fn steps_of(t: f64, dt: f64) -> u64 {
    (t / dt).round() as u64
}

fn main() {
    let frames: Vec<f64> = (1..=(DURATION / FRAME_EVERY).round() as u64)
        .map(|k| k as f64 * FRAME_EVERY)
        .collect();
    let truth = cloth(K_TARGET);
    println!(
        "cloth: {} particles, {} springs, target k = {K_TARGET} N/m, start {K_START} N/m",
        truth.len(),
        truth.springs().len()
    );
    println!(
        "{:<24} {:<8} {:>6} {:>11} {:>9} {:>11} {:>6} {:>7}  stop",
        "target", "frames", "h (s)", "k (N/m)", "error", "rms (m)", "iters", "time(s)"
    );
    let mut scan_line = String::new();
    for (t_int, t_h) in [(Integrator::Imex, 0.01), (Integrator::Verlet, 2e-4)] {
        let t_cfg = config(t_int, t_h);
        let t_set = ParamSet::new(&truth, &t_cfg, &[Param::StiffnessScale]).expect("params");
        let t_steps: Vec<u64> = frames.iter().map(|&t| steps_of(t, t_h)).collect();
        let states =
            simulate(&t_set, &[1.0], &t_steps, &GradOptions::default()).expect("target run");
        // The IMEX step of the fit; against the Verlet target also a finer one, which
        // shows how much of the error is the coarse step's numerical damping.
        let mut cases = vec![(0.01, false), (0.01, true)];
        if t_int == Integrator::Verlet {
            cases.push((0.002, false));
        }
        for (h, last_only) in cases {
            let cfg = config(Integrator::Imex, h);
            let set = ParamSet::new(&truth, &cfg, &[Param::StiffnessScale]).expect("params");
            let mut targets: Vec<Target> = frames
                .iter()
                .zip(&states)
                .map(|(&t, s)| Target {
                    step: steps_of(t, h),
                    positions: s.x.clone(),
                })
                .collect();
            if last_only {
                targets = targets.split_off(targets.len() - 1);
            }
            let started = Instant::now();
            let start = K_START / K_TARGET;
            let out = fit(&set, &[start], &targets, &FitOptions::default(), |_| {}).expect("fit");
            let k = out.theta[0] * K_TARGET;
            if h == 0.002 {
                // The loss along k, to see what the fit stopped in.
                let scan: Vec<String> = [20.0, 25.0, 30.0, 35.0, 40.0, 45.0, 50.0, 55.0, 60.0]
                    .iter()
                    .map(|&kk: &f64| {
                        let e = msc::grad::evaluate(
                            &set,
                            &[kk / K_TARGET],
                            &targets,
                            &GradOptions::default(),
                            false,
                            false,
                        )
                        .expect("loss");
                        format!("{kk}: {:.3e}", e.loss.sqrt())
                    })
                    .collect();
                scan_line = format!(
                    "  rms error along k at h = {h} (N/m: m): {}",
                    scan.join(", ")
                );
            }
            println!(
                "{:<24} {:<8} {:>6} {:>11.5} {:>8.3}% {:>11.3e} {:>6} {:>7.1}  {:?}",
                format!("{} h = {t_h}", t_int.name()),
                if last_only { "last" } else { "all" },
                h,
                k,
                100.0 * (k / K_TARGET - 1.0),
                out.loss.sqrt(),
                out.history.last().map_or(0, |e| e.iteration),
                started.elapsed().as_secs_f64(),
                out.reason
            );
        }
    }
    println!("{scan_line}");
}
