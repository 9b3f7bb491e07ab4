//! A device of its own for rendering without a GPU solver (`msc render`, and `msc run
//! --render` on the CPU backend).

use super::RenderError;
pub use crate::gpu::HeadlessDevice;

/// Opens a device on the adapter the solver would pick with software adapters allowed
/// (lavapipe, llvmpipe: drawing a few thousand particles needs no fast GPU), through the
/// solver's device layer: `WGPU_BACKEND` restricts the backends and `WGPU_ADAPTER_NAME`
/// (a case-insensitive substring) the adapters, as for the solver.
pub fn headless_device() -> Result<HeadlessDevice, RenderError> {
    let options = crate::gpu::HeadlessOptions {
        allow_software: true,
    };
    crate::gpu::open_headless_device(&options).map_err(|e| match e {
        crate::gpu::GpuError::NoAdapter(why) => RenderError::NoAdapter(why),
        other => RenderError::Device(other.to_string()),
    })
}
