//! Per-kernel GPU times from timestamp queries, for `msc bench`.

use super::error::scoped;
use super::readback::map_read;
use super::solver::GpuSolver;
use super::GpuError;
use std::sync::atomic::Ordering;

/// GPU time of one kernel over a profiled run ([`GpuSolver::profile`]).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct KernelTime {
    pub kernel: &'static str,
    /// Dispatches of this kernel in the run.
    pub dispatches: u64,
    /// Summed GPU time in seconds (timestamp queries around each dispatch).
    pub seconds: f64,
}

impl GpuSolver {
    /// Advances `steps` steps with a timestamp query around every dispatch and returns
    /// the GPU time per kernel, in the order the kernels first run. Each dispatch gets its
    /// own compute pass (timestamps inside passes need an extra feature), so the total is
    /// a little above an unprofiled run's. Needs the adapter's TIMESTAMP_QUERY feature
    /// (requested by [`Self::headless`] when available).
    pub fn profile(&mut self, steps: u32) -> Result<Vec<KernelTime>, GpuError> {
        if !self
            .device
            .features()
            .contains(wgpu::Features::TIMESTAMP_QUERY)
        {
            return Err(GpuError::Unsupported(format!(
                "profiling needs timestamp queries, which {} does not offer",
                self.summary.name
            )));
        }
        if self.ddef.is_some() {
            return Err(GpuError::Unsupported(
                "profiling with coulomb.method = \"ddef\" (its steps pause for a host stage)"
                    .into(),
            ));
        }
        self.check_lost()?;
        // wgpu allows at most 4096 queries per set: two per dispatch.
        const CHUNK: usize = 2048;
        let period_s = f64::from(self.queue.get_timestamp_period()) * 1e-9;
        let mut times: Vec<KernelTime> = Vec::new();
        let ops = self.step_ops.clone();
        let mut first = ops.clone();
        if !self.field_fresh.swap(true, Ordering::Relaxed) {
            // Verlet's first field evaluation, profiled with the first step.
            first.splice(0..0, self.prologue_ops.iter().copied());
        }
        let device = self.device.clone();
        scoped(&device, || {
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
                let ops = if s == 0 { &first } else { &ops };
                for chunk in ops.chunks(CHUNK) {
                    let mut encoder =
                        device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                            label: Some("msc profile"),
                        });
                    for (k, op) in chunk.iter().enumerate() {
                        self.compute_passes.fetch_add(1, Ordering::Relaxed);
                        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                            label: Some(self.pipelines[op.pipeline].kernel.name),
                            timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                                query_set: &query_set,
                                beginning_of_pass_write_index: Some(2 * k as u32),
                                end_of_pass_write_index: Some(2 * k as u32 + 1),
                            }),
                        });
                        self.replay(&mut pass, std::slice::from_ref(op));
                    }
                    let used = 2 * chunk.len() as u32;
                    encoder.resolve_query_set(&query_set, 0..used, &resolve, 0);
                    encoder.copy_buffer_to_buffer(&resolve, 0, &staging, 0, u64::from(used) * 8);
                    self.queue.submit([encoder.finish()]);
                    self.submissions.fetch_add(1, Ordering::Relaxed);
                    let data = map_read(&device, &staging, u64::from(used) * 8)?;
                    // Native-endian u64 ticks; the Vec<u8> need not be 8-byte aligned.
                    let stamps: Vec<u64> = data
                        .chunks_exact(8)
                        .map(|c| u64::from_ne_bytes(c.try_into().expect("8 bytes")))
                        .collect();
                    for (k, op) in chunk.iter().enumerate() {
                        let name = self.pipelines[op.pipeline].kernel.name;
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
                self.steps_done += 1;
            }
            Ok(())
        })?;
        self.check_lost()?;
        Ok(times)
    }
}
