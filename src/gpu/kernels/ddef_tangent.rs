//! The DDEF tangent family, in `ddef_tangent/`: the forward tangent of the lattice DDEF
//! field with the forward evaluation's structure frozen (frame, tetrahedra, sorted order,
//! near/far split: `crate::ddef::lattice_tangent` is the f64 reference, docs/physics.md
//! §9, "Through DDEF"), run per direction after `tangent_coulomb` (which then leaves out the internal
//! Coulomb sum) on the buffers the forward's `ddef` evaluation left:
//! 1. `ddef_tangent_sources`: the sorted sources beside the direction's tangents;
//! 2. `ddef_far_tangent`, then the forward's own `ddef_far_sum`: the far field's tangent
//!    at the sites (its chunks in `FarPart`, free once the forward summed them);
//! 3. `ddef_gather_tangent`: per charge E and dE, d(q E) added to `RhsDiagonal`.
//!
//! Each kernel is its forward kernel's derivative line for line (the same work split,
//! cursor and membership tests), with the per-pair derivative `point_field_jvp` beside
//! `inv_dist` in `physics.wgsl`. No atomics: the tangents rerun to the same bits.

use crate::gpu::error::GpuError;
use crate::gpu::host::buffers::Buf;
use crate::gpu::host::recorder::Recorder;
use crate::gpu::host::recording::Op;
use crate::gpu::kernels::ddef::DDEF_FAR_SUM;
use crate::gpu::layout::{Dispatch, WORKGROUP_SIZE};
use crate::gpu::shader::Access::{Read, ReadWrite};
use crate::gpu::shader::{Kernel, Library};

pub const DDEF_TANGENT_SOURCES: Kernel = Kernel {
    name: "ddef_tangent_sources",
    body: include_str!("ddef_tangent/ddef_tangent_sources.wgsl"),
    libs: &[Library::Layout],
    storage: &[Read, Read, Read, Read, Read, Read, ReadWrite],
    constants: &[],
    cpu_targets: None,
};

pub const DDEF_FAR_TANGENT: Kernel = Kernel {
    name: "ddef_far_tangent",
    body: include_str!("ddef_tangent/ddef_far_tangent.wgsl"),
    libs: &[
        Library::Layout,
        Library::World,
        Library::Physics,
        Library::Lattice,
        Library::FarWalk,
    ],
    storage: &[Read, Read, Read, Read, ReadWrite],
    constants: &[],
    cpu_targets: None,
};

pub const DDEF_GATHER_TANGENT: Kernel = Kernel {
    name: "ddef_gather_tangent",
    body: include_str!("ddef_tangent/ddef_gather_tangent.wgsl"),
    libs: &[
        Library::Layout,
        Library::World,
        Library::Blocks,
        Library::Physics,
        Library::Lattice,
        Library::DdefWork,
        Library::NearWalk,
    ],
    storage: &[Read, Read, Read, Read, Read, Read, Read, ReadWrite],
    constants: &[],
    cpu_targets: None,
};

pub const KERNELS: &[Kernel] = &[DDEF_TANGENT_SOURCES, DDEF_FAR_TANGENT, DDEF_GATHER_TANGENT];

impl Recorder<'_> {
    /// The DDEF field's tangent along direction `d`, added to `RhsDiagonal` (see the
    /// module doc); nothing without DDEF.
    pub(in crate::gpu) fn ddef_tangent(
        &mut self,
        ops: &mut Vec<Op>,
        d: u32,
    ) -> Result<(), GpuError> {
        let Some(layout) = self.ddef_layout.clone() else {
            return Ok(());
        };
        let nc = self.nc;
        let record = self.record(Dispatch {
            iter: d,
            ..Default::default()
        });
        let m0 = self.mode(0);
        ops.push(self.dispatch(
            DDEF_TANGENT_SOURCES,
            &[
                Buf::DdefWorlds,
                Buf::Starts,
                Buf::SortedSrc,
                Buf::SortedKey,
                Buf::TanState,
                Buf::TanDir,
                Buf::TanSorted,
            ],
            record,
            nc,
        )?);
        let blocks = layout.sites.div_ceil(u64::from(WORKGROUP_SIZE)) as u32;
        ops.push(self.grid_dispatch(
            DDEF_FAR_TANGENT,
            &[
                Buf::DdefWorlds,
                Buf::DdefTables,
                Buf::Starts,
                Buf::TanSorted,
                Buf::FarPart,
            ],
            m0,
            [blocks, layout.chunks as u32],
        )?);
        let sites = layout.sites as u32;
        ops.push(self.dispatch(
            DDEF_FAR_SUM,
            &[Buf::DdefWorlds, Buf::FarPart, Buf::TanFar],
            m0,
            sites,
        )?);
        // The forward gather's work items.
        let grid = self.grid(self.gather_items(&layout) * WORKGROUP_SIZE);
        ops.push(self.grid_dispatch(
            DDEF_GATHER_TANGENT,
            &[
                Buf::DdefWorlds,
                Buf::DdefTables,
                Buf::Starts,
                Buf::TanSorted,
                Buf::SortedKey,
                Buf::Far,
                Buf::TanFar,
                Buf::RhsDiagonal,
            ],
            m0,
            grid,
        )?);
        Ok(())
    }
}
