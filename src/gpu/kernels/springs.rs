//! The spring family: `spring_assemble` (`springs/spring_assemble.wgsl`), each spring's
//! axis, force along it and block W_k of A, and its launcher.

use crate::gpu::error::GpuError;
use crate::gpu::host::buffers::Buf;
use crate::gpu::host::recorder::Recorder;
use crate::gpu::host::recording::Op;
use crate::gpu::shader::Access::{Read, ReadWrite};
use crate::gpu::shader::{Kernel, Library};

wgsl_enum! {
    /// What `spring_assemble` computes (`disp.mode`).
    pub enum SpringMode {
        /// The IMEX blocks W_k; the force without damping (damping goes to W_k).
        Implicit = "SPRINGS_IMPLICIT" = 0,
        /// The force with explicit damping, for the explicit integrators and diagnostics.
        Explicit = "SPRINGS_EXPLICIT" = 1,
    }
}

pub const SPRING_ASSEMBLE: Kernel = Kernel {
    name: "spring_assemble",
    body: include_str!("springs/spring_assemble.wgsl"),
    libs: &[Library::Layout, Library::World, Library::Physics],
    storage: &[Read, Read, Read, Read, ReadWrite],
    constants: SpringMode::WGSL,
    cpu_targets: None,
};

pub const KERNELS: &[Kernel] = &[SPRING_ASSEMBLE];

impl Recorder<'_> {
    /// `spring_assemble` (n, force, W_k per spring) at (x, v). Nothing without springs.
    pub(in crate::gpu) fn springs(
        &mut self,
        ops: &mut Vec<Op>,
        mode: SpringMode,
    ) -> Result<(), GpuError> {
        if self.ns == 0 {
            return Ok(());
        }
        let record = self.mode(mode.bits());
        let ns = self.ns;
        ops.push(self.dispatch(
            SPRING_ASSEMBLE,
            &[
                Buf::X,
                Buf::V,
                Buf::Springs,
                Buf::SpringParams,
                Buf::SpringBlocks,
            ],
            record,
            ns,
        )?);
        Ok(())
    }
}
