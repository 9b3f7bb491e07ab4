//! What the step program records into ([`Recorder`]: engine, buffers, sizes, the
//! solver). Each kernel family (`gpu::kernels`) adds its typed launchers to it: methods
//! that name their buffers, check what they are given and return the [`Op`] (or the ops
//! of a whole solve), so the step program never lists bindings by position.

use super::buffers::{Buf, Buffers};
use super::ddef_layout::DdefLayout;
use super::engine::Engine;
use super::limits::grid;
use super::params::TimeStep;
use super::recording::Op;
use crate::config::{Config, CoulombMethod, Integrator, SolverMethod};
use crate::gpu::error::GpuError;
use crate::gpu::layout::Dispatch;
use crate::gpu::shader::Kernel;
// The same weights as the reference, so both backends run the same iteration.
use crate::cpu::solvers::chebyshev_weights;
use crate::model::System;

/// Chebyshev's spectral radius: the config's, or the CPU reference's power-iteration
/// estimate on the initial operator (IMEX: A at x_0; local-global: P), so both backends
/// use the same weights.
pub(in crate::gpu) fn chebyshev_rho(system: &System, config: &Config, dt: TimeStep) -> f64 {
    use crate::cpu::solvers::{estimate_block_jacobi_rho, BlockLaplacian, RHO_ESTIMATE_ITERATIONS};
    config.solver.rho.unwrap_or_else(|| {
        let op = match config.integrator {
            Integrator::LocalGlobal => BlockLaplacian::local_global(system, dt.seconds()),
            _ => BlockLaplacian::imex(system, system.positions(), dt.seconds()),
        };
        estimate_block_jacobi_rho(&op, config.solver.omega, RHO_ESTIMATE_ITERATIONS)
    })
}

/// The linear solver every solve of a step runs (the forward's and the tangents').
pub(in crate::gpu) struct SolveSpec {
    pub(in crate::gpu) method: SolverMethod,
    pub(in crate::gpu) iterations: u32,
    /// Chebyshev's weights omega_k (empty for the other methods).
    pub(in crate::gpu) weights: Vec<f64>,
}

/// What the kernels' launchers record into: the engine that owns pipelines, bind groups
/// and records, the buffers they bind, and the sizes.
pub(in crate::gpu) struct Recorder<'a> {
    pub(in crate::gpu) device: &'a wgpu::Device,
    pub(in crate::gpu) engine: &'a mut Engine,
    pub(in crate::gpu) buffers: &'a Buffers,
    pub(in crate::gpu) dt: TimeStep,
    /// Particles, springs, charged particles (0 unless the Coulomb sum runs).
    pub(in crate::gpu) n: u32,
    pub(in crate::gpu) ns: u32,
    pub(in crate::gpu) nc: u32,
    /// `coulomb.method = "ddef"`: a step's Coulomb sum is a DDEF evaluation over this
    /// layout of the DDEF buffers.
    pub(in crate::gpu) ddef_layout: Option<DdefLayout>,
    pub(in crate::gpu) solve: SolveSpec,
    /// Worlds of a batch (1 for one system): a reduction's second stage runs one
    /// workgroup per world.
    pub(in crate::gpu) worlds: u32,
    /// The configuration of each world (one for one system), for a launcher that records
    /// a term only when some world uses it.
    pub(in crate::gpu) configs: Vec<Config>,
}

impl<'a> Recorder<'a> {
    pub(in crate::gpu) fn new(
        device: &'a wgpu::Device,
        engine: &'a mut Engine,
        buffers: &'a Buffers,
        system: &System,
        config: &Config,
        dt: TimeStep,
    ) -> Self {
        let method = config.solver.method;
        let iterations = config.solver.iterations;
        let weights = if config.integrator.is_implicit() && method == SolverMethod::Chebyshev {
            chebyshev_weights(chebyshev_rho(system, config, dt), iterations as usize)
        } else {
            Vec::new()
        };
        let coulomb = matches!(
            config.coulomb.method,
            CoulombMethod::AllPairs | CoulombMethod::Ddef(_)
        );
        Self {
            device,
            engine,
            buffers,
            dt,
            n: system.len() as u32,
            ns: system.springs().len() as u32,
            nc: if coulomb {
                system.charged_count() as u32
            } else {
                0
            },
            ddef_layout: None,
            solve: SolveSpec {
                method,
                iterations,
                weights,
            },
            worlds: 1,
            configs: vec![config.clone()],
        }
    }

    /// A recorder for a batch of worlds under `configs` (one per world, all with one
    /// `BatchKey`) packed in `buffers`: `n` particle slots, `ns` springs and `nc` Coulomb
    /// source slots (0: no Coulomb sum). Chebyshev's weights come from the world table,
    /// one set per world.
    pub(in crate::gpu) fn batch(
        device: &'a wgpu::Device,
        engine: &'a mut Engine,
        buffers: &'a Buffers,
        configs: &[&Config],
        dt: TimeStep,
        (n, ns, nc): (u32, u32, u32),
    ) -> Self {
        let config = configs[0];
        Self {
            device,
            engine,
            buffers,
            dt,
            n,
            ns,
            nc,
            ddef_layout: None,
            solve: SolveSpec {
                method: config.solver.method,
                iterations: config.solver.iterations,
                weights: vec![1.0; config.solver.iterations as usize],
            },
            worlds: configs.len() as u32,
            configs: configs.iter().map(|&c| c.clone()).collect(),
        }
    }

    /// Workgroup grid of a 1D dispatch over `count` items (2D past the per-dimension
    /// limit).
    pub(in crate::gpu) fn grid(&self, count: u32) -> [u32; 2] {
        grid(
            count,
            self.device.limits().max_compute_workgroups_per_dimension,
        )
    }

    /// Byte offset of the (deduplicated) record `d`.
    pub(in crate::gpu) fn record(&mut self, d: Dispatch) -> u32 {
        self.engine.record(d)
    }

    /// Byte offset of the record with mode bits `mode` alone (0: a kernel without modes).
    pub(in crate::gpu) fn mode(&mut self, mode: u32) -> u32 {
        self.record(Dispatch {
            mode,
            ..Default::default()
        })
    }

    /// A launch of `k` over the workgroup grid `grid` (bindings checked by the engine).
    pub(in crate::gpu) fn grid_dispatch(
        &mut self,
        k: Kernel,
        bufs: &[Buf],
        record: u32,
        grid: [u32; 2],
    ) -> Result<Op, GpuError> {
        self.engine
            .dispatch(self.device, self.buffers, k, bufs, record, grid)
    }

    /// A launch of `k` over `count` items (bindings checked by the engine).
    pub(in crate::gpu) fn dispatch(
        &mut self,
        k: Kernel,
        bufs: &[Buf],
        record: u32,
        count: u32,
    ) -> Result<Op, GpuError> {
        let grid = self.grid(count);
        self.engine
            .dispatch(self.device, self.buffers, k, bufs, record, grid)
    }
}

/// A launch that does not fit its kernel: a typed error naming the kernel.
pub(in crate::gpu) fn refuse(kernel: &'static str, problem: String) -> GpuError {
    GpuError::Binding { kernel, problem }
}
