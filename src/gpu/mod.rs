//! The GPU solver: WGSL kernels in `shaders/` driven by a thin wgpu host.
//!
//! - Data (DESIGN section 6): structure-of-arrays, one `vec4<f32>` per particle
//!   (positions with w = 1, so the buffer draws as Float32x4; velocities; mass, scaled
//!   charge, charge and pinned flag), springs as index pairs and (k, L, c), the spring
//!   adjacency in one `u32` buffer, sliced so a warp's 32 rows read neighbouring words
//!   (`adjacency`: SELL-32, or CSR where slicing would pad too much). Charges are stored multiplied by sqrt(k_c) so
//!   pair products stay in f32 range.
//! - Per spring and step, `spring_assemble` stores W_k = s I + t n n^T (the clamped block
//!   of DESIGN section 2, t >= 0) as one vec4 (m, s), m = sqrt(t) n: W_k d = s d +
//!   (m . d) m, the 16 bytes the solver kernels read per spring, in the first half of the
//!   spring buffer, and (n, force magnitude along n) in its second half. Each row's mass
//!   (0 when pinned) sits in a spare slot of its inverse diagonal, so the solver kernels
//!   read no particle properties.
//! - Per-particle kernels gather over the adjacency (no float atomics); reductions are
//!   two-stage workgroup trees in a fixed order: two identical runs are bit-identical.
//! - A step is a recording (a typed list of ops: kernel dispatches and, with DDEF, host
//!   stages) built once at setup by one linear function and replayed; what changes
//!   between dispatches (solver iteration, Chebyshev weight, reduction slot, kernel mode)
//!   comes from a table of `Dispatch` records picked by dynamic uniform offsets, and the
//!   step counter (time) lives on the GPU. So `step(n)` and
//!   [`GpuSolver::record_steps`] record n steps without any buffer write or readback.
//! - The GPU runs a fixed number of solver iterations; the final residual, energies and
//!   the state are computed or copied only when asked for.
//!
//! The host, by layer (a module imports only from its own layer and those before it):
//! 1. `error`, `device`, `adapter`, `layout`, `adjacency`, `limits`, `range`, `shaders`:
//!    errors, wgpu plumbing, adapter choice, the WGSL struct mirrors, the adjacency's
//!    layout, size limits, f32 range checks and the kernel table;
//! 2. `params` (f32 conversions, the time step's one host copy, the `Params` uniform),
//!    `recording` (the typed ops a step replays), `readback` (staging reads, decoding);
//! 3. `buffers` (every solver buffer, by `Buf`), `ddef` (the DDEF kernels, [`GpuDdef`]);
//! 4. `engine`: pipelines, bind groups and dispatch records; replays a recording;
//! 5. `submit` (device, queue, counters; runs recordings), `profile`, `launch` (what the
//!    program records into, and the forward kernels' typed launchers);
//! 6. `program`: every recording built once, linearly, with hooks for extra kernels;
//! 7. `tangent` (the forward tangents' banks and kernels, recorded through the hooks),
//!    `ddef_stage` (the solver's DDEF host stage);
//! 8. `assemble` (a solver's parts, in order), then `solver` ([`GpuSolver`]) and
//!    `worlds` ([`GpuWorlds`]: many systems stepped together).

mod adapter;
pub mod adjacency;
mod assemble;
mod buffers;
pub mod ddef;
mod ddef_stage;
pub mod device;
mod engine;
pub mod error;
mod launch;
pub mod layout;
pub mod limits;
mod pack;
mod params;
mod profile;
mod program;
mod range;
mod readback;
mod recording;
pub mod shaders;
pub mod solver;
mod submit;
pub mod tangent;
pub mod worlds;

pub use adapter::{
    device_adapters, headless_adapter_limits, list_adapters, open_headless_device,
    open_headless_device_on, AdapterSummary, HeadlessDevice, HeadlessOptions,
};
pub use ddef::GpuDdef;
pub use error::GpuError;
pub use profile::KernelTime;
pub use solver::{GpuSolver, HostCounts};
pub use tangent::{TangentDirection, TangentVectors};
pub use worlds::{BatchKey, GpuWorlds, BATCH_BYTES, MAX_WORLDS};
