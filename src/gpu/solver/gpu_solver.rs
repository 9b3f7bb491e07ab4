//! The GPU solver ([`GpuSolver`]): composes the device half (`Submitter`), the buffers
//! (`Buffers`), the engine of pipelines and records (`Engine`) and the recordings the
//! step program built once (`Program`), and runs them (docs/architecture.md; its reads are in
//! `reads.rs`). A whole step is a
//! fixed recording replayed `n` times into one compute pass; per-dispatch values (solver
//! iteration, Chebyshev weight, reduction slot, kernel mode) come from `Dispatch` records
//! selected by dynamic uniform offsets, and the simulation clock lives on the GPU, so
//! nothing is written or read between the steps of a batch.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::adjoint::{AdjointProgram, AdjointSetup};
use super::assemble::{assemble, Parts, Tangents};
use super::ddef::SolverDdef;
use super::program::Program;
use super::tangent::{self, TangentDirection};
use crate::config::{Config, Integrator};
use crate::gpu::device::adapter::{
    open_headless_device, AdapterSummary, HeadlessDevice, HeadlessOptions,
};
use crate::gpu::device::scoped;
use crate::gpu::device::submit::Submitter;
use crate::gpu::error::GpuError;
use crate::gpu::host::buffers::{Buf, Buffers};
use crate::gpu::host::engine::Engine;
use crate::gpu::host::params::TimeStep;
use crate::gpu::host::profile::{profile, KernelTime};
use crate::gpu::host::range;
use crate::gpu::host::recording::{dispatch_count, Op};
use crate::gpu::host::replay::Replay;
use crate::gpu::shader::Tuning;
use crate::measures::SolveStats;
use crate::model::{System, Topology};

/// Queue submissions and compute passes a solver has made so far, over all its work
/// (steps, readbacks, profiling; passes recorded into a caller's encoder are counted, the
/// caller's own submissions are not), so a benchmark can report what the host actually
/// does per step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct HostCounts {
    pub submissions: u64,
    pub compute_passes: u64,
    /// Submissions that read device memory back to the host.
    pub readbacks: u64,
}

/// Dispatches recorded per queue submission by [`Simulator::step`](crate::Simulator::step) (whole steps, at least
/// one): bounds the command buffer's host memory when steps have many solver sweeps.
const DISPATCHES_PER_SUBMIT: u64 = 8192;

/// The most dispatches one [`GpuSolver::record_steps`] call records (a step's times the
/// steps): wgpu keeps a pass's commands in host memory until the encoder is finished, so
/// a call of u32::MAX steps would grow without bound before any ran. More steps: several
/// calls, each encoder submitted before the next.
pub const MAX_RECORDED_DISPATCHES: u64 = 1 << 20;

/// Opens a device of its own (see [`GpuSolver::headless`]) with a device-lost callback
/// that the submitter checks.
pub(in crate::gpu) fn headless_host(
    options: &HeadlessOptions,
) -> Result<(Submitter, AdapterSummary), GpuError> {
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
    Ok((Submitter::new(device, queue, lost), adapter))
}

/// The GPU solver for one system.
pub struct GpuSolver {
    pub(super) host: Submitter,
    pub(super) summary: AdapterSummary,
    pub(super) integrator: Integrator,
    /// Solver iterations per step (summed over local-global's alternations).
    pub(super) iterations: u32,
    pub(super) n: u32,
    pub(super) spring_count: u32,
    /// The time step's one host copy.
    pub(super) dt: TimeStep,
    pub(super) steps_done: u64,
    pub(super) buffers: Buffers,
    pub(super) engine: Engine,
    pub(super) program: Program,
    /// Verlet: the force buffer holds the field forces at the current state (see
    /// `Program::prologue`).
    pub(super) field_fresh: AtomicBool,
    /// Stats of the last solve, saved before a diagnostic overwrites the spring blocks.
    pub(super) saved_stats: Option<(u64, SolveStats)>,
    /// `coulomb.method = "ddef"`: the plans of its device-resident DDEF.
    pub(super) ddef: Option<SolverDdef>,
    pub(super) tangents: Option<Tangents>,
    /// The last batch of steps submitted by [`Self::advance`], still possibly running:
    /// the next call waits for it, so at most two batches are in flight across calls.
    pub(super) in_flight: Option<wgpu::SubmissionIndex>,
    /// What updates of a single system's solver check against (`None` in a batch).
    pub(super) fixed: Option<Fixed>,
    /// The adjoint's reversed step and seeds (`solver::adjoint`).
    pub(super) adjoint: Option<AdjointProgram>,
}

impl GpuSolver {
    /// Builds the solver on the caller's device and queue (embedding). The device must
    /// offer the limits the kernels need (WebGPU defaults suffice for the kernels; buffer
    /// sizes grow with the system) or a [`GpuError::LimitExceeded`] names the shortfall;
    /// `queue` must be `device`'s own (another device's is a [`GpuError::Validation`]).
    pub fn new(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        system: &System,
        config: &Config,
    ) -> Result<Self, GpuError> {
        Self::new_tuned(device, queue, system, config, Tuning::default())
    }

    /// As [`Self::new`], with the kernel shapes of `tuning` (the same results; for
    /// measuring them, `msc bench --ddef-gather`).
    pub fn new_tuned(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        system: &System,
        config: &Config,
        tuning: Tuning,
    ) -> Result<Self, GpuError> {
        Self::check(system, config, None)?;
        Self::embedded(device, queue, system, config, None, tuning)
    }

    /// Picks an adapter itself (honouring WGPU_BACKEND and WGPU_ADAPTER_NAME) and opens a
    /// device with the adapter's own limits, so large meshes get the largest buffers the
    /// adapter allows.
    pub fn headless(
        system: &System,
        config: &Config,
        options: &HeadlessOptions,
    ) -> Result<Self, GpuError> {
        Self::opened(system, config, None, options)
    }

    /// The input checks, once, before anything is opened or created: the tangent
    /// directions, the configuration against the system, every value against f32's range.
    fn check(
        system: &System,
        config: &Config,
        directions: Option<&[TangentDirection]>,
    ) -> Result<(), GpuError> {
        if let Some(d) = directions {
            tangent::check(system, config, d)?;
        }
        if config
            .coulomb
            .method
            .ddef()
            .is_some_and(|d| d.grid == crate::config::DdefGrid::Delaunay)
        {
            return Err(super::ddef::delaunay_refused());
        }
        config.validate_for(system)?;
        range::check(system, config)
    }

    /// As [`Self::new`], with one forward tangent (dx, dv) per direction carried by every
    /// step, all starting at zero (see `solver::tangent`). The step then overwrites the
    /// forward right-hand side: read with [`Self::read_tangents`], not `solve_stats`.
    pub fn with_tangents(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        system: &System,
        config: &Config,
        directions: &[TangentDirection],
    ) -> Result<Self, GpuError> {
        Self::check(system, config, Some(directions))?;
        Self::embedded(
            device,
            queue,
            system,
            config,
            Some(directions),
            Tuning::default(),
        )
    }

    /// As [`Self::headless`], with tangents as [`Self::with_tangents`].
    pub fn headless_with_tangents(
        system: &System,
        config: &Config,
        directions: &[TangentDirection],
        options: &HeadlessOptions,
    ) -> Result<Self, GpuError> {
        Self::opened(system, config, Some(directions), options)
    }

    /// The solver with the adjoint's buffers and reversed step (`solver::adjoint`), on
    /// the caller's device and queue.
    pub(in crate::gpu) fn with_adjoint(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        system: &System,
        config: &Config,
        setup: &AdjointSetup,
    ) -> Result<Self, GpuError> {
        Self::check(system, config, None)?;
        let summary =
            AdapterSummary::new(&device.adapter_info(), &device.limits(), device.features());
        let host = Submitter::embedded(device, queue)?;
        Self::build(
            host,
            summary,
            system,
            config,
            None,
            Some(setup),
            Tuning::default(),
        )
    }

    /// As [`Self::with_adjoint`] on an adapter of its own.
    pub(in crate::gpu) fn headless_with_adjoint(
        system: &System,
        config: &Config,
        setup: &AdjointSetup,
        options: &HeadlessOptions,
    ) -> Result<Self, GpuError> {
        Self::check(system, config, None)?;
        let (host, adapter) = headless_host(options)?;
        Self::build(
            host,
            adapter,
            system,
            config,
            None,
            Some(setup),
            Tuning::default(),
        )
    }

    fn embedded(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        system: &System,
        config: &Config,
        directions: Option<&[TangentDirection]>,
        tuning: Tuning,
    ) -> Result<Self, GpuError> {
        let summary =
            AdapterSummary::new(&device.adapter_info(), &device.limits(), device.features());
        let host = Submitter::embedded(device, queue)?;
        Self::build(host, summary, system, config, directions, None, tuning)
    }

    fn opened(
        system: &System,
        config: &Config,
        directions: Option<&[TangentDirection]>,
        options: &HeadlessOptions,
    ) -> Result<Self, GpuError> {
        Self::opened_tuned(system, config, directions, options, Tuning::default())
    }

    /// As [`Self::headless_with_tangents`] (no directions: [`Self::headless`]), with the
    /// kernel shapes of `tuning`; its hidden `staged_on_cpu` keeps the DDEF kernels'
    /// staged paths on a CPU adapter, for tests of those paths on lavapipe.
    #[doc(hidden)]
    pub fn headless_tuned(
        system: &System,
        config: &Config,
        directions: Option<&[TangentDirection]>,
        options: &HeadlessOptions,
        tuning: Tuning,
    ) -> Result<Self, GpuError> {
        let directions = directions.filter(|d| !d.is_empty());
        Self::opened_tuned(system, config, directions, options, tuning)
    }

    fn opened_tuned(
        system: &System,
        config: &Config,
        directions: Option<&[TangentDirection]>,
        options: &HeadlessOptions,
        tuning: Tuning,
    ) -> Result<Self, GpuError> {
        // Input checks first, so a bad input fails before an adapter is opened.
        Self::check(system, config, directions)?;
        let (host, adapter) = headless_host(options)?;
        Self::build(host, adapter, system, config, directions, None, tuning)
    }

    /// Builds the solver of `system` under `config`, both checked.
    fn build(
        host: Submitter,
        summary: AdapterSummary,
        system: &System,
        config: &Config,
        directions: Option<&[TangentDirection]>,
        adjoint: Option<&AdjointSetup>,
        tuning: Tuning,
    ) -> Result<Self, GpuError> {
        let parts = assemble(&host, system, config, directions, adjoint, tuning)?;
        let (n, ns) = (system.len() as u32, system.springs().len() as u32);
        let mut solver = Self::from_parts(host, summary, parts, config, n, ns);
        solver.fixed = Some(Fixed::new(system, config));
        Ok(solver)
    }

    /// A solver over `parts` (one system's, or a batch's packed worlds) of `n` particle
    /// slots and `ns` springs.
    pub(in crate::gpu) fn from_parts(
        host: Submitter,
        summary: AdapterSummary,
        parts: Parts,
        config: &Config,
        n: u32,
        ns: u32,
    ) -> Self {
        Self {
            host,
            summary,
            integrator: config.integrator,
            // Per step, as the CPU reports it: local-global sums its alternations' solves
            // (at most 2^24: `Config::validate`).
            iterations: match config.integrator {
                Integrator::LocalGlobal => {
                    config.solver.iterations * config.local_global_iterations
                }
                _ => config.solver.iterations,
            },
            n,
            spring_count: ns,
            dt: parts.dt,
            steps_done: 0,
            buffers: parts.buffers,
            engine: parts.engine,
            program: parts.program,
            field_fresh: AtomicBool::new(false),
            saved_stats: None,
            ddef: parts.ddef,
            tangents: parts.tangents,
            in_flight: None,
            fixed: None,
            adjoint: parts.adjoint,
        }
    }

    /// Solver iterations per step (local-global: summed over its alternations).
    pub(in crate::gpu) fn iterations(&self) -> u32 {
        self.iterations
    }

    /// The recordings, for a batch's reads (`batch::worlds`).
    pub(in crate::gpu) fn program(&self) -> &Program {
        &self.program
    }

    pub fn adapter(&self) -> Option<&AdapterSummary> {
        Some(&self.summary)
    }
    pub fn device(&self) -> &wgpu::Device {
        &self.host.device
    }
    pub fn queue(&self) -> &wgpu::Queue {
        &self.host.queue
    }
    pub(super) fn buffer(&self, b: Buf) -> &wgpu::Buffer {
        self.buffers
            .get(b)
            .expect("the positions and velocities exist on every solver")
    }
    /// Positions as `vec4<f32>` (xyz, 1): usable as a vertex buffer (Float32x4, stride 16),
    /// a storage buffer and a copy source.
    pub fn positions_buffer(&self) -> &wgpu::Buffer {
        self.buffer(Buf::X)
    }
    /// Velocities as `vec4<f32>` (xyz, w unused): like the positions, usable as a vertex
    /// buffer (Float32x4, stride 16), e.g. to colour particles by speed.
    pub fn velocities_buffer(&self) -> &wgpu::Buffer {
        self.buffer(Buf::V)
    }
    /// Steps done (recorded, for [`Self::record_steps`]).
    pub fn steps_done(&self) -> u64 {
        self.steps_done
    }

    /// Dispatches recorded per step.
    pub fn dispatches_per_step(&self) -> usize {
        dispatch_count(&self.program.step)
    }

    /// Queue submissions and compute passes made so far (see [`HostCounts`]).
    pub fn host_counts(&self) -> HostCounts {
        let (submissions, compute_passes, readbacks) = self.host.counts();
        HostCounts {
            submissions,
            compute_passes,
            readbacks,
        }
    }

    /// Seconds the host has spent blocked so far waiting for an earlier batch of steps
    /// while submitting the next ([`Simulator::step`](crate::Simulator::step) keeps at most two in flight): what a
    /// benchmark subtracts from the time `step` takes to return to get the time spent
    /// recording and submitting.
    pub fn batch_wait_seconds(&self) -> f64 {
        self.host.wait_seconds()
    }

    pub(super) fn replay(&self) -> Replay<'_> {
        Replay {
            host: &self.host,
            engine: &self.engine,
            buffers: &self.buffers,
            field_fresh: &self.field_fresh,
        }
    }

    /// Records `n` steps into the caller's encoder (one compute pass). The solver counts
    /// them as done: the caller must submit the encoder before reading the state back (a
    /// state read before is a [`GpuError::Unsubmitted`]).
    /// Every configuration records (DDEF included: all its stages run on the device).
    /// More than [`MAX_RECORDED_DISPATCHES`] dispatches in one call is a
    /// [`GpuError::LimitExceeded`], with nothing recorded. The encoder must come from the
    /// solver's device: wgpu offers no way to ask an encoder for its device, and one from
    /// another device fails inside wgpu (a panic), not with a typed error.
    pub fn record_steps(
        &mut self,
        encoder: &mut wgpu::CommandEncoder,
        n: u32,
    ) -> Result<(), GpuError> {
        let per_step = self.dispatches_per_step().max(1) as u64;
        let needed = per_step * u64::from(n) + dispatch_count(&self.program.prologue) as u64;
        if needed > MAX_RECORDED_DISPATCHES {
            return Err(GpuError::LimitExceeded {
                what: format!(
                    "dispatches of one record_steps call ({per_step} a step: record at most \
                     {} steps per call, submitting each encoder)",
                    (MAX_RECORDED_DISPATCHES - dispatch_count(&self.program.prologue) as u64)
                        / per_step
                ),
                needed,
                limit: MAX_RECORDED_DISPATCHES,
            });
        }
        self.record_unchecked(encoder, n);
        Ok(())
    }

    fn record_unchecked(&mut self, encoder: &mut wgpu::CommandEncoder, n: u32) {
        if n == 0 {
            return;
        }
        let prologue = !self.field_fresh.swap(true, Ordering::Relaxed);
        let (engine, program) = (&self.engine, &self.program);
        self.host.pass(encoder, "msc steps", None, |pass| {
            if prologue {
                engine.replay(pass, &program.prologue);
            }
            for _ in 0..n {
                engine.replay(pass, &program.step);
            }
        });
        self.count_ddef(prologue, u64::from(n));
        self.steps_done += u64::from(n);
    }

    /// Counts the DDEF evaluations of `n` steps run (after the prologue, when it ran).
    fn count_ddef(&self, prologue: bool, n: u64) {
        if let Some(d) = &self.ddef {
            let first = prologue.then(|| self.ddef_per_step(&self.program.prologue));
            d.count(first.unwrap_or(0) + self.ddef_per_step(&self.program.step) * n);
        }
    }

    /// DDEF evaluations in `ops` (one `ddef_gather` each).
    fn ddef_per_step(&self, ops: &[Op]) -> u64 {
        let gather = crate::gpu::kernels::ddef::DDEF_GATHER.name;
        ops.iter()
            .filter(|op| self.engine.kernel_name(op) == gather)
            .count() as u64
    }

    /// Advances the state (and the tangents, if any) by `n` steps: batches of steps per
    /// submission, no buffer written and nothing read back.
    pub fn advance(&mut self, n: u64) -> Result<(), GpuError> {
        self.host.check_lost()?;
        let device = self.host.device.clone();
        scoped(&device, || {
            let mut remaining = n;
            let mut previous = self.in_flight.take();
            let per_submit = (DISPATCHES_PER_SUBMIT / self.program.step.len().max(1) as u64)
                .clamp(1, u64::from(u32::MAX));
            while remaining > 0 {
                let batch = remaining.min(per_submit);
                let mut encoder = self.host.encoder("msc step batch");
                self.record_unchecked(&mut encoder, batch as u32);
                let index = self.host.submit(encoder);
                // Keep at most two batches in flight.
                if let Some(p) = previous.take() {
                    self.host.wait(p)?;
                }
                previous = Some(index);
                remaining -= batch;
            }
            self.in_flight = previous;
            Ok(())
        })?;
        self.host.check_lost()
    }

    /// Whether [`Self::record_steps`] can record steps into a caller's encoder: always,
    /// DDEF included, since its far field runs on the device.
    #[deprecated(note = "always true: every scene can be recorded")]
    pub fn supports_recording(&self) -> bool {
        true
    }

    /// Advances `steps` steps with a timestamp query around every dispatch and returns
    /// the GPU time per kernel, in the order the kernels first run. Each dispatch gets its
    /// own compute pass (timestamps inside passes need an extra feature), so the total is
    /// a little above an unprofiled run's. Needs the adapter's TIMESTAMP_QUERY feature
    /// (requested by [`Self::headless`] when available).
    pub fn profile(&mut self, steps: u32) -> Result<Vec<KernelTime>, GpuError> {
        if !self
            .host
            .device
            .features()
            .contains(wgpu::Features::TIMESTAMP_QUERY)
        {
            return Err(GpuError::Unsupported(format!(
                "profiling needs timestamp queries, which {} does not offer",
                self.summary.name
            )));
        }
        self.host.check_lost()?;
        if steps == 0 {
            // Nothing runs, so Verlet's prologue stays due for the next step.
            return Ok(Vec::new());
        }
        let mut first = self.program.step.clone();
        let prologue = !self.field_fresh.swap(true, Ordering::Relaxed);
        if prologue {
            // Verlet's first field evaluation, profiled with the first step.
            first.splice(0..0, self.program.prologue.iter().copied());
        }
        let times = profile(
            &self.host,
            &self.engine,
            &first,
            &self.program.step,
            steps,
            &mut self.steps_done,
        )?;
        self.count_ddef(prologue, u64::from(steps));
        self.host.check_lost()?;
        Ok(times)
    }

    /// Runs `ops` (if any), then reads the byte ranges `copies` back (one submission).
    pub(in crate::gpu) fn run_and_read(
        &self,
        ops: &[Op],
        copies: &[(Buf, u64, u64)],
    ) -> Result<Vec<u8>, GpuError> {
        self.replay().read(ops, copies)
    }
}

/// What a single system's solver keeps from the system and configuration it was built
/// with, to check updates against.
pub(super) struct Fixed {
    pub(super) topology: Topology,
    pub(super) config: Config,
    /// The charges now (a written state's pairs are checked with them).
    pub(super) charges: Vec<f64>,
}

impl Fixed {
    pub(super) fn new(system: &System, config: &Config) -> Self {
        Self {
            topology: Topology::of(system),
            config: config.clone(),
            charges: system.charges().to_vec(),
        }
    }
}
