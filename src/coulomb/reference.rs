//! The straightforward sequential Coulomb loops the fast ones are tested against.

use crate::model::COULOMB_K;
use crate::physics::point_charge;
use glam::DVec3;

/// Sequential sum over sources in index order, skipping the self pair by index.
pub fn forces(x: &[DVec3], q: &[f64], softening: f64) -> Vec<DVec3> {
    let eps2 = softening * softening;
    (0..x.len())
        .map(|i| {
            if q[i] == 0.0 {
                return DVec3::ZERO;
            }
            let mut f = DVec3::ZERO;
            for j in 0..x.len() {
                if j != i && q[j] != 0.0 {
                    f += point_charge::field(x[i] - x[j], q[j], eps2);
                }
            }
            f * (COULOMB_K * q[i])
        })
        .collect()
}

/// sum_j |term_j| per target (with k_c |q_i|): the scale of the reassociation error.
pub fn magnitudes(x: &[DVec3], q: &[f64], softening: f64) -> Vec<f64> {
    let eps2 = softening * softening;
    (0..x.len())
        .map(|i| {
            let mut s = 0.0;
            for j in 0..x.len() {
                if j != i && q[j] != 0.0 {
                    let d = x[i] - x[j];
                    let r2 = d.length_squared() + eps2;
                    s += d.length() * point_charge::factor(q[j], r2).abs();
                }
            }
            s * (COULOMB_K * q[i]).abs()
        })
        .collect()
}
