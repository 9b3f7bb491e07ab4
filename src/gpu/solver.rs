//! The GPU solver's host side: owns the buffers, builds the pipelines and records the
//! kernels of `shaders/` (DESIGN section 6). A whole step is a fixed list of dispatches,
//! recorded once and replayed `n` times into one compute pass; per-dispatch values
//! (solver iteration, Chebyshev weight, reduction slot, kernel mode) come from a table of
//! `Dispatch` records selected by dynamic uniform offsets, and the simulation clock lives
//! on the GPU, so nothing is written or read between the steps of a batch.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use glam::DVec3;
use wgpu::util::DeviceExt;

use super::layout::{
    Dispatch, ExtCharge, Params, MAX_EXT_CHARGES, MAX_STORAGE_BUFFERS, SCALAR_SLOTS, SLOT_ENERGY,
    SLOT_PQ, SLOT_RESIDUAL, SLOT_RZ, WORKGROUP_MEMORY, WORKGROUP_SIZE,
};
use super::shaders::{self, Access, Kernel};
use super::GpuError;
use crate::config::{Config, CoulombMethod, ExternalField, Integrator, SolverMethod};
use crate::model::{Adjacency, State, System, COULOMB_K};
use crate::sim::{Energies, SimError, Simulator, SolveStats};

/// Options for [`GpuSolver::headless`].
#[derive(Clone, Debug, Default)]
pub struct HeadlessOptions {
    /// Accept software adapters (lavapipe, llvmpipe, WARP). `false` for `--backend auto`.
    pub allow_software: bool,
}

/// Summary of an adapter for `msc info` and `summary.json`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct AdapterSummary {
    pub name: String,
    pub backend: String,
    pub device_type: String,
    pub driver: String,
    pub driver_info: String,
    pub max_storage_buffer_binding_size: u64,
    pub max_buffer_size: u64,
    pub max_compute_workgroup_storage_size: u32,
    pub max_compute_invocations_per_workgroup: u32,
    pub max_storage_buffers_per_shader_stage: u32,
    pub timestamp_queries: bool,
}

impl AdapterSummary {
    fn new(info: &wgpu::AdapterInfo, limits: &wgpu::Limits, features: wgpu::Features) -> Self {
        Self {
            name: info.name.clone(),
            backend: info.backend.to_str().to_string(),
            device_type: format!("{:?}", info.device_type),
            driver: info.driver.clone(),
            driver_info: info.driver_info.clone(),
            max_storage_buffer_binding_size: limits.max_storage_buffer_binding_size,
            max_buffer_size: limits.max_buffer_size,
            max_compute_workgroup_storage_size: limits.max_compute_workgroup_storage_size,
            max_compute_invocations_per_workgroup: limits.max_compute_invocations_per_workgroup,
            max_storage_buffers_per_shader_stage: limits.max_storage_buffers_per_shader_stage,
            timestamp_queries: features.contains(wgpu::Features::TIMESTAMP_QUERY),
        }
    }
}

/// GPU time of one kernel over a profiled run ([`GpuSolver::profile`]).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct KernelTime {
    pub kernel: &'static str,
    /// Dispatches of this kernel in the run.
    pub dispatches: u64,
    /// Summed GPU time in seconds (timestamp queries around each dispatch).
    pub seconds: f64,
}

/// Dispatches recorded per queue submission by [`Simulator::step`] (whole steps, at least
/// one): bounds the command buffer's host memory when steps have many solver sweeps.
const DISPATCHES_PER_SUBMIT: u64 = 8192;

/// The GPU buffers, indexed by `Buf as usize`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Buf {
    /// Positions (xyz, 1): also a vertex buffer (Float32x4, stride 16).
    X,
    V,
    /// (mass, charge * sqrt(k_c), charge, pinned)
    Props,
    /// Non-spring forces (xyz) and Coulomb potential (w).
    Force,
    Sources,
    Charged,
    Clock,
    Springs,
    SParams,
    /// Per spring (n, fmag), (s, t, energy, 0).
    Sf,
    Adj,
    /// Per particle b, inverse diagonal (two vec4).
    Bd,
    /// Solver ping-pong partner of the unknown.
    S,
    Xt,
    B0,
    R,
    P,
    Q,
    Partials,
    Scalars,
}

const BUF_COUNT: usize = Buf::Scalars as usize + 1;

/// One recorded dispatch.
#[derive(Clone, Copy, Debug)]
struct Op {
    pipeline: usize,
    group: usize,
    /// Byte offset of its `Dispatch` record.
    record: u32,
    grid: [u32; 2],
}

struct Pipeline {
    kernel: Kernel,
    pipeline: wgpu::ComputePipeline,
    layout: wgpu::BindGroupLayout,
}

/// The GPU solver for one system.
pub struct GpuSolver {
    device: wgpu::Device,
    queue: wgpu::Queue,
    summary: AdapterSummary,
    lost: Arc<Mutex<Option<String>>>,
    integrator: Integrator,
    iterations: u32,
    n: u32,
    spring_count: u32,
    dt: f64,
    steps_done: u64,
    buffers: Vec<wgpu::Buffer>,
    pipelines: Vec<Pipeline>,
    pipeline_index: HashMap<&'static str, usize>,
    groups: Vec<wgpu::BindGroup>,
    group_index: HashMap<(&'static str, Vec<Buf>), usize>,
    params: Option<wgpu::Buffer>,
    dispatch_layout: wgpu::BindGroupLayout,
    dispatch_group: Option<wgpu::BindGroup>,
    records: Vec<Dispatch>,
    record_index: HashMap<[u32; 8], usize>,
    record_stride: u32,
    step_ops: Vec<Op>,
    energy_ops: Vec<Op>,
    residual_ops: Vec<Op>,
    spring_ops: Vec<Op>,
    field_ops: Vec<Op>,
    /// Stats of the last solve, saved before a diagnostic overwrites the spring blocks.
    saved_stats: Option<(u64, SolveStats)>,
}

/// Sizes the solver allocates, for limit checks before anything is created.
struct Sizes {
    /// (buffer, bytes) of every storage buffer.
    storage: Vec<(&'static str, u64)>,
    /// Workgroups of the largest 1D dispatch.
    groups: u64,
}

fn sizes(system: &System, config: &Config) -> Sizes {
    let n = system.len() as u64;
    let ns = system.springs().len() as u64;
    let nc = system.charged_count() as u64;
    let implicit = config.integrator.is_implicit();
    let cg = implicit && config.solver.method == SolverMethod::Cg;
    let lg = config.integrator == Integrator::LocalGlobal;
    let wg = u64::from(WORKGROUP_SIZE);
    let groups = n.max(ns).div_ceil(wg);
    let per = |on: bool, bytes: u64| if on { bytes } else { 16 };
    Sizes {
        storage: vec![
            ("positions", 16 * n),
            ("velocities", 16 * n),
            ("particle properties", 16 * n),
            ("forces", 16 * n),
            ("Coulomb sources", 16 * nc.max(1)),
            ("charged indices", 4 * nc.max(1)),
            ("clock", 16),
            ("springs", 8 * ns.max(1)),
            ("spring parameters", 16 * ns.max(1)),
            ("spring blocks", 32 * ns.max(1)),
            ("adjacency", 4 * (n + 1 + 4 * ns)),
            ("right-hand side and diagonal", per(implicit, 48 * n)),
            ("solver scratch", per(implicit, 16 * n)),
            ("x_t", per(lg, 16 * n)),
            ("b0", per(lg, 16 * n)),
            ("cg r", per(cg, 16 * n)),
            ("cg p", per(cg, 16 * n)),
            ("cg q", per(cg, 16 * n)),
            // 32 bytes per workgroup (a few more on a 2D grid; see `grid`).
            ("partial sums", 32 * (n.div_ceil(wg).max(1) + 64)),
            ("scalars", 16 * u64::from(SCALAR_SLOTS)),
        ],
        groups,
    }
}

/// Checks the device limits the kernels rely on and the buffer sizes of this system.
fn check_limits(limits: &wgpu::Limits, sizes: &Sizes) -> Result<(), GpuError> {
    let need = |what: &str, needed: u64, limit: u64| {
        if needed > limit {
            Err(GpuError::LimitExceeded {
                what: what.to_string(),
                needed,
                limit,
            })
        } else {
            Ok(())
        }
    };
    need(
        "storage buffers per shader stage",
        MAX_STORAGE_BUFFERS.into(),
        limits.max_storage_buffers_per_shader_stage.into(),
    )?;
    need(
        "workgroup memory (bytes)",
        WORKGROUP_MEMORY.into(),
        limits.max_compute_workgroup_storage_size.into(),
    )?;
    need(
        "invocations per workgroup",
        WORKGROUP_SIZE.into(),
        limits.max_compute_invocations_per_workgroup.into(),
    )?;
    need(
        "workgroup size x",
        WORKGROUP_SIZE.into(),
        limits.max_compute_workgroup_size_x.into(),
    )?;
    need("bind groups", 2, limits.max_bind_groups.into())?;
    need(
        "dynamic uniform buffers per pipeline layout",
        1,
        limits
            .max_dynamic_uniform_buffers_per_pipeline_layout
            .into(),
    )?;
    for &(what, bytes) in &sizes.storage {
        need(
            &format!("storage buffer '{what}' (bytes)"),
            bytes,
            limits.max_storage_buffer_binding_size,
        )?;
        need(
            &format!("buffer '{what}' (bytes)"),
            bytes,
            limits.max_buffer_size,
        )?;
    }
    let per_dim = u64::from(limits.max_compute_workgroups_per_dimension);
    need(
        "workgroups of one dispatch",
        sizes.groups,
        per_dim * per_dim,
    )?;
    Ok(())
}

/// Workgroup grid of a 1D dispatch over `count` items with at most `max` workgroups per
/// dimension: tight (x y - groups < y), so at most a few workgroups idle.
fn grid(count: u32, max: u32) -> [u32; 2] {
    let groups = count.div_ceil(WORKGROUP_SIZE).max(1);
    let y = groups.div_ceil(max.max(1));
    [groups.div_ceil(y), y]
}

fn instance() -> wgpu::Instance {
    wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env())
}

fn all_adapters(instance: &wgpu::Instance) -> Vec<wgpu::Adapter> {
    let backends = wgpu::Backends::from_env().unwrap_or(wgpu::Backends::all());
    pollster::block_on(instance.enumerate_adapters(backends))
}

/// Every adapter wgpu finds, for `msc info`.
pub fn list_adapters() -> Vec<AdapterSummary> {
    all_adapters(&instance())
        .iter()
        .map(|a| AdapterSummary::new(&a.get_info(), &a.limits(), a.features()))
        .collect()
}

/// A device and queue opened as [`GpuSolver::headless`] opens them, for several solvers
/// to share through [`GpuSolver::new`] (the runs of `msc sweep` and `msc batch`).
pub struct HeadlessDevice {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub adapter: AdapterSummary,
}

/// Picks an adapter as [`GpuSolver::headless`] does (honouring WGPU_BACKEND and
/// WGPU_ADAPTER_NAME; software adapters only when allowed) and opens a device with the
/// adapter's own limits. Each solver built on it checks its own sizes against them.
pub fn open_headless_device(options: &HeadlessOptions) -> Result<HeadlessDevice, GpuError> {
    let instance = instance();
    let adapter = pick_adapter(&instance, options.allow_software)?;
    let features = adapter.features() & wgpu::Features::TIMESTAMP_QUERY;
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("msc shared device"),
        required_features: features,
        required_limits: adapter.limits(),
        ..Default::default()
    }))
    .map_err(|e| GpuError::NoAdapter(format!(": requesting a device failed: {e}")))?;
    let adapter = AdapterSummary::new(&adapter.get_info(), &device.limits(), device.features());
    Ok(HeadlessDevice {
        device,
        queue,
        adapter,
    })
}

/// Preference order: discrete, integrated, virtual, other, CPU; then native APIs before GL.
fn adapter_rank(info: &wgpu::AdapterInfo) -> (u8, u8) {
    let ty = match info.device_type {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Other => 3,
        wgpu::DeviceType::Cpu => 4,
    };
    let backend = match info.backend {
        wgpu::Backend::Vulkan | wgpu::Backend::Metal | wgpu::Backend::Dx12 => 0,
        _ => 1,
    };
    (ty, backend)
}

/// Picks an adapter: `WGPU_BACKEND` restricts the backends, `WGPU_ADAPTER_NAME` (a
/// case-insensitive substring) the names; CPU adapters only when `allow_software`.
fn pick_adapter(
    instance: &wgpu::Instance,
    allow_software: bool,
) -> Result<wgpu::Adapter, GpuError> {
    let mut adapters = all_adapters(instance);
    let infos: Vec<wgpu::AdapterInfo> = adapters.iter().map(|a| a.get_info()).collect();
    let wanted = std::env::var("WGPU_ADAPTER_NAME").ok();
    let index = choose_adapter(&infos, wanted.as_deref(), allow_software)?;
    Ok(adapters.swap_remove(index))
}

/// Index in `infos` of the adapter to use: the best ranked one whose name contains
/// `wanted` (case-insensitive) and that is not a CPU adapter unless `allow_software`.
fn choose_adapter(
    infos: &[wgpu::AdapterInfo],
    wanted: Option<&str>,
    allow_software: bool,
) -> Result<usize, GpuError> {
    let names = |idx: &[usize]| {
        idx.iter()
            .map(|&i| format!("{} ({:?})", infos[i].name, infos[i].device_type))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut candidates: Vec<usize> = (0..infos.len()).collect();
    if candidates.is_empty() {
        return Err(GpuError::NoAdapter(
            " (wgpu enumerated none; WGPU_BACKEND may exclude them)".into(),
        ));
    }
    if let Some(wanted) = wanted {
        let all = names(&candidates);
        let lc = wanted.to_lowercase();
        candidates.retain(|&i| infos[i].name.to_lowercase().contains(&lc));
        if candidates.is_empty() {
            return Err(GpuError::NoAdapter(format!(
                " matching WGPU_ADAPTER_NAME={wanted:?} (found: {all})"
            )));
        }
    }
    if !allow_software {
        let all = names(&candidates);
        candidates.retain(|&i| infos[i].device_type != wgpu::DeviceType::Cpu);
        if candidates.is_empty() {
            return Err(GpuError::NoAdapter(format!(
                " other than software adapters, which were not allowed (found: {all})"
            )));
        }
    }
    candidates.sort_by_key(|&i| adapter_rank(&infos[i]));
    Ok(candidates[0])
}

fn to_f32(value: f64, what: &str, index: usize) -> Result<f32, GpuError> {
    let v = value as f32;
    if v.is_finite() || !value.is_finite() {
        Ok(v)
    } else {
        Err(GpuError::Unsupported(format!(
            "{what} {index} = {value} is outside the f32 range"
        )))
    }
}

fn vec4(v: DVec3, w: f32, what: &str, index: usize) -> Result<[f32; 4], GpuError> {
    Ok([
        to_f32(v.x, what, index)?,
        to_f32(v.y, what, index)?,
        to_f32(v.z, what, index)?,
        w,
    ])
}

fn poll_error(e: wgpu::PollError) -> GpuError {
    GpuError::DeviceLost(format!("waiting for the GPU failed: {e}"))
}

fn scope_error(e: wgpu::Error) -> GpuError {
    match e {
        wgpu::Error::OutOfMemory { .. } => GpuError::OutOfMemory(e.to_string()),
        wgpu::Error::Validation { description, .. } => GpuError::Validation(description),
        wgpu::Error::Internal { description, .. } => GpuError::Validation(description),
    }
}

/// Runs `f` inside validation and out-of-memory error scopes; a captured error wins over
/// `f`'s own result.
fn scoped<T>(
    device: &wgpu::Device,
    f: impl FnOnce() -> Result<T, GpuError>,
) -> Result<T, GpuError> {
    let oom = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let validation = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let result = f();
    let v = pollster::block_on(validation.pop());
    let o = pollster::block_on(oom.pop());
    match (v, o) {
        (Some(e), _) | (None, Some(e)) => Err(scope_error(e)),
        (None, None) => result,
    }
}

fn chebyshev_weights(rho: f64, count: u32) -> Vec<f64> {
    let r2 = rho * rho;
    let mut w: Vec<f64> = Vec::with_capacity(count as usize);
    for k in 0..count as usize {
        let next = match k {
            0 => 1.0,
            1 => 2.0 / (2.0 - r2),
            _ => 4.0 / (4.0 - r2 * w[k - 1]),
        };
        w.push(next);
    }
    w
}

/// Chebyshev's spectral radius: the config's, or the CPU reference's power-iteration
/// estimate on the initial operator (IMEX: A at x_0; local-global: P), so both backends
/// use the same weights.
fn chebyshev_rho(system: &System, config: &Config) -> f64 {
    use crate::cpu::solvers::{estimate_block_jacobi_rho, BlockLaplacian, RHO_ESTIMATE_ITERATIONS};
    config.solver.rho.unwrap_or_else(|| {
        let op = match config.integrator {
            Integrator::LocalGlobal => BlockLaplacian::local_global(system, config.dt),
            _ => BlockLaplacian::imex(system, system.positions(), config.dt),
        };
        estimate_block_jacobi_rho(&op, config.solver.omega, RHO_ESTIMATE_ITERATIONS)
    })
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
        config.validate()?;
        let instance = instance();
        let adapter = pick_adapter(&instance, options.allow_software)?;
        let limits = adapter.limits();
        check_limits(&limits, &sizes(system, config))?;
        let features = adapter.features() & wgpu::Features::TIMESTAMP_QUERY;
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("msc device"),
            required_features: features,
            required_limits: limits.clone(),
            ..Default::default()
        }))
        .map_err(|e| GpuError::NoAdapter(format!(": requesting a device failed: {e}")))?;
        let lost = Arc::new(Mutex::new(None));
        let flag = lost.clone();
        device.set_device_lost_callback(move |reason, message| {
            if let Ok(mut l) = flag.lock() {
                *l = Some(format!("{reason:?}: {message}"));
            }
        });
        let summary = AdapterSummary::new(&adapter.get_info(), &device.limits(), device.features());
        Self::build(device, queue, summary, lost, system, config)
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
    /// Steps done (recorded, for [`Self::record_steps`]).
    pub fn steps_done(&self) -> u64 {
        self.steps_done
    }

    /// Diagnostics: per spring at the current state, the force on particle i (elastic and
    /// damping, as the explicit integrators use it) and the block W_k of A. (The IMEX
    /// step's own blocks are kept for `solve_stats`.)
    pub fn spring_blocks(&mut self) -> Result<Vec<(DVec3, glam::DMat3)>, GpuError> {
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
    pub fn field_forces(&mut self) -> Result<(Vec<DVec3>, Vec<f64>), GpuError> {
        let data =
            self.run_and_read(&self.field_ops, &[(Buf::Force, 0, 16 * u64::from(self.n))])?;
        let f: &[[f32; 4]] = bytemuck::cast_slice(&data);
        Ok((
            f.iter()
                .map(|a| DVec3::new(a[0] as f64, a[1] as f64, a[2] as f64))
                .collect(),
            f.iter().map(|a| a[3] as f64).collect(),
        ))
    }

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
        self.check_lost()?;
        // wgpu allows at most 4096 queries per set: two per dispatch.
        const CHUNK: usize = 2048;
        let period_s = f64::from(self.queue.get_timestamp_period()) * 1e-9;
        let mut times: Vec<KernelTime> = Vec::new();
        let ops = self.step_ops.clone();
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
            for _ in 0..steps {
                for chunk in ops.chunks(CHUNK) {
                    let mut encoder =
                        device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                            label: Some("msc profile"),
                        });
                    for (k, op) in chunk.iter().enumerate() {
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
                    let (tx, rx) = std::sync::mpsc::channel();
                    staging.slice(..).map_async(wgpu::MapMode::Read, move |r| {
                        let _ = tx.send(r);
                    });
                    device
                        .poll(wgpu::PollType::wait_indefinitely())
                        .map_err(poll_error)?;
                    match rx.recv() {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => return Err(GpuError::Readback(e.to_string())),
                        Err(_) => {
                            return Err(GpuError::Readback("the map callback never ran".into()))
                        }
                    }
                    {
                        let view = staging
                            .slice(..)
                            .get_mapped_range()
                            .map_err(|e| GpuError::Readback(format!("{e:?}")))?;
                        let stamps: &[u64] = bytemuck::cast_slice(&view);
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
                    staging.unmap();
                }
                self.steps_done += 1;
            }
            Ok(())
        })?;
        self.check_lost()?;
        Ok(times)
    }

    /// Dispatches recorded per step.
    pub fn dispatches_per_step(&self) -> usize {
        self.step_ops.len()
    }

    /// Records `n` steps into the caller's encoder (one compute pass). The solver counts
    /// them as done: the caller must submit the encoder before reading the state back.
    pub fn record_steps(&mut self, encoder: &mut wgpu::CommandEncoder, n: u32) {
        if n == 0 {
            return;
        }
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("msc steps"),
            timestamp_writes: None,
        });
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
        config.validate()?;
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
            iterations: config.solver.iterations,
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
            energy_ops: Vec::new(),
            residual_ops: Vec::new(),
            spring_ops: Vec::new(),
            field_ops: Vec::new(),
            saved_stats: None,
        };
        scoped(&device, || {
            solver.create_buffers(system, config, &sz)?;
            solver.plan(system, config, rho)?;
            solver.create_dispatch_records();
            Ok(())
        })?;
        Ok(solver)
    }

    fn buf(&self, b: Buf) -> &wgpu::Buffer {
        &self.buffers[b as usize]
    }

    fn create_buffers(
        &mut self,
        system: &System,
        config: &Config,
        sz: &Sizes,
    ) -> Result<(), GpuError> {
        let n = system.len();
        let h = config.dt;
        let sqrt_k = COULOMB_K.sqrt();
        let mut x = Vec::with_capacity(n);
        let mut v = Vec::with_capacity(n);
        let mut props = Vec::with_capacity(n);
        let charged = system.charged_indices();
        for i in 0..n {
            x.push(vec4(system.positions()[i], 1.0, "position of particle", i)?);
            v.push(vec4(
                system.velocities()[i],
                0.0,
                "velocity of particle",
                i,
            )?);
            let q = system.charges()[i];
            props.push([
                to_f32(system.masses()[i], "mass of particle", i)?,
                to_f32(q * sqrt_k, "charge of particle", i)?,
                to_f32(q, "charge of particle", i)?,
                if system.pinned()[i] { 1.0 } else { 0.0 },
            ]);
        }
        let springs: Vec<[u32; 2]> = system.springs().iter().map(|s| [s.i, s.j]).collect();
        let mut sparams = Vec::with_capacity(springs.len());
        for (k, s) in system.springs().iter().enumerate() {
            sparams.push([
                to_f32(s.stiffness, "stiffness of spring", k)?,
                to_f32(s.rest_length, "rest length of spring", k)?,
                to_f32(s.damping, "damping of spring", k)?,
                0.0,
            ]);
        }
        let adjacency = Adjacency::build(n, system.springs());
        let mut adj: Vec<u32> = adjacency.offsets.clone();
        for e in &adjacency.entries {
            adj.push(e.spring);
            adj.push(e.other | if e.sign < 0 { 1 << 31 } else { 0 });
        }
        let lg = config.integrator == Integrator::LocalGlobal;
        // Local-global: the matrix P = M + h C_L + h^2 L is constant (DESIGN section 2):
        // upload its edge weights as W_k = (h c + h^2 k) I and its diagonal inverse once.
        let mut sf_init: Vec<[f32; 4]> = Vec::new();
        let mut bd_init: Vec<[f32; 4]> = Vec::new();
        if lg {
            let mut diag: Vec<f64> = system.masses().to_vec();
            for (k, s) in system.springs().iter().enumerate() {
                let w = h * s.damping + h * h * s.stiffness;
                diag[s.i as usize] += w;
                diag[s.j as usize] += w;
                sf_init.push([0.0; 4]);
                sf_init.push([
                    to_f32(w, "local-global weight of spring", k)?,
                    0.0,
                    0.0,
                    0.0,
                ]);
            }
            for (i, d) in diag.iter().enumerate() {
                let inv = to_f32(1.0 / d, "diagonal of particle", i)?;
                bd_init.push([0.0; 4]);
                bd_init.push([inv, inv, inv, 0.0]);
                bd_init.push([0.0; 4]);
            }
        }
        let storage = wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_DST
            | wgpu::BufferUsages::COPY_SRC;
        let device = &self.device;
        let size_of = |name: &str| -> u64 {
            sz.storage
                .iter()
                .find(|(w, _)| *w == name)
                .map(|(_, b)| *b)
                .unwrap_or(16)
        };
        let init = |label: &str, data: &[u8], usage: wgpu::BufferUsages| {
            device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents: data,
                usage,
            })
        };
        let zeroed = |label: &str, size: u64| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: size.max(16),
                usage: storage,
                mapped_at_creation: false,
            })
        };
        let padded = |data: &[u8], size: u64| -> Vec<u8> {
            let mut d = data.to_vec();
            d.resize((size.max(16) as usize).max(data.len()), 0);
            d
        };
        let mut bufs: Vec<Option<wgpu::Buffer>> = (0..BUF_COUNT).map(|_| None).collect();
        let mut put = |b: Buf, buffer: wgpu::Buffer| bufs[b as usize] = Some(buffer);
        put(
            Buf::X,
            init(
                "msc positions",
                bytemuck::cast_slice(&x),
                storage | wgpu::BufferUsages::VERTEX,
            ),
        );
        put(
            Buf::V,
            init("msc velocities", bytemuck::cast_slice(&v), storage),
        );
        put(
            Buf::Props,
            init(
                "msc particle properties",
                bytemuck::cast_slice(&props),
                storage,
            ),
        );
        put(Buf::Force, zeroed("msc forces", size_of("forces")));
        put(
            Buf::Sources,
            zeroed("msc coulomb sources", size_of("Coulomb sources")),
        );
        put(
            Buf::Charged,
            init(
                "msc charged indices",
                &padded(bytemuck::cast_slice(&charged), size_of("charged indices")),
                storage,
            ),
        );
        put(Buf::Clock, zeroed("msc clock", 16));
        put(
            Buf::Springs,
            init(
                "msc springs",
                &padded(bytemuck::cast_slice(&springs), size_of("springs")),
                storage,
            ),
        );
        put(
            Buf::SParams,
            init(
                "msc spring parameters",
                &padded(bytemuck::cast_slice(&sparams), size_of("spring parameters")),
                storage,
            ),
        );
        put(
            Buf::Sf,
            init(
                "msc spring blocks",
                &padded(bytemuck::cast_slice(&sf_init), size_of("spring blocks")),
                storage,
            ),
        );
        put(
            Buf::Adj,
            init("msc adjacency", bytemuck::cast_slice(&adj), storage),
        );
        put(
            Buf::Bd,
            init(
                "msc rhs and diagonal",
                &padded(
                    bytemuck::cast_slice(&bd_init),
                    size_of("right-hand side and diagonal"),
                ),
                storage,
            ),
        );
        put(
            Buf::S,
            zeroed("msc solver scratch", size_of("solver scratch")),
        );
        put(Buf::Xt, zeroed("msc x_t", size_of("x_t")));
        put(Buf::B0, zeroed("msc b0", size_of("b0")));
        put(Buf::R, zeroed("msc cg r", size_of("cg r")));
        put(Buf::P, zeroed("msc cg p", size_of("cg p")));
        put(Buf::Q, zeroed("msc cg q", size_of("cg q")));
        // Two blocks of one vec4 per workgroup of a per-particle dispatch.
        let grid = self.grid(self.n);
        let partials = 32 * u64::from(grid[0]) * u64::from(grid[1]);
        put(Buf::Partials, zeroed("msc partial sums", partials));
        put(Buf::Scalars, zeroed("msc scalars", size_of("scalars")));
        self.buffers = bufs
            .into_iter()
            .map(|b| b.expect("every buffer is created"))
            .collect();

        // Params
        let mut params = Params {
            n: n as u32,
            n_springs: system.springs().len() as u32,
            n_charged: charged.len() as u32,
            n_ext: config.external_charges.len() as u32,
            dt: h as f32,
            dt2: (h * h) as f32,
            omega: config.solver.omega as f32,
            eps2: to_f32(config.coulomb.softening.powi(2), "softening", 0)?,
            gravity: vec4(config.gravity, 0.0, "gravity", 0)?,
            field: [0.0; 4],
            field_kind: 0,
            n_wg: {
                let g = self.grid(self.n);
                g[0] * g[1]
            },
            block_diag: u32::from(matches!(
                config.solver.method,
                SolverMethod::BlockJacobi | SolverMethod::Chebyshev
            )),
            _pad0: 0,
            ext: [ExtCharge::default(); MAX_EXT_CHARGES],
        };
        match config.external_field {
            None => {}
            Some(ExternalField::Uniform(e)) => {
                params.field_kind = 1;
                params.field = vec4(e, 0.0, "external field", 0)?;
            }
            Some(
                ExternalField::Swirl { scale, min_z } | ExternalField::Vortex { scale, min_z },
            ) => {
                params.field_kind = match config.external_field {
                    Some(ExternalField::Swirl { .. }) => 2,
                    _ => 3,
                };
                params.field = [
                    to_f32(scale, "swirl scale", 0)?,
                    to_f32(min_z, "swirl min_z", 0)?,
                    0.0,
                    0.0,
                ];
            }
        }
        for (k, c) in config.external_charges.iter().enumerate() {
            let orbit = c.orbit;
            params.ext[k] = ExtCharge {
                pos0: vec4(
                    c.position,
                    to_f32(c.charge * sqrt_k, "external charge", k)?,
                    "external charge position",
                    k,
                )?,
                center: match orbit {
                    Some(o) => vec4(
                        o.center,
                        to_f32(o.angular_velocity, "orbit angular velocity", k)?,
                        "orbit center",
                        k,
                    )?,
                    None => [0.0; 4],
                },
                axis: match orbit {
                    Some(o) => vec4(o.axis, 1.0, "orbit axis", k)?,
                    None => [0.0; 4],
                },
            };
        }
        let params_buf = self
            .device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("msc params"),
                contents: bytemuck::bytes_of(&params),
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            });
        self.params = Some(params_buf);
        Ok(())
    }

    /// Workgroup grid of a 1D dispatch over `count` items (2D past 65535 workgroups).
    fn grid(&self, count: u32) -> [u32; 2] {
        grid(
            count,
            self.device.limits().max_compute_workgroups_per_dimension,
        )
    }

    fn pipeline(&mut self, k: Kernel) -> usize {
        if let Some(&i) = self.pipeline_index.get(k.name) {
            return i;
        }
        let module = self
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(k.name),
                source: wgpu::ShaderSource::Wgsl(k.source.into()),
            });
        let mut entries = vec![wgpu::BindGroupLayoutEntry {
            binding: 0,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Uniform,
                has_dynamic_offset: false,
                min_binding_size: wgpu::BufferSize::new(std::mem::size_of::<Params>() as u64),
            },
            count: None,
        }];
        for (i, a) in k.storage.iter().enumerate() {
            entries.push(wgpu::BindGroupLayoutEntry {
                binding: i as u32 + 1,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Storage {
                        read_only: *a == Access::Read,
                    },
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            });
        }
        let layout = self
            .device
            .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some(k.name),
                entries: &entries,
            });
        let pipeline_layout = self
            .device
            .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some(k.name),
                bind_group_layouts: &[Some(&layout), Some(&self.dispatch_layout)],
                immediate_size: 0,
            });
        let pipeline = self
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(k.name),
                layout: Some(&pipeline_layout),
                module: &module,
                entry_point: Some("main"),
                compilation_options: Default::default(),
                cache: None,
            });
        self.pipelines.push(Pipeline {
            kernel: k,
            pipeline,
            layout,
        });
        let i = self.pipelines.len() - 1;
        self.pipeline_index.insert(k.name, i);
        i
    }

    fn bind_group(&mut self, pipeline: usize, bufs: &[Buf]) -> usize {
        let name = self.pipelines[pipeline].kernel.name;
        let key = (name, bufs.to_vec());
        if let Some(&g) = self.group_index.get(&key) {
            return g;
        }
        let params = self
            .params
            .as_ref()
            .expect("params are created before the plan");
        let mut entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: params.as_entire_binding(),
        }];
        for (i, b) in bufs.iter().enumerate() {
            entries.push(wgpu::BindGroupEntry {
                binding: i as u32 + 1,
                resource: self.buffers[*b as usize].as_entire_binding(),
            });
        }
        let label = format!("{name} {bufs:?}");
        let group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(&label),
            layout: &self.pipelines[pipeline].layout,
            entries: &entries,
        });
        self.groups.push(group);
        let g = self.groups.len() - 1;
        self.group_index.insert(key, g);
        g
    }

    /// Byte offset of a dispatch record (deduplicated).
    fn rec(&mut self, d: Dispatch) -> u32 {
        let key: [u32; 8] = bytemuck::cast(d);
        let records = &mut self.records;
        let i = *self.record_index.entry(key).or_insert_with(|| {
            records.push(d);
            records.len() - 1
        });
        i as u32 * self.record_stride
    }

    fn mode(&mut self, mode: u32) -> u32 {
        self.rec(Dispatch {
            mode,
            ..Default::default()
        })
    }

    fn op(&mut self, k: Kernel, bufs: &[Buf], record: u32, count: u32) -> Op {
        debug_assert_eq!(bufs.len(), k.storage.len(), "{}", k.name);
        let pipeline = self.pipeline(k);
        let group = self.bind_group(pipeline, bufs);
        Op {
            pipeline,
            group,
            record,
            grid: self.grid(count),
        }
    }

    /// Second reduction stage: block `block` of the partial sums into scalar `slot`.
    fn reduce(&mut self, slot: u32, block: u32) -> Op {
        let record = self.rec(Dispatch {
            slot,
            block,
            ..Default::default()
        });
        let mut op = self.op(
            shaders::DOT_REDUCE,
            &[Buf::Partials, Buf::Scalars],
            record,
            1,
        );
        op.grid = [1, 1];
        op
    }

    /// All non-spring forces at t (mode 0) or t + h (mode 1): external and gravity per
    /// particle, then the compacted charges and the tiled Coulomb sum over them.
    fn field_ops(&mut self, ops: &mut Vec<Op>, nc: u32, mode: u32) {
        let record = self.mode(mode);
        let op = self.op(
            shaders::EXTERNAL_FORCES,
            &[Buf::X, Buf::Props, Buf::Clock, Buf::Force],
            record,
            self.n,
        );
        ops.push(op);
        if nc > 0 {
            let m0 = self.mode(0);
            let op = self.op(
                shaders::COULOMB_SOURCES,
                &[Buf::X, Buf::Props, Buf::Charged, Buf::Sources],
                m0,
                nc,
            );
            ops.push(op);
            let op = self.op(
                shaders::COULOMB_TILED,
                &[Buf::Sources, Buf::Charged, Buf::Force],
                m0,
                nc,
            );
            ops.push(op);
        }
    }

    fn spring_op(&mut self, ops: &mut Vec<Op>, ns: u32, mode: u32) {
        if ns > 0 {
            let record = self.mode(mode);
            let op = self.op(
                shaders::SPRING_ASSEMBLE,
                &[Buf::X, Buf::V, Buf::Springs, Buf::SParams, Buf::Sf],
                record,
                ns,
            );
            ops.push(op);
        }
    }

    /// Records a fixed-count solve of A u = b (b and the diagonal in `Bd`, W_k in `Sf`)
    /// warm-started from `a`; returns the buffer holding the solution.
    fn plan_solve(&mut self, ops: &mut Vec<Op>, config: &Config, rho: f64, a: Buf, s: Buf) -> Buf {
        let n = self.n;
        let iters = config.solver.iterations;
        match config.solver.method {
            SolverMethod::Jacobi | SolverMethod::BlockJacobi | SolverMethod::Chebyshev => {
                let cheb = config.solver.method == SolverMethod::Chebyshev;
                let weights = if cheb {
                    chebyshev_weights(rho, iters)
                } else {
                    Vec::new()
                };
                let (mut cur, mut next) = (a, s);
                for k in 0..iters {
                    // Sweep k + 1 uses omega_{k+1}; omega_1 = 1 is the plain update.
                    let (mode, weight) = if cheb && k >= 1 {
                        (1, weights[k as usize] as f32)
                    } else {
                        (0, 1.0)
                    };
                    // The sweep reads only mode and weight: equal records are shared.
                    let record = self.rec(Dispatch {
                        mode,
                        weight,
                        ..Default::default()
                    });
                    let op = self.op(
                        shaders::JACOBI_SWEEP,
                        &[Buf::Props, Buf::Sf, Buf::Adj, Buf::Bd, cur, next],
                        record,
                        n,
                    );
                    ops.push(op);
                    std::mem::swap(&mut cur, &mut next);
                }
                cur
            }
            SolverMethod::Cg => {
                let m0 = self.mode(0);
                let op = self.op(
                    shaders::CG_INIT,
                    &[
                        Buf::Props,
                        Buf::Sf,
                        Buf::Adj,
                        Buf::Bd,
                        a,
                        Buf::R,
                        Buf::P,
                        Buf::Partials,
                    ],
                    m0,
                    n,
                );
                ops.push(op);
                ops.push(self.reduce(SLOT_RZ, 0));
                for k in 0..iters {
                    let op = self.op(
                        shaders::CG_MATVEC,
                        &[Buf::Props, Buf::Sf, Buf::Adj, Buf::P, Buf::Q, Buf::Partials],
                        m0,
                        n,
                    );
                    ops.push(op);
                    ops.push(self.reduce(SLOT_PQ, 0));
                    // The CG kernels use only the parity of the iteration.
                    let record = self.rec(Dispatch {
                        iter: k % 2,
                        ..Default::default()
                    });
                    let op = self.op(
                        shaders::CG_UPDATE,
                        &[
                            Buf::Props,
                            Buf::Bd,
                            Buf::P,
                            Buf::Q,
                            Buf::Scalars,
                            a,
                            Buf::R,
                            Buf::Partials,
                        ],
                        record,
                        n,
                    );
                    ops.push(op);
                    ops.push(self.reduce(SLOT_RZ + (k + 1) % 2, 0));
                    if k + 1 < iters {
                        let op = self.op(
                            shaders::CG_DIRECTION,
                            &[Buf::Props, Buf::Bd, Buf::R, Buf::Scalars, Buf::P],
                            record,
                            n,
                        );
                        ops.push(op);
                    }
                }
                a
            }
        }
    }

    /// Builds the dispatch lists of a step, of the energies and of the residual.
    fn plan(&mut self, system: &System, config: &Config, rho: f64) -> Result<(), GpuError> {
        let n = self.n;
        let ns = system.springs().len() as u32;
        let nc = if config.coulomb.method == CoulombMethod::AllPairs {
            system.charged_count() as u32
        } else {
            0
        };
        let m0 = self.mode(0);
        let mut ops = Vec::new();
        match config.integrator {
            Integrator::Imex => {
                self.spring_op(&mut ops, ns, 0);
                self.field_ops(&mut ops, nc, 0);
                let op = self.op(
                    shaders::RHS,
                    &[Buf::V, Buf::Props, Buf::Force, Buf::Sf, Buf::Adj, Buf::Bd],
                    m0,
                    n,
                );
                ops.push(op);
                let result = self.plan_solve(&mut ops, config, rho, Buf::V, Buf::S);
                let record = self.mode(if result == Buf::V { 0 } else { 1 });
                let op = self.op(
                    shaders::INTEGRATE,
                    &[Buf::X, Buf::V, Buf::S, Buf::Xt, Buf::Props, Buf::Clock],
                    record,
                    n,
                );
                ops.push(op);
            }
            Integrator::LocalGlobal => {
                self.field_ops(&mut ops, nc, 0);
                let op = self.op(
                    shaders::LG_PREPARE,
                    &[Buf::X, Buf::V, Buf::Props, Buf::Force, Buf::Xt, Buf::B0],
                    m0,
                    n,
                );
                ops.push(op);
                let mut cur = Buf::X;
                for _ in 0..config.local_global_iterations {
                    let op = self.op(
                        shaders::LG_RHS,
                        &[
                            Buf::Props,
                            Buf::Xt,
                            cur,
                            Buf::B0,
                            Buf::SParams,
                            Buf::Adj,
                            Buf::Bd,
                        ],
                        m0,
                        n,
                    );
                    ops.push(op);
                    let other = if cur == Buf::X { Buf::S } else { Buf::X };
                    cur = self.plan_solve(&mut ops, config, rho, cur, other);
                }
                let record = self.mode(if cur == Buf::X { 2 } else { 3 });
                let op = self.op(
                    shaders::INTEGRATE,
                    &[Buf::X, Buf::V, Buf::S, Buf::Xt, Buf::Props, Buf::Clock],
                    record,
                    n,
                );
                ops.push(op);
            }
            Integrator::SymplecticEuler | Integrator::Verlet => {
                let verlet = config.integrator == Integrator::Verlet;
                let explicit = [
                    Buf::X,
                    Buf::V,
                    Buf::Props,
                    Buf::Force,
                    Buf::Sf,
                    Buf::Adj,
                    Buf::Clock,
                ];
                self.spring_op(&mut ops, ns, 1);
                self.field_ops(&mut ops, nc, 0);
                let record = self.mode(if verlet { 1 } else { 0 });
                ops.push(self.op(shaders::EXPLICIT_STEP, &explicit, record, n));
                if verlet {
                    // a' = f(x', v_half, t + h) / m
                    self.spring_op(&mut ops, ns, 1);
                    self.field_ops(&mut ops, nc, 1);
                    let record = self.mode(2);
                    ops.push(self.op(shaders::EXPLICIT_STEP, &explicit, record, n));
                }
            }
        }
        self.step_ops = ops;

        let mut ops = Vec::new();
        self.field_ops(&mut ops, nc, 0);
        let op = self.op(
            shaders::ENERGY_REDUCE,
            &[
                Buf::X,
                Buf::V,
                Buf::Props,
                Buf::Force,
                Buf::SParams,
                Buf::Adj,
                Buf::Clock,
                Buf::Partials,
            ],
            m0,
            n,
        );
        ops.push(op);
        ops.push(self.reduce(SLOT_ENERGY, 0));
        ops.push(self.reduce(SLOT_ENERGY + 1, 1));
        self.energy_ops = ops;

        let mut ops = Vec::new();
        self.spring_op(&mut ops, ns, 1);
        self.spring_ops = ops;
        let mut ops = Vec::new();
        self.field_ops(&mut ops, nc, 0);
        self.field_ops = ops;

        if config.integrator.is_implicit() {
            let unknown = if config.integrator == Integrator::Imex {
                Buf::V
            } else {
                Buf::X
            };
            let op = self.op(
                shaders::RESIDUAL,
                &[
                    Buf::Props,
                    Buf::Sf,
                    Buf::Adj,
                    Buf::Bd,
                    unknown,
                    Buf::Partials,
                ],
                m0,
                n,
            );
            self.residual_ops = vec![op, self.reduce(SLOT_RESIDUAL, 0)];
        }
        Ok(())
    }

    fn create_dispatch_records(&mut self) {
        let stride = self.record_stride as usize;
        let mut bytes = vec![0u8; stride * self.records.len().max(1)];
        for (i, r) in self.records.iter().enumerate() {
            bytes[i * stride..i * stride + std::mem::size_of::<Dispatch>()]
                .copy_from_slice(bytemuck::bytes_of(r));
        }
        let buffer = self
            .device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("msc dispatch records"),
                contents: &bytes,
                usage: wgpu::BufferUsages::UNIFORM,
            });
        let group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("msc dispatch records"),
            layout: &self.dispatch_layout,
            entries: &[wgpu::BindGroupEntry {
                binding: 0,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: &buffer,
                    offset: 0,
                    size: wgpu::BufferSize::new(std::mem::size_of::<Dispatch>() as u64),
                }),
            }],
        });
        self.dispatch_group = Some(group);
    }

    fn replay(&self, pass: &mut wgpu::ComputePass<'_>, ops: &[Op]) {
        let records = self
            .dispatch_group
            .as_ref()
            .expect("dispatch records exist once built");
        let mut current = usize::MAX;
        for op in ops {
            if op.pipeline != current {
                pass.set_pipeline(&self.pipelines[op.pipeline].pipeline);
                current = op.pipeline;
            }
            pass.set_bind_group(0, &self.groups[op.group], &[]);
            pass.set_bind_group(1, records, &[op.record]);
            pass.dispatch_workgroups(op.grid[0], op.grid[1], 1);
        }
    }

    /// Device loss is reported through the device-lost callback, which wgpu runs while
    /// polling. Only headless solvers install one: an embedding caller owns its device's
    /// callback (on a lost device, readbacks then fail with `Readback`).
    fn check_lost(&self) -> Result<(), GpuError> {
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
    fn run_and_read(&self, ops: &[Op], copies: &[(Buf, u64, u64)]) -> Result<Vec<u8>, GpuError> {
        self.check_lost()?;
        let total: u64 = copies.iter().map(|c| c.2).sum();
        let bytes = scoped(&self.device, || {
            let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("msc readback"),
                size: total.max(16),
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            let mut encoder = self
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("msc readback"),
                });
            if !ops.is_empty() {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("msc reductions"),
                    timestamp_writes: None,
                });
                self.replay(&mut pass, ops);
            }
            let mut offset = 0;
            for &(b, src, size) in copies {
                encoder.copy_buffer_to_buffer(self.buf(b), src, &staging, offset, size);
                offset += size;
            }
            self.queue.submit([encoder.finish()]);
            let (tx, rx) = std::sync::mpsc::channel();
            staging
                .slice(..total)
                .map_async(wgpu::MapMode::Read, move |r| {
                    let _ = tx.send(r);
                });
            self.device
                .poll(wgpu::PollType::wait_indefinitely())
                .map_err(poll_error)?;
            match rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(GpuError::Readback(e.to_string())),
                Err(_) => return Err(GpuError::Readback("the map callback never ran".into())),
            }
            let data = staging
                .slice(..total)
                .get_mapped_range()
                .map_err(|e| GpuError::Readback(format!("{e:?}")))?
                .to_vec();
            staging.unmap();
            Ok(data)
        })?;
        self.check_lost()?;
        Ok(bytes)
    }

    fn submit_steps(&mut self, n: u64) -> Result<(), GpuError> {
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
                self.record_steps(&mut encoder, batch as u32);
                let index = self.queue.submit([encoder.finish()]);
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

    fn read_state(&self) -> Result<State, GpuError> {
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

    fn read_energies(&self) -> Result<Energies, GpuError> {
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

    fn read_solve_stats(&self) -> Result<Option<SolveStats>, GpuError> {
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
        let residual = if bb > 0.0 {
            (rr / bb).sqrt()
        } else if rr == 0.0 {
            0.0
        } else {
            f64::INFINITY
        };
        Ok(Some(SolveStats {
            iterations: self.iterations,
            residual,
        }))
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(
        name: &str,
        device_type: wgpu::DeviceType,
        backend: wgpu::Backend,
    ) -> wgpu::AdapterInfo {
        wgpu::AdapterInfo {
            name: name.into(),
            vendor: 0,
            device: 0,
            device_type,
            device_pci_bus_id: String::new(),
            driver: String::new(),
            driver_info: String::new(),
            backend,
            subgroup_min_size: 0,
            subgroup_max_size: 0,
            transient_saves_memory: None,
            limit_bucket: None,
        }
    }

    #[test]
    fn adapter_choice_follows_type_name_and_software_rules() {
        use wgpu::{Backend, DeviceType};
        let infos = [
            info("llvmpipe (LLVM 15)", DeviceType::Cpu, Backend::Vulkan),
            info("Intel UHD 770", DeviceType::IntegratedGpu, Backend::Vulkan),
            info("NVIDIA H100", DeviceType::DiscreteGpu, Backend::Gl),
            info("NVIDIA H100", DeviceType::DiscreteGpu, Backend::Vulkan),
        ];
        // Discrete first, native API before GL.
        assert_eq!(choose_adapter(&infos, None, false).unwrap(), 3);
        assert_eq!(choose_adapter(&infos, Some("intel"), false).unwrap(), 1);
        assert_eq!(choose_adapter(&infos, Some("LLVMPIPE"), true).unwrap(), 0);
        // Software rejected when not allowed, even when named.
        match choose_adapter(&infos, Some("llvmpipe"), false) {
            Err(GpuError::NoAdapter(m)) => assert!(m.contains("software"), "{m}"),
            other => panic!("{other:?}"),
        }
        match choose_adapter(&infos[..1], None, false) {
            Err(GpuError::NoAdapter(m)) => assert!(m.contains("llvmpipe"), "{m}"),
            other => panic!("{other:?}"),
        }
        match choose_adapter(&infos, Some("radeon"), true) {
            Err(GpuError::NoAdapter(m)) => assert!(m.contains("radeon"), "{m}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            choose_adapter(&[], None, true),
            Err(GpuError::NoAdapter(_))
        ));
    }

    #[test]
    fn grids_cover_every_item_tightly() {
        for max in [1, 2, 3, 7, 65535] {
            for count in [1, 255, 256, 257, 1000, 70_000, 10_000_000] {
                let [x, y] = grid(count, max);
                let groups = count.div_ceil(WORKGROUP_SIZE);
                if groups > max * max {
                    continue;
                }
                assert!(x <= max && y <= max, "{count}/{max}: {x} x {y}");
                assert!(
                    x * y >= groups && x * y - groups < y,
                    "{count}/{max}: {x} x {y}"
                );
            }
        }
    }

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
