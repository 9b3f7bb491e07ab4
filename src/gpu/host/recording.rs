//! A recording: the typed list of operations a step (or a diagnostic) replays, in the
//! manner of vello's `Recording`. It names pipelines, bind groups and dispatch records by
//! index into the engine (`host::engine`), which owns them; the recording owns
//! nothing on the device.

/// One kernel launch: indices into the engine's pipelines and bind groups, the byte
/// offset of its `Dispatch` record and its workgroup grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::gpu) struct DispatchOp {
    pub(in crate::gpu) pipeline: usize,
    pub(in crate::gpu) group: usize,
    /// Byte offset of its `Dispatch` record.
    pub(in crate::gpu) record: u32,
    pub(in crate::gpu) grid: [u32; 2],
}

/// One operation of a recording.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::gpu) enum Op {
    /// A solver kernel.
    Dispatch(DispatchOp),
    /// A DDEF force evaluation (`coulomb.method = "ddef"`): the host stage (read the
    /// charged positions back, build or reuse the grid and lists, upload them) when the
    /// uploaded lists are not current, then the three DDEF kernels. `moved`: the
    /// positions changed since the step began (Verlet's second force), so the lists are
    /// stale even if they were current at the step's start.
    Ddef { moved: bool },
}

/// What an [`Op::Ddef`] records when its lists are current: the DDEF kernels
/// (`kernels::ddef::GpuDdef`), which own their pipelines and bind groups.
pub(in crate::gpu) trait StageKernels {
    fn record(&self, pass: &mut wgpu::ComputePass<'_>);
}

/// Kernel launches in `ops` (a DDEF evaluation counts its three kernels).
pub(in crate::gpu) fn dispatch_count(ops: &[Op]) -> usize {
    ops.iter()
        .map(|op| match op {
            Op::Dispatch(_) => 1,
            Op::Ddef { .. } => 3,
        })
        .sum()
}
