//! The stepping loop of a batch of worlds: steps them in lockstep to the nearest output
//! step of the worlds still running, where each world's [`RunDriver`] records exactly
//! what driving that world alone would; a world that ends, diverges or fails drops out
//! and the others go on.

use super::driver::{Driven, RunDriver, WorldProbe};
use super::stepping::{max_chunk, STOP_LATENCY};
use super::RunError;
use crate::gpu::GpuError;
use crate::output::RunDir;
use crate::scene::LoadedScene;
use crate::simulator::{SimError, Worlds};
use std::time::Instant;

/// Drives world `w` of `worlds` as `runs[w]` (its scene and folder), all together: one
/// `step` call advances every world, up to the smallest next output step among the worlds
/// still running. Returns one outcome per world, in order, each what [`super::drive`](fn@super::drive)
/// would return for that world alone (its `wall_seconds` counts from the batch's start to
/// the world's end). A world that ended is still stepped with the rest (worlds never
/// interact) but records nothing more. `bar` shows the batch's steps.
pub fn drive_worlds(
    worlds: &mut dyn Worlds,
    runs: Vec<(&LoadedScene, &mut RunDir)>,
    bar: Option<&indicatif::ProgressBar>,
) -> Vec<Result<Driven, RunError>> {
    let count = runs.len();
    if worlds.len() != count {
        let why = format!("{} worlds driven as {count} runs", worlds.len());
        return (0..count)
            .map(|_| Err(sim_error(0, GpuError::Worlds(why.clone()).into())))
            .collect();
    }
    let longest = runs.iter().map(|(s, _)| s.config.steps).max().unwrap_or(0);
    let max_chunk = max_chunk(longest, bar);
    let mut outcomes: Vec<Option<Result<Driven, RunError>>> = (0..count).map(|_| None).collect();
    let mut drivers: Vec<Option<RunDriver>> = Vec::with_capacity(count);
    for (w, (scene, dir)) in runs.into_iter().enumerate() {
        match RunDriver::new(scene, dir, None) {
            Ok(d) => drivers.push(Some(d)),
            Err(e) => {
                outcomes[w] = Some(Err(e));
                drivers.push(None);
            }
        }
    }
    let mut step = 0u64;
    let mut chunk = 1u64;
    // Every world records at its next output step; after a stop request or a failed step
    // every world still running records where it is, and ends.
    let mut record_all = false;
    loop {
        for (w, slot) in drivers.iter_mut().enumerate() {
            let Some(driver) = slot else { continue };
            let mut probe = WorldProbe {
                worlds: &mut *worlds,
                w,
            };
            if record_all || driver.next_target() == Some(driver.step()) {
                if let Err(e) = driver.record(&mut probe, &mut |_, _, _| Ok(())) {
                    outcomes[w] = Some(Err(e));
                    *slot = None;
                    continue;
                }
            }
            if driver.next_target().is_none() {
                let driver = slot.take().expect("running");
                outcomes[w] = Some(driver.finish());
            }
        }
        let Some(target) = drivers
            .iter()
            .flatten()
            .filter_map(|d| d.next_target())
            .min()
        else {
            break;
        };
        while step < target {
            if crate::interrupt::requested() {
                drivers.iter_mut().flatten().for_each(|d| d.interrupt());
                record_all = true;
                break;
            }
            let n = (target - step).min(chunk).min(max_chunk);
            let t0 = Instant::now();
            if let Err(e) = worlds.step(n) {
                // Each world still running judges the failure on its own state: a
                // divergence there, else the world's error.
                for (w, slot) in drivers.iter_mut().enumerate() {
                    let Some(driver) = slot else { continue };
                    let mut probe = WorldProbe {
                        worlds: &mut *worlds,
                        w,
                    };
                    if let Err(e) = driver.step_failed(&mut probe, for_world(&e)) {
                        outcomes[w] = Some(Err(e));
                        *slot = None;
                    }
                }
                record_all = true;
                break;
            }
            step += n;
            drivers.iter_mut().flatten().for_each(|d| d.advanced(n));
            if t0.elapsed() < STOP_LATENCY {
                chunk = chunk.saturating_mul(2);
            }
            if let Some(b) = bar {
                b.set_position(step);
            }
        }
    }
    outcomes
        .into_iter()
        .map(|o| {
            o.unwrap_or_else(|| {
                Err(sim_error(
                    step,
                    GpuError::Worlds("not driven".into()).into(),
                ))
            })
        })
        .collect()
}

fn sim_error(step: u64, source: SimError) -> RunError {
    RunError::Sim { step, source }
}

/// A batch's step failure as one world's error: a lost device stays a lost device (the
/// batch opens a new one), anything else is named as the batch's.
fn for_world(e: &SimError) -> SimError {
    match e {
        SimError::Gpu(GpuError::DeviceLost(m)) => GpuError::DeviceLost(m.clone()).into(),
        e => GpuError::Worlds(format!("stepping the batch failed: {e}")).into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::CpuSimulation;
    use crate::run::drive;
    use crate::scene::FrameFormat;
    use crate::simulator::{CpuWorlds, Simulator};
    use std::path::{Path, PathBuf};

    /// A small torus (18 particles) with `set` on top, run `steps` steps.
    fn scene(steps: u64, set: &[&str]) -> LoadedScene {
        let mut all = vec!["mesh.rings=6", "mesh.sides=3"];
        all.extend_from_slice(set);
        let all: Vec<String> = all.into_iter().map(String::from).collect();
        crate::run::load::load("torus", &all, Some(steps)).unwrap()
    }

    /// Worlds of different sizes, steps, output intervals and frames; the third diverges
    /// (explicit Verlet with a spring far too stiff for its time step).
    fn scenes() -> Vec<LoadedScene> {
        vec![
            scene(20, &["output.every=5"]),
            scene(
                13,
                &[
                    "mesh.rings=9",
                    "output.every=4",
                    "material.charge=2e-6",
                    "integrator.dt=0.02",
                ],
            ),
            scene(
                60,
                &[
                    "integrator.method=\"verlet\"",
                    "material.stiffness=1e6",
                    "integrator.dt=1.0",
                    "output.every=2",
                ],
            ),
            scene(7, &["output.every=10", "output.frames=\"none\""]),
        ]
    }

    fn temp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("msc-worlds-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn open(root: &Path, scene: &LoadedScene) -> RunDir {
        RunDir::create(root, scene.output.frames == FrameFormat::Ply).unwrap()
    }

    /// Every file under `dir`, by relative path, with its bytes.
    fn files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
        let mut out = vec![];
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    let rel = p.strip_prefix(dir).unwrap().to_path_buf();
                    out.push((rel, std::fs::read(&p).unwrap()));
                }
            }
        }
        out.sort();
        out
    }

    fn same(a: &Driven, b: &Driven) {
        assert_eq!(a.step, b.step);
        assert_eq!(a.finite, b.finite);
        assert_eq!(a.divergence, b.divergence);
        assert_eq!(a.interrupted, b.interrupted);
        assert_eq!(a.energy_rows, b.energy_rows);
        assert_eq!(format!("{:?}", a.energies), format!("{:?}", b.energies));
        assert_eq!(format!("{:?}", a.stats), format!("{:?}", b.stats));
    }

    #[test]
    fn each_world_writes_exactly_what_it_writes_alone() {
        let scenes = scenes();
        let root = temp("same");
        let alone: Vec<Driven> = scenes
            .iter()
            .enumerate()
            .map(|(k, sc)| {
                let mut sim = CpuSimulation::new(&sc.system, &sc.config).unwrap();
                let mut dir = open(&root.join(format!("alone-{k}")), sc);
                drive(&mut sim as &mut dyn Simulator, sc, &mut dir, None).unwrap()
            })
            .collect();
        let sims = scenes
            .iter()
            .map(|sc| CpuSimulation::new(&sc.system, &sc.config).unwrap())
            .collect();
        let mut worlds = CpuWorlds::new(sims);
        let mut dirs: Vec<RunDir> = (scenes.iter().enumerate())
            .map(|(k, sc)| open(&root.join(format!("batch-{k}")), sc))
            .collect();
        let runs = scenes.iter().zip(dirs.iter_mut()).collect();
        let batched = drive_worlds(&mut worlds, runs, None);
        // Closed as the alone runs' folders were (each releases its lock).
        drop(dirs);
        assert_eq!(batched.len(), scenes.len());
        // The stiff Verlet world diverges, the others finish: one world's end stops no
        // other.
        assert!(!alone[2].finite, "{:?}", alone[2]);
        assert!(alone[2].step < 60);
        for (k, (a, b)) in alone.iter().zip(&batched).enumerate() {
            let b = b.as_ref().unwrap();
            if k != 2 {
                assert!(a.finite && a.step == scenes[k].config.steps, "{a:?}");
            }
            same(a, b);
            let (fa, fb) = (
                files(&root.join(format!("alone-{k}"))),
                files(&root.join(format!("batch-{k}"))),
            );
            assert!(fa.iter().any(|(p, _)| p.ends_with("energy.csv")));
            assert_eq!(fa.len(), fb.len(), "world {k}");
            for ((pa, ba), (pb, bb)) in fa.iter().zip(&fb) {
                assert_eq!(pa, pb, "world {k}");
                assert!(ba == bb, "world {k}: {} differs", pa.display());
            }
        }
        // A world that ended kept being stepped (harmless) until the last world running
        // (20 steps; the 60-step one diverged) ended.
        assert_eq!(worlds.sims()[3].current().step, 20);
        assert_eq!(worlds.sims()[2].current().step, 20);
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// CPU worlds whose device is lost at the step call that would pass `lost_at`.
    struct Lost {
        worlds: CpuWorlds,
        done: u64,
        lost_at: u64,
    }

    impl Worlds for Lost {
        fn len(&self) -> usize {
            self.worlds.len()
        }
        fn step(&mut self, n: u64) -> Result<(), SimError> {
            if self.done + n > self.lost_at {
                return Err(GpuError::DeviceLost("test".into()).into());
            }
            self.done += n;
            self.worlds.step(n)
        }
        fn state(&mut self, w: usize) -> Result<crate::model::State, SimError> {
            self.worlds.state(w)
        }
        fn energies(&mut self, w: usize) -> Result<crate::measures::Energies, SimError> {
            self.worlds.energies(w)
        }
        fn solve_stats(
            &mut self,
            w: usize,
        ) -> Result<Option<crate::measures::SolveStats>, SimError> {
            self.worlds.solve_stats(w)
        }
        fn backend_name(&self) -> String {
            "lost".into()
        }
    }

    #[test]
    fn a_lost_device_fails_the_worlds_still_running_only() {
        // 4 steps (done before the loss), then 20 steps with rows every 5.
        let scenes = [
            scene(4, &["output.every=2"]),
            scene(20, &["output.every=5"]),
        ];
        let root = temp("lost");
        let sims = (scenes.iter())
            .map(|sc| CpuSimulation::new(&sc.system, &sc.config).unwrap())
            .collect();
        let mut worlds = Lost {
            worlds: CpuWorlds::new(sims),
            done: 0,
            lost_at: 8,
        };
        let mut dirs: Vec<RunDir> = (scenes.iter().enumerate())
            .map(|(k, sc)| open(&root.join(format!("{k}")), sc))
            .collect();
        let runs = scenes.iter().zip(dirs.iter_mut()).collect();
        let out = drive_worlds(&mut worlds, runs, None);
        let first = out[0].as_ref().unwrap();
        assert!(first.finite && first.step == 4, "{first:?}");
        let e = out[1].as_ref().unwrap_err();
        // The batch opens a new device for its next runs.
        assert!(e.is_device_loss(), "{e}");
        // After the row at 5, before the step that would pass 8 (the calls' sizes
        // depend on their speed).
        assert!(
            matches!(e, RunError::Sim { step, .. } if (5..=8).contains(step)),
            "{e}"
        );
        // The rows recorded before the loss stay committed.
        let csv = std::fs::read_to_string(root.join("1/energy.csv")).unwrap();
        let steps: Vec<&str> = (csv.lines().skip(1))
            .map(|l| l.split(',').next().unwrap())
            .collect();
        assert_eq!(steps, ["0", "5"]);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_batch_of_the_wrong_size_is_an_error_for_every_run() {
        let sc = scene(3, &[]);
        let root = temp("size");
        let mut dir = open(&root, &sc);
        let mut worlds = CpuWorlds::new(vec![]);
        let out = drive_worlds(&mut worlds, vec![(&sc, &mut dir)], None);
        assert_eq!(out.len(), 1);
        let e = out[0].as_ref().unwrap_err().to_string();
        assert!(e.contains("step 0"), "{e}");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
