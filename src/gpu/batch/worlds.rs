//! Batched worlds ([`GpuWorlds`]): W systems packed into one set of buffers, block-
//! diagonally (each world's particles, springs and charged particles a contiguous range,
//! padded to whole workgroups and Coulomb tiles), stepped together by the same
//! dispatches. Per-world parameters (time step, softening, fields, external charges,
//! gravity, relaxation, Chebyshev weights) come from a world table; reductions are
//! segmented by world; Coulomb sums run only within a world.

use std::ops::Range;

pub use super::check::MAX_BATCH_WORLDS;
use super::check::{check, check_world, in_named_world, in_world};
pub use super::key::BatchKey;
use super::pack::{batch_shape, pack, Packed, Span};
use crate::config::{Config, Integrator, SolverMethod};
use crate::cpu::solvers::chebyshev_weights;
use crate::gpu::device::adapter::{AdapterSummary, HeadlessOptions};
use crate::gpu::device::readback;
use crate::gpu::device::scoped;
use crate::gpu::device::submit::Submitter;
use crate::gpu::error::GpuError;
use crate::gpu::host::adjacency;
use crate::gpu::host::buffers::{local_global_init, Buf, Buffers, Contents, Shape};
use crate::gpu::host::engine::Engine;
use crate::gpu::host::limits::{check_cpu_loop_budget, check_limits, grid};
use crate::gpu::host::params::{specialization, world, TimeStep};
use crate::gpu::host::profile::KernelTime;
use crate::gpu::host::recorder::{chebyshev_rho, Recorder};
use crate::gpu::host::recording::Op;
use crate::gpu::kernels::ddef::ddef_grids_fit;
use crate::gpu::layout::{
    Params, World, MAX_STORAGE_BUFFERS, SCALAR_SLOTS, SLOT_ENERGY, SLOT_RESIDUAL, TILE,
};
use crate::gpu::solver::assemble::{is_cpu, Parts};
use crate::gpu::solver::ddef::{SolverDdef, WorldPlan};
use crate::gpu::solver::gpu_solver::{headless_host, GpuSolver};
use crate::gpu::solver::program::{self, NoHooks};
use crate::measures::{Energies, SolveStats};
use crate::model::{State, System};

/// Bytes of buffers one batch allocates at most ([`GpuWorlds::fitting`]): wgpu cannot
/// tell how much device memory is free, so a batch keeps well within what any GPU has.
pub const BATCH_BYTES: u64 = 1 << 30;

/// W worlds stepped together on one device: one packed set of buffers, one recording of
/// a step, replayed for all (see the module documentation).
pub struct GpuWorlds {
    /// The solver over the packed system (its recordings are the batch's).
    solver: GpuSolver,
    spans: Vec<Span>,
    dts: Vec<TimeStep>,
    implicit: bool,
}

impl GpuWorlds {
    /// Packs `worlds` on the caller's device and queue. All must have the same
    /// [`BatchKey`]; the device must offer the limits the packed buffers need (and two
    /// storage buffers per stage beyond one system's, for the world table).
    pub fn new(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        worlds: &[(&System, &Config)],
    ) -> Result<Self, GpuError> {
        Self::new_named(device, queue, worlds, &[])
    }

    /// As [`Self::new`], with a name for each world that its errors give after its index
    /// (`names[w]`, e.g. "run 'c'": "world 2 (run 'c'), ..."; `None` or missing: the
    /// index alone).
    pub fn new_named(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        worlds: &[(&System, &Config)],
        names: &[Option<String>],
    ) -> Result<Self, GpuError> {
        let key = check(worlds, names)?;
        let summary =
            AdapterSummary::new(&device.adapter_info(), &device.limits(), device.features());
        let host = Submitter::embedded(device, queue)?;
        Self::build(host, summary, worlds, names, key)
    }

    /// As [`Self::new`] on a device of its own (see [`GpuSolver::headless`]).
    pub fn headless(
        worlds: &[(&System, &Config)],
        options: &HeadlessOptions,
    ) -> Result<Self, GpuError> {
        Self::headless_named(worlds, &[], options)
    }

    /// As [`Self::headless`], with names for the worlds' errors (see [`Self::new_named`]).
    pub fn headless_named(
        worlds: &[(&System, &Config)],
        names: &[Option<String>],
        options: &HeadlessOptions,
    ) -> Result<Self, GpuError> {
        // Input checks first, so a bad input fails before an adapter is opened.
        let key = check(worlds, names)?;
        let (host, summary) = headless_host(options)?;
        Self::build(host, summary, worlds, names, key)
    }

    /// `e`, an error of world `w` of a batch (named `name`, e.g. "scene 'cloth'"), naming
    /// the world as the batch's own errors do: for callers that check a world without
    /// [`GpuWorlds`] (the CPU reference's worlds).
    pub fn in_world(w: usize, name: Option<&str>, e: GpuError) -> GpuError {
        in_named_world(w, name, e)
    }

    /// The checks [`Self::new`] applies to each world on its own, without a device: its
    /// configuration for its system, and every value within f32 range. A world that
    /// fails them fails any batch it is in.
    pub fn check_world(system: &System, config: &Config) -> Result<(), GpuError> {
        check_world(system, config)
    }

    /// How many of `worlds` (taken in order from the first) fit one batch on a device
    /// with `limits`: every limit [`Self::new`] checks met (so `new` never refuses a
    /// batch this accepts for its limits; DDEF's dispatch grids as a GPU's or a CPU
    /// adapter's, whichever needs more), all buffers within [`BATCH_BYTES`], at most
    /// [`MAX_BATCH_WORLDS`]. 0 when not even the first world fits alone: `new` would refuse it,
    /// naming the limit.
    pub fn fitting(limits: &wgpu::Limits, worlds: &[(&System, &Config)]) -> usize {
        let Some((_, config)) = worlds.first() else {
            return 0;
        };
        let Ok(key) = BatchKey::of(config) else {
            return 1;
        };
        // The DDEF plans of all the worlds, once (a world that cannot be planned fails
        // when its batch is built).
        let plans = if key.ddef {
            match worlds
                .iter()
                .map(|(s, c)| WorldPlan::of(s, c))
                .collect::<Result<Vec<_>, _>>()
            {
                Ok(p) => p.into_iter().flatten().collect(),
                Err(_) => return 1,
            }
        } else {
            Vec::new()
        };
        let max = limits.max_compute_workgroups_per_dimension;
        let fits = |k: usize| {
            let mut shape = batch_shape(&worlds[..k], config, key.coulomb);
            let mut grids = true;
            if key.ddef {
                // Sizes as a CPU adapter lays them out (more far-field chunks); the grids
                // of both layouts, a GPU's gather with up to two workgroups an item (its
                // `auto` shape: 128 or 256 lanes), a CPU adapter's with one.
                let (state, tables) = batch_ddef(&worlds[..k], plans[..k].to_vec(), true);
                shape.ddef = state.sizes(tables.len());
                let (gpu, _) = batch_ddef(&worlds[..k], plans[..k].to_vec(), false);
                let nc = shape.nc as u32;
                grids = ddef_grids_fit(&state.layout, nc, 1, max)
                    && ddef_grids_fit(&gpu.layout, nc, 2, max);
            }
            let total: u64 = shape.created().map(|(_, s)| s.bytes).sum();
            grids && check_batch_limits(limits, &shape).is_ok() && total <= BATCH_BYTES
        };
        if !fits(1) {
            return 0;
        }
        // The largest prefix that fits (sizes grow with k): binary search.
        let (mut lo, mut hi) = (1, worlds.len().min(MAX_BATCH_WORLDS));
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if fits(mid) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        lo
    }

    /// Builds the batch of `worlds`, already checked (`key`: theirs).
    fn build(
        host: Submitter,
        summary: AdapterSummary,
        worlds: &[(&System, &Config)],
        names: &[Option<String>],
        key: BatchKey,
    ) -> Result<Self, GpuError> {
        let config = worlds[0].1;
        let device = host.device.clone();
        let limits = device.limits();
        let mut shape = batch_shape(worlds, config, key.coulomb);
        for (w, (system, config)) in worlds.iter().enumerate() {
            let charged = system.charged_count() as u64;
            check_cpu_loop_budget(is_cpu(&device), config, charged)
                .map_err(|e| in_world(w, names, e))?;
        }
        let ddef = if key.ddef {
            let plans = (worlds.iter().enumerate())
                .map(|(w, (s, c))| WorldPlan::of(s, c).map_err(|e| in_world(w, names, e)))
                .collect::<Result<Vec<_>, _>>()?
                .into_iter()
                .flatten()
                .collect();
            let (state, tables) = batch_ddef(worlds, plans, is_cpu(&device));
            shape.ddef = state.sizes(tables.len());
            Some((state, tables))
        } else {
            None
        };
        check_batch_limits(&limits, &shape)?;
        let packed = pack(worlds, key.coulomb)?;
        let dts: Vec<TimeStep> = worlds.iter().map(|(_, c)| TimeStep::new(c)).collect();
        let n = packed.system.len() as u32;
        let ns = packed.system.springs().len() as u32;
        let wg = grid(n, limits.max_compute_workgroups_per_dimension);
        let parts = scoped(&device, || {
            assemble(
                &device,
                worlds,
                names,
                key,
                &packed,
                &dts,
                shape,
                wg[0] * wg[1],
                ddef,
            )
        })?;
        let solver = GpuSolver::from_parts(host, summary, parts, config, n, ns);
        Ok(Self {
            solver,
            spans: packed.spans,
            dts,
            implicit: config.integrator.is_implicit(),
        })
    }

    pub fn adapter(&self) -> Option<&AdapterSummary> {
        self.solver.adapter()
    }

    pub fn device(&self) -> &wgpu::Device {
        self.solver.device()
    }

    pub fn queue(&self) -> &wgpu::Queue {
        self.solver.queue()
    }

    /// Number of worlds.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Advances every world `n` steps (batches of steps per submission, as
    /// [`GpuSolver::advance`]).
    pub fn advance(&mut self, n: u64) -> Result<(), GpuError> {
        self.solver.advance(n)
    }

    /// Records `n` steps of every world into the caller's encoder (one compute pass); see
    /// [`GpuSolver::record_steps`].
    pub fn record_steps(
        &mut self,
        encoder: &mut wgpu::CommandEncoder,
        n: u32,
    ) -> Result<(), GpuError> {
        self.solver.record_steps(encoder, n)
    }

    pub fn steps_done(&self) -> u64 {
        self.solver.steps_done()
    }

    /// Advances every world `steps` steps with a timestamp around every dispatch: GPU time
    /// per kernel (see [`GpuSolver::profile`]).
    pub fn profile(&mut self, steps: u32) -> Result<Vec<KernelTime>, GpuError> {
        self.solver.profile(steps)
    }

    /// Dispatches recorded per step (the same for 1 world or W).
    pub fn dispatches_per_step(&self) -> usize {
        self.solver.dispatches_per_step()
    }

    /// Every world's state (one readback; with DDEF a loop-budget flag raised since the
    /// last re-plan is an error, as for one solver's state).
    pub fn read_states(&self) -> Result<Vec<State>, GpuError> {
        let n = self.spans.last().map_or(0, |s| s.particles.end);
        let bytes = 16 * u64::from(n);
        let data = self
            .solver
            .read_at_step(&[(Buf::X, 0, bytes), (Buf::V, 0, bytes)])?;
        let mut x = readback::vectors(&data);
        let v = x.split_off(n as usize);
        let step = self.steps_done();
        Ok(self
            .spans
            .iter()
            .zip(&self.dts)
            .map(|(s, dt)| {
                let r = s.particles.start as usize..s.particles.end as usize;
                State {
                    x: x[r.clone()].to_vec(),
                    v: v[r].to_vec(),
                    t: dt.time_at(step),
                    step,
                }
            })
            .collect())
    }

    /// The scalar slots of every world after running `ops` (one readback).
    fn scalars(&self, ops: &[Op]) -> Result<Vec<u8>, GpuError> {
        let bytes = 16 * u64::from(SCALAR_SLOTS) * self.len() as u64;
        self.solver.run_and_read(ops, &[(Buf::Scalars, 0, bytes)])
    }

    /// Bytes of world w's scalar `slot` (and `count` slots after it) in `data`.
    fn slot(data: &[u8], w: usize, slot: u32, count: u32) -> &[u8] {
        let at = 16 * (w * SCALAR_SLOTS as usize + slot as usize);
        &data[at..at + 16 * count as usize]
    }

    /// Every world's energies (one reduction and one readback of W x 8 numbers); with
    /// DDEF the drifted worlds re-plan here, as one solver does.
    pub fn read_energies(&self) -> Result<Vec<Energies>, GpuError> {
        let energy = self.solver.program().energy.clone();
        let data = match self.solver.ddef_records_with(&energy)? {
            Some(data) => data,
            None => self.scalars(&energy)?,
        };
        Ok((0..self.len())
            .map(|w| readback::energies(Self::slot(&data, w, SLOT_ENERGY, 2)))
            .collect())
    }

    /// World `w`'s DDEF plans made and force evaluations so far (`None` unless the
    /// batch runs DDEF), as one solver reports them; a typed error when the batch has no
    /// world `w`.
    pub fn ddef_counts(&self, w: usize) -> Result<Option<crate::measures::DdefCounts>, GpuError> {
        self.world_range(w)?;
        Ok(self
            .solver
            .ddef_world_counts(w)
            .map(|(rebuilds, evaluations)| crate::measures::DdefCounts {
                rebuilds,
                evaluations,
            }))
    }

    /// Every world's last linear solve (implicit integrators; `None` otherwise and before
    /// the first step).
    pub fn read_solve_stats(&self) -> Result<Vec<Option<SolveStats>>, GpuError> {
        if !self.implicit || self.steps_done() == 0 {
            return Ok(vec![None; self.len()]);
        }
        let data = self.scalars(&self.solver.program().residual)?;
        let iterations = self.solver.iterations();
        Ok((0..self.len())
            .map(|w| {
                Some(SolveStats {
                    iterations,
                    residual: readback::relative_residual(Self::slot(&data, w, SLOT_RESIDUAL, 1)),
                })
            })
            .collect())
    }

    /// World `w`'s particles in the position buffer (elements of 16 bytes), or a typed
    /// error when the batch has no world `w`.
    pub fn world_range(&self, w: usize) -> Result<Range<u64>, GpuError> {
        self.spans
            .get(w)
            .map(|s| u64::from(s.particles.start)..u64::from(s.particles.end))
            .ok_or_else(|| GpuError::Worlds(format!("world {w} of {} asked for", self.len())))
    }

    /// The positions of every world as `vec4<f32>` (xyz, 1): a vertex buffer (Float32x4,
    /// stride 16); world w's are the elements [`Self::world_range`]. Padding between
    /// worlds sits at the origin.
    pub fn positions_buffer(&self) -> &wgpu::Buffer {
        self.solver.positions_buffer()
    }

    /// The velocities, laid out as the positions.
    pub fn velocities_buffer(&self) -> &wgpu::Buffer {
        self.solver.velocities_buffer()
    }
}

/// The limits of one system's solver, and those the world table adds.
fn check_batch_limits(limits: &wgpu::Limits, shape: &Shape) -> Result<(), GpuError> {
    check_limits(limits, shape)?;
    let need = |what: &str, needed: u32, limit: u32| {
        if needed > limit {
            Err(GpuError::LimitExceeded {
                what: format!("{what} (a batch of worlds)"),
                needed: needed.into(),
                limit: limit.into(),
            })
        } else {
            Ok(())
        }
    };
    need(
        "storage buffers per shader stage",
        MAX_STORAGE_BUFFERS + 2,
        limits.max_storage_buffers_per_shader_stage,
    )?;
    need("bind groups", 3, limits.max_bind_groups)
}

/// The DDEF state of a batch: per world its plan, its charges and its Coulomb source
/// slots (whole tiles apart, as `pack` lays them out), and the tables.
fn batch_ddef(
    worlds: &[(&System, &Config)],
    plans: Vec<WorldPlan>,
    cpu: bool,
) -> (SolverDdef, Vec<u32>) {
    let charges: Vec<u32> = worlds
        .iter()
        .map(|(s, _)| s.charged_count() as u32)
        .collect();
    let mut slots = Vec::with_capacity(worlds.len());
    let mut at = 0u32;
    for &c in &charges {
        let end = at + c.next_multiple_of(TILE);
        slots.push((at, end));
        at = end;
    }
    let state = SolverDdef::new(plans, &charges, &slots, cpu);
    let tables = state.layout.tables();
    (state, tables)
}

/// The batch's parts: the solver buffers over the packed system (its own Coulomb source
/// slots, per-world local-global matrices, `Params`), the world parameters and table, the
/// DDEF buffers, and the step program recorded once for every world.
#[allow(clippy::too_many_arguments)]
fn assemble(
    device: &wgpu::Device,
    worlds: &[(&System, &Config)],
    names: &[Option<String>],
    key: BatchKey,
    packed: &Packed,
    dts: &[TimeStep],
    shape: Shape,
    n_wg: u32,
    ddef: Option<(SolverDdef, Vec<u32>)>,
) -> Result<Parts, GpuError> {
    let config = worlds[0].1;
    let system = &packed.system;
    let world_dt = |i: u32| {
        let w = packed.world_of[i as usize] as usize;
        dts.get(w).unwrap_or(&dts[0]).seconds()
    };
    let lg = if config.integrator == Integrator::LocalGlobal {
        Some(local_global_init(system, &world_dt)?)
    } else {
        None
    };
    let iterations = config.solver.iterations;
    let mut records = Vec::with_capacity(worlds.len());
    let mut weights: Vec<u32> = Vec::new();
    let cheb = config.integrator.is_implicit() && config.solver.method == SolverMethod::Chebyshev;
    for (w, ((s, c), span)) in worlds.iter().zip(&packed.spans).enumerate() {
        records.push(
            world(c, dts[w], span.charged.clone(), span.groups.clone())
                .map_err(|e| in_world(w, names, e))?,
        );
        let omega = if cheb {
            chebyshev_weights(chebyshev_rho(s, c, dts[w]), iterations as usize)
        } else {
            vec![1.0; iterations as usize]
        };
        weights.extend(omega.iter().map(|&o| (o as f32).to_bits()));
    }
    let n = system.len() as u32;
    let nc = if key.coulomb {
        packed.charged.len() as u32
    } else {
        0
    };
    let params = Params {
        n,
        n_springs: system.springs().len() as u32,
        n_charged: nc,
        n_wg,
        _pad0: 0,
        cheb_stride: iterations,
        n_worlds: worlds.len() as u32,
        adj_shift: adjacency::slice_shift(system.len(), system.springs()),
        // Unread by a batch's kernels (they read the world table); world 0's for clarity.
        world: records[0],
    };
    let contents = Contents {
        charged: &packed.charged,
        local_global: lg.as_ref().map(|(sf, bd)| (&sf[..], &bd[..])),
        params: &params,
    };
    let mut buffers = Buffers::create(device, system, shape, contents)?;
    let mut table = packed.world_of.clone();
    table.extend(weights);
    buffers.put(
        device,
        Buf::Worlds,
        bytemuck::cast_slice::<World, u8>(&records),
    );
    buffers.put(device, Buf::WorldTable, bytemuck::cast_slice(&table));
    if let Some((state, tables)) = &ddef {
        state.create_buffers(device, &mut buffers, tables);
    }
    let mut engine = Engine::batched(
        device,
        buffers.get(Buf::Worlds)?,
        buffers.get(Buf::WorldTable)?,
        specialization(
            config,
            ddef.as_ref().map(|(d, _)| d.load()).unwrap_or_default(),
        ),
    );
    let ns = system.springs().len() as u32;
    let configs: Vec<&Config> = worlds.iter().map(|(_, c)| *c).collect();
    let mut recorder =
        Recorder::batch(device, &mut engine, &buffers, &configs, dts[0], (n, ns, nc));
    recorder.ddef_layout = ddef.as_ref().map(|(d, _)| d.layout.clone());
    let program = program::build(&mut recorder, config, &mut NoHooks)?;
    engine.seal(device)?;
    Ok(Parts {
        dt: dts[0],
        buffers,
        engine,
        program,
        ddef: ddef.map(|(d, _)| d),
        tangents: None,
        adjoint: None,
    })
}
