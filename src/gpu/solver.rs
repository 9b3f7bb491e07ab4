//! The GPU solver ([`GpuSolver`]): composes the device half (`Submitter`), the buffers
//! (`Buffers`), the engine of pipelines and records (`Engine`) and the recordings the
//! step program built once (`Program`), and runs them (DESIGN section 6). A whole step is a
//! fixed recording replayed `n` times into one compute pass; per-dispatch values (solver
//! iteration, Chebyshev weight, reduction slot, kernel mode) come from `Dispatch` records
//! selected by dynamic uniform offsets, and the simulation clock lives on the GPU, so
//! nothing is written or read between the steps of a batch.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use glam::{DMat3, DVec3};

use super::adapter::{open_headless_device, AdapterSummary, HeadlessDevice, HeadlessOptions};
use super::assemble::{assemble, Parts, Tangents};
use super::buffers::{Buf, Buffers};
use super::ddef_stage::SolverDdef;
use super::engine::Engine;
use super::error::scoped;
use super::layout::{SLOT_ENERGY, SLOT_RESIDUAL};
use super::params::TimeStep;
use super::profile::{profile, KernelTime};
use super::program::Program;
use super::readback;
use super::recording::{dispatch_count, Op};
use super::submit::{Replay, Submitter};
use super::tangent::{self, TangentDirection, TangentVectors};
use super::GpuError;
use crate::config::{Config, Integrator};

mod update;
use crate::model::{State, System};
use crate::sim::{Energies, SolveStats};

/// Queue submissions and compute passes a solver has made so far, over all its work
/// (steps, readbacks, profiling; passes recorded into a caller's encoder are counted, the
/// caller's own submissions are not), so a benchmark can report what the host actually
/// does per step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct HostCounts {
    pub submissions: u64,
    pub compute_passes: u64,
}

/// Dispatches recorded per queue submission by [`Simulator::step`](crate::Simulator::step) (whole steps, at least
/// one): bounds the command buffer's host memory when steps have many solver sweeps.
const DISPATCHES_PER_SUBMIT: u64 = 8192;

/// Opens a device of its own (see [`GpuSolver::headless`]) with a device-lost callback
/// that the submitter checks.
pub(super) fn headless_host(
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
    host: Submitter,
    summary: AdapterSummary,
    integrator: Integrator,
    /// Solver iterations per step (summed over local-global's alternations).
    iterations: u32,
    n: u32,
    spring_count: u32,
    /// The time step's one host copy.
    dt: TimeStep,
    steps_done: u64,
    buffers: Buffers,
    engine: Engine,
    program: Program,
    /// Verlet: the force buffer holds the field forces at the current state (see
    /// `Program::prologue`).
    field_fresh: AtomicBool,
    /// Stats of the last solve, saved before a diagnostic overwrites the spring blocks.
    saved_stats: Option<(u64, SolveStats)>,
    /// `coulomb.method = "ddef"`: the host stage's state and the DDEF kernels.
    ddef: Option<SolverDdef>,
    tangents: Option<Tangents>,
    /// The last batch of steps submitted by [`Self::advance`], still possibly running:
    /// the next call waits for it, so at most two batches are in flight across calls.
    in_flight: Option<wgpu::SubmissionIndex>,
    /// What updates of a single system's solver check against (`None` in a batch).
    fixed: Option<update::Fixed>,
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
        Self::embedded(device, queue, system, config, None)
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

    /// As [`Self::new`], with one forward tangent (dx, dv) per direction carried by every
    /// step, all starting at zero (see `gpu::tangent`). The step then overwrites the
    /// forward right-hand side: read with [`Self::read_tangents`], not `solve_stats`.
    pub fn with_tangents(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        system: &System,
        config: &Config,
        directions: &[TangentDirection],
    ) -> Result<Self, GpuError> {
        tangent::check(system, config, directions)?;
        Self::embedded(device, queue, system, config, Some(directions))
    }

    /// As [`Self::headless`], with tangents as [`Self::with_tangents`].
    pub fn headless_with_tangents(
        system: &System,
        config: &Config,
        directions: &[TangentDirection],
        options: &HeadlessOptions,
    ) -> Result<Self, GpuError> {
        // Refuse before opening a device.
        tangent::check(system, config, directions)?;
        Self::opened(system, config, Some(directions), options)
    }

    fn embedded(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        system: &System,
        config: &Config,
        directions: Option<&[TangentDirection]>,
    ) -> Result<Self, GpuError> {
        let summary =
            AdapterSummary::new(&device.adapter_info(), &device.limits(), device.features());
        let host = Submitter::new(device.clone(), queue.clone(), Arc::new(Mutex::new(None)));
        Self::build(host, summary, system, config, directions)
    }

    fn opened(
        system: &System,
        config: &Config,
        directions: Option<&[TangentDirection]>,
        options: &HeadlessOptions,
    ) -> Result<Self, GpuError> {
        // Input checks first, so a bad input fails before an adapter is opened.
        config.validate_for(system)?;
        super::range::check(system, config)?;
        let (host, adapter) = headless_host(options)?;
        Self::build(host, adapter, system, config, directions)
    }

    fn build(
        host: Submitter,
        summary: AdapterSummary,
        system: &System,
        config: &Config,
        directions: Option<&[TangentDirection]>,
    ) -> Result<Self, GpuError> {
        let parts = assemble(&host, system, config, directions)?;
        let (n, ns) = (system.len() as u32, system.springs().len() as u32);
        let mut solver = Self::from_parts(host, summary, parts, config, n, ns);
        solver.fixed = Some(update::Fixed::new(system, config));
        Ok(solver)
    }

    /// A solver over `parts` (one system's, or a batch's packed worlds) of `n` particle
    /// slots and `ns` springs.
    pub(super) fn from_parts(
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
            // Per step, as the CPU reports it: local-global sums its alternations' solves.
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
        }
    }

    /// Solver iterations per step (local-global: summed over its alternations).
    pub(super) fn iterations(&self) -> u32 {
        self.iterations
    }

    /// The recordings, for a batch's reads (`gpu::worlds`).
    pub(super) fn program(&self) -> &Program {
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
    fn buffer(&self, b: Buf) -> &wgpu::Buffer {
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

    /// Dispatches recorded per step (a DDEF evaluation counts its three kernels).
    pub fn dispatches_per_step(&self) -> usize {
        dispatch_count(&self.program.step)
    }

    /// Queue submissions and compute passes made so far (see [`HostCounts`]).
    pub fn host_counts(&self) -> HostCounts {
        let (submissions, compute_passes) = self.host.counts();
        HostCounts {
            submissions,
            compute_passes,
        }
    }

    /// Seconds the host has spent blocked so far waiting for an earlier batch of steps
    /// while submitting the next ([`Simulator::step`](crate::Simulator::step) keeps at most two in flight): what a
    /// benchmark subtracts from the time `step` takes to return to get the time spent
    /// recording and submitting.
    pub fn batch_wait_seconds(&self) -> f64 {
        self.host.wait_seconds()
    }

    fn replay(&self) -> Replay<'_> {
        Replay {
            host: &self.host,
            engine: &self.engine,
            buffers: &self.buffers,
            field_fresh: &self.field_fresh,
        }
    }

    /// Records `n` steps into the caller's encoder (one compute pass). The solver counts
    /// them as done: the caller must submit the encoder before reading the state back.
    ///
    /// With `coulomb.method = "ddef"` it records nothing and returns
    /// [`GpuError::Unsupported`] (see [`Self::supports_recording`]): each DDEF force
    /// evaluation needs a host stage on the current positions, which recording into a
    /// caller's encoder cannot run; use [`Simulator::step`](crate::Simulator::step) there.
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
        let prologue = !self.field_fresh.swap(true, Ordering::Relaxed);
        let (engine, program) = (&self.engine, &self.program);
        self.host.pass(encoder, "msc steps", None, |pass| {
            if prologue {
                engine.replay(pass, &program.prologue, None);
            }
            for _ in 0..n {
                engine.replay(pass, &program.step, None);
            }
        });
        self.steps_done += u64::from(n);
    }

    /// Advances the state (and the tangents, if any) by `n` steps: batches of steps per
    /// submission, or with DDEF one step at a time (each evaluation needs its host stage).
    pub fn advance(&mut self, n: u64) -> Result<(), GpuError> {
        if self.ddef.is_some() {
            return self.ddef_steps(n);
        }
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

    /// `n` steps with DDEF forces, one at a time (each needs its host stage).
    fn ddef_steps(&mut self, n: u64) -> Result<(), GpuError> {
        self.host.check_lost()?;
        let replay = Replay {
            host: &self.host,
            engine: &self.engine,
            buffers: &self.buffers,
            field_fresh: &self.field_fresh,
        };
        if let Some(ddef) = self.ddef.as_mut() {
            let moves = self.integrator != Integrator::Verlet;
            ddef.steps(&replay, &self.program, n, moves, &mut self.steps_done)?;
        }
        self.host.check_lost()
    }

    /// Grids built so far by the DDEF force evaluations (`None` unless `coulomb.method =
    /// "ddef"`), as the CPU reference's [`crate::ddef::DdefSolver::rebuilds`].
    pub fn ddef_rebuilds(&self) -> Option<u64> {
        self.ddef.as_ref().map(SolverDdef::rebuilds)
    }

    /// DDEF force evaluations so far (host stages run; `None` unless DDEF).
    pub fn ddef_evaluations(&self) -> Option<u64> {
        self.ddef.as_ref().map(SolverDdef::evaluations)
    }

    /// Seconds the DDEF host stages have spent so far once the charged positions were
    /// back (grid builds, point location, lists, upload; `None` unless DDEF): the part of
    /// a DDEF step that runs on the CPU.
    pub fn ddef_host_seconds(&self) -> Option<f64> {
        self.ddef.as_ref().map(SolverDdef::host_seconds)
    }

    /// Whether [`Self::record_steps`] can record steps into a caller's encoder: not with
    /// `coulomb.method = "ddef"`, whose every force evaluation needs a host stage (point
    /// location, lists) on the current positions.
    pub fn supports_recording(&self) -> bool {
        self.ddef.is_none()
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
        if self.ddef.is_some() {
            return Err(GpuError::Unsupported(
                "profiling with coulomb.method = \"ddef\" (its steps pause for a host stage)"
                    .into(),
            ));
        }
        self.host.check_lost()?;
        let mut first = self.program.step.clone();
        if !self.field_fresh.swap(true, Ordering::Relaxed) {
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
        self.host.check_lost()?;
        Ok(times)
    }

    /// Runs `ops` (if any), then reads the byte ranges `copies` back (one submission).
    pub(super) fn run_and_read(
        &self,
        ops: &[Op],
        copies: &[(Buf, u64, u64)],
    ) -> Result<Vec<u8>, GpuError> {
        let ddef = self.ddef.as_ref().map(SolverDdef::kernels);
        self.replay().read(ops, ddef, copies)
    }

    /// Diagnostics: per spring at the current state, the force on particle i (elastic and
    /// damping, as the explicit integrators use it) and the block W_k of A. It overwrites
    /// the step's blocks, so the last solve's stats are saved first for `solve_stats`.
    /// Refused for `local_global`, whose constant matrix lives in the same buffer.
    pub fn spring_blocks(&mut self) -> Result<Vec<(DVec3, DMat3)>, GpuError> {
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
        let data = self.run_and_read(&self.program.springs, &[(Buf::Sf, 0, 32 * u64::from(ns))])?;
        Ok(readback::spring_blocks(&data))
    }

    /// Diagnostics: Coulomb + external + gravity force on every particle at the current
    /// state and time, and each particle's Coulomb potential sum_j k_c q_i q_j / r_soft.
    /// With DDEF the Coulomb part is the DDEF force (w is then 0: no potential).
    pub fn field_forces(&mut self) -> Result<(Vec<DVec3>, Vec<f64>), GpuError> {
        let mut ops = self.program.field.as_slice();
        if self.ddef.is_some() {
            // Runs the host stage first when the lists are not current.
            let replay = Replay {
                host: &self.host,
                engine: &self.engine,
                buffers: &self.buffers,
                field_fresh: &self.field_fresh,
            };
            if let Some(d) = self.ddef.as_mut() {
                d.run(&replay, &self.program.field, false)?;
            }
            ops = &[];
        }
        let data = self.run_and_read(ops, &[(Buf::Force, 0, 16 * u64::from(self.n))])?;
        Ok((readback::vectors(&data), readback::w_components(&data)))
    }

    /// The state after the steps done (one submission).
    pub fn read_state(&self) -> Result<State, GpuError> {
        let bytes = 16 * u64::from(self.n);
        let data = self.run_and_read(&[], &[(Buf::X, 0, bytes), (Buf::V, 0, bytes)])?;
        let mut x = readback::vectors(&data);
        let v = x.split_off(self.n as usize);
        Ok(State {
            x,
            v,
            t: self.dt.time_at(self.steps_done),
            step: self.steps_done,
        })
    }

    /// The energy terms of the current state (reduced on the GPU; six numbers come back).
    pub fn read_energies(&self) -> Result<Energies, GpuError> {
        let data = self.run_and_read(
            &self.program.energy,
            &[(Buf::Scalars, 16 * u64::from(SLOT_ENERGY), 32)],
        )?;
        Ok(readback::energies(&data))
    }

    /// The last step's linear solve: its iterations and final residual (`None` for
    /// explicit integrators and before the first step).
    pub fn read_solve_stats(&self) -> Result<Option<SolveStats>, GpuError> {
        if !self.integrator.is_implicit() || self.steps_done == 0 {
            return Ok(None);
        }
        if let Some((step, stats)) = self.saved_stats {
            if step == self.steps_done {
                return Ok(Some(stats));
            }
        }
        let residual = self.read_residual(&self.program.residual)?;
        Ok(Some(SolveStats {
            iterations: self.iterations,
            residual,
        }))
    }

    fn read_residual(&self, ops: &[Op]) -> Result<f64, GpuError> {
        let data = self.run_and_read(ops, &[(Buf::Scalars, 16 * u64::from(SLOT_RESIDUAL), 16)])?;
        Ok(readback::relative_residual(&data))
    }

    /// Tangent directions the step carries (0 without tangents).
    pub fn tangent_directions(&self) -> usize {
        self.tangents.as_ref().map_or(0, |t| t.directions)
    }

    /// Solver iterations per step of each direction's tangent solves (`None` without
    /// tangents or when they solve nothing: the explicit integrators).
    pub fn tangent_solve_iterations(&self) -> Option<u32> {
        match &self.tangents {
            Some(t) if !t.residual.is_empty() => Some(self.iterations),
            _ => None,
        }
    }

    /// The state and one tangent (dx, dv) per direction (one submission).
    pub fn read_tangents(&self) -> Result<(State, Vec<TangentVectors>), GpuError> {
        let nd = self.tangent_directions();
        let n = self.n as usize;
        let bytes = 16 * n as u64;
        let data = self.run_and_read(
            &[],
            &[
                (Buf::X, 0, bytes),
                (Buf::V, 0, bytes),
                (Buf::TanState, 0, 2 * bytes * nd as u64),
            ],
        )?;
        let all = readback::vectors(&data);
        let range = |a: usize| all[a..a + n].to_vec();
        let state = State {
            x: range(0),
            v: range(n),
            t: self.dt.time_at(self.steps_done),
            step: self.steps_done,
        };
        let tangents = (0..nd)
            .map(|d| TangentVectors {
                dx: range(2 * n + 2 * n * d),
                dv: range(3 * n + 2 * n * d),
            })
            .collect();
        Ok((state, tangents))
    }

    /// The relative residual |b - A dv'| / |b| (free rows) of the last direction's tangent
    /// solve in the last step, with the solver's fixed iteration count (`None` without
    /// tangents or when they solve nothing).
    pub fn last_tangent_solve(&self) -> Result<Option<SolveStats>, GpuError> {
        let Some(t) = self.tangents.as_ref().filter(|t| !t.residual.is_empty()) else {
            return Ok(None);
        };
        Ok(Some(SolveStats {
            iterations: self.iterations,
            residual: self.read_residual(&t.residual)?,
        }))
    }
}
