//! The replay of a solver's recordings on its device ([`Replay`]): a recording's ops run
//! in one compute pass, then a readback or a submission without waiting.

use std::sync::atomic::{AtomicBool, Ordering};

use super::buffers::{Buf, Buffers};
use super::engine::Engine;
use super::recording::{Op, StageKernels};
use crate::gpu::device::submit::Submitter;
use crate::gpu::error::GpuError;

/// A solver's recordings on its device: what [`Replay::read`] and [`Replay::submit`] run.
pub(in crate::gpu) struct Replay<'a> {
    pub(in crate::gpu) host: &'a Submitter,
    pub(in crate::gpu) engine: &'a Engine,
    pub(in crate::gpu) buffers: &'a Buffers,
    /// Cleared when a diagnostic's ops rewrite the force buffer (see `Program::prologue`).
    pub(in crate::gpu) field_fresh: &'a AtomicBool,
}

impl Replay<'_> {
    /// Runs `ops` (if any; DDEF evaluations record `ddef`'s kernels), then copies the
    /// byte ranges `copies` of the given buffers to the host in one submission.
    pub(in crate::gpu) fn read(
        &self,
        ops: &[Op],
        ddef: Option<&dyn StageKernels>,
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
        let record = |pass: &mut wgpu::ComputePass<'_>| self.engine.replay(pass, ops, ddef);
        self.host.run_and_read(Some(&record), &copies)
    }

    /// Submits `ops` in one compute pass labelled `label` without waiting.
    pub(in crate::gpu) fn submit(
        &self,
        ops: &[Op],
        ddef: Option<&dyn StageKernels>,
        label: &str,
    ) -> Result<(), GpuError> {
        self.host
            .submit_pass(label, |pass| self.engine.replay(pass, ops, ddef))
    }
}
