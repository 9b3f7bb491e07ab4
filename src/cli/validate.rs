//! `msc validate`: the same scene on the GPU solver and on the f64 CPU reference, compared.
//!
//! Relative difference of a GPU quantity `a` against the CPU's `b`, always
//! `max |a - b| / max(|b|, scale)`, with a scale per quantity so that values near zero
//! do not turn rounding noise into huge ratios:
//! - positions: per particle |a_i - b_i| (Euclidean), over max(max_i |b_i|, D), D the
//!   diagonal of the CPU positions' bounding box (the object's size);
//! - velocities: the same, over max(max_i |b_i|, D / t), t the simulated time so far: a
//!   velocity error dv moves a particle by about dv t, so this matches the position scale;
//! - each energy term (and the total): |a - b| over max(|b|, E), E the largest magnitude
//!   of any of the CPU's five terms at any compared step: an f32 reduction carries errors
//!   relative to the energies it sums, so a term near zero (kinetic at rest, gravity
//!   switched off, every term of a cloth hanging still at step 0) is judged against the
//!   run's energy scale rather than against itself. E is at least M (D / t)^2 / 2, the
//!   kinetic energy of the whole mass M moving by the object's size in the elapsed time
//!   (the energy that the velocity scale stands for), so that a run whose every CPU term
//!   is exactly zero (a cloth at rest without gravity) is not judged against zero.
//!
//! A run that turns non-finite on either backend is reported as diverged, naming the
//! backend and the step, instead of a table of NaN.
//!
//! The steps compared are the output steps (every `output.every` steps, and the last); the
//! largest value over them is reported.

use super::scene_args::SceneArgs;
use super::CliError;
use crate::cpu::CpuSimulation;
use crate::gpu::{GpuSolver, HeadlessOptions};
use crate::model::State;
use crate::output::energy::output_steps;
use crate::run::RunError;
use crate::sim::Energies;
use crate::simulator::Simulator;
use glam::DVec3;

/// The default `--tolerance`.
pub const DEFAULT_TOLERANCE: f64 = 1e-3;

#[derive(Clone, Debug, clap::Args)]
pub struct ValidateArgs {
    #[command(flatten)]
    pub scene: SceneArgs,
    /// Steps to run on both backends
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub steps: u64,
    /// Largest relative difference accepted [default: 1e-3]
    #[arg(
        long,
        value_name = "T",
        default_value_t = DEFAULT_TOLERANCE,
        hide_default_value = true,
        value_parser = parse_tolerance,
        allow_negative_numbers = true,
        long_help = "Largest relative difference accepted, for every quantity [default: 1e-3]. \
            The GPU computes in f32 (unit roundoff 6e-8) and the CPU in f64; over 100 steps the \
            rounding differences grow through the linear solves and the Coulomb sums far above \
            6e-8, while a wrong force, sign or solver shows up as a difference of order 1: \
            1e-3 sits between the two. Relative difference: \
            max|gpu - cpu| / max(|cpu|, scale); the scale is the object's size for positions, \
            size / elapsed time for velocities, and the largest energy term for energies"
    )]
    pub tolerance: f64,
}

fn parse_tolerance(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(t) if t.is_finite() && t > 0.0 => Ok(t),
        _ => Err(format!("expected a positive number, got '{s}'")),
    }
}

/// Largest relative differences found, in report order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Comparison {
    pub positions: f64,
    pub velocities: f64,
    /// (term, difference) for kinetic .. total.
    pub energies: Vec<(&'static str, f64)>,
}

impl Comparison {
    /// (quantity, difference) rows.
    pub fn rows(&self) -> Vec<(&'static str, f64)> {
        let mut rows = vec![
            ("positions", self.positions),
            ("velocities", self.velocities),
        ];
        rows.extend(self.energies.iter().copied());
        rows
    }
    /// The largest row; NaN (a non-finite comparison) counts as infinitely large.
    pub fn worst(&self) -> (&'static str, f64) {
        let mut w = ("positions", 0.0);
        for r in self.rows() {
            if r.1.is_nan() {
                return r;
            }
            if r.1 > w.1 {
                w = r;
            }
        }
        w
    }
}

/// max, with NaN winning.
fn worse(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

fn max_diff(a: &[DVec3], b: &[DVec3]) -> f64 {
    if a.len() != b.len() {
        return f64::NAN;
    }
    a.iter()
        .zip(b)
        .map(|(p, q)| (*p - *q).length())
        .fold(0.0, worse)
}

fn max_len(v: &[DVec3]) -> f64 {
    v.iter().map(|p| p.length()).fold(0.0, worse)
}

/// d / scale, 0 when d is 0 (also for a zero scale), NaN when d is.
fn rel(d: f64, scale: f64) -> f64 {
    if d == 0.0 {
        0.0
    } else {
        d / scale.max(f64::MIN_POSITIVE)
    }
}

/// Collects the comparisons at each compared step; [`Tracker::finish`] applies the
/// definitions of the module documentation.
#[derive(Clone, Debug, Default)]
pub struct Tracker {
    positions: f64,
    velocities: f64,
    /// Per step: (|a - b|, |b|) for kinetic .. total.
    energies: Vec<[(f64, f64); 6]>,
    /// The largest |term| of the CPU so far (E).
    energy_scale: f64,
}

impl Tracker {
    /// Adds one step: GPU state and energies `a`, `ea`; CPU `b`, `eb`. `dt` bounds the
    /// elapsed time from below (at step 0 the velocity scale is then size / dt); `mass`
    /// is the total mass, for the energy scale's floor.
    pub fn add(&mut self, a: &State, ea: &Energies, b: &State, eb: &Energies, dt: f64, mass: f64) {
        let (lo, hi) = b.x.iter().fold(
            (DVec3::splat(f64::INFINITY), DVec3::splat(f64::NEG_INFINITY)),
            |(lo, hi), p| (lo.min(*p), hi.max(*p)),
        );
        let size = if b.x.is_empty() {
            0.0
        } else {
            (hi - lo).length()
        };
        let p = rel(max_diff(&a.x, &b.x), max_len(&b.x).max(size));
        let t = b.t.max(dt);
        let v = rel(max_diff(&a.v, &b.v), max_len(&b.v).max(size / t));
        self.positions = worse(self.positions, p);
        self.velocities = worse(self.velocities, v);
        let (ta, tb) = (ea.terms(), eb.terms());
        self.energies.push(std::array::from_fn(|k| {
            ((ta[k].1 - tb[k].1).abs(), tb[k].1.abs())
        }));
        // The five terms, not the total (which they sum to).
        for (_, e) in &tb[..5] {
            self.energy_scale = worse(self.energy_scale, e.abs());
        }
        self.energy_scale = worse(self.energy_scale, 0.5 * mass * (size / t).powi(2));
    }

    pub fn finish(&self) -> Comparison {
        let names = Energies::default().terms().map(|(n, _)| n);
        let energies = (0..6)
            .map(|k| {
                let d = self
                    .energies
                    .iter()
                    .map(|e| rel(e[k].0, e[k].1.max(self.energy_scale)))
                    .fold(0.0, worse);
                (names[k], d)
            })
            .collect();
        Comparison {
            positions: self.positions,
            velocities: self.velocities,
            energies,
        }
    }
}

/// The comparison of a single step.
pub fn compare(
    a: &State,
    ea: &Energies,
    b: &State,
    eb: &Energies,
    dt: f64,
    mass: f64,
) -> Comparison {
    let mut t = Tracker::default();
    t.add(a, ea, b, eb, dt, mass);
    t.finish()
}

/// Runs both backends and prints the table; [`CliError::Mismatch`] beyond the tolerance.
pub fn execute(args: &ValidateArgs) -> Result<Comparison, CliError> {
    let mut scene = args.scene.load(Some(args.steps))?;
    // The GPU runs a fixed number of sweeps per solve; make the CPU do the same so both
    // compute the same iterates rather than stopping at different points.
    scene.config.solver.tolerance = 0.0;
    let (system, config) = (&scene.system, &scene.config);
    let mut gpu = GpuSolver::headless(
        system,
        config,
        &HeadlessOptions {
            allow_software: true,
        },
    )
    .map_err(RunError::Gpu)?;
    let adapter = gpu
        .adapter()
        .map(|a| format!("{} ({}, {})", a.name, a.backend, a.device_type))
        .unwrap_or_else(|| gpu.backend_name());
    let mut cpu = CpuSimulation::new(system, config).map_err(RunError::Config)?;

    println!(
        "validate {}: {} steps of {} ({}, {} iterations per solve on both backends), dt = {} s",
        scene.name,
        config.steps,
        config.integrator.name(),
        config.solver.method.name(),
        config.solver.iterations,
        config.dt
    );
    println!("GPU: {adapter}; CPU: f64 reference");
    // Both backends evaluate the same Coulomb method; DDEF the same lattice policy
    // (box, sites per axis, stencils), so the tolerance judges arithmetic, not method.
    match config.coulomb.method.ddef() {
        Some(d) => println!(
            "Coulomb: ddef on both backends (the {} grid, {} variant, m = {})",
            d.grid.name(),
            d.variant.name(),
            d.samples.resolve(system.charged_count())
        ),
        None => println!("Coulomb: {} on both backends", config.coulomb.method.name()),
    }

    let mass: f64 = system.masses().iter().sum();
    let mut tracker = Tracker::default();
    let mut step = 0;
    let sim_err = |step: u64| move |source| RunError::Sim { step, source };
    for target in output_steps(config.steps, scene.output.every) {
        if target > step {
            gpu.step(target - step).map_err(sim_err(step))?;
            cpu.step(target - step).map_err(sim_err(step))?;
            step = target;
        }
        let (sa, ea) = (
            gpu.state().map_err(sim_err(step))?,
            gpu.energies().map_err(sim_err(step))?,
        );
        let (sb, eb) = (
            cpu.state().map_err(sim_err(step))?,
            cpu.energies().map_err(sim_err(step))?,
        );
        for (backend, state, energies) in [("GPU", &sa, &ea), ("CPU", &sb, &eb)] {
            if !state.is_finite() || !energies.is_finite() {
                return Err(CliError::ValidateDiverged { backend, step });
            }
        }
        tracker.add(&sa, &ea, &sb, &eb, config.dt, mass);
    }
    let total = tracker.finish();

    println!("{:<12} max relative difference", "quantity");
    for (name, d) in total.rows() {
        let flag = if d.is_nan() || d > args.tolerance {
            "  > tolerance"
        } else {
            ""
        };
        println!("{name:<12} {d:.3e}{flag}");
    }
    let (name, worst) = total.worst();
    if worst.is_nan() || worst > args.tolerance {
        return Err(CliError::Mismatch {
            tolerance: args.tolerance,
            worst: format!("{name} differ by {worst:.3e}"),
        });
    }
    println!("all within the tolerance {:e}", args.tolerance);
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(x: Vec<DVec3>, v: Vec<DVec3>, t: f64) -> State {
        State { x, v, t, step: 1 }
    }

    #[test]
    fn identical_runs_differ_by_zero() {
        let s = state(vec![DVec3::X, DVec3::Y], vec![DVec3::Z, DVec3::ZERO], 1.0);
        let e = Energies::new(1.0, 2.0, 0.0, 0.0, 0.0);
        let c = compare(&s, &e, &s, &e, 0.1, 0.0);
        assert!(c.rows().iter().all(|(_, d)| *d == 0.0), "{c:?}");
    }

    #[test]
    fn scales_follow_the_definition() {
        // Object of size |(2,0,0)-(0,0,0)| = 2, farthest point at 2: position scale 2.
        let b = state(
            vec![DVec3::ZERO, DVec3::new(2.0, 0.0, 0.0)],
            vec![DVec3::ZERO; 2],
            0.5,
        );
        let mut a = b.clone();
        a.x[1].y += 0.01;
        a.v[0].z = 0.04;
        let eb = Energies::new(0.0, 10.0, -4.0, 0.0, 0.0);
        let ea = Energies::new(1e-3, 10.0, -4.0, 0.0, 2e-3);
        let c = compare(&a, &ea, &b, &eb, 0.1, 0.0);
        assert!((c.positions - 0.005).abs() < 1e-12);
        // CPU at rest: velocity scale is size / t = 4 m/s.
        assert!((c.velocities - 0.01).abs() < 1e-12);
        // Near-zero terms are measured against the largest term (10 J), not themselves.
        let e: std::collections::HashMap<_, _> = c.energies.iter().copied().collect();
        assert!((e["kinetic"] - 1e-4).abs() < 1e-15);
        assert!((e["external"] - 2e-4).abs() < 1e-15);
        assert_eq!(e["elastic"], 0.0);
        assert_eq!(c.worst().0, "velocities");
    }

    #[test]
    fn non_finite_results_fail() {
        let b = state(vec![DVec3::X], vec![DVec3::ZERO], 1.0);
        let mut a = b.clone();
        a.x[0].x = f64::NAN;
        let e = Energies::new(1.0, 0.0, 0.0, 0.0, 0.0);
        assert!(compare(&a, &e, &b, &e, 0.1, 0.0).worst().1.is_nan());
        let nan = Energies::new(f64::NAN, 0.0, 0.0, 0.0, 0.0);
        assert!(compare(&b, &nan, &b, &e, 0.1, 0.0).worst().1.is_nan());
    }

    #[test]
    fn a_still_start_is_judged_against_the_runs_energy_scale() {
        // A cloth at rest: every CPU term ~0 at step 0, the GPU's f32 rounding is not.
        let s = state(vec![DVec3::ZERO, DVec3::X], vec![DVec3::ZERO; 2], 0.0);
        let mut t = Tracker::default();
        t.add(
            &s,
            &Energies::new(0.0, 1e-9, 0.0, 2e-9, 0.0),
            &s,
            &Energies::new(0.0, 0.0, 0.0, 1e-17, 0.0),
            0.1,
            0.0,
        );
        // Later it has sagged: gravity -5 J, elastic 2 J.
        t.add(
            &s,
            &Energies::new(0.1, 2.0, 0.0, -5.0, 0.0),
            &s,
            &Energies::new(0.1, 2.0, 0.0, -5.0, 0.0),
            0.1,
            0.0,
        );
        let c = t.finish();
        let e: std::collections::HashMap<_, _> = c.energies.iter().copied().collect();
        assert!((e["elastic"] - 1e-9 / 5.0).abs() < 1e-20, "{e:?}");
        assert!((e["gravity"] - (2e-9 - 1e-17) / 5.0).abs() < 1e-20, "{e:?}");
        // A single step at rest alone would have blown up.
        let alone = compare(
            &s,
            &Energies::new(0.0, 1e-9, 0.0, 2e-9, 0.0),
            &s,
            &Energies::new(0.0, 0.0, 0.0, 1e-17, 0.0),
            0.1,
            0.0,
        );
        assert!(alone.worst().1 > 1e3);
    }

    #[test]
    fn a_run_at_rest_everywhere_is_judged_against_its_mass_scale() {
        // Cloth at rest without gravity: every CPU term is exactly 0 at every step. The
        // floor M (D / t)^2 / 2 = 0.5 * 2 kg * (1 m / 1 s)^2 = 1 J keeps f32 noise small.
        let s = state(vec![DVec3::ZERO, DVec3::X], vec![DVec3::ZERO; 2], 1.0);
        let c = compare(
            &s,
            &Energies::new(0.0, 1e-9, 0.0, 0.0, 0.0),
            &s,
            &Energies::new(0.0, 0.0, 0.0, 0.0, 0.0),
            0.1,
            2.0,
        );
        let e: std::collections::HashMap<_, _> = c.energies.iter().copied().collect();
        assert!((e["elastic"] - 1e-9).abs() < 1e-20, "{e:?}");
        // Without the mass the same noise is judged against nothing.
        let bare = compare(
            &s,
            &Energies::new(0.0, 1e-9, 0.0, 0.0, 0.0),
            &s,
            &Energies::new(0.0, 0.0, 0.0, 0.0, 0.0),
            0.1,
            0.0,
        );
        assert!(bare.worst().1 > 1e3);
    }
}
