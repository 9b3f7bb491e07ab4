//! The adjoint family, in `adjoint/`: the reversed IMEX step's own kernels (the
//! right-hand side of the adjoint solve, the transposed spring rows and stiffness
//! cotangents, their gather, the per-particle and per-charge parameter cotangents) and
//! the loss seed of a target frame; and their launchers, which `solver::adjoint` calls.
//! The rest of a reversed step is the forward's own kernels (spring blocks, diagonal,
//! solve) and the tangents' field kernel in its transposed mode.

use crate::gpu::error::GpuError;
use crate::gpu::host::buffers::Buf;
use crate::gpu::host::recorder::Recorder;
use crate::gpu::host::recording::Op;
use crate::gpu::layout::Dispatch;
use crate::gpu::shader::Access::{Read, ReadWrite};
use crate::gpu::shader::{Access, Kernel, Library};

wgsl_enum! {
    /// Bits of the adjoint kernels' mode: which cotangents are accumulated.
    pub enum AdjointBit {
        Stiffness = "ADJ_STIFFNESS" = 1,
        Masses = "ADJ_MASSES" = 2,
        Charges = "ADJ_CHARGES" = 4,
        Externals = "ADJ_EXTERNALS" = 8,
        /// The field's transposed Jacobian is in `RhsDiagonal` (charged rows).
        Field = "ADJ_FIELD" = 16,
        /// An explicit half kick (Verlet): `adjoint_params`' mass cotangent for s = h / 2.
        HalfKick = "ADJ_HALF_KICK" = 32,
        /// At t + h (Verlet's second kick, before the clock advances).
        Later = "ADJ_LATER" = 64,
    }
}

/// A kernel of the adjoint families (this one, `adjoint_kicks`, `adjoint_lg`) whose mode is
/// [`AdjointBit`]s: its bits are the `adjoint` library's constants.
pub(crate) const fn with_adjoint_bits(
    name: &'static str,
    body: &'static str,
    libs: &'static [Library],
    storage: &'static [Access],
) -> Kernel {
    Kernel {
        name,
        body,
        libs,
        storage,
        constants: AdjointBit::WGSL,
        cpu_targets: None,
    }
}

/// The libraries of the adjoint's per-spring kernels.
pub(crate) const SPRING_LIBS: &[Library] = &[
    Library::Layout,
    Library::World,
    Library::Physics,
    Library::Adjoint,
    Library::AdjointSpring,
];

pub const ADJOINT_RHS: Kernel = Kernel {
    name: "adjoint_rhs",
    body: include_str!("adjoint/adjoint_rhs.wgsl"),
    libs: &[Library::Layout, Library::World, Library::Blocks],
    storage: &[Read, Read, ReadWrite],
    constants: &[],
    cpu_targets: None,
};

pub const ADJOINT_SPRINGS: Kernel = with_adjoint_bits(
    "adjoint_springs",
    include_str!("adjoint/adjoint_springs.wgsl"),
    SPRING_LIBS,
    &[Read, Read, Read, Read, Read, ReadWrite, ReadWrite],
);

pub const ADJOINT_GATHER: Kernel = with_adjoint_bits(
    "adjoint_gather",
    include_str!("adjoint/adjoint_gather.wgsl"),
    &[
        Library::Layout,
        Library::World,
        Library::Adjacency,
        Library::Blocks,
        Library::Adjoint,
        Library::AdjointGather,
        Library::AdjointEnd,
    ],
    &[Read, Read, Read, Read, Read, ReadWrite, ReadWrite],
);

pub const ADJOINT_PARAMS: Kernel = with_adjoint_bits(
    "adjoint_params",
    include_str!("adjoint/adjoint_params.wgsl"),
    &[
        Library::Layout,
        Library::World,
        Library::Physics,
        Library::Adjoint,
    ],
    &[Read, Read, Read, Read, Read, Read, ReadWrite, ReadWrite],
);
pub const ADJOINT_CHARGES: Kernel = Kernel {
    name: "adjoint_charges",
    body: include_str!("adjoint/adjoint_charges.wgsl"),
    libs: &[Library::Layout, Library::World, Library::Physics],
    storage: &[Read, Read, Read, Read, ReadWrite],
    constants: &[],
    cpu_targets: None,
};

pub const ADJOINT_SEED: Kernel = Kernel {
    name: "adjoint_seed",
    body: include_str!("adjoint/adjoint_seed.wgsl"),
    libs: &[Library::Layout, Library::World, Library::Reduce],
    storage: &[Read, Read, ReadWrite, ReadWrite],
    constants: &[],
    cpu_targets: None,
};

pub const KERNELS: &[Kernel] = &[
    ADJOINT_RHS,
    ADJOINT_SPRINGS,
    ADJOINT_GATHER,
    ADJOINT_PARAMS,
    ADJOINT_CHARGES,
    ADJOINT_SEED,
];

impl Recorder<'_> {
    /// A launch of `k` per particle with the record `d`.
    pub(in crate::gpu) fn per_particle(
        &mut self,
        k: Kernel,
        bufs: &[Buf],
        d: Dispatch,
    ) -> Result<Op, GpuError> {
        let (record, n) = (self.record(d), self.n);
        self.dispatch(k, bufs, record, n)
    }

    /// A launch of `k` per spring with the record `d`, onto `ops`; nothing without
    /// springs.
    pub(in crate::gpu) fn per_spring(
        &mut self,
        ops: &mut Vec<Op>,
        k: Kernel,
        bufs: &[Buf],
        d: Dispatch,
    ) -> Result<(), GpuError> {
        if self.ns == 0 {
            return Ok(());
        }
        let (record, ns) = (self.record(d), self.ns);
        ops.push(self.dispatch(k, bufs, record, ns)?);
        Ok(())
    }

    /// `adjoint_rhs`: g = lv + h lx into `RhsDiagonal`'s right-hand side rows.
    pub(in crate::gpu) fn adjoint_rhs(&mut self) -> Result<Op, GpuError> {
        let bufs = [Buf::AdjLx, Buf::AdjLv, Buf::RhsDiagonal];
        self.per_particle(ADJOINT_RHS, &bufs, Dispatch::default())
    }

    /// `adjoint_springs` for the adjoint solution in `mu`, with the `AdjointBit`s `bits`.
    /// Nothing without springs.
    pub(in crate::gpu) fn adjoint_springs(
        &mut self,
        ops: &mut Vec<Op>,
        mu: Buf,
        bits: u32,
    ) -> Result<(), GpuError> {
        let bufs = [
            Buf::Springs,
            Buf::SpringParams,
            Buf::X,
            mu,
            Buf::AdjV1,
            Buf::AdjRows,
            Buf::AdjKbar,
        ];
        self.per_spring(ops, ADJOINT_SPRINGS, &bufs, bits_alone(bits))
    }

    /// `adjoint_gather`: lx and lv of the step's start.
    pub(in crate::gpu) fn adjoint_gather(&mut self, mu: Buf, bits: u32) -> Result<Op, GpuError> {
        let bufs = [
            Buf::Props,
            Buf::Adj,
            Buf::AdjRows,
            Buf::RhsDiagonal,
            mu,
            Buf::AdjLx,
            Buf::AdjLv,
        ];
        self.per_particle(ADJOINT_GATHER, &bufs, bits_alone(bits))
    }

    /// `adjoint_params`: the per-particle parameter cotangents of the `bits` asked for.
    pub(in crate::gpu) fn adjoint_params(&mut self, mu: Buf, bits: u32) -> Result<Op, GpuError> {
        let bufs = [
            Buf::Props,
            Buf::X,
            Buf::V,
            Buf::AdjV1,
            mu,
            Buf::Clock,
            Buf::AdjParticle,
            Buf::AdjExternal,
        ];
        self.per_particle(ADJOINT_PARAMS, &bufs, bits_alone(bits))
    }

    /// `adjoint_charges`: the all-pairs share of every particle's charge cotangent.
    /// Nothing without a Coulomb sum.
    pub(in crate::gpu) fn adjoint_charges(
        &mut self,
        ops: &mut Vec<Op>,
        mu: Buf,
    ) -> Result<(), GpuError> {
        if self.nc == 0 {
            return Ok(());
        }
        let bufs = [Buf::X, Buf::Props, Buf::Charged, mu, Buf::AdjParticle];
        ops.push(self.per_particle(ADJOINT_CHARGES, &bufs, Dispatch::default())?);
        Ok(())
    }

    /// `adjoint_seed` of target frame `frame` (in `AdjTarget`) with 2 / (F n) = `weight`.
    pub(in crate::gpu) fn adjoint_seed(&mut self, frame: u32, weight: f32) -> Result<Op, GpuError> {
        let d = Dispatch {
            iter: frame,
            weight,
            ..Default::default()
        };
        let bufs = [Buf::X, Buf::AdjTarget, Buf::AdjLx, Buf::AdjLoss];
        self.per_particle(ADJOINT_SEED, &bufs, d)
    }
}

/// The record of the `AdjointBit`s `bits` alone.
pub(in crate::gpu) fn bits_alone(bits: u32) -> Dispatch {
    Dispatch {
        mode: bits,
        ..Default::default()
    }
}
