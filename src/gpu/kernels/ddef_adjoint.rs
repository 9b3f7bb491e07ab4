//! The DDEF adjoint family, in `ddef_adjoint/`: the transpose (VJP) of the lattice DDEF
//! forces with the forward evaluation's structure frozen (frame, tetrahedra, sorted
//! order, near/far split), `crate::ddef::lattice_adjoint` being the f64 reference
//! (docs/physics.md §9, (9.9)-(9.12)). Run on the buffers a forward `ddef` evaluation at
//! the same state left, for a force cotangent w in a direction's dx bank of `TanState`:
//! 1. `ddef_adjoint_sources`: per sorted source (x, qs) and c = qs w (`TanSorted`);
//! 2. `ddef_tet_adjoint`: per tetrahedron its path vertices' cotangents (`DdefTetBar`);
//! 3. `ddef_site_adjoint`: per site its far value's cotangent (`TanFar`);
//! 4. `ddef_far_adjoint`: the far field's transpose per source and chunk of sites;
//! 5. `ddef_gather_adjoint`: per target its own field's terms (near pairs, the weights'
//!    transpose, w . E);
//! 6. `ddef_source_adjoint`: per source the reversed near walk and corrections, the rows
//!    of 4 and 5 added in order, (x_bar, qs_bar) written to its particle (`DdefAdjOut`).
//! 7. `ddef_adjoint_apply` (the GPU adjoint's field transpose, `Recorder::ddef_field_vjp`):
//!    x_bar added to `RhsDiagonal`, h qs_bar to the charge cotangents.
//!
//! One writer per element, no atomics: reruns give the same bits.

use crate::gpu::error::GpuError;
use crate::gpu::host::buffers::Buf;
use crate::gpu::host::recorder::Recorder;
use crate::gpu::host::recording::Op;
use crate::gpu::layout::{Dispatch, WORKGROUP_SIZE};
use crate::gpu::shader::Access::{Read, ReadWrite};
use crate::gpu::shader::{Kernel, Library};

wgsl_enum! {
    /// Bits of `ddef_adjoint_apply`'s mode.
    pub enum DdefAdjointBit {
        /// Add h qs_bar to the charge cotangents (`AdjParticle`).
        Charges = "ADJ_DDEF_CHARGES" = 1,
    }
}

macro_rules! adjoint_kernel {
    ($name:literal, [$($lib:ident),*], [$($acc:ident),*]) => {
        Kernel {
            name: $name,
            body: include_str!(concat!("ddef_adjoint/", $name, ".wgsl")),
            libs: &[$(Library::$lib),*],
            storage: &[$($acc),*],
            constants: &[],
            cpu_targets: None,
        }
    };
}

pub const DDEF_ADJOINT_SOURCES: Kernel = adjoint_kernel!(
    "ddef_adjoint_sources",
    [Layout],
    [Read, Read, Read, Read, Read, ReadWrite]
);
pub const DDEF_TET_ADJOINT: Kernel = adjoint_kernel!(
    "ddef_tet_adjoint",
    [Layout, Lattice],
    [Read, Read, Read, ReadWrite]
);
pub const DDEF_SITE_ADJOINT: Kernel = adjoint_kernel!(
    "ddef_site_adjoint",
    [Layout, Lattice],
    [Read, Read, Read, ReadWrite]
);
pub const DDEF_FAR_ADJOINT: Kernel = adjoint_kernel!(
    "ddef_far_adjoint",
    [Layout, World, Physics, Lattice],
    [Read, Read, Read, Read, Read, ReadWrite]
);
pub const DDEF_GATHER_ADJOINT: Kernel = adjoint_kernel!(
    "ddef_gather_adjoint",
    [Layout, World, Physics, Lattice, DdefWork, NearWalk],
    [Read, Read, Read, Read, Read, Read, Read, ReadWrite]
);
pub const DDEF_SOURCE_ADJOINT: Kernel = adjoint_kernel!(
    "ddef_source_adjoint",
    [Layout, World, Physics, Lattice, DdefWork, NearWalk],
    [Read, Read, Read, Read, Read, Read, Read, ReadWrite]
);

pub const DDEF_ADJOINT_APPLY: Kernel = Kernel {
    constants: DdefAdjointBit::WGSL,
    ..adjoint_kernel!(
        "ddef_adjoint_apply",
        [Layout, World, Blocks],
        [Read, Read, ReadWrite, ReadWrite]
    )
};

pub const KERNELS: &[Kernel] = &[
    DDEF_ADJOINT_SOURCES,
    DDEF_TET_ADJOINT,
    DDEF_SITE_ADJOINT,
    DDEF_FAR_ADJOINT,
    DDEF_GATHER_ADJOINT,
    DDEF_SOURCE_ADJOINT,
    DDEF_ADJOINT_APPLY,
];

impl Recorder<'_> {
    /// The DDEF forces' transpose applied to the force cotangent in direction `d`'s dx
    /// bank of `TanState`, written per charged particle to `DdefAdjOut` as (x_bar,
    /// qs_bar) (see the module doc); nothing without DDEF. Runs after a `ddef`
    /// evaluation at the state being differentiated.
    pub(in crate::gpu) fn ddef_adjoint(
        &mut self,
        ops: &mut Vec<Op>,
        d: u32,
    ) -> Result<(), GpuError> {
        let Some(layout) = self.ddef_layout.clone() else {
            return Ok(());
        };
        let nc = self.nc;
        let chunks = layout.site_chunks as u32;
        let direction = self.record(Dispatch {
            slot: d,
            ..Default::default()
        });
        let rows = self.record(Dispatch {
            iter: chunks,
            slot: d,
            ..Default::default()
        });
        let m0 = self.mode(0);
        ops.push(self.dispatch(
            DDEF_ADJOINT_SOURCES,
            &[
                Buf::DdefWorlds,
                Buf::Starts,
                Buf::SortedSrc,
                Buf::SortedKey,
                Buf::TanState,
                Buf::TanSorted,
            ],
            direction,
            nc,
        )?);
        ops.push(self.dispatch(
            DDEF_TET_ADJOINT,
            &[
                Buf::DdefWorlds,
                Buf::Starts,
                Buf::TanSorted,
                Buf::DdefTetBar,
            ],
            m0,
            layout.tets as u32,
        )?);
        ops.push(self.dispatch(
            DDEF_SITE_ADJOINT,
            &[
                Buf::DdefWorlds,
                Buf::DdefTables,
                Buf::DdefTetBar,
                Buf::TanFar,
            ],
            m0,
            layout.sites as u32,
        )?);
        ops.push(self.grid_dispatch(
            DDEF_FAR_ADJOINT,
            &[
                Buf::DdefWorlds,
                Buf::Starts,
                Buf::TanSorted,
                Buf::SortedKey,
                Buf::TanFar,
                Buf::DdefAdjPart,
            ],
            rows,
            [
                (layout.slots as u32).div_ceil(WORKGROUP_SIZE).max(1),
                chunks,
            ],
        )?);
        // The forward gather's work items.
        let grid = self.grid(self.gather_items(&layout) * WORKGROUP_SIZE);
        ops.push(self.grid_dispatch(
            DDEF_GATHER_ADJOINT,
            &[
                Buf::DdefWorlds,
                Buf::DdefTables,
                Buf::Starts,
                Buf::TanSorted,
                Buf::SortedKey,
                Buf::Far,
                Buf::TanState,
                Buf::DdefAdjPart,
            ],
            rows,
            grid,
        )?);
        ops.push(self.grid_dispatch(
            DDEF_SOURCE_ADJOINT,
            &[
                Buf::DdefWorlds,
                Buf::DdefTables,
                Buf::Starts,
                Buf::TanSorted,
                Buf::SortedKey,
                Buf::DdefTetBar,
                Buf::DdefAdjPart,
                Buf::DdefAdjOut,
            ],
            rows,
            grid,
        )?);
        Ok(())
    }

    /// The GPU adjoint's DDEF field transpose for the cotangent mu in direction 0's dx
    /// bank of `TanState`, at the current positions (the reversed step's x_t, or x' at
    /// t + h): the forward's DDEF evaluation again, so the frozen structure is this
    /// state's (the force it adds is undone: `Force` is kept in `DdefAdjOut` meanwhile),
    /// then the transpose, then `ddef_adjoint_apply` (with `charges`, the charge
    /// cotangents too). After `tangent_coulomb`'s transposed external part.
    pub(in crate::gpu) fn ddef_field_vjp(
        &mut self,
        ops: &mut Vec<Op>,
        charges: bool,
    ) -> Result<(), GpuError> {
        if self.ddef_layout.is_none() || self.nc == 0 {
            return Ok(());
        }
        ops.push(self.copy_into(Buf::Force, Buf::DdefAdjOut, 0)?);
        self.coulomb(ops, false)?;
        ops.push(self.copy_into(Buf::DdefAdjOut, Buf::Force, 0)?);
        self.ddef_adjoint(ops, 0)?;
        let mode = self.mode(if charges {
            DdefAdjointBit::Charges.bits()
        } else {
            0
        });
        let n = self.n;
        ops.push(self.dispatch(
            DDEF_ADJOINT_APPLY,
            &[
                Buf::Props,
                Buf::DdefAdjOut,
                Buf::RhsDiagonal,
                Buf::AdjParticle,
            ],
            mode,
            n,
        )?);
        Ok(())
    }
}
