//! The per-charge cotangent of the all-pairs Coulomb force in one pass (the adjoint's):
//! for a cotangent w of the forces, d(w . f)/dq_p = k_c sum_{i != p} q_i (w_i - w_p) . phi_ip
//! with phi_ip = (x_i - x_p) / (r^2 + eps^2)^(3/2): the field at p dotted with w_p plus p's
//! share of every other force. Sources are the charged particles, as structure-of-arrays
//! f64 in chunks of [`LANES`] (lane l sums sources l, l + LANES, ... in order, the lanes
//! combine in a fixed tree: the result depends on neither the thread count nor the ISA).
//! Every particle is a target (an uncharged particle's charge has a gradient too).
//!
//! Self pair: excluded by index (a padded lane contributes an exact zero). Two distinct
//! coincident particles with eps = 0: 0 / 0, a non-finite cotangent as the force is.

use crate::coulomb::LANES;
use glam::DVec3;
use rayon::prelude::*;

/// The charged particles as structure-of-arrays (position, charge, cotangent).
#[derive(Clone, Debug, Default)]
struct Sources {
    x: [Vec<f64>; 3],
    w: [Vec<f64>; 3],
    q: Vec<f64>,
    /// Particle index -> slot (u32::MAX when uncharged).
    slot: Vec<u32>,
}

impl Sources {
    fn new(x: &[DVec3], q: &[f64], w: &[DVec3]) -> Self {
        let mut s = Self::default();
        for i in 0..x.len() {
            if q[i] == 0.0 {
                s.slot.push(u32::MAX);
                continue;
            }
            s.slot.push(s.q.len() as u32);
            for k in 0..3 {
                s.x[k].push(x[i][k]);
                s.w[k].push(w[i][k]);
            }
            s.q.push(q[i]);
        }
        s
    }

    /// sum_{i != p} q_i (w_i - w_p) . phi_ip without k_c.
    fn at(&self, p: usize, xp: DVec3, wp: DVec3, eps2: f64) -> f64 {
        let m = self.q.len();
        let skip = self.slot[p] as usize;
        let mut acc = [0.0; LANES];
        let mut b = 0;
        while b < m {
            let mut xs = [[xp.x; LANES], [xp.y; LANES], [xp.z; LANES]];
            let mut ws = [[wp.x; LANES], [wp.y; LANES], [wp.z; LANES]];
            let (mut qs, mut pad) = ([0.0; LANES], [1.0; LANES]);
            for l in 0..LANES {
                let j = b + l;
                if j < m && j != skip {
                    for k in 0..3 {
                        xs[k][l] = self.x[k][j];
                        ws[k][l] = self.w[k][j];
                    }
                    qs[l] = self.q[j];
                    pad[l] = 0.0;
                }
            }
            for l in 0..LANES {
                let d = DVec3::new(xs[0][l] - xp.x, xs[1][l] - xp.y, xs[2][l] - xp.z);
                let dw = DVec3::new(ws[0][l] - wp.x, ws[1][l] - wp.y, ws[2][l] - wp.z);
                let r2 = d.length_squared() + eps2 + pad[l];
                let inv3 = 1.0 / (r2 * r2.sqrt());
                acc[l] += qs[l] * dw.dot(d) * inv3;
            }
            b += LANES;
        }
        ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))
    }
}

/// Adds k_c sum_{i != p} q_i (w_i - w_p) . phi_ip to `out[p]` for every particle p.
pub(crate) fn add_charge_cotangents(
    x: &[DVec3],
    q: &[f64],
    w: &[DVec3],
    eps2: f64,
    k_c: f64,
    out: &mut [f64],
) {
    let src = Sources::new(x, q, w);
    if src.q.is_empty() {
        return;
    }
    let kernel = |(p, o): (usize, &mut f64)| *o += k_c * src.at(p, x[p], w[p], eps2);
    if x.len() <= 256 {
        out.iter_mut().enumerate().for_each(kernel);
    } else {
        out.par_iter_mut()
            .enumerate()
            .with_min_len(32)
            .for_each(kernel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against the straightforward double loop over charged sources (reassociation only:
    /// 1e-13 of the summed magnitudes), with uncharged targets and the self pair skipped.
    #[test]
    fn matches_the_straightforward_loop() {
        let n = 37;
        let f = |i: usize, k: f64| ((i as f64 + 1.0) * k).sin();
        let x: Vec<DVec3> = (0..n)
            .map(|i| DVec3::new(f(i, 1.3), f(i, 2.1), f(i, 0.7)))
            .collect();
        let w: Vec<DVec3> = (0..n)
            .map(|i| DVec3::new(f(i, 0.3), f(i, 1.9), f(i, 3.7)))
            .collect();
        let q: Vec<f64> = (0..n)
            .map(|i| if i % 4 == 0 { 0.0 } else { f(i, 0.9) })
            .collect();
        for eps2 in [0.0, 1e-3] {
            let mut out = vec![0.0; n];
            add_charge_cotangents(&x, &q, &w, eps2, 2.0, &mut out);
            for p in 0..n {
                let (mut r, mut scale) = (0.0, 0.0);
                for i in (0..n).filter(|&i| i != p && q[i] != 0.0) {
                    let d = x[i] - x[p];
                    let r2 = d.length_squared() + eps2;
                    let t = q[i] * (w[i] - w[p]).dot(d) / (r2 * r2.sqrt());
                    r += t;
                    scale += t.abs();
                }
                assert!((out[p] - 2.0 * r).abs() <= 1e-13 * 2.0 * scale, "{p}");
            }
        }
    }
}
