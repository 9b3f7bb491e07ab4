//! wgpu plumbing shared by the solver and the renderer: error scopes that turn wgpu's
//! errors into a caller's typed error, and blocking reads of a mapped staging buffer.
//! (Adapter choice and device opening are in `adapter`; the renderer opens its device
//! there too.)

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
