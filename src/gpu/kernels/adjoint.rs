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
use crate::gpu::shader::{Kernel, Library};

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

pub const ADJOINT_RHS: Kernel = Kernel {
    name: "adjoint_rhs",
    body: include_str!("adjoint/adjoint_rhs.wgsl"),
    libs: &[Library::Layout, Library::World, Library::Blocks],
    storage: &[Read, Read, ReadWrite],
    constants: &[],
    cpu_targets: None,
};

pub const ADJOINT_SPRINGS: Kernel = Kernel {
    name: "adjoint_springs",
    body: include_str!("adjoint/adjoint_springs.wgsl"),
    libs: &[Library::Layout, Library::World, Library::Physics],
    storage: &[Read, Read, Read, Read, Read, ReadWrite, ReadWrite],
    constants: AdjointBit::WGSL,
    cpu_targets: None,
};

pub const ADJOINT_GATHER: Kernel = Kernel {
    name: "adjoint_gather",
    body: include_str!("adjoint/adjoint_gather.wgsl"),
    libs: &[
        Library::Layout,
        Library::World,
        Library::Adjacency,
        Library::Blocks,
    ],
    storage: &[Read, Read, Read, Read, Read, ReadWrite, ReadWrite],
    constants: AdjointBit::WGSL,
    cpu_targets: None,
};

pub const ADJOINT_PARAMS: Kernel = Kernel {
    name: "adjoint_params",
    body: include_str!("adjoint/adjoint_params.wgsl"),
    libs: &[Library::Layout, Library::World, Library::Physics],
    storage: &[Read, Read, Read, Read, Read, Read, ReadWrite, ReadWrite],
    constants: AdjointBit::WGSL,
    cpu_targets: None,
};

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
    /// `adjoint_rhs`: g = lv + h lx into `RhsDiagonal`'s right-hand side rows.
    pub(in crate::gpu) fn adjoint_rhs(&mut self) -> Result<Op, GpuError> {
        let (m0, n) = (self.mode(0), self.n);
        self.dispatch(
            ADJOINT_RHS,
            &[Buf::AdjLx, Buf::AdjLv, Buf::RhsDiagonal],
            m0,
            n,
        )
    }

    /// `adjoint_springs` for the adjoint solution in `mu`, with the `AdjointBit`s `bits`.
    /// Nothing without springs.
    pub(in crate::gpu) fn adjoint_springs(
        &mut self,
        ops: &mut Vec<Op>,
        mu: Buf,
        bits: u32,
    ) -> Result<(), GpuError> {
        if self.ns == 0 {
            return Ok(());
        }
        let (record, ns) = (self.mode(bits), self.ns);
        ops.push(self.dispatch(
            ADJOINT_SPRINGS,
            &[
                Buf::Springs,
                Buf::SpringParams,
                Buf::X,
                mu,
                Buf::AdjV1,
                Buf::AdjRows,
                Buf::AdjKbar,
            ],
            record,
            ns,
        )?);
        Ok(())
    }

    /// `adjoint_gather`: lx and lv of the step's start.
    pub(in crate::gpu) fn adjoint_gather(&mut self, mu: Buf, bits: u32) -> Result<Op, GpuError> {
        let (record, n) = (self.mode(bits), self.n);
        self.dispatch(
            ADJOINT_GATHER,
            &[
                Buf::Props,
                Buf::Adj,
                Buf::AdjRows,
                Buf::RhsDiagonal,
                mu,
                Buf::AdjLx,
                Buf::AdjLv,
            ],
            record,
            n,
        )
    }

    /// `adjoint_params`: the per-particle parameter cotangents of the `bits` asked for.
    pub(in crate::gpu) fn adjoint_params(&mut self, mu: Buf, bits: u32) -> Result<Op, GpuError> {
        let (record, n) = (self.mode(bits), self.n);
        self.dispatch(
            ADJOINT_PARAMS,
            &[
                Buf::Props,
                Buf::X,
                Buf::V,
                Buf::AdjV1,
                mu,
                Buf::Clock,
                Buf::AdjParticle,
                Buf::AdjExternal,
            ],
            record,
            n,
        )
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
        let (m0, n) = (self.mode(0), self.n);
        ops.push(self.dispatch(
            ADJOINT_CHARGES,
            &[Buf::X, Buf::Props, Buf::Charged, mu, Buf::AdjParticle],
            m0,
            n,
        )?);
        Ok(())
    }

    /// `adjoint_seed` of target frame `frame` (in `AdjTarget`) with 2 / (F n) = `weight`.
    pub(in crate::gpu) fn adjoint_seed(&mut self, frame: u32, weight: f32) -> Result<Op, GpuError> {
        let record = self.record(Dispatch {
            iter: frame,
            weight,
            ..Default::default()
        });
        let n = self.n;
        self.dispatch(
            ADJOINT_SEED,
            &[Buf::X, Buf::AdjTarget, Buf::AdjLx, Buf::AdjLoss],
            record,
            n,
        )
    }
}
