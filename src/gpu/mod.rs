//! The GPU solver: WGSL kernels in `shaders/` driven by a thin wgpu host.

pub mod error;
pub mod layout;
pub mod shaders;
pub mod solver;

pub use error::GpuError;
pub use solver::{list_adapters, AdapterSummary, GpuSolver, HeadlessOptions, KernelTime};
