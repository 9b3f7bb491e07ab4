//! `msc validate`: the same scene on the GPU solver and on the f64 CPU reference,
//! compared (`run::validate` says how), with the table of the largest relative
//! differences.

use super::scene_args::SceneArgs;
use super::CliError;
pub use crate::run::validate::DEFAULT_TOLERANCE;
use crate::run::validate::{Comparison, Outcome, Validation};

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

/// Runs both backends and prints the table; [`CliError::Mismatch`] beyond the tolerance.
pub fn execute(args: &ValidateArgs) -> Result<Comparison, CliError> {
    let scene = args.scene.load(Some(args.steps))?;
    let mut validation = Validation::new(scene)?;
    let adapter = validation.adapter();
    let (scene, config) = (validation.scene(), &validation.scene().config);
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
            d.samples.resolve(scene.system.charged_count())
        ),
        None => println!("Coulomb: {} on both backends", config.coulomb.method.name()),
    }
    let total = match validation.run()? {
        Outcome::Compared(c) => c,
        Outcome::Diverged { backend, step } => {
            return Err(CliError::ValidateDiverged { backend, step })
        }
    };

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
