//! The per-particle field family, in `field/`: `external_forces`, the external charges
//! and field and gravity on every particle, and `drag`, the linear drag -c v; and the
//! launcher of all the non-spring forces (these, then the Coulomb sum of `coulomb`).

use crate::gpu::error::GpuError;
use crate::gpu::host::buffers::Buf;
use crate::gpu::host::recorder::Recorder;
use crate::gpu::host::recording::Op;
use crate::gpu::shader::Access::{Read, ReadWrite};
use crate::gpu::shader::{Kernel, Library};

wgsl_enum! {
    /// When the forces are evaluated (`disp.mode` of `external_forces`): the step
    /// clock's time t, or t + h (Verlet's second force, before the clock advances).
    pub enum ForceTime {
        T = "AT_T" = 0,
        TPlusH = "AT_T_PLUS_H" = 1,
    }
}

pub const EXTERNAL_FORCES: Kernel = Kernel {
    name: "external_forces",
    body: include_str!("field/external_forces.wgsl"),
    libs: &[Library::Layout, Library::World, Library::Physics],
    storage: &[Read, Read, Read, ReadWrite],
    constants: ForceTime::WGSL,
    cpu_targets: None,
};

pub const DRAG: Kernel = Kernel {
    name: "drag",
    body: include_str!("field/drag.wgsl"),
    libs: &[Library::Layout, Library::World],
    storage: &[Read, ReadWrite],
    constants: &[],
    cpu_targets: None,
};

pub const KERNELS: &[Kernel] = &[EXTERNAL_FORCES, DRAG];

impl Recorder<'_> {
    /// Whether a non-spring force reads the velocities (the drag of some world): Verlet
    /// then evaluates them at each kick instead of reusing the last step's.
    pub(in crate::gpu) fn field_reads_velocity(&self) -> bool {
        self.configs.iter().any(|c| c.world.drag != 0.0)
    }

    /// All non-spring forces at `time`: external and gravity per particle, the drag at
    /// the current velocities (not when `exact`: the energy reads the potential alone),
    /// then the Coulomb sum (exact all-pairs when `exact`, else the configured method).
    pub(in crate::gpu) fn field(
        &mut self,
        ops: &mut Vec<Op>,
        time: ForceTime,
        exact: bool,
    ) -> Result<(), GpuError> {
        let record = self.mode(time.bits());
        let n = self.n;
        ops.push(self.dispatch(
            EXTERNAL_FORCES,
            &[Buf::X, Buf::Props, Buf::Clock, Buf::Force],
            record,
            n,
        )?);
        if self.field_reads_velocity() && !exact {
            // No modes: it shares the record of `external_forces`.
            ops.push(self.dispatch(DRAG, &[Buf::V, Buf::Force], record, n)?);
        }
        self.coulomb(ops, exact)
    }
}
