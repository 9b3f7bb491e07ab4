//! The replay of a solver's recordings on its device ([`Replay`]): a recording's ops run
//! in one compute pass, then a readback.

use std::sync::atomic::{AtomicBool, Ordering};

use super::buffers::{Buf, Buffers};
use super::engine::Engine;
use super::recording::Op;
use crate::gpu::device::submit::Submitter;
use crate::gpu::error::GpuError;

/// A solver's recordings on its device: what [`Replay::read`] runs.
pub(in crate::gpu) struct Replay<'a> {
    pub(in crate::gpu) host: &'a Submitter,
    pub(in crate::gpu) engine: &'a Engine,
    pub(in crate::gpu) buffers: &'a Buffers,
    /// Cleared when a diagnostic's ops rewrite the force buffer (see `Program::prologue`).
    pub(in crate::gpu) field_fresh: &'a AtomicBool,
}

impl Replay<'_> {
    /// Runs `ops` (if any), then copies the byte ranges `copies` of the given buffers to
    /// the host in one submission.
    pub(in crate::gpu) fn read(
        &self,
        ops: &[Op],
        copies: &[(Buf, u64, u64)],
    ) -> Result<Vec<u8>, GpuError> {
        let copies = copies
            .iter()
            .map(|&(b, src, size)| Ok((self.buffers.get(b)?, src, size)))
            .collect::<Result<Vec<_>, GpuError>>()?;
        if ops.is_empty() {
            return self.host.run_and_read(None, &copies);
        }
        // Diagnostics rewrite the force buffer.
        self.field_fresh.store(false, Ordering::Relaxed);
        let record = |pass: &mut wgpu::ComputePass<'_>| self.engine.replay(pass, ops);
        self.host.run_and_read(Some(&record), &copies)
    }
}
