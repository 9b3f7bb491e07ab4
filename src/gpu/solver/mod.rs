//! One solver on a device: the step program (`program`: every recording, built once,
//! linearly, with hooks for extra kernels), the forward tangents' banks and hooks
//! (`tangent`), the adjoint's reversed step (`adjoint`; `adjoint_steps` for the
//! explicit integrators and local-global; `adjoint_setup` what they share) and the
//! solver that runs it
//! (`adjoint_run`), writes into a running solver (`update`), the DDEF plans and re-plans
//! (`ddef`) and what a solver reports of them (`ddef_report`), a solver's parts assembled in order (`assemble`) and
//! [`gpu_solver::GpuSolver`], which runs them.

pub mod adjoint;
pub mod adjoint_run;
mod adjoint_setup;
mod adjoint_steps;
pub(crate) mod assemble;
pub(crate) mod ddef;
mod ddef_report;
pub mod gpu_solver;
pub(crate) mod program;
pub mod reads;
pub mod tangent;
mod update;

#[cfg(test)]
mod clock_tests;
