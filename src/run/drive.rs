//! The stepping loop of a run: steps a simulator to each output step, records the energy
//! row and frame there, and stops at the first divergence or stop request.

use super::RunError;
use crate::display::Vec3;
use crate::model::State;
use crate::output::energy::output_steps;
use crate::output::RunDir;
use crate::scene::LoadedScene;
use crate::sim::{Energies, SolveStats};
use crate::simulator::Simulator;
use std::time::Instant;

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
) -> Result<Driven, RunError> {
    drive_with(sim, scene, dir, bar, &mut |_, _, _| Ok(()))
}

/// Called by [`drive_with`] at each finite output step with the simulator, the step and
/// the state when the loop read it back for a frame (else `None`: read it if needed).
pub type OnOutput<'a> =
    dyn FnMut(&mut dyn Simulator, u64, Option<&State>) -> Result<(), RunError> + 'a;

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
) -> Result<Driven, RunError> {
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
    let sim_err = |step: u64| move |source| RunError::Sim { step, source };
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
        log.row(step, crate::sim::time_at(step, dt), &energies)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::model::{State, System, SystemDesc};
    use crate::scene::FrameFormat;
    use crate::scene::OutputConfig;
    use crate::simulator::SimError;
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
