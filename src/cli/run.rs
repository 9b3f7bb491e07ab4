//! `msc run`: simulate a scene and write its outputs.

use super::render::{LiveRender, RenderStyle};
use super::scene_args::SceneArgs;
use super::CliError;
use crate::output::Summary;
use crate::run::{self, backend, BackendArg, RunError, RunOutcome, Watch};
use crate::simulator::Simulator;
use std::path::PathBuf;

#[derive(Clone, Debug, Default, clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub scene: SceneArgs,
    /// Output folder (default: `out/<scene name>`). Earlier outputs there are replaced
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
    /// Draw every output step to OUT/render/frame_NNNNNN.png while the run goes: from the
    /// solver's own buffers on the GPU backend; the CPU backend uploads its positions to
    /// a device of its own. The style options below apply
    #[arg(long)]
    pub render: bool,
    #[command(flatten)]
    pub render_style: RenderStyle,
}

/// Runs the scene; a run that turns non-finite still writes its outputs, then returns
/// [`CliError::Diverged`].
pub fn execute(args: &RunArgs) -> Result<RunOutcome, CliError> {
    let scene = match args.backend {
        // The adapter's buffer limits are checked before the mesh is built.
        BackendArg::Gpu => run::load::load_checked(
            &args.scene.scene,
            &args.scene.set,
            args.steps,
            backend::gpu_size_check(),
        )?,
        _ => args.scene.load(args.steps)?,
    };
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("out").join(&scene.name));
    let choice = args.backend;
    let style = &args.render_style;
    let (outcome, live) = run::run_scene_with(
        &scene,
        &out,
        !args.quiet,
        |system, config| backend::start_with_handles(choice, system, config),
        args.render
            .then_some(|system: &_, handles| LiveRender::start(style, system, handles, &out)),
    )?;
    let s = &outcome.summary;
    if !s.finite {
        return Err(CliError::Diverged {
            step: s.steps,
            time: s.time,
            why: s.divergence.clone().unwrap_or_default(),
            out,
        });
    }
    if s.interrupted {
        return Err(CliError::Interrupted {
            unit: "step",
            at: s.steps,
            out,
        });
    }
    if !args.quiet {
        report(s, &out);
        if let Some(l) = &live {
            println!("rendered {} images into {}", l.images(), l.dir().display());
        }
    }
    Ok(outcome)
}

/// `msc run --render` draws each output step.
impl Watch for LiveRender {
    fn output(
        &mut self,
        sim: &mut dyn Simulator,
        step: u64,
        state: Option<&crate::model::State>,
    ) -> Result<(), RunError> {
        self.frame(sim, step, state)
    }
}

fn report(s: &Summary, out: &std::path::Path) {
    // The linear solver only matters to the implicit integrators (they report stats).
    let solver = match &s.solver {
        Some(method) => format!(" ({method})"),
        None => String::new(),
    };
    println!(
        "{}: {} steps of {}{solver} on {} in {:.3} s ({:.4} ms/step)",
        s.scene, s.steps, s.integrator, s.backend, s.wall_seconds, s.ms_per_step
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
        "wrote {} (energy.csv: {} rows, {} frames, summary.json, scene.toml)",
        out.display(),
        s.energy_rows,
        s.frames
    );
}
