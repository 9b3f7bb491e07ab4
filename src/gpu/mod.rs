//! The GPU solver: WGSL compute kernels driven by a thin wgpu host.
//!
//! - Data: structure-of-arrays, one `vec4<f32>` per particle (positions with w = 1, so
//!   the buffer draws as Float32x4; velocities; mass, scaled charge, charge and pinned
//!   flag), springs as index pairs and (k, L, c), the spring adjacency in one `u32` buffer,
//!   sliced so a warp's 32 rows read neighbouring words (`host::adjacency`: SELL-32, or
//!   CSR where slicing would pad too much). Charges are stored multiplied by sqrt(k_c) so
//!   pair products stay in f32 range.
//! - Per spring and step, `spring_assemble` stores W_k = s I + t n n^T (the clamped block,
//!   t >= 0) as one vec4 (m, s), m = sqrt(t) n: W_k d = s d + (m . d) m, the 16 bytes the
//!   solver kernels read per spring, and (n, force magnitude along n). Each row's mass
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
//!
//! The host's parts, lowest first; a file imports only from its own part and the parts
//! before it (`tests/layers.rs` checks it):
//! 1. `error`, `layout`: the error type; the `#[repr(C)]` mirrors of the WGSL structs and
//!    the constants both sides share;
//! 2. `device`: adapter choice, error scopes, mapped reads, submissions;
//! 3. `shader`: what a kernel is (its WGSL, the shared WGSL libraries it composes, its
//!    bindings and mode constants) and how its pipeline is made;
//! 4. `host`: the buffers (one table keyed by `Buf`), size limits and f32 range checks,
//!    the engine of pipelines and dispatch records, recordings and the `Recorder` the
//!    kernels' launchers record into;
//! 5. `kernels`: one file per kernel family, its WGSL in the folder of the same name, with
//!    its typed launchers; the kernel table is gathered from them;
//! 6. `solver`: the step program (every recording, built once), the tangents' and the
//!    adjoint's hooks, the DDEF plan (set up once, re-planned when its box drifts) and
//!    [`GpuSolver`];
//! 7. `batch`: many systems packed and stepped together ([`GpuWorlds`]).
//!

/// A `#[repr(u32)]` enum of kernel modes (or bits) whose values the WGSL names as
/// constants: `WGSL` lists (name, value) for `tests/shaders.rs`, which checks every one
/// against the module that declares it.
macro_rules! wgsl_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $($(#[$vmeta:meta])* $variant:ident = $wgsl:literal = $value:literal,)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u32)]
        $vis enum $name {
            $($(#[$vmeta])* $variant = $value,)*
        }

        impl $name {
            /// Every value as the WGSL constant that names it.
            pub const WGSL: &'static [(&'static str, u32)] = &[$(($wgsl, $value)),*];

            /// The value the kernel reads.
            pub const fn bits(self) -> u32 {
                self as u32
            }
        }
    };
}

pub mod error;
pub mod layout;

pub mod device;

pub mod shader;

mod host;

pub mod kernels;

mod solver;

mod batch;

pub use batch::worlds::{BatchKey, GpuWorlds, BATCH_BYTES, MAX_BATCH_WORLDS};
pub use device::adapter::{
    device_adapters, headless_adapter_limits, list_adapters, open_headless_device,
    open_headless_device_on, AdapterSummary, HeadlessDevice, HeadlessOptions,
};
pub use error::GpuError;
pub use host::profile::KernelTime;
pub use host::{adjacency, limits};
pub use shader::tuning::{
    CellLoad, DdefFar, DdefGather, GatherChoice, GatherLanes, GatherPairs, GatherStaging, Tuning,
};
pub use solver::adjoint::AdjointSetup;
pub use solver::adjoint_run::{adjoint_state_bytes, AdjointRead, GpuAdjoint};
pub use solver::gpu_solver::{GpuSolver, HostCounts, MAX_RECORDED_DISPATCHES};
pub use solver::reads::DdefStructure;
pub use solver::tangent::{TangentDirection, TangentVectors};
