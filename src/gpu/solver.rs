//! The GPU solver's host side: owns the buffers, builds the pipelines and records the
//! kernels of `shaders/` (DESIGN section 6). A whole step is a fixed list of dispatches,
//! recorded once and replayed `n` times into one compute pass; per-dispatch values
//! (solver iteration, Chebyshev weight, reduction slot, kernel mode) come from a table of
//! `Dispatch` records selected by dynamic uniform offsets, and the simulation clock lives
//! on the GPU, so nothing is written or read between the steps of a batch.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::adapter::{open_headless_device, AdapterSummary, HeadlessDevice, HeadlessOptions};
use super::buffers::Buf;
use super::ddef::{SolverDdef, DDEF_MARK};
use super::error::{poll_error, scoped};
use super::layout::{Dispatch, MAX_EXT_CHARGES};
use super::limits::{check_limits, sizes};
use super::plan::{chebyshev_rho, Op, Pipeline};
use super::GpuError;
use crate::config::{Config, CoulombMethod, Integrator, SolverMethod};
use crate::model::{State, System};
use crate::sim::{Energies, SimError, Simulator, SolveStats};

/// Queue submissions and compute passes a solver has made so far, over all its work
/// (steps, readbacks, profiling; passes recorded into a caller's encoder are counted, the
/// caller's own submissions are not), so a benchmark can report what the host actually
/// does per step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct HostCounts {
    pub submissions: u64,
    pub compute_passes: u64,
}

/// Dispatches recorded per queue submission by [`Simulator::step`] (whole steps, at least
/// one): bounds the command buffer's host memory when steps have many solver sweeps.
const DISPATCHES_PER_SUBMIT: u64 = 8192;

/// The GPU solver for one system.
pub struct GpuSolver {
    pub(super) device: wgpu::Device,
    pub(super) queue: wgpu::Queue,
    pub(super) summary: AdapterSummary,
    pub(super) lost: Arc<Mutex<Option<String>>>,
    pub(super) integrator: Integrator,
    /// Solver iterations per step (summed over local-global's alternations).
    pub(super) iterations: u32,
    pub(super) n: u32,
    pub(super) spring_count: u32,
    pub(super) dt: f64,
    pub(super) steps_done: u64,
    pub(super) buffers: Vec<wgpu::Buffer>,
    pub(super) pipelines: Vec<Pipeline>,
    pub(super) pipeline_index: HashMap<&'static str, usize>,
    pub(super) groups: Vec<wgpu::BindGroup>,
    pub(super) group_index: HashMap<(&'static str, Vec<Buf>), usize>,
    pub(super) params: Option<wgpu::Buffer>,
    pub(super) dispatch_layout: wgpu::BindGroupLayout,
    pub(super) dispatch_group: Option<wgpu::BindGroup>,
    pub(super) records: Vec<Dispatch>,
    pub(super) record_index: HashMap<[u32; 8], usize>,
    pub(super) record_stride: u32,
    pub(super) step_ops: Vec<Op>,
    /// Verlet: the field forces at (x_t, t) that start a step. A step ends with them at
    /// (x', t + h) in the force buffer (its a'), so they run only when `field_fresh` is
    /// false: before the first step and after a diagnostic rewrote that buffer.
    pub(super) prologue_ops: Vec<Op>,
    pub(super) field_fresh: AtomicBool,
    pub(super) energy_ops: Vec<Op>,
    pub(super) residual_ops: Vec<Op>,
    pub(super) spring_ops: Vec<Op>,
    pub(super) field_ops: Vec<Op>,
    /// Stats of the last solve, saved before a diagnostic overwrites the spring blocks.
    pub(super) saved_stats: Option<(u64, SolveStats)>,
    pub(super) submissions: AtomicU64,
    pub(super) compute_passes: AtomicU64,
    /// `coulomb.method = "ddef"`: the host stage's state and the DDEF kernels.
    pub(super) ddef: Option<SolverDdef>,
}

impl GpuSolver {
    /// Builds the solver on the caller's device and queue (embedding). The device must
    /// offer the limits the kernels need (WebGPU defaults suffice for the kernels; buffer
    /// sizes grow with the system) or a [`GpuError::LimitExceeded`] names the shortfall.
    pub fn new(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        system: &System,
        config: &Config,
    ) -> Result<Self, GpuError> {
        let summary =
            AdapterSummary::new(&device.adapter_info(), &device.limits(), device.features());
        Self::build(
            device.clone(),
            queue.clone(),
            summary,
            Arc::new(Mutex::new(None)),
            system,
            config,
        )
    }

    /// Picks an adapter itself (honouring WGPU_BACKEND and WGPU_ADAPTER_NAME) and opens a
    /// device with the adapter's own limits, so large meshes get the largest buffers the
    /// adapter allows.
    pub fn headless(
        system: &System,
        config: &Config,
        options: &HeadlessOptions,
    ) -> Result<Self, GpuError> {
        // Input checks first, so a bad input fails before an adapter is opened.
        config.validate_for(system)?;
        super::range::check(system, config)?;
        let HeadlessDevice {
            device,
            queue,
            adapter,
        } = open_headless_device(options)?;
        let lost = Arc::new(Mutex::new(None));
        let flag = lost.clone();
        device.set_device_lost_callback(move |reason, message| {
            if let Ok(mut l) = flag.lock() {
                *l = Some(format!("{reason:?}: {message}"));
            }
        });
        Self::build(device, queue, adapter, lost, system, config)
    }

    pub fn adapter(&self) -> Option<&AdapterSummary> {
        Some(&self.summary)
    }
    pub fn device(&self) -> &wgpu::Device {
        &self.device
    }
    pub fn queue(&self) -> &wgpu::Queue {
        &self.queue
    }
    /// Positions as `vec4<f32>` (xyz, 1): usable as a vertex buffer (Float32x4, stride 16),
    /// a storage buffer and a copy source.
    pub fn positions_buffer(&self) -> &wgpu::Buffer {
        self.buf(Buf::X)
    }
    /// Velocities as `vec4<f32>` (xyz, w unused): like the positions, usable as a vertex
    /// buffer (Float32x4, stride 16), e.g. to colour particles by speed.
    pub fn velocities_buffer(&self) -> &wgpu::Buffer {
        self.buf(Buf::V)
    }
    /// Steps done (recorded, for [`Self::record_steps`]).
    pub fn steps_done(&self) -> u64 {
        self.steps_done
    }

    /// Dispatches recorded per step (a DDEF evaluation counts its three kernels).
    pub fn dispatches_per_step(&self) -> usize {
        self.step_ops
            .iter()
            .map(|op| if op.pipeline == DDEF_MARK { 3 } else { 1 })
            .sum()
    }

    /// Queue submissions and compute passes made so far (see [`HostCounts`]).
    pub fn host_counts(&self) -> HostCounts {
        HostCounts {
            submissions: self.submissions.load(Ordering::Relaxed),
            compute_passes: self.compute_passes.load(Ordering::Relaxed),
        }
    }

    /// Records `n` steps into the caller's encoder (one compute pass). The solver counts
    /// them as done: the caller must submit the encoder before reading the state back.
    ///
    /// With `coulomb.method = "ddef"` it records nothing and returns
    /// [`GpuError::Unsupported`] (see [`Self::supports_recording`]): each DDEF force
    /// evaluation needs a host stage on the current positions, which recording into a
    /// caller's encoder cannot run; use [`Simulator::step`] there.
    pub fn record_steps(
        &mut self,
        encoder: &mut wgpu::CommandEncoder,
        n: u32,
    ) -> Result<(), GpuError> {
        if !self.supports_recording() {
            return Err(GpuError::Unsupported(
                "recording steps into a caller's encoder with coulomb.method = \"ddef\": \
                 every force evaluation needs a host stage (use step)"
                    .into(),
            ));
        }
        self.record_unchecked(encoder, n);
        Ok(())
    }

    fn record_unchecked(&mut self, encoder: &mut wgpu::CommandEncoder, n: u32) {
        if n == 0 {
            return;
        }
        self.compute_passes.fetch_add(1, Ordering::Relaxed);
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("msc steps"),
            timestamp_writes: None,
        });
        if !self.field_fresh.swap(true, Ordering::Relaxed) {
            self.replay(&mut pass, &self.prologue_ops);
        }
        for _ in 0..n {
            self.replay(&mut pass, &self.step_ops);
        }
        drop(pass);
        self.steps_done += u64::from(n);
    }

    fn build(
        device: wgpu::Device,
        queue: wgpu::Queue,
        summary: AdapterSummary,
        lost: Arc<Mutex<Option<String>>>,
        system: &System,
        config: &Config,
    ) -> Result<Self, GpuError> {
        config.validate_for(system)?;
        super::range::check(system, config)?;
        let limits = device.limits();
        let sz = sizes(system, config);
        check_limits(&limits, &sz)?;
        if config.external_charges.len() > MAX_EXT_CHARGES {
            return Err(GpuError::Unsupported(format!(
                "{} external charges; the kernels support at most {MAX_EXT_CHARGES}",
                config.external_charges.len()
            )));
        }
        let rho =
            if config.integrator.is_implicit() && config.solver.method == SolverMethod::Chebyshev {
                chebyshev_rho(system, config)
            } else {
                0.0
            };
        let dispatch_layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("msc dispatch records"),
            entries: &[wgpu::BindGroupLayoutEntry {
                binding: 0,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Uniform,
                    has_dynamic_offset: true,
                    min_binding_size: wgpu::BufferSize::new(std::mem::size_of::<Dispatch>() as u64),
                },
                count: None,
            }],
        });
        let align = limits.min_uniform_buffer_offset_alignment.max(1);
        let record_stride = (std::mem::size_of::<Dispatch>() as u32).div_ceil(align) * align;
        let mut solver = Self {
            device: device.clone(),
            queue,
            summary,
            lost,
            integrator: config.integrator,
            // Per step, as the CPU reports it: local-global sums its alternations' solves.
            iterations: match config.integrator {
                Integrator::LocalGlobal => {
                    config.solver.iterations * config.local_global_iterations
                }
                _ => config.solver.iterations,
            },
            n: system.len() as u32,
            spring_count: system.springs().len() as u32,
            dt: config.dt,
            steps_done: 0,
            buffers: Vec::new(),
            pipelines: Vec::new(),
            pipeline_index: HashMap::new(),
            groups: Vec::new(),
            group_index: HashMap::new(),
            params: None,
            dispatch_layout,
            dispatch_group: None,
            records: Vec::new(),
            record_index: HashMap::new(),
            record_stride,
            step_ops: Vec::new(),
            prologue_ops: Vec::new(),
            field_fresh: AtomicBool::new(false),
            energy_ops: Vec::new(),
            residual_ops: Vec::new(),
            spring_ops: Vec::new(),
            field_ops: Vec::new(),
            saved_stats: None,
            submissions: AtomicU64::new(0),
            compute_passes: AtomicU64::new(0),
            ddef: None,
        };
        scoped(&device, || {
            solver.create_buffers(system, config, &sz)?;
            if let CoulombMethod::Ddef(d) = config.coulomb.method {
                let charges = system
                    .charged_indices()
                    .iter()
                    .map(|&i| system.charges()[i as usize])
                    .collect();
                solver.ddef = Some(SolverDdef::new(
                    &solver,
                    d,
                    config.coulomb.softening,
                    charges,
                )?);
            }
            solver.plan(system, config, rho)?;
            solver.create_dispatch_records();
            Ok(())
        })?;
        Ok(solver)
    }

    pub(super) fn submit_steps(&mut self, n: u64) -> Result<(), GpuError> {
        if self.ddef.is_some() {
            return self.ddef_steps(n);
        }
        self.check_lost()?;
        let device = self.device.clone();
        scoped(&device, || {
            let mut remaining = n;
            let mut previous: Option<wgpu::SubmissionIndex> = None;
            let per_submit = (DISPATCHES_PER_SUBMIT / self.step_ops.len().max(1) as u64)
                .clamp(1, u64::from(u32::MAX));
            while remaining > 0 {
                let batch = remaining.min(per_submit);
                let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("msc step batch"),
                });
                self.record_unchecked(&mut encoder, batch as u32);
                let index = self.queue.submit([encoder.finish()]);
                self.submissions.fetch_add(1, Ordering::Relaxed);
                // Keep at most two batches in flight.
                if let Some(p) = previous.take() {
                    device
                        .poll(wgpu::PollType::Wait {
                            submission_index: Some(p),
                            timeout: None,
                        })
                        .map_err(poll_error)?;
                }
                previous = Some(index);
                remaining -= batch;
            }
            Ok(())
        })?;
        self.check_lost()
    }
}

impl Simulator for GpuSolver {
    fn step(&mut self, n: u64) -> Result<(), SimError> {
        Ok(self.submit_steps(n)?)
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
        self.summary.name.clone()
    }
    fn ddef_counts(&self) -> Option<crate::sim::DdefCounts> {
        Some(crate::sim::DdefCounts {
            rebuilds: self.ddef_rebuilds()?,
            evaluations: self.ddef_evaluations()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::adapter::{instance, pick_adapter};
    use crate::gpu::error::scoped;

    #[test]
    fn validation_errors_are_captured_as_typed_errors() {
        let Ok(adapter) = pick_adapter(&instance(), true) else {
            assert!(
                std::env::var("MSC_REQUIRE_GPU").as_deref() != Ok("1"),
                "MSC_REQUIRE_GPU=1 but no adapter"
            );
            return;
        };
        let (device, _queue) =
            pollster::block_on(adapter.request_device(&Default::default())).expect("device");
        let result: Result<(), GpuError> = scoped(&device, || {
            // MAP_READ combines only with COPY_DST: creating this buffer is invalid.
            let _ = device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("invalid on purpose"),
                size: 16,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::STORAGE,
                mapped_at_creation: false,
            });
            Ok(())
        });
        match result {
            Err(GpuError::Validation(m)) => assert!(m.contains("invalid on purpose"), "{m}"),
            other => panic!("expected a validation error, got {other:?}"),
        }
        // A kernel that does not compile is caught the same way.
        let result: Result<(), GpuError> = scoped(&device, || {
            let _ = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some("broken"),
                source: wgpu::ShaderSource::Wgsl("fn main( {".into()),
            });
            Ok(())
        });
        assert!(matches!(result, Err(GpuError::Validation(_))), "{result:?}");
    }
}
