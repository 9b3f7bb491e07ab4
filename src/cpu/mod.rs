//! The f64 CPU reference: the oracle that the GPU solver is validated against.
//! Independent of any GPU code. Function names follow the WGSL kernels they mirror.

pub mod energy;
pub mod forces;
pub mod integrators;
pub mod operator;
pub(crate) mod rows;
pub mod solvers;

pub use integrators::{parameters_fixed, CpuSimulation, UpdateError};
pub use solvers::{estimate_block_jacobi_rho, BlockLaplacian, SolverScratch};
