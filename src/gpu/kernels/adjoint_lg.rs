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
use crate::gpu::kernels::adjoint::AdjointBit;
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

pub const ADJOINT_LG_SPRINGS: Kernel = Kernel {
    name: "adjoint_lg_springs",
    body: include_str!("adjoint_lg/adjoint_lg_springs.wgsl"),
    libs: &[Library::Layout, Library::World, Library::Physics],
    storage: &[Read, Read, Read, Read, ReadWrite, ReadWrite],
    constants: AdjointBit::WGSL,
    cpu_targets: None,
};

pub const ADJOINT_LG_GATHER: Kernel = Kernel {
    name: "adjoint_lg_gather",
    body: include_str!("adjoint_lg/adjoint_lg_gather.wgsl"),
    libs: &[
        Library::Layout,
        Library::World,
        Library::Adjacency,
        Library::Blocks,
    ],
    storage: &[
        Read, Read, Read, Read, Read, ReadWrite, ReadWrite, ReadWrite,
    ],
    constants: AdjointBit::WGSL,
    cpu_targets: None,
};

pub const ADJOINT_LG_START: Kernel = Kernel {
    name: "adjoint_lg_start",
    body: include_str!("adjoint_lg/adjoint_lg_start.wgsl"),
    libs: &[
        Library::Layout,
        Library::World,
        Library::Adjacency,
        Library::Blocks,
    ],
    storage: &[Read, Read, Read, Read, Read, Read, ReadWrite, ReadWrite],
    constants: AdjointBit::WGSL,
    cpu_targets: None,
};

pub const KERNELS: &[Kernel] = &[
    ADJOINT_LG_END,
    ADJOINT_LG_SPRINGS,
    ADJOINT_LG_GATHER,
    ADJOINT_LG_START,
];

impl Recorder<'_> {
    /// `adjoint_lg_end`: the last iterate's cotangent into `RhsDiagonal`, lc = 0.
    pub(in crate::gpu) fn adjoint_lg_end(&mut self) -> Result<Op, GpuError> {
        let (m0, n) = (self.mode(0), self.n);
        self.dispatch(
            ADJOINT_LG_END,
            &[
                Buf::Props,
                Buf::AdjLx,
                Buf::AdjLv,
                Buf::TanState,
                Buf::RhsDiagonal,
            ],
            m0,
            n,
        )
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
        if self.ns == 0 {
            return Ok(());
        }
        let record = self.record(Dispatch {
            iter: alternation,
            mode: bits,
            ..Default::default()
        });
        let ns = self.ns;
        ops.push(self.dispatch(
            ADJOINT_LG_SPRINGS,
            &[
                Buf::Springs,
                Buf::SpringParams,
                Buf::AdjIterates,
                mu,
                Buf::AdjRows,
                Buf::AdjKbar,
            ],
            record,
            ns,
        )?);
        Ok(())
    }

    /// `adjoint_lg_gather` of alternation `alternation` for the adjoint solution `mu`.
    pub(in crate::gpu) fn adjoint_lg_gather(
        &mut self,
        alternation: u32,
        mu: Buf,
        bits: u32,
    ) -> Result<Op, GpuError> {
        let record = self.record(Dispatch {
            iter: alternation,
            mode: bits,
            ..Default::default()
        });
        let n = self.n;
        self.dispatch(
            ADJOINT_LG_GATHER,
            &[
                Buf::Props,
                Buf::Adj,
                Buf::AdjRows,
                mu,
                Buf::AdjIterates,
                Buf::TanState,
                Buf::RhsDiagonal,
                Buf::AdjParticle,
            ],
            record,
            n,
        )
    }

    /// `adjoint_lg_start`: lx and lv of the step's start.
    pub(in crate::gpu) fn adjoint_lg_start(&mut self, bits: u32) -> Result<Op, GpuError> {
        let (record, n) = (self.mode(bits), self.n);
        self.dispatch(
            ADJOINT_LG_START,
            &[
                Buf::Props,
                Buf::Adj,
                Buf::SpringParams,
                Buf::AdjRows,
                Buf::RhsDiagonal,
                Buf::TanState,
                Buf::AdjLx,
                Buf::AdjLv,
            ],
            record,
            n,
        )
    }
}
