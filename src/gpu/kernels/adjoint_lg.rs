//! The adjoint of the local-global step, in `adjoint_lg/` (docs/physics.md §5, §9): the
//! step's end reversed (`adjoint_lg_end`), per alternation the transposed local step per
//! spring (`adjoint_lg_springs`) and its gather into the next adjoint solve's right-hand
//! side (`adjoint_lg_gather`), and the step's start (`adjoint_lg_start`); and their
//! launchers, which `solver::adjoint_steps` calls. The solves are the forward's own on its
//! constant matrix P = M + h^2 L; the field's transpose is the tangents' field kernel.

use crate::gpu::error::GpuError;
use crate::gpu::host::buffers::Buf;
use crate::gpu::host::recorder::Recorder;
use crate::gpu::host::recording::Op;
use crate::gpu::kernels::adjoint::{bits_alone, with_adjoint_bits, SPRING_LIBS};
use crate::gpu::layout::Dispatch;
use crate::gpu::shader::Access::{Read, ReadWrite};
use crate::gpu::shader::{Kernel, Library};

pub const ADJOINT_LG_END: Kernel = Kernel {
    name: "adjoint_lg_end",
    body: include_str!("adjoint_lg/adjoint_lg_end.wgsl"),
    libs: &[Library::Layout, Library::World, Library::Blocks],
    storage: &[Read, ReadWrite, ReadWrite, ReadWrite, ReadWrite],
    constants: &[],
    cpu_targets: None,
};

pub const ADJOINT_LG_SPRINGS: Kernel = with_adjoint_bits(
    "adjoint_lg_springs",
    include_str!("adjoint_lg/adjoint_lg_springs.wgsl"),
    SPRING_LIBS,
    &[Read, Read, Read, Read, ReadWrite, ReadWrite],
);

pub const ADJOINT_LG_GATHER: Kernel = with_adjoint_bits(
    "adjoint_lg_gather",
    include_str!("adjoint_lg/adjoint_lg_gather.wgsl"),
    &[
        Library::Layout,
        Library::World,
        Library::Adjacency,
        Library::Blocks,
        Library::Adjoint,
        Library::AdjointGather,
    ],
    &[
        Read, Read, Read, Read, Read, ReadWrite, ReadWrite, ReadWrite,
    ],
);

pub const ADJOINT_LG_START: Kernel = with_adjoint_bits(
    "adjoint_lg_start",
    include_str!("adjoint_lg/adjoint_lg_start.wgsl"),
    &[
        Library::Layout,
        Library::World,
        Library::Adjacency,
        Library::Blocks,
        Library::Adjoint,
        Library::AdjointEnd,
    ],
    &[Read, Read, Read, Read, Read, Read, ReadWrite, ReadWrite],
);

pub const KERNELS: &[Kernel] = &[
    ADJOINT_LG_END,
    ADJOINT_LG_SPRINGS,
    ADJOINT_LG_GATHER,
    ADJOINT_LG_START,
];

impl Recorder<'_> {
    /// `adjoint_lg_end`: the last iterate's cotangent into `RhsDiagonal`, lc = 0.
    pub(in crate::gpu) fn adjoint_lg_end(&mut self) -> Result<Op, GpuError> {
        let bufs = [
            Buf::Props,
            Buf::AdjLx,
            Buf::AdjLv,
            Buf::TanState,
            Buf::RhsDiagonal,
        ];
        self.per_particle(ADJOINT_LG_END, &bufs, Dispatch::default())
    }

    /// `adjoint_lg_springs` of alternation `alternation` for the adjoint solution `mu`.
    /// Nothing without springs.
    pub(in crate::gpu) fn adjoint_lg_springs(
        &mut self,
        ops: &mut Vec<Op>,
        alternation: u32,
        mu: Buf,
        bits: u32,
    ) -> Result<(), GpuError> {
        let bufs = [
            Buf::Springs,
            Buf::SpringParams,
            Buf::AdjIterates,
            mu,
            Buf::AdjRows,
            Buf::AdjKbar,
        ];
        let d = alternation_record(alternation, bits);
        self.per_spring(ops, ADJOINT_LG_SPRINGS, &bufs, d)
    }

    /// `adjoint_lg_gather` of alternation `alternation` for the adjoint solution `mu`.
    pub(in crate::gpu) fn adjoint_lg_gather(
        &mut self,
        alternation: u32,
        mu: Buf,
        bits: u32,
    ) -> Result<Op, GpuError> {
        let bufs = [
            Buf::Props,
            Buf::Adj,
            Buf::AdjRows,
            mu,
            Buf::AdjIterates,
            Buf::TanState,
            Buf::RhsDiagonal,
            Buf::AdjParticle,
        ];
        let d = alternation_record(alternation, bits);
        self.per_particle(ADJOINT_LG_GATHER, &bufs, d)
    }

    /// `adjoint_lg_start`: lx and lv of the step's start.
    pub(in crate::gpu) fn adjoint_lg_start(&mut self, bits: u32) -> Result<Op, GpuError> {
        let bufs = [
            Buf::Props,
            Buf::Adj,
            Buf::SpringParams,
            Buf::AdjRows,
            Buf::RhsDiagonal,
            Buf::TanState,
            Buf::AdjLx,
            Buf::AdjLv,
        ];
        self.per_particle(ADJOINT_LG_START, &bufs, bits_alone(bits))
    }
}

/// The record of alternation `alternation` with the `AdjointBit`s `bits`.
fn alternation_record(alternation: u32, bits: u32) -> Dispatch {
    Dispatch {
        iter: alternation,
        mode: bits,
        ..Default::default()
    }
}
