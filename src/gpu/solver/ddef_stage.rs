//! The solver's DDEF host stage (`coulomb.method = "ddef"`): before a step's DDEF
//! evaluation ([`Op::Ddef`]) whose lists are not current, the run pauses, reads the
//! charged positions back, builds or reuses the grid and lists under the CPU reference's
//! policy ([`DdefSolver::prepare`]: reuse for `rebuild_every` evaluations, rebuild when a
//! charge leaves the box), uploads them and goes on: one host round trip per evaluation.

use super::program::Program;
use crate::config::{DdefConfig, DdefVariant};
use crate::ddef::DdefSolver;
use crate::gpu::device::readback::vectors;
use crate::gpu::error::GpuError;
use crate::gpu::host::buffers::{Buf, Buffers};
use crate::gpu::host::recording::Op;
use crate::gpu::host::replay::Replay;
use crate::gpu::kernels::ddef::GpuDdef;
use std::sync::atomic::Ordering;

/// The solver's DDEF state: the CPU reference's grid policy and the device kernels.
pub(in crate::gpu) struct SolverDdef {
    policy: DdefSolver,
    variant: DdefVariant,
    gpu: GpuDdef,
    /// Charges of the charged particles, in source order (the host stage's q).
    charges: Vec<f64>,
    /// The uploaded lists were built on the current device positions.
    current: bool,
    /// Seconds spent in the host stage proper (grid, location, lists, upload), after the
    /// positions came back.
    host_seconds: f64,
}

impl SolverDdef {
    /// The DDEF kernels attached to the solver's sources, charged indices and forces.
    pub(in crate::gpu) fn new(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        buffers: &Buffers,
        config: DdefConfig,
        softening: f64,
        charges: Vec<f64>,
    ) -> Result<Self, GpuError> {
        Ok(Self {
            policy: DdefSolver::new(config, softening),
            variant: config.variant,
            gpu: GpuDdef::attached(
                device,
                queue,
                softening,
                buffers.get(Buf::Sources)?,
                buffers.get(Buf::Charged)?,
                buffers.get(Buf::Force)?,
            )?,
            charges,
            current: false,
            host_seconds: 0.0,
        })
    }

    pub(in crate::gpu) fn rebuilds(&self) -> u64 {
        self.policy.rebuilds()
    }

    pub(in crate::gpu) fn evaluations(&self) -> u64 {
        self.policy.evaluations()
    }

    pub(in crate::gpu) fn host_seconds(&self) -> f64 {
        self.host_seconds
    }

    /// The host stage before a DDEF evaluation: runs `ops` (which end with
    /// `coulomb_sources`), reads the compacted sources back, builds the lists under the
    /// grid policy and uploads them.
    fn stage(&mut self, r: &Replay, ops: &[Op]) -> Result<(), GpuError> {
        let nc = self.charges.len() as u64;
        let data = r.read(ops, Some(&self.gpu), &[(Buf::Sources, 0, 16 * nc)])?;
        let x = vectors(&data);
        let start = std::time::Instant::now();
        if let Some(crate::ddef::Evaluated::Delaunay(ddef)) =
            self.policy.prepare(&x, &self.charges)?
        {
            self.gpu.upload_lists(&ddef, self.variant)?;
        }
        self.host_seconds += start.elapsed().as_secs_f64();
        self.current = true;
        Ok(())
    }

    /// Runs `ops` (a step, or a diagnostic's), pausing before every DDEF evaluation
    /// whose lists are not current for the host stage. `moves`: `ops` move the positions
    /// after their last evaluation (every integrator's step but Verlet's, whose second
    /// force already saw x'), so the lists are stale afterwards.
    pub(in crate::gpu) fn run(
        &mut self,
        r: &Replay,
        ops: &[Op],
        moves: bool,
    ) -> Result<(), GpuError> {
        let mut start = 0;
        for (k, op) in ops.iter().enumerate() {
            let Op::Ddef { moved } = op else {
                continue;
            };
            if *moved {
                self.current = false;
            }
            if !self.current {
                self.stage(r, &ops[start..k])?;
                start = k;
            }
        }
        if start < ops.len() {
            r.submit(&ops[start..], Some(&self.gpu), "msc ddef step")?;
        }
        if moves {
            self.current = false;
        }
        Ok(())
    }

    /// The kernels, for a replay that records an evaluation whose lists are current.
    pub(in crate::gpu) fn kernels(&self) -> &GpuDdef {
        &self.gpu
    }
}

impl SolverDdef {
    /// `n` steps of `program`, one at a time (each evaluation needs its host stage),
    /// Verlet's prologue first when the forces are not current; counts each step done.
    pub(in crate::gpu) fn steps(
        &mut self,
        r: &Replay,
        program: &Program,
        n: u64,
        moves: bool,
        steps_done: &mut u64,
    ) -> Result<(), GpuError> {
        if n == 0 {
            return Ok(());
        }
        if !r.field_fresh.load(Ordering::Relaxed) {
            self.run(r, &program.prologue, false)?;
        }
        for _ in 0..n {
            self.run(r, &program.step, moves)?;
            *steps_done += 1;
        }
        // The host stages read back through `Replay::read`, which marks the forces stale;
        // the last step left a' in the buffer.
        r.field_fresh.store(true, Ordering::Relaxed);
        Ok(())
    }
}
