//! The one GPU device every row of a benchmark runs on ([`SharedDevice`]): opened at the
//! first GPU row and reused by the later ones, each row building its solvers on it and
//! dropping them, after which the device is waited on so that their buffers are freed
//! before the next row. A row that loses the device gets a fresh one for the next row.
//!
//! Why not a device per row: each one is a wgpu instance, an adapter enumeration and a
//! driver device, and a driver need not give all of that back when it is dropped (with a
//! device per row, an H200's Vulkan driver enumerated no adapter at all after about 30
//! rows of one process; lavapipe showed no growth).

use crate::gpu::{open_headless_device, GpuError, HeadlessDevice, HeadlessOptions};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The device the GPU rows share, opened on first use.
#[derive(Default)]
pub(crate) struct SharedDevice {
    /// The open device and its device-lost flag.
    current: Option<(HeadlessDevice, Arc<AtomicBool>)>,
    /// Devices opened so far (1 unless a row lost one).
    opened: usize,
}

impl SharedDevice {
    /// The device: the open one, or a new one at the first GPU row and after a row lost
    /// the previous one.
    pub(crate) fn get(&mut self) -> Result<&HeadlessDevice, GpuError> {
        if let Some((_, lost)) = &self.current {
            if lost.load(Ordering::Relaxed) {
                self.current = None;
            }
        }
        let (hd, _) = match self.current.take() {
            Some(open) => self.current.insert(open),
            None => {
                let hd = open_headless_device(&HeadlessOptions {
                    allow_software: true,
                })?;
                let lost = Arc::new(AtomicBool::new(false));
                let flag = lost.clone();
                hd.device
                    .set_device_lost_callback(move |_, _| flag.store(true, Ordering::Relaxed));
                self.opened += 1;
                self.current.insert((hd, lost))
            }
        };
        Ok(hd)
    }

    /// After a row, whose solvers are dropped: waits for the device, so that wgpu frees
    /// their buffers now (it frees a dropped buffer when a poll finds its last use done)
    /// rather than while the next row allocates. A failed wait means a lost device,
    /// which the next [`Self::get`] replaces.
    pub(crate) fn release(&self) {
        if let Some((hd, lost)) = &self.current {
            if hd.device.poll(wgpu::PollType::wait_indefinitely()).is_err() {
                lost.store(true, Ordering::Relaxed);
            }
        }
    }

    /// Devices opened so far.
    #[cfg(test)]
    pub(crate) fn opened(&self) -> usize {
        self.opened
    }
}
