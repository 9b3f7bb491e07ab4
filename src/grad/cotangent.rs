//! Cotangents of the physical parameters (per-particle charge and mass, per-spring
//! stiffness, external charges and their start positions), accumulated by the reverse
//! sweep, and their pull-back onto theta through a [`ParamSet`].

use super::params::{Param, ParamSet};
use super::GradError;
use glam::DVec3;

/// Which physical cotangents a parameter set needs (the rest are not computed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wants {
    pub charges: bool,
    pub stiffnesses: bool,
    pub masses: bool,
    pub externals: bool,
}

impl Wants {
    pub fn of(set: &ParamSet) -> Self {
        let mut w = Self::default();
        for p in set.params() {
            match p {
                Param::ChargeScale | Param::Charges => w.charges = true,
                Param::StiffnessScale | Param::Stiffnesses | Param::StiffnessBlocks { .. } => {
                    w.stiffnesses = true
                }
                Param::Masses => w.masses = true,
                Param::ExternalCharge { .. } | Param::ExternalPosition { .. } => w.externals = true,
            }
        }
        w
    }
}

/// dL/d(physical parameter): one accumulator per element, each written by one kernel
/// invocation per step (per spring, per particle), so sums never race.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Cotangent {
    pub wants: Wants,
    /// Per particle, dL/dq_i (empty unless wanted).
    pub charges: Vec<f64>,
    /// Per spring, dL/dk_k.
    pub stiffnesses: Vec<f64>,
    /// Per particle, dL/dm_i.
    pub masses: Vec<f64>,
    /// Per external charge, dL/dq_e.
    pub external_charges: Vec<f64>,
    /// Per external charge, dL/dx_e(0).
    pub external_positions: Vec<DVec3>,
}

impl Cotangent {
    /// Zero accumulators for `n` particles, `ns` springs and `ne` external charges.
    pub fn zeros(wants: Wants, n: usize, ns: usize, ne: usize) -> Self {
        let size = |on: bool, len: usize| if on { len } else { 0 };
        Self {
            wants,
            charges: vec![0.0; size(wants.charges, n)],
            stiffnesses: vec![0.0; size(wants.stiffnesses, ns)],
            masses: vec![0.0; size(wants.masses, n)],
            external_charges: vec![0.0; size(wants.externals, ne)],
            external_positions: vec![DVec3::ZERO; size(wants.externals, ne)],
        }
    }

    /// Bytes held by the accumulators.
    pub fn bytes(&self) -> usize {
        8 * (self.charges.len()
            + self.stiffnesses.len()
            + self.masses.len()
            + self.external_charges.len())
            + 24 * self.external_positions.len()
    }
}

impl ParamSet {
    /// dL/dtheta from the physical cotangents at `theta`: the transpose of
    /// [`ParamSet::directions_at`], without building one direction per component (a
    /// per-element parameter maps its accumulator one to one). [`GradError::Param`] when
    /// theta has the wrong length, or a cotangent field the parameters read is not sized
    /// for the base system (naming it).
    pub fn pullback(&self, cot: &Cotangent, theta: &[f64]) -> Result<Vec<f64>, GradError> {
        let derivatives = self.value_derivatives(theta)?;
        self.check_cotangent(cot)?;
        let b = self.base_system();
        let mut g = Vec::with_capacity(self.len());
        let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
        for p in self.params() {
            match *p {
                Param::ChargeScale => g.push(dot(&cot.charges, b.charges())),
                Param::StiffnessScale => {
                    let k: Vec<f64> = b.springs().iter().map(|s| s.stiffness).collect();
                    g.push(dot(&cot.stiffnesses, &k));
                }
                Param::StiffnessBlocks { count } => {
                    let mut blocks = vec![0.0; count];
                    for (k, s) in b.springs().iter().enumerate() {
                        blocks[self.block_of(k, count)] += cot.stiffnesses[k] * s.stiffness;
                    }
                    g.extend(blocks);
                }
                Param::Charges => g.extend_from_slice(&cot.charges),
                Param::Stiffnesses => g.extend_from_slice(&cot.stiffnesses),
                Param::Masses => g.extend_from_slice(&cot.masses),
                Param::ExternalCharge { index } => g.push(cot.external_charges[index]),
                Param::ExternalPosition { index } => {
                    g.extend(cot.external_positions[index].to_array())
                }
            }
        }
        for (gc, d) in g.iter_mut().zip(derivatives) {
            *gc *= d;
        }
        Ok(g)
    }

    /// Each cotangent field that [`Self::pullback`] reads has one entry per element of
    /// the base system and configuration.
    fn check_cotangent(&self, cot: &Cotangent) -> Result<(), GradError> {
        let n = self.base_system().len();
        let ns = self.base_system().springs().len();
        let ne = self.base_config().external_charges.len();
        for p in self.params() {
            // (field, its entries, the entries wanted, of what)
            let (field, got, expected, of) = match p {
                Param::ChargeScale | Param::Charges => {
                    ("charges", cot.charges.len(), n, "particles")
                }
                Param::StiffnessScale | Param::Stiffnesses | Param::StiffnessBlocks { .. } => {
                    ("stiffnesses", cot.stiffnesses.len(), ns, "springs")
                }
                Param::Masses => ("masses", cot.masses.len(), n, "particles"),
                Param::ExternalCharge { .. } => (
                    "external_charges",
                    cot.external_charges.len(),
                    ne,
                    "external charges",
                ),
                Param::ExternalPosition { .. } => (
                    "external_positions",
                    cot.external_positions.len(),
                    ne,
                    "external charges",
                ),
            };
            if got != expected {
                return Err(GradError::Param(format!(
                    "the cotangent's {field} has {got} entries, for {expected} {of}"
                )));
            }
        }
        Ok(())
    }
}
