//! `msc`: a solver for charged mass-spring systems.
//!
//! Springs are integrated implicitly and Coulomb forces explicitly (IMEX, arXiv 2403.03005).
//! The crate is layered as the architecture is:
//! - [`digest`]: sizes and SHA-256 hashes of files, for resumable batches;
//! - [`display`]: numbers in messages (no 301-digit integers, no -0);
//! - [`model`]: particles, springs, meshes and the CSR adjacency;
//! - [`config`]: integrator, solver, Coulomb and external-world settings (data only);
//! - [`physics`]: the f64 formulas (spring factor, point-charge field, external field,
//!   orbit) with their derivatives;
//! - [`scene`]: TOML scene files and `--set` overrides;
//! - [`coulomb`]: the vectorized f64 all-pairs Coulomb sum that [`cpu`] and [`ddef`] share;
//! - [`cpu`]: the f64 CPU reference;
//! - [`ddef`]: the paper's DDEF far-field approximation of the Coulomb forces (CPU);
//! - [`grad`]: gradients through the simulation and parameter fitting;
//! - [`gpu`]: WGSL kernels and the wgpu host;
//! - [`interrupt`]: SIGINT/SIGTERM as a request to stop after the current step;
//! - [`output`]: run outputs (energy CSV, PLY frames, summary JSON);
//! - [`render`]: offscreen drawing of particles and springs (PNG frames, GIFs, embedding);
//! - [`bench`]: the standard performance workloads and their measurement;
//! - [`run`]: driving one run into its folder (backend choice, stepping loop, summary);
//! - [`batch`]: sweeps and manifest batches of runs sharing one GPU device;
//! - [`plot`]: PNG plots of energy logs;
//! - [`progress`]: progress bars on a terminal;
//! - [`cli`]: the `msc` command.

pub mod batch;
pub mod bench;
pub mod cli;
pub mod config;
pub mod coulomb;
pub mod cpu;
pub mod ddef;
pub mod digest;
pub mod display;
pub mod gpu;
pub mod grad;
pub mod interrupt;
pub mod model;
pub mod output;
pub mod physics;
pub mod plot;
pub mod progress;
pub mod render;
pub mod run;
pub mod scene;
pub mod sim;
pub mod simulator;

pub use config::Config;
pub use model::{State, System};
pub use sim::{Energies, SolveStats};
pub use simulator::{SimError, Simulator};
