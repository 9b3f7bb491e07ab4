//! `msc`: a solver for charged mass-spring systems.
//!
//! Springs are integrated implicitly and Coulomb forces explicitly (IMEX, arXiv 2403.03005).
//! The crate is layered as the architecture is:
//! - [`model`]: particles, springs, meshes and the CSR adjacency;
//! - [`config`]: integrator, solver, Coulomb and external-world settings;
//! - [`scene`]: TOML scene files and `--set` overrides;
//! - [`cpu`]: the f64 CPU reference;
//! - [`gpu`]: WGSL kernels and the wgpu host;
//! - [`output`]: run outputs (energy CSV, PLY frames, summary JSON);
//! - [`batch`]: sweeps and manifest batches of runs sharing one GPU device;
//! - [`plot`]: PNG plots of energy logs;
//! - [`cli`]: the `msc` command.

pub mod batch;
pub mod cli;
pub mod config;
pub mod cpu;
pub mod gpu;
pub mod model;
pub mod output;
pub mod plot;
pub mod scene;
pub mod sim;

pub use config::Config;
pub use model::{State, System};
pub use sim::{Energies, SimError, Simulator, SolveStats};
