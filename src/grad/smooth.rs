//! A smoothness penalty for per-element fits: the graph Laplacian form
//! R(theta) = lambda mean_{(a, b)} ((theta_a - theta_b) / s)^2 over neighbouring elements
//! of each per-element parameter: springs that share a particle (per-spring stiffness),
//! particles joined by a spring (per-particle charge and mass). s is the parameter's
//! mean |base value| (1 for a log parameter, whose differences are already relative), so
//! lambda is in the loss's unit (m^2) whatever the parameter. Scalar parameters are not
//! penalized.
//!
//! A per-element fit from positions alone is often under-determined (a spring that
//! barely stretches has almost no effect on the frames); the penalty picks, among the
//! parameters that explain the frames, the smoothest, and leaves a sharp change where the
//! frames demand one.

use super::params::{Param, ParamSet};
use crate::model::Adjacency;

/// The penalty of one parameter set (see the module documentation).
#[derive(Clone, Debug, Default)]
pub struct Smoothness {
    weight: f64,
    /// Per penalized parameter: its offset in theta, 1/s^2 and its neighbour pairs.
    terms: Vec<(usize, f64, Vec<[u32; 2]>)>,
    /// Pairs over all terms (the mean's denominator).
    count: usize,
}

impl Smoothness {
    /// The penalty with weight `weight` (lambda, m^2) over `set`'s per-element parameters.
    pub fn new(set: &ParamSet, weight: f64) -> Self {
        let system = set.base_system();
        let adjacency = Adjacency::build(system.len(), system.springs());
        let mut terms = Vec::new();
        for (a, p) in set.params().iter().enumerate() {
            let pairs = match p {
                Param::Stiffnesses => spring_pairs(&adjacency),
                Param::Charges | Param::Masses => system
                    .springs()
                    .iter()
                    .map(|s| [s.i.min(s.j), s.i.max(s.j)])
                    .collect(),
                _ => continue,
            };
            let r = set.range(a);
            let base = set.linear_initial();
            let scale = if set.is_log(a) {
                1.0
            } else {
                let mean = base[r.clone()].iter().map(|v| v.abs()).sum::<f64>() / r.len() as f64;
                if mean > 0.0 {
                    mean
                } else {
                    1.0
                }
            };
            terms.push((r.start, 1.0 / (scale * scale), pairs));
        }
        let count = terms.iter().map(|t| t.2.len()).sum();
        Self {
            weight,
            terms,
            count,
        }
    }

    /// True when the penalty is zero for every theta.
    pub fn is_off(&self) -> bool {
        self.weight == 0.0 || self.count == 0
    }

    /// Neighbour pairs penalized.
    pub fn pairs(&self) -> usize {
        self.count
    }

    /// R(theta), and its gradient added to `gradient`.
    pub fn add(&self, theta: &[f64], gradient: Option<&mut [f64]>) -> f64 {
        if self.is_off() {
            return 0.0;
        }
        let c = self.weight / self.count as f64;
        let mut value = 0.0;
        let mut g = gradient;
        for (offset, inv_s2, pairs) in &self.terms {
            for &[a, b] in pairs {
                let (a, b) = (offset + a as usize, offset + b as usize);
                let d = theta[a] - theta[b];
                value += c * inv_s2 * d * d;
                if let Some(g) = g.as_deref_mut() {
                    g[a] += 2.0 * c * inv_s2 * d;
                    g[b] -= 2.0 * c * inv_s2 * d;
                }
            }
        }
        value
    }
}

/// Pairs of springs sharing a particle, each once (a < b).
fn spring_pairs(adjacency: &Adjacency) -> Vec<[u32; 2]> {
    let mut pairs = Vec::new();
    for i in 0..adjacency.offsets.len().saturating_sub(1) {
        let row = adjacency.row(i);
        for (x, e) in row.iter().enumerate() {
            for f in &row[x + 1..] {
                let (a, b) = (e.spring.min(f.spring), e.spring.max(f.spring));
                pairs.push([a, b]);
            }
        }
    }
    // Two springs joining the same two particles would appear twice.
    pairs.sort_unstable();
    pairs.dedup();
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::grad::fixtures::sheet;

    /// Zero on constant parameters, positive otherwise, and its gradient is the central
    /// difference of its value (a quadratic: exact to rounding).
    #[test]
    fn the_penalty_and_its_gradient() {
        let system = sheet([4, 3]);
        let set = ParamSet::new(
            &system,
            &Config::default(),
            &[Param::Stiffnesses, Param::ChargeScale, Param::Masses],
        )
        .unwrap();
        let r = Smoothness::new(&set, 0.3);
        let theta = set.initial();
        assert_eq!(r.add(&theta, None), 0.0);
        let bumped: Vec<f64> = theta
            .iter()
            .enumerate()
            .map(|(k, t)| t * (1.0 + 0.1 * (k as f64 * 0.7).sin()))
            .collect();
        let mut g = vec![0.0; theta.len()];
        let v = r.add(&bumped, Some(&mut g));
        assert!(v > 0.0);
        let ks = set.range(1);
        assert_eq!(g[ks.start], 0.0, "the scalar charge scale is not penalized");
        for k in [0, 5, 17, set.range(2).start + 3] {
            let d = 1e-4 * bumped[k].abs();
            let mut p = bumped.clone();
            p[k] += d;
            let mut m = bumped.clone();
            m[k] -= d;
            let fd = (r.add(&p, None) - r.add(&m, None)) / (2.0 * d);
            assert!(
                (fd - g[k]).abs() <= 1e-8 * g[k].abs().max(1e-12),
                "{k}: {fd} {}",
                g[k]
            );
        }
        // Springs sharing a particle: a 4 x 3 grid's corner spring has neighbours.
        assert!(r.pairs() > system.springs().len());
    }
}
