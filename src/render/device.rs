//! A device of its own for rendering without a GPU solver (`msc render`, and `msc run
//! --render` on the CPU backend).

use super::RenderError;

/// A device and queue opened for rendering, and the adapter's name.
pub struct HeadlessDevice {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub adapter_name: String,
}

/// Opens a device on the best adapter wgpu finds, software ones (lavapipe, llvmpipe)
/// included, since drawing a few thousand particles needs no fast GPU. `WGPU_BACKEND`
/// restricts the backends and `WGPU_ADAPTER_NAME` (a case-insensitive substring) the
/// adapters, as for the solver.
pub fn headless_device() -> Result<HeadlessDevice, RenderError> {
    let instance =
        wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
    let backends = wgpu::Backends::from_env().unwrap_or(wgpu::Backends::all());
    let mut adapters = pollster::block_on(instance.enumerate_adapters(backends));
    if adapters.is_empty() {
        return Err(RenderError::NoAdapter(
            " (wgpu enumerated none; install a Vulkan driver such as Mesa's lavapipe, \
             or check WGPU_BACKEND)"
                .into(),
        ));
    }
    if let Ok(wanted) = std::env::var("WGPU_ADAPTER_NAME") {
        let found: Vec<String> = adapters.iter().map(|a| a.get_info().name).collect();
        let lc = wanted.to_lowercase();
        adapters.retain(|a| a.get_info().name.to_lowercase().contains(&lc));
        if adapters.is_empty() {
            return Err(RenderError::NoAdapter(format!(
                " matching WGPU_ADAPTER_NAME={wanted:?} (found: {})",
                found.join(", ")
            )));
        }
    }
    adapters.sort_by_key(|a| {
        let info = a.get_info();
        let ty = match info.device_type {
            wgpu::DeviceType::DiscreteGpu => 0,
            wgpu::DeviceType::IntegratedGpu => 1,
            wgpu::DeviceType::VirtualGpu => 2,
            wgpu::DeviceType::Other => 3,
            wgpu::DeviceType::Cpu => 4,
        };
        let gl = u8::from(info.backend == wgpu::Backend::Gl);
        (ty, gl)
    });
    let adapter = adapters.swap_remove(0);
    let adapter_name = adapter.get_info().name;
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("msc render device"),
        ..Default::default()
    }))
    .map_err(|e| RenderError::Device(format!("{adapter_name}: {e}")))?;
    Ok(HeadlessDevice {
        device,
        queue,
        adapter_name,
    })
}
