//! Time integrators (DESIGN section 2).

use crate::config::{Config, ConfigError};
use crate::model::{State, System};
use crate::sim::{Energies, SimError, Simulator, SolveStats};

/// The CPU reference simulation of one system.
pub struct CpuSimulation {
    system: System,
    config: Config,
    state: State,
    last_solve: Option<SolveStats>,
}

impl CpuSimulation {
    pub fn new(system: &System, config: &Config) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Self {
            system: system.clone(),
            config: config.clone(),
            state: system.initial_state(),
            last_solve: None,
        })
    }
    pub fn system(&self) -> &System {
        &self.system
    }
    pub fn config(&self) -> &Config {
        &self.config
    }
    /// Current state, without a copy.
    pub fn current(&self) -> &State {
        &self.state
    }
    /// One time step; returns the linear solve's stats for implicit integrators.
    pub fn step_once(&mut self) -> Option<SolveStats> {
        todo!("cpu helper")
    }
}

impl Simulator for CpuSimulation {
    fn step(&mut self, n: u64) -> Result<(), SimError> {
        for _ in 0..n {
            self.last_solve = self.step_once();
        }
        Ok(())
    }
    fn state(&mut self) -> Result<State, SimError> {
        Ok(self.state.clone())
    }
    fn energies(&mut self) -> Result<Energies, SimError> {
        Ok(super::energy::energies(
            &self.system,
            &self.config,
            &self.state,
        ))
    }
    fn solve_stats(&mut self) -> Result<Option<SolveStats>, SimError> {
        Ok(self.last_solve)
    }
    fn backend_name(&self) -> String {
        "cpu".into()
    }
}
