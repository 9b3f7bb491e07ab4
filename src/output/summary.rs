//! `summary.json`: what ran, on what, how fast, and how it ended.

use super::atomic::write_atomic;
use super::OutputError;
use crate::digest::FileDigest;
use crate::gpu::AdapterSummary;
use crate::measures::Energies;
use std::path::Path;

/// The contents of `summary.json`. Times are seconds of wall clock; energies are J.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Summary {
    pub msc_version: String,
    pub scene: String,
    /// `Simulator::backend_name()`: "cpu" or the adapter's name.
    pub backend: String,
    /// The GPU adapter; `null` on the CPU reference.
    pub adapter: Option<AdapterSummary>,
    pub particles: usize,
    pub springs: usize,
    /// Particles with non-zero charge (the Coulomb sources).
    pub charged: usize,
    pub integrator: String,
    /// The linear solver's method, iteration cap and tolerance; `null` for an explicit
    /// integrator, which solves nothing (the scene's solver settings go unread).
    pub solver: Option<String>,
    pub solver_max_iterations: Option<u32>,
    pub solver_tolerance: Option<f64>,
    pub coulomb: String,
    pub dt: f64,
    /// Steps the scene asked for.
    pub steps_requested: u64,
    /// Steps done (fewer when the run stopped on non-finite energies).
    pub steps: u64,
    /// Simulated time reached, steps * dt.
    pub time: f64,
    /// Building the solver (GPU: adapter, device, pipelines, uploads).
    pub setup_seconds: f64,
    /// The stepping loop, outputs included.
    pub wall_seconds: f64,
    /// wall_seconds / steps, in ms.
    pub ms_per_step: f64,
    /// False when the run diverged (see `divergence`); it stopped there.
    pub finite: bool,
    /// Why the run was judged diverged: non-finite energies, a state beyond the f32 range
    /// of the frames, or a stage that failed on a non-finite state; `null` when finite.
    pub divergence: Option<String>,
    /// True when a signal stopped the run; its outputs are complete up to `steps`.
    pub interrupted: bool,
    pub final_energy: Energies,
    /// Last linear solve's relative residual; `null` for explicit integrators.
    pub solver_residual: Option<f64>,
    pub solver_iterations: Option<u32>,
    pub energy_rows: u64,
    pub frames: u64,
    /// DDEF runs: grid builds and force evaluations; `null` otherwise.
    pub ddef: Option<crate::measures::DdefCounts>,
    /// SHA-256 of the resolved scene (the text of `scene.toml`).
    pub scene_sha256: String,
    /// The files the scene read (scene file, OBJ mesh): absolute path, size, SHA-256.
    pub inputs: Vec<FileDigest>,
    /// What this summary vouches for, written before it: `energy.csv`, `scene.toml` and
    /// every frame, by path relative to the run folder, with size and SHA-256.
    pub outputs: Vec<FileDigest>,
}

impl Summary {
    /// Writes the summary as pretty JSON, atomically. Non-finite numbers become `null`
    /// (JSON has no NaN); `finite` says why.
    pub fn write(&self, path: &Path) -> Result<(), OutputError> {
        let mut text = serde_json::to_string_pretty(self).map_err(|source| OutputError::Json {
            path: path.to_path_buf(),
            source,
        })?;
        text.push('\n');
        write_atomic(path, text.as_bytes())
    }
}
