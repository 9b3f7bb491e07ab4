//! The device half a solver submits through ([`Submitter`]): device, queue, the
//! device-lost flag and the counts of submissions and compute passes; one-pass
//! submissions and one-submission readbacks.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::readback::read_buffers;
use super::{poll_error, scoped};
use crate::gpu::error::GpuError;

/// Device, queue and what has been submitted on them.
pub(in crate::gpu) struct Submitter {
    pub(in crate::gpu) device: wgpu::Device,
    pub(in crate::gpu) queue: wgpu::Queue,
    /// Set by the device-lost callback (headless solvers only).
    lost: Arc<Mutex<Option<String>>>,
    submissions: AtomicU64,
    compute_passes: AtomicU64,
    /// Submissions that copied device memory back to the host.
    readbacks: AtomicU64,
    /// Nanoseconds spent blocked in [`Self::wait`].
    wait_nanos: AtomicU64,
}

impl Submitter {
    /// The submitter of a caller's device and queue (embedding), once the queue is known
    /// to be the device's own: a queue of another device made the first submission
    /// panic inside wgpu (in that device's default error handler), where the solver's
    /// error scopes cannot see it. A closure registered on the queue runs when `device`
    /// is polled only if the queue is that device's.
    pub(in crate::gpu) fn embedded(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
    ) -> Result<Self, GpuError> {
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = done.clone();
        queue.on_submitted_work_done(move || flag.store(true, Ordering::Release));
        device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(poll_error)?;
        if !done.load(Ordering::Acquire) {
            return Err(GpuError::Validation(
                "the queue passed with the device is not that device's: pass the queue \
                 that the device's request_device returned with it"
                    .into(),
            ));
        }
        Ok(Self::new(
            device.clone(),
            queue.clone(),
            Arc::new(Mutex::new(None)),
        ))
    }

    pub(in crate::gpu) fn new(
        device: wgpu::Device,
        queue: wgpu::Queue,
        lost: Arc<Mutex<Option<String>>>,
    ) -> Self {
        Self {
            device,
            queue,
            lost,
            submissions: AtomicU64::new(0),
            compute_passes: AtomicU64::new(0),
            readbacks: AtomicU64::new(0),
            wait_nanos: AtomicU64::new(0),
        }
    }

    /// Seconds spent blocked in [`Self::wait`] so far.
    pub(in crate::gpu) fn wait_seconds(&self) -> f64 {
        self.wait_nanos.load(Ordering::Relaxed) as f64 * 1e-9
    }

    /// (queue submissions, compute passes, readbacks) so far.
    pub(in crate::gpu) fn counts(&self) -> (u64, u64, u64) {
        (
            self.submissions.load(Ordering::Relaxed),
            self.compute_passes.load(Ordering::Relaxed),
            self.readbacks.load(Ordering::Relaxed),
        )
    }

    /// Counts a queue submission made for the solver.
    pub(in crate::gpu) fn count_submission(&self) {
        self.submissions.fetch_add(1, Ordering::Relaxed);
    }

    /// Records one compute pass labelled `label` into `encoder` through `record`.
    pub(in crate::gpu) fn pass(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        label: &str,
        timestamp_writes: Option<wgpu::ComputePassTimestampWrites<'_>>,
        record: impl FnOnce(&mut wgpu::ComputePass<'_>),
    ) {
        self.compute_passes.fetch_add(1, Ordering::Relaxed);
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some(label),
            timestamp_writes,
        });
        record(&mut pass);
    }

    pub(in crate::gpu) fn encoder(&self, label: &str) -> wgpu::CommandEncoder {
        self.device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(label) })
    }

    /// Submits `encoder` (counted) without waiting.
    pub(in crate::gpu) fn submit(&self, encoder: wgpu::CommandEncoder) -> wgpu::SubmissionIndex {
        self.count_submission();
        self.queue.submit([encoder.finish()])
    }

    /// Waits for submission `index` (the time blocked is counted, see [`Self::wait_seconds`]).
    pub(in crate::gpu) fn wait(&self, index: wgpu::SubmissionIndex) -> Result<(), GpuError> {
        let start = std::time::Instant::now();
        let polled = self.device.poll(wgpu::PollType::Wait {
            submission_index: Some(index),
            timeout: None,
        });
        let nanos = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.wait_nanos.fetch_add(nanos, Ordering::Relaxed);
        polled.map_err(poll_error)?;
        Ok(())
    }

    /// Device loss is reported through the device-lost callback, which wgpu runs while
    /// polling. Only headless solvers install one: an embedding caller owns its device's
    /// callback (on a lost device, readbacks then fail with `Readback`).
    pub(in crate::gpu) fn check_lost(&self) -> Result<(), GpuError> {
        let _ = self.device.poll(wgpu::PollType::Poll);
        match self.lost.lock() {
            Ok(l) => match l.as_ref() {
                Some(m) => Err(GpuError::DeviceLost(m.clone())),
                None => Ok(()),
            },
            Err(_) => Err(GpuError::DeviceLost("device-lost flag poisoned".into())),
        }
    }

    /// Runs one pass through `record` (when given), then copies the byte ranges `copies`
    /// (buffer, offset, size) to the host: one submission, ranges concatenated in order.
    pub(in crate::gpu) fn run_and_read(
        &self,
        record: Option<&dyn Fn(&mut wgpu::ComputePass<'_>)>,
        copies: &[(&wgpu::Buffer, u64, u64)],
    ) -> Result<Vec<u8>, GpuError> {
        self.check_lost()?;
        let bytes = scoped(&self.device, || {
            let mut encoder = self.encoder("msc readback");
            if let Some(record) = record {
                self.pass(&mut encoder, "msc reductions", None, record);
            }
            self.count_submission();
            self.readbacks.fetch_add(1, Ordering::Relaxed);
            read_buffers(&self.device, &self.queue, encoder, copies, "msc readback")
        })?;
        self.check_lost()?;
        Ok(bytes)
    }
}
