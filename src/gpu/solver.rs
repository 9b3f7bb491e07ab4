//! The GPU solver's host side. (API outline; the GPU work fills it in.)

use super::GpuError;
use crate::config::Config;
use crate::model::{State, System};
use crate::sim::{Energies, SimError, Simulator, SolveStats};

/// Options for [`GpuSolver::headless`].
#[derive(Clone, Debug, Default)]
pub struct HeadlessOptions {
    /// Accept software adapters (lavapipe, llvmpipe, WARP). `false` for `--backend auto`.
    pub allow_software: bool,
}

/// Summary of an adapter for `msc info` and `summary.json`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct AdapterSummary {
    pub name: String,
    pub backend: String,
    pub device_type: String,
    pub driver: String,
    pub driver_info: String,
    pub max_storage_buffer_binding_size: u64,
    pub max_buffer_size: u64,
    pub max_compute_workgroup_storage_size: u32,
    pub max_compute_invocations_per_workgroup: u32,
    pub max_storage_buffers_per_shader_stage: u32,
    pub timestamp_queries: bool,
}

pub struct GpuSolver {
    _private: (),
}

impl GpuSolver {
    /// Builds the solver on the caller's device and queue (embedding).
    pub fn new(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        system: &System,
        config: &Config,
    ) -> Result<Self, GpuError> {
        let _ = (device, queue, system, config);
        todo!("gpu helper")
    }
    /// Picks an adapter itself (honouring WGPU_BACKEND and WGPU_ADAPTER_NAME).
    pub fn headless(
        system: &System,
        config: &Config,
        options: &HeadlessOptions,
    ) -> Result<Self, GpuError> {
        let _ = (system, config, options);
        todo!("gpu helper")
    }
    pub fn adapter(&self) -> Option<&AdapterSummary> {
        todo!("gpu helper")
    }
}

impl Simulator for GpuSolver {
    fn step(&mut self, n: u64) -> Result<(), SimError> {
        let _ = n;
        todo!("gpu helper")
    }
    fn state(&mut self) -> Result<State, SimError> {
        todo!("gpu helper")
    }
    fn energies(&mut self) -> Result<Energies, SimError> {
        todo!("gpu helper")
    }
    fn solve_stats(&mut self) -> Result<Option<SolveStats>, SimError> {
        todo!("gpu helper")
    }
    fn backend_name(&self) -> String {
        todo!("gpu helper")
    }
}

/// Every adapter wgpu finds, for `msc info`.
pub fn list_adapters() -> Vec<AdapterSummary> {
    todo!("gpu helper")
}
