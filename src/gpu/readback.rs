//! Reading results back: state, GPU-reduced energies, the solve residual, and the
//! diagnostics the tests compare with the CPU reference. Each is one submission.

use glam::DVec3;

use super::buffers::Buf;
use super::error::{poll_error, scoped};
use super::layout::{SLOT_ENERGY, SLOT_RESIDUAL};
use super::plan::Op;
use super::solver::GpuSolver;
use super::GpuError;
use crate::config::Integrator;
use crate::model::State;
use crate::sim::{Energies, SolveStats};
use std::sync::atomic::Ordering;

/// Maps the first `size` bytes of the MAP_READ buffer `staging` (after the work writing
/// it was submitted), waits, and returns them; the buffer is unmapped again.
pub(super) fn map_read(
    device: &wgpu::Device,
    staging: &wgpu::Buffer,
    size: u64,
) -> Result<Vec<u8>, GpuError> {
    super::device::read_mapped(device, staging, size).map_err(|e| match e {
        super::device::MapError::Poll(e) => poll_error(e),
        super::device::MapError::Map(m) => GpuError::Readback(m),
    })
}

/// Appends to `encoder` (which may already hold work, run first) copies of the byte
/// ranges `copies` (buffer, offset, size) into one staging buffer labelled `label`,
/// submits it and returns the bytes, ranges concatenated in order. Callers wrap it in
/// [`scoped`] so validation errors come back typed.
pub(super) fn read_buffers(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    mut encoder: wgpu::CommandEncoder,
    copies: &[(&wgpu::Buffer, u64, u64)],
    label: &str,
) -> Result<Vec<u8>, GpuError> {
    let total: u64 = copies.iter().map(|c| c.2).sum();
    let staging = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: total.max(16),
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut offset = 0;
    for &(b, src, size) in copies {
        encoder.copy_buffer_to_buffer(b, src, &staging, offset, size);
        offset += size;
    }
    queue.submit([encoder.finish()]);
    map_read(device, &staging, total)
}

impl GpuSolver {
    /// Diagnostics: per spring at the current state, the force on particle i (elastic and
    /// damping, as the explicit integrators use it) and the block W_k of A. It overwrites
    /// the step's blocks, so the last solve's stats are saved first for `solve_stats`.
    /// Refused for `local_global`, whose constant matrix lives in the same buffer.
    pub fn spring_blocks(&mut self) -> Result<Vec<(DVec3, glam::DMat3)>, GpuError> {
        if self.integrator == Integrator::LocalGlobal {
            return Err(GpuError::Unsupported(
                "spring_blocks would overwrite local_global's constant matrix".into(),
            ));
        }
        let ns = self.spring_count;
        if ns == 0 {
            return Ok(Vec::new());
        }
        if self.integrator.is_implicit() && self.steps_done > 0 {
            if let Some(stats) = self.read_solve_stats()? {
                self.saved_stats = Some((self.steps_done, stats));
            }
        }
        let data = self.run_and_read(&self.spring_ops, &[(Buf::Sf, 0, 32 * u64::from(ns))])?;
        let f: &[[f32; 4]] = bytemuck::cast_slice(&data);
        Ok((0..ns as usize)
            .map(|k| {
                let a = f[2 * k];
                let w = f[2 * k + 1];
                let n = DVec3::new(a[0] as f64, a[1] as f64, a[2] as f64);
                let nn = glam::DMat3::from_cols(n * n.x, n * n.y, n * n.z);
                (
                    n * a[3] as f64,
                    glam::DMat3::IDENTITY * w[0] as f64 + nn * w[1] as f64,
                )
            })
            .collect())
    }

    /// Diagnostics: Coulomb + external + gravity force on every particle at the current
    /// state and time, and each particle's Coulomb potential sum_j k_c q_i q_j / r_soft.
    /// With DDEF the Coulomb part is the DDEF force (w is then 0: no potential).
    pub fn field_forces(&mut self) -> Result<(Vec<DVec3>, Vec<f64>), GpuError> {
        let mut ops = self.field_ops.as_slice();
        if self.ddef.is_some() {
            // Runs the host stage first when the lists are not current.
            self.run_ddef_ops(&self.field_ops.clone(), false)?;
            ops = &[];
        }
        let data = self.run_and_read(ops, &[(Buf::Force, 0, 16 * u64::from(self.n))])?;
        let f: &[[f32; 4]] = bytemuck::cast_slice(&data);
        Ok((
            f.iter()
                .map(|a| DVec3::new(a[0] as f64, a[1] as f64, a[2] as f64))
                .collect(),
            f.iter().map(|a| a[3] as f64).collect(),
        ))
    }

    /// Device loss is reported through the device-lost callback, which wgpu runs while
    /// polling. Only headless solvers install one: an embedding caller owns its device's
    /// callback (on a lost device, readbacks then fail with `Readback`).
    pub(super) fn check_lost(&self) -> Result<(), GpuError> {
        let _ = self.device.poll(wgpu::PollType::Poll);
        match self.lost.lock() {
            Ok(l) => match l.as_ref() {
                Some(m) => Err(GpuError::DeviceLost(m.clone())),
                None => Ok(()),
            },
            Err(_) => Err(GpuError::DeviceLost("device-lost flag poisoned".into())),
        }
    }

    /// Runs `ops` (if any), then copies the byte ranges `copies` of the given buffers to
    /// the host in one submission.
    pub(super) fn run_and_read(
        &self,
        ops: &[Op],
        copies: &[(Buf, u64, u64)],
    ) -> Result<Vec<u8>, GpuError> {
        self.check_lost()?;
        let bytes = scoped(&self.device, || {
            let mut encoder = self
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("msc readback"),
                });
            if !ops.is_empty() {
                // Diagnostics rewrite the force buffer (see `GpuSolver::field_fresh`).
                self.field_fresh.store(false, Ordering::Relaxed);
                self.compute_passes.fetch_add(1, Ordering::Relaxed);
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("msc reductions"),
                    timestamp_writes: None,
                });
                self.replay(&mut pass, ops);
            }
            let copies: Vec<_> = copies
                .iter()
                .map(|&(b, src, size)| (self.buf(b), src, size))
                .collect();
            self.submissions.fetch_add(1, Ordering::Relaxed);
            read_buffers(&self.device, &self.queue, encoder, &copies, "msc readback")
        })?;
        self.check_lost()?;
        Ok(bytes)
    }

    pub(super) fn read_state(&self) -> Result<State, GpuError> {
        let bytes = 16 * u64::from(self.n);
        let data = self.run_and_read(&[], &[(Buf::X, 0, bytes), (Buf::V, 0, bytes)])?;
        let floats: &[f32] = bytemuck::cast_slice(&data);
        let n = self.n as usize;
        let vec = |k: usize| {
            let f = &floats[4 * k..4 * k + 3];
            DVec3::new(f[0] as f64, f[1] as f64, f[2] as f64)
        };
        Ok(State {
            x: (0..n).map(vec).collect(),
            v: (n..2 * n).map(vec).collect(),
            t: self.steps_done as f64 * self.dt,
            step: self.steps_done,
        })
    }

    pub(super) fn read_energies(&self) -> Result<Energies, GpuError> {
        let data = self.run_and_read(
            &self.energy_ops,
            &[(Buf::Scalars, 16 * u64::from(SLOT_ENERGY), 32)],
        )?;
        let e: &[f32] = bytemuck::cast_slice(&data);
        Ok(Energies::new(
            e[0] as f64,
            e[1] as f64,
            e[2] as f64,
            e[3] as f64,
            e[4] as f64,
        ))
    }

    pub(super) fn read_solve_stats(&self) -> Result<Option<SolveStats>, GpuError> {
        if !self.integrator.is_implicit() || self.steps_done == 0 {
            return Ok(None);
        }
        if let Some((step, stats)) = self.saved_stats {
            if step == self.steps_done {
                return Ok(Some(stats));
            }
        }
        let data = self.run_and_read(
            &self.residual_ops,
            &[(Buf::Scalars, 16 * u64::from(SLOT_RESIDUAL), 16)],
        )?;
        let s: &[f32] = bytemuck::cast_slice(&data);
        let (rr, bb) = (s[0] as f64, s[1] as f64);
        // As the CPU reference's relative_residual: |r| / |b|, or |r| itself when b = 0.
        let residual = if bb > 0.0 {
            (rr / bb).sqrt()
        } else {
            rr.sqrt()
        };
        Ok(Some(SolveStats {
            iterations: self.iterations,
            residual,
        }))
    }
}
