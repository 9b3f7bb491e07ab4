//! `msc run`: simulate a scene and write its outputs.

use super::backend::{self, BackendArg};
use super::scene_args::{self, SceneArgs};
use super::CliError;
use crate::output::energy::{output_count, output_steps};
use crate::output::{RunDir, Summary};
use crate::scene::FrameFormat;
use crate::sim::{Energies, SolveStats};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Clone, Debug, Default, clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub scene: SceneArgs,
    /// Output folder [default: out/<scene name>]. Earlier outputs there are replaced
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Which solver runs the scene
    #[arg(long, value_enum, default_value_t = BackendArg::Auto)]
    pub backend: BackendArg,
    /// Number of steps, overriding the scene's `steps` or `duration`
    #[arg(long, value_name = "N")]
    pub steps: Option<u64>,
    /// No progress bar and no closing report (errors and notes still go to stderr)
    #[arg(long, short)]
    pub quiet: bool,
}

/// What a finished run produced.
#[derive(Debug)]
pub struct RunOutcome {
    pub out: PathBuf,
    pub summary: Summary,
}

/// Runs the scene; a run that turns non-finite still writes its outputs, then returns
/// [`CliError::Diverged`].
pub fn execute(args: &RunArgs) -> Result<RunOutcome, CliError> {
    let scene = scene_args::load(&args.scene, args.steps)?;
    let (system, config) = (&scene.system, &scene.config);
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("out").join(&scene.name));
    let mut dir = RunDir::create(&out, scene.output.frames == FrameFormat::Ply)?;
    // First, so that even a killed run leaves what it was running.
    dir.write_scene(&scene.resolved_toml)?;

    let setup = Instant::now();
    let backend::Backend {
        mut sim,
        adapter,
        fallback_note,
    } = backend::start(args.backend, system, config)?;
    let setup_seconds = setup.elapsed().as_secs_f64();
    if let Some(note) = &fallback_note {
        eprintln!("{note}");
    }

    let total = config.steps;
    let dt = config.dt;
    let every = scene.output.every.max(1);
    let bar = progress_bar(total, args.quiet);
    // With a bar, step in small chunks so it moves; otherwise straight to the next output.
    let chunk = if bar.is_some() {
        (total / 200).max(1)
    } else {
        u64::MAX
    };

    let mut log = dir.energy_log()?;
    let start = Instant::now();
    let mut step = 0u64;
    let mut energies = Energies::default();
    let mut finite = true;
    let mut stats: Option<SolveStats> = None;
    let sim_err = |step: u64| move |source| CliError::Sim { step, source };
    for target in output_steps(total, every) {
        while step < target {
            let n = (target - step).min(chunk);
            sim.step(n).map_err(sim_err(step))?;
            step += n;
            if let Some(b) = &bar {
                b.set_position(step);
            }
        }
        energies = sim.energies().map_err(sim_err(step))?;
        log.row(step, step as f64 * dt, &energies)?;
        finite = energies.is_finite();
        if dir.writes_frames() || !finite || step == total {
            let state = sim.state().map_err(sim_err(step))?;
            finite &= state.is_finite();
            dir.write_frame(&state, system.charges(), system.faces())?;
        }
        if step > 0 {
            stats = sim.solve_stats().map_err(sim_err(step))?;
        }
        if let Some(b) = &bar {
            b.set_message(format!("E = {:.6e} J", energies.total));
        }
        if !finite {
            break;
        }
        log.flush()?;
    }
    let wall_seconds = start.elapsed().as_secs_f64();
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let energy_rows = log.rows();
    log.finish()?;

    let summary = Summary {
        msc_version: env!("CARGO_PKG_VERSION").to_string(),
        scene: scene.name.clone(),
        backend: sim.backend_name(),
        adapter,
        particles: system.len(),
        springs: system.springs().len(),
        charged: system.charged_count(),
        integrator: config.integrator.name().to_string(),
        solver: config.solver.method.name().to_string(),
        solver_max_iterations: config.solver.iterations,
        solver_tolerance: config.solver.tolerance,
        coulomb: config.coulomb.method.name().to_string(),
        dt,
        steps_requested: total,
        steps: step,
        time: step as f64 * dt,
        setup_seconds,
        wall_seconds,
        ms_per_step: if step > 0 {
            wall_seconds * 1e3 / step as f64
        } else {
            0.0
        },
        finite,
        final_energy: energies,
        solver_residual: stats.map(|s| s.residual),
        solver_iterations: stats.map(|s| s.iterations),
        energy_rows,
        frames: dir.frame_count(),
    };
    dir.write_summary(&summary)?;
    if !finite {
        return Err(CliError::Diverged {
            step,
            time: step as f64 * dt,
            out,
        });
    }
    if !args.quiet {
        report(&summary, &out, output_count(total, every));
    }
    Ok(RunOutcome { out, summary })
}

fn progress_bar(total: u64, quiet: bool) -> Option<indicatif::ProgressBar> {
    if quiet || !std::io::stderr().is_terminal() {
        return None;
    }
    let style = indicatif::ProgressStyle::with_template(
        "{elapsed_precise} [{bar:40}] {pos}/{len} steps ({per_sec}, eta {eta}) {msg}",
    )
    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
    .progress_chars("=> ");
    Some(indicatif::ProgressBar::new(total).with_style(style))
}

fn report(s: &Summary, out: &std::path::Path, rows: u64) {
    println!(
        "{}: {} steps of {} ({}) on {} in {:.3} s ({:.4} ms/step)",
        s.scene, s.steps, s.integrator, s.solver, s.backend, s.wall_seconds, s.ms_per_step
    );
    let e = &s.final_energy;
    println!(
        "final energy {:.6e} J (kinetic {:.4e}, elastic {:.4e}, coulomb {:.4e}, gravity {:.4e}, external {:.4e})",
        e.total, e.kinetic, e.elastic, e.coulomb, e.gravity, e.external
    );
    if let (Some(r), Some(i)) = (s.solver_residual, s.solver_iterations) {
        println!("last linear solve: {i} iterations, relative residual {r:.3e}");
    }
    println!(
        "wrote {} (energy.csv: {rows} rows, {} frames, summary.json, scene.toml)",
        out.display(),
        s.frames
    );
}
