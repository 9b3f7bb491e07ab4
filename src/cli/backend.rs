//! Picking the backend a run uses.

use super::CliError;
use crate::config::Config;
use crate::cpu::CpuSimulation;
use crate::gpu::{AdapterSummary, GpuError, GpuSolver, HeadlessOptions};
use crate::model::System;
use crate::sim::Simulator;

/// `--backend`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendArg {
    /// A hardware GPU if wgpu finds one, else the CPU reference (with a note on stderr)
    #[default]
    Auto,
    /// The wgpu solver on any adapter, software ones (lavapipe, llvmpipe) included; fails if none
    Gpu,
    /// The f64 CPU reference
    Cpu,
}

/// A started backend.
pub struct Backend {
    pub sim: Box<dyn Simulator>,
    /// The GPU adapter, `None` on the CPU.
    pub adapter: Option<AdapterSummary>,
    /// Why `auto` fell back to the CPU, for a one-line note.
    pub fallback_note: Option<String>,
}

fn cpu(system: &System, config: &Config) -> Result<Box<dyn Simulator>, CliError> {
    Ok(Box::new(
        CpuSimulation::new(system, config).map_err(CliError::Config)?,
    ))
}

fn gpu(system: &System, config: &Config, allow_software: bool) -> Result<Backend, GpuError> {
    let solver = GpuSolver::headless(system, config, &HeadlessOptions { allow_software })?;
    let adapter = solver.adapter().cloned();
    Ok(Backend {
        sim: Box::new(solver),
        adapter,
        fallback_note: None,
    })
}

/// Starts the chosen backend.
pub fn start(choice: BackendArg, system: &System, config: &Config) -> Result<Backend, CliError> {
    match choice {
        BackendArg::Cpu => Ok(Backend {
            sim: cpu(system, config)?,
            adapter: None,
            fallback_note: None,
        }),
        BackendArg::Gpu => gpu(system, config, true).map_err(CliError::Gpu),
        BackendArg::Auto => match gpu(system, config, false) {
            Ok(b) => Ok(b),
            // No hardware adapter, or a feature the GPU solver lacks: the CPU can do it.
            Err(e @ (GpuError::NoAdapter(_) | GpuError::Unsupported(_))) => Ok(Backend {
                sim: cpu(system, config)?,
                adapter: None,
                fallback_note: Some(format!(
                    "note: {e}; running the CPU reference instead \
                     (--backend gpu also accepts software adapters)"
                )),
            }),
            Err(e) => Err(CliError::Gpu(e)),
        },
    }
}
