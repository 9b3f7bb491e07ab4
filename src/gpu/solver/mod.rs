//! One solver on a device: the step program (`program`: every recording, built once,
//! linearly, with hooks for extra kernels), the forward tangents' banks and hooks
//! (`tangent`), the DDEF host stage (`ddef_stage`), a solver's parts assembled in order
//! (`assemble`) and [`gpu_solver::GpuSolver`], which runs them.

pub(crate) mod assemble;
pub(crate) mod ddef_stage;
pub mod gpu_solver;
pub(crate) mod program;
mod reads;
pub mod tangent;
