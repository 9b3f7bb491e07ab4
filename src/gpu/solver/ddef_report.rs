//! What a [`GpuSolver`] reports of its DDEF: plans and evaluations so far, the size of its
//! device structures and the near gather's shape.

use super::ddef::{SolverDdef, DDEF_BUFFERS};
use super::gpu_solver::GpuSolver;
use crate::gpu::shader::DdefGather;

impl GpuSolver {
    /// DDEF plans made so far (`None` unless `coulomb.method = "ddef"`): the first, then
    /// one per re-plan between steps, as the CPU reference's
    /// [`crate::ddef::DdefSolver::rebuilds`].
    pub fn ddef_rebuilds(&self) -> Option<u64> {
        self.ddef.as_ref().map(|d| d.plans(0))
    }

    /// World `w`'s DDEF plans and the evaluations so far (a batch's worlds all evaluate
    /// at every step); `None` unless DDEF.
    pub(in crate::gpu) fn ddef_world_counts(&self, w: usize) -> Option<(u64, u64)> {
        self.ddef.as_ref().map(|d| (d.plans(w), d.evaluations()))
    }

    /// DDEF force evaluations recorded so far (`None` unless DDEF).
    pub fn ddef_evaluations(&self) -> Option<u64> {
        self.ddef.as_ref().map(SolverDdef::evaluations)
    }

    /// Seconds of host work per DDEF evaluation so far: none, every stage runs on the
    /// device (`None` unless DDEF). Kept for the benchmark records.
    pub fn ddef_host_seconds(&self) -> Option<f64> {
        self.ddef.as_ref().map(|_| 0.0)
    }

    /// The DDEF structures on the device: (bytes of all its buffers, bytes of the
    /// largest one, which one binding must hold); `None` unless DDEF.
    pub fn ddef_structure_bytes(&self) -> Option<(u64, u64)> {
        self.ddef.as_ref()?;
        let sizes = DDEF_BUFFERS
            .iter()
            .filter_map(|&b| self.buffers.get(b).ok().map(wgpu::Buffer::size));
        Some(sizes.fold((0, 0), |(sum, max), s| (sum + s, max.max(s))))
    }
    /// The shape `ddef_gather` runs (`None` unless DDEF): the tuning's, or with
    /// `GatherChoice::Auto` the one [`DdefGather::for_load`] picked for the cells' load
    /// at set-up; on a CPU adapter's direct path the default.
    pub fn ddef_gather(&self) -> Option<DdefGather> {
        self.ddef.as_ref()?;
        Some(self.engine.spec().ddef_gather(&self.host.device))
    }
}
