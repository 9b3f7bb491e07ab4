//! `msc run`: simulate a scene and write its outputs.

use super::backend::{self, BackendArg, GpuHandles};
use super::render::{LiveRender, RenderStyle};
use super::scene_args::{self, SceneArgs};
use super::CliError;
use crate::config::Config;
use crate::digest::sha256_hex;
use crate::display::Vec3;
use crate::model::{State, System};
use crate::output::energy::output_steps;
use crate::output::{RunDir, Summary};
use crate::scene::{FrameFormat, LoadedScene, SceneSize, Shortfall};
use crate::sim::{Energies, Simulator, SolveStats};
use std::path::{Path, PathBuf};
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
    /// Draw every output step to OUT/render/frame_NNNNNN.png while the run goes: from the
    /// solver's own buffers on the GPU backend; the CPU backend uploads its positions to
    /// a device of its own. The style options below apply
    #[arg(long)]
    pub render: bool,
    #[command(flatten)]
    pub render_style: RenderStyle,
}

/// What a finished run produced.
#[derive(Debug)]
pub struct RunOutcome {
    pub out: PathBuf,
    pub summary: Summary,
}

/// The size check of `--backend gpu`: the scene's solver buffers, from its counts,
/// against the limits of the adapter the run will open. Without an adapter nothing is
/// checked here (starting the backend reports that).
fn gpu_size_check() -> impl FnOnce(&SceneSize, &Config) -> Result<(), Shortfall> {
    let adapter = crate::gpu::headless_adapter_limits(&crate::gpu::HeadlessOptions {
        allow_software: true,
    });
    move |size, config| {
        let Ok((name, limits)) = adapter else {
            return Ok(());
        };
        // Every particle charged: an upper bound on the Coulomb buffers.
        match crate::gpu::limits::oversized_buffer(
            &limits,
            size.particles,
            size.springs,
            size.particles,
            config,
        ) {
            None => Ok(()),
            Some(b) => Err(Shortfall {
                what: format!("GPU adapter '{name}': {b}"),
                needed: b.bytes,
                available: b.limit,
            }),
        }
    }
}

/// Runs the scene; a run that turns non-finite still writes its outputs, then returns
/// [`CliError::Diverged`].
pub fn execute(args: &RunArgs) -> Result<RunOutcome, CliError> {
    let scene = match args.backend {
        // The adapter's buffer limits are checked before the mesh is built.
        BackendArg::Gpu => scene_args::load_checked(&args.scene, args.steps, gpu_size_check())?,
        _ => scene_args::load(&args.scene, args.steps)?,
    };
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("out").join(&scene.name));
    let choice = args.backend;
    let (outcome, live) = run_scene_with(
        &scene,
        &out,
        !args.quiet,
        |system, config| backend::start_with_handles(choice, system, config),
        args.render.then_some(&args.render_style),
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
        return Err(CliError::Interrupted { step: s.steps, out });
    }
    if !args.quiet {
        report(s, &out);
        if let Some(l) = &live {
            println!("rendered {} images into {}", l.images(), l.dir().display());
        }
    }
    Ok(outcome)
}

/// Runs a loaded scene into the folder `out` with the backend `start` builds, writing
/// every output `msc run` writes (`msc sweep` and `msc batch` call this with a shared GPU
/// device). A run that turns non-finite is not an error here: it returns its outcome with
/// `summary.finite == false`. `progress`: draw a step bar when stderr is a terminal.
pub fn run_scene(
    scene: &LoadedScene,
    out: &Path,
    progress: bool,
    start: impl FnOnce(&System, &Config) -> Result<backend::Backend, CliError>,
) -> Result<RunOutcome, CliError> {
    let no_handles = |system: &System, config: &Config| start(system, config).map(|b| (b, None));
    run_scene_with(scene, out, progress, no_handles, None).map(|(outcome, _)| outcome)
}

/// [`run_scene`], drawing frames while it runs when `render` is given (`msc run --render`):
/// from the solver's own buffers when `start` returns its GPU handles, else uploaded.
fn run_scene_with(
    scene: &LoadedScene,
    out: &Path,
    progress: bool,
    start: impl FnOnce(&System, &Config) -> Result<(backend::Backend, Option<GpuHandles>), CliError>,
    render: Option<&RenderStyle>,
) -> Result<(RunOutcome, Option<LiveRender>), CliError> {
    let (system, config) = (&scene.system, &scene.config);
    if let Some(src) = &scene.source {
        RunDir::check_inputs(out, &[(src.as_path(), "scene file")])?;
    }
    // The backend first: an input it refuses (a value f32 cannot hold, a mesh beyond
    // the adapter's limits) leaves an earlier run in `out` untouched.
    let setup = Instant::now();
    let (
        backend::Backend {
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
    let mut dir = RunDir::create(out, scene.output.frames == FrameFormat::Ply)?;
    // Before the first step, so that even a killed run leaves what it was running.
    dir.write_scene(&scene.resolved_toml)?;

    let mut live = match render {
        Some(style) => Some(LiveRender::start(style, system, handles, out)?),
        None => None,
    };

    let bar = crate::progress::bar(config.steps, "steps", !progress);
    let ran = match live.as_mut() {
        Some(l) => drive_with(
            sim.as_mut(),
            scene,
            &mut dir,
            bar.as_ref(),
            &mut |sim, step, state| l.frame(sim, step, state),
        )?,
        None => drive(sim.as_mut(), scene, &mut dir, bar.as_ref())?,
    };
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
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
    // Read back what the run wrote, so the summary (written last) vouches for it.
    let outputs = dir.digest_outputs()?;

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
        divergence,
        interrupted,
        final_energy: energies,
        solver_residual: stats.map(|s| s.residual),
        solver_iterations: stats.map(|s| s.iterations),
        energy_rows,
        frames: dir.frame_count(),
        ddef: sim.ddef_counts(),
        scene_sha256: sha256_hex(scene.resolved_toml.as_bytes()),
        inputs: scene.inputs.clone(),
        outputs,
    };
    dir.write_summary(&summary)?;
    let outcome = RunOutcome {
        out: out.to_path_buf(),
        summary,
    };
    Ok((outcome, live))
}

/// What [`drive`] did.
#[derive(Clone, Debug)]
pub struct Driven {
    /// Steps done.
    pub step: u64,
    /// The last energies recorded.
    pub energies: Energies,
    /// False when the run stopped on a divergence (see `divergence`).
    pub finite: bool,
    /// Why the run was judged diverged: non-finite energies, a state beyond the frames'
    /// f32 range, or a stage (the DDEF grid) that failed on a non-finite state.
    pub divergence: Option<String>,
    /// True when a stop request (SIGINT, SIGTERM) ended the run early.
    pub interrupted: bool,
    /// The last linear solve.
    pub stats: Option<SolveStats>,
    pub wall_seconds: f64,
    pub energy_rows: u64,
}

/// The stepping loop: steps `sim` to each output step, records an energy row (and a frame
/// when the folder takes frames), and stops at the first divergence or stop request.
/// `energy.csv` is committed in every case, errors included.
pub fn drive(
    sim: &mut dyn Simulator,
    scene: &LoadedScene,
    dir: &mut RunDir,
    bar: Option<&indicatif::ProgressBar>,
) -> Result<Driven, CliError> {
    drive_with(sim, scene, dir, bar, &mut |_, _, _| Ok(()))
}

/// Called by [`drive_with`] at each finite output step with the simulator, the step and
/// the state when the loop read it back for a frame (else `None`: read it if needed).
pub type OnOutput<'a> =
    dyn FnMut(&mut dyn Simulator, u64, Option<&State>) -> Result<(), CliError> + 'a;

/// Steps per `Simulator::step` call grow while a call takes less than this, so a stop
/// request is seen within about this long without a sync point every step.
const STOP_LATENCY: std::time::Duration = std::time::Duration::from_millis(100);

/// [`drive`], calling `on_output` after each output step's row and frame are written
/// (`msc run --render` draws there).
pub fn drive_with(
    sim: &mut dyn Simulator,
    scene: &LoadedScene,
    dir: &mut RunDir,
    bar: Option<&indicatif::ProgressBar>,
    on_output: &mut OnOutput<'_>,
) -> Result<Driven, CliError> {
    let system = &scene.system;
    let (total, dt) = (scene.config.steps, scene.config.dt);
    // With a bar, at most 1/200 of the run per call so it moves.
    let max_chunk = if bar.is_some() {
        (total / 200).max(1)
    } else {
        u64::MAX
    };
    let mut chunk = 1u64;
    let mut log = dir.energy_log()?;
    let start = Instant::now();
    let mut step = 0u64;
    let mut energies = Energies::default();
    let mut divergence: Option<String> = None;
    let mut interrupted = false;
    let mut stats: Option<SolveStats> = None;
    let sim_err = |step: u64| move |source| CliError::Sim { step, source };
    let mut targets = output_steps(total, scene.output.every).peekable();
    while let Some(&target) = targets.peek() {
        while step < target {
            if crate::interrupt::requested() {
                interrupted = true;
                break;
            }
            let n = (target - step).min(chunk).min(max_chunk);
            let t0 = Instant::now();
            if let Err(e) = sim.step(n) {
                // A stage that fails on the state it was handed (the DDEF grid on
                // non-finite positions) reports a divergence, not a failure.
                let state = sim.state().ok().filter(|s| s.first_outside_f32().is_some());
                let Some(state) = state else {
                    return Err(sim_err(step)(e));
                };
                step = state.step;
                divergence = Some(e.to_string());
                break;
            }
            step += n;
            if t0.elapsed() < STOP_LATENCY {
                chunk = chunk.saturating_mul(2);
            }
            if let Some(b) = bar {
                b.set_position(step);
            }
        }
        if step == target {
            targets.next();
        }
        energies = sim.energies().map_err(sim_err(step))?;
        log.row(step, step as f64 * dt, &energies)?;
        // Divergence is judged on the energy reduction (six numbers from the GPU): a
        // non-finite velocity makes the kinetic sum non-finite, and a position can only
        // leave the finite range through one. The state is read back only for frames;
        // a state that the f32 frames cannot hold is a divergence too.
        if divergence.is_none() && !energies.is_finite() {
            divergence = Some("non-finite energies".into());
        }
        // A state f32 cannot hold (the GPU's and the frames' precision) is a divergence
        // on every backend, frames or not: an f64 backend checks its own state.
        let beyond = |i: usize, s: &State| {
            format!(
                "particle {i} is beyond the f32 range (position {}, velocity {})",
                Vec3(s.x[i]),
                Vec3(s.v[i])
            )
        };
        if divergence.is_none() {
            if let Some(i) = sim.first_outside_f32().map_err(sim_err(step))? {
                divergence = Some(beyond(i, &sim.state().map_err(sim_err(step))?));
            }
        }
        let mut state = None;
        if divergence.is_none() && dir.writes_frames() {
            let s = sim.state().map_err(sim_err(step))?;
            // A frame never holds inf, whatever the energies said.
            match s.first_outside_f32() {
                Some(i) => divergence = Some(beyond(i, &s)),
                None => {
                    dir.write_frame(&s, system.charges(), system.faces())?;
                    state = Some(s);
                }
            }
        }
        if divergence.is_some() {
            break;
        }
        on_output(sim, step, state.as_ref())?;
        if step > 0 {
            stats = sim.solve_stats().map_err(sim_err(step))?;
        }
        if let Some(b) = bar {
            b.set_message(format!("E = {:.6e} J", energies.total));
        }
        log.flush()?;
        if interrupted {
            break;
        }
    }
    let wall_seconds = start.elapsed().as_secs_f64();
    let energy_rows = log.rows();
    log.finish()?;
    Ok(Driven {
        step,
        energies,
        finite: divergence.is_none(),
        divergence,
        interrupted,
        stats,
        wall_seconds,
        energy_rows,
    })
}

fn report(s: &Summary, out: &std::path::Path) {
    // The linear solver only matters to the implicit integrators (they report stats).
    let solver = match s.solver_iterations {
        Some(_) => format!(" ({})", s.solver),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::model::{State, System, SystemDesc};
    use crate::scene::OutputConfig;
    use crate::sim::SimError;
    use glam::DVec3;

    /// Two particles drifting at 1 m/s; energies turn NaN from `nan_from` steps on.
    struct Drift {
        state: State,
        nan_from: u64,
        calls: Vec<u64>,
        state_reads: u64,
    }

    impl Simulator for Drift {
        fn step(&mut self, n: u64) -> Result<(), SimError> {
            self.calls.push(n);
            self.state.step += n;
            self.state.t = self.state.step as f64 * 0.5;
            for x in &mut self.state.x {
                x.x += n as f64 * 0.5;
            }
            Ok(())
        }
        fn state(&mut self) -> Result<State, SimError> {
            self.state_reads += 1;
            Ok(self.state.clone())
        }
        fn energies(&mut self) -> Result<Energies, SimError> {
            let k = if self.state.step >= self.nan_from {
                f64::NAN
            } else {
                1.0
            };
            Ok(Energies::new(k, 0.0, 0.0, 0.0, 0.0))
        }
        fn solve_stats(&mut self) -> Result<Option<SolveStats>, SimError> {
            Ok(Some(SolveStats {
                iterations: self.state.step as u32,
                residual: 0.0,
            }))
        }
        fn backend_name(&self) -> String {
            "drift".into()
        }
    }

    fn scene(steps: u64, every: u64, frames: FrameFormat) -> LoadedScene {
        let system = System::new(SystemDesc {
            positions: vec![DVec3::ZERO, DVec3::Y],
            velocities: vec![DVec3::X; 2],
            masses: vec![1.0; 2],
            charges: vec![1e-6, 0.0],
            ..Default::default()
        })
        .unwrap();
        LoadedScene {
            name: "drift".into(),
            config: Config {
                steps,
                dt: 0.5,
                ..Config::default()
            },
            output: OutputConfig { every, frames },
            source: None,
            resolved_toml: String::new(),
            inputs: vec![],
            system,
        }
    }

    fn drift(scene: &LoadedScene, nan_from: u64) -> Drift {
        Drift {
            state: scene.system.initial_state(),
            nan_from,
            calls: vec![],
            state_reads: 0,
        }
    }

    fn temp(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("msc-drive-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn drive_records_every_output_step_and_the_last() {
        let sc = scene(7, 3, FrameFormat::Ply);
        let root = temp("ok");
        let mut dir = RunDir::create(&root, true).unwrap();
        let mut sim = drift(&sc, u64::MAX);
        let d = drive(&mut sim, &sc, &mut dir, None).unwrap();
        assert!(d.finite);
        assert_eq!(d.step, 7);
        // Calls never cross an output step, and add up to the run.
        let mut at = 0;
        for &n in &sim.calls {
            let next = [3, 6, 7].into_iter().find(|&t| t > at).unwrap();
            assert!(at + n <= next, "{:?} crosses {next}", sim.calls);
            at += n;
        }
        assert_eq!(at, 7);
        assert_eq!(d.energy_rows, 4);
        assert_eq!(dir.frame_count(), 4);
        assert_eq!(d.stats.unwrap().iterations, 7);
        let csv = std::fs::read_to_string(root.join("energy.csv")).unwrap();
        let steps: Vec<&str> = csv
            .lines()
            .skip(1)
            .map(|l| l.split(',').next().unwrap())
            .collect();
        assert_eq!(steps, ["0", "3", "6", "7"]);
        assert!(root.join("frames/frame_000003.ply").is_file());
        assert!(!root.join("frames/frame_000004.ply").exists());
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn drive_stops_at_the_first_non_finite_row() {
        let sc = scene(100, 10, FrameFormat::None);
        let root = temp("nan");
        let mut dir = RunDir::create(&root, false).unwrap();
        let mut sim = drift(&sc, 25);
        let d = drive(&mut sim, &sc, &mut dir, None).unwrap();
        assert!(!d.finite);
        assert_eq!(d.step, 30);
        assert_eq!(d.energy_rows, 4);
        assert!(d.energies.kinetic.is_nan());
        let csv = std::fs::read_to_string(root.join("energy.csv")).unwrap();
        assert_eq!(csv.lines().count(), 5);
        assert!(csv.lines().last().unwrap().starts_with("30,"));
        assert!(!root.join("frames").exists());
        // Without frames the divergence test used the energies only.
        assert_eq!(sim.state_reads, 0);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
