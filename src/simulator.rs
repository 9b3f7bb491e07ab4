//! The trait every backend is driven through (the run layer, `validate`, the benchmarks
//! and the viewer step a scene through it), its error, and its two implementations: the
//! f64 CPU reference and the GPU solver. It sits above both backends, so neither imports
//! the other's error type.

use crate::cpu::CpuSimulation;
use crate::gpu::GpuSolver;
use crate::model::State;
use crate::sim::{DdefCounts, Energies, SolveStats};

/// Errors a backend can raise while stepping or reading back.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    #[error(transparent)]
    Gpu(#[from] crate::gpu::GpuError),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Ddef(#[from] crate::ddef::DdefError),
}

/// A time stepper over one system: the CPU reference or the GPU solver.
pub trait Simulator {
    /// Advances `n` steps.
    fn step(&mut self, n: u64) -> Result<(), SimError>;
    /// Current positions and velocities (a readback on the GPU).
    fn state(&mut self) -> Result<State, SimError>;
    /// Current energy terms (reduced on the GPU; only six numbers come back).
    fn energies(&mut self) -> Result<Energies, SimError>;
    /// The last step's linear solve, for implicit integrators.
    fn solve_stats(&mut self) -> Result<Option<SolveStats>, SimError>;
    /// "cpu", or the GPU adapter's name.
    fn backend_name(&self) -> String;
    /// The first particle whose position or velocity f32 cannot hold (see
    /// [`State::first_outside_f32`]); such a state is a divergence on every backend, since
    /// the GPU and the PLY frames hold f32. Backends that hold f32 state cannot exceed it
    /// (values become inf and show in the energies): the default says `None`.
    fn first_outside_f32(&mut self) -> Result<Option<usize>, SimError> {
        Ok(None)
    }
    /// DDEF grid builds and force evaluations so far; `None` unless `coulomb.method` is
    /// DDEF.
    fn ddef_counts(&self) -> Option<DdefCounts> {
        None
    }
}

impl Simulator for CpuSimulation {
    fn step(&mut self, n: u64) -> Result<(), SimError> {
        Ok(self.advance(n)?)
    }
    fn state(&mut self) -> Result<State, SimError> {
        Ok(self.current().clone())
    }
    fn energies(&mut self) -> Result<Energies, SimError> {
        Ok(self.energy_terms())
    }
    fn solve_stats(&mut self) -> Result<Option<SolveStats>, SimError> {
        Ok(self.last_solve())
    }
    fn backend_name(&self) -> String {
        "cpu".into()
    }
    fn first_outside_f32(&mut self) -> Result<Option<usize>, SimError> {
        Ok(self.current().first_outside_f32())
    }
    fn ddef_counts(&self) -> Option<DdefCounts> {
        self.ddef_totals()
    }
}

impl Simulator for GpuSolver {
    fn step(&mut self, n: u64) -> Result<(), SimError> {
        Ok(self.advance(n)?)
    }
    fn state(&mut self) -> Result<State, SimError> {
        Ok(self.read_state()?)
    }
    fn energies(&mut self) -> Result<Energies, SimError> {
        Ok(self.read_energies()?)
    }
    fn solve_stats(&mut self) -> Result<Option<SolveStats>, SimError> {
        Ok(self.read_solve_stats()?)
    }
    fn backend_name(&self) -> String {
        self.adapter().map(|a| a.name.clone()).unwrap_or_default()
    }
    fn ddef_counts(&self) -> Option<DdefCounts> {
        Some(DdefCounts {
            rebuilds: self.ddef_rebuilds()?,
            evaluations: self.ddef_evaluations()?,
        })
    }
}
