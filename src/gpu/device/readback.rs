//! Reading results back: mapped staging copies, and the decoding of the bytes read into
//! states, energies, solve residuals and the diagnostics the tests compare with the CPU
//! reference (f32 on the device, f64 on the host).

use glam::{DMat3, DVec3};

use super::poll_error;
use crate::gpu::error::GpuError;
use crate::sim::Energies;

/// Maps the first `size` bytes of the MAP_READ buffer `staging` (after the work writing
/// it was submitted), waits, and returns them; the buffer is unmapped again.
pub(in crate::gpu) fn map_read(
    device: &wgpu::Device,
    staging: &wgpu::Buffer,
    size: u64,
) -> Result<Vec<u8>, GpuError> {
    super::read_mapped(device, staging, size).map_err(|e| match e {
        super::MapError::Poll(e) => poll_error(e),
        super::MapError::Map(m) => GpuError::Readback(m),
    })
}

/// Appends to `encoder` (which may already hold work, run first) copies of the byte
/// ranges `copies` (buffer, offset, size) into one staging buffer labelled `label`,
/// submits it and returns the bytes, ranges concatenated in order. Callers wrap it in
/// `scoped` so validation errors come back typed.
pub(in crate::gpu) fn read_buffers(
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

/// The xyz of every `vec4<f32>` in `bytes`.
pub(in crate::gpu) fn vectors(bytes: &[u8]) -> Vec<DVec3> {
    let f: &[[f32; 4]] = bytemuck::cast_slice(bytes);
    f.iter()
        .map(|a| DVec3::new(a[0] as f64, a[1] as f64, a[2] as f64))
        .collect()
}

/// The w of every `vec4<f32>` in `bytes`.
pub(in crate::gpu) fn w_components(bytes: &[u8]) -> Vec<f64> {
    let f: &[[f32; 4]] = bytemuck::cast_slice(bytes);
    f.iter().map(|a| a[3] as f64).collect()
}

/// The energy slots (kinetic, elastic, gravity, external, Coulomb).
pub(in crate::gpu) fn energies(bytes: &[u8]) -> Energies {
    let e: &[f32] = bytemuck::cast_slice(bytes);
    Energies::new(
        e[0] as f64,
        e[1] as f64,
        e[2] as f64,
        e[3] as f64,
        e[4] as f64,
    )
}

/// The residual slot (|r|^2, |b|^2) as the CPU reference's relative_residual: |r| / |b|,
/// or |r| itself when b = 0.
pub(in crate::gpu) fn relative_residual(bytes: &[u8]) -> f64 {
    let s: &[f32] = bytemuck::cast_slice(bytes);
    let (rr, bb) = (s[0] as f64, s[1] as f64);
    if bb > 0.0 {
        (rr / bb).sqrt()
    } else {
        rr.sqrt()
    }
}

/// The spring buffer as spring_assemble writes it, per spring (m, s) then per spring
/// (n, fmag): the force on particle i, fmag n, and W_k = s I + m m^T.
pub(in crate::gpu) fn spring_blocks(bytes: &[u8]) -> Vec<(DVec3, DMat3)> {
    let f: &[[f32; 4]] = bytemuck::cast_slice(bytes);
    let (blocks, forces) = f.split_at(f.len() / 2);
    let v = |a: &[f32; 4]| DVec3::new(a[0] as f64, a[1] as f64, a[2] as f64);
    blocks
        .iter()
        .zip(forces)
        .map(|(w, a)| {
            let m = v(w);
            let mm = DMat3::from_cols(m * m.x, m * m.y, m * m.z);
            (v(a) * a[3] as f64, DMat3::IDENTITY * w[3] as f64 + mm)
        })
        .collect()
}
