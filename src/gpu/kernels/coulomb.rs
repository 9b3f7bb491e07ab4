//! The Coulomb family: `coulomb_sources` (the charged particles compacted into sources)
//! and `coulomb_tiled` (the all-pairs sum over workgroup-memory tiles), in `coulomb/`,
//! and their launcher.

use crate::gpu::error::GpuError;
use crate::gpu::host::buffers::Buf;
use crate::gpu::host::recorder::Recorder;
use crate::gpu::host::recording::Op;
use crate::gpu::shader::Access::{Read, ReadWrite};
use crate::gpu::shader::{Kernel, Library, COULOMB_TARGETS_CPU};

pub const COULOMB_SOURCES: Kernel = Kernel {
    name: "coulomb_sources",
    body: include_str!("coulomb/coulomb_sources.wgsl"),
    libs: &[Library::Layout],
    storage: &[Read, Read, Read, ReadWrite],
    constants: &[],
    cpu_targets: None,
};

pub const COULOMB_TILED: Kernel = Kernel {
    name: "coulomb_tiled",
    body: include_str!("coulomb/coulomb_tiled.wgsl"),
    libs: &[Library::Layout, Library::World, Library::Physics],
    storage: &[Read, Read, ReadWrite],
    constants: &[],
    cpu_targets: Some(COULOMB_TARGETS_CPU),
};

pub const KERNELS: &[Kernel] = &[COULOMB_SOURCES, COULOMB_TILED];

impl Recorder<'_> {
    /// The Coulomb forces over the compacted charges (`coulomb_sources`), added to the
    /// force buffer: tiled all-pairs, or with DDEF (unless `exact`, as the energy wants)
    /// a DDEF evaluation.
    pub(in crate::gpu) fn coulomb(
        &mut self,
        ops: &mut Vec<Op>,
        exact: bool,
    ) -> Result<(), GpuError> {
        let nc = self.nc;
        if nc == 0 {
            return Ok(());
        }
        let m0 = self.mode(0);
        ops.push(self.dispatch(
            COULOMB_SOURCES,
            &[Buf::X, Buf::Props, Buf::Charged, Buf::Sources],
            m0,
            nc,
        )?);
        if self.ddef_layout.is_some() && !exact {
            self.ddef(ops)?;
        } else {
            ops.push(self.dispatch(
                COULOMB_TILED,
                &[Buf::Sources, Buf::Charged, Buf::Force],
                m0,
                nc,
            )?);
        }
        Ok(())
    }
}
