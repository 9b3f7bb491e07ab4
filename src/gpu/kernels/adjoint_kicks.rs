//! The adjoint of the explicit integrators' kicks, in `adjoint_kicks/` (docs/physics.md
//! §6, §9): the start of a kick's reversal (`adjoint_kick`: the drift after it, and the
//! force cotangent), the transposed damped spring force per spring
//! (`adjoint_kick_springs`) and its gather with the field's transpose
//! (`adjoint_kick_gather`); and their launchers, which `solver::adjoint_steps` calls. The
//! rest of a reversed kick is the adjoint family's parameter kernels and the tangents'
//! field kernel in its transposed mode.

use crate::gpu::error::GpuError;
use crate::gpu::host::buffers::Buf;
use crate::gpu::host::recorder::Recorder;
use crate::gpu::host::recording::Op;
use crate::gpu::kernels::adjoint::{bits_alone, with_adjoint_bits, SPRING_LIBS};
use crate::gpu::layout::Dispatch;
use crate::gpu::shader::Access::{Read, ReadWrite};
use crate::gpu::shader::{Kernel, Library};

wgsl_enum! {
    /// `adjoint_kick`'s mode: whether the drift after the kick is reversed first.
    pub enum KickAdjoint {
        /// Verlet's second kick (no drift follows it).
        Only = "KICK_ONLY" = 0,
        /// lv += h lx, then the kick.
        Drift = "KICK_DRIFT" = 1,
    }
}

pub const ADJOINT_KICK: Kernel = Kernel {
    name: "adjoint_kick",
    body: include_str!("adjoint_kicks/adjoint_kick.wgsl"),
    libs: &[Library::Layout, Library::World],
    storage: &[Read, Read, ReadWrite, ReadWrite],
    constants: KickAdjoint::WGSL,
    cpu_targets: None,
};

pub const ADJOINT_KICK_SPRINGS: Kernel = with_adjoint_bits(
    "adjoint_kick_springs",
    include_str!("adjoint_kicks/adjoint_kick_springs.wgsl"),
    SPRING_LIBS,
    &[Read, Read, Read, Read, Read, ReadWrite, ReadWrite],
);

pub const ADJOINT_KICK_GATHER: Kernel = with_adjoint_bits(
    "adjoint_kick_gather",
    include_str!("adjoint_kicks/adjoint_kick_gather.wgsl"),
    &[
        Library::Layout,
        Library::World,
        Library::Adjacency,
        Library::Blocks,
        Library::Adjoint,
        Library::AdjointEnd,
    ],
    &[Read, Read, Read, Read, Read, ReadWrite, ReadWrite],
);

pub const KERNELS: &[Kernel] = &[ADJOINT_KICK, ADJOINT_KICK_SPRINGS, ADJOINT_KICK_GATHER];

impl Recorder<'_> {
    /// `adjoint_kick` for a kick of `fraction` h (mu into `TanState`'s dx slot).
    pub(in crate::gpu) fn adjoint_kick(
        &mut self,
        mode: KickAdjoint,
        fraction: f32,
    ) -> Result<Op, GpuError> {
        let d = Dispatch {
            mode: mode.bits(),
            weight: fraction,
            ..Default::default()
        };
        let bufs = [Buf::Props, Buf::AdjLx, Buf::AdjLv, Buf::TanState];
        self.per_particle(ADJOINT_KICK, &bufs, d)
    }

    /// `adjoint_kick_springs` at the current (x, v), with the `AdjointBit`s `bits`.
    /// Nothing without springs.
    pub(in crate::gpu) fn adjoint_kick_springs(
        &mut self,
        ops: &mut Vec<Op>,
        bits: u32,
    ) -> Result<(), GpuError> {
        let bufs = [
            Buf::Springs,
            Buf::SpringParams,
            Buf::X,
            Buf::V,
            Buf::TanState,
            Buf::AdjRows,
            Buf::AdjKbar,
        ];
        self.per_spring(ops, ADJOINT_KICK_SPRINGS, &bufs, bits_alone(bits))
    }

    /// `adjoint_kick_gather`: lx and lv of the kick's start.
    pub(in crate::gpu) fn adjoint_kick_gather(&mut self, bits: u32) -> Result<Op, GpuError> {
        let bufs = [
            Buf::Props,
            Buf::Adj,
            Buf::X,
            Buf::AdjRows,
            Buf::RhsDiagonal,
            Buf::AdjLx,
            Buf::AdjLv,
        ];
        self.per_particle(ADJOINT_KICK_GATHER, &bufs, bits_alone(bits))
    }
}
