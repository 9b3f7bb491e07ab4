//! The GPU side of a batch: how many workers run on which devices (`--devices`), each
//! worker's backend (one device opened at its first GPU run and shared by the rest), and a
//! run alone on it ([`run_fresh`]).

use super::options::{BatchOptions, Devices};
use super::plan::RunSpec;
use super::record::{RunRecord, SummaryRecord};
use super::BatchError;
use crate::config::Config;
use crate::gpu::{device_adapters, open_headless_device_on, HeadlessDevice};
use crate::gpu::{GpuError, GpuSolver, HeadlessOptions};
use crate::model::System;
use crate::run::error::one_line;
use crate::run::{backend, run_scene, Backend, BackendArg, RunError};
use crate::scene::LoadedScene;
use std::path::Path;

/// The device index of each worker: one worker on device 0 unless `--devices` asks for
/// more. The CPU backend has one worker; `auto` without a hardware adapter too (it runs
/// every run on the CPU).
pub(super) fn worker_devices(options: &BatchOptions) -> Result<Vec<usize>, BatchError> {
    if options.devices == Devices::One || options.backend == BackendArg::Cpu {
        return Ok(vec![0]);
    }
    let auto = options.backend == BackendArg::Auto;
    let found = match device_adapters(&HeadlessOptions {
        allow_software: !auto,
    }) {
        Ok(found) => found.len(),
        Err(GpuError::NoAdapter(_)) if auto => return Ok(vec![0]),
        Err(e) => return Err(BatchError::Devices(e.to_string())),
    };
    let workers = match options.devices {
        Devices::All => found,
        Devices::Count(n) => n,
        Devices::One => 1,
    };
    Ok((0..workers.max(1)).map(|w| w % found.max(1)).collect())
}

/// The backend of a batch's runs: one GPU device, opened at the first GPU run and shared by
/// every later one; `auto` falls back to the CPU as `msc run` does.
pub(super) struct SharedGpu {
    choice: BackendArg,
    /// Which of [`device_adapters`] to open.
    adapter: usize,
    pub(super) device: Option<HeadlessDevice>,
    pub(super) opened: usize,
    /// `auto` found no hardware adapter: every run uses the CPU.
    cpu_only: bool,
    /// A note to print once.
    pub(super) note: Option<String>,
}

impl SharedGpu {
    pub(super) fn new(choice: BackendArg, adapter: usize) -> Self {
        Self {
            choice,
            adapter,
            device: None,
            opened: 0,
            cpu_only: choice == BackendArg::Cpu,
            note: None,
        }
    }

    /// The worker's device, opened at its first use and kept; `None` when every run
    /// uses the CPU (`--backend cpu`, or `auto` without a hardware adapter: a note says
    /// so once).
    pub(super) fn open(&mut self) -> Result<Option<&HeadlessDevice>, RunError> {
        if self.cpu_only {
            return Ok(None);
        }
        if self.device.is_none() {
            let auto = self.choice == BackendArg::Auto;
            let options = HeadlessOptions {
                allow_software: !auto,
            };
            match open_headless_device_on(&options, self.adapter) {
                Ok(d) => {
                    self.device = Some(d);
                    self.opened += 1;
                }
                Err(e @ GpuError::NoAdapter(_)) if auto => {
                    self.cpu_only = true;
                    self.note = Some(format!(
                        "note: {e}; running the CPU reference for every run \
                         (--backend gpu also accepts software adapters)"
                    ));
                    return Ok(None);
                }
                Err(e) => return Err(RunError::Gpu(e)),
            }
        }
        Ok(self.device.as_ref())
    }

    pub(super) fn start(&mut self, system: &System, config: &Config) -> Result<Backend, RunError> {
        let auto = self.choice == BackendArg::Auto;
        let Some(d) = self.open()? else {
            return backend::start(BackendArg::Cpu, system, config);
        };
        match GpuSolver::new(&d.device, &d.queue, system, config) {
            Ok(solver) => {
                let adapter = solver.adapter().cloned();
                Ok(Backend {
                    sim: Box::new(solver),
                    adapter,
                    fallback_note: None,
                })
            }
            // As `msc run --backend auto`: what the GPU solver lacks (a feature, values
            // beyond f32), the CPU can do.
            Err(e) if auto && backend::falls_back(&e) => {
                self.note = Some(format!("note: {e}; running this one on the CPU reference"));
                backend::start(BackendArg::Cpu, system, config)
            }
            Err(e) => Err(RunError::Gpu(e)),
        }
    }
}

/// Runs `scene` alone into its (cleared) folder `dir` on the worker's backend; a failure
/// or a panic is the run's record, and a device that may be broken is not reused.
pub(super) fn run_fresh(
    spec: &RunSpec,
    scene: &LoadedScene,
    dir: &Path,
    gpu: &mut SharedGpu,
) -> RunRecord {
    // A panic inside a backend (wgpu reports some device errors by panicking) must not
    // end the batch: record it, and do not reuse a device that may be broken.
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_scene(scene, dir, false, |system, config| {
            gpu.start(system, config)
        })
    }));
    match ran {
        Ok(Ok(outcome)) => match SummaryRecord::from_summary(&outcome.summary) {
            Some(s) => RunRecord::from_summary(spec, s, false),
            None => RunRecord::failed(spec, "the run's summary could not be read back".into()),
        },
        Ok(Err(e)) => {
            if e.is_device_loss() {
                gpu.device = None;
            }
            RunRecord::failed(spec, one_line(&e))
        }
        Err(panic) => {
            gpu.device = None;
            RunRecord::failed(
                spec,
                format!("internal error (panic): {}", panic_text(&*panic)),
            )
        }
    }
}

/// What a caught panic said.
pub(super) fn panic_text(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("unknown panic")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SystemDesc;
    use glam::DVec3;

    /// A system whose Coulomb product k_c q_i q_j (9e39) f32 cannot hold ran on the CPU
    /// under `msc run --backend auto` but failed in a batch, whose `auto` fell back only on
    /// a missing feature. `auto` opens hardware adapters only, so the adapter at hand
    /// (lavapipe in CI) is put in place as one.
    #[test]
    fn auto_runs_a_system_beyond_f32_on_the_cpu_as_msc_run_does() {
        let options = HeadlessOptions {
            allow_software: true,
        };
        let device = match open_headless_device_on(&options, 0) {
            Ok(d) => d,
            Err(e) => {
                assert!(
                    std::env::var("MSC_REQUIRE_GPU").as_deref() != Ok("1"),
                    "MSC_REQUIRE_GPU=1 but no adapter: {e}"
                );
                return;
            }
        };
        let system = System::new(SystemDesc {
            positions: vec![DVec3::ZERO, DVec3::X],
            masses: vec![1.0; 2],
            charges: vec![1e15; 2],
            ..Default::default()
        })
        .expect("the f64 model holds it");
        let config = Config {
            dt: 0.01,
            ..Default::default()
        };
        let mut gpu = SharedGpu::new(BackendArg::Auto, 0);
        gpu.device = Some(device);
        let backend = match gpu.start(&system, &config) {
            Ok(b) => b,
            Err(e) => panic!("auto did not fall back to the CPU: {e}"),
        };
        assert!(backend.adapter.is_none(), "the run is on the CPU reference");
        let note = gpu.note.expect("a note says why");
        assert!(
            note.contains("f32") && note.contains("CPU reference"),
            "{note}"
        );
        let mut only = SharedGpu::new(BackendArg::Gpu, 0);
        only.device = gpu.device.take();
        assert!(
            matches!(
                only.start(&system, &config),
                Err(RunError::Gpu(
                    GpuError::F32Pair { .. } | GpuError::F32Range { .. }
                ))
            ),
            "--backend gpu still refuses it"
        );
    }
}
