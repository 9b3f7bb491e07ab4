//! A loaded scene run into a folder: the backend started first (an input it refuses
//! leaves an earlier run untouched), the scene copy, the stepping loop with its progress
//! bar, then `summary.json`, which vouches for every output written.

use super::backend::{Backend, GpuHandles};
use super::driver::Driven;
use super::stepping::{drive, drive_with};
use super::RunError;
use crate::config::Config;
use crate::digest::sha256_hex;
use crate::gpu::AdapterSummary;
use crate::measures::DdefCounts;
use crate::model::{State, System};
use crate::output::{RunDir, Summary};
use crate::scene::{FrameFormat, LoadedScene};
use crate::simulator::Simulator;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What a finished run produced.
#[derive(Debug)]
pub struct RunOutcome {
    pub out: PathBuf,
    pub summary: Summary,
}

/// Runs a loaded scene into the folder `out` with the backend `start` builds, writing
/// every output `msc run` writes (`msc sweep` and `msc batch` call this with a shared GPU
/// device). A run that turns non-finite is not an error here: it returns its outcome with
/// `summary.finite == false`. `progress`: draw a step bar when stderr is a terminal.
pub fn run_scene(
    scene: &LoadedScene,
    out: &Path,
    progress: bool,
    start: impl FnOnce(&System, &Config) -> Result<Backend, RunError>,
) -> Result<RunOutcome, RunError> {
    let no_handles = |system: &System, config: &Config| start(system, config).map(|b| (b, None));
    let unwatched = None::<fn(&System, Option<GpuHandles>) -> Result<Unwatched, RunError>>;
    run_scene_with(scene, out, progress, no_handles, unwatched).map(|(outcome, _)| outcome)
}

/// Watches a run's output steps (`msc run --render` draws each one).
pub trait Watch {
    /// Called at each finite output step after its energy row and frame are written, with
    /// the state when the loop read it back for a frame (else `None`: read it if needed).
    fn output(
        &mut self,
        sim: &mut dyn Simulator,
        step: u64,
        state: Option<&State>,
    ) -> Result<(), RunError>;
}

/// The [`Watch`] of a run nobody watches.
pub enum Unwatched {}

impl Watch for Unwatched {
    fn output(&mut self, _: &mut dyn Simulator, _: u64, _: Option<&State>) -> Result<(), RunError> {
        match *self {}
    }
}

/// [`run_scene`], with a watcher of its output steps when `watch` is given: it is made
/// once the folder exists, from the system and the GPU handles `start` returned (a
/// renderer draws from the solver's own buffers then), and returned with the outcome.
pub fn run_scene_with<W: Watch>(
    scene: &LoadedScene,
    out: &Path,
    progress: bool,
    start: impl FnOnce(&System, &Config) -> Result<(Backend, Option<GpuHandles>), RunError>,
    watch: Option<impl FnOnce(&System, Option<GpuHandles>) -> Result<W, RunError>>,
) -> Result<(RunOutcome, Option<W>), RunError> {
    let (system, config) = (&scene.system, &scene.config);
    check_folder(scene, out)?;
    // The backend first: an input it refuses (a value f32 cannot hold, a mesh beyond
    // the adapter's limits) leaves an earlier run in `out` untouched.
    let setup = Instant::now();
    let (
        Backend {
            mut sim,
            adapter,
            fallback_note,
        },
        handles,
    ) = start(system, config)?;
    let setup_seconds = setup.elapsed().as_secs_f64();
    if let Some(note) = &fallback_note {
        eprintln!("{note}");
    }
    let mut dir = open_folder(scene, out)?;

    let mut watcher = match watch {
        Some(make) => Some(make(system, handles)?),
        None => None,
    };

    let bar = crate::progress::bar(config.steps, "steps", !progress);
    let ran = match watcher.as_mut() {
        Some(w) => drive_with(
            sim.as_mut(),
            scene,
            &mut dir,
            bar.as_ref(),
            &mut |sim, step, state| w.output(sim, step, state),
        )?,
        None => drive(sim.as_mut(), scene, &mut dir, bar.as_ref())?,
    };
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let ran_on = RanOn {
        backend: sim.backend_name(),
        adapter,
        setup_seconds,
        ddef: sim.ddef_counts(),
    };
    let outcome = finish_folder(scene, &dir, ran, ran_on)?;
    Ok((outcome, watcher))
}

/// Refuses a folder where an output would replace the scene file or a file the scene
/// reads, such as its mesh (inputs are never overwritten).
pub fn check_folder(scene: &LoadedScene, out: &Path) -> Result<(), RunError> {
    RunDir::check_inputs(out, &crate::output::inputs::of_scene(scene))?;
    Ok(())
}

/// Creates the run folder (clearing an earlier run's outputs) and writes the scene copy,
/// before the first step, so that even a killed run leaves what it was running.
pub fn open_folder(scene: &LoadedScene, out: &Path) -> Result<RunDir, RunError> {
    let mut dir = RunDir::create(out, scene.output.frames == FrameFormat::Ply)?;
    dir.write_scene(&scene.resolved_toml)?;
    Ok(dir)
}

/// What ran a run, for its summary.
#[derive(Clone, Debug)]
pub struct RanOn {
    /// "cpu", or the GPU adapter's name.
    pub backend: String,
    pub adapter: Option<AdapterSummary>,
    /// Starting the backend (a batch's: every world's).
    pub setup_seconds: f64,
    pub ddef: Option<DdefCounts>,
}

/// Writes `summary.json` last, from what the driver did and read back from every output
/// written, so that it vouches for them.
pub fn finish_folder(
    scene: &LoadedScene,
    dir: &RunDir,
    ran: Driven,
    on: RanOn,
) -> Result<RunOutcome, RunError> {
    let (system, config) = (&scene.system, &scene.config);
    let (total, dt) = (config.steps, config.dt);
    let Driven {
        step,
        energies,
        finite,
        divergence,
        interrupted,
        stats,
        wall_seconds,
        energy_rows,
    } = ran;
    let outputs = dir.digest_outputs()?;
    let implicit = config.integrator.is_implicit();
    let summary = Summary {
        msc_version: env!("CARGO_PKG_VERSION").to_string(),
        scene: scene.name.clone(),
        backend: on.backend,
        adapter: on.adapter,
        particles: system.len(),
        springs: system.springs().len(),
        charged: system.charged_count(),
        integrator: config.integrator.name().to_string(),
        solver: implicit.then(|| config.solver.method.name().to_string()),
        solver_max_iterations: implicit.then_some(config.solver.iterations),
        solver_tolerance: implicit.then_some(config.solver.tolerance),
        coulomb: config.coulomb.method.name().to_string(),
        dt,
        steps_requested: total,
        steps: step,
        time: crate::measures::time_at(step, dt),
        setup_seconds: on.setup_seconds,
        wall_seconds,
        ms_per_step: if step > 0 {
            wall_seconds * 1e3 / step as f64
        } else {
            0.0
        },
        finite,
        divergence,
        interrupted,
        final_energy: energies,
        solver_residual: stats.map(|s| s.residual),
        solver_iterations: stats.map(|s| s.iterations),
        energy_rows,
        frames: dir.frame_count(),
        ddef: on.ddef,
        scene_sha256: sha256_hex(scene.resolved_toml.as_bytes()),
        inputs: scene.inputs.clone(),
        outputs,
    };
    dir.write_summary(&summary)?;
    Ok(RunOutcome {
        out: dir.root().to_path_buf(),
        summary,
    })
}
