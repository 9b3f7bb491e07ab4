//! Errors of the GPU layer.

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GpuError {
    #[error("no GPU adapter found{0}")]
    NoAdapter(String),
    #[error("{what} needs {needed} but the adapter allows {limit}")]
    LimitExceeded {
        what: String,
        needed: u64,
        limit: u64,
    },
    #[error("wgpu validation error: {0}")]
    Validation(String),
    #[error("out of GPU memory: {0}")]
    OutOfMemory(String),
    /// Host memory a call needs and the host cannot give, found before anything runs:
    /// `needed` bytes (u64::MAX: that many or more) against the `available` ones
    /// (MemAvailable, capped at the largest allocation), or None where the allocator
    /// refused a size within them.
    #[error(
        "{what} needs {}{needed} bytes of host memory, {}",
        if *needed == u64::MAX { "at least " } else { "" },
        host_available(*available)
    )]
    HostMemory {
        what: String,
        needed: u64,
        available: Option<u64>,
    },
    #[error("GPU device lost: {0}")]
    DeviceLost(String),
    #[error("GPU readback failed: {0}")]
    Readback(String),
    /// Steps counted as done that the device has not run: recorded by `record_steps` into
    /// a caller's encoder not submitted (yet, or ever), so a state read now would carry a
    /// step count it does not hold.
    #[error(
        "{unsubmitted} of the {counted} steps counted have not run on the device: submit \
         the encoder record_steps recorded them into before reading the state (an encoder \
         dropped unsubmitted loses its steps)"
    )]
    Unsubmitted { counted: u64, unsubmitted: u64 },
    /// A kernel launch whose buffers do not fit the kernel's bindings (a host bug caught
    /// when the step is planned, before anything runs).
    #[error("kernel {kernel}: {problem}")]
    Binding {
        kernel: &'static str,
        problem: String,
    },
    #[error("unsupported on the GPU backend: {0}")]
    Unsupported(String),
    /// A batch of worlds asked for a world it does not hold, or given worlds that cannot
    /// share one batch.
    #[error("batch of worlds: {0}")]
    Worlds(String),
    /// An error of one world of a batch that has no place of its own for the world:
    /// `world` names it ("world 2 (run 'c')").
    #[error("{world}: {error}")]
    World { world: String, error: Box<GpuError> },
    /// An input (or a product the kernels form from inputs) that f32 cannot hold, found
    /// before anything is uploaded. `what` names the quantity and its index.
    #[error(
        "{what} = {value:e} is outside what the GPU's f32 arithmetic can hold ({limit}); \
         the f64 CPU reference can run it (--backend cpu)"
    )]
    F32Range {
        what: String,
        value: f64,
        limit: String,
    },
    /// Two charges (particles, or an external charge and a particle at t = 0) so close in
    /// f32 that the kernels' Coulomb term is not finite.
    #[error(
        "{what} are {} m apart at f32 precision: their Coulomb term is not finite \
         in f32 ({limit}); set coulomb.softening to a positive length, move them apart, or \
         use the f64 CPU reference (--backend cpu)",
        metres(*distance)
    )]
    F32Pair {
        what: String,
        distance: f64,
        limit: String,
    },
    /// A folder of kernel bodies (`MSC_KERNEL_FILES`, the `kernel-files` feature) that
    /// cannot be used: unreadable, empty, or a file named after no kernel.
    #[error("kernel files: {0}")]
    KernelFiles(String),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// An input to a running solver (a state, new parameters) that the model rejects.
    #[error(transparent)]
    Model(#[from] crate::model::ModelError),
    /// A DDEF plan (box, lattice dimensions, stencils) could not be made for the device.
    #[error(transparent)]
    Ddef(#[from] crate::ddef::DdefError),
}

/// A length for a message: `0`, or in exponent form.
fn metres(d: f64) -> String {
    if d == 0.0 {
        "0".into()
    } else {
        format!("{d:e}")
    }
}

/// The end of a host memory message: the bytes available, or the allocator's refusal.
fn host_available(available: Option<u64>) -> String {
    match available {
        Some(a) => format!("more than the {a} bytes available"),
        None => "which the allocator could not give".into(),
    }
}
