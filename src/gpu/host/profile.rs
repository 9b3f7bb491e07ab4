//! Per-kernel GPU times from timestamp queries, for `msc bench`: a recording replayed
//! one dispatch per compute pass, each pass timestamped.

use super::engine::Engine;
use super::recording::Op;
use crate::gpu::device::readback::map_read;
use crate::gpu::device::scoped;
use crate::gpu::device::submit::Submitter;
use crate::gpu::error::GpuError;

/// GPU time of one kernel over a profiled run (`GpuSolver::profile`).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct KernelTime {
    pub kernel: &'static str,
    /// Dispatches of this kernel in the run.
    pub dispatches: u64,
    /// Summed GPU time in seconds (timestamp queries around each dispatch).
    pub seconds: f64,
}

/// Runs `steps` steps (`first`, then `step` for the others) with a timestamp query
/// around every dispatch, counting each finished step in `steps_done`; returns the GPU
/// time per kernel, in the order the kernels first run. The device must offer
/// TIMESTAMP_QUERY; the caller counts the DDEF evaluations the steps ran.
pub(in crate::gpu) fn profile(
    host: &Submitter,
    engine: &Engine,
    first: &[Op],
    step: &[Op],
    steps: u32,
    steps_done: &mut u64,
) -> Result<Vec<KernelTime>, GpuError> {
    // wgpu allows at most 4096 queries per set: two per dispatch.
    const CHUNK: usize = 2048;
    let device = &host.device;
    let period_s = f64::from(host.queue.get_timestamp_period()) * 1e-9;
    let mut times: Vec<KernelTime> = Vec::new();
    scoped(device, || {
        let query_set = device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("msc profile"),
            ty: wgpu::QueryType::Timestamp,
            count: (2 * CHUNK) as u32,
        });
        let bytes = (2 * CHUNK * 8) as u64;
        let resolve = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("msc profile resolve"),
            size: bytes,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let staging = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("msc profile readback"),
            size: bytes,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        for s in 0..steps {
            let ops = if s == 0 { first } else { step };
            for chunk in ops.chunks(CHUNK) {
                let mut encoder = host.encoder("msc profile");
                for (k, op) in chunk.iter().enumerate() {
                    let writes = wgpu::ComputePassTimestampWrites {
                        query_set: &query_set,
                        beginning_of_pass_write_index: Some(2 * k as u32),
                        end_of_pass_write_index: Some(2 * k as u32 + 1),
                    };
                    host.pass(&mut encoder, engine.kernel_name(op), Some(writes), |pass| {
                        engine.replay(pass, std::slice::from_ref(op))
                    });
                }
                let used = 2 * chunk.len() as u32;
                encoder.resolve_query_set(&query_set, 0..used, &resolve, 0);
                encoder.copy_buffer_to_buffer(&resolve, 0, &staging, 0, u64::from(used) * 8);
                host.submit(encoder);
                let data = map_read(device, &staging, u64::from(used) * 8)?;
                // Native-endian u64 ticks; the Vec<u8> need not be 8-byte aligned.
                let stamps: Vec<u64> = data
                    .chunks_exact(8)
                    .map(|c| {
                        let mut b = [0u8; 8];
                        b.copy_from_slice(c);
                        u64::from_ne_bytes(b)
                    })
                    .collect();
                for (k, op) in chunk.iter().enumerate() {
                    let name = engine.kernel_name(op);
                    let ticks = stamps[2 * k + 1].saturating_sub(stamps[2 * k]);
                    let seconds = ticks as f64 * period_s;
                    match times.iter_mut().find(|t| t.kernel == name) {
                        Some(t) => {
                            t.dispatches += 1;
                            t.seconds += seconds;
                        }
                        None => times.push(KernelTime {
                            kernel: name,
                            dispatches: 1,
                            seconds,
                        }),
                    }
                }
            }
            *steps_done += 1;
        }
        Ok(())
    })?;
    Ok(times)
}
