//! Picking and starting the backend a run uses: the `--backend` rule (`auto` falls back to
//! the CPU reference where the GPU cannot run the scene), the size check of `--backend
//! gpu`, and the GPU solver's device and buffers that `msc run --render` draws from.

use super::RunError;
use crate::config::Config;
use crate::cpu::CpuSimulation;
use crate::gpu::{AdapterSummary, GpuError, GpuSolver, HeadlessOptions};
use crate::model::System;
use crate::scene::{Resource, SceneSize, Shortfall};
use crate::simulator::Simulator;

/// `--backend`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendArg {
    /// A hardware GPU if wgpu finds one, else the CPU reference (with a note on stderr)
    #[default]
    Auto,
    /// The wgpu solver on any adapter, software ones (lavapipe, llvmpipe) included; fails if none
    Gpu,
    /// The f64 CPU reference
    Cpu,
}

/// A started backend.
pub struct Backend {
    pub sim: Box<dyn Simulator + Send>,
    /// The GPU adapter, `None` on the CPU.
    pub adapter: Option<AdapterSummary>,
    /// Why `auto` fell back to the CPU, for a one-line note.
    pub fallback_note: Option<String>,
}

fn cpu(system: &System, config: &Config) -> Result<Box<dyn Simulator + Send>, RunError> {
    Ok(Box::new(
        CpuSimulation::new(system, config).map_err(RunError::Config)?,
    ))
}

/// The device and buffers of a GPU backend, for drawing from the solver's own buffers on
/// its device while it runs (`msc run --render`). Handles share the solver's objects.
#[derive(Clone, Debug)]
pub struct GpuHandles {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    /// [`GpuSolver::positions_buffer`].
    pub positions: wgpu::Buffer,
    /// [`GpuSolver::velocities_buffer`].
    pub velocities: wgpu::Buffer,
}

fn gpu(
    system: &System,
    config: &Config,
    allow_software: bool,
) -> Result<(Backend, GpuHandles), GpuError> {
    let solver = GpuSolver::headless(system, config, &HeadlessOptions { allow_software })?;
    let adapter = solver.adapter().cloned();
    let handles = GpuHandles {
        device: solver.device().clone(),
        queue: solver.queue().clone(),
        positions: solver.positions_buffer().clone(),
        velocities: solver.velocities_buffer().clone(),
    };
    Ok((
        Backend {
            sim: Box::new(solver),
            adapter,
            fallback_note: None,
        },
        handles,
    ))
}

/// Whether `auto` runs the CPU reference after this GPU error: no hardware adapter, a
/// feature the GPU solver lacks, or values f32 cannot hold (the f64 reference can).
pub fn falls_back(e: &GpuError) -> bool {
    matches!(
        e,
        GpuError::NoAdapter(_)
            | GpuError::Unsupported(_)
            | GpuError::F32Range { .. }
            | GpuError::F32Pair { .. }
    )
}

/// Starts the chosen backend.
pub fn start(choice: BackendArg, system: &System, config: &Config) -> Result<Backend, RunError> {
    start_with_handles(choice, system, config).map(|(b, _)| b)
}

/// Starts the chosen backend; for the GPU, also returns its device and buffers.
pub fn start_with_handles(
    choice: BackendArg,
    system: &System,
    config: &Config,
) -> Result<(Backend, Option<GpuHandles>), RunError> {
    let with = |(b, h): (Backend, GpuHandles)| (b, Some(h));
    match choice {
        BackendArg::Cpu => Ok((
            Backend {
                sim: cpu(system, config)?,
                adapter: None,
                fallback_note: None,
            },
            None,
        )),
        BackendArg::Gpu => gpu(system, config, true).map(with).map_err(RunError::Gpu),
        BackendArg::Auto => match gpu(system, config, false) {
            Ok(b) => Ok(with(b)),
            Err(e) if falls_back(&e) => Ok((
                Backend {
                    sim: cpu(system, config)?,
                    adapter: None,
                    fallback_note: Some(match e {
                        GpuError::NoAdapter(_) => format!(
                            "note: {e}; running the CPU reference instead \
                             (--backend gpu also accepts software adapters)"
                        ),
                        _ => format!("note: {e}; running the CPU reference instead"),
                    }),
                },
                None,
            )),
            Err(e) => Err(RunError::Gpu(e)),
        },
    }
}

/// The size check of `--backend gpu`: the scene's solver buffers, from its counts,
/// against the limits of the adapter the run will open. Without an adapter nothing is
/// checked here (starting the backend reports that).
pub fn gpu_size_check() -> impl FnOnce(&SceneSize, &Config) -> Result<(), Shortfall> {
    let adapter = crate::gpu::headless_adapter_limits(&HeadlessOptions {
        allow_software: true,
    });
    move |size, config| match adapter {
        Ok((name, limits)) => check_gpu_buffers(&name, &limits, size, config),
        Err(_) => Ok(()),
    }
}

/// The scene's solver buffers against the `limits` of adapter `name`.
fn check_gpu_buffers(
    name: &str,
    limits: &wgpu::Limits,
    size: &SceneSize,
    config: &Config,
) -> Result<(), Shortfall> {
    // Every particle charged: an upper bound on the Coulomb buffers.
    match crate::gpu::limits::oversized_buffer(
        limits,
        size.particles,
        size.springs,
        size.particles,
        config,
    ) {
        None => Ok(()),
        Some(b) => Err(Shortfall {
            resource: Resource::Device,
            what: format!("GPU adapter '{name}': {b}"),
            needed: b.bytes,
            available: b.limit,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A buffer past the adapter's limit is a device shortfall, not host memory: the
    /// Python package raises MemoryError for the host kind only.
    #[test]
    fn a_buffer_past_the_adapters_limit_is_a_device_shortfall() {
        let limits = wgpu::Limits {
            max_storage_buffer_binding_size: 1 << 20,
            ..wgpu::Limits::default()
        };
        let config = crate::scene::load("cloth", &[]).unwrap().config;
        let size = |particles: u64| SceneSize {
            mesh: "grid",
            key: "mesh.resolution",
            particles,
            springs: 6 * particles,
            faces: 0,
        };
        let e = check_gpu_buffers("small", &limits, &size(1 << 20), &config).unwrap_err();
        assert_eq!(e.resource, Resource::Device, "{e}");
        assert!(e.needed > e.available && e.available <= 1 << 20, "{e}");
        assert!(check_gpu_buffers("small", &limits, &size(100), &config).is_ok());
    }
}
