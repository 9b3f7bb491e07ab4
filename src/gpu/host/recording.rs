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

/// One operation of a recording: a solver kernel's launch (a DDEF evaluation is the
/// launches of its kernels, `kernels::ddef`, like any other work).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::gpu) enum Op {
    Dispatch(DispatchOp),
}

/// Kernel launches in `ops`.
pub(in crate::gpu) fn dispatch_count(ops: &[Op]) -> usize {
    ops.len()
}
