//! Per-spring stiffness from observed frames: a cloth of 12 x 12 particles by default (506
//! springs with shear) whose middle band is five times stiffer than the rest is shaken and
//! recorded; starting from a uniform guess, every spring's stiffness is recovered by the
//! adjoint (one reverse sweep per gradient, whatever the number of springs) and L-BFGS on
//! log-stiffnesses. Forward mode would need one tangent per spring: 506 solves per step.
//!
//! The scene keeps omega h small (0.1 kg particles, h = 5 ms) so the implicit steps do not
//! damp the stiff band's motion out of the frames (see `tests/adjoint_fit.rs`).
//!
//!     cargo run --release --example fit_band [SIDE] [LAMBDA]
//!
//! SIDE (default 12) is the particles along each edge of the cloth. From 16 on, 300
//! L-BFGS iterations no longer reach 5% RMS: a few soft springs near the cloth's free
//! edge are driven far too stiff (docs/guide.md, "Fitting: forward and adjoint"). With
//! LAMBDA the fit runs a smoothness continuation: 300 iterations with that penalty
//! weight, then 300 without it from there (16 x 16 with 3e-5: 0.43% RMS; 20 x 20 and
//! 24 x 24 still miss).

use glam::DVec3;
use msc::config::{Config, Integrator, SolverConfig, SolverMethod};
use msc::grad::{
    fit, simulate, FitOptions, GradMode, GradOptions, Optimizer, Param, ParamSet, Target,
};
use msc::model::mesh::grid;
use msc::model::{Spring, System, SystemDesc};
use std::time::Instant;

const SIDE: u32 = 12;
const SOFT: f64 = 20.0;
const STIFF: f64 = 100.0;
const GUESS: f64 = 50.0;
const STEPS: u64 = 120;

fn cloth(side: u32) -> (System, Vec<bool>) {
    let mesh = grid([1.0, 1.0], [side, side], true, false).expect("grid");
    let x: Vec<DVec3> = mesh
        .positions
        .iter()
        .map(|p| DVec3::new(p.x, 0.0, p.y))
        .collect();
    let (zmin, zmax) = x
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.z), b.max(p.z)));
    let (xmin, xmax) = x
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.x), b.max(p.x)));
    let mid = 0.5 * (zmin + zmax);
    let mut band = Vec::new();
    let springs = mesh
        .edges
        .iter()
        .map(|&[i, j]| {
            let (a, b) = (x[i as usize], x[j as usize]);
            let stiff = ((a.z + b.z) * 0.5 - mid).abs() < 0.18 * (zmax - zmin);
            band.push(stiff);
            Spring {
                i,
                j,
                stiffness: if stiff { STIFF } else { SOFT },
                rest_length: (b - a).length(),
                damping: 0.01,
            }
        })
        .collect();
    let pinned: Vec<bool> = x
        .iter()
        .map(|p| p.z > zmax - 1e-9 && (p.x < xmin + 1e-9 || p.x > xmax - 1e-9))
        .collect();
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
    .expect("system");
    (system, band)
}

fn main() {
    let lambda = match std::env::args().nth(2).map(|a| a.parse::<f64>()) {
        None => 0.0,
        Some(Ok(l)) if l.is_finite() && l > 0.0 => l,
        Some(_) => {
            eprintln!("fit_band: LAMBDA must be a positive number");
            std::process::exit(2);
        }
    };
    let side = match std::env::args().nth(1) {
        None => SIDE,
        Some(a) => match a.parse::<u32>() {
            Ok(s) if s >= 3 => s,
            _ => {
                eprintln!("fit_band: SIDE must be a whole number of at least 3, got '{a}'");
                std::process::exit(2);
            }
        },
    };
    let (truth, band) = cloth(side);
    let config = Config {
        integrator: Integrator::Imex,
        dt: 0.005,
        steps: STEPS,
        gravity: DVec3::new(0.0, 0.0, -9.81),
        solver: SolverConfig {
            method: SolverMethod::Cg,
            iterations: 2000,
            omega: 1.0,
            tolerance: 1e-12,
            rho: None,
        },
        ..Config::default()
    };
    let set = ParamSet::new(&truth, &config, &[Param::Stiffnesses])
        .and_then(|s| s.with_log(&[true]))
        .expect("parameters");
    let grad = GradOptions {
        mode: GradMode::Adjoint,
        ..GradOptions::default()
    };
    let steps: Vec<u64> = (1..=STEPS).collect();
    let targets: Vec<Target> = simulate(&set, &set.initial(), &steps, &grad)
        .expect("target run")
        .into_iter()
        .map(|s| Target {
            step: s.step,
            positions: s.x,
        })
        .collect();
    let ns = truth.springs().len();
    println!(
        "{} particles, {ns} springs ({} in the stiff band), {STEPS} steps; start {GUESS} N/m everywhere",
        truth.len(),
        band.iter().filter(|b| **b).count()
    );
    let theta0 = set.from_values(&vec![GUESS; ns]).expect("start");
    let options = FitOptions {
        optimizer: Optimizer::Lbfgs { initial_step: 0.3 },
        max_iterations: 300,
        grad,
        ftol: 0.0,
        xtol: 1e-12,
        loss_tol: 0.0,
        smoothness: lambda,
        smoothness_continuation: u32::from(lambda > 0.0),
        smoothness_release: true,
    };
    let t = Instant::now();
    let out = fit(&set, &theta0, &targets, &options, |h| {
        if h.iteration % 25 == 0 {
            println!(
                "iter {:>3}: loss {:.3e} m^2, |grad| {:.2e}",
                h.iteration, h.loss, h.gradient_norm
            );
        }
    })
    .expect("fit");
    let k = set.values(&out.theta);
    let rel: Vec<f64> = k
        .iter()
        .zip(truth.springs())
        .map(|(a, s)| (a - s.stiffness) / s.stiffness)
        .collect();
    let rms = (rel.iter().map(|e| e * e).sum::<f64>() / ns as f64).sqrt();
    let mean = |stiff: bool| {
        let v: Vec<f64> = k
            .iter()
            .zip(&band)
            .filter(|(_, b)| **b == stiff)
            .map(|(k, _)| *k)
            .collect();
        v.iter().sum::<f64>() / v.len() as f64
    };
    println!(
        "{:?} after {} evaluations in {:.1} s: loss {:.3e} -> {:.3e} m^2",
        out.reason,
        out.evaluations,
        t.elapsed().as_secs_f64(),
        out.initial_loss,
        out.loss
    );
    println!(
        "band mean {:.2} N/m (true {STIFF}), rest mean {:.2} N/m (true {SOFT}), \
         RMS relative error over all springs {:.2}%",
        mean(true),
        mean(false),
        100.0 * rms
    );
    let mut abs: Vec<f64> = rel.iter().map(|e| e.abs()).collect();
    abs.sort_by(f64::total_cmp);
    println!(
        "relative error per spring: median {:.2}%, largest {:.2}% (target: RMS <= 5%)",
        100.0 * abs[abs.len() / 2],
        100.0 * abs[abs.len() - 1]
    );
}
