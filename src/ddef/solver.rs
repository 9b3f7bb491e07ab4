//! DDEF inside a time stepper: the grid is reused for `rebuild_every` force evaluations
//! (one per step in every integrator) and rebuilt early when a charge leaves its box.

use super::field::{Ddef, Evaluation, Grid};
use super::{DdefConfig, DdefError};
use glam::DVec3;
use std::sync::Arc;

/// Extra box padding (fraction of its size per side) for a grid kept over several steps,
/// so charges drifting outward do not force a rebuild at once.
pub const REUSE_MARGIN: f64 = 0.05;

/// Stateful DDEF Coulomb forces for the CPU integrators.
#[derive(Clone, Debug)]
pub struct DdefSolver {
    config: DdefConfig,
    softening: f64,
    grid: Option<Arc<Grid>>,
    evaluations_on_grid: u32,
    rebuilds: u64,
    evaluations: u64,
    /// Last tetrahedron per particle: the next walk's start.
    hints: Vec<u32>,
}

impl DdefSolver {
    pub fn new(config: DdefConfig, softening: f64) -> Self {
        Self {
            config,
            softening,
            grid: None,
            evaluations_on_grid: 0,
            rebuilds: 0,
            evaluations: 0,
            hints: Vec::new(),
        }
    }
    pub fn config(&self) -> DdefConfig {
        self.config
    }
    /// Tetrahedralizations built so far.
    pub fn rebuilds(&self) -> u64 {
        self.rebuilds
    }
    /// Force evaluations so far.
    pub fn evaluations(&self) -> u64 {
        self.evaluations
    }
    /// The current grid, if one has been built.
    pub fn grid(&self) -> Option<&Arc<Grid>> {
        self.grid.as_ref()
    }

    /// Coulomb forces q_i E(x_i) by DDEF into `out` (uncharged particles get zero).
    pub fn forces_into(
        &mut self,
        x: &[DVec3],
        q: &[f64],
        out: &mut [DVec3],
    ) -> Result<(), DdefError> {
        for (what, got) in [("charges", q.len()), ("forces", out.len())] {
            if got != x.len() {
                return Err(DdefError::LengthMismatch {
                    what,
                    expected: x.len(),
                    got,
                });
            }
        }
        match self.prepare(x, q)? {
            Some(ddef) => ddef.forces_into(Evaluation::Ddef(self.config.variant), out),
            None => out.iter_mut().for_each(|f| *f = DVec3::ZERO),
        }
        Ok(())
    }

    /// One force evaluation's DDEF data for (x, q) under this solver's grid policy (the
    /// grid is reused for `rebuild_every` evaluations and rebuilt when a charge leaves its
    /// box), without evaluating anything: the GPU backend runs the far field and the
    /// gathers itself. `None` when no particle is charged. Counts as an evaluation.
    pub fn prepare(&mut self, x: &[DVec3], q: &[f64]) -> Result<Option<Ddef>, DdefError> {
        if q.len() != x.len() {
            return Err(DdefError::LengthMismatch {
                what: "charges",
                expected: x.len(),
                got: q.len(),
            });
        }
        self.evaluations += 1;
        let charged: Vec<DVec3> = (0..x.len())
            .filter(|&i| q[i] != 0.0)
            .map(|i| x[i])
            .collect();
        if charged.is_empty() {
            return Ok(None);
        }
        if let Some(i) = (0..x.len()).find(|&i| !x[i].is_finite()) {
            return Err(DdefError::NonFinitePosition { index: i });
        }
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
            let grid = Grid::around_with(
                &charged,
                self.config.samples as usize,
                margin,
                self.config.grid,
            )?;
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
        Ok(Some(ddef))
    }
}
