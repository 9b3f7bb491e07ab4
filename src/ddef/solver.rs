//! DDEF inside a time stepper, one force evaluation per call:
//! - lattice grid: the plan ([`LatticePlan`]) is made at the first evaluation (m from
//!   `coulomb.samples`, resolved on the charge count) and kept; every evaluation builds its
//!   frame from the charges' box. A frame that drifted from the plan raises a flag; the
//!   driver re-plans between steps, when it reads the energies ([`DdefSolver::replan`]), as
//!   the GPU solver does with its device flag;
//! - Delaunay grid: the grid is reused for `rebuild_every` evaluations and rebuilt early
//!   when a charge leaves its box.

use super::field::{Ddef, Evaluation, Grid};
use super::lattice_field::LatticeDdef;
use super::plan::{bounds, Frame, LatticePlan, KUHN};
use super::{DdefConfig, DdefError, DdefGrid};
use glam::DVec3;
use std::sync::Arc;

/// Extra box padding (fraction of its size per side) for a Delaunay grid kept over
/// several steps, so charges drifting outward do not force a rebuild at once.
pub const REUSE_MARGIN: f64 = 0.05;

/// One evaluation's data on either grid.
#[derive(Clone, Debug)]
pub enum Evaluated {
    Lattice(LatticeDdef),
    Delaunay(Ddef),
}

impl Evaluated {
    /// Coulomb forces q_i E(x_i) into `out` (one per particle).
    pub fn forces_into(&self, eval: Evaluation, out: &mut [DVec3]) {
        match self {
            Self::Lattice(l) => l.forces_into(eval, out),
            Self::Delaunay(d) => d.forces_into(eval, out),
        }
    }
}

/// Stateful DDEF Coulomb forces for the CPU integrators.
#[derive(Clone, Debug)]
pub struct DdefSolver {
    config: DdefConfig,
    softening: f64,
    /// Lattice: the current plan, the last frame and whether a frame drifted since the
    /// last plan.
    plan: Option<LatticePlan>,
    last_frame: Option<Frame>,
    drifted: bool,
    /// Delaunay: the current grid and its evaluations.
    grid: Option<Arc<Grid>>,
    evaluations_on_grid: u32,
    /// Last tetrahedron per particle: the next walk's start.
    hints: Vec<u32>,
    rebuilds: u64,
    evaluations: u64,
}

impl DdefSolver {
    pub fn new(config: DdefConfig, softening: f64) -> Self {
        Self {
            config,
            softening,
            plan: None,
            last_frame: None,
            drifted: false,
            grid: None,
            evaluations_on_grid: 0,
            hints: Vec::new(),
            rebuilds: 0,
            evaluations: 0,
        }
    }
    pub fn config(&self) -> DdefConfig {
        self.config
    }
    /// Grids built (Delaunay) or plans made (lattice) so far.
    pub fn rebuilds(&self) -> u64 {
        self.rebuilds
    }
    /// Force evaluations so far.
    pub fn evaluations(&self) -> u64 {
        self.evaluations
    }
    /// The current Delaunay grid, if one has been built.
    pub fn grid(&self) -> Option<&Arc<Grid>> {
        self.grid.as_ref()
    }
    /// The current lattice plan, once the first evaluation made it.
    pub fn plan(&self) -> Option<&LatticePlan> {
        self.plan.as_ref()
    }
    /// Whether a lattice frame drifted from the plan since it was made.
    pub fn drifted(&self) -> bool {
        self.drifted
    }

    /// The lattice plan for (x, q): `m` resolved on the charge count, box from the
    /// charges (the GPU solver's set-up makes the same one).
    pub fn plan_for(config: DdefConfig, x: &[DVec3], q: &[f64]) -> Result<LatticePlan, DdefError> {
        let (lo, hi) = bounds((0..x.len()).filter(|&i| q[i] != 0.0).map(|i| (i, x[i])))?;
        let n = q.iter().filter(|&&c| c != 0.0).count();
        LatticePlan::new(lo, hi, config.samples.resolve(n))
    }

    /// Charges of (x, q) per lattice cell under `plan`, located in the frame of their
    /// bounding box as `plan`'s first evaluation locates them (`Frame::tet_id`'s cell
    /// order): how crowded the cells are, which the GPU's near gather is shaped by.
    pub fn cell_counts(plan: &LatticePlan, x: &[DVec3], q: &[f64]) -> Result<Vec<u32>, DdefError> {
        let charged = || (0..x.len()).filter(|&i| q.get(i).is_some_and(|&c| c != 0.0));
        let frame = {
            let (lo, hi) = bounds(charged().map(|i| (i, x[i])))?;
            plan.frame(lo, hi)
        };
        let mut counts = vec![0u32; plan.cells()];
        for i in charged() {
            let at = frame.locate(x[i]);
            counts[at.tet as usize / KUHN] += 1;
        }
        Ok(counts)
    }

    /// The f64 reference's lattice evaluation of (x, q) under [`Self::plan_for`]'s plan:
    /// the structure a solver's first evaluation builds (near sets, crowding, far field).
    pub fn reference_for(
        config: DdefConfig,
        x: &[DVec3],
        q: &[f64],
        softening: f64,
    ) -> Result<LatticeDdef, DdefError> {
        LatticeDdef::new(&Self::plan_for(config, x, q)?, x, q, softening)
    }

    /// Re-plans from the last frame when a frame drifted (between steps); true when it did.
    pub fn replan(&mut self) -> Result<bool, DdefError> {
        match (self.drifted, &self.plan, &self.last_frame) {
            (true, Some(plan), Some(frame)) => {
                self.plan = Some(plan.replanned(frame)?);
                self.drifted = false;
                self.rebuilds += 1;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Coulomb forces q_i E(x_i) by DDEF into `out` (uncharged particles get zero).
    pub fn forces_into(
        &mut self,
        x: &[DVec3],
        q: &[f64],
        out: &mut [DVec3],
    ) -> Result<(), DdefError> {
        if out.len() != x.len() {
            return Err(DdefError::LengthMismatch {
                what: "forces",
                expected: x.len(),
                got: out.len(),
            });
        }
        match self.prepare(x, q)? {
            Some(e) => e.forces_into(Evaluation::Ddef(self.config.variant), out),
            None => out.iter_mut().for_each(|f| *f = DVec3::ZERO),
        }
        Ok(())
    }

    /// One force evaluation's DDEF data for (x, q) under this solver's policy, without
    /// evaluating anything. `None` when no particle is charged. Counts as an evaluation.
    pub fn prepare(&mut self, x: &[DVec3], q: &[f64]) -> Result<Option<Evaluated>, DdefError> {
        if q.len() != x.len() {
            return Err(DdefError::LengthMismatch {
                what: "charges",
                expected: x.len(),
                got: q.len(),
            });
        }
        self.evaluations += 1;
        if q.iter().all(|&c| c == 0.0) {
            return Ok(None);
        }
        if let Some(i) = (0..x.len()).find(|&i| !x[i].is_finite()) {
            return Err(DdefError::NonFinitePosition { index: i });
        }
        match self.config.grid {
            DdefGrid::Lattice => {
                let plan = match self.plan {
                    Some(p) => p,
                    None => {
                        let p = Self::plan_for(self.config, x, q)?;
                        self.rebuilds += 1;
                        *self.plan.insert(p)
                    }
                };
                let l = LatticeDdef::new(&plan, x, q, self.softening)?;
                self.drifted |= plan.drifted(l.frame());
                self.last_frame = Some(*l.frame());
                Ok(Some(Evaluated::Lattice(l)))
            }
            DdefGrid::Delaunay => self
                .prepare_delaunay(x, q)
                .map(|d| Some(Evaluated::Delaunay(d))),
        }
    }

    fn prepare_delaunay(&mut self, x: &[DVec3], q: &[f64]) -> Result<Ddef, DdefError> {
        let charged: Vec<DVec3> = (0..x.len())
            .filter(|&i| q[i] != 0.0)
            .map(|i| x[i])
            .collect();
        let stale = match &self.grid {
            None => true,
            Some(g) => {
                self.evaluations_on_grid >= self.config.rebuild_every
                    || charged.iter().any(|&p| !g.contains(p))
            }
        };
        if stale {
            let margin = if self.config.rebuild_every > 1 {
                REUSE_MARGIN
            } else {
                0.0
            };
            let m = self.config.samples.resolve(charged.len()) as usize;
            let grid = Grid::around_with(&charged, m, margin, DdefGrid::Delaunay)?;
            self.grid = Some(Arc::new(grid));
            self.evaluations_on_grid = 0;
            self.rebuilds += 1;
            self.hints.clear();
        }
        let grid = self.grid.clone().expect("grid built above");
        let hints = (self.hints.len() == x.len()).then_some(self.hints.as_slice());
        let ddef = Ddef::on_grid(grid, x, q, self.softening, hints)?;
        self.evaluations_on_grid += 1;
        self.hints.resize(x.len(), 0);
        for (s, &i) in ddef.source_particles().iter().enumerate() {
            self.hints[i as usize] = ddef.source_tets()[s];
        }
        Ok(ddef)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DdefSamples;

    /// The counts are the reference's own: per cell, its 6 tetrahedra's sorted ranges.
    #[test]
    fn cell_counts_are_the_reference_structures_per_cell() {
        let mut s = 7u64;
        let mut r = || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 11) as f64 / (1u64 << 53) as f64
        };
        // Half of the charges crowded into a corner, one particle uncharged.
        let x: Vec<DVec3> = (0..3000)
            .map(|i| {
                let p = DVec3::new(r(), r(), r());
                if i % 2 == 0 {
                    p * 0.1
                } else {
                    p
                }
            })
            .collect();
        let mut q: Vec<f64> = (0..x.len())
            .map(|i| if i % 3 == 0 { -1.0 } else { 1.0 })
            .collect();
        q[5] = 0.0;
        let config = DdefConfig {
            samples: DdefSamples::Count(200),
            ..DdefConfig::default()
        };
        let plan = DdefSolver::plan_for(config, &x, &q).unwrap();
        let counts = DdefSolver::cell_counts(&plan, &x, &q).unwrap();
        let lattice = LatticeDdef::new(&plan, &x, &q, 0.01).unwrap();
        let st = lattice.tet_starts();
        assert_eq!(counts.len() * KUHN + 1, st.len());
        for (c, &k) in counts.iter().enumerate() {
            assert_eq!(k, st[KUHN * c + KUHN] - st[KUHN * c], "cell {c}");
        }
        assert_eq!(counts.iter().sum::<u32>(), 2999);
        assert!(*counts.iter().max().unwrap() > 4 * 2999 / counts.len() as u32);
    }
}
