//! One run's recording as a state machine, apart from what steps it: which step it needs
//! next, the energy row, frame and divergence test at each output step, and what it did
//! ([`Driven`]). [`super::drive`](fn@super::drive) steps one simulator under it; [`super::drive_worlds`]
//! steps a batch of worlds, one driver per world.

use super::RunError;
use crate::display::Vec3;
use crate::measures::{Energies, SolveStats};
use crate::model::State;
use crate::output::energy::EnergyLog;
use crate::output::RunDir;
use crate::scene::LoadedScene;
use crate::simulator::{SimError, Simulator, Worlds};
use std::time::Instant;

/// What a run's driving did.
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

/// What a driver reads of the system it records: a [`Simulator`], or one world of a
/// batch ([`WorldProbe`]).
pub trait Probe {
    fn state(&mut self) -> Result<State, SimError>;
    fn energies(&mut self) -> Result<Energies, SimError>;
    fn solve_stats(&mut self) -> Result<Option<SolveStats>, SimError>;
    fn first_outside_f32(&mut self) -> Result<Option<usize>, SimError>;
}

impl Probe for dyn Simulator + '_ {
    fn state(&mut self) -> Result<State, SimError> {
        Simulator::state(self)
    }
    fn energies(&mut self) -> Result<Energies, SimError> {
        Simulator::energies(self)
    }
    fn solve_stats(&mut self) -> Result<Option<SolveStats>, SimError> {
        Simulator::solve_stats(self)
    }
    fn first_outside_f32(&mut self) -> Result<Option<usize>, SimError> {
        Simulator::first_outside_f32(self)
    }
}

/// World `w` of a batch, read on its own.
pub struct WorldProbe<'a> {
    pub worlds: &'a mut dyn Worlds,
    pub w: usize,
}

impl Probe for WorldProbe<'_> {
    fn state(&mut self) -> Result<State, SimError> {
        self.worlds.state(self.w)
    }
    fn energies(&mut self) -> Result<Energies, SimError> {
        self.worlds.energies(self.w)
    }
    fn solve_stats(&mut self) -> Result<Option<SolveStats>, SimError> {
        self.worlds.solve_stats(self.w)
    }
    fn first_outside_f32(&mut self) -> Result<Option<usize>, SimError> {
        self.worlds.first_outside_f32(self.w)
    }
}

/// Called by [`RunDriver::record`] at each finite output step with the probe, the step
/// and the state when it was read back for a frame.
pub type OnRecord<'a, P> = dyn FnMut(&mut P, u64, Option<&State>) -> Result<(), RunError> + 'a;

/// One run's recording: the caller steps the system to [`RunDriver::next_target`]
/// (telling the driver with [`RunDriver::advanced`]) and calls [`RunDriver::record`]
/// there, until `next_target` is `None`; then [`RunDriver::finish`].
pub struct RunDriver<'a> {
    scene: &'a LoadedScene,
    dir: &'a mut RunDir,
    bar: Option<&'a indicatif::ProgressBar>,
    log: EnergyLog,
    /// The output step the run is heading for; `None` after the last.
    target: Option<u64>,
    step: u64,
    energies: Energies,
    divergence: Option<String>,
    interrupted: bool,
    /// The last step recorded: a stop request seen right after an output step must not
    /// record that step again (a second row and frame of it).
    recorded: Option<u64>,
    stats: Option<SolveStats>,
    start: Instant,
}

impl<'a> RunDriver<'a> {
    /// Opens `energy.csv` in `dir` and starts the run's clock. With `bar`, each output
    /// step shows its total energy there.
    pub fn new(
        scene: &'a LoadedScene,
        dir: &'a mut RunDir,
        bar: Option<&'a indicatif::ProgressBar>,
    ) -> Result<Self, RunError> {
        let log = dir.energy_log()?;
        Ok(Self {
            scene,
            dir,
            bar,
            log,
            // Every run records step 0 (`output_steps`).
            target: Some(0),
            step: 0,
            energies: Energies::default(),
            divergence: None,
            interrupted: false,
            recorded: None,
            stats: None,
            start: Instant::now(),
        })
    }

    /// Steps done.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// The next output step; `None` once the run ended (all steps done, a divergence or
    /// a stop request).
    pub fn next_target(&self) -> Option<u64> {
        self.target
    }

    /// The system advanced `n` steps.
    pub fn advanced(&mut self, n: u64) {
        self.step += n;
    }

    /// A stop request: the next [`Self::record`], at the current step, is the last.
    pub fn interrupt(&mut self) {
        self.interrupted = true;
    }

    /// Stepping failed with `e`. A stage that fails on the state it was handed (the DDEF
    /// grid on non-finite positions) is a divergence, recorded by the next
    /// [`Self::record`] at the state's step; any other failure is the run's error.
    pub fn step_failed<P: Probe + ?Sized>(
        &mut self,
        probe: &mut P,
        e: SimError,
    ) -> Result<(), RunError> {
        let state = probe
            .state()
            .ok()
            .filter(|s| s.first_outside_f32().is_some());
        let Some(state) = state else {
            return Err(RunError::Sim {
                step: self.step,
                source: e,
            });
        };
        self.step = state.step;
        self.divergence = Some(e.to_string());
        Ok(())
    }

    /// Records the current step: the energy row, the frame when the folder takes frames,
    /// the divergence tests, then `on_output` (finite steps only) and the solve stats.
    /// Moves on to the next output step when the current one was reached; ends the run on
    /// a divergence, a stop request or after the last output step. A step already
    /// recorded is not recorded again: a stop request (or divergence) there only ends the
    /// run.
    pub fn record<P: Probe + ?Sized>(
        &mut self,
        probe: &mut P,
        on_output: &mut OnRecord<'_, P>,
    ) -> Result<(), RunError> {
        let step = self.step;
        if self.recorded == Some(step) {
            if self.interrupted || self.divergence.is_some() {
                self.target = None;
            }
            return Ok(());
        }
        let sim_err = |source| RunError::Sim { step, source };
        let (total, every) = (self.scene.config.steps, self.scene.output.every.max(1));
        let at_target = self.target == Some(step);
        let energies = probe.energies().map_err(sim_err)?;
        self.energies = energies;
        self.log.row(
            step,
            crate::measures::time_at(step, self.scene.config.dt),
            &energies,
        )?;
        self.recorded = Some(step);
        // Divergence is judged on the energy reduction (six numbers from the GPU): a
        // non-finite velocity makes the kinetic sum non-finite, and a position can only
        // leave the finite range through one. The state is read back only for frames;
        // a state that the f32 frames cannot hold is a divergence too.
        if self.divergence.is_none() && !energies.is_finite() {
            self.divergence = Some("non-finite energies".into());
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
        if self.divergence.is_none() {
            if let Some(i) = probe.first_outside_f32().map_err(sim_err)? {
                self.divergence = Some(beyond(i, &probe.state().map_err(sim_err)?));
            }
        }
        let mut state = None;
        if self.divergence.is_none() && self.dir.writes_frames() {
            let s = probe.state().map_err(sim_err)?;
            // A frame never holds inf, whatever the energies said.
            match s.first_outside_f32() {
                Some(i) => self.divergence = Some(beyond(i, &s)),
                None => {
                    let system = &self.scene.system;
                    self.dir.write_frame(&s, system.charges(), system.faces())?;
                    state = Some(s);
                }
            }
        }
        if self.divergence.is_some() {
            self.target = None;
            return Ok(());
        }
        on_output(probe, step, state.as_ref())?;
        if step > 0 {
            self.stats = probe.solve_stats().map_err(sim_err)?;
        }
        if let Some(b) = self.bar {
            b.set_message(format!("E = {:.6e} J", energies.total));
        }
        self.log.flush()?;
        self.target = match self.target {
            _ if self.interrupted => None,
            // The output steps: every multiple of `every`, then the last step.
            Some(t) if at_target && t < total => Some(((t / every + 1) * every).min(total)),
            Some(_) if at_target => None,
            t => t,
        };
        Ok(())
    }

    /// Commits `energy.csv` and says what the run did.
    pub fn finish(self) -> Result<Driven, RunError> {
        let wall_seconds = self.start.elapsed().as_secs_f64();
        let energy_rows = self.log.rows();
        self.dir.finish_energy_log(self.log)?;
        Ok(Driven {
            step: self.step,
            energies: self.energies,
            finite: self.divergence.is_none(),
            divergence: self.divergence,
            interrupted: self.interrupted,
            stats: self.stats,
            wall_seconds,
            energy_rows,
        })
    }
}
