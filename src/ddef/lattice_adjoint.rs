//! The adjoint (VJP) of the lattice DDEF forces with the evaluation's discrete structure
//! frozen: the transpose of [`super::lattice_tangent`]'s map (docs/physics.md §9, (9.9)-(9.12)).
//! From a cotangent w of the forces, with c_i = q_i w_i the cotangent of the field at
//! source i (sorted order below):
//! - q_bar_i gets w_i . E_i (the force is q_i E_i);
//! - near pairs (i, s), s in S(tau_i), s != i: x_bar_i += k_c q_s G c_i,
//!   x_bar_s -= k_c q_s G c_i, q_bar_s += k_c phi . c_i;
//! - interpolation: x_bar_i gets the weights' transpose of (c_i . vf_v)_v, and the vertex
//!   far values the cotangents cv_v(tau) = sum_{i in tau} psi_iv c_i;
//! - `corrected` vertex terms: the same pair rule from site u_v over their sources, sign
//!   flipped (they are subtracted);
//! - sites: e_bar_j = sum of cv_v(tau) over the (tau, v) with site j; the far field's
//!   transpose gathers per source s over the sites whose far set holds it:
//!   q_bar_s += k_c sum_j phi(u_j - x_s) . e_bar_j, x_bar_s -= k_c sum_j q_s G e_bar_j.
//!
//! The per-pair rule is `physics::point_charge::field_vjp` (the transpose of the tangent's
//! `field_jvp`). The near part scatters serially in sorted order and the far part gathers
//! per source in parallel, each source written once: the result does not depend on the
//! thread count. Uncharged particles are not sources: their cotangents stay 0 (a charge
//! on one would change the structure; the gradient drivers refuse that parameter).

use super::field::Evaluation;
use super::lattice_field::{weights_vjp, LatticeDdef};
use super::stencil::{offset_cell, Stencils};
use super::DdefVariant;
use crate::model::COULOMB_K;
use crate::physics::point_charge::field_vjp;
use glam::DVec3;
use rayon::prelude::*;

impl LatticeDdef {
    /// Adds the transpose of [`LatticeDdef::forces_jvp`] applied to the force cotangent
    /// `w` (one per particle): position cotangents to `xbar` and, when given, charge
    /// cotangents to `qbar` (both one per particle). See the module doc.
    pub fn forces_vjp(
        &self,
        eval: Evaluation,
        w: &[DVec3],
        xbar: &mut [DVec3],
        qbar: Option<&mut [f64]>,
    ) {
        let n = self.order.len();
        let particle = |k: usize| self.source_particle[self.order[k] as usize] as usize;
        let c: Vec<DVec3> = (0..n).map(|k| w[particle(k)] * self.qs[k]).collect();
        let variant = eval.far_variant();
        let text = eval == Evaluation::TextNearSet;
        let sites = self.site_count();
        let mut site_bar = vec![DVec3::ZERO; if variant.is_some() { sites } else { 0 }];
        let (mut xb, mut qb) = (vec![DVec3::ZERO; n], vec![0.0; n]);
        let mut pair = |k: usize, d: DVec3, ck: DVec3, sign: f64, xb: &mut [DVec3]| {
            let (g, p) = field_vjp(d, self.qs[k], self.eps2, ck);
            xb[k] -= g * (sign * COULOMB_K);
            qb[k] += p * (sign * COULOMB_K);
            g * (sign * COULOMB_K)
        };
        for (tet, b, e) in self.occupied() {
            let near = self.near_ranges(tet);
            let vf = variant.map(|v| self.vertex_far(tet, &near, v));
            let mut cv = [DVec3::ZERO; 4];
            for k in b as usize..e as usize {
                let (p, ck) = (self.xs[k], c[k]);
                let mut own = DVec3::ZERO;
                for r in near.iter().filter(|r| !(text && r.mask != 0)) {
                    for s in (r.begin as usize..r.end as usize).filter(|&s| s != k) {
                        own += pair(s, p - self.xs[s], ck, 1.0, &mut xb);
                    }
                }
                if let Some(vf) = vf {
                    let l = &self.located[self.order[k] as usize];
                    let g = [0, 1, 2, 3].map(|v| ck.dot(vf[v]));
                    own += weights_vjp(&self.frame, g, l.kuhn as usize);
                    for (v, a) in cv.iter_mut().enumerate() {
                        *a += ck * l.weights[v];
                    }
                }
                xb[k] += own;
            }
            if variant.is_none() {
                continue;
            }
            let tet_sites = self.tet_sites(tet);
            for (v, &j) in tet_sites.iter().enumerate() {
                site_bar[j as usize] += cv[v];
            }
            if variant == Some(DdefVariant::Corrected) {
                for (v, &j) in tet_sites.iter().enumerate() {
                    let u = self.frame.site(self.frame.site_point(j));
                    for r in near.iter().filter(|r| r.mask & (1 << v) != 0) {
                        for s in r.begin as usize..r.end as usize {
                            pair(s, u - self.xs[s], cv[v], -1.0, &mut xb);
                        }
                    }
                }
            }
        }
        if variant.is_some() {
            self.far_field_vjp(&site_bar, &mut xb, &mut qb);
        }
        for k in 0..n {
            xbar[particle(k)] += xb[k];
        }
        if let Some(qbar) = qbar {
            let e = self.fields_at_sources(eval);
            for (s, &i) in self.source_particle.iter().enumerate() {
                let k = self.rank[s] as usize;
                qbar[i as usize] += w[i as usize].dot(e[s]) + qb[k];
            }
        }
    }

    /// The far field's transpose for site cotangents `site_bar`, added per sorted source:
    /// each source gathers over the sites with a nonzero cotangent whose far set holds it.
    fn far_field_vjp(&self, site_bar: &[DVec3], xb: &mut [DVec3], qb: &mut [f64]) {
        let active: Vec<u32> = (0..site_bar.len() as u32)
            .filter(|&j| site_bar[j as usize] != DVec3::ZERO)
            .collect();
        // Per tetrahedron, the active sites whose stencil holds it (increasing): its
        // sources are in M_j there, so not in that site's far set.
        let mut excluded: Vec<Vec<u32>> = vec![Vec::new(); self.start.len() - 1];
        let f = &self.frame;
        for &j in &active {
            let p = f.site_point(j);
            for e in &Stencils::get().site {
                if let Some(cell) = offset_cell(f.dims, p, e.dcell) {
                    let t = f.tet_id(cell, e.kuhn as usize) as usize;
                    if excluded[t].last() != Some(&j) {
                        excluded[t].push(j);
                    }
                }
            }
        }
        let sites: Vec<DVec3> = active.iter().map(|&j| f.site(f.site_point(j))).collect();
        let parts: Vec<(u32, Vec<(DVec3, f64)>)> = self
            .occupied()
            .into_par_iter()
            .map(|(tet, b, e)| {
                let skip = &excluded[tet as usize];
                let out = (b as usize..e as usize)
                    .map(|k| {
                        let (mut gx, mut gq) = (DVec3::ZERO, 0.0);
                        let mut next = skip.iter().peekable();
                        for (a, &j) in active.iter().enumerate() {
                            if next.peek() == Some(&&j) {
                                next.next();
                                continue;
                            }
                            let (g, p) = field_vjp(
                                sites[a] - self.xs[k],
                                self.qs[k],
                                self.eps2,
                                site_bar[j as usize],
                            );
                            gx -= g;
                            gq += p;
                        }
                        (gx * COULOMB_K, gq * COULOMB_K)
                    })
                    .collect();
                (b, out)
            })
            .collect();
        for (b, out) in parts {
            for (k, (gx, gq)) in out.into_iter().enumerate() {
                xb[b as usize + k] += gx;
                qb[b as usize + k] += gq;
            }
        }
    }
}

#[cfg(test)]
#[path = "lattice_adjoint_tests.rs"]
mod tests;
