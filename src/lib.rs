//! `msc`: a solver for charged mass-spring systems.
//!
//! Springs are integrated implicitly and Coulomb forces explicitly (IMEX, arXiv 2403.03005).
//! The crate is layered (docs/architecture.md; `tests/layers.rs` checks it): a module
//! imports only from the layers listed before its own.
//! 1. [`display`] (numbers in messages), [`digest`] (SHA-256 of files), [`files`] (reading
//!    only regular files), [`interrupt`] (SIGINT/SIGTERM as a stop request), [`progress`]
//!    (progress bars), [`measures`] (what a backend reports: energies, solve stats, the
//!    step-to-time rule);
//! 2. [`model`]: particles, springs, meshes and the CSR adjacency;
//! 3. [`config`]: integrator, solver, Coulomb and world settings (data and range checks);
//! 4. [`physics`] (the f64 formulas with their derivatives), [`scene`] (TOML scene files
//!    and `--set` overrides);
//! 5. [`coulomb`]: the vectorized f64 all-pairs sum (on `physics`' point-charge factor);
//! 6. [`ddef`]: the paper's DDEF far-field approximation (CPU);
//! 7. [`cpu`]: the f64 CPU reference;
//! 8. [`gpu`]: WGSL kernels and the wgpu host;
//! 9. [`simulator`] (the trait both backends are driven through), [`output`] (energy CSV,
//!    PLY frames, summary JSON);
//! 10. [`grad`] (gradients and fits), [`render`] (offscreen drawing), [`plot`] (PNG
//!     plots), [`bench`](mod@bench) (the standard workloads and their measurement);
//! 11. [`run`]: driving one run into its folder (backend choice, stepping loop, summary);
//! 12. [`batch`]: sweeps and manifest batches, shards and Slurm;
//! 13. [`cli`]: the `msc` command.
//!
//! The library takes the caller's wgpu device and queue: they must come from the wgpu it is
//! built on, re-exported as [`msc::wgpu`](wgpu) (and its vectors' [`msc::glam`](glam)), so
//! a program that embeds it names one version of each.

#![deny(rustdoc::broken_intra_doc_links)]

pub mod batch;
pub mod bench;
pub mod cli;
pub mod config;
pub mod coulomb;
pub mod cpu;
pub mod ddef;
pub mod digest;
pub mod display;
pub mod files;
pub mod gpu;
pub mod grad;
pub mod interrupt;
pub mod measures;
pub mod model;
pub mod output;
pub mod physics;
pub mod plot;
pub mod progress;
pub mod render;
pub mod run;
pub mod scene;
pub mod simulator;

/// The glam this crate's vectors (`DVec3` positions, velocities) come from (glam 0.30).
pub use glam;
/// The wgpu this crate is built on: a caller's `Device`, `Queue` and buffers must be of
/// this version (wgpu 30).
pub use wgpu;

pub use config::Config;
pub use measures::{Energies, SolveStats};
pub use model::{State, System};
pub use simulator::{SimError, Simulator};
