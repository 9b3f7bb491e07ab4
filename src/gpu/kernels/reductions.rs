//! The reduction family, in `reductions/`: `energy_reduce` (the energy terms per
//! workgroup) and `dot_reduce` (every reduction's second stage, one workgroup per world),
//! and their launchers.

use crate::gpu::error::GpuError;
use crate::gpu::host::buffers::Buf;
use crate::gpu::host::recorder::{refuse, Recorder};
use crate::gpu::host::recording::Op;
use crate::gpu::layout::{Dispatch, SCALAR_SLOTS};
use crate::gpu::shader::Access::{Read, ReadWrite};
use crate::gpu::shader::{Kernel, Library};

pub const DOT_REDUCE: Kernel = Kernel {
    name: "dot_reduce",
    body: include_str!("reductions/dot_reduce.wgsl"),
    libs: &[Library::Layout, Library::World, Library::Reduce],
    storage: &[Read, ReadWrite],
    constants: &[],
    cpu_targets: None,
};

pub const ENERGY_REDUCE: Kernel = Kernel {
    name: "energy_reduce",
    body: include_str!("reductions/energy_reduce.wgsl"),
    libs: &[
        Library::Layout,
        Library::World,
        Library::Reduce,
        Library::Adjacency,
        Library::Physics,
    ],
    storage: &[Read, Read, Read, Read, Read, Read, Read, ReadWrite],
    constants: &[],
    cpu_targets: None,
};

pub const KERNELS: &[Kernel] = &[DOT_REDUCE, ENERGY_REDUCE];

impl Recorder<'_> {
    /// Per-workgroup partial sums of the energies (two reduction blocks).
    pub(in crate::gpu) fn energy_reduce(&mut self) -> Result<Op, GpuError> {
        let (m0, n) = (self.mode(0), self.n);
        self.dispatch(
            ENERGY_REDUCE,
            &[
                Buf::X,
                Buf::V,
                Buf::Props,
                Buf::Force,
                Buf::SpringParams,
                Buf::Adj,
                Buf::Clock,
                Buf::Partials,
            ],
            m0,
            n,
        )
    }

    /// Second reduction stage: block `block` of the partial sums into scalar `slot`.
    pub(in crate::gpu) fn reduce(&mut self, slot: u32, block: u32) -> Result<Op, GpuError> {
        if slot >= SCALAR_SLOTS || block > 1 {
            return Err(refuse(
                DOT_REDUCE.name,
                format!("slot {slot} of {SCALAR_SLOTS}, block {block} of 2"),
            ));
        }
        let record = self.record(Dispatch {
            slot,
            block,
            ..Default::default()
        });
        // One workgroup per world whatever the grid of a single item.
        let worlds = self.worlds;
        self.grid_dispatch(
            DOT_REDUCE,
            &[Buf::Partials, Buf::Scalars],
            record,
            [worlds, 1],
        )
    }
}
