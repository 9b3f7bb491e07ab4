//! The GPU solver: WGSL kernels in `shaders/` driven by a thin wgpu host.
//!
//! - Data (DESIGN section 6): structure-of-arrays, one `vec4<f32>` per particle
//!   (positions with w = 1, so the buffer draws as Float32x4; velocities; mass, scaled
//!   charge, charge and pinned flag), springs as index pairs and (k, L, c), the CSR
//!   adjacency packed in one `u32` buffer. Charges are stored multiplied by sqrt(k_c) so
//!   pair products stay in f32 range.
//! - Per spring and step, `spring_assemble` stores n, the force magnitude along n and
//!   W_k = s I + t n n^T as (s, t): the clamped block of DESIGN section 2 written in the
//!   basis {n n^T, I - n n^T}, 5 floats instead of the 6 of a general symmetric block, and
//!   a cheaper product W_k d = s d + t n (n . d).
//! - Per-particle kernels gather over the adjacency (no float atomics); reductions are
//!   two-stage workgroup trees in a fixed order: two identical runs are bit-identical.
//! - A step is a fixed list of dispatches recorded once at setup and replayed; what
//!   changes between dispatches (solver iteration, Chebyshev weight, reduction slot,
//!   kernel mode) comes from a table of `Dispatch` records picked by dynamic uniform
//!   offsets, and the step counter (time) lives on the GPU. So `step(n)` and
//!   [`GpuSolver::record_steps`] record n steps without any buffer write or readback.
//! - The GPU runs a fixed number of solver iterations; the final residual, energies and
//!   the state are computed or copied only when asked for.

mod adapter;
mod buffers;
pub mod ddef;
pub mod device;
pub mod error;
pub mod layout;
pub mod limits;
mod plan;
mod profile;
mod range;
mod readback;
pub mod shaders;
pub mod solver;
pub mod tangent;

pub use adapter::{
    device_adapters, headless_adapter_limits, list_adapters, open_headless_device,
    open_headless_device_on, AdapterSummary, HeadlessDevice, HeadlessOptions,
};
pub use ddef::GpuDdef;
pub use error::GpuError;
pub use profile::KernelTime;
pub use solver::{GpuSolver, HostCounts};
pub use tangent::GpuTangents;
