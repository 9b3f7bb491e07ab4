//! Batched worlds ([`GpuWorlds`]): W systems packed into one set of buffers, block-
//! diagonally (each world's particles, springs and charged particles a contiguous range,
//! padded to whole workgroups and Coulomb tiles), stepped together by the same
//! dispatches. Per-world parameters (time step, softening, fields, external charges,
//! gravity, relaxation, Chebyshev weights) come from a world table; reductions are
//! segmented by world; Coulomb sums run only within a world.

use std::ops::Range;

use crate::config::{Config, CoulombMethod, Integrator, SolverMethod};
use crate::model::{State, System};
use crate::sim::{Energies, SolveStats};

use super::GpuError;

/// What worlds of one batch must share: the kernels and dispatch sequence of a step.
/// Everything else (sizes, topology, every physical parameter) may differ per world.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BatchKey {
    pub integrator: Integrator,
    pub method: SolverMethod,
    pub iterations: u32,
    pub local_global_iterations: u32,
    /// The Coulomb sum runs (all pairs) or is off.
    pub coulomb: bool,
}

impl BatchKey {
    /// The key of `config`, or why it cannot run in a batch (DDEF's host stage is per
    /// world).
    pub fn of(config: &Config) -> Result<Self, GpuError> {
        let coulomb = match config.coulomb.method {
            CoulombMethod::AllPairs => true,
            CoulombMethod::None => false,
            CoulombMethod::Ddef(_) => {
                return Err(GpuError::Unsupported(
                    "coulomb.method = \"ddef\" in a batch of worlds (its grid is built per \
                     world on the host): run it alone"
                        .into(),
                ))
            }
        };
        Ok(Self {
            integrator: config.integrator,
            method: config.solver.method,
            iterations: config.solver.iterations,
            local_global_iterations: match config.integrator {
                Integrator::LocalGlobal => config.local_global_iterations,
                _ => 0,
            },
            coulomb,
        })
    }
}

/// W worlds stepped together on one device.
pub struct GpuWorlds {
    _private: (),
}

impl GpuWorlds {
    /// Packs `worlds` on the caller's device and queue. All must have the same
    /// [`BatchKey`]; the device must offer the limits the packed buffers need.
    pub fn new(
        _device: &wgpu::Device,
        _queue: &wgpu::Queue,
        _worlds: &[(&System, &Config)],
    ) -> Result<Self, GpuError> {
        Err(GpuError::Unsupported("batched worlds".into()))
    }

    /// How many of `worlds` (taken in order from the first) fit one batch on a device
    /// with `limits`: at least 1 when the first fits alone.
    pub fn fitting(_limits: &wgpu::Limits, _worlds: &[(&System, &Config)]) -> usize {
        1
    }

    pub fn adapter(&self) -> Option<&super::AdapterSummary> {
        None
    }

    /// Number of worlds.
    pub fn len(&self) -> usize {
        0
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Advances every world `n` steps.
    pub fn advance(&mut self, _n: u64) -> Result<(), GpuError> {
        Err(GpuError::Unsupported("batched worlds".into()))
    }

    pub fn steps_done(&self) -> u64 {
        0
    }

    /// Every world's state (one readback).
    pub fn read_states(&self) -> Result<Vec<State>, GpuError> {
        Err(GpuError::Unsupported("batched worlds".into()))
    }

    /// Every world's energies (one readback of W x 8 numbers).
    pub fn read_energies(&self) -> Result<Vec<Energies>, GpuError> {
        Err(GpuError::Unsupported("batched worlds".into()))
    }

    /// Every world's last linear solve (implicit integrators; `None` otherwise).
    pub fn read_solve_stats(&self) -> Result<Vec<Option<SolveStats>>, GpuError> {
        Err(GpuError::Unsupported("batched worlds".into()))
    }

    /// World `w`'s particles in the position buffer (elements of 16 bytes).
    pub fn world_range(&self, _w: usize) -> Range<u64> {
        0..0
    }

    /// The positions of every world (Float32x4 vertices; world w at [`Self::world_range`]).
    pub fn positions_buffer(&self) -> Option<&wgpu::Buffer> {
        None
    }
}
