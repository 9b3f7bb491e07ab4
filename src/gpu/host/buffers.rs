//! The solver's GPU buffers: one table keyed by [`Buf`] ([`Buf::spec`]) giving each
//! buffer's name (its wgpu label and its name in limit errors), usage, size and which
//! solvers create it, so no size is looked up by name and none can be missing; and
//! [`Buffers`], the buffers one solver created from that table.

use wgpu::util::DeviceExt;

use super::adjacency;
use super::params::{bd_row_bytes, params, TimeStep};
pub(in crate::gpu) use super::rows::{
    local_global_init, particle_props, spring_params, state_vec4, Vec4,
};
use crate::config::{Config, Integrator, SolverMethod};
use crate::gpu::error::GpuError;
use crate::gpu::layout::{DdefWorld, Params, World, SCALAR_SLOTS, WORKGROUP_SIZE};
use crate::model::System;

macro_rules! buffer_kinds {
    ($($(#[$meta:meta])* $kind:ident,)*) => {
        /// A buffer of the solver (see [`Buf::spec`] for what each holds and its size).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub(in crate::gpu) enum Buf {
            $($(#[$meta])* $kind,)*
        }

        impl Buf {
            /// Every buffer, in table order.
            pub(in crate::gpu) const ALL: &'static [Buf] = &[$(Buf::$kind),*];
        }
    };
}

buffer_kinds! {
    /// Positions (xyz, 1): also a vertex buffer (Float32x4, stride 16).
    X,
    V,
    /// (mass, charge * sqrt(k_c), charge, pinned)
    Props,
    /// Non-spring forces (xyz) and Coulomb potential (w).
    Force,
    /// The charged particles compacted: (position, charge * sqrt(k_c)).
    Sources,
    /// The particle of each Coulomb source slot (`NO_RANK`: a batch's padding).
    Charged,
    /// The step counter.
    Clock,
    Springs,
    /// Per spring (k, L, c, 0).
    SpringParams,
    /// Per spring its block W_k = s I + m m^T as (m, s), then per spring (n, fmag).
    SpringBlocks,
    Adj,
    /// Per particle 2 or 3 vec4 (`params::block_diag`): b, the inverse diagonal with the
    /// mass (0: pinned) in w, its off-diagonal entries (`blocks.wgsl`).
    RhsDiagonal,
    /// The solve's ping-pong partner of the unknown.
    SolveScratch,
    /// Local-global: the positions x_t at the step's start.
    StepStart,
    /// Local-global: the iteration-independent part of the right-hand side.
    ConstantRhs,
    /// CG: the residual r, the direction p and q = A p.
    R,
    P,
    Q,
    /// Per-workgroup partial sums, two blocks.
    Partials,
    /// The reductions' results, `SCALAR_SLOTS` vec4 per world.
    Scalars,
    // Forward tangents (`solver::tangent`).
    /// Per direction: dx then dv (2 n vec4).
    TanState,
    /// Per direction: dq per particle, (k, L, c, dk) per spring, (dx_e, dq_e) per external.
    TanDir,
    /// Per direction: its active particles (n u32).
    TanActive,
    /// The tangent solve's unknown and its ping-pong partner.
    TanU,
    TanS,
    /// Local-global, per direction: the iteration-independent right-hand side (n vec4).
    TanA,
    /// Local-global: the forward iterate of the current alternation (n vec4).
    TanZ,
    // The adjoint (`solver::adjoint`); its solve runs in `TanState` (mu, the dx slot of
    // one zero direction) and `TanS`.
    /// The cotangents of x and v.
    AdjLx,
    AdjLv,
    /// The velocity after the step being reversed.
    AdjV1,
    /// Per spring its transposed row vector (`adjoint_springs`).
    AdjRows,
    /// Per spring the stiffness cotangent (f32).
    AdjKbar,
    /// Per particle (charge: external charges x sqrt(k_c), mass, charge: field, charge:
    /// all-pairs x sqrt(k_c)).
    AdjParticle,
    /// Per particle and external charge: (position cotangent, charge cotangent x sqrt(k_c)).
    AdjExternal,
    /// The target frame being seeded.
    AdjTarget,
    /// Per target frame, each workgroup's share of the loss.
    AdjLoss,
    /// Local-global: the reversed step's recomputed iterates z^0 .. z^N (n vec4 each).
    AdjIterates,
    /// DDEF: the sorted sources beside one direction's tangents (2 vec4 per source).
    TanSorted,
    /// DDEF: one direction's far-field tangent at the sites (the adjoint: the sites'
    /// cotangents).
    TanFar,
    /// DDEF adjoint (`kernels::ddef_adjoint`): per tetrahedron its path vertices'
    /// cotangents; per sorted source its far chunks' and target terms; per particle the
    /// result (x_bar, qs_bar).
    DdefTetBar,
    DdefAdjPart,
    DdefAdjOut,
    // DDEF on the lattice grid (`kernels::ddef`).
    /// Per world its `DdefWorld` record: plan (host) and frame (`ddef_frame`).
    DdefWorlds,
    /// The stencil tables and scan levels (constant).
    DdefTables,
    /// Per source workgroup its charges' bounds (min, max).
    DdefBounds,
    /// Per Coulomb source slot its tetrahedron (`NO_RANK`: padding).
    SrcTet,
    /// Per tetrahedron its sources (atomic; 0 between evaluations).
    TetCount,
    /// Per cell its gather work items.
    CellCount,
    /// The tetrahedra's first sorted positions (one more than tetrahedra), then the
    /// cells' first work items (one more than cells).
    Starts,
    /// The scans' higher levels.
    ScanScratch,
    /// The counting sort's scattered source slots.
    Scattered,
    /// The sources sorted by (tetrahedron, particle): (position, scaled charge), and
    /// (particle, tetrahedron).
    SortedSrc,
    SortedKey,
    /// The far field at the sites per source chunk, and summed.
    FarPart,
    Far,
    // A batch of worlds (`batch::worlds`), bound as group 2.
    /// Per world its `World` record.
    Worlds,
    /// The world of every particle slot, then per world its Chebyshev weights.
    WorldTable,
}

const COUNT: usize = Buf::ALL.len();

/// Which solvers create a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::gpu) enum Part {
    /// Every solver (at 16 bytes when its integrator or solver leaves it unused).
    Forward,
    /// A solver with forward tangents (or the adjoint's zero direction).
    Tangents,
    /// A solver with the adjoint.
    Adjoint,
    /// A batch of worlds.
    Batch,
    /// A solver with DDEF on the lattice grid.
    Ddef,
}

/// One row of the buffer table.
#[derive(Clone, Copy, Debug)]
pub(in crate::gpu) struct Spec {
    pub(in crate::gpu) name: &'static str,
    pub(in crate::gpu) usage: wgpu::BufferUsages,
    pub(in crate::gpu) bytes: u64,
    pub(in crate::gpu) part: Part,
}

/// What a solver's buffers are sized for: its counts and the shape of its step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(in crate::gpu) struct Shape {
    /// Particle slots, springs, Coulomb source slots.
    pub(in crate::gpu) n: u64,
    pub(in crate::gpu) ns: u64,
    pub(in crate::gpu) nc: u64,
    /// Worlds of a batch (0: one system, no world table) and the solver iterations its
    /// world table holds weights for.
    pub(in crate::gpu) worlds: u64,
    pub(in crate::gpu) iterations: u64,
    /// Forward tangent directions (0: none) and the external charges they carry.
    pub(in crate::gpu) directions: u64,
    pub(in crate::gpu) externals: u64,
    /// The adjoint: its target frames (0: no adjoint) and workgroups per per-particle
    /// dispatch.
    pub(in crate::gpu) adjoint_frames: u64,
    pub(in crate::gpu) n_wg: u64,
    /// Local-global with the adjoint: the iterates of a step (alternations + 1).
    pub(in crate::gpu) lg_iterates: u64,
    /// An implicit integrator, local-global, CG; bytes of a `RhsDiagonal` row.
    pub(in crate::gpu) implicit: bool,
    pub(in crate::gpu) local_global: bool,
    pub(in crate::gpu) cg: bool,
    pub(in crate::gpu) bd_row: u64,
    /// DDEF's sizes (`worlds` = 0: no DDEF).
    pub(in crate::gpu) ddef: DdefSizes,
}

/// What the DDEF buffers are sized for (`host::ddef_layout::DdefLayout`'s totals).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(in crate::gpu) struct DdefSizes {
    pub(in crate::gpu) worlds: u64,
    pub(in crate::gpu) tets: u64,
    pub(in crate::gpu) cells: u64,
    pub(in crate::gpu) sites: u64,
    pub(in crate::gpu) chunks: u64,
    /// The DDEF adjoint's site chunks (`ddef_far_adjoint`).
    pub(in crate::gpu) site_chunks: u64,
    pub(in crate::gpu) scratch: u64,
    pub(in crate::gpu) tables: u64,
}

/// Usage of every storage buffer (readable back, writable by the host).
const STORAGE: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
    .union(wgpu::BufferUsages::COPY_DST)
    .union(wgpu::BufferUsages::COPY_SRC);

impl Buf {
    /// The buffer table. A buffer's size is exhaustive in `Buf`: a new buffer does not
    /// compile without one.
    pub(in crate::gpu) fn spec(self, s: &Shape) -> Spec {
        use Buf::*;
        use Part::*;
        let n = s.n;
        let vec4s = 16 * n;
        let when = |on: bool, bytes: u64| if on { bytes } else { 16 };
        let d = s.directions;
        let dd = s.ddef;
        let (name, bytes, part) = match self {
            X => ("positions", vec4s, Forward),
            V => ("velocities", vec4s, Forward),
            Props => ("particle properties", vec4s, Forward),
            Force => ("forces", vec4s, Forward),
            Sources => ("Coulomb sources", 16 * s.nc.max(1), Forward),
            Charged => ("charged indices", 4 * s.nc.max(1), Forward),
            Clock => ("clock", 16, Forward),
            Springs => ("springs", 8 * s.ns.max(1), Forward),
            SpringParams => ("spring parameters", 16 * s.ns.max(1), Forward),
            SpringBlocks => ("spring blocks", 32 * s.ns.max(1), Forward),
            // The bound of either layout (created at its own size: `Buffers::create`).
            Adj => ("adjacency", 4 * adjacency::bound_words(n, s.ns), Forward),
            // The tangents' field forces go here under every integrator.
            RhsDiagonal => (
                "right-hand side and diagonal",
                when(s.implicit || d > 0, s.bd_row * n),
                Forward,
            ),
            SolveScratch => ("solver scratch", when(s.implicit, vec4s), Forward),
            StepStart => ("step start positions", when(s.local_global, vec4s), Forward),
            ConstantRhs => (
                "constant right-hand side",
                when(s.local_global, vec4s),
                Forward,
            ),
            R => ("cg r", when(s.cg, vec4s), Forward),
            P => ("cg p", when(s.cg, vec4s), Forward),
            Q => ("cg q", when(s.cg, vec4s), Forward),
            // 32 bytes per workgroup (a few more on a 2D grid; see `limits::grid`).
            Partials => (
                "partial sums",
                32 * (n.div_ceil(u64::from(WORKGROUP_SIZE)).max(1) + 64),
                Forward,
            ),
            Scalars => (
                "scalars",
                16 * u64::from(SCALAR_SLOTS) * s.worlds.max(1),
                Forward,
            ),
            TanState => ("tangent state", 32 * n * d, Tangents),
            TanDir => (
                "tangent directions",
                16 * (n + s.ns + s.externals) * d,
                Tangents,
            ),
            TanActive => ("tangent active particles", 4 * n * d, Tangents),
            TanU => ("tangent solve", vec4s, Tangents),
            TanS => ("tangent solve scratch", vec4s, Tangents),
            TanA => (
                "tangent local-global rhs",
                when(s.local_global, vec4s * d),
                Tangents,
            ),
            TanZ => (
                "tangent local-global iterate",
                when(s.local_global, vec4s),
                Tangents,
            ),
            AdjLx => ("adjoint x", vec4s, Adjoint),
            AdjLv => ("adjoint v", vec4s, Adjoint),
            AdjV1 => ("adjoint step end velocity", vec4s, Adjoint),
            AdjRows => ("adjoint spring rows", 16 * s.ns.max(1), Adjoint),
            AdjKbar => ("adjoint stiffness cotangents", 4 * s.ns.max(1), Adjoint),
            AdjParticle => ("adjoint particle cotangents", vec4s, Adjoint),
            AdjExternal => (
                "adjoint external cotangents",
                vec4s * s.externals.max(1),
                Adjoint,
            ),
            AdjTarget => ("adjoint target frame", vec4s, Adjoint),
            AdjLoss => (
                "adjoint loss shares",
                16 * s.n_wg.max(1) * s.adjoint_frames.max(1),
                Adjoint,
            ),
            AdjIterates => (
                "adjoint local-global iterates",
                when(s.local_global, vec4s * s.lg_iterates),
                Adjoint,
            ),
            TanSorted => (
                "tangent DDEF sources",
                when(dd.worlds > 0, 32 * s.nc),
                Tangents,
            ),
            TanFar => (
                "tangent DDEF far field",
                when(dd.worlds > 0, 16 * dd.sites),
                Tangents,
            ),
            DdefTetBar => (
                "DDEF adjoint tetrahedron cotangents",
                when(dd.worlds > 0, 64 * dd.tets),
                Tangents,
            ),
            DdefAdjPart => (
                "DDEF adjoint source terms",
                when(dd.worlds > 0, 16 * s.nc * (dd.site_chunks + 1)),
                Tangents,
            ),
            DdefAdjOut => ("DDEF adjoint result", when(dd.worlds > 0, vec4s), Tangents),
            Worlds => (
                "world parameters",
                s.worlds * std::mem::size_of::<World>() as u64,
                Batch,
            ),
            WorldTable => ("world table", 4 * (n + s.worlds * s.iterations), Batch),
            DdefWorlds => (
                "DDEF worlds",
                dd.worlds * std::mem::size_of::<DdefWorld>() as u64,
                Ddef,
            ),
            DdefTables => ("DDEF tables", 4 * dd.tables, Ddef),
            // 32 bytes per source workgroup (a few more on a 2D grid; see `limits::grid`).
            DdefBounds => (
                "DDEF bounds",
                32 * (s.nc.div_ceil(u64::from(WORKGROUP_SIZE)) + 64),
                Ddef,
            ),
            SrcTet => ("DDEF source tetrahedra", 4 * s.nc, Ddef),
            TetCount => ("DDEF tetrahedron counts", 4 * dd.tets, Ddef),
            CellCount => ("DDEF cell work", 4 * dd.cells, Ddef),
            Starts => ("DDEF starts", 4 * (dd.tets + dd.cells + 2), Ddef),
            ScanScratch => ("DDEF scan scratch", 4 * dd.scratch, Ddef),
            Scattered => ("DDEF scattered sources", 4 * s.nc, Ddef),
            SortedSrc => ("DDEF sorted sources", 16 * s.nc, Ddef),
            SortedKey => ("DDEF sorted keys", 8 * s.nc, Ddef),
            FarPart => ("DDEF far field chunks", 16 * dd.sites * dd.chunks, Ddef),
            Far => ("DDEF far field", 16 * dd.sites, Ddef),
        };
        let usage = match self {
            X | V => STORAGE.union(wgpu::BufferUsages::VERTEX),
            _ => STORAGE,
        };
        Spec {
            name,
            usage,
            bytes,
            part,
        }
    }
}

impl Shape {
    /// One system of `n` particles, `ns` springs and `nc` charged particles under
    /// `config`, without tangents.
    pub(in crate::gpu) fn new(n: u64, ns: u64, nc: u64, config: &Config) -> Self {
        let implicit = config.integrator.is_implicit();
        Self {
            n,
            ns,
            nc,
            implicit,
            local_global: config.integrator == Integrator::LocalGlobal,
            cg: implicit && config.solver.method == SolverMethod::Cg,
            bd_row: bd_row_bytes(config),
            ..Self::default()
        }
    }

    /// [`Self::new`] for `system`.
    pub(in crate::gpu) fn of(system: &System, config: &Config) -> Self {
        Self::new(
            system.len() as u64,
            system.springs().len() as u64,
            system.charged_count() as u64,
            config,
        )
    }

    /// Whether a solver of this shape creates the buffers of `part`.
    pub(in crate::gpu) fn creates(&self, part: Part) -> bool {
        match part {
            Part::Forward => true,
            Part::Tangents => self.directions > 0,
            Part::Adjoint => self.adjoint_frames > 0,
            Part::Batch => self.worlds > 0,
            Part::Ddef => self.ddef.worlds > 0,
        }
    }

    /// Every buffer a solver of this shape creates, with its table row.
    pub(in crate::gpu) fn created(&self) -> impl Iterator<Item = (Buf, Spec)> + '_ {
        Buf::ALL
            .iter()
            .map(|&b| (b, b.spec(self)))
            .filter(|(_, s)| self.creates(s.part))
    }
}

/// What the forward buffers start with besides the system's own arrays.
pub(in crate::gpu) struct Contents<'a> {
    /// The particle of each Coulomb source slot.
    pub(in crate::gpu) charged: &'a [u32],
    /// Local-global: the constant spring blocks and `RhsDiagonal` rows
    /// ([`local_global_init`]).
    pub(in crate::gpu) local_global: Option<(&'a [Vec4], &'a [Vec4])>,
    pub(in crate::gpu) params: &'a Params,
}

/// The buffers one solver created (indexed by `Buf as usize`) and the `Params` uniform
/// every solver kernel binds at 0.
pub(in crate::gpu) struct Buffers {
    shape: Shape,
    list: Vec<Option<wgpu::Buffer>>,
    params: wgpu::Buffer,
}

impl Buffers {
    /// The buffer `b`, or a typed error when this solver never created it (a tangent
    /// buffer of a solver without tangents).
    pub(in crate::gpu) fn get(&self, b: Buf) -> Result<&wgpu::Buffer, GpuError> {
        self.list[b as usize]
            .as_ref()
            .ok_or_else(|| GpuError::Binding {
                kernel: "buffers",
                problem: format!("buffer {b:?} does not exist on this solver"),
            })
    }

    pub(in crate::gpu) fn params(&self) -> &wgpu::Buffer {
        &self.params
    }

    /// Creates buffer `b` at its size in the table (at least `data`'s, and 16 bytes:
    /// wgpu refuses empty bindings) holding `data`, zero-padded.
    pub(in crate::gpu) fn put(&mut self, device: &wgpu::Device, b: Buf, data: &[u8]) {
        let spec = b.spec(&self.shape);
        let size = spec.bytes.max(data.len() as u64).max(16);
        self.list[b as usize] = Some(create(device, spec, data, size));
    }

    /// Creates the forward step's buffers for `system` (a batch: its packed system) at
    /// the sizes of `shape`, and the `Params` uniform.
    pub(in crate::gpu) fn create(
        device: &wgpu::Device,
        system: &System,
        shape: Shape,
        contents: Contents,
    ) -> Result<Self, GpuError> {
        let (x, v) = state_vec4(system.positions(), system.velocities())?;
        let props = particle_props(system)?;
        let springs: Vec<[u32; 2]> = system.springs().iter().map(|s| [s.i, s.j]).collect();
        let sparams = spring_params(system)?;
        let (adj_shift, adj) = adjacency::words(system.len(), system.springs());
        // Both come from `adjacency::slice_shift` on the same springs.
        debug_assert_eq!(contents.params.adj_shift, adj_shift);
        let (sf, bd) = contents.local_global.unwrap_or((&[], &[]));
        let mut buffers = Self {
            shape,
            list: vec![None; COUNT],
            params: device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("params"),
                contents: bytemuck::bytes_of(contents.params),
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            }),
        };
        for &b in Buf::ALL {
            if b.spec(&shape).part != Part::Forward {
                continue;
            }
            let data: &[u8] = match b {
                Buf::X => bytemuck::cast_slice(&x),
                Buf::V => bytemuck::cast_slice(&v),
                Buf::Props => bytemuck::cast_slice(&props),
                Buf::Charged => bytemuck::cast_slice(contents.charged),
                Buf::Springs => bytemuck::cast_slice(&springs),
                Buf::SpringParams => bytemuck::cast_slice(&sparams),
                Buf::SpringBlocks => bytemuck::cast_slice(sf),
                Buf::RhsDiagonal => bytemuck::cast_slice(bd),
                Buf::Adj => bytemuck::cast_slice(&adj),
                _ => &[],
            };
            if b == Buf::Adj {
                // Its own size: the table's is the bound of either layout, for the
                // limit checks before the mesh exists.
                let spec = b.spec(&shape);
                let size = (data.len() as u64).max(16);
                buffers.list[b as usize] = Some(create(device, spec, data, size));
            } else {
                buffers.put(device, b, data);
            }
        }
        Ok(buffers)
    }
}

impl Buffers {
    /// The forward buffers of one system (its charged particles as the Coulomb sources,
    /// its local-global matrix, its `Params` with `n_wg` workgroups per per-particle
    /// dispatch).
    pub(in crate::gpu) fn one_system(
        device: &wgpu::Device,
        system: &System,
        config: &Config,
        dt: TimeStep,
        shape: Shape,
        n_wg: u32,
    ) -> Result<Self, GpuError> {
        let h = dt.seconds();
        let lg = if config.integrator == Integrator::LocalGlobal {
            Some(local_global_init(system, &|_| h)?)
        } else {
            None
        };
        let params = params(system, config, dt, n_wg)?;
        let charged = system.charged_indices();
        let contents = Contents {
            charged: &charged,
            local_global: lg.as_ref().map(|(sf, bd)| (&sf[..], &bd[..])),
            params: &params,
        };
        Self::create(device, system, shape, contents)
    }
}

/// A buffer of `size` bytes described by `spec` holding `data` (zero-padded).
fn create(device: &wgpu::Device, spec: Spec, data: &[u8], size: u64) -> wgpu::Buffer {
    if data.is_empty() {
        return device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(spec.name),
            size,
            usage: spec.usage,
            mapped_at_creation: false,
        });
    }
    let mut d = data.to_vec();
    d.resize(size as usize, 0);
    device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some(spec.name),
        contents: &d,
        usage: spec.usage,
    })
}
