//! The stepping loop of a run: steps a simulator to each output step, where its
//! [`RunDriver`] records the energy row and frame, and stops at the first divergence or
//! stop request.

use super::driver::{Driven, RunDriver};
use super::RunError;
use crate::model::State;
use crate::output::RunDir;
use crate::scene::LoadedScene;
use crate::simulator::Simulator;
use std::time::Instant;

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

/// Steps per `step` call grow while a call takes less than this, so a stop request is
/// seen within about this long without a sync point every step.
pub(super) const STOP_LATENCY: std::time::Duration = std::time::Duration::from_millis(100);

/// The most steps per call: with a bar, at most 1/200 of the run so it moves.
pub(super) fn max_chunk(total: u64, bar: Option<&indicatif::ProgressBar>) -> u64 {
    if bar.is_some() {
        (total / 200).max(1)
    } else {
        u64::MAX
    }
}

/// [`drive`], calling `on_output` after each output step's row and frame are written
/// (`msc run --render` draws there).
pub fn drive_with(
    sim: &mut dyn Simulator,
    scene: &LoadedScene,
    dir: &mut RunDir,
    bar: Option<&indicatif::ProgressBar>,
    on_output: &mut OnOutput<'_>,
) -> Result<Driven, RunError> {
    let max_chunk = max_chunk(scene.config.steps, bar);
    let mut chunk = 1u64;
    let mut driver = RunDriver::new(scene, dir, bar)?;
    while let Some(target) = driver.next_target() {
        while driver.step() < target {
            if crate::interrupt::requested() {
                driver.interrupt();
                break;
            }
            let n = (target - driver.step()).min(chunk).min(max_chunk);
            let t0 = Instant::now();
            if let Err(e) = sim.step(n) {
                driver.step_failed(sim, e)?;
                break;
            }
            driver.advanced(n);
            if t0.elapsed() < STOP_LATENCY {
                chunk = chunk.saturating_mul(2);
            }
            if let Some(b) = bar {
                b.set_position(driver.step());
            }
        }
        driver.record(sim, &mut |sim, step, state| on_output(sim, step, state))?;
    }
    driver.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::measures::{Energies, SolveStats};
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

    /// A stop request seen right after an output step (chunks end there) ends the run
    /// without a second row or frame of that step.
    #[test]
    fn a_stop_right_after_an_output_step_records_it_once() {
        let sc = scene(10, 2, FrameFormat::Ply);
        let root = temp("stop");
        let mut dir = RunDir::create(&root, true).unwrap();
        let mut sim = drift(&sc, u64::MAX);
        let sim: &mut dyn Simulator = &mut sim;
        let mut driver = RunDriver::new(&sc, &mut dir, None).unwrap();
        driver.record(sim, &mut |_, _, _| Ok(())).unwrap();
        sim.step(2).unwrap();
        driver.advanced(2);
        driver.record(sim, &mut |_, _, _| Ok(())).unwrap();
        assert_eq!(driver.next_target(), Some(4));
        // What drive_with and drive_worlds do on a stop request before the next step.
        driver.interrupt();
        driver.record(sim, &mut |_, _, _| Ok(())).unwrap();
        assert_eq!(driver.next_target(), None);
        let d = driver.finish().unwrap();
        assert!(d.interrupted);
        assert_eq!((d.step, d.energy_rows, dir.frame_count()), (2, 2, 2));
        let csv = std::fs::read_to_string(root.join("energy.csv")).unwrap();
        let steps: Vec<&str> = csv.lines().skip(1).map(|l| &l[..2]).collect();
        assert_eq!(steps, ["0,", "2,"]);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
