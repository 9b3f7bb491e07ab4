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
    #[error("GPU device lost: {0}")]
    DeviceLost(String),
    #[error("GPU readback failed: {0}")]
    Readback(String),
    #[error("unsupported on the GPU backend: {0}")]
    Unsupported(String),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
}
