//! The forward-tangent family, in `tangents/`: the field-force JVP (`tangent_coulomb`),
//! the spring-force JVP and right-hand side (`tangent_forces`), local-global's start and
//! local step (`tangent_lg_prepare`, `tangent_lg_rhs`), the end of a tangent step
//! (`tangent_integrate`) and a copy (`tangent_copy`); and their launchers, which
//! `solver::tangent`'s hooks call with the direction in the dispatch record.

use crate::gpu::error::GpuError;
use crate::gpu::host::buffers::Buf;
use crate::gpu::host::recorder::Recorder;
use crate::gpu::host::recording::Op;
use crate::gpu::layout::Dispatch;
use crate::gpu::shader::Access::{Read, ReadWrite};
use crate::gpu::shader::{Kernel, Library, TANGENT_COULOMB_TARGETS_CPU};

wgsl_enum! {
    /// Bits of `tangent_coulomb`'s mode.
    pub enum CoulombTangentBit {
        /// The all-pairs Coulomb term runs (else external charges and field only).
        AllPairs = "TANGENT_ALL_PAIRS" = 1,
        /// At t + h (Verlet's second force, before the clock advances).
        Later = "TANGENT_LATER" = 2,
        /// The adjoint: the external field's gradient transposed (the rest is symmetric).
        Transpose = "TANGENT_TRANSPOSE" = 4,
    }
}

wgsl_enum! {
    /// Bits of `tangent_forces`' and `tangent_lg_prepare`'s mode.
    pub enum TangentBit {
        /// The direction has active particles: the field JVP in `RhsDiagonal` is added.
        Field = "TANGENT_FIELD" = 1,
        /// Explicit integrators: the damped force JVP, then the kick (`tangent_forces`).
        Kick = "TANGENT_KICK" = 2,
    }
}

wgsl_enum! {
    /// How `tangent_integrate` ends a tangent step.
    pub enum TangentEnd {
        /// dv = the solution, dx += h dv.
        Step = "TANGENT_STEP" = 0,
        /// dv (or local-global's dz) = the solution only.
        VelocityOnly = "TANGENT_DV_ONLY" = 1,
        /// The last local-global alternation: dz = the solution, dv = (dz - dx) / h,
        /// dx = dz.
        LocalGlobal = "TANGENT_LG_END" = 2,
    }
}

pub const TANGENT_COULOMB: Kernel = Kernel {
    name: "tangent_coulomb",
    body: include_str!("tangents/tangent_coulomb.wgsl"),
    libs: &[
        Library::Layout,
        Library::World,
        Library::Blocks,
        Library::Physics,
    ],
    storage: &[Read, Read, Read, Read, Read, Read, ReadWrite],
    constants: CoulombTangentBit::WGSL,
    cpu_targets: Some(TANGENT_COULOMB_TARGETS_CPU),
};

pub const TANGENT_FORCES: Kernel = Kernel {
    name: "tangent_forces",
    body: include_str!("tangents/tangent_forces.wgsl"),
    libs: &[
        Library::Layout,
        Library::World,
        Library::Adjacency,
        Library::Blocks,
        Library::Physics,
    ],
    storage: &[Read, Read, Read, Read, Read, Read, ReadWrite, ReadWrite],
    constants: TangentBit::WGSL,
    cpu_targets: None,
};

pub const TANGENT_INTEGRATE: Kernel = Kernel {
    name: "tangent_integrate",
    body: include_str!("tangents/tangent_integrate.wgsl"),
    libs: &[Library::Layout],
    storage: &[Read, ReadWrite],
    constants: TangentEnd::WGSL,
    cpu_targets: None,
};

pub const TANGENT_LG_PREPARE: Kernel = Kernel {
    name: "tangent_lg_prepare",
    body: include_str!("tangents/tangent_lg_prepare.wgsl"),
    libs: &[Library::Layout, Library::Adjacency, Library::Blocks],
    storage: &[Read, Read, Read, Read, ReadWrite, ReadWrite],
    constants: TangentBit::WGSL,
    cpu_targets: None,
};

pub const TANGENT_LG_RHS: Kernel = Kernel {
    name: "tangent_lg_rhs",
    body: include_str!("tangents/tangent_lg_rhs.wgsl"),
    libs: &[
        Library::Layout,
        Library::World,
        Library::Adjacency,
        Library::Blocks,
        Library::Physics,
    ],
    storage: &[Read, Read, Read, Read, Read, Read, ReadWrite, ReadWrite],
    constants: &[],
    cpu_targets: None,
};

pub const TANGENT_COPY: Kernel = Kernel {
    name: "tangent_copy",
    body: include_str!("tangents/tangent_copy.wgsl"),
    libs: &[Library::Layout],
    storage: &[Read, ReadWrite],
    constants: &[],
    cpu_targets: None,
};

pub const KERNELS: &[Kernel] = &[
    TANGENT_COULOMB,
    TANGENT_FORCES,
    TANGENT_INTEGRATE,
    TANGENT_LG_PREPARE,
    TANGENT_LG_RHS,
    TANGENT_COPY,
];

impl Recorder<'_> {
    /// `tangent_coulomb` for direction `d` over its `active` particles (none: nothing):
    /// the field-force JVP into `RhsDiagonal`, at the clock's time or, with `later`, at
    /// t + h.
    pub(in crate::gpu) fn tangent_field(
        &mut self,
        ops: &mut Vec<Op>,
        d: u32,
        active: u32,
        all_pairs: bool,
        later: bool,
    ) -> Result<(), GpuError> {
        self.tangent_field_mode(ops, d, active, all_pairs, later, false)
    }

    /// [`Self::tangent_field`], with the external field's gradient transposed when
    /// `transpose` (the adjoint's field vjp, for a zero direction).
    pub(in crate::gpu) fn tangent_field_mode(
        &mut self,
        ops: &mut Vec<Op>,
        d: u32,
        active: u32,
        all_pairs: bool,
        later: bool,
        transpose: bool,
    ) -> Result<(), GpuError> {
        if active == 0 {
            return Ok(());
        }
        let bit = |on: bool, b: CoulombTangentBit| if on { b.bits() } else { 0 };
        let record = self.record(Dispatch {
            iter: d,
            mode: bit(all_pairs, CoulombTangentBit::AllPairs)
                | bit(later, CoulombTangentBit::Later)
                | bit(transpose, CoulombTangentBit::Transpose),
            block: active,
            ..Default::default()
        });
        ops.push(self.dispatch(
            TANGENT_COULOMB,
            &[
                Buf::X,
                Buf::Props,
                Buf::TanState,
                Buf::TanDir,
                Buf::TanActive,
                Buf::Clock,
                Buf::RhsDiagonal,
            ],
            record,
            active,
        )?);
        Ok(())
    }

    /// `tangent_forces` with the forward velocity `vel` (IMEX: v'; explicit: the kick's
    /// v), `record` carrying the direction and its `TangentBit`s.
    pub(in crate::gpu) fn tangent_forces(&mut self, vel: Buf, record: u32) -> Result<Op, GpuError> {
        let n = self.n;
        self.dispatch(
            TANGENT_FORCES,
            &[
                Buf::Props,
                Buf::X,
                vel,
                Buf::Adj,
                Buf::TanDir,
                Buf::TanState,
                Buf::TanU,
                Buf::RhsDiagonal,
            ],
            record,
            n,
        )
    }

    /// `tangent_integrate` of direction `d` from the solution `sol`.
    pub(in crate::gpu) fn tangent_integrate(
        &mut self,
        sol: Buf,
        d: u32,
        end: TangentEnd,
    ) -> Result<Op, GpuError> {
        let record = self.record(Dispatch {
            iter: d,
            mode: end.bits(),
            ..Default::default()
        });
        let n = self.n;
        self.dispatch(TANGENT_INTEGRATE, &[sol, Buf::TanState], record, n)
    }

    /// `tangent_lg_prepare`, `record` carrying the direction and its `TangentBit`s.
    pub(in crate::gpu) fn tangent_lg_prepare(&mut self, record: u32) -> Result<Op, GpuError> {
        let n = self.n;
        self.dispatch(
            TANGENT_LG_PREPARE,
            &[
                Buf::Props,
                Buf::Adj,
                Buf::TanDir,
                Buf::RhsDiagonal,
                Buf::TanState,
                Buf::TanA,
            ],
            record,
            n,
        )
    }

    /// `tangent_lg_rhs` of direction `d` for the alternation whose forward solution is
    /// `solution` (its iterate in `TanZ`).
    pub(in crate::gpu) fn tangent_lg_rhs(&mut self, d: u32, solution: Buf) -> Result<Op, GpuError> {
        let record = self.record(Dispatch {
            iter: d,
            ..Default::default()
        });
        let n = self.n;
        self.dispatch(
            TANGENT_LG_RHS,
            &[
                Buf::Adj,
                Buf::TanDir,
                Buf::TanZ,
                solution,
                Buf::TanA,
                Buf::TanState,
                Buf::TanU,
                Buf::RhsDiagonal,
            ],
            record,
            n,
        )
    }

    /// `tangent_copy`: `TanZ` = `src`.
    pub(in crate::gpu) fn tangent_copy(&mut self, src: Buf) -> Result<Op, GpuError> {
        self.copy_into(src, Buf::TanZ, 0)
    }

    /// `tangent_copy`: slot `slot` (n vec4 each) of `dst` = `src`.
    pub(in crate::gpu) fn copy_into(
        &mut self,
        src: Buf,
        dst: Buf,
        slot: u32,
    ) -> Result<Op, GpuError> {
        let record = self.record(Dispatch {
            iter: slot,
            ..Default::default()
        });
        let n = self.n;
        self.dispatch(TANGENT_COPY, &[src, dst], record, n)
    }
}
