//! wgpu plumbing shared by the solver and the renderer: error scopes that turn wgpu's
//! errors into a caller's typed error, and blocking reads of a mapped staging buffer.
//! Adapter choice and device opening are in `adapter` (the renderer opens its device there
//! too), staging copies and the decoding of what comes back in `readback`, and a solver's
//! submissions and their counts in `submit`.

pub mod adapter;
pub(crate) mod readback;
pub(crate) mod submit;

use crate::gpu::error::GpuError;

/// Runs `f` inside out-of-memory and validation error scopes; a captured error, passed
/// through `wrap`, wins over `f`'s own result (instead of wgpu's default handler, which
/// panics).
pub fn error_scope<T, E>(
    device: &wgpu::Device,
    f: impl FnOnce() -> Result<T, E>,
    wrap: impl FnOnce(wgpu::Error) -> E,
) -> Result<T, E> {
    let oom = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let validation = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let result = f();
    let v = pollster::block_on(validation.pop());
    let o = pollster::block_on(oom.pop());
    match (v, o) {
        (Some(e), _) | (None, Some(e)) => Err(wrap(e)),
        (None, None) => result,
    }
}

/// Why [`read_mapped`] failed.
#[derive(Debug)]
pub enum MapError {
    /// Waiting for the device failed (a lost device).
    Poll(wgpu::PollError),
    /// The mapping itself failed or never completed.
    Map(String),
}

/// Maps the first `size` bytes of the MAP_READ buffer `staging` (after the work writing
/// it was submitted), waits, copies them out and unmaps the buffer again.
pub fn read_mapped(
    device: &wgpu::Device,
    staging: &wgpu::Buffer,
    size: u64,
) -> Result<Vec<u8>, MapError> {
    if size == 0 {
        return Ok(Vec::new());
    }
    let (tx, rx) = std::sync::mpsc::channel();
    staging
        .slice(..size)
        .map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
    device
        .poll(wgpu::PollType::wait_indefinitely())
        .map_err(MapError::Poll)?;
    match rx.recv() {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(MapError::Map(e.to_string())),
        Err(_) => return Err(MapError::Map("the map callback never ran".into())),
    }
    let data = staging
        .slice(..size)
        .get_mapped_range()
        .map_err(|e| MapError::Map(format!("{e:?}")))?
        .to_vec();
    staging.unmap();
    Ok(data)
}

pub(in crate::gpu) fn poll_error(e: wgpu::PollError) -> GpuError {
    GpuError::DeviceLost(format!("waiting for the GPU failed: {e}"))
}

pub(in crate::gpu) fn scope_error(e: wgpu::Error) -> GpuError {
    match e {
        wgpu::Error::OutOfMemory { .. } => GpuError::OutOfMemory(e.to_string()),
        wgpu::Error::Validation { description, .. } => GpuError::Validation(description),
        wgpu::Error::Internal { description, .. } => GpuError::Validation(description),
    }
}

/// Runs `f` inside validation and out-of-memory error scopes; a captured error wins over
/// `f`'s own result.
pub(in crate::gpu) fn scoped<T>(
    device: &wgpu::Device,
    f: impl FnOnce() -> Result<T, GpuError>,
) -> Result<T, GpuError> {
    error_scope(device, f, scope_error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::device::adapter::test_device;

    #[test]
    fn validation_errors_are_captured_as_typed_errors() {
        let Some((device, _queue)) = test_device() else {
            return;
        };
        let result: Result<(), GpuError> = scoped(&device, || {
            // MAP_READ combines only with COPY_DST: creating this buffer is invalid.
            let _ = device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("invalid on purpose"),
                size: 16,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::STORAGE,
                mapped_at_creation: false,
            });
            Ok(())
        });
        match result {
            Err(GpuError::Validation(m)) => assert!(m.contains("invalid on purpose"), "{m}"),
            other => panic!("expected a validation error, got {other:?}"),
        }
        // A kernel that does not compile is caught the same way.
        let result: Result<(), GpuError> = scoped(&device, || {
            let _ = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some("broken"),
                source: wgpu::ShaderSource::Wgsl("fn main( {".into()),
            });
            Ok(())
        });
        assert!(matches!(result, Err(GpuError::Validation(_))), "{result:?}");
    }
}
