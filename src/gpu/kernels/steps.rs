//! The step family: the kernels that start and end a step around the solve, in `steps/`:
//! IMEX's right-hand side and diagonal (`rhs`), the end of an implicit step
//! (`integrate`), the explicit integrators' kicks (`explicit_step`) and local-global's
//! start and local step (`lg_prepare`, `lg_rhs`); and their launchers.

use crate::gpu::error::GpuError;
use crate::gpu::host::buffers::Buf;
use crate::gpu::host::recorder::Recorder;
use crate::gpu::host::recording::Op;
use crate::gpu::shader::Access::{Read, ReadWrite};
use crate::gpu::shader::{Kernel, Library};

wgsl_enum! {
    /// How `integrate` ends an implicit step: where the solve left its solution.
    pub enum IntegrateMode {
        /// IMEX, v' already in v: x' = x + h v'.
        Imex = "INTEGRATE_IMEX" = 0,
        /// IMEX, v' in the solve's scratch: copied to v first.
        ImexFromScratch = "INTEGRATE_IMEX_SOLUTION" = 1,
        /// Local-global, x' already in x: v' = (x' - x_t) / h.
        LocalGlobal = "INTEGRATE_LG" = 2,
        /// Local-global, x' in the solve's scratch: copied to x first.
        LocalGlobalFromScratch = "INTEGRATE_LG_SOLUTION" = 3,
    }
}

wgsl_enum! {
    /// The kick `explicit_step` makes.
    pub enum KickMode {
        /// Symplectic Euler: v += h a; x += h v; the clock advances.
        Euler = "KICK_EULER" = 0,
        /// Verlet's first half: v += h/2 a; x += h v.
        VerletFirst = "KICK_VERLET_FIRST" = 1,
        /// Verlet's second kick: v += h/2 a; the clock advances.
        VerletSecond = "KICK_VERLET_SECOND" = 2,
    }
}

pub const RHS: Kernel = Kernel {
    name: "rhs",
    body: include_str!("steps/rhs.wgsl"),
    libs: &[
        Library::Layout,
        Library::World,
        Library::Adjacency,
        Library::Blocks,
    ],
    storage: &[Read, Read, Read, Read, Read, ReadWrite],
    constants: &[],
    cpu_targets: None,
};

pub const INTEGRATE: Kernel = Kernel {
    name: "integrate",
    body: include_str!("steps/integrate.wgsl"),
    libs: &[Library::Layout, Library::World],
    storage: &[ReadWrite, ReadWrite, Read, Read, Read, ReadWrite],
    constants: IntegrateMode::WGSL,
    cpu_targets: None,
};

pub const EXPLICIT_STEP: Kernel = Kernel {
    name: "explicit_step",
    body: include_str!("steps/explicit_step.wgsl"),
    libs: &[Library::Layout, Library::World, Library::Adjacency],
    storage: &[ReadWrite, ReadWrite, Read, Read, Read, Read, ReadWrite],
    constants: KickMode::WGSL,
    cpu_targets: None,
};

pub const LG_PREPARE: Kernel = Kernel {
    name: "lg_prepare",
    body: include_str!("steps/lg_prepare.wgsl"),
    libs: &[Library::Layout, Library::World],
    storage: &[ReadWrite, Read, Read, Read, ReadWrite, ReadWrite],
    constants: &[],
    cpu_targets: None,
};

pub const LG_RHS: Kernel = Kernel {
    name: "lg_rhs",
    body: include_str!("steps/lg_rhs.wgsl"),
    libs: &[
        Library::Layout,
        Library::World,
        Library::Adjacency,
        Library::Blocks,
    ],
    storage: &[Read, Read, Read, Read, Read, Read, ReadWrite],
    constants: &[],
    cpu_targets: None,
};

pub const KERNELS: &[Kernel] = &[RHS, INTEGRATE, EXPLICIT_STEP, LG_PREPARE, LG_RHS];

impl Recorder<'_> {
    /// IMEX: the right-hand side b and the diagonal of A into `RhsDiagonal`.
    pub(in crate::gpu) fn rhs(&mut self) -> Result<Op, GpuError> {
        let (m0, n) = (self.mode(0), self.n);
        self.dispatch(
            RHS,
            &[
                Buf::V,
                Buf::Props,
                Buf::Force,
                Buf::SpringBlocks,
                Buf::Adj,
                Buf::RhsDiagonal,
            ],
            m0,
            n,
        )
    }

    /// The end of an implicit step from the solution; advances the clock.
    pub(in crate::gpu) fn integrate(&mut self, mode: IntegrateMode) -> Result<Op, GpuError> {
        let (record, n) = (self.mode(mode.bits()), self.n);
        self.dispatch(
            INTEGRATE,
            &[
                Buf::X,
                Buf::V,
                Buf::SolveScratch,
                Buf::StepStart,
                Buf::Props,
                Buf::Clock,
            ],
            record,
            n,
        )
    }

    /// Local-global: y, x_t and the constant part of the right-hand side.
    pub(in crate::gpu) fn lg_prepare(&mut self) -> Result<Op, GpuError> {
        let (m0, n) = (self.mode(0), self.n);
        self.dispatch(
            LG_PREPARE,
            &[
                Buf::X,
                Buf::V,
                Buf::Props,
                Buf::Force,
                Buf::StepStart,
                Buf::ConstantRhs,
            ],
            m0,
            n,
        )
    }

    /// Local-global: the local step's right-hand side from the iterate `cur`.
    pub(in crate::gpu) fn lg_rhs(&mut self, cur: Buf) -> Result<Op, GpuError> {
        let (m0, n) = (self.mode(0), self.n);
        self.dispatch(
            LG_RHS,
            &[
                Buf::Props,
                Buf::StepStart,
                cur,
                Buf::ConstantRhs,
                Buf::SpringParams,
                Buf::Adj,
                Buf::RhsDiagonal,
            ],
            m0,
            n,
        )
    }

    /// An explicit kick (x and v updated in place).
    pub(in crate::gpu) fn explicit_step(&mut self, kick: KickMode) -> Result<Op, GpuError> {
        let (record, n) = (self.mode(kick.bits()), self.n);
        self.dispatch(
            EXPLICIT_STEP,
            &[
                Buf::X,
                Buf::V,
                Buf::Props,
                Buf::Force,
                Buf::SpringBlocks,
                Buf::Adj,
                Buf::Clock,
            ],
            record,
            n,
        )
    }
}
